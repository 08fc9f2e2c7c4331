/* SPDX-License-Identifier: MIT */
/*
 * test_ring_stress - producers and consumers hammer one ring; checked by
 * conservation and order, not by timing.
 *
 * Every item encodes (producer id, sequence). Each consumer checks that the
 * sequences of each producer it sees strictly increase (per-producer FIFO)
 * and marks every item in a per-producer seen-array with an atomic add, so a
 * duplicate is caught where it happens; after the run the main thread checks
 * that every item was seen exactly once and the per-consumer counts add up.
 * End of stream: the last producer (SP: the producer itself) closes the ring
 * and consumers run until a dequeue returns -EPIPE.
 *
 * Length: BP_STRESS_ITEMS (env) or argv[1] = items per run, all producers
 * together; the default is 120000 x stress_scale (3x fewer under TSAN).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <batchpipe/batchpipe.h>
#include "src/ring_internal.h"

#include "bp_test.h"

BPT_DEFINE_GLOBALS;

#define MAXT 8

enum op {
	OP_BURST, /* non-blocking burst */
	OP_BULK,  /* non-blocking bulk (then burst once the stream ends) */
	OP_ZC,	  /* zero-copy (consumer: SC rings only, else burst) */
	OP_WAIT,  /* blocking burst/bulk with an infinite timeout */
	OP_COUNT
};

static const char *const op_name[OP_COUNT] = {"burst", "bulk", "zc", "wait"};

struct cfg {
	unsigned np, nc;
	unsigned flags;
	unsigned cap;
	unsigned batch;
	enum op pop, cop;
	uint64_t start; /* initial ring position */
	uint64_t per_producer;
	int close_race; /* main closes mid-stream while producers run */
};

struct run {
	const struct cfg *cfg;
	struct bp_ring *r;
	atomic_uint producers_left;
	atomic_uint_fast64_t received;
	_Atomic uint8_t *seen[MAXT];
	uint64_t sent[MAXT]; /* per producer, written before it exits */
};

struct thr {
	struct run *run;
	unsigned id;
	unsigned seed;
	uint64_t count[MAXT]; /* consumer: items seen per producer */
	int64_t last[MAXT];   /* consumer: last sequence seen per producer */
};

static unsigned long items_per_run;

static void maybe_yield(unsigned *seed, unsigned one_in)
{
	if (rand_r(seed) % one_in == 0)
		sched_yield();
}

/* Largest bulk that cannot deadlock against a bulk on the other side. */
static unsigned bulk_n(const struct cfg *c, unsigned n)
{
	unsigned lim = c->cap > 1 ? c->cap / 2 : 1;

	return n < lim ? n : lim;
}

static int produce_zc(struct bp_ring *r, unsigned pid, uint64_t seq, unsigned n,
		      int bulk, unsigned *seed)
{
	struct bp_ring_zc zc;
	int k = bulk ? bp_ring_enqueue_zc_bulk_start(r, n, &zc)
		     : bp_ring_enqueue_zc_burst_start(r, n, &zc);

	if (k <= 0)
		return k;
	if (zc.count != (unsigned)k || zc.n[0] + zc.n[1] != zc.count)
		bp_test_fail("zc reservation %d: count %u n %u+%u", k, zc.count,
			     zc.n[0], zc.n[1]);
	for (int i = 0; i < k; i++) {
		int rc = bp_ring_zc_put(&zc, bpt_item(pid, seq + (unsigned)i));

		if (rc != 0)
			bp_test_fail("zc_put: %d", rc);
		/* Consumers may take the items already put meanwhile. */
		maybe_yield(seed, 64);
	}
	if (bp_ring_enqueue_zc_finish(r, &zc) != 0)
		bp_test_fail("zc finish failed");
	return k;
}

