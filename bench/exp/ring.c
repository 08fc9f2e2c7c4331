/* SPDX-License-Identifier: MIT */
/*
 * ring_bench.c - `bpbench ring`: bp_ring against other bounded MPMC queues.
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
 * Single-thread cost: one thread enqueues B items then dequeues them, over and
 * over; the time per item is the cost of the code path without any
 * cross-core traffic.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bpbench.h"

#define BENCH_CMD "bpbench ring"
#include "queues.h"

#define RING_MAX_POINTS	 16
#define RING_MAX_BATCHES 16
#define RING_MAX_QUEUES	 16
#define RING_MAX_RUNS	 1000
/* the producer id lives in 8 bits of each item */
#define RING_MAX_SIDE 255

struct ring_opts {
	unsigned runs, ms, capacity, single_ms;
	unsigned points[RING_MAX_POINTS][2];
	int npoints;
	unsigned batches[RING_MAX_BATCHES];
	int nbatches;
	const struct bench_queue_ops *queues[RING_MAX_QUEUES];
	int nqueues;
	int cpus[BENCH_MAX_CPUS];
	int ncpus;
	int csv, json, quick, single;
	uint64_t seed;
};

/* ---- items -------------------------------------------------------------- */

/* Bit 0 clear (bp_ring's rule), producer id in bits 1-8, sequence above. */
static inline void *ring_item(uint64_t seq, unsigned pid)
{
	return (void *)(uintptr_t)(((seq << 8) | pid) << 1);
}

static inline unsigned ring_item_pid(uintptr_t v)
{
	return (unsigned)(v >> 1) & 0xff;
}

static inline int64_t ring_item_seq(uintptr_t v)
{
	return (int64_t)(v >> 9);
}

/* Sum of 0..n-1 modulo 2^64, the same arithmetic the consumers' sums use. */
static uint64_t ring_seq_sum(uint64_t n)
{
	if (n == 0)
		return 0;
	return n % 2 ? n * ((n - 1) / 2) : (n / 2) * (n - 1);
}

/* ---- one timed run ------------------------------------------------------ */

struct ring_run;

struct ring_producer {
	struct ring_run *run;
	unsigned id;
	pthread_t thread;
	uint64_t enqueued;
	int64_t t_start;
	int err;
} __attribute__((aligned(BENCH_CACHELINE)));

struct ring_consumer {
	struct ring_run *run;
	unsigned id;
	pthread_t thread;
	uint64_t dequeued;
	int64_t t_start, t_end;
	int err;	 /* a negative errno returned by the queue */
	uint64_t bad;	 /* items that failed the order check */
	int64_t *last;	 /* [P] last sequence seen per producer, -1: none */
	uint64_t *count; /* [P] items seen per producer */
	uint64_t *sum;	 /* [P] sum of their sequence numbers */
} __attribute__((aligned(BENCH_CACHELINE)));

struct ring_run {
	const struct bench_queue_ops *ops;
	void *q;
	unsigned P, C, B;
	pthread_barrier_t start;
	/* written once per run, read in every loop: keep them off hot lines */
	atomic_int stop __attribute__((aligned(BENCH_CACHELINE)));
	atomic_int producers_done;
	atomic_uint producers_left;
	struct ring_producer *prod;
	struct ring_consumer *cons;
};

static void *ring_producer_main(void *arg)
{
	struct ring_producer *self = arg;
	struct ring_run *run = self->run;
	const struct bench_queue_ops *ops = run->ops;
	void **items = bench_zalloc(sizeof(void *) * run->B);
	unsigned B = run->B, off = 0;
	uint64_t seq = 0;
	struct bench_backoff bo = {0};

	for (unsigned i = 0; i < B; i++)
		items[i] = ring_item(seq++, self->id);
	pthread_barrier_wait(&run->start);
	self->t_start = bench_now_ns();
	/* relaxed: stop is a time signal; the join publishes results */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		int r = ops->enqueue(run->q, self->id, items + off, B - off);

		if (r < 0) {
			self->err = r;
			break;
		}
		if (r == 0) {
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		off += (unsigned)r;
		if (off == B) {
			for (unsigned i = 0; i < B; i++)
				items[i] = ring_item(seq++, self->id);
			off = 0;
		}
	}
	/* queues keep order, so exactly sequences 0 .. enqueued-1 went in */
	self->enqueued = seq - (B - off);
	free(items);
	/*
	 * The last producer out tells the consumers, rather than the main
	 * thread after its joins: on an oversubscribed machine the main thread
	 * may wait for a CPU, and the consumers' end time would include that.
	 * acq_rel: collects every producer's enqueues (release side of each
	 * decrement) so that the release store below publishes all of them.
	 */
	if (atomic_fetch_sub_explicit(&run->producers_left, 1,
				      memory_order_acq_rel) == 1) {
		atomic_store_explicit(&run->producers_done, 1,
				      memory_order_release);
		if (ops->close)
			ops->close(run->q);
	}
	return NULL;
}

