/* SPDX-License-Identifier: MIT */
/*
 * pipeline.c - `bpbench pipeline`: end-to-end throughput and latency
 * through producers -> workers -> sink (bp_pipeline).
 *
 * Throughput sweep: P producer threads take B free jobs from their pool,
 * stamp them and submit them with one blocking bp_pipeline_submit, for a fixed
 * time; then they stop and the last one out calls bp_pipeline_drain (not the
 * main thread: on an oversubscribed machine it may wait for a CPU, and the time
 * would include that). Throughput = jobs delivered / (first producer start
 * .. drain returned). Points: workers x B x wait strategy (one strategy for
 * worker_wait, sink_wait, producer_wait and the producers' free-job wait),
 * unordered; the ordered variant at 2 workers for every B; jobs that each do
 * --work-ns of arithmetic; the ring reference: one producer and one
 * consumer thread over a bp_ring MPMC of capacity 4096, burst B, pinned to
 * two CPUs (bpbench ring's batchpipe 1x1 point, same retry policy); and the
 * plain variant (plain.c) at every unordered (W, B, wait) point: the same
 * jobs, stage work and sink checks through the design a good engineer
 * writes by hand for this job alone, no library (not with --no-plain or
 * --sweep-only).
 *
 * Interleaving: for each run index every point runs once, in a freshly
 * shuffled order. Tables show medians over runs; ratios are medians of the
 * per-run ratios, whose two sides come from the same run index.
 *
 * The jobs, the producers' recycling pools and the verification of every
 * run are in pipeline/harness.c; the other measurements of the latency
 * phase, one per file, are listed in pipeline/experiments.h.
 *
 * Latency. The sweep's p50_us / p99_us are bp_pipeline_stats' lat_p50_ns /
 * lat_p99_ns of that run (submit -> sink, bucket upper bounds, within 25 %);
 * at saturation they measure queueing in the bounded rings, not speed. The
 * low-load and wake-up latencies are the benchmark's own, exact: clock read
 * just before bp_pipeline_submit -> clock read on entry to the sink callback,
 * one way (both are CLOCK_MONOTONIC, one clock for all CPUs). The pipeline's
 * own percentiles of those runs are printed beside them.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/chain.h"
#include "pipeline/experiments.h"

static void pb_loadavg(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "r");

	snprintf(buf, len, "?");
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

static void pb_sweep(const struct pb_opts *o, struct pb_results *r,
		     struct pb_producer *prod)
{
	uint64_t rng = o->a.seed;
	int64_t t_start = bench_now_ns();
	int order[PB_MAX_POINTS];

	/* warm-up, not recorded: code, pools, the allocator's arenas */
	if (o->warmup)
		pb_run_once(o, prod, o->producers, PB_HEAD_W, PB_HEAD_B,
			    PB_HEAD_WAIT, false, 0, o->a.quick ? 10 : 50);
	for (int run = 0; run < r->runs; run++) {
		fprintf(stderr,
			"bpbench pipeline: throughput run %d/%d: %d "
			"points ",
			run + 1, r->runs, r->npoints);
		bench_order(order, r->npoints, &rng);
		for (int k = 0; k < r->npoints; k++) {
			int i = order[k];
			const struct pb_point *p = &r->pt[i];
			struct pb_result res = {NAN, NAN, NAN, NAN, NAN};

			if (p->kind == PB_RING)
				res.mjobs = pb_ring_once(o, p->B, o->a.ms);
			else if (p->kind == PB_ALONE)
				res.mjobs =
					pb_alone_once(o, prod, p->B, o->a.ms);
			else if (p->kind == PB_PLAIN)
				res = pb_plain_once(o, prod, o->producers, p->W,
						    p->B, p->wait, o->a.ms);
			else if (p->kind == PB_LANES) {
				struct pb_opts lo = *o;

				lo.lanes = pb_lanes_of(o->producers);
				res = pb_run_once(&lo, prod, o->producers,
						  p->W, p->B, p->wait, false, 0,
						  o->a.ms);
			}
			else
				res = pb_run_once(o, prod, o->producers, p->W,
						  p->B, p->wait, p->ordered,
						  p->kind == PB_WORK ? r->iters
								     : 0,
						  o->a.ms);
			*pb_cell(r, r->mj, run, i) = res.mjobs;
			*pb_cell(r, r->p50, run, i) = res.p50_us;
			*pb_cell(r, r->p99, run, i) = res.p99_us;
			*pb_cell(r, r->cpu, run, i) = res.cpu_ns;
			*pb_cell(r, r->pcpu, run, i) = res.prod_cpu_ns;
			if (k % 8 == 7)
				fputc('.', stderr);
		}
		fprintf(stderr, " (%.1f s)\n",
			(double)(bench_now_ns() - t_start) / 1e9);
	}
}

