/* SPDX-License-Identifier: MIT */
/*
 * test_ring_block - the blocking calls and the eventcount: items move
 * correctly through blocked producers and consumers with every wait
 * strategy, sleepers are woken by the other side and by close, signals
 * interrupt a sleep with -EINTR, and no wake-up is lost over a long
 * ping-pong (a lost wake-up is a hang: a watchdog turns it into a failure).
 *
 * Lengths: BP_BLOCK_ITEMS (items per run of the transfer test),
 * BP_PINGPONG_CYCLES (round trips of the ping-pong); smaller under TSAN.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <batchpipe/batchpipe.h>

#include "src/waitq.h"

#include "bp_test.h"

BPT_DEFINE_GLOBALS;

#define MS   (INT64_C(1000000))
#define MAXT 4

static unsigned long block_items;
static unsigned long pingpong_cycles;

static const enum bp_wait_strategy strategies[3] = {
	BP_WAIT_SPIN_SLEEP, BP_WAIT_BUSY_POLL, BP_WAIT_SLEEP};
static const char *const strategy_name[3] = {"spin_sleep", "busy_poll",
					     "sleep"};

static struct bp_ring *ring_with(unsigned cap, unsigned flags,
				 enum bp_wait_strategy s)
{
	struct bp_ring *r = NULL;
	struct bp_wait_policy p;

	assert_int_equal(bp_ring_create(cap, flags, &r), 0);
	bp_wait_policy_init(&p);
	p.strategy = s;
	assert_int_equal(bp_ring_set_wait_policy(r, &p), 0);
	return r;
}

/* ------------------------------------------------------ blocked transfer */

struct xfer {
	struct bp_ring *r;
	unsigned np, nc;
	uint64_t per_producer;
	atomic_uint producers_left;
	_Atomic uint8_t *seen[MAXT];
	atomic_uint_fast64_t received;
};

struct xthr {
	struct xfer *x;
	unsigned id;
	int64_t last[MAXT];
};

static void *xfer_producer(void *arg)
{
	struct xthr *t = arg;
	struct xfer *x = t->x;
	unsigned cap = bp_ring_capacity(x->r);
	void *v[8];
	uint64_t seq = 0;
	unsigned iter = 0;

	while (seq < x->per_producer) {
		uint64_t left = x->per_producer - seq;
		/* batch 1..5, bulk never above half the ring */
		unsigned n = 1 + iter % 5;
		int bulk = iter++ % 3 == 1;
		int rc;

		if (bulk && n > cap / 2)
			n = cap / 2 ? cap / 2 : 1;
		if (n > left)
			n = (unsigned)left;
		for (unsigned i = 0; i < n; i++)
			v[i] = bpt_item(t->id, seq + i);
		rc = bulk ? bp_ring_enqueue_bulk_wait(x->r, v, n, -1)
			  : bp_ring_enqueue_burst_wait(x->r, v, n, -1);
		if (rc <= 0 || rc > (int)n || (bulk && rc != (int)n)) {
			bp_test_fail("producer %u: blocking enqueue of %u: %d",
				     t->id, n, rc);
			break;
		}
		seq += (unsigned)rc;
	}
	if (atomic_fetch_sub_explicit(&x->producers_left, 1,
				      memory_order_acq_rel) == 1)
		bp_ring_close(x->r);
	return NULL;
}