static void ring_report_bad(struct ring_consumer *self, uintptr_t v)
{
	struct ring_run *run = self->run;
	unsigned pid = ring_item_pid(v);

	if (self->bad++)
		return; /* the first one tells the story */
	fprintf(stderr,
		"bpbench ring: VERIFY FAILED: %s %ux%u B=%u: consumer %u got "
		"item %#" PRIxPTR " (producer %u, seq %" PRId64 ")",
		run->ops->name, run->P, run->C, run->B, self->id, v, pid,
		ring_item_seq(v));
	if ((v & 1) == 0 && pid < run->P)
		fprintf(stderr, " after seq %" PRId64 " from that producer\n",
			self->last[pid]);
	else
		fprintf(stderr, ": not an item any producer made\n");
}

static void *ring_consumer_main(void *arg)
{
	struct ring_consumer *self = arg;
	struct ring_run *run = self->run;
	const struct bench_queue_ops *ops = run->ops;
	void **items = bench_zalloc(sizeof(void *) * run->B);
	unsigned P = run->P;
	int64_t *last = self->last;
	uint64_t *count = self->count, *sum = self->sum;
	struct bench_backoff bo = {0};

	pthread_barrier_wait(&run->start);
	self->t_start = bench_now_ns();
	for (;;) {
		/* acquire: pairs with the last producer's release, so an
		 * empty dequeue after it means empty for good */
		int done = atomic_load_explicit(&run->producers_done,
						memory_order_acquire);
		int m = ops->dequeue(run->q, self->id, items, run->B);

		if (m < 0) {
			self->err = m;
			break;
		}
		if (m == 0) {
			if (done)
				break;
			bench_backoff_wait(&bo);
			continue;
		}
		bench_backoff_reset(&bo);
		self->dequeued += (unsigned)m;
		for (int i = 0; i < m; i++) {
			uintptr_t v = (uintptr_t)items[i];
			unsigned pid = ring_item_pid(v);
			int64_t seq = ring_item_seq(v);

			if ((v & 1) || pid >= P || seq <= last[pid]) {
				ring_report_bad(self, v);
				continue;
			}
			last[pid] = seq;
			count[pid]++;
			sum[pid] += (uint64_t)seq;
		}
	}
	self->t_end = bench_now_ns();
	free(items);
	return NULL;
}

static void ring_spawn(pthread_t *t, void *(*fn)(void *), void *arg, int cpu)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	rc = bench_attr_pin(&attr, cpu);
	if (rc)
		bench_die("bpbench ring: cannot pin to CPU %d: %s\n", cpu,
			  strerror(rc));
	rc = pthread_create(t, &attr, fn, arg);
	if (rc)
		bench_die("bpbench ring: pthread_create: %s\n", strerror(rc));
	pthread_attr_destroy(&attr);
}

/* After a run: every item accounted for, in order, and nothing left over. */
/* Items checked by every ring_verify so far (reported at the end). */
static uint64_t ring_items_verified;

static void ring_verify(struct ring_run *run)
{
	const char *name = run->ops->name;
	uint64_t bad = 0, left = 0;
	void *tmp[64];
	int m;

	for (unsigned c = 0; c < run->C; c++) {
		if (run->cons[c].err < 0)
			bench_die("bpbench ring: %s dequeue failed: %s\n", name,
				  strerror(-run->cons[c].err));
		bad += run->cons[c].bad;
	}
	for (unsigned p = 0; p < run->P; p++)
		if (run->prod[p].err < 0)
			bench_die("bpbench ring: %s enqueue failed: %s\n", name,
				  strerror(-run->prod[p].err));
	while ((m = run->ops->dequeue(run->q, 0, tmp, 64)) > 0)
		left += (unsigned)m;
	if (m < 0)
		bench_die("bpbench ring: %s dequeue after the run failed: %s\n",
			  name, strerror(-m));
	if (left)
		fprintf(stderr,
			"bpbench ring: VERIFY FAILED: %s %ux%u B=%u: %" PRIu64
			" items still in the queue after every consumer saw it "
			"empty\n",
			name, run->P, run->C, run->B, left);
	for (unsigned p = 0; p < run->P; p++) {
		uint64_t n = 0, s = 0, want = run->prod[p].enqueued;

		for (unsigned c = 0; c < run->C; c++) {
			n += run->cons[c].count[p];
			s += run->cons[c].sum[p];
		}
		if (n != want || s != ring_seq_sum(want)) {
			fprintf(stderr,
				"bpbench ring: VERIFY FAILED: %s %ux%u B=%u: "
				"producer %u "
				"enqueued %" PRIu64 " items (seq sum %" PRIu64
				"), consumers got %" PRIu64 " (seq sum %" PRIu64
				")\n",
				name, run->P, run->C, run->B, p, want,
				ring_seq_sum(want), n, s);
			bad++;
		}
		ring_items_verified += want;
	}
	if (bad || left)
		exit(1);
}