/* ---- options ------------------------------------------------------------- */

static int pb_set_waits(struct bench_args *a, const char *arg)
{
	struct pb_opts *o = a->ctx;
	const char *names[PB_NWAITS + 1];
	char buf[256];
	int n;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	n = bench_parse_names(buf, names, PB_NWAITS);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		o->waits[i] = -1;
		for (int w = 0; w < PB_NWAITS; w++)
			if (!strcmp(names[i], pb_waits[w].name))
				o->waits[i] = w;
		if (o->waits[i] < 0)
			return -1;
		for (int j = 0; j < i; j++)
			if (o->waits[j] == o->waits[i])
				return -1;
	}
	o->nwaits = n;
	return 0;
}

/* An option with one unsigned value in [lo, hi], stored at o + off. */
#define PB_UINT_OPT(fn, field, lo, hi, flag)                                   \
	static int fn(struct bench_args *a, const char *arg)                   \
	{                                                                      \
		struct pb_opts *o = a->ctx;                                    \
                                                                               \
		if (bench_parse_uint(arg, &o->field, lo, hi))                  \
			return -1;                                             \
		flag;                                                          \
		return 0;                                                      \
	}

PB_UINT_OPT(pb_set_producers, producers, 1, PB_MAX_PRODUCERS, )
PB_UINT_OPT(pb_set_work_ns, work_ns, 0, 10000000, )
PB_UINT_OPT(pb_set_pool, pool, 2, 1u << 24, )
PB_UINT_OPT(pb_set_lat_ms, lat_ms, 1, 600000, o->lat_set = 1)
PB_UINT_OPT(pb_set_wake_samples, wake_samples, 1, PB_MAX_SAMPLES,
	    o->wake_set = 1)
PB_UINT_OPT(pb_set_wake_gap_us, wake_gap_us, 0, 10000000, )
PB_UINT_OPT(pb_set_idle_ms, idle_ms, 1, 600000, o->idle_set = 1)
PB_UINT_OPT(pb_set_inflight, inflight, 1, BP_MAX_INFLIGHT, )
PB_UINT_OPT(pb_set_ingress, ingress, 1, BP_MAX_RING, )
PB_UINT_OPT(pb_set_egress, egress, 1, BP_MAX_RING, )
PB_UINT_OPT(pb_set_lanes, lanes, 1, BP_MAX_LANES, )
PB_UINT_OPT(pb_set_stages, stages, 1, PB_MAX_STAGES, )

static int pb_set_workers(struct bench_args *a, const char *arg)
{
	struct pb_opts *o = a->ctx;

	o->nworkers = bench_parse_uints(arg, o->workers, PB_MAX_WLIST, 1,
					BP_MAX_WORKERS);
	o->workers_set = 1;
	return o->nworkers < 0 ? -1 : 0;
}

static int pb_set_batches(struct bench_args *a, const char *arg)
{
	struct pb_opts *o = a->ctx;

	o->nbatches = bench_parse_uints(arg, o->batches, PB_MAX_BATCHES, 1,
					BP_MAX_BATCH);
	o->batches_set = 1;
	return o->nbatches < 0 ? -1 : 0;
}

static int pb_set_spin_ns(struct bench_args *a, const char *arg)
{
	unsigned v;

	(void)a;
	if (bench_parse_uint(arg, &v, 0, 100000000))
		return -1;
	pb_spin_ns = (int)v;
	return 0;
}

static int pb_set_yields(struct bench_args *a, const char *arg)
{
	unsigned v;

	(void)a;
	if (bench_parse_uint(arg, &v, 0, 1000000))
		return -1;
	pb_yields = (int)v;
	return 0;
}

static int pb_set_no_latency(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->latency = 0;
	return 0;
}

static int pb_set_sweep_only(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->sweep_only = 1;
	return 0;
}