static void *xfer_consumer(void *arg)
{
	struct xthr *t = arg;
	struct xfer *x = t->x;
	unsigned half = bp_ring_capacity(x->r) / 2;
	void *out[8];
	int open = 1;
	unsigned iter = 0;

	for (;;) {
		unsigned n = 1 + iter % 4;
		int bulk = open && iter++ % 2 == 1;

		/* bulk never above half the ring: no bulk-vs-bulk deadlock */
		if (bulk && n > half)
			n = half ? half : 1;
		int rc = bulk ? bp_ring_dequeue_bulk_wait(x->r, out, n, -1)
			      : bp_ring_dequeue_burst_wait(x->r, out, n, -1);

		if (rc == -EPIPE) {
			if (!bulk)
				break;
			open = 0;
			continue;
		}
		if (rc <= 0 || rc > (int)n || (bulk && rc != (int)n)) {
			bp_test_fail("consumer %u: blocking dequeue of %u: %d",
				     t->id, n, rc);
			break;
		}
		for (int i = 0; i < rc; i++) {
			unsigned pid = bpt_item_pid(out[i]);
			uint64_t seq = bpt_item_seq(out[i]);

			if (pid >= x->np || seq >= x->per_producer) {
				bp_test_fail("bad item %p", out[i]);
				continue;
			}
			if ((int64_t)seq <= t->last[pid])
				bp_test_fail("producer %u: seq %" PRIu64
					     " after %" PRId64,
					     pid, seq, t->last[pid]);
			t->last[pid] = (int64_t)seq;
			/* relaxed: read by the main thread after join */
			if (atomic_fetch_add_explicit(&x->seen[pid][seq], 1,
						      memory_order_relaxed) !=
			    0)
				bp_test_fail("producer %u: seq %" PRIu64
					     " twice",
					     pid, seq);
		}
		atomic_fetch_add_explicit(&x->received, (unsigned)rc,
					  memory_order_relaxed);
	}
	return NULL;
}

static void run_xfer(unsigned np, unsigned nc, unsigned flags, unsigned cap,
		     unsigned s)
{
	struct xfer x;
	struct xthr pt[MAXT], ct[MAXT];
	pthread_t ptid[MAXT], ctid[MAXT];
	int64_t t0 = bpt_now_ns();

	memset(&x, 0, sizeof(x));
	x.r = ring_with(cap, flags, strategies[s]);
	x.np = np;
	x.nc = nc;
	x.per_producer = block_items / np;
	atomic_init(&x.producers_left, np);
	for (unsigned p = 0; p < np; p++) {
		x.seen[p] = calloc(x.per_producer, 1);
		assert_non_null(x.seen[p]);
	}
	bp_test_reset_failures();
	bpt_watchdog_arm(BPT_TSAN ? 300 : 60,
			 "blocking transfer %ux%u flags %#x %s", np, nc, flags,
			 strategy_name[s]);
	for (unsigned i = 0; i < nc; i++) {
		ct[i].x = &x;
		ct[i].id = i;
		for (unsigned p = 0; p < MAXT; p++)
			ct[i].last[p] = -1;
		assert_int_equal(
			pthread_create(&ctid[i], NULL, xfer_consumer, &ct[i]),
			0);
	}
	for (unsigned i = 0; i < np; i++) {
		pt[i].x = &x;
		pt[i].id = i;
		assert_int_equal(
			pthread_create(&ptid[i], NULL, xfer_producer, &pt[i]),
			0);
	}
	for (unsigned i = 0; i < np; i++)
		pthread_join(ptid[i], NULL);
	for (unsigned i = 0; i < nc; i++)
		pthread_join(ctid[i], NULL);
	bpt_watchdog_disarm();
	printf("# transfer %ux%u flags %#x %-10s cap %u: %" PRIu64
	       " items, %.3f s\n",
	       np, nc, flags, strategy_name[s], cap, x.per_producer * np,
	       (double)(bpt_now_ns() - t0) / 1e9);

	assert_int_equal(bp_test_failures(), 0);
	assert_int_equal(atomic_load(&x.received), x.per_producer * np);
	for (unsigned p = 0; p < np; p++) {
		for (uint64_t q = 0; q < x.per_producer; q++)
			assert_int_equal(x.seen[p][q], 1);
		free(x.seen[p]);
	}
	assert_int_equal(bp_ring_count(x.r), 0);
	bp_ring_destroy(x.r);
}

/*
 * Producers and consumers that only use the blocking calls (infinite
 * timeout) move every item exactly once, in per-producer order, with each
 * wait strategy, on a small ring where both sides block often.
 */