/* One run of one queue at one point; returns millions of items per second. */
static double ring_run_once(const struct ring_opts *o,
			    const struct bench_queue_ops *ops, unsigned P,
			    unsigned C, unsigned B, unsigned ms)
{
	struct ring_run run = {.ops = ops, .P = P, .C = C, .B = B};
	unsigned nthreads = 0;
	uint64_t total = 0;
	int64_t t0, t_end = 0;

	atomic_init(&run.stop, 0);
	run.q = ops->create(o->capacity, P, C, &run.stop);
	if (!run.q)
		bench_die("bpbench ring: cannot create %s\n", ops->name);
	atomic_init(&run.producers_done, 0);
	atomic_init(&run.producers_left, P);
	run.prod = bench_zalloc(sizeof(*run.prod) * P);
	run.cons = bench_zalloc(sizeof(*run.cons) * C);
	pthread_barrier_init(&run.start, NULL, P + C + 1);

	/*
	 * Producers, then consumers, round-robin over the CPUs: at 1x1 on two
	 * CPUs the items cross cores (the case a ring exists for), and at 2x2
	 * each CPU runs one producer and one consumer rather than two of a
	 * kind that would preempt each other in the middle of an operation.
	 */
	for (unsigned i = 0; i < P; i++) {
		run.prod[i].run = &run;
		run.prod[i].id = i;
		ring_spawn(&run.prod[i].thread, ring_producer_main,
			   &run.prod[i],
			   o->cpus[nthreads++ % (unsigned)o->ncpus]);
	}
	for (unsigned i = 0; i < C; i++) {
		struct ring_consumer *c = &run.cons[i];

		c->run = &run;
		c->id = i;
		c->last = bench_zalloc(sizeof(*c->last) * P);
		c->count = bench_zalloc(sizeof(*c->count) * P);
		c->sum = bench_zalloc(sizeof(*c->sum) * P);
		for (unsigned p = 0; p < P; p++)
			c->last[p] = -1;
		ring_spawn(&c->thread, ring_consumer_main, c,
			   o->cpus[nthreads++ % (unsigned)o->ncpus]);
	}

	pthread_barrier_wait(&run.start);
	t0 = bench_now_ns();
	bench_sleep_ns((int64_t)ms * 1000000);
	atomic_store_explicit(&run.stop, 1, memory_order_relaxed);
	for (unsigned p = 0; p < P; p++) {
		pthread_join(run.prod[p].thread, NULL);
		/* the clock starts with the first thread to run, which need
		 * not be this one */
		if (run.prod[p].t_start < t0)
			t0 = run.prod[p].t_start;
	}
	for (unsigned c = 0; c < C; c++) {
		pthread_join(run.cons[c].thread, NULL);
		total += run.cons[c].dequeued;
		if (run.cons[c].t_start < t0)
			t0 = run.cons[c].t_start;
		if (run.cons[c].t_end > t_end)
			t_end = run.cons[c].t_end;
	}

	ring_verify(&run);

	for (unsigned c = 0; c < C; c++) {
		free(run.cons[c].last);
		free(run.cons[c].count);
		free(run.cons[c].sum);
	}
	pthread_barrier_destroy(&run.start);
	free(run.prod);
	free(run.cons);
	ops->destroy(run.q);
	/* items per microsecond = millions per second */
	return (double)total * 1e3 / (double)(t_end - t0);
}

/* ---- single-thread cost ------------------------------------------------- */