static void *producer(void *arg)
{
	struct thr *t = arg;
	const struct cfg *c = t->run->cfg;
	struct bp_ring *r = t->run->r;
	void **v = malloc(c->batch * sizeof(void *));
	uint64_t seq = 0;
	unsigned iter = 0;

	if (v == NULL) {
		bp_test_fail("malloc");
		goto out;
	}
	while (seq < c->per_producer) {
		uint64_t left = c->per_producer - seq;
		unsigned n = left < c->batch ? (unsigned)left : c->batch;
		/* zc and wait alternate bulk and burst */
		int bulk = c->pop == OP_BULK ||
			   (c->pop != OP_BURST && (iter++ & 1) != 0);
		int rc;

		if (bulk)
			n = bulk_n(c, n);
		for (unsigned i = 0; i < n; i++)
			v[i] = bpt_item(t->id, seq + i);
		switch (c->pop) {
		case OP_BURST:
			rc = bp_ring_enqueue_burst(r, v, n, NULL);
			break;
		case OP_BULK:
			rc = bp_ring_enqueue_bulk(r, v, n, NULL);
			if (rc != 0 && rc != (int)n && rc > 0)
				bp_test_fail("bulk enqueue of %u moved %d", n,
					     rc);
			break;
		case OP_ZC:
			rc = produce_zc(r, t->id, seq, n, bulk, &t->seed);
			break;
		default:
			rc = bulk ? bp_ring_enqueue_bulk_wait(r, v, n, -1)
				  : bp_ring_enqueue_burst_wait(r, v, n, -1);
			if (rc == 0 || (bulk && rc > 0 && rc != (int)n))
				bp_test_fail(
					"blocking enqueue of %u returned %d", n,
					rc);
			break;
		}
		if (rc == -EPIPE && c->close_race)
			break; /* closed under us: expected */
		if (rc < 0) {
			bp_test_fail("producer %u: enqueue returned %d (%s)",
				     t->id, rc, bp_strerror(rc));
			break;
		}
		if (rc > (int)n) {
			bp_test_fail("enqueue of %u returned %d", n, rc);
			break;
		}
		if (rc == 0)
			sched_yield(); /* full: let a consumer run (2 cores) */
		seq += (unsigned)rc;
		maybe_yield(&t->seed, 16);
	}
out:
	free(v);
	t->run->sent[t->id] = seq;
	/*
	 * SP: close is the producer's own operation; MP: the last one closes
	 * (close race: the main thread closes, maybe before we are done).
	 */
	if (atomic_fetch_sub_explicit(&t->run->producers_left, 1,
				      memory_order_acq_rel) == 1 &&
	    !c->close_race) {
		if (bp_ring_close(r) != 0)
			bp_test_fail("close failed");
	}
	return NULL;
}

static void consume_one(struct thr *t, void *item)
{
	const struct cfg *c = t->run->cfg;
	unsigned pid = bpt_item_pid(item);
	uint64_t seq = bpt_item_seq(item);

	if (((uintptr_t)item & 1) != 0 || pid >= c->np ||
	    seq >= c->per_producer) {
		bp_test_fail("consumer %u: bad item %p", t->id, item);
		return;
	}
	if ((int64_t)seq <= t->last[pid])
		bp_test_fail("consumer %u: producer %u seq %" PRIu64
			     " after %" PRId64 " (FIFO broken)",
			     t->id, pid, seq, t->last[pid]);
	t->last[pid] = (int64_t)seq;
	t->count[pid]++;
	/* relaxed: only the count matters; the main thread reads after join */
	if (atomic_fetch_add_explicit(&t->run->seen[pid][seq], 1,
				      memory_order_relaxed) != 0)
		bp_test_fail("consumer %u: producer %u seq %" PRIu64
			     " duplicated",
			     t->id, pid, seq);
}

static int consume_zc(struct thr *t, struct bp_ring *r, unsigned n, int bulk)
{
	struct bp_ring_zc zc;
	unsigned m;
	int k = bulk ? bp_ring_dequeue_zc_bulk_start(r, n, &zc)
		     : bp_ring_dequeue_zc_burst_start(r, n, &zc);

	if (k <= 0)
		return k;
	/* Release a prefix now and then: the rest stays at the head. */
	m = (unsigned)k;
	if (k > 1 && rand_r(&t->seed) % 4 == 0)
		m = 1 + (unsigned)rand_r(&t->seed) % (unsigned)(k - 1);
	for (unsigned i = 0; i < m; i++)
		consume_one(t, bp_ring_zc_get(&zc, i));
	if (bp_ring_dequeue_zc_finish(r, &zc, m) != 0)
		bp_test_fail("zc dequeue finish failed");
	atomic_fetch_add_explicit(&t->run->received, m, memory_order_relaxed);
	return (int)m;
}