static int pb_set_ordered(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->sweep_ordered = 1;
	return 0;
}

static int pb_set_no_warmup(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->warmup = 0;
	return 0;
}

static int pb_set_no_plain(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->plain = 0;
	return 0;
}

static int pb_set_pin(struct bench_args *a, const char *arg)
{
	(void)arg;
	((struct pb_opts *)a->ctx)->pin = 1;
	return 0;
}

static const struct bench_opt pb_options[] = {
	BENCH_OPT_RUNS("runs per point (default 5; --quick: 3)"),
	BENCH_OPT_MS("producing time per run, ms (default 150; --quick: 20)"),
	{"producers", "N", pb_set_producers, "producer threads (default 2)"},
	{"workers", "LIST", pb_set_workers,
	 "worker counts (default 1,2,4,8,16)"},
	{"batches", "LIST", pb_set_batches,
	 "B: submit batch and max_batch (default 1,8,32,128)"},
	{"waits", "LIST", pb_set_waits,
	 "busy-poll,spin-sleep,sleep (default: all; one strategy\n"
	 "for worker, sink and producer waits)"},
	{"work-ns", "N", pb_set_work_ns,
	 "also run jobs that do N ns of arithmetic each, B=32,\n"
	 "spin-sleep, every worker count (default 1000; 0: off)"},
	{"pool", "N", pb_set_pool,
	 "jobs per producer, recycled (default 4096)"},
	{"lat-ms", "N", pb_set_lat_ms,
	 "low-load latency sampling per run, ms (default 100;\n--quick: 30)"},
	{"wake-samples", "N", pb_set_wake_samples,
	 "wake-up samples per run (default 100; --quick: 20)"},
	{"wake-gap-us", "N", pb_set_wake_gap_us,
	 "idle time before each wake-up job (default 5000)"},
	{"idle-ms", "N", pb_set_idle_ms,
	 "idle-CPU window (default 1000; --quick: 500)"},
	{"no-latency", NULL, pb_set_no_latency,
	 "skip latency, wake-up, idle, hand-off and the wake floor"},
	{"no-plain", NULL, pb_set_no_plain,
	 "skip the plain variant (the hand-written design with\n"
	 "no library, run at every unordered W x B x wait point) and\n"
	 "the lanes twins (the pipeline with a lane per producer,\n"
	 "run beside it at B <= 8, spin-sleep)"},
	{"stages", "N", pb_set_stages,
	 "chains of N stages (2..8), W workers each, the work split\n"
	 "evenly: against one stage doing all of it, and a serial\n"
	 "stage against a mutex section (default workers 2, batches\n"
	 "1,32); with --sweep-only, every pipeline of the sweep is\n"
	 "such a chain (for scripts/instructions.py --stages N)"},
	{"sweep-only", NULL, pb_set_sweep_only,
	 "only workers x batches x waits (unordered unless\n"
	 "--ordered): no ring, work, plain or headline points (for\n"
	 "profiling one point)"},
	{"ordered", NULL, pb_set_ordered,
	 "with --sweep-only: the sweep's pipelines deliver in order\n"
	 "(for scripts/instructions.py --ordered)"},
	{"no-warmup", NULL, pb_set_no_warmup,
	 "skip the unrecorded warm-up run (W=2, B=32) before the\n"
	 "sweep, so that a profile holds only the points asked for\n"
	 "(scripts/instructions.py)"},
	{"pin", NULL, pb_set_pin,
	 "pin producers, workers and the sink round-robin\n"
	 "(default: only the ring reference and the hand-off\n"
	 "threads are pinned)"},
	{"inflight", "N", pb_set_inflight,
	 "max_inflight per worker (default: the library's, 1024,\n"
	 "raised to B)"},
	{"ingress", "N", pb_set_ingress,
	 "ingress_capacity (default: the library's, 4096)"},
	{"egress", "N", pb_set_egress,
	 "egress_capacity (default: the library's, 1024)"},
	{"lanes", "N", pb_set_lanes,
	 "ingress_lanes of every unordered pipeline (a power of two;\n"
	 "default: the library's, one ingress ring; then no lanes\n"
	 "twins)"},
	{"spin-ns", "N", pb_set_spin_ns,
	 "spin-sleep: spin_ns of every wait (default: the library's,\n"
	 "20000)"},
	{"yields", "N", pb_set_yields,
	 "spin-sleep: yields of every wait (default: the library's, 8)"},
	BENCH_OPT_CPUS("CPUs to use for pinning (default: all allowed)"),
	BENCH_OPT_SEED("seed of the order shuffles (default 1)"),
	BENCH_OPT_QUICK("short runs, the whole thing in under 30 s"),
	BENCH_OPT_CSV("CSV on stdout: producers,workers,B,wait,ordered,run,\n"
		      "Mjobs_per_s,p50_us,p99_us,cpu_ns_per_job (p50/p99:\n"
		      "bp_pipeline_stats of the run; CPU: the process's, per "
		      "job),\nthen tagged blocks ring1x1, alone, work, "
		      "latency,\nhandoff, wakefloor, plain, lanes"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd pb_cmd = {
	.name = "pipeline",
	.about = "End-to-end throughput and latency of bp_pipeline (producers "
		 "-> workers -> sink),\ninterleaved runs, medians; the bp_ring "
		 "1x1 reference and the plain hand-written variant (no "
		 "library) in the\nsame runs; low-load and wake-up latency, "
		 "idle CPU and the cross-core hand-off\ntime.\n",
	.opts = pb_options,
	.epilog = "Progress goes to stderr. Exit status: 0 ok, 1 a run failed "
		  "its\nverification, 2 bad usage.\n",
	.max_runs = PB_MAX_RUNS,
};

static int pb_parse(int argc, char **argv, struct pb_opts *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &pb_cmd, o);
	o->a.ms = 150;
	o->producers = 2;
	o->pool = 4096;
	o->work_ns = 1000;
	o->lat_ms = 100;
	o->wake_samples = 100;
	o->wake_gap_us = 5000;
	o->idle_ms = 1000;
	o->latency = 1;
	o->plain = 1;
	o->warmup = 1;
	o->stages = 1;
	o->nworkers = bench_parse_uints("1,2,4,8,16", o->workers, PB_MAX_WLIST,
					1, BP_MAX_WORKERS);
	o->nbatches = bench_parse_uints("1,8,32,128", o->batches,
					PB_MAX_BATCHES, 1, BP_MAX_BATCH);
	o->nwaits = PB_NWAITS;
	for (int i = 0; i < PB_NWAITS; i++)
		o->waits[i] = i;

	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	for (int b = 0; b < o->nbatches; b++)
		if (o->batches[b] > o->pool / 2)
			/* a producer gathers a whole batch from its pool */
			return bench_usage_error(
				&o->a, "batch %u is more than half the pool %u",
				o->batches[b], o->pool);
	if (o->pool < 2 * PB_HEAD_B)
		return bench_usage_error(&o->a, "--pool must be >= %u",
					 2 * PB_HEAD_B);
	if (o->sweep_ordered && !o->sweep_only)
		return bench_usage_error(&o->a, "--ordered needs --sweep-only "
						"(the full run measures both)");
	if (o->stages > 1 && !o->sweep_only) {
		if (o->a.csv || o->a.json || o->a.out)
			return bench_usage_error(
				&o->a, "--stages prints its tables only (no "
				       "--csv, --json or --out)");
		if (!o->workers_set)
			o->nworkers =
				bench_parse_uints("2", o->workers, PB_MAX_WLIST,
						  1, BP_MAX_WORKERS);
		if (!o->batches_set)
			o->nbatches = bench_parse_uints("1,32", o->batches,
							PB_MAX_BATCHES, 1,
							BP_MAX_BATCH);
	}
	if (o->a.quick) {
		if (!o->a.runs_set)
			o->a.runs = 3;
		if (!o->a.ms_set)
			o->a.ms = 20;
		if (!o->lat_set)
			o->lat_ms = 30;
		if (!o->wake_set)
			o->wake_samples = 20;
		if (!o->idle_set)
			o->idle_ms = 500;
	}
	return bench_opts_ready(&o->a);
}

int bench_pipeline_main(int argc, char **argv)
{
	struct pb_opts o;
	struct pb_results *r;
	struct pb_producer *prod, *lp;
	char load0[128], load1[128];
	struct pb_report rep;
	size_t ncell, nw;
	int64_t t0;
	int rc;

	rc = pb_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	pb_loadavg(load0, sizeof(load0));
	fprintf(stderr, "bpbench pipeline: load average at start: %s\n", load0);
	t0 = bench_now_ns();

	r = bench_zalloc(sizeof(*r));
	r->runs = (int)o.a.runs;
	pb_build_points(&o, r);
	ncell = (size_t)r->runs * (size_t)r->npoints;
	nw = (size_t)r->runs * PB_NWAITS;
	r->mj = pb_nan_array(ncell);
	r->p50 = pb_nan_array(ncell);
	r->p99 = pb_nan_array(ncell);
	r->cpu = pb_nan_array(ncell);
	r->pcpu = pb_nan_array(ncell);
	r->lat_p50 = pb_nan_array(nw);
	r->lat_p99 = pb_nan_array(nw);
	r->lat_bp50 = pb_nan_array(nw);
	r->lat_bp99 = pb_nan_array(nw);
	r->same_p50 = pb_nan_array(nw);
	r->same_p99 = pb_nan_array(nw);
	r->wake_p50 = pb_nan_array(nw);
	r->wake_p99 = pb_nan_array(nw);
	r->wake_bp50 = pb_nan_array(nw);
	r->wake_bp99 = pb_nan_array(nw);
	r->idle = pb_nan_array(nw);
	r->handoff = pb_nan_array((size_t)r->runs);
	r->floor_p50 = pb_nan_array((size_t)r->runs);
	r->floor_p99 = pb_nan_array((size_t)r->runs);
	if (o.work_ns) {
		r->iters_per_ns = pb_calibrate();
		r->iters = (uint64_t)(r->iters_per_ns * o.work_ns + 0.5);
		if (r->iters == 0)
			r->iters = 1;
		fprintf(stderr,
			"bpbench pipeline: --work-ns %u = %" PRIu64
			" LCG steps (%.3f steps/ns)\n",
			o.work_ns, r->iters, r->iters_per_ns);
	}

	/* pools: allocated and touched once, recycled by every run */
	prod = bench_zalloc(sizeof(*prod) * o.producers);
	for (unsigned i = 0; i < o.producers; i++)
		pb_pool_init(&prod[i], i, o.pool, o.pool);
	if (o.stages > 1 && !o.sweep_only) {
		/* the chain experiment instead of the sweep (chain.c) */
		rc = pb_chain_main(&o, prod, r->iters);
		fprintf(stderr,
			"bpbench pipeline: done in %.1f s, every run verified "
			"(%" PRIu64 " jobs)\n",
			(double)(bench_now_ns() - t0) / 1e9, pb_jobs_verified);
		for (unsigned i = 0; i < o.producers; i++)
			pb_pool_fini(&prod[i]);
		free(prod);
		goto out;
	}
	lp = bench_zalloc(sizeof(*lp));
	pb_pool_init(lp, 0, 1, 1);
	lp->samples = bench_zalloc(sizeof(*lp->samples) * PB_MAX_SAMPLES);

	pb_sweep(&o, r, prod);
	if (o.latency)
		pb_latency_sweep(&o, r, lp, prod);
	pb_loadavg(load1, sizeof(load1));
	fprintf(stderr,
		"bpbench pipeline: done in %.1f s, every run verified (%" PRIu64
		" jobs); load average at end: %s\n",
		(double)(bench_now_ns() - t0) / 1e9, pb_jobs_verified, load1);

	rep = (struct pb_report){&o, r, load0, load1};
	rc = bench_emit(&o.a, pb_print_csv, pb_print_table, NULL, &rep);

	for (unsigned i = 0; i < o.producers; i++)
		pb_pool_fini(&prod[i]);
	pb_pool_fini(lp);
	free(prod);
	free(lp);
out:
	free(r->mj);
	free(r->p50);
	free(r->p99);
	free(r->cpu);
	free(r->pcpu);
	free(r->lat_p50);
	free(r->lat_p99);
	free(r->lat_bp50);
	free(r->lat_bp99);
	free(r->same_p50);
	free(r->same_p99);
	free(r->wake_p50);
	free(r->wake_p99);
	free(r->wake_bp50);
	free(r->wake_bp99);
	free(r->idle);
	free(r->handoff);
	free(r->floor_p50);
	free(r->floor_p99);
	free(r);
	return rc;
}
