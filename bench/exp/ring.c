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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bpbench.h"

#include "queues.h"

#define RING_MAX_POINTS	 16
#define RING_MAX_BATCHES 16
#define RING_MAX_QUEUES	 16
#define RING_MAX_RUNS	 1000
/* the producer id lives in 8 bits of each item */
#define RING_MAX_SIDE 255
/* latency: every 2^RING_SAMPLE_SHIFT-th sequence number is stamped */
#define RING_SAMPLE_SHIFT 6
#define RING_SAMPLE_MASK  ((UINT64_C(1) << RING_SAMPLE_SHIFT) - 1)
/* a stamp: ns since the run's base << 16 | the lap of its slot, 16 bits */
#define RING_TAG_BITS 16
#define RING_TAG_MASK ((UINT64_C(1) << RING_TAG_BITS) - 1)

struct ring_opts {
	struct bench_args a; /* runs, ms, seed, cpus, output */
	unsigned capacity, single_ms;
	unsigned points[RING_MAX_POINTS][2];
	int npoints;
	unsigned batches[RING_MAX_BATCHES];
	int nbatches;
	const struct bench_queue_ops *queues[RING_MAX_QUEUES];
	int nqueues;
	int single;
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
	/*
	 * [nstamps] enqueue times of the sampled items, a slot per sample
	 * index modulo nstamps. Written before the item is enqueued, so the
	 * queue's own ordering of the item publishes it to its consumer;
	 * atomic only because a consumer preempted for a whole lap of the
	 * slots may read one while it is rewritten for a later sample: the
	 * lap in its tag tells it.
	 */
	_Atomic uint64_t *stamps;
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
	struct bench_hist *lat; /* enqueue -> dequeue of the sampled items */
	uint64_t lat_lost;	/* samples whose slot was rewritten first */
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
	int64_t t_base;	    /* stamps count from here */
	uint64_t nstamps;   /* slots per producer, a power of two */
	unsigned lap_shift; /* log2(nstamps): sample index >> it = its lap */
};

/*
 * Stamp the sampled items among the next enqueue's, items seq lo..hi, with
 * one clock read. An item that does not get in is stamped again by the
 * next call, before it can be seen.
 */
static inline void ring_stamp(struct ring_producer *self, uint64_t lo,
			      uint64_t hi)
{
	uint64_t first = (lo + RING_SAMPLE_MASK) & ~RING_SAMPLE_MASK;
	uint64_t mask = self->run->nstamps - 1, t;

	if (first > hi)
		return;
	t = (uint64_t)(bench_now_ns() - self->run->t_base);
	for (uint64_t s = first; s <= hi; s += RING_SAMPLE_MASK + 1) {
		uint64_t k = s >> RING_SAMPLE_SHIFT;

		/* relaxed: the enqueue of the item publishes it */
		atomic_store_explicit(
			&self->stamps[k & mask],
			t << RING_TAG_BITS |
				((k >> self->run->lap_shift) & RING_TAG_MASK),
			memory_order_relaxed);
	}
}

/* The latency of sampled item seq of producer pid, dequeued at now. */
static inline void ring_sample(struct ring_consumer *self, unsigned pid,
			       uint64_t seq, int64_t now)
{
	struct ring_run *run = self->run;
	uint64_t k = seq >> RING_SAMPLE_SHIFT;
	/* relaxed: the dequeue of the item ordered the stamp before us */
	uint64_t v = atomic_load_explicit(
		&run->prod[pid].stamps[k & (run->nstamps - 1)],
		memory_order_relaxed);

	if ((v & RING_TAG_MASK) != ((k >> run->lap_shift) & RING_TAG_MASK)) {
		self->lat_lost++;
		return;
	}
	bench_hist_add(self->lat,
		       now - run->t_base - (int64_t)(v >> RING_TAG_BITS));
}

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
		int r;

		/* items[i] has sequence number seq - B + i */
		ring_stamp(self, seq - B + off, seq - 1);
		r = ops->enqueue(run->q, self->id, items + off, B - off);
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
	int64_t now;

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
		now = 0;
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
			if (((uint64_t)seq & RING_SAMPLE_MASK) == 0) {
				if (!now) /* one clock read per dequeue */
					now = bench_now_ns();
				ring_sample(self, pid, (uint64_t)seq, now);
			}
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

/* What one threaded run measured. */
struct ring_result {
	double mitems;	       /* millions of items per second */
	double p50_ns, p99_ns; /* latency of the sampled items; NaN: none */
};

/* Stamp slots per producer: more than a producer can be ahead of the
 * slowest reader of its stamps, short of a consumer preempted for laps. */
static uint64_t ring_nstamps(unsigned capacity, unsigned B)
{
	uint64_t need = 4 * (((uint64_t)capacity + 2 * (uint64_t)B) >>
			     RING_SAMPLE_SHIFT),
		 n = 1024;

	while (n < need)
		n *= 2;
	return n;
}