static void *consumer(void *arg)
{
	struct thr *t = arg;
	const struct cfg *c = t->run->cfg;
	struct bp_ring *r = t->run->r;
	void **out = malloc(c->batch * sizeof(void *));
	int zc_ok = (c->flags & BP_RING_SC) != 0;
	int stream_open = 1; /* bulk until the first -EPIPE, then burst */
	unsigned iter = 0;

	if (out == NULL) {
		bp_test_fail("malloc");
		return NULL;
	}
	for (;;) {
		/* zc and wait alternate bulk and burst */
		int bulk = stream_open &&
			   (c->cop == OP_BULK ||
			    (c->cop != OP_BURST && (iter++ & 1) != 0));
		unsigned n = bulk ? bulk_n(c, c->batch) : c->batch;
		int rc;

		switch (c->cop) {
		case OP_ZC:
			if (zc_ok) {
				rc = consume_zc(t, r, n, bulk);
				goto got;
			}
			/* fall through */
		case OP_BURST:
		case OP_BULK:
			rc = bulk ? bp_ring_dequeue_bulk(r, out, n, NULL)
				  : bp_ring_dequeue_burst(r, out, n, NULL);
			break;
		default:
			rc = bulk ? bp_ring_dequeue_bulk_wait(r, out, n, -1)
				  : bp_ring_dequeue_burst_wait(r, out, n, -1);
			if (rc == 0)
				bp_test_fail("blocking dequeue returned 0");
			break;
		}
		if (rc > 0) {
			if (rc > (int)n || (bulk && rc != (int)n))
				bp_test_fail(
					"dequeue of %u (bulk %d) returned %d",
					n, bulk, rc);
			for (int i = 0; i < rc && i < (int)n; i++)
				consume_one(t, out[i]);
			/* relaxed: progress for the close race, a hint only */
			atomic_fetch_add_explicit(&t->run->received,
						  (unsigned)rc,
						  memory_order_relaxed);
		}
	got:
		if (rc == -EPIPE) {
			if (!bulk)
				break;	 /* end of stream */
			stream_open = 0; /* fewer than n left: drain by burst */
			continue;
		}
		if (rc < 0) {
			bp_test_fail("consumer %u: dequeue returned %d (%s)",
				     t->id, rc, bp_strerror(rc));
			break;
		}
		if (rc == 0)
			sched_yield(); /* empty: let a producer run (2 cores) */
		maybe_yield(&t->seed, 16);
	}
	free(out);
	return NULL;
}

static const char *mode_name(unsigned flags)
{
	static const char *const names[4] = {"mpmc", "sp", "sc", "spsc"};

	return names[flags & 3];
}