static void test_blocking_transfer(void **state)
{
	(void)state;
	for (unsigned s = 0; s < 3; s++) {
		run_xfer(1, 1, BP_RING_SP | BP_RING_SC, 4, s);
		run_xfer(2, 2, 0, 8, s);
		run_xfer(3, 1, BP_RING_SC, 4, s);
		run_xfer(1, 3, BP_RING_SP, 2, s);
	}
}

/* ------------------------------------------------------- single wake-ups */

struct waiter {
	struct bp_ring *r;
	_Atomic pid_t tid;
	int consumer; /* 1: dequeue, 0: enqueue */
	int bulk;     /* bulk_wait, else burst_wait */
	unsigned n;
	int64_t timeout_ns;
	void *item; /* enqueue: item to put; dequeue: what arrived */
	void *out[4];
	atomic_int rc;
	atomic_int done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	void *v[4] = {w->item, w->item, w->item, w->item};
	int rc;

	atomic_store_explicit(&w->tid, bpt_gettid(), memory_order_release);
	if (w->consumer)
		rc = w->bulk ? bp_ring_dequeue_bulk_wait(w->r, w->out, w->n,
							 w->timeout_ns)
			     : bp_ring_dequeue_burst_wait(w->r, w->out, w->n,
							  w->timeout_ns);
	else
		rc = w->bulk ? bp_ring_enqueue_bulk_wait(w->r, v, w->n,
							 w->timeout_ns)
			     : bp_ring_enqueue_burst_wait(w->r, v, w->n,
							  w->timeout_ns);
	atomic_store_explicit(&w->rc, rc, memory_order_relaxed);
	atomic_store_explicit(&w->done, 1, memory_order_release);
	return NULL;
}

static void start_waiters(struct waiter *w, pthread_t *t, unsigned n,
			  enum bp_wait_strategy s)
{
	_Atomic pid_t tids[8];
	int asleep;

