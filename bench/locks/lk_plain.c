/* SPDX-License-Identifier: MIT */
/*
 * lk_plain.c - plain-lockfree: the write-up's last step written by hand for
 * this one job, the way a good engineer would, with no library: the
 * reference the batchpipe variants are held to.
 *
 *  job source  one atomic counter of sequence numbers: a worker claims B of
 *              them with one fetch_add (a job is its sequence number, so
 *              there is nothing else to hand over)
 *  results     one single-producer / single-consumer ring per worker, the
 *              cached-index ring of queues/q_spsc.c: each side keeps a
 *              private copy of the other side's index and reloads it only
 *              when it seems short; the worker computes straight into the
 *              slots and publishes a batch with one release store
 *  consumer    visits the rings round-robin, sums what is ready in place and
 *              frees it with one release store per ring visited
 *
 * The closed loop of the other variants, without job values moving: the
 * consumer issues a job for every result it receives by raising `limit`
 * (pool + results received), and a worker computes a claimed sequence number
 * only once it is below the limit. So at most `pool` jobs are ever issued
 * and not yet received, the bound every other variant has, and the counter
 * runs ahead of the limit by claims alone (at most B per worker). A worker
 * that must wait for the limit first publishes the results it holds: the
 * consumer's receiving them is what raises it. A ring holds the whole pool,
 * as each queue of the other variants does, so no worker waits for room.
 *
 * It runs its own threads (a `run` variant, as batchpipe-pipeline), pinned
 * as lk_run.c pins the queue variants: the consumer on cpus[0], worker i on
 * cpus[(i + 1) % ncpus]. Every wait takes bench_backoff_wait. After the
 * joins the outcome counts what was issued and never received: results in
 * the rings, sequence numbers below the limit that a worker claimed and had
 * not computed, and those nobody had claimed.
 */
#include <inttypes.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lab/bpbench.h"
#include "locks/lk_work.h"
#include "locks/locks.h"

/* two lines: x86 fetches adjacent line pairs (as queues/q_spsc.c) */
#define LK_PLAIN_LINE 128

/* One worker's results to the consumer. */
struct lk_plain_ring {
	/* the worker's line: its index and its copy of the consumer's */
	alignas(LK_PLAIN_LINE) _Atomic uint64_t head;
	uint64_t tail_cache;
	/* the consumer's line: its index and its copy of the worker's */
	alignas(LK_PLAIN_LINE) _Atomic uint64_t tail;
	uint64_t head_cache;
	/* read-only while the threads run */
	alignas(LK_PLAIN_LINE) uint64_t *slots;
	uint64_t mask;
};

struct lk_plain;

struct lk_plain_worker {
	struct lk_plain_ring ring;
	struct lk_plain *run;
	pthread_t thread;
	/* written at its exit, read after its join: the claimed sequence
	 * numbers it never computed */
	uint64_t claim_from, claim_to;
};

struct lk_plain {
	const struct lk_run_params *p;
	struct lk_plain_worker *w;
	pthread_barrier_t start;
	/* the next sequence number nobody has claimed */
	alignas(LK_PLAIN_LINE) _Atomic uint64_t next;
	/* jobs issued: sequence numbers below it may be computed */
	alignas(LK_PLAIN_LINE) _Atomic uint64_t limit;
	/* set when the window is over; read in every loop */
	alignas(LK_PLAIN_LINE) atomic_int stop;
	/* the consumer's, read after its join */
	alignas(LK_PLAIN_LINE) pthread_t consumer;
	uint64_t received, checksum;
	int64_t t_start, t_end;
};

/* results of seq .. seq+n-1 into slots[at ..], wrapping at mask */
static inline void lk_plain_compute(uint64_t *slots, uint64_t mask, uint64_t at,
				    uint64_t seq, uint64_t n, uint64_t iters)
{
	uint64_t i = at & mask, first = mask + 1 - i < n ? mask + 1 - i : n;

	for (uint64_t k = 0; k < first; k++)
		slots[i + k] = lk_result(seq + k, iters);
	for (uint64_t k = first; k < n; k++)
		slots[k - first] = lk_result(seq + k, iters);
}