static void ring_single_round(const struct bench_queue_ops *ops, void *q,
			      void **items, void **out, unsigned B,
			      uint64_t *seq)
{
	unsigned off;

	for (unsigned i = 0; i < B; i++)
		items[i] = ring_item(*seq + i, 0);
	for (off = 0; off < B;) {
		int r = ops->enqueue(q, 0, items + off, B - off);

		if (r <= 0)
			bench_die("bpbench ring: %s single-thread enqueue of "
				  "%u into an "
				  "empty queue returned %d\n",
				  ops->name, B - off, r);
		off += (unsigned)r;
	}
	for (off = 0; off < B;) {
		int r = ops->dequeue(q, 0, out + off, B - off);

		if (r <= 0)
			bench_die("bpbench ring: %s single-thread dequeue "
				  "returned %d with "
				  "%u items in the queue\n",
				  ops->name, r, B - off);
		off += (unsigned)r;
	}
	for (unsigned i = 0; i < B; i++)
		if (out[i] != ring_item(*seq + i, 0))
			bench_die("bpbench ring: VERIFY FAILED: %s "
				  "single-thread B=%u: "
				  "got %p, expected %p\n",
				  ops->name, B, out[i], ring_item(*seq + i, 0));
	*seq += B;
}

/* Nanoseconds per item (one enqueue plus one dequeue) over about `ms`. */
static double ring_single_once(const struct ring_opts *o,
			       const struct bench_queue_ops *ops, unsigned B,
			       unsigned ms)
{
	void *q = ops->create(o->capacity, 1, 1, NULL);
	void **items = bench_zalloc(sizeof(void *) * B);
	void **out = bench_zalloc(sizeof(void *) * B);
	unsigned rounds = B >= 4096 ? 1 : 4096 / B; /* between clock reads */
	uint64_t seq = 0, items_done = 0;
	int64_t t0, t;

	if (!q)
		bench_die("bpbench ring: cannot create %s\n", ops->name);
	/* warm the slots and the code once around the ring */
	for (unsigned i = 0; i < rounds; i++)
		ring_single_round(ops, q, items, out, B, &seq);
	t0 = bench_now_ns();
	do {
		for (unsigned i = 0; i < rounds; i++)
			ring_single_round(ops, q, items, out, B, &seq);
		items_done += (uint64_t)rounds * B;
		t = bench_now_ns();
	} while (t - t0 < (int64_t)ms * 1000000);
	free(items);
	free(out);
	ops->destroy(q);
	return (double)(t - t0) / (double)items_done;
}

/* ---- the sweep ---------------------------------------------------------- */

struct ring_results {
	int runs, npoints, nbatches, nqueues;
	double *mitems; /* [run][point][batch][queue], NaN: not run */
	double *single; /* [run][batch][queue] ns per item */
};

static double *ring_cell(const struct ring_results *r, int run, int pt, int b,
			 int q)
{
	return &r->mitems[((run * r->npoints + pt) * r->nbatches + b) *
				  r->nqueues +
			  q];
}

static double *ring_single_cell(const struct ring_results *r, int run, int b,
				int q)
{
	return &r->single[(run * r->nbatches + b) * r->nqueues + q];
}

/* Median over runs of one (point, batch, queue); also min and max. */
static double ring_median(const struct ring_results *r, int pt, int b, int q,
			  double *min, double *max)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = *ring_cell(r, run, pt, b, q);
	if (min)
		*min = bench_min(v, r->runs);
	if (max)
		*max = bench_max(v, r->runs);
	return bench_median(v, r->runs);
}

static double ring_single_median(const struct ring_results *r, int b, int q)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = *ring_single_cell(r, run, b, q);
	return bench_median(v, r->runs);
}

static void ring_sweep(const struct ring_opts *o, struct ring_results *res)
{
	uint64_t rng = o->seed;
	int64_t t_start = bench_now_ns();

	for (int run = 0; run < (int)o->runs; run++) {
		fprintf(stderr, "bpbench ring: run %d/%u:", run + 1, o->runs);
		for (int pt = 0; pt < o->npoints; pt++) {
			unsigned P = o->points[pt][0], C = o->points[pt][1];

			for (int b = 0; b < o->nbatches; b++) {
				int order[RING_MAX_QUEUES], n = 0;

				for (int q = 0; q < o->nqueues; q++)
					if (bench_queue_fits(o->queues[q], P,
							     C))
						order[n++] = q;
				bench_shuffle(order, n, &rng);
				for (int i = 0; i < n; i++)
					*ring_cell(res, run, pt, b, order[i]) =
						ring_run_once(
							o, o->queues[order[i]],
							P, C, o->batches[b],
							o->ms);
				fprintf(stderr, " %ux%u/%u", P, C,
					o->batches[b]);
			}
		}
		fprintf(stderr, "  (%.1f s)\n",
			(double)(bench_now_ns() - t_start) / 1e9);
	}
	if (!o->single)
		return;
	for (int run = 0; run < (int)o->runs; run++) {
		fprintf(stderr, "bpbench ring: single-thread %d/%u\n", run + 1,
			o->runs);
		for (int b = 0; b < o->nbatches; b++) {
			int order[RING_MAX_QUEUES];

			for (int q = 0; q < o->nqueues; q++)
				order[q] = q;
			bench_shuffle(order, o->nqueues, &rng);
			for (int i = 0; i < o->nqueues; i++)
				*ring_single_cell(res, run, b, order[i]) =
					ring_single_once(o, o->queues[order[i]],
							 o->batches[b],
							 o->single_ms);
		}
	}
}