	for (unsigned i = 0; i < n; i++)
		assert_int_equal(
			pthread_create(&t[i], NULL, waiter_main, &w[i]), 0);
	/* Let every waiter get to its futex sleep (not for busy-poll). */
	if (s == BP_WAIT_BUSY_POLL) {
		bpt_sleep_ms(20);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		while (atomic_load_explicit(&w[i].tid, memory_order_acquire) ==
		       0)
			sched_yield();
	for (unsigned i = 0; i < n; i++)
		atomic_init(&tids[i], atomic_load(&w[i].tid));
	asleep = bpt_wait_sleeping(tids, n, 2000);
	if (!asleep)
		printf("# note: waiters not all seen asleep; testing anyway\n");
}

static unsigned count_done(struct waiter *w, unsigned n)
{
	unsigned d = 0;

	for (unsigned i = 0; i < n; i++)
		d += (unsigned)atomic_load_explicit(&w[i].done,
						    memory_order_acquire);
	return d;
}

/*
 * Wait (bounded: 10 s) until `want` waiters have returned. On a miss, close
 * the ring so every waiter returns and can be joined, then fail.
 */
static void wait_done(struct waiter *w, pthread_t *t, unsigned n, unsigned want,
		      const char *what)
{
	int64_t end = bpt_now_ns() + 10000 * MS;

	while (count_done(w, n) < want && bpt_now_ns() < end)
		bpt_sleep_ms(1);
	if (count_done(w, n) != want) {
		fprintf(stderr, "%s: %u of %u waiters returned, want %u\n",
			what, count_done(w, n), n, want);
		bp_ring_close(w[0].r);
		for (unsigned i = 0; i < n; i++)
			pthread_join(t[i], NULL);
	}
	assert_int_equal(count_done(w, n), want);
}

/*
 * Consumers asleep on an empty ring are woken by enqueues: one item at a
 * time, each wakes exactly one more consumer (every consumer asks for 1).
 */
static void test_wake_consumers(void **state)
{
	(void)state;
	for (unsigned s = 0; s < 3; s++) {
		for (unsigned sc = 0; sc < 2; sc++) {
			unsigned nw = sc ? 1 : 3;
			struct bp_ring *r = ring_with(8, sc ? BP_RING_SC : 0,
						      strategies[s]);
			struct waiter w[3];
			pthread_t t[3];
			uint64_t got = 0;

			bpt_watchdog_arm(60, "wake consumers %s",
					 strategy_name[s]);
			memset(w, 0, sizeof(w));
			for (unsigned i = 0; i < nw; i++) {
				w[i].r = r;
				w[i].consumer = 1;
				w[i].bulk = i == 2;
				w[i].n = 1;
				w[i].timeout_ns = i == 1 ? 60000 * MS : -1;
			}
			start_waiters(w, t, nw, strategies[s]);
			assert_int_equal(count_done(w, nw), 0);
			for (unsigned i = 0; i < nw; i++) {
				void *v[1] = {bpt_item(0, i + 1)};

				assert_int_equal(
					bp_ring_enqueue_burst(r, v, 1, NULL),
					1);
				wait_done(w, t, nw, i + 1, "wake consumers");
			}
			for (unsigned i = 0; i < nw; i++) {
				pthread_join(t[i], NULL);
				assert_int_equal(atomic_load(&w[i].rc), 1);
				got |= 1u << bpt_item_seq(w[i].out[0]);
			}
			assert_int_equal(got, (1u << (nw + 1)) -
						      2); /* each item once */
			assert_int_equal(bp_ring_count(r), 0);
			bpt_watchdog_disarm();
			bp_ring_destroy(r);
		}
	}
}

/*
 * Producers asleep on a full ring are woken by dequeues: one slot freed at
 * a time lets exactly one more producer in, and every item arrives. The
 * contract: a blocked burst returns once one item can move, a blocked bulk
 * once all n can, so freeing a single slot of a big ring must wake too.
 */
static void test_wake_producers(void **state)
{
	static const unsigned caps[] = {4, 64};

	(void)state;
	for (unsigned s = 0; s < 3; s++) {
		for (unsigned c = 0; c < 2; c++) {
			for (unsigned sp = 0; sp < 2; sp++) {
				unsigned cap = caps[c], nw = sp ? 1 : 3;
				struct bp_ring *r =
					ring_with(cap, sp ? BP_RING_SP : 0,
						  strategies[s]);
				struct waiter w[3];
				pthread_t t[3];
				void *v[64], *out[64];
				uint64_t got = 0;
				char what[80];

				snprintf(what, sizeof(what),
					 "wake producers %s cap %u %s",
					 strategy_name[s], cap,
					 sp ? "sp" : "mp");
				bpt_watchdog_arm(60, "%s", what);
				for (unsigned i = 0; i < cap; i++)
					v[i] = bpt_item(1, i);
				assert_int_equal(
					bp_ring_enqueue_bulk(r, v, cap, NULL),
					(int)cap);
				memset(w, 0, sizeof(w));
				for (unsigned i = 0; i < nw; i++) {
					w[i].r = r;
					w[i].consumer = 0;
					w[i].bulk = i != 1;
					w[i].n = 1;
					w[i].timeout_ns =
						i == 2 ? 60000 * MS : -1;
					w[i].item = bpt_item(2, i);
				}
				start_waiters(w, t, nw, strategies[s]);
				assert_int_equal(count_done(w, nw), 0);
				for (unsigned i = 0; i < nw; i++) {
					assert_int_equal(
						bp_ring_dequeue_burst(r, out, 1,
								      NULL),
						1);
					assert_ptr_equal(out[0],
							 bpt_item(1, i));
					wait_done(w, t, nw, i + 1, what);
				}
				for (unsigned i = 0; i < nw; i++) {
					pthread_join(t[i], NULL);
					assert_int_equal(atomic_load(&w[i].rc),
							 1);
				}
				/* The cap - nw old items first, then one per
				 * producer. */
				assert_int_equal(bp_ring_count(r), cap);
				assert_int_equal(bp_ring_dequeue_burst(
							 r, out, cap, NULL),
						 (int)cap);
				for (unsigned i = 0; i < cap - nw; i++)
					assert_ptr_equal(out[i],
							 bpt_item(1, nw + i));
				for (unsigned i = cap - nw; i < cap; i++) {
					assert_int_equal(bpt_item_pid(out[i]),
							 2);
					got |= 1u << bpt_item_seq(out[i]);
				}
				assert_int_equal(got, (1u << nw) - 1);
				bpt_watchdog_disarm();
				bp_ring_destroy(r);
			}
		}
	}
}

/*
 * close wakes every waiter: consumers on an empty ring (burst and bulk,
 * with and without a timeout) return -EPIPE; a bulk consumer waiting for
 * more than is left returns -EPIPE and a burst then drains the rest;
 * producers on a full ring return -EPIPE.
 */
static void test_close_wakes(void **state)
{
	(void)state;
	for (unsigned s = 0; s < 3; s++) {
		struct bp_ring *r = ring_with(4, 0, strategies[s]);
		struct waiter w[4];
		pthread_t t[4];
		void *v[4], *out[4];
		int64_t t0;

		bpt_watchdog_arm(60, "close wakes consumers %s",
				 strategy_name[s]);
		memset(w, 0, sizeof(w));
		for (unsigned i = 0; i < 4; i++) {
			w[i].r = r;
			w[i].consumer = 1;
			w[i].bulk = i % 2;
			w[i].n = 1 + i % 2;
			w[i].timeout_ns = i >= 2 ? 60000 * MS : -1;
		}
		start_waiters(w, t, 4, strategies[s]);
		assert_int_equal(count_done(w, 4), 0);
		t0 = bpt_now_ns();
		assert_int_equal(bp_ring_close(r), 0);
		for (unsigned i = 0; i < 4; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(atomic_load(&w[i].rc), -EPIPE);
		}
		assert_true(bpt_now_ns() - t0 < 10000 * MS);
		bp_ring_destroy(r);

		/* Bulk waiter for 3 with 2 in the ring. */
		bpt_watchdog_arm(60, "close wakes bulk consumer %s",
				 strategy_name[s]);
		r = ring_with(4, BP_RING_SC, strategies[s]);
		v[0] = bpt_item(0, 1);
		v[1] = bpt_item(0, 2);
		assert_int_equal(bp_ring_enqueue_bulk(r, v, 2, NULL), 2);
		memset(w, 0, sizeof(w));
		w[0].r = r;
		w[0].consumer = 1;
		w[0].bulk = 1;
		w[0].n = 3;
		w[0].timeout_ns = -1;
		start_waiters(w, t, 1, strategies[s]);
		assert_int_equal(count_done(w, 1), 0);
		assert_int_equal(bp_ring_close(r), 0);
		pthread_join(t[0], NULL);
		assert_int_equal(atomic_load(&w[0].rc), -EPIPE);
		assert_int_equal(bp_ring_dequeue_burst(r, out, 4, NULL), 2);
		assert_ptr_equal(out[0], v[0]);
		assert_ptr_equal(out[1], v[1]);
		assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 4, -1),
				 -EPIPE);
		bp_ring_destroy(r);