/* One run of one queue at one point. */
static struct ring_result ring_run_once(const struct ring_opts *o,
					const struct bench_queue_ops *ops,
					unsigned P, unsigned C, unsigned B,
					unsigned ms)
{
	struct ring_run run = {.ops = ops, .P = P, .C = C, .B = B};
	struct ring_result res;
	struct bench_hist *lat = bench_zalloc(sizeof(*lat));
	unsigned nthreads = 0;
	uint64_t total = 0, lost = 0;
	int64_t t0, t_end = 0;

	atomic_init(&run.stop, 0);
	run.q = ops->create(o->capacity, P, C, &run.stop);
	if (!run.q)
		bench_die("bpbench ring: cannot create %s\n", ops->name);
	atomic_init(&run.producers_done, 0);
	atomic_init(&run.producers_left, P);
	run.prod = bench_zalloc(sizeof(*run.prod) * P);
	run.cons = bench_zalloc(sizeof(*run.cons) * C);
	run.nstamps = ring_nstamps(o->capacity, B);
	run.lap_shift = (unsigned)__builtin_ctzll(run.nstamps);
	/* before any thread exists: every stamp is later, so >= 0 */
	run.t_base = bench_now_ns();
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
		/* no consumer reads a slot before its sample was stamped: the
		 * stamp precedes the item's enqueue */
		run.prod[i].stamps =
			bench_zalloc(sizeof(*run.prod[i].stamps) * run.nstamps);
		ring_spawn(&run.prod[i].thread, ring_producer_main,
			   &run.prod[i],
			   o->a.cpus[nthreads++ % (unsigned)o->a.ncpus]);
	}
	for (unsigned i = 0; i < C; i++) {
		struct ring_consumer *c = &run.cons[i];

		c->run = &run;
		c->id = i;
		c->last = bench_zalloc(sizeof(*c->last) * P);
		c->count = bench_zalloc(sizeof(*c->count) * P);
		c->sum = bench_zalloc(sizeof(*c->sum) * P);
		c->lat = bench_zalloc(sizeof(*c->lat));
		for (unsigned p = 0; p < P; p++)
			c->last[p] = -1;
		ring_spawn(&c->thread, ring_consumer_main, c,
			   o->a.cpus[nthreads++ % (unsigned)o->a.ncpus]);
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
		bench_hist_merge(lat, run.cons[c].lat);
		lost += run.cons[c].lat_lost;
		free(run.cons[c].last);
		free(run.cons[c].count);
		free(run.cons[c].sum);
		free(run.cons[c].lat);
	}
	for (unsigned p = 0; p < P; p++)
		free(run.prod[p].stamps);
	if (lost)
		fprintf(stderr,
			"bpbench ring: %s %ux%u B=%u: %" PRIu64
			" latency samples dropped (a consumer fell a lap "
			"behind their stamps)\n",
			ops->name, P, C, B, lost);
	res.p50_ns = bench_hist_pct(lat, 0.50);
	res.p99_ns = bench_hist_pct(lat, 0.99);
	free(lat);
	pthread_barrier_destroy(&run.start);
	free(run.prod);
	free(run.cons);
	ops->destroy(run.q);
	/* items per microsecond = millions per second */
	res.mitems = (double)total * 1e3 / (double)(t_end - t0);
	return res;
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
	double *mitems;	   /* [run][point][batch][queue], NaN: not run */
	double *p50, *p99; /* the same cells: latency, ns; NaN: no samples */
	double *single;	   /* [run][batch][queue] ns per item */
};

static size_t ring_index(const struct ring_results *r, int run, int pt, int b,
			 int q)
{
	return (size_t)(((run * r->npoints + pt) * r->nbatches + b) *
				r->nqueues +
			q);
}

