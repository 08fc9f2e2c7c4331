/* SPDX-License-Identifier: MIT */
/*
 * ring.c - `bpbench ring`: bp_ring against other bounded MPMC queues.
 *
 * Throughput sweep: P producers and C consumers (pinned round-robin over the
 * CPUs, producers first, so that 1x1 crosses cores) move
 * batches of B items through a queue of a fixed capacity for a fixed time;
 * then producers stop and consumers drain. Runs are time-bounded, not
 * count-bounded: at 4x4 on two cores the slow queues move only thousands of
 * items per second.
 *
 * Interleaving: for each run index, for each point, every queue runs once, in
 * a freshly shuffled order. The VM's speed drifts by up to 3x within an hour,
 * so only the medians of interleaved runs, and their ratios, mean anything.
 *
 * Verification, every run: items carry (producer, sequence); each consumer
 * checks that it sees every producer's sequence numbers strictly increasing;
 * afterwards the per-producer counts and sums of sequence numbers must match
 * what was enqueued, and the queue must be empty. Any failure is fatal.
 *
 * Latency, every threaded run: producers stamp the enqueue time of every
 * 64th sequence number (one clock read per enqueue call that holds such an
 * item, the same code for every queue); the consumer that dequeues it reads
 * the clock once per dequeue call that holds one and records the difference
 * in its histogram (lab/hist.h). p50 and p99 per run, in ns, enqueue call ->
 * dequeue returned; under saturation this is mostly time spent waiting in
 * a full queue.
 *
 * Single-thread cost: one thread enqueues B items then dequeues them, over and
 * over; the time per item is the cost of the code path without any
 * cross-core traffic.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

static void ring_sweep(const struct ring_opts *o, struct ring_results *res)
{
	uint64_t rng = o->a.seed;
	int64_t t_start = bench_now_ns();

	for (int run = 0; run < (int)o->a.runs; run++) {
		fprintf(stderr, "bpbench ring: run %d/%u:", run + 1, o->a.runs);
		for (int pt = 0; pt < o->npoints; pt++) {
			unsigned P = o->points[pt][0], C = o->points[pt][1];

			for (int b = 0; b < o->nbatches; b++) {
				int order[RING_MAX_QUEUES], n = 0;

				for (int q = 0; q < o->nqueues; q++)
					if (bench_queue_fits(o->queues[q], P,
							     C))
						order[n++] = q;
				bench_shuffle(order, n, &rng);
				for (int i = 0; i < n; i++) {
					struct ring_result rr = ring_run_once(
						o, o->queues[order[i]], P, C,
						o->batches[b], o->a.ms);
					size_t k = ring_index(res, run, pt, b,
							      order[i]);

					res->mitems[k] = rr.mitems;
					res->p50[k] = rr.p50_ns;
					res->p99[k] = rr.p99_ns;
				}
				fprintf(stderr, " %ux%u/%u", P, C,
					o->batches[b]);
			}
		}
		fprintf(stderr, "  (%.1f s)\n",
			(double)(bench_now_ns() - t_start) / 1e9);
	}
	if (!o->single)
		return;
	for (int run = 0; run < (int)o->a.runs; run++) {
		fprintf(stderr, "bpbench ring: single-thread %d/%u\n", run + 1,
			o->a.runs);
		for (int b = 0; b < o->nbatches; b++) {
			int order[RING_MAX_QUEUES];

			bench_order(order, o->nqueues, &rng);
			for (int i = 0; i < o->nqueues; i++)
				*ring_single_cell(res, run, b, order[i]) =
					ring_single_once(o, o->queues[order[i]],
							 o->batches[b],
							 o->single_ms);
		}
	}
}

/* ---- options ------------------------------------------------------------ */

static int ring_set_points(struct bench_args *a, const char *arg)
{
	struct ring_opts *o = a->ctx;

	o->npoints = bench_parse_pairs(arg, o->points, RING_MAX_POINTS, 1,
				       RING_MAX_SIDE);
	return o->npoints < 0 ? -1 : 0;
}

static int ring_set_batches(struct bench_args *a, const char *arg)
{
	struct ring_opts *o = a->ctx;

	o->nbatches = bench_parse_uints(arg, o->batches, RING_MAX_BATCHES, 1,
					1u << 30);
	return o->nbatches < 0 ? -1 : 0;
}

static int ring_set_queues(struct bench_args *a, const char *arg)
{
	struct ring_opts *o = a->ctx;
	static char queue_names[4096];
	const char *names[RING_MAX_QUEUES];

	if (strlen(arg) >= sizeof(queue_names))
		return -1;
	strcpy(queue_names, arg);
	o->nqueues = bench_parse_names(queue_names, names, RING_MAX_QUEUES);
	if (o->nqueues < 0)
		return -1;
	for (int i = 0; i < o->nqueues; i++) {
		o->queues[i] = bench_queue_find(names[i]);
		if (!o->queues[i]) {
			fprintf(stderr, "%s: unknown queue '%s'\n", a->prog,
				names[i]);
			return -2;
		}
		for (int j = 0; j < i; j++)
			if (o->queues[j] == o->queues[i]) {
				fprintf(stderr, "%s: queue '%s' given twice\n",
					a->prog, names[i]);
				return -2;
			}
	}
	return 0;
}

static int ring_set_capacity(struct bench_args *a, const char *arg)
{
	struct ring_opts *o = a->ctx;
	unsigned v;

	if (bench_parse_uint(arg, &v, 2, 1u << 24) || (v & (v - 1)))
		return -1;
	o->capacity = v;
	return 0;
}