static void *lk_plain_worker_main(void *arg)
{
	struct lk_plain_worker *self = arg;
	struct lk_plain *run = self->run;
	struct lk_plain_ring *r = &self->ring;
	const uint64_t B = run->p->c.batch, iters = run->p->iters;
	const uint64_t cap = r->mask + 1;
	uint64_t from = 0, to = 0; /* claimed, not computed yet */
	uint64_t lim = 0;	   /* our copy of run->limit */
	uint64_t h = 0, shown = 0; /* results written / published */
	struct bench_backoff bo = {0};

	pthread_barrier_wait(&run->start);
	/* relaxed: a time signal; the join publishes the rest */
	while (!atomic_load_explicit(&run->stop, memory_order_relaxed)) {
		uint64_t k;

		if (from == to) {
			/* relaxed: the RMW alone makes claims disjoint, and a
			 * sequence number is the whole job: nothing to see */
			from = atomic_fetch_add_explicit(&run->next, B,
							 memory_order_relaxed);
			to = from + B;
		}
		if (from >= lim) {
			/* relaxed: pairs with the consumer's relaxed store; a
			 * count, no data behind it: stale only means later */
			lim = atomic_load_explicit(&run->limit,
						   memory_order_relaxed);
			if (from >= lim)
				goto wait;
		}
		k = (to < lim ? to : lim) - from;
		if (cap - (h - r->tail_cache) < k) {
			/* acquire: pairs with the consumer's release of tail,
			 * its reads of those slots before we overwrite them */
			r->tail_cache = atomic_load_explicit(
				&r->tail, memory_order_acquire);
			/* the ring holds the whole pool, more than can be
			 * issued and not received */
			if (cap - (h - r->tail_cache) < k)
				bench_die(
					"bpbench locks: VERIFY FAILED: "
					"plain-lockfree: a ring overflowed: "
					"more jobs in flight than the pool\n");
		}
		lk_plain_compute(r->slots, r->mask, h, from, k, iters);
		h += k;
		from += k;
		if (from == to) {
			/* release: the batch's slots before the index that
			 * shows them; pairs with the consumer's acquire */
			atomic_store_explicit(&r->head, h,
					      memory_order_release);
			shown = h;
		}
		bench_backoff_reset(&bo);
		continue;
	wait:
		if (h != shown) {
			/* release: as above; the consumer's taking these is
			 * what raises the limit */
			atomic_store_explicit(&r->head, h,
					      memory_order_release);
			shown = h;
		}
		bench_backoff_wait(&bo);
	}
	if (h != shown)
		/* release: as above (left in the ring, counted after) */
		atomic_store_explicit(&r->head, h, memory_order_release);
	self->claim_from = from;
	self->claim_to = to;
	return NULL;
}

static void *lk_plain_consumer_main(void *arg)
{
	struct lk_plain *run = arg;
	const unsigned threads = run->p->c.threads;
	const uint64_t pool = run->p->pool;
	uint64_t received = 0, sum = 0;
	unsigned empty = 0; /* rings in a row found empty */
	struct bench_backoff bo = {0};

	pthread_barrier_wait(&run->start);
	run->t_start = bench_now_ns();
	/* relaxed: a time signal; the join publishes the rest */
	for (unsigned w = 0;
	     !atomic_load_explicit(&run->stop, memory_order_relaxed);
	     w = w + 1 == threads ? 0 : w + 1) {
		struct lk_plain_ring *r = &run->w[w].ring;
		/* relaxed: only this thread writes tail */
		uint64_t t =
			atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t n = r->head_cache - t, i, first;

		if (n == 0) {
			/* acquire: pairs with the worker's release of head,
			 * the slots it wrote before */
			r->head_cache = atomic_load_explicit(
				&r->head, memory_order_acquire);
			n = r->head_cache - t;
			if (n == 0) {
				/* a whole round of empty rings: wait */
				if (++empty == threads) {
					empty = 0;
					bench_backoff_wait(&bo);
				}
				continue;
			}
		}
		i = t & r->mask;
		first = r->mask + 1 - i < n ? r->mask + 1 - i : n;
		for (uint64_t k = 0; k < first; k++)
			sum += r->slots[i + k];
		for (uint64_t k = first; k < n; k++)
			sum += r->slots[k - first];
		/* release: our reads of the slots before the worker reuses
		 * them; pairs with its acquire of tail */
		atomic_store_explicit(&r->tail, t + n, memory_order_release);
		received += n;
		/* relaxed: pairs with the workers' relaxed loads; it only
		 * grants sequence numbers, which carry no data */
		atomic_store_explicit(&run->limit, pool + received,
				      memory_order_relaxed);
		empty = 0;
		bench_backoff_reset(&bo);
	}
	run->t_end = bench_now_ns();
	run->received = received;
	run->checksum = sum;
	return NULL;
}

/*
 * After the joins: issued = pool + received; what was issued and never
 * received is in the rings, in the workers' claims, or never claimed. A
 * worker claims again only once it has computed its claim, all of it below
 * the limit, so the claims above what was issued are one per worker at most.
 */