		/* Producers on a full ring. */
		bpt_watchdog_arm(60, "close wakes producers %s",
				 strategy_name[s]);
		r = ring_with(4, 0, strategies[s]);
		for (unsigned i = 0; i < 4; i++)
			v[i] = bpt_item(0, i);
		assert_int_equal(bp_ring_enqueue_bulk(r, v, 4, NULL), 4);
		memset(w, 0, sizeof(w));
		for (unsigned i = 0; i < 4; i++) {
			w[i].r = r;
			w[i].consumer = 0;
			w[i].bulk = i % 2;
			w[i].n = 1 + i % 3;
			w[i].timeout_ns = i >= 2 ? 60000 * MS : -1;
			w[i].item = bpt_item(1, i);
		}
		start_waiters(w, t, 4, strategies[s]);
		assert_int_equal(count_done(w, 4), 0);
		assert_int_equal(bp_ring_close(r), 0);
		for (unsigned i = 0; i < 4; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(atomic_load(&w[i].rc), -EPIPE);
		}
		/* Nothing got in; the old items still drain. */
		assert_int_equal(bp_ring_dequeue_burst(r, out, 4, NULL), 4);
		for (unsigned i = 0; i < 4; i++)
			assert_ptr_equal(out[i], v[i]);
		assert_int_equal(bp_ring_dequeue_burst(r, out, 4, NULL),
				 -EPIPE);
		bp_ring_destroy(r);
		bpt_watchdog_disarm();
	}
}