static int ring_set_no_single(struct bench_args *a, const char *arg)
{
	struct ring_opts *o = a->ctx;

	(void)arg;
	o->single = 0;
	return 0;
}

/* --queues lists the queues there are: filled in at start */
static char ring_queues_help[512];

static const struct bench_opt ring_options[] = {
	BENCH_OPT_RUNS("runs per point (default 5; --quick: 3)"),
	BENCH_OPT_MS("producing time per run, ms (default 100; --quick: 20)"),
	{"points", "LIST", ring_set_points,
	 "producers x consumers, e.g. \"1x1,2x2,4x4\" (default)"},
	{"batches", "LIST", ring_set_batches,
	 "batch sizes, e.g. \"1,8,32,256\" (default)"},
	{"queues", "LIST", ring_set_queues, ring_queues_help},
	BENCH_OPT_CPUS("CPUs to pin threads on, e.g. \"0,1\" or \"0-3\"\n"
		       "(default: every CPU this process may use)"),
	{"capacity", "N", ring_set_capacity,
	 "queue capacity, a power of two, 2..2^24 (default 4096)"},
	BENCH_OPT_SEED("seed of the queue-order shuffle (default 1)"),
	{"no-single", NULL, ring_set_no_single,
	 "skip the single-thread cost table"},
	BENCH_OPT_QUICK("short runs, for a check in well under 30 s"),
	BENCH_OPT_CSV("CSV on stdout: queue,P,C,B,run,Mitems_per_s,p50_ns,"
		      "p99_ns,\nthen single,queue,B,ns_per_item"),
	BENCH_OPT_JSON("JSON on stdout"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd ring_cmd = {
	.name = "ring",
	.about = "Throughput of bp_ring against other bounded queues, "
		 "interleaved runs,\nmedians; then the single-thread cost "
		 "per item.\n",
	.opts = ring_options,
	.epilog = "Progress goes to stderr. Exit status: 0 ok, 1 a run "
		  "failed its\nverification, 2 bad usage.\n",
	.max_runs = RING_MAX_RUNS,
};

static int ring_parse(int argc, char **argv, struct ring_opts *o)
{
	size_t off;
	int rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &ring_cmd, o);
	o->capacity = 4096;
	o->single = 1;
	o->npoints = bench_parse_pairs("1x1,2x2,4x4", o->points,
				       RING_MAX_POINTS, 1, 4);
	o->nbatches = bench_parse_uints("1,8,32,256", o->batches,
					RING_MAX_BATCHES, 1, 256);
	for (int i = 0; bench_queues[i]; i++)
		o->queues[o->nqueues++] = bench_queues[i];
	off = (size_t)snprintf(ring_queues_help, sizeof(ring_queues_help),
			       "queues to run (default: all of them):\n");
	for (int i = 0; bench_queues[i] && off < sizeof(ring_queues_help); i++)
		off += (size_t)snprintf(ring_queues_help + off,
					sizeof(ring_queues_help) - off, "%s%s",
					i ? "," : "", bench_queues[i]->name);

	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	for (int b = 0; b < o->nbatches; b++)
		if (o->batches[b] > o->capacity / 2)
			/* the single-thread loop needs a whole batch in the
			 * queue, and ck_ring keeps one slot free */
			return bench_usage_error(
				&o->a,
				"batch %u is more than half the capacity %u",
				o->batches[b], o->capacity);
	if (o->a.quick) {
		if (!o->a.runs_set)
			o->a.runs = 3;
		if (!o->a.ms_set)
			o->a.ms = 20;
	}
	o->single_ms = o->a.ms / 4 ? o->a.ms / 4 : 1;
	return bench_opts_ready(&o->a);
}

int bench_ring_main(int argc, char **argv)
{
	struct ring_opts o;
	struct ring_results res;
	struct ring_report rep = {&o, &res};
	size_t ncell, nsingle;
	int64_t t0;
	int rc;

	rc = ring_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;

	res.runs = (int)o.a.runs;
	res.npoints = o.npoints;
	res.nbatches = o.nbatches;
	res.nqueues = o.nqueues;
	ncell = (size_t)o.a.runs * (size_t)o.npoints * (size_t)o.nbatches *
		(size_t)o.nqueues;
	nsingle = (size_t)o.a.runs * (size_t)o.nbatches * (size_t)o.nqueues;
	res.mitems = bench_zalloc(sizeof(double) * ncell);
	res.p50 = bench_zalloc(sizeof(double) * ncell);
	res.p99 = bench_zalloc(sizeof(double) * ncell);
	res.single = bench_zalloc(sizeof(double) * nsingle);
	for (size_t i = 0; i < ncell; i++)
		res.mitems[i] = res.p50[i] = res.p99[i] = NAN;
	for (size_t i = 0; i < nsingle; i++)
		res.single[i] = NAN;

	t0 = bench_now_ns();
	ring_sweep(&o, &res);
	fprintf(stderr,
		"bpbench ring: done in %.1f s, every run verified (%" PRIu64
		" items through the threaded runs)\n",
		(double)(bench_now_ns() - t0) / 1e9, ring_items_verified);

	rc = bench_emit(&o.a, ring_print_csv, ring_print_table, ring_print_json,
			&rep);
	free(res.mitems);
	free(res.p50);
	free(res.p99);
	free(res.single);
	return rc;
}