/* ---- reports ------------------------------------------------------------ */

/* batchpipe (default mode) over the best non-batchpipe queue at one point. */
static double ring_ratio(const struct ring_opts *o,
			 const struct ring_results *r, int pt, int b,
			 int *best_q)
{
	double bp = NAN, best = NAN;

	*best_q = -1;
	for (int q = 0; q < o->nqueues; q++) {
		double m = ring_median(r, pt, b, q, NULL, NULL);

		if (isnan(m))
			continue;
		if (o->queues[q] == &bench_q_batchpipe)
			bp = m;
		else if (!bench_queue_is_batchpipe(o->queues[q]) &&
			 (isnan(best) || m > best)) {
			best = m;
			*best_q = q;
		}
	}
	return isnan(bp) || isnan(best) || best <= 0 ? NAN : bp / best;
}

static int ring_find_queue(const struct ring_opts *o,
			   const struct bench_queue_ops *ops)
{
	for (int q = 0; q < o->nqueues; q++)
		if (o->queues[q] == ops)
			return q;
	return -1;
}

static int ring_find_point(const struct ring_opts *o, unsigned P, unsigned C)
{
	for (int pt = 0; pt < o->npoints; pt++)
		if (o->points[pt][0] == P && o->points[pt][1] == C)
			return pt;
	return -1;
}

static int ring_col_width(const struct bench_queue_ops *ops)
{
	int w = (int)strlen(ops->name);

	return (w < 8 ? 8 : w) + 2;
}

static void ring_print_table(const struct ring_opts *o,
			     const struct ring_results *r)
{
	char cpus[256];
	int bpq = ring_find_queue(o, &bench_q_batchpipe);
	double log_sum = 0;
	int nratio = 0, p11;

	bench_cpus_format(o->cpus, o->ncpus, cpus, sizeof(cpus));
	printf("bpbench ring: capacity %u, %u runs x %u ms per point and "
	       "queue, "
	       "CPUs %s, seed %" PRIu64 "\n",
	       o->capacity, o->runs, o->ms, cpus, o->seed);
	printf("median throughput, Mitems/s (ratio = batchpipe / best other "
	       "queue)\n\n");
	printf("%-5s %4s", "PxC", "B");
	for (int q = 0; q < o->nqueues; q++)
		printf("%*s", ring_col_width(o->queues[q]), o->queues[q]->name);
	if (bpq >= 0)
		printf("  %-10s %6s  %s", "best other", "ratio",
		       "batchpipe min-max");
	printf("\n");
	for (int pt = 0; pt < o->npoints; pt++) {
		for (int b = 0; b < o->nbatches; b++) {
			char pc[16];

			snprintf(pc, sizeof(pc), "%ux%u", o->points[pt][0],
				 o->points[pt][1]);
			printf("%-5s %4u", pc, o->batches[b]);
			for (int q = 0; q < o->nqueues; q++) {
				double m = ring_median(r, pt, b, q, NULL, NULL);

				if (isnan(m))
					printf("%*s",
					       ring_col_width(o->queues[q]),
					       "-");
				else
					printf("%*.2f",
					       ring_col_width(o->queues[q]), m);
			}
			if (bpq >= 0) {
				int best_q;
				double ratio = ring_ratio(o, r, pt, b, &best_q),
				       lo, hi;

				ring_median(r, pt, b, bpq, &lo, &hi);
				printf("  %-10s %6.2f  %.1f-%.1f",
				       best_q >= 0 ? o->queues[best_q]->name
						   : "-",
				       ratio, lo, hi);
				if (!isnan(ratio) && ratio > 0) {
					log_sum += log(ratio);
					nratio++;
				}
			}
			printf("\n");
		}
	}
	if (nratio)
		printf("\ngeometric mean of batchpipe / best other over %d "
		       "points: %.2f\n",
		       nratio, exp(log_sum / nratio));

	p11 = ring_find_point(o, 1, 1);
	if (bpq >= 0 && p11 >= 0 && o->npoints > 1) {
		printf("\nbatchpipe scaling, median at PxC / median at 1x1:\n");
		for (int pt = 0; pt < o->npoints; pt++) {
			if (pt == p11)
				continue;
			printf("  %ux%u:", o->points[pt][0], o->points[pt][1]);
			for (int b = 0; b < o->nbatches; b++) {
				double base =
					ring_median(r, p11, b, bpq, NULL, NULL);
				double m =
					ring_median(r, pt, b, bpq, NULL, NULL);

				printf("  B=%u %.2f", o->batches[b], m / base);
			}
			printf("\n");
		}
	}

	if (!o->single)
		return;
	printf("\nsingle thread, enqueue B then dequeue B: ns per item "
	       "(median of %u, %u ms each)\n",
	       o->runs, o->single_ms);
	printf("%4s", "B");
	for (int q = 0; q < o->nqueues; q++)
		printf("%*s", ring_col_width(o->queues[q]), o->queues[q]->name);
	printf("\n");
	for (int b = 0; b < o->nbatches; b++) {
		printf("%4u", o->batches[b]);
		for (int q = 0; q < o->nqueues; q++)
			printf("%*.2f", ring_col_width(o->queues[q]),
			       ring_single_median(r, b, q));
		printf("\n");
	}
}