static double *ring_cell(const struct ring_results *r, int run, int pt, int b,
			 int q)
{
	return &r->mitems[ring_index(r, run, pt, b, q)];
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

/* Median over runs of a latency array (p50 or p99) at one cell. */
static double ring_lat_median(const struct ring_results *r, const double *a,
			      int pt, int b, int q)
{
	double v[RING_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = a[ring_index(r, run, pt, b, q)];
	return bench_median(v, r->runs);
}

/* A JSON number, or null for NaN. */
static void ring_json_num(FILE *f, double v)
{
	if (isnan(v))
		fputs("null", f);
	else
		fprintf(f, "%.1f", v);
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

/* ---- reports ------------------------------------------------------------ */

/* What the printers get (bench_emit's ctx). */
struct ring_report {
	const struct ring_opts *o;
	const struct ring_results *r;
};

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

/* One row per point and batch: "PxC", B, then a cell per queue. */
static void ring_table_cols(struct bench_table *t, const struct ring_opts *o,
			    int width)
{
	bench_table_col(t, "PxC", 5, BENCH_LEFT);
	bench_table_col(t, "B", 4, BENCH_RIGHT);
	for (int q = 0; q < o->nqueues; q++)
		bench_table_col(t, o->queues[q]->name, width, BENCH_RIGHT);
}

static void ring_table_row_head(struct bench_table *t,
				const struct ring_opts *o, int pt, int b)
{
	bench_table_fmt(t, "%ux%u", o->points[pt][0], o->points[pt][1]);
	bench_table_fmt(t, "%u", o->batches[b]);
}

static void ring_print_table(FILE *f, const void *ctx)
{
	const struct ring_report *rep = ctx;
	const struct ring_opts *o = rep->o;
	const struct ring_results *r = rep->r;
	char cpus[256];
	int bpq = ring_find_queue(o, &bench_q_batchpipe);
	double log_sum = 0;
	int nratio = 0, p11;
	struct bench_table t;

	bench_cpus_format(o->a.cpus, o->a.ncpus, cpus, sizeof(cpus));
	fprintf(f,
		"bpbench ring: capacity %u, %u runs x %u ms per point and "
		"queue, CPUs %s, seed %" PRIu64 "\n",
		o->capacity, o->a.runs, o->a.ms, cpus, o->a.seed);
	fprintf(f, "median throughput, Mitems/s (ratio = batchpipe / best "
		   "other queue)\n\n");
	bench_table_init(&t, f);
	ring_table_cols(&t, o, 8);
	if (bpq >= 0) {
		bench_table_col(&t, "best other", 10, BENCH_LEFT);
		bench_table_col(&t, "ratio", 6, BENCH_RIGHT);
		bench_table_col(&t, "batchpipe min-max", 0, BENCH_LEFT);
	}
	bench_table_head(&t);
	for (int pt = 0; pt < o->npoints; pt++) {
		for (int b = 0; b < o->nbatches; b++) {
			ring_table_row_head(&t, o, pt, b);
			for (int q = 0; q < o->nqueues; q++)
				bench_table_num(
					&t,
					ring_median(r, pt, b, q, NULL, NULL),
					2);
			if (bpq >= 0) {
				int best_q;
				double ratio = ring_ratio(o, r, pt, b, &best_q),
				       lo, hi;

				ring_median(r, pt, b, bpq, &lo, &hi);
				bench_table_str(
					&t, best_q >= 0
						    ? o->queues[best_q]->name
						    : "-");
				bench_table_num(&t, ratio, 2);
				bench_table_fmt(&t, "%.1f-%.1f", lo, hi);
				if (!isnan(ratio) && ratio > 0) {
					log_sum += log(ratio);
					nratio++;
				}
			}
		}
	}
	if (nratio)
		fprintf(f,
			"\ngeometric mean of batchpipe / best other over %d "
			"points: %.2f\n",
			nratio, exp(log_sum / nratio));

	p11 = ring_find_point(o, 1, 1);
	if (bpq >= 0 && p11 >= 0 && o->npoints > 1) {
		fprintf(f, "\nbatchpipe scaling, median at PxC / median at "
			   "1x1:\n");
		for (int pt = 0; pt < o->npoints; pt++) {
			if (pt == p11)
				continue;
			fprintf(f, "  %ux%u:", o->points[pt][0],
				o->points[pt][1]);
			for (int b = 0; b < o->nbatches; b++) {
				double base =
					ring_median(r, p11, b, bpq, NULL, NULL);
				double m =
					ring_median(r, pt, b, bpq, NULL, NULL);

				fprintf(f, "  B=%u %.2f", o->batches[b],
					m / base);
			}
			fprintf(f, "\n");
		}
	}

	fprintf(f, "\nlatency, enqueue -> dequeue of every 64th item: median "
		   "over runs of p50 / p99, us\n(under saturation: time "
		   "waiting in a full queue)\n\n");
	bench_table_init(&t, f);
	ring_table_cols(&t, o, 15);
	bench_table_head(&t);
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++) {
			ring_table_row_head(&t, o, pt, b);
			for (int q = 0; q < o->nqueues; q++) {
				double p50 = ring_lat_median(r, r->p50, pt, b,
							     q),
				       p99 = ring_lat_median(r, r->p99, pt, b,
							     q);

				if (isnan(p50))
					bench_table_str(&t, "-");
				else
					bench_table_fmt(&t, "%.1f / %.1f",
							p50 / 1e3, p99 / 1e3);
			}
		}

	if (!o->single)
		return;
	fprintf(f,
		"\nsingle thread, enqueue B then dequeue B: ns per item "
		"(median of %u, %u ms each)\n",
		o->a.runs, o->single_ms);
	bench_table_init(&t, f);
	bench_table_col(&t, "B", 4, BENCH_RIGHT);
	for (int q = 0; q < o->nqueues; q++)
		bench_table_col(&t, o->queues[q]->name, 8, BENCH_RIGHT);
	bench_table_head(&t);
	for (int b = 0; b < o->nbatches; b++) {
		bench_table_fmt(&t, "%u", o->batches[b]);
		for (int q = 0; q < o->nqueues; q++)
			bench_table_num(&t, ring_single_median(r, b, q), 2);
	}
}

static void ring_print_csv(FILE *f, const void *ctx)
{
	const struct ring_report *rep = ctx;
	const struct ring_opts *o = rep->o;
	const struct ring_results *r = rep->r;
	/* p50_ns, p99_ns: enqueue -> dequeue of every 64th item, that run */
	fprintf(f, "queue,P,C,B,run,Mitems_per_s,p50_ns,p99_ns\n");
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++)
				for (int run = 0; run < r->runs; run++) {
					size_t k = ring_index(r, run, pt, b, q);

					if (isnan(r->mitems[k]))
						continue;
					fprintf(f, "%s,%u,%u,%u,%d,%.3f,",
						o->queues[q]->name,
						o->points[pt][0],
						o->points[pt][1], o->batches[b],
						run, r->mitems[k]);
					bench_csv_num(f, r->p50[k], 1);
					fputc(',', f);
					bench_csv_num(f, r->p99[k], 1);
					fputc('\n', f);
				}
	if (!o->single)
		return;
	fprintf(f, "single,queue,B,ns_per_item\n");
	for (int b = 0; b < o->nbatches; b++)
		for (int q = 0; q < o->nqueues; q++)
			fprintf(f, "single,%s,%u,%.3f\n", o->queues[q]->name,
				o->batches[b], ring_single_median(r, b, q));
}

static void ring_print_json(FILE *f, const void *ctx)
{
	const struct ring_report *rep = ctx;
	const struct ring_opts *o = rep->o;
	const struct ring_results *r = rep->r;
	const char *sep = "";
	double log_sum = 0;
	int nratio = 0;

	fprintf(f,
		"{\"benchmark\":\"ring\",\"capacity\":%u,\"ms\":%u,\"runs\":%u,"
		"\"seed\":%" PRIu64 ",\"cpus\":[",
		o->capacity, o->a.ms, o->a.runs, o->a.seed);
	for (int i = 0; i < o->a.ncpus; i++)
		fprintf(f, "%s%d", i ? "," : "", o->a.cpus[i]);
	fprintf(f, "],\n\"results\":[");
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++) {
				double med =
					ring_median(r, pt, b, q, NULL, NULL);

				if (isnan(med))
					continue;
				fprintf(f,
					"%s\n "
					"{\"queue\":\"%s\",\"P\":%u,\"C\":%u,"
					"\"B\":%u,"
					"\"median_mitems_per_s\":%.3f,\"runs\":"
					"[",
					sep, o->queues[q]->name,
					o->points[pt][0], o->points[pt][1],
					o->batches[b], med);
				for (int run = 0; run < r->runs; run++)
					fprintf(f, "%s%.3f", run ? "," : "",
						*ring_cell(r, run, pt, b, q));
				fprintf(f, "],\"median_p50_ns\":");
				ring_json_num(f, ring_lat_median(r, r->p50, pt,
								 b, q));
				fprintf(f, ",\"median_p99_ns\":");
				ring_json_num(f, ring_lat_median(r, r->p99, pt,
								 b, q));
				fputc('}', f);
				sep = ",";
			}
	fprintf(f, "],\n\"ratios\":[");
	sep = "";
	for (int pt = 0; pt < o->npoints; pt++)
		for (int b = 0; b < o->nbatches; b++) {
			int best_q;
			double ratio = ring_ratio(o, r, pt, b, &best_q);

			if (isnan(ratio))
				continue;
			fprintf(f,
				"%s\n "
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
	fprintf(f, "],\n\"geomean_ratio\":");
	if (nratio)
		fprintf(f, "%.4f", exp(log_sum / nratio));
	else
		fprintf(f, "null");
	fprintf(f, ",\n\"single\":[");
	sep = "";
	if (o->single)
		for (int b = 0; b < o->nbatches; b++)
			for (int q = 0; q < o->nqueues; q++) {
				fprintf(f,
					"%s\n "
					"{\"queue\":\"%s\",\"B\":%u,\"ns_per_"
					"item\":%.3f}",
					sep, o->queues[q]->name, o->batches[b],
					ring_single_median(r, b, q));
				sep = ",";
			}
	fprintf(f, "]}\n");
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
	 "queue capacity, a power of two (default 4096)"},
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
	return BENCH_OPTS_RUN;
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