/* One run of one configuration, checked from the main thread. */
static void run_one(const struct cfg *c)
{
	struct run run;
	struct thr prod[MAXT], cons[MAXT];
	pthread_t pt[MAXT], ct[MAXT];
	int64_t t0 = bpt_now_ns();
	double secs;

	memset(&run, 0, sizeof(run));
	run.cfg = c;
	atomic_init(&run.producers_left, c->np);
	assert_int_equal(bpi_ring_create_at(c->cap, c->flags, c->start, &run.r),
			 0);
	assert_int_equal(bp_ring_capacity(run.r), c->cap);
	for (unsigned p = 0; p < c->np; p++) {
		run.seen[p] = calloc(c->per_producer ? c->per_producer : 1, 1);
		assert_non_null(run.seen[p]);
	}
	bp_test_reset_failures();
	bpt_watchdog_arm(BPT_TSAN ? 300 : 60,
			 "stress %ux%u %s cap %u batch %u prod %s cons %s "
			 "start %#" PRIx64,
			 c->np, c->nc, mode_name(c->flags), c->cap, c->batch,
			 op_name[c->pop], op_name[c->cop], c->start);

	for (unsigned i = 0; i < c->nc; i++) {
		memset(&cons[i], 0, sizeof(cons[i]));
		cons[i].run = &run;
		cons[i].id = i;
		cons[i].seed = 1000 + i * 7919 + c->batch;
		for (unsigned p = 0; p < MAXT; p++)
			cons[i].last[p] = -1;
		assert_int_equal(
			pthread_create(&ct[i], NULL, consumer, &cons[i]), 0);
	}
	for (unsigned i = 0; i < c->np; i++) {
		memset(&prod[i], 0, sizeof(prod[i]));
		prod[i].run = &run;
		prod[i].id = i;
		prod[i].seed = 1 + i * 104729 + c->batch;
		assert_int_equal(
			pthread_create(&pt[i], NULL, producer, &prod[i]), 0);
	}
	if (c->close_race) {
		/* Close once about half the items got through, producers busy.
		 */
		while (atomic_load_explicit(&run.received,
					    memory_order_relaxed) <
			       c->per_producer * c->np / 2 &&
		       atomic_load_explicit(&run.producers_left,
					    memory_order_relaxed) != 0)
			sched_yield();
		assert_int_equal(bp_ring_close(run.r), 0);
	}
	for (unsigned i = 0; i < c->np; i++)
		pthread_join(pt[i], NULL);
	for (unsigned i = 0; i < c->nc; i++)
		pthread_join(ct[i], NULL);
	bpt_watchdog_disarm();
	secs = (double)(bpt_now_ns() - t0) / 1e9;
	uint64_t sent = 0;

	for (unsigned p = 0; p < c->np; p++)
		sent += run.sent[p];
	printf("# %ux%u %-4s cap %4u batch %3u prod %-5s cons %-5s%s%s: "
	       "%" PRIu64 " items, %.3f s, %.2f M items/s\n",
	       c->np, c->nc, mode_name(c->flags), c->cap, c->batch,
	       op_name[c->pop], op_name[c->cop], c->start ? " near-wrap" : "",
	       c->close_race ? " close-race" : "", sent, secs,
	       (double)sent / secs / 1e6);
	fflush(stdout);

	assert_int_equal(bp_test_failures(), 0);
	/*
	 * Conservation: every item a producer was told it enqueued is seen
	 * exactly once, nothing else is seen, and the counts add up.
	 */
	for (unsigned p = 0; p < c->np; p++) {
		uint64_t total = 0;

		if (!c->close_race)
			assert_int_equal(run.sent[p], c->per_producer);
		for (unsigned i = 0; i < c->nc; i++)
			total += cons[i].count[p];
		if (total != run.sent[p])
			fprintf(stderr,
				"producer %u: %" PRIu64
				" items arrived, %" PRIu64 " sent\n",
				p, total, run.sent[p]);
		assert_int_equal(total, run.sent[p]);
		for (uint64_t s = 0; s < c->per_producer; s++) {
			unsigned want = s < run.sent[p] ? 1 : 0;

			if (run.seen[p][s] != want)
				fprintf(stderr,
					"producer %u seq %" PRIu64
					" seen %u times\n",
					p, s, (unsigned)run.seen[p][s]);
			assert_int_equal(run.seen[p][s], want);
		}
		free(run.seen[p]);
	}
	assert_int_not_equal(bp_ring_is_closed(run.r), 0);
	assert_int_equal(bp_ring_count(run.r), 0);
	assert_int_equal(bp_ring_free_count(run.r), c->cap);
	if (c->flags & BP_RING_HWM) {
		long hw = bp_ring_high_water(run.r);

		assert_true(hw >= 1 && hw <= (long)c->cap);
	}
	bp_ring_destroy(run.r);
}

/* ------------------------------------------------------------- the matrix */

struct shape {
	unsigned np, nc, flags;
};

static const struct shape shapes[] = {
	{1, 1, 0},	    {1, 1, BP_RING_SP},
	{1, 1, BP_RING_SC}, {1, 1, BP_RING_SP | BP_RING_SC},
	{1, 4, 0},	    {1, 4, BP_RING_SP},
	{4, 1, 0},	    {4, 1, BP_RING_SC},
	{4, 4, 0},	    {8, 8, 0},
};

static const unsigned batches[] = {1, 7, 32, 256};

/*
 * One shape (P x C, mode) over every batch size and both capacities (64:
 * wraps every few batches and runs full often; 4096: rarely full); the
 * flavour on each side and the high-water flag rotate between runs so that
 * every shape meets each of them.
 */