static void ring_print_csv(const struct ring_opts *o,
			   const struct ring_results *r)
{
	printf("queue,P,C,B,run,Mitems_per_s\n");
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++)
				for (int run = 0; run < r->runs; run++) {
					double v = *ring_cell(r, run, pt, b, q);

					if (!isnan(v))
						printf("%s,%u,%u,%u,%d,%.3f\n",
						       o->queues[q]->name,
						       o->points[pt][0],
						       o->points[pt][1],
						       o->batches[b], run, v);
				}
	if (!o->single)
		return;
	printf("single,queue,B,ns_per_item\n");
	for (int b = 0; b < o->nbatches; b++)
		for (int q = 0; q < o->nqueues; q++)
			printf("single,%s,%u,%.3f\n", o->queues[q]->name,
			       o->batches[b], ring_single_median(r, b, q));
}

static void ring_print_json(const struct ring_opts *o,
			    const struct ring_results *r)
{
	const char *sep = "";
	double log_sum = 0;
	int nratio = 0;

	printf("{\"benchmark\":\"ring\",\"capacity\":%u,\"ms\":%u,\"runs\":%u,"
	       "\"seed\":%" PRIu64 ",\"cpus\":[",
	       o->capacity, o->ms, o->runs, o->seed);
	for (int i = 0; i < o->ncpus; i++)
		printf("%s%d", i ? "," : "", o->cpus[i]);
	printf("],\n\"results\":[");
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++) {
				double med =
					ring_median(r, pt, b, q, NULL, NULL);

				if (isnan(med))
					continue;
				printf("%s\n "
				       "{\"queue\":\"%s\",\"P\":%u,\"C\":%u,"
				       "\"B\":%u,"
				       "\"median_mitems_per_s\":%.3f,\"runs\":"
				       "[",
				       sep, o->queues[q]->name,
				       o->points[pt][0], o->points[pt][1],
				       o->batches[b], med);
				for (int run = 0; run < r->runs; run++)
					printf("%s%.3f", run ? "," : "",
					       *ring_cell(r, run, pt, b, q));
				printf("]}");
				sep = ",";
			}
	printf("],\n\"ratios\":[");
	sep = "";
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++) {
			int best_q;
			double ratio = ring_ratio(o, r, pt, b, &best_q);

			if (isnan(ratio))
				continue;
			printf("%s\n "
			       "{\"P\":%u,\"C\":%u,\"B\":%u,\"best_other\":\"%"
			       "s\","
			       "\"ratio\":%.4f}",
			       sep, o->points[pt][0], o->points[pt][1],
			       o->batches[b], o->queues[best_q]->name, ratio);
			sep = ",";
			if (ratio > 0) {
				log_sum += log(ratio);
				nratio++;
			}
		}
	printf("],\n\"geomean_ratio\":");
	if (nratio)
		printf("%.4f", exp(log_sum / nratio));
	else
		printf("null");
	printf(",\n\"single\":[");
	sep = "";
	if (o->single)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++) {
				printf("%s\n "
				       "{\"queue\":\"%s\",\"B\":%u,\"ns_per_"
				       "item\":%.3f}",
				       sep, o->queues[q]->name, o->batches[b],
				       ring_single_median(r, b, q));
				sep = ",";
			}
	printf("]}\n");
}