/* ---------------------------------------------------------------- -EINTR */

static void on_sigusr1(int sig)
{
	(void)sig;
}

/*
 * A signal (handler installed without SA_RESTART) interrupts a sleeping
 * blocking call, which returns -EINTR, with or without a timeout.
 */
static void test_eintr(void **state)
{
	struct sigaction sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART */
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);

	for (unsigned k = 0; k < 4; k++) {
		enum bp_wait_strategy s =
			k % 2 ? BP_WAIT_SPIN_SLEEP : BP_WAIT_SLEEP;
		struct bp_ring *r = ring_with(4, 0, s);
		struct waiter w;
		pthread_t t;
		int64_t end;
		void *v[1] = {bpt_item(0, 1)};

		bpt_watchdog_arm(60, "eintr %u", k);
		memset(&w, 0, sizeof(w));
		w.r = r;
		w.consumer = 1;
		w.n = 1;
		w.timeout_ns = k >= 2 ? 60000 * MS : -1;
		start_waiters(&w, &t, 1, s);
		/* Repeat: a signal that lands before the sleep does not count.
		 */
		end = bpt_now_ns() + 3000 * MS;
		while (!atomic_load_explicit(&w.done, memory_order_acquire) &&
		       bpt_now_ns() < end) {
			pthread_kill(t, SIGUSR1);
			bpt_sleep_ms(10);
		}
		if (!atomic_load_explicit(&w.done, memory_order_acquire)) {
			fprintf(stderr, "signals did not interrupt the wait\n");
			bp_ring_enqueue_burst(r, v, 1, NULL); /* release it */
		}
		pthread_join(t, NULL);
		assert_int_equal(atomic_load(&w.rc), -EINTR);
		bp_ring_destroy(r);
		bpt_watchdog_disarm();
	}
	signal(SIGUSR1, SIG_DFL);
}

/* -------------------------------------------------------------- ping-pong */

struct pingpong {
	struct bp_ring *ab, *ba;
	unsigned long cycles;
	int64_t timeout_ns;
};

static void *pong_main(void *arg)
{
	struct pingpong *pp = arg;
	void *x[1];

	/* On a failure, close the reply ring (this thread produces into it) so
	 * the other side gets -EPIPE instead of hanging. */
	for (unsigned long i = 0; i < pp->cycles; i++) {
		int rc = bp_ring_dequeue_burst_wait(pp->ab, x, 1,
						    pp->timeout_ns);

		if (rc != 1 || x[0] != bpt_item(0, i)) {
			bp_test_fail("pong %lu: dequeue %d (%s)", i, rc,
				     bp_strerror(rc));
			bp_ring_close(pp->ba);
			break;
		}
		x[0] = bpt_item(1, i);
		rc = bp_ring_enqueue_burst_wait(pp->ba, x, 1, pp->timeout_ns);
		if (rc != 1) {
			bp_test_fail("pong %lu: enqueue %d (%s)", i, rc,
				     bp_strerror(rc));
			bp_ring_close(pp->ba);
			break;
		}
	}
	return NULL;
}

