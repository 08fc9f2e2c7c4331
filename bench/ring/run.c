/* SPDX-License-Identifier: MIT */
/*
 * run.c - one timed threaded run of `bpbench ring`: P producers and C
 * consumers pinned round-robin, the latency samples, and the check of
 * every item afterwards (see ring.c for the design).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

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

uint64_t ring_items_verified;

/* After a run: every item accounted for, in order, and nothing left over. */

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
struct ring_result ring_run_once(const struct ring_opts *o,
				 const struct bench_queue_ops *ops, unsigned P,
				 unsigned C, unsigned B, unsigned ms)
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