/* ---- options ------------------------------------------------------------ */

static void ring_usage(FILE *f)
{
	fprintf(f, "usage: bpbench ring [options]\n"
		   "Throughput of bp_ring against other bounded queues, "
		   "interleaved runs,\n"
		   "medians; then the single-thread cost per item.\n"
		   "  --runs N         runs per point (default 5; --quick: 3)\n"
		   "  --ms N           producing time per run, ms (default "
		   "100; --quick: 20)\n"
		   "  --points LIST    producers x consumers, e.g. "
		   "\"1x1,2x2,4x4\" (default)\n"
		   "  --batches LIST   batch sizes, e.g. \"1,8,32,256\" "
		   "(default)\n"
		   "  --queues LIST    queues to run (default: all of them):\n"
		   "                   ");
	for (int i = 0; bench_queues[i]; i++)
		fprintf(f, "%s%s", i ? "," : "", bench_queues[i]->name);
	fprintf(f,
		"\n"
		"  --cpus LIST      CPUs to pin threads on, e.g. \"0,1\" or "
		"\"0-3\"\n"
		"                   (default: every CPU this process may use)\n"
		"  --capacity N     queue capacity, a power of two (default "
		"4096)\n"
		"  --seed N         seed of the queue-order shuffle (default "
		"1)\n"
		"  --no-single      skip the single-thread cost table\n"
		"  --quick          short runs, for a check in well under 30 "
		"s\n"
		"  --csv            CSV on stdout: "
		"queue,P,C,B,run,Mitems_per_s, then\n"
		"                   single,queue,B,ns_per_item\n"
		"  --json           JSON on stdout\n"
		"  --help           this text\n"
		"Progress goes to stderr. Exit status: 0 ok, 1 a run failed "
		"its\n"
		"verification, 2 bad usage.\n");
}