static void run_pingpong(unsigned flags, unsigned cap, enum bp_wait_strategy s,
			 uint32_t spin_ns, uint32_t yields, int64_t timeout_ns,
			 unsigned long cycles)
{
	struct pingpong pp;
	struct bp_wait_policy p;
	pthread_t t;
	int64_t t0 = bpt_now_ns();
	void *x[1];

	assert_int_equal(bp_ring_create(cap, flags, &pp.ab), 0);
	assert_int_equal(bp_ring_create(cap, flags, &pp.ba), 0);
	bp_wait_policy_init(&p);
	p.strategy = s;
	p.spin_ns = spin_ns;
	p.yields = yields;
	assert_int_equal(bp_ring_set_wait_policy(pp.ab, &p), 0);
	assert_int_equal(bp_ring_set_wait_policy(pp.ba, &p), 0);
	pp.cycles = cycles;
	pp.timeout_ns = timeout_ns;
	bp_test_reset_failures();
	bpt_watchdog_arm(BPT_TSAN ? 300 : 60,
			 "ping-pong flags %#x cap %u strategy %d, %lu cycles "
			 "(lost wake-up?)",
			 flags, cap, (int)s, cycles);
	assert_int_equal(pthread_create(&t, NULL, pong_main, &pp), 0);
	for (unsigned long i = 0; i < cycles; i++) {
		int rc;

		x[0] = bpt_item(0, i);
		rc = bp_ring_enqueue_burst_wait(pp.ab, x, 1, timeout_ns);
		if (rc != 1) {
			bp_test_fail("ping %lu: enqueue %d (%s)", i, rc,
				     bp_strerror(rc));
			break;
		}
		rc = bp_ring_dequeue_burst_wait(pp.ba, x, 1, timeout_ns);
		if (rc != 1 || x[0] != bpt_item(1, i)) {
			bp_test_fail("ping %lu: dequeue %d (%s)", i, rc,
				     bp_strerror(rc));
			break;
		}
	}
	if (bp_test_failures() != 0)
		bp_ring_close(pp.ab); /* we produce into it: unblocks the other
					 side */
	pthread_join(t, NULL);
	bpt_watchdog_disarm();
	printf("# ping-pong flags %#x cap %u strategy %d timeout %s: %lu round "
	       "trips, "
	       "%.3f s, %.2f us each\n",
	       flags, cap, (int)s, timeout_ns < 0 ? "none" : "10s", cycles,
	       (double)(bpt_now_ns() - t0) / 1e9,
	       (double)(bpt_now_ns() - t0) / 1e3 / (double)cycles);
	assert_int_equal(bp_test_failures(), 0);
	assert_int_equal(bp_ring_count(pp.ab), 0);
	assert_int_equal(bp_ring_count(pp.ba), 0);
	bp_ring_destroy(pp.ab);
	bp_ring_destroy(pp.ba);
}

/*
 * No lost wake-up: two threads pass one item back and forth over two
 * capacity-1 rings, each blocking on an empty ring every time, for
 * BP_PINGPONG_CYCLES round trips (default 100 000). A lost wake-up hangs
 * both sides; the watchdog fails the test.
 */
static void test_pingpong_sleep(void **state)
{
	(void)state;
	run_pingpong(BP_RING_SP | BP_RING_SC, 1, BP_WAIT_SLEEP, 0, 0, -1,
		     pingpong_cycles);
}

/* The same over MPMC rings, a fraction of the length. */
static void test_pingpong_sleep_mpmc(void **state)
{
	(void)state;
	run_pingpong(0, 1, BP_WAIT_SLEEP, 0, 0, -1, pingpong_cycles / 4 + 1);
}

/*
 * Spin-then-sleep with a tiny spin, and timed waits: a lost wake-up shows as
 * -ETIMEDOUT after 10 s instead of a hang.
 */