static void lk_plain_leftovers(struct lk_plain *run, struct lk_outcome *out)
{
	const unsigned threads = run->p->c.threads;
	const uint64_t iters = run->p->iters, issued = out->issued;
	/* relaxed: after the joins, which order everything */
	uint64_t next = atomic_load_explicit(&run->next, memory_order_relaxed);
	uint64_t n = 0, sum = 0;

	if (next > issued + (uint64_t)threads * run->p->c.batch)
		bench_die("bpbench locks: VERIFY FAILED: plain-lockfree "
			  "threads=%u B=%u: sequence numbers claimed up to "
			  "%" PRIu64 ", more than a claim per worker over the "
			  "%" PRIu64 " issued\n",
			  threads, run->p->c.batch, next, issued);
	for (unsigned w = 0; w < threads; w++) {
		const struct lk_plain_worker *x = &run->w[w];
		const struct lk_plain_ring *r = &x->ring;
		/* relaxed: after the joins */
		uint64_t t =
			atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t h =
			atomic_load_explicit(&r->head, memory_order_relaxed);
		uint64_t to = x->claim_to < issued ? x->claim_to : issued;

		for (; t < h; t++, n++)
			sum += r->slots[t & r->mask];
		for (uint64_t s = x->claim_from; s < to; s++, n++)
			sum += lk_result_fast(s, iters);
	}
	for (uint64_t s = next; s < issued; s++, n++)
		sum += lk_result_fast(s, iters);
	out->inflight = n;
	out->inflight_sum = sum;
}

/* Cache-line-pair aligned memory, not cleared; dies on failure. */
static void *lk_plain_alloc(size_t size)
{
	void *m;

	size = (size + LK_PLAIN_LINE - 1) / LK_PLAIN_LINE * LK_PLAIN_LINE;
	m = aligned_alloc(LK_PLAIN_LINE, size);
	if (!m)
		bench_die("bpbench locks: plain-lockfree: out of memory\n");
	return m;
}

static void lk_plain_run(const struct lk_run_params *p, struct lk_outcome *out)
{
	const unsigned threads = p->c.threads;
	/* a ring holds the whole pool, as each queue of the other variants
	 * does: a worker waits for the limit, never for room */
	const uint64_t cap = p->c.capacity;
	struct lk_plain run = {.p = p};

	atomic_init(&run.next, 0);
	/* the pool: sequence numbers 0 .. pool-1 issued before any thread */
	atomic_init(&run.limit, p->pool);
	atomic_init(&run.stop, 0);
	run.w = memset(lk_plain_alloc(sizeof(*run.w) * threads), 0,
		       sizeof(*run.w) * threads);
	for (unsigned i = 0; i < threads; i++) {
		run.w[i].run = &run;
		run.w[i].ring.slots = lk_plain_alloc(sizeof(uint64_t) * cap);
		run.w[i].ring.mask = cap - 1;
		run.w[i].ring.tail_cache = run.w[i].ring.head_cache = 0;
		atomic_init(&run.w[i].ring.head, 0);
		atomic_init(&run.w[i].ring.tail, 0);
	}

	pthread_barrier_init(&run.start, NULL, threads + 2);
	bench_spawn_pinned(&run.consumer, lk_plain_consumer_main, &run,
			   p->cpus[0], "bpbench locks");
	for (unsigned i = 0; i < threads; i++)
		bench_spawn_pinned(
			&run.w[i].thread, lk_plain_worker_main, &run.w[i],
			p->cpus[(i + 1) % (unsigned)p->ncpus], "bpbench locks");
	pthread_barrier_wait(&run.start);
	out->cpu_ns = lk_process_cpu_ns();
	out->cpu_wall_ns = bench_now_ns();
	bench_sleep_ns((int64_t)p->ms * 1000000);
	/* relaxed: a time signal; the joins publish everything else */
	atomic_store_explicit(&run.stop, 1, memory_order_relaxed);
	out->cpu_ns = lk_process_cpu_ns() - out->cpu_ns;
	out->cpu_wall_ns = bench_now_ns() - out->cpu_wall_ns;
	pthread_join(run.consumer, NULL);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(run.w[i].thread, NULL);

	out->issued = p->pool + run.received;
	out->received = run.received;
	out->checksum = run.checksum;
	out->window_count = run.received;
	out->window_ns = run.t_end - run.t_start;
	lk_plain_leftovers(&run, out);

	pthread_barrier_destroy(&run.start);
	for (unsigned i = 0; i < threads; i++)
		free(run.w[i].ring.slots);
	free(run.w);
}

const struct lk_variant lk_plain_lockfree = {
	.name = "plain-lockfree",
	.summary =
		"by hand: counter (B per fetch_add), an SPSC ring per worker",
	.flags = LK_BATCHED,
	.run = lk_plain_run,
};