static void test_shape(void **state)
{
	const struct shape *sh = *state;
	unsigned j = (unsigned)(sh - shapes);

	for (unsigned i = 0; i < sizeof(batches) / sizeof(batches[0]); i++) {
		for (unsigned k = 0; k < 2; k++) {
			unsigned x = 2 * i + k + j;
			struct cfg c = {
				.np = sh->np,
				.nc = sh->nc,
				.flags = sh->flags |
					 (x % 3 == 0 ? BP_RING_HWM : 0),
				.cap = k ? 4096 : 64,
				.batch = batches[i],
				.pop = (enum op)(x % OP_COUNT),
				.cop = (enum op)((x / OP_COUNT + x + 1) %
						 OP_COUNT),
				.start = 0,
				.per_producer = items_per_run / sh->np,
			};

			run_one(&c);
		}
	}
}

/*
 * Positions wrap modulo 2^63 while threads race: start every shape a few
 * hundred items below the wrap, small ring, every flavour.
 */
static void test_near_wrap(void **state)
{
	(void)state;
	for (unsigned j = 0; j < sizeof(shapes) / sizeof(shapes[0]); j++) {
		const struct shape *sh = &shapes[j];
		struct cfg c = {
			.np = sh->np,
			.nc = sh->nc,
			.flags = sh->flags | BP_RING_HWM,
			.cap = 64,
			.batch = j % 2 ? 7 : 32,
			.pop = (enum op)(j % OP_COUNT),
			.cop = (enum op)((j + 2) % OP_COUNT),
			.start = BPI_RING_POS_SPACE - 300 - j,
			.per_producer = items_per_run / 2 / sh->np,
		};

		run_one(&c);
	}
}

/*
 * close races with enqueues: the main thread closes the ring mid-stream
 * while producers (multi-producer rings only: SP close belongs to the
 * producer) are still enqueueing. Whatever an enqueue reported as enqueued
 * (including zero-copy reservations made before close and finished after)
 * must arrive exactly once; consumers must not see end of stream early.
 */
static void test_close_race(void **state)
{
	(void)state;
	for (unsigned j = 0; j < sizeof(shapes) / sizeof(shapes[0]); j++) {
		const struct shape *sh = &shapes[j];

		if (sh->flags & BP_RING_SP)
			continue;
		static const struct {
			unsigned cap, batch;
			enum op pop;
			int near_wrap;
		} v[] = {
			{64, 7, OP_BURST, 0},
			{4096, 32, OP_ZC, 0},
			{64, 1, OP_WAIT, 0},
			{64, 32, OP_ZC, 1},
		};

		for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			struct cfg c = {
				.np = sh->np,
				.nc = sh->nc,
				.flags = sh->flags,
				.cap = v[i].cap,
				.batch = v[i].batch,
				.pop = v[i].pop,
				.cop = (enum op)((i + j) % OP_COUNT),
				.start = v[i].near_wrap
						 ? BPI_RING_POS_SPACE - 500
						 : 0,
				.per_producer = items_per_run / 2 / sh->np,
				.close_race = 1,
			};

			run_one(&c);
		}
	}
}

static const struct CMUnitTest *make_tests(size_t *n)
{
	static struct CMUnitTest tests[sizeof(shapes) / sizeof(shapes[0]) + 2];
	static char names[sizeof(shapes) / sizeof(shapes[0])][32];
	size_t k = 0;

	for (size_t j = 0; j < sizeof(shapes) / sizeof(shapes[0]); j++) {
		snprintf(names[j], sizeof(names[j]), "stress_%ux%u_%s",
			 shapes[j].np, shapes[j].nc,
			 mode_name(shapes[j].flags));
		tests[k++] = (struct CMUnitTest){names[j], test_shape, NULL,
						 NULL, (void *)&shapes[j]};
	}
	tests[k++] = (struct CMUnitTest){"stress_near_wrap", test_near_wrap,
					 NULL, NULL, NULL};
	tests[k++] = (struct CMUnitTest){"stress_close_race", test_close_race,
					 NULL, NULL, NULL};
	*n = k;
	return tests;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest *tests;
	size_t n;

	items_per_run = (BPT_TSAN ? 40000ul : 120000ul) * BPT_STRESS_SCALE;
	if (argc > 1)
		items_per_run = strtoul(argv[1], NULL, 0);
	items_per_run = bpt_env_ulong("BP_STRESS_ITEMS", items_per_run);
	if (items_per_run < 64)
		items_per_run = 64;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# %lu items per run%s\n", items_per_run,
	       BPT_TSAN ? " (TSAN)" : "");
	tests = make_tests(&n);
	return _cmocka_run_group_tests("ring_stress", tests, n, NULL, NULL);
}