static void test_pingpong_spin_sleep(void **state)
{
	(void)state;
	run_pingpong(0, 2, BP_WAIT_SPIN_SLEEP, 100, 1, 10000 * MS,
		     pingpong_cycles / 4 + 1);
}

/* ----------------------------------------------------------------- waitq */

struct wq_pp {
	struct bpi_waitq q;
	atomic_ulong turn;
	unsigned long cycles;
};

static void wq_wait_for(struct wq_pp *w, unsigned long want)
{
	for (;;) {
		uint32_t key;

		/* acquire: pairs with the release increment of the other side
		 */
		if (atomic_load_explicit(&w->turn, memory_order_acquire) ==
		    want)
			return;
		key = bpi_waitq_prepare(&w->q);
		if (atomic_load_explicit(&w->turn, memory_order_acquire) ==
		    want) {
			bpi_waitq_cancel(&w->q);
			return;
		}
		int rc = bpi_waitq_sleep(&w->q, key, -1);

		bpi_waitq_cancel(&w->q);
		if (rc != 0 && rc != -EINTR) {
			bp_test_fail("bpi_waitq_sleep: %d", rc);
			return;
		}
	}
}

static void *wq_side(void *arg)
{
	struct wq_pp *w = arg;

	for (unsigned long i = 1; i < 2 * w->cycles; i += 2) {
		wq_wait_for(w, i);
		atomic_store_explicit(&w->turn, i + 1, memory_order_release);
		bpi_waitq_wake_all(&w->q);
	}
	return NULL;
}

/*
 * The eventcount protocol itself (prepare / re-check / sleep / cancel
 * against store / wake_all) loses no wake-up over a long ping-pong.
 */
static void test_waitq_pingpong(void **state)
{
	struct wq_pp w;
	pthread_t t;
	int64_t t0 = bpt_now_ns();

	(void)state;
	memset(&w, 0, sizeof(w));
	bpi_waitq_init(&w.q);
	atomic_init(&w.turn, 0);
	w.cycles = pingpong_cycles / 4 + 1;
	bp_test_reset_failures();
	bpt_watchdog_arm(BPT_TSAN ? 300 : 60,
			 "waitq ping-pong (lost wake-up?)");
	assert_int_equal(pthread_create(&t, NULL, wq_side, &w), 0);
	for (unsigned long i = 0; i < 2 * w.cycles; i += 2) {
		wq_wait_for(&w, i);
		atomic_store_explicit(&w.turn, i + 1, memory_order_release);
		bpi_waitq_wake_all(&w.q);
	}
	pthread_join(t, NULL);
	bpt_watchdog_disarm();
	printf("# waitq ping-pong: %lu round trips, %.3f s\n", w.cycles,
	       (double)(bpt_now_ns() - t0) / 1e9);
	assert_int_equal(bp_test_failures(), 0);
	assert_int_equal(atomic_load(&w.turn), 2 * w.cycles);
	assert_int_equal(atomic_load(&w.q.sleepers), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocking_transfer),
		cmocka_unit_test(test_wake_consumers),
		cmocka_unit_test(test_wake_producers),
		cmocka_unit_test(test_close_wakes),
		cmocka_unit_test(test_eintr),
		cmocka_unit_test(test_waitq_pingpong),
		cmocka_unit_test(test_pingpong_sleep),
		cmocka_unit_test(test_pingpong_sleep_mpmc),
		cmocka_unit_test(test_pingpong_spin_sleep),
	};

	block_items =
		bpt_env_ulong("BP_BLOCK_ITEMS", (BPT_TSAN ? 10000ul : 20000ul) *
							BPT_STRESS_SCALE);
	pingpong_cycles = bpt_env_ulong("BP_PINGPONG_CYCLES",
					BPT_TSAN ? 30000ul : 100000ul);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# %lu items per transfer, %lu ping-pong cycles%s\n",
	       block_items, pingpong_cycles, BPT_TSAN ? " (TSAN)" : "");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