static int ring_parse(int argc, char **argv, struct ring_opts *o)
{
	static const struct option longopts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"ms", required_argument, NULL, 'm'},
		{"points", required_argument, NULL, 'p'},
		{"batches", required_argument, NULL, 'b'},
		{"queues", required_argument, NULL, 'q'},
		{"cpus", required_argument, NULL, 'c'},
		{"capacity", required_argument, NULL, 'k'},
		{"seed", required_argument, NULL, 's'},
		{"no-single", no_argument, NULL, 'n'},
		{"quick", no_argument, NULL, 'Q'},
		{"csv", no_argument, NULL, 'C'},
		{"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int runs_set = 0, ms_set = 0, opt;
	static char queue_names[4096];
	const char *names[RING_MAX_QUEUES];

	memset(o, 0, sizeof(*o));
	o->runs = 5;
	o->ms = 100;
	o->capacity = 4096;
	o->seed = 1;
	o->single = 1;
	o->npoints = bench_parse_pairs("1x1,2x2,4x4", o->points,
				       RING_MAX_POINTS, 1, 4);
	o->nbatches = bench_parse_uints("1,8,32,256", o->batches,
					RING_MAX_BATCHES, 1, 256);
	for (int i = 0; bench_queues[i]; i++)
		o->queues[o->nqueues++] = bench_queues[i];

	opterr = 0; /* our own message, then the usage */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		unsigned v;

		switch (opt) {
		case 'r':
			if (bench_parse_uint(optarg, &o->runs, 1,
					     RING_MAX_RUNS))
				goto bad_value;
			runs_set = 1;
			break;
		case 'm':
			if (bench_parse_uint(optarg, &o->ms, 1, 600000))
				goto bad_value;
			ms_set = 1;
			break;
		case 'p':
			o->npoints = bench_parse_pairs(optarg, o->points,
						       RING_MAX_POINTS, 1,
						       RING_MAX_SIDE);
			if (o->npoints < 0)
				goto bad_value;
			break;
		case 'b':
			o->nbatches = bench_parse_uints(optarg, o->batches,
							RING_MAX_BATCHES, 1,
							1u << 30);
			if (o->nbatches < 0)
				goto bad_value;
			break;
		case 'q':
			if (strlen(optarg) >= sizeof(queue_names))
				goto bad_value;
			strcpy(queue_names, optarg);
			o->nqueues = bench_parse_names(queue_names, names,
						       RING_MAX_QUEUES);
			if (o->nqueues < 0)
				goto bad_value;
			for (int i = 0; i < o->nqueues; i++) {
				o->queues[i] = bench_queue_find(names[i]);
				if (!o->queues[i]) {
					fprintf(stderr,
						"bpbench ring: unknown queue "
						"'%s'\n",
						names[i]);
					goto usage;
				}
				for (int j = 0; j < i; j++)
					if (o->queues[j] == o->queues[i]) {
						fprintf(stderr,
							"bpbench ring: queue "
							"'%s' given twice\n",
							names[i]);
						goto usage;
					}
			}
			break;
		case 'c':
			o->ncpus = bench_cpus_parse(optarg, o->cpus,
						    BENCH_MAX_CPUS);
			if (o->ncpus < 0) {
				fprintf(stderr,
					"bpbench ring: bad --cpus '%s' "
					"(syntax, or a CPU "
					"this process may not use)\n",
					optarg);
				goto usage;
			}
			break;
		case 'k':
			if (bench_parse_uint(optarg, &v, 2, 1u << 24) ||
			    (v & (v - 1)))
				goto bad_value;
			o->capacity = v;
			break;
		case 's':
			if (bench_parse_uint(optarg, &v, 0, UINT32_MAX))
				goto bad_value;
			o->seed = v;
			break;
		case 'n':
			o->single = 0;
			break;
		case 'Q':
			o->quick = 1;
			break;
		case 'C':
			o->csv = 1;
			break;
		case 'J':
			o->json = 1;
			break;
		case 'h':
			ring_usage(stdout);
			exit(0);
		default:
			bench_bad_option(BENCH_CMD, longopts, optopt,
					 argv[optind - 1]);
			goto usage;
		}
		continue;
	bad_value:
		bench_bad_value(BENCH_CMD, longopts, opt, optarg);
		goto usage;
	}
	if (optind < argc) {
		fprintf(stderr, "bpbench ring: unexpected argument '%s'\n",
			argv[optind]);
		goto usage;
	}
	if (o->csv && o->json) {
		fprintf(stderr,
			"bpbench ring: --csv and --json exclude each other\n");
		goto usage;
	}
	for (int b = 0; b < o->nbatches; b++)
		if (o->batches[b] > o->capacity / 2) {
			/* the single-thread loop needs a whole batch in the
			 * queue, and ck_ring keeps one slot free */
			fprintf(stderr,
				"bpbench ring: batch %u is more than half the "
				"capacity %u\n",
				o->batches[b], o->capacity);
			goto usage;
		}
	if (o->quick) {
		if (!runs_set)
			o->runs = 3;
		if (!ms_set)
			o->ms = 20;
	}
	o->single_ms = o->ms / 4 ? o->ms / 4 : 1;
	if (o->ncpus == 0) {
		o->ncpus = bench_cpus_available(o->cpus, BENCH_MAX_CPUS);
		if (o->ncpus <= 0)
			bench_die("bpbench ring: sched_getaffinity failed\n");
	}
	return 0;
usage:
	ring_usage(stderr);
	return -1;
}

int bench_ring_main(int argc, char **argv)
{
	struct ring_opts o;
	struct ring_results res;
	size_t ncell, nsingle;
	int64_t t0;

	if (ring_parse(argc, argv, &o))
		return BENCH_EXIT_USAGE;

	res.runs = (int)o.runs;
	res.npoints = o.npoints;
	res.nbatches = o.nbatches;
	res.nqueues = o.nqueues;
	ncell = (size_t)o.runs * (size_t)o.npoints * (size_t)o.nbatches *
		(size_t)o.nqueues;
	nsingle = (size_t)o.runs * (size_t)o.nbatches * (size_t)o.nqueues;
	res.mitems = bench_zalloc(sizeof(double) * ncell);
	res.single = bench_zalloc(sizeof(double) * nsingle);
	for (size_t i = 0; i < ncell; i++)
		res.mitems[i] = NAN;
	for (size_t i = 0; i < nsingle; i++)
		res.single[i] = NAN;

	t0 = bench_now_ns();
	ring_sweep(&o, &res);
	fprintf(stderr,
		"bpbench ring: done in %.1f s, every run verified (%" PRIu64
		" items through the threaded runs)\n",
		(double)(bench_now_ns() - t0) / 1e9, ring_items_verified);

	if (o.csv)
		ring_print_csv(&o, &res);
	else if (o.json)
		ring_print_json(&o, &res);
	else
		ring_print_table(&o, &res);
	free(res.mitems);
	free(res.single);
	return 0;
}
