/* SPDX-License-Identifier: MIT */
/*
 * test_ring_unit - deterministic, single-threaded checks of the ring, wait
 * policy, waitq and error API against the contract in the public headers.
 * Each test that depends on the synchronisation mode runs once per mode
 * (MPMC, SP, SC, SP|SC).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <batchpipe/batchpipe.h>
#include "src/ring_internal.h"
#include "src/waitq.h"

#include "bp_test.h"

BPT_DEFINE_GLOBALS;

static const unsigned modes[4] = {0, BP_RING_SP, BP_RING_SC,
				  BP_RING_SP | BP_RING_SC};

static unsigned mode_of(void **state)
{
	return *(const unsigned *)*state;
}

static struct bp_ring *ring_new(size_t cap, unsigned flags)
{
	struct bp_ring *r = NULL;

	assert_int_equal(bp_ring_create(cap, flags, &r), 0);
	assert_non_null(r);
	return r;
}

static struct bp_ring *ring_new_at(size_t cap, unsigned flags, uint64_t start)
{
	struct bp_ring *r = NULL;

	assert_int_equal(bpi_ring_create_at(cap, flags, start, &r), 0);
	assert_non_null(r);
	return r;
}

/* Item number i as the ring sees it: an even pointer-sized value. */
static void *it(uint64_t i)
{
	return bpt_item(0, i);
}

static void fill_seq(void **v, unsigned n, uint64_t first)
{
	for (unsigned i = 0; i < n; i++)
		v[i] = it(first + i);
}

static void check_seq(void *const *v, unsigned n, uint64_t first)
{
	for (unsigned i = 0; i < n; i++)
		assert_ptr_equal(v[i], it(first + i));
}

static void check_occupancy(const struct bp_ring *r, unsigned count)
{
	assert_int_equal(bp_ring_count(r), count);
	assert_int_equal(bp_ring_free_count(r), bp_ring_capacity(r) - count);
}

/* Enqueue n items through a zero-copy reservation; returns the start result. */
static int zc_enqueue(struct bp_ring *r, int bulk, unsigned n, uint64_t first)
{
	struct bp_ring_zc zc;
	int k = bulk ? bp_ring_enqueue_zc_bulk_start(r, n, &zc)
		     : bp_ring_enqueue_zc_burst_start(r, n, &zc);

	if (k <= 0)
		return k;
	assert_int_equal(zc.count, (unsigned)k);
	assert_int_equal(zc.n[0] + zc.n[1], zc.count);
	assert_int_equal(zc.put, 0);
	for (int i = 0; i < k; i++)
		assert_int_equal(bp_ring_zc_put(&zc, it(first + (unsigned)i)),
				 0);
	assert_int_equal(zc.put, (unsigned)k);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), 0);
	return k;
}

/* ---------------------------------------------------------------- create */

/* Every bad argument to create is refused with -EINVAL and no ring. */
static void test_create_invalid(void **state)
{
	struct bp_ring *r = NULL;

	(void)state;
	assert_int_equal(bp_ring_create(8, 0, NULL), -EINVAL);
	assert_int_equal(bp_ring_create(0, 0, &r), -EINVAL);
	assert_null(r);
	assert_int_equal(
		bp_ring_create((size_t)BP_RING_MAX_CAPACITY + 1, 0, &r),
		-EINVAL);
	assert_null(r);
	assert_int_equal(bp_ring_create(SIZE_MAX, 0, &r), -EINVAL);
	assert_null(r);
	assert_int_equal(bp_ring_create(8, 0x8u, &r), -EINVAL);
	assert_null(r);
	assert_int_equal(bp_ring_create(8, 0x80000000u, &r), -EINVAL);
	assert_null(r);
	assert_int_equal(bp_ring_create(8, ~0u, &r), -EINVAL);
	assert_null(r);
	/* The test hook validates the same way. */
	assert_int_equal(bpi_ring_create_at(8, 0, 0, NULL), -EINVAL);
	assert_int_equal(bpi_ring_create_at(0, 0, 0, &r), -EINVAL);
	assert_int_equal(bpi_ring_create_at(8, 0x8u, 0, &r), -EINVAL);
	assert_null(r);
	bp_ring_destroy(NULL); /* accepted */
}

/* Capacity is rounded up to the next power of two; flags are kept. */
static void test_capacity_rounding(void **state)
{
	static const struct {
		size_t req, cap;
	} cases[] = {{1, 1},	   {2, 2},	  {3, 4},	{5, 8},
		     {8, 8},	   {1000, 1024},  {1024, 1024}, {1025, 2048},
		     {4097, 8192}, {65535, 65536}};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (unsigned m = 0; m < 4; m++) {
			unsigned flags = modes[m] | (i % 2 ? BP_RING_HWM : 0);
			struct bp_ring *r = ring_new(cases[i].req, flags);
			unsigned cap = bp_ring_capacity(r);

			if (cap != cases[i].cap)
				fprintf(stderr,
					"request %zu: capacity %u, want %zu\n",
					cases[i].req, cap, cases[i].cap);
			assert_int_equal(cap, cases[i].cap);
			assert_int_equal(cap & (cap - 1), 0);
			assert_int_equal(bp_ring_flags(r), flags);
			check_occupancy(r, 0);
			assert_int_equal(bp_ring_is_closed(r), 0);
			bp_ring_destroy(r);
		}
	}
}

/* A capacity-1 ring (the smallest) holds exactly one item at a time. */
static void test_capacity_one(void **state)
{
	struct bp_ring *r = ring_new(1, mode_of(state));
	void *v[2], *out[2] = {NULL, NULL};

	assert_int_equal(bp_ring_capacity(r), 1);
	for (uint64_t lap = 0; lap < 10; lap++) {
		fill_seq(v, 2, lap * 2);
		assert_int_equal(bp_ring_enqueue_burst(r, v, 2, NULL), 1);
		check_occupancy(r, 1);
		assert_int_equal(bp_ring_enqueue_bulk(r, v + 1, 1, NULL), 0);
		assert_int_equal(bp_ring_dequeue_burst(r, out, 2, NULL), 1);
		assert_ptr_equal(out[0], v[0]);
		check_occupancy(r, 0);
	}
	bp_ring_destroy(r);
}

/* ------------------------------------------------------- full and empty */

/* An empty ring gives 0 to every dequeue; a full one 0 to every enqueue. */
static void test_full_empty(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r = ring_new(8, mode);
	void *v[9], *out[9];
	struct bp_ring_zc zc;

	fill_seq(v, 9, 100);
	check_occupancy(r, 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 1, NULL), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 1, NULL), 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 0);
	if (mode & BP_RING_SC) {
		assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 4, &zc), 0);
		assert_int_equal(bp_ring_dequeue_zc_bulk_start(r, 4, &zc), 0);
	}

	assert_int_equal(bp_ring_enqueue_bulk(r, v, 8, NULL), 8);
	check_occupancy(r, 8);
	assert_int_equal(bp_ring_enqueue_burst(r, v + 8, 1, NULL), 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v + 8, 1, NULL), 0);
	assert_int_equal(bp_ring_enqueue_zc_burst_start(r, 1, &zc), 0);
	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 1, &zc), 0);
	check_occupancy(r, 8);

	assert_int_equal(bp_ring_dequeue_burst(r, out, 9, NULL), 8);
	check_seq(out, 8, 100);
	check_occupancy(r, 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 9, NULL), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 1, NULL), 0);
	bp_ring_destroy(r);
}

/* NULL is a valid item (bit 0 clear) and comes back as NULL. */
static void test_null_items(void **state)
{
	struct bp_ring *r = ring_new(4, mode_of(state));
	void *v[3] = {NULL, it(7), NULL}, *out[3] = {it(1), it(1), it(1)};

	assert_int_equal(bp_ring_enqueue_bulk(r, v, 3, NULL), 3);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 3, NULL), 3);
	assert_null(out[0]);
	assert_ptr_equal(out[1], it(7));
	assert_null(out[2]);
	bp_ring_destroy(r);
}

/* ------------------------------------------------------- bulk and burst */

/*
 * Bulk moves all n or nothing; burst moves as many as fit. free_space is the
 * room left (exact while only this thread has touched the ring, never more
 * than the real room); available is what is left (exact while quiet).
 */
static void test_bulk_burst(void **state)
{
	struct bp_ring *r = ring_new(8, mode_of(state));
	void *v[18], *out[16];
	unsigned fs = 12345, av = 12345;

	fill_seq(v, 18, 0);
	/* n == 0 moves nothing, with or without an items array. */
	assert_int_equal(bp_ring_enqueue_bulk(r, NULL, 0, NULL), 0);
	assert_int_equal(bp_ring_enqueue_burst(r, NULL, 0, NULL), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, NULL, 0, NULL), 0);
	assert_int_equal(bp_ring_dequeue_burst(r, NULL, 0, NULL), 0);
	/* NULL items with n > 0: -EINVAL, and the out count is not written */
	assert_int_equal(bp_ring_enqueue_bulk(r, NULL, 1, &fs), -EINVAL);
	assert_int_equal(bp_ring_enqueue_burst(r, NULL, 1, &fs), -EINVAL);
	assert_int_equal(fs, 12345);
	assert_int_equal(bp_ring_dequeue_bulk(r, NULL, 1, &av), -EINVAL);
	assert_int_equal(bp_ring_dequeue_burst(r, NULL, 1, &av), -EINVAL);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 9, &av), -EINVAL);
	assert_int_equal(av, 12345);
	assert_int_equal(bp_ring_enqueue_bulk(r, v + 5, 9, &fs), -EINVAL);
	assert_int_equal(fs, 12345);

	assert_int_equal(bp_ring_enqueue_bulk(r, v, 5, &fs), 5);
	assert_int_equal(fs, 3);
	/* Bulk of 4 with 3 free: nothing. */
	fs = 12345;
	assert_int_equal(bp_ring_enqueue_bulk(r, v + 5, 4, &fs), 0);
	assert_int_equal(fs, 3);
	check_occupancy(r, 5);
	/* Bulk larger than the whole ring: never fits (test_bulk_too_big). */
	assert_int_equal(bp_ring_enqueue_bulk(r, v + 5, 9, NULL), -EINVAL);
	/* Burst of 4 with 3 free: 3. */
	fs = 12345;
	assert_int_equal(bp_ring_enqueue_burst(r, v + 5, 4, &fs), 3);
	assert_int_equal(fs, 0);
	check_occupancy(r, 8);

	av = 12345;
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 3, &av), 3);
	assert_true(av <= 5);
	check_seq(out, 3, 0);
	check_occupancy(r, 5);
	av = 12345;
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 6, &av), 0);
	assert_true(av <= 5);
	av = 12345;
	assert_int_equal(bp_ring_dequeue_burst(r, out, 16, &av), 5);
	assert_int_equal(av, 0);
	check_seq(out, 5, 3);
	check_occupancy(r, 0);

	/* free_space after a consumer ran: never more than the real room. */
	assert_int_equal(bp_ring_enqueue_burst(r, v, 2, &fs), 2);
	assert_true(fs <= bp_ring_free_count(r));
	/* Burst of more than the capacity into an almost empty ring: 6. */
	assert_int_equal(bp_ring_enqueue_burst(r, v + 2, 16, &fs), 6);
	assert_int_equal(fs, 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 16, NULL), 8);
	check_seq(out, 8, 0);
	bp_ring_destroy(r);
}

/* ------------------------------------------------------- invalid input */

/*
 * An item with bit 0 set anywhere in a batch refuses the whole batch with
 * -EINVAL, in every enqueue flavour; nothing is enqueued.
 */
static void test_odd_item(void **state)
{
	struct bp_ring *r = ring_new(16, mode_of(state));
	void *v[4], *out[16];

	fill_seq(v, 3, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 3, NULL), 3);
	for (unsigned bad = 0; bad < 4; bad++) {
		fill_seq(v, 4, 10);
		v[bad] = (void *)((uintptr_t)v[bad] | 1);
		assert_int_equal(bp_ring_enqueue_bulk(r, v, 4, NULL), -EINVAL);
		check_occupancy(r, 3);
		assert_int_equal(bp_ring_enqueue_burst(r, v, 4, NULL), -EINVAL);
		check_occupancy(r, 3);
		assert_int_equal(bp_ring_enqueue_bulk_wait(r, v, 4, -1),
				 -EINVAL);
		check_occupancy(r, 3);
		assert_int_equal(bp_ring_enqueue_burst_wait(r, v, 4, -1),
				 -EINVAL);
		check_occupancy(r, 3);
		assert_int_equal(bp_ring_enqueue_burst_wait(r, v, 4, 0),
				 -EINVAL);
		check_occupancy(r, 3);
	}
	v[0] = (void *)(uintptr_t)1;
	assert_int_equal(bp_ring_enqueue_burst(r, v, 1, NULL), -EINVAL);
	v[0] = (void *)UINTPTR_MAX;
	assert_int_equal(bp_ring_enqueue_burst(r, v, 1, NULL), -EINVAL);
	check_occupancy(r, 3);
	/* Only the three good items come out. */
	assert_int_equal(bp_ring_dequeue_burst(r, out, 16, NULL), 3);
	check_seq(out, 3, 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 16, NULL), 0);
	bp_ring_destroy(r);
}

/* the longest run the run tests below take (their rings' capacity) */
#define RUN_MAX 64

/* Move the head of empty ring r on to slot `slot`, one item at a time;
 * *next is the position (and the number) of the next item. */
static void leaf_align(struct bp_ring *r, uint64_t *next, unsigned slot)
{
	while (*next % bp_ring_capacity(r) != slot) {
		void *one = it(*next), *back = NULL;

		assert_int_equal(bp_ring_enqueue_burst(r, &one, 1, NULL), 1);
		assert_int_equal(bp_ring_dequeue_burst(r, &back, 1, NULL), 1);
		assert_ptr_equal(back, one);
		(*next)++;
	}
}

/* Dequeue exactly `want` items, numbered from first, in bursts. */
static void leaf_take_all(struct bp_ring *r, unsigned want, uint64_t first)
{
	void *out[RUN_MAX];
	unsigned got = 0;

	while (got < want) {
		int k = bp_ring_dequeue_burst(r, out, want - got, NULL);

		assert_true(k > 0);
		check_seq(out, (unsigned)k, first + got);
		got += (unsigned)k;
	}
	check_occupancy(r, 0);
}

/*
 * Reservations A (n slots, p of them put) and B (b slots, all put) at the
 * head: a burst finds the p ready items of A and no more (a slot not
 * ready ends the run even with ready ones after it, as when another
 * producer publishes while the first is preempted), a bulk of n none, and
 * nothing is written past the p. Then the rest comes, in order.
 */
static void leaf_holes(struct bp_ring *r, uint64_t *next, unsigned n,
		       unsigned p, unsigned b)
{
	void *const mark = bpt_item(1, 7777); /* no test item is producer 1's */
	struct bp_ring_zc za, zb;
	void *out[RUN_MAX];
	int k;

	assert_true(n + b <= RUN_MAX);
	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, n, &za), (int)n);
	if (b)
		assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, b, &zb),
				 (int)b);
	for (unsigned i = 0; i < b; i++)
		assert_int_equal(bp_ring_zc_put(&zb, it(*next + n + i)), 0);
	for (unsigned i = 0; i < p; i++)
		assert_int_equal(bp_ring_zc_put(&za, it(*next + i)), 0);
	for (unsigned i = 0; i < RUN_MAX; i++)
		out[i] = mark;
	if (p < n)
		assert_int_equal(bp_ring_dequeue_bulk(r, out, n, NULL), 0);
	k = bp_ring_dequeue_burst(r, out, n + b, NULL);
	assert_int_equal(k, (int)p);
	check_seq(out, p, *next);
	for (unsigned i = p; i < RUN_MAX; i++)
		assert_ptr_equal(out[i], mark);
	for (unsigned i = p; i < n; i++)
		assert_int_equal(bp_ring_zc_put(&za, it(*next + i)), 0);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &za), 0);
	if (b)
		assert_int_equal(bp_ring_enqueue_zc_finish(r, &zb), 0);
	leaf_take_all(r, n + b - p, *next + p);
	*next += n + b;
}

/*
 * The pipeline's way in: reserve n, publish them, and exactly those n come
 * out, in order (a burst of the ring's capacity would also take a slot
 * written past them with this lap's tag).
 */
static void leaf_publish(struct bp_ring *r, uint64_t *next, unsigned n)
{
	void *v[RUN_MAX], *out[RUN_MAX];
	const unsigned cap = bp_ring_capacity(r);
	uint64_t pos;

	assert_true(n <= RUN_MAX && cap <= RUN_MAX);
	fill_seq(v, n, *next);
	assert_int_equal(bpi_ring_reserve_burst(r, n, &pos), (int)n);
	bpi_ring_publish(r, pos, v, n);
	check_occupancy(r, n);
	assert_int_equal(bp_ring_dequeue_burst(r, out, cap, NULL), (int)n);
	check_seq(out, n, *next);
	check_occupancy(r, 0);
	*next += n;
}

/*
 * The fast paths' runs of every small size (the inline leaf runs go four,
 * then two slots at a time, one item alone; 9 and 10 take the wide runs),
 * with the head at every slot of the array: partial runs (leaf_holes: p
 * of n put, then b more ready after the hole, b up to what keeps n + b a
 * leaf run, so the hole falls at every place of a run of up to 8; one
 * thread may hold two reservations in any mode), a copying enqueue of n
 * and its dequeue, the pipeline's reservation and publication of n
 * (bpi_ring_reserve_burst, bpi_ring_publish: leaf runs too, those that
 * wrap the array excepted), and an odd item anywhere in an enqueue of n,
 * refused with nothing enqueued.
 */
static void test_leaf_runs(void **state)
{
	const unsigned mode = mode_of(state);
	uint64_t next = 0;

	for (unsigned n = 1; n <= 10; n++) {
		struct bp_ring *r = ring_new(16, mode);

		for (unsigned slot = 0; slot < 16; slot++) {
			void *v[10];

			for (unsigned p = 0; p <= n; p++) {
				unsigned bmax = n < 8 ? 8 - n : 2;

				leaf_align(r, &next, slot);
				leaf_holes(r, &next, n, p, 0);
				if (p == n)
					continue;
				for (unsigned b = 1; b <= bmax; b++) {
					leaf_align(r, &next, slot);
					leaf_holes(r, &next, n, p, b);
				}
			}
			leaf_align(r, &next, slot);
			fill_seq(v, n, next);
			assert_int_equal(bp_ring_enqueue_burst(r, v, n, NULL),
					 (int)n);
			leaf_take_all(r, n, next);
			next += n;
			leaf_align(r, &next, slot);
			leaf_publish(r, &next, n);
			for (unsigned bad = 0; bad < n; bad++) {
				fill_seq(v, n, next);
				v[bad] = (void *)((uintptr_t)v[bad] | 1);
				assert_int_equal(
					bp_ring_enqueue_burst(r, v, n, NULL),
					-EINVAL);
				assert_int_equal(
					bp_ring_enqueue_bulk(r, v, n, NULL),
					-EINVAL);
				check_occupancy(r, 0);
			}
		}
		bp_ring_destroy(r);
	}
}

/*
 * The wide runs (sixteen slots a step, then four: src/ring_slots.c), as
 * test_leaf_runs does the leaf runs, in a ring of 64: runs of 11 to 48
 * with the head at slots that put them across the array's end and not,
 * a hole at every position (a slot not ready in any group of sixteen or
 * of four ends the burst there, with nothing copied past it), and the
 * pipeline's reservation and publication of each.
 */
static void test_wide_runs(void **state)
{
	static const unsigned sizes[] = {11, 12, 15, 16, 17, 20, 23,
					 24, 31, 32, 33, 40, 47, 48};
	static const unsigned slots[] = {0, 1, 5, 16, 31, 40, 57, 63};
	struct bp_ring *r = ring_new(RUN_MAX, mode_of(state));
	uint64_t next = 0;

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		const unsigned n = sizes[si];

		for (size_t li = 0; li < sizeof(slots) / sizeof(slots[0]);
		     li++) {
			for (unsigned p = 0; p <= n; p++) {
				leaf_align(r, &next, slots[li]);
				leaf_holes(r, &next, n, p, p < n ? 3 : 0);
			}
			leaf_align(r, &next, slots[li]);
			leaf_publish(r, &next, n);
		}
	}
	bp_ring_destroy(r);
}

/* NULL items with n > 0, and a bulk wait that can never succeed: -EINVAL. */
static void test_invalid_args(void **state)
{
	struct bp_ring *r = ring_new(8, mode_of(state));
	void *v[9], *out[9];

	fill_seq(v, 9, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, NULL, 1, NULL), -EINVAL);
	assert_int_equal(bp_ring_enqueue_burst(r, NULL, 1, NULL), -EINVAL);
	assert_int_equal(bp_ring_enqueue_bulk_wait(r, NULL, 1, 0), -EINVAL);
	assert_int_equal(bp_ring_enqueue_burst_wait(r, NULL, 1, 0), -EINVAL);
	check_occupancy(r, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 2, NULL), 2);
	assert_int_equal(bp_ring_dequeue_bulk(r, NULL, 1, NULL), -EINVAL);
	assert_int_equal(bp_ring_dequeue_burst(r, NULL, 1, NULL), -EINVAL);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, NULL, 1, 0), -EINVAL);
	assert_int_equal(bp_ring_dequeue_burst_wait(r, NULL, 1, 0), -EINVAL);
	check_occupancy(r, 2);

	/* bulk_wait for more than the capacity could never succeed. */
	assert_int_equal(bp_ring_enqueue_bulk_wait(r, v, 9, -1), -EINVAL);
	assert_int_equal(bp_ring_enqueue_bulk_wait(r, v, 9, 0), -EINVAL);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, out, 9, -1), -EINVAL);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, out, 9, 0), -EINVAL);
	check_occupancy(r, 2);
	/* A burst wait for more than the capacity is fine: it takes what is
	 * there. */
	assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 9, -1), 2);
	check_seq(out, 2, 0);
	assert_int_equal(bp_ring_enqueue_burst_wait(r, v, 9, -1), 8);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, out, 8, -1), 8);
	check_seq(out, 8, 0);
	bp_ring_destroy(r);
}

/*
 * A bulk operation for more than the capacity can never succeed: every
 * non-blocking flavour says so with -EINVAL (as the blocking ones do)
 * instead of 0, which a caller would retry forever. Nothing moves, on an
 * empty, a full and a closed ring; n == capacity still works.
 */
static void test_bulk_too_big(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r = ring_new(8, mode);
	struct bp_ring_zc zc;
	void *v[9], *out[9];
	unsigned fs = 12345, av = 12345;

	fill_seq(v, 9, 0);
	for (int round = 0; round < 3; round++) {
		/* round 0: empty; 1: full; 2: full and closed */
		assert_int_equal(bp_ring_enqueue_bulk(r, v, 9, &fs), -EINVAL);
		assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 9, &zc),
				 -EINVAL);
		assert_int_equal(bp_ring_dequeue_bulk(r, out, 9, &av), -EINVAL);
		if (mode & BP_RING_SC)
			assert_int_equal(
				bp_ring_dequeue_zc_bulk_start(r, 9, &zc),
				-EINVAL);
		check_occupancy(r, round ? 8 : 0);
		if (round == 0)
			assert_int_equal(bp_ring_enqueue_bulk(r, v, 8, NULL),
					 8);
		if (round == 1)
			assert_int_equal(bp_ring_close(r), 0);
	}
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 8, NULL), 8);
	check_seq(out, 8, 0);
	bp_ring_destroy(r);
}

/*
 * The quiet calls leave the ring's eventcounts alone even with a sleeper
 * announced on them (the plain calls disarm and bump the word, waking
 * it); on a BPI_RING_QUIET ring blocking calls refuse with -EOPNOTSUPP
 * instead of sleeping where a quiet call would not wake them, close still
 * wakes, and the flag is private: bp_ring_create refuses it and
 * bp_ring_flags hides it.
 */
static void test_quiet(void **state)
{
	struct bp_ring *r;
	void *v[2], *out[2];

	(void)state;
	fill_seq(v, 2, 0);
	r = NULL;
	assert_int_equal(bp_ring_create(8, BPI_RING_QUIET, &r), -EINVAL);
	assert_null(r);
	for (int quiet = 0; quiet < 2; quiet++) {
		unsigned flags = BP_RING_SP | BP_RING_SC | BP_RING_HWM |
				 (quiet ? BPI_RING_QUIET : 0);
		struct bpi_waitq *ne, *nf;
		uint32_t kne, knf;

		r = ring_new_at(8, flags, 0);
		assert_int_equal(bp_ring_flags(r),
				 BP_RING_SP | BP_RING_SC | BP_RING_HWM);
		ne = bpi_ring_not_empty(r);
		nf = bpi_ring_not_full(r);
		/* announce a sleeper on each, as bpi_wait_loop does */
		kne = bpi_waitq_prepare(ne);
		knf = bpi_waitq_prepare(nf);
		if (quiet) {
			uint64_t pos;

			assert_int_equal(bpi_ring_reserve_burst(r, 2, &pos), 2);
			bpi_ring_publish_quiet(r, pos, v, 2);
			assert_int_equal(
				bpi_ring_dequeue_burst_quiet(r, out, 2), 2);
		} else {
			assert_int_equal(bp_ring_enqueue_burst(r, v, 2, NULL),
					 2);
			assert_int_equal(bp_ring_dequeue_burst(r, out, 2, NULL),
					 2);
		}
		check_seq(out, 2, 0);
		/* the key still matches: the word was not woken */
		assert_int_equal(atomic_load(&ne->seq) == kne, quiet);
		assert_int_equal(atomic_load(&nf->seq) == knf, quiet);
		if (quiet) {
			assert_int_equal(
				bp_ring_enqueue_burst_wait(r, v, 1, -1),
				-EOPNOTSUPP);
			assert_int_equal(
				bp_ring_dequeue_bulk_wait(r, out, 1, 0),
				-EOPNOTSUPP);
			assert_int_equal(bp_ring_close(r), 0);
			assert_true(atomic_load(&ne->seq) != kne);
			assert_true(atomic_load(&nf->seq) != knf);
		}
		bpi_waitq_cancel(ne);
		bpi_waitq_cancel(nf);
		bp_ring_destroy(r);
	}
}

/* ---------------------------------------------------- zero-copy producer */

/*
 * Producer zero-copy works in every mode: a reservation that straddles the
 * end of the slot array is split in two parts, items go in ring order, odd
 * items and puts past the reservation are refused, finish needs every slot
 * put, and bulk/burst starts size the reservation like the copy API.
 */
static void test_zc_producer(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r = ring_new(8, mode);
	struct bp_ring_zc zc;
	void *v[8], *out[8];
	int k;

	/* Move the head to slot 5 so the next reservation of 6 wraps. */
	fill_seq(v, 5, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 5, NULL), 5);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 5, NULL), 5);

	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 6, &zc), 6);
	assert_int_equal(zc.count, 6);
	assert_int_equal(zc.n[0], 3);
	assert_int_equal(zc.n[1], 3);
	assert_int_equal(zc.put, 0);
	for (unsigned i = 0; i < 6; i++) {
		/* An odd item is refused and nothing is stored. */
		assert_int_equal(
			bp_ring_zc_put(&zc, (void *)((uintptr_t)it(99) | 1)),
			-EINVAL);
		assert_int_equal(zc.put, i);
		assert_int_equal(bp_ring_zc_put(&zc, it(100 + i)), 0);
		assert_int_equal(zc.put, i + 1);
	}
	/* Past the reservation. */
	assert_int_equal(bp_ring_zc_put(&zc, it(999)), -ERANGE);
	assert_int_equal(zc.put, 6);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), 0);
	check_occupancy(r, 6);

	/* Bulk start with too little room reserves nothing; burst what fits. */
	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 3, &zc), 0);
	check_occupancy(r, 6);
	k = bp_ring_enqueue_zc_burst_start(r, 5, &zc);
	assert_int_equal(k, 2);
	assert_int_equal(zc.count, 2);
	assert_int_equal(bp_ring_zc_put(&zc, it(106)), 0);
	assert_int_equal(bp_ring_zc_put(&zc, it(107)), 0);
	assert_int_equal(bp_ring_zc_put(&zc, it(108)), -ERANGE);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), 0);
	check_occupancy(r, 8);

	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 8);
	check_seq(out, 8, 100);

	/* zc and copy enqueues interleave in ring order. */
	assert_int_equal(zc_enqueue(r, 1, 3, 200), 3);
	fill_seq(v, 2, 203);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 2, NULL), 2);
	assert_int_equal(zc_enqueue(r, 0, 3, 205), 3);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 8, NULL), 8);
	check_seq(out, 8, 200);
	bp_ring_destroy(r);
}

/*
 * Finish with slots not yet put is refused with -EINVAL and can be retried
 * once they are; items put before finish are already visible to consumers.
 */
static void test_zc_producer_finish(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r = ring_new(8, mode);
	struct bp_ring_zc zc;
	void *out[8];

	assert_int_equal(bp_ring_enqueue_zc_burst_start(r, 3, &zc), 3);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), -EINVAL);
	assert_int_equal(bp_ring_zc_put(&zc, it(1)), 0);
	assert_int_equal(bp_ring_zc_put(&zc, it(2)), 0);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), -EINVAL);

	/* "each becomes visible to consumers as soon as it is put" */
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 2);
	assert_ptr_equal(out[0], it(1));
	assert_ptr_equal(out[1], it(2));

	assert_int_equal(bp_ring_zc_put(&zc, it(3)), 0);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 1);
	assert_ptr_equal(out[0], it(3));
	check_occupancy(r, 0);

	/* n = 0 reserves nothing. */
	assert_int_equal(bp_ring_enqueue_zc_burst_start(r, 0, &zc), 0);
	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 0, &zc), 0);
	bp_ring_destroy(r);
}

/*
 * `available` is the number of items left after the dequeue, as ring.h
 * says: reserved slots count (they are committed and will arrive), so it is
 * exactly the occupancy a quiet ring shows.
 */
static void test_available_counts_reserved(void **state)
{
	struct bp_ring *r = ring_new(8, mode_of(state));
	struct bp_ring_zc zc;
	void *v[2] = {it(1), it(2)}, *out[8];
	unsigned av;

	assert_int_equal(bp_ring_enqueue_bulk(r, v, 2, NULL), 2);
	assert_int_equal(bp_ring_enqueue_zc_burst_start(r, 3, &zc), 3);
	assert_int_equal(bp_ring_zc_put(&zc, it(3)), 0);
	/* Ready: 1, 2, 3. Reserved, not put: two slots. */
	av = 12345;
	assert_int_equal(bp_ring_dequeue_burst(r, out, 1, &av), 1);
	assert_int_equal(av, 4);
	av = 12345;
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 2, &av), 2);
	assert_ptr_equal(out[1], it(3));
	assert_int_equal(av, 2);
	/* nothing ready: the reserved slots are not taken, still counted */
	av = 12345;
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, &av), 0);
	assert_int_equal(av, 2);
	assert_int_equal(bp_ring_zc_put(&zc, it(4)), 0);
	assert_int_equal(bp_ring_zc_put(&zc, it(5)), 0);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), 0);
	av = 12345;
	assert_int_equal(bp_ring_dequeue_burst(r, out, 1, &av), 1);
	assert_int_equal(av, 1);
	bp_ring_destroy(r);
}

/*
 * bpi_ring_ready: false while the next slot is reserved but not published
 * (bp_ring_count already counts it), true once it is, true at the end of a
 * closed stream, false on a closed ring whose last reservation is pending.
 */
static void test_ready(void **state)
{
	struct bp_ring *r = ring_new(8, mode_of(state));
	void *v[2] = {it(1), it(2)}, *out[8];
	uint64_t pos;

	assert_int_equal(bpi_ring_ready(r), 0);
	assert_int_equal(bpi_ring_reserve_burst(r, 2, &pos), 2);
	assert_int_equal(bp_ring_count(r), 2);
	assert_int_equal(bpi_ring_ready(r), 0);
	bpi_ring_publish(r, pos, v, 2);
	assert_int_equal(bpi_ring_ready(r), 1);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 2);
	assert_int_equal(bpi_ring_ready(r), 0);
	/* closed with a reservation pending: not ready until published */
	assert_int_equal(bpi_ring_reserve_burst(r, 1, &pos), 1);
	bp_ring_close(r);
	assert_int_equal(bpi_ring_ready(r), 0);
	bpi_ring_publish(r, pos, v, 1);
	assert_int_equal(bpi_ring_ready(r), 1);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 1);
	/* closed and drained: ready, and the dequeue says end of stream */
	assert_int_equal(bpi_ring_ready(r), 1);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), -EPIPE);
	bp_ring_destroy(r);
}

/* ---------------------------------------------------- zero-copy consumer */

/* Consumer zero-copy is refused with -EOPNOTSUPP on multi-consumer rings. */
static void test_zc_consumer_mc(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r;
	struct bp_ring_zc zc;
	void *v[4];

	assert_false(mode & BP_RING_SC);
	r = ring_new(8, mode);
	fill_seq(v, 4, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 4, NULL), 4);
	assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 2, &zc),
			 -EOPNOTSUPP);
	assert_int_equal(bp_ring_dequeue_zc_bulk_start(r, 2, &zc), -EOPNOTSUPP);
	check_occupancy(r, 4);
	bp_ring_destroy(r);
}

/*
 * Consumer zero-copy (SC): the items are read in place, across the end of
 * the slot array; finish(m) releases the first m and leaves the rest at the
 * head; m > k is -EINVAL; bulk needs all n; a closed, drained ring is -EPIPE.
 */
static void test_zc_consumer(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r;
	struct bp_ring_zc zc;
	void *v[8], *out[8];

	assert_true(mode & BP_RING_SC);
	r = ring_new(8, mode);
	/* Put the head at slot 6: items 0..5 sit in slots 6,7,0,1,2,3. */
	fill_seq(v, 6, 50);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 6, NULL), 6);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 6, NULL), 6);
	fill_seq(v, 6, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 6, NULL), 6);

	assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 4, &zc), 4);
	assert_int_equal(zc.count, 4);
	assert_int_equal(zc.n[0], 2);
	assert_int_equal(zc.n[1], 2);
	for (unsigned i = 0; i < 4; i++)
		assert_ptr_equal(bp_ring_zc_get(&zc, i), it(i));
	assert_int_equal(bp_ring_dequeue_zc_finish(r, &zc, 5), -EINVAL);
	assert_int_equal(bp_ring_dequeue_zc_finish(r, &zc, 2), 0);
	check_occupancy(r, 4);

	/* finish(0) releases nothing. */
	assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 8, &zc), 4);
	for (unsigned i = 0; i < 4; i++)
		assert_ptr_equal(bp_ring_zc_get(&zc, i), it(2 + i));
	assert_int_equal(bp_ring_dequeue_zc_finish(r, &zc, 0), 0);
	check_occupancy(r, 4);

	/* Bulk: all n or none. */
	assert_int_equal(bp_ring_dequeue_zc_bulk_start(r, 5, &zc), 0);
	check_occupancy(r, 4);
	assert_int_equal(bp_ring_dequeue_zc_bulk_start(r, 3, &zc), 3);
	assert_ptr_equal(bp_ring_zc_get(&zc, 0), it(2));
	assert_int_equal(bp_ring_dequeue_zc_finish(r, &zc, 3), 0);
	check_occupancy(r, 1);

	/* The rest comes out by copy, in order. */
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 1);
	assert_ptr_equal(out[0], it(5));
	assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 8, &zc), 0);

	/* End of stream. */
	fill_seq(v, 2, 60);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 2, NULL), 2);
	assert_int_equal(bp_ring_close(r), 0);
	assert_int_equal(bp_ring_dequeue_zc_bulk_start(r, 3, &zc), -EPIPE);
	assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 3, &zc), 2);
	assert_int_equal(bp_ring_dequeue_zc_finish(r, &zc, 2), 0);
	assert_int_equal(bp_ring_dequeue_zc_burst_start(r, 3, &zc), -EPIPE);
	bp_ring_destroy(r);
}

/* -------------------------------------------------- many laps, any mode */

struct lcg {
	uint64_t s;
};

static unsigned lcg_next(struct lcg *g, unsigned bound)
{
	g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((g->s >> 33) % bound);
}

/*
 * Drive one ring through `iters` random steps with a model of its content:
 * enqueue or dequeue a random batch with a random flavour (bulk, burst,
 * zero-copy bulk/burst) and check the exact count moved, FIFO values,
 * count/free_count after each step, and the bounds on free_space/available.
 */
static void run_laps(struct bp_ring *r, unsigned iters, uint64_t seed)
{
	unsigned cap = bp_ring_capacity(r);
	int sc = (bp_ring_flags(r) & BP_RING_SC) != 0;
	uint64_t in = 0, outn = 0;
	struct lcg g = {seed};
	void **v = calloc(cap + 2, sizeof(void *));
	void **out = calloc(cap + 2, sizeof(void *));

	assert_non_null(v);
	assert_non_null(out);
	for (unsigned step = 0; step < iters; step++) {
		unsigned count = (unsigned)(in - outn);
		unsigned n = lcg_next(&g, cap + 2); /* 0 .. cap+1 */
		unsigned op = lcg_next(&g, 4);
		unsigned fs = ~0u, av = ~0u;
		int want, got;

		/* Lean towards the side that keeps the ring cycling. */
		if (lcg_next(&g, 2)) {
			unsigned room = cap - count;
			int bulk = (op & 1) != 0;

			/* a bulk of more than cap can never fit: -EINVAL */
			want = bulk ? (n > cap	   ? -EINVAL
				       : n <= room ? (int)n
						   : 0)
				    : (int)(n < room ? n : room);
			if (op >= 2) {
				got = zc_enqueue(r, bulk, n, in);
			} else {
				fill_seq(v, n, in);
				got = bulk ? bp_ring_enqueue_bulk(r, v, n, &fs)
					   : bp_ring_enqueue_burst(r, v, n,
								   &fs);
				if (n > 0 && got >= 0)
					assert_true(
						fs <=
						room - (unsigned)(got > 0 ? got
									  : 0));
			}
			assert_int_equal(got, want);
			in += (unsigned)(got > 0 ? got : 0);
		} else {
			int bulk = (op & 1) != 0;

			want = bulk ? (n > cap	    ? -EINVAL
				       : n <= count ? (int)n
						    : 0)
				    : (int)(n < count ? n : count);
			if (op >= 2 && sc) {
				struct bp_ring_zc zc;
				unsigned m;

				got = bulk ? bp_ring_dequeue_zc_bulk_start(r, n,
									   &zc)
					   : bp_ring_dequeue_zc_burst_start(
						     r, n, &zc);
				assert_int_equal(got, want);
				for (int i = 0; i < got; i++)
					assert_ptr_equal(
						bp_ring_zc_get(&zc,
							       (unsigned)i),
						it(outn + (unsigned)i));
				m = got > 0 ? lcg_next(&g, (unsigned)got + 1)
					    : 0;
				if (got > 0)
					assert_int_equal(
						bp_ring_dequeue_zc_finish(
							r, &zc, m),
						0);
				got = (int)m;
			} else {
				got = bulk ? bp_ring_dequeue_bulk(r, out, n,
								  &av)
					   : bp_ring_dequeue_burst(r, out, n,
								   &av);
				assert_int_equal(got, want);
				/* not written on -EINVAL */
				bool av_set = got != -EINVAL;
				got = got > 0 ? got : 0;
				check_seq(out, (unsigned)got, outn);
				if (n > 0 && av_set)
					assert_true(av <=
						    count - (unsigned)got);
			}
			outn += (unsigned)got;
		}
		check_occupancy(r, (unsigned)(in - outn));
	}
	/* Drain and check the tail. */
	unsigned left = (unsigned)(in - outn);

	assert_int_equal(bp_ring_dequeue_burst(r, out, cap + 2, NULL),
			 (int)left);
	check_seq(out, left, outn);
	check_occupancy(r, 0);
	free(v);
	free(out);
}

/* FIFO and exact counts over thousands of laps with varied batch sizes. */
static void test_wrap_laps(void **state)
{
	unsigned mode = mode_of(state);
	static const unsigned caps[] = {1, 2, 8, 16, 64};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct bp_ring *r = ring_new(caps[i], mode);

		run_laps(r, 20000, 42 + i + mode * 100);
		bp_ring_destroy(r);
	}
}

/*
 * Positions wrap modulo 2^63. Start just below the wrap (at several offsets
 * relative to the capacity) and run the random laps through it; check
 * full/empty, count, FIFO and close on the far side too.
 */
static void test_index_overflow(void **state)
{
	unsigned mode = mode_of(state);
	static const unsigned caps[] = {1, 8, 64};

	for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		unsigned cap = caps[c];
		const uint64_t starts[] = {
			BPI_RING_POS_SPACE - 1,
			BPI_RING_POS_SPACE - 5,
			BPI_RING_POS_SPACE - cap - 3,
			BPI_RING_POS_SPACE - 2 * (uint64_t)cap,
			BPI_RING_POS_SPACE - 2 * (uint64_t)cap - 1,
			BPI_RING_POS_SPACE / 2 + 12345,
			0,
		};

		for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]);
		     s++) {
			struct bp_ring *r =
				ring_new_at(cap, mode | BP_RING_HWM, starts[s]);
			void *v[64], *out[64];
			unsigned rcap = bp_ring_capacity(r);

			assert_int_equal(rcap, cap);
			check_occupancy(r, 0);
			assert_int_equal(bp_ring_high_water(r), 0);
			/* Step over the wrap one item at a time. */
			for (uint64_t i = 0; i < 3 * (uint64_t)cap + 8; i++) {
				v[0] = it(i);
				assert_int_equal(
					bp_ring_enqueue_burst(r, v, 1, NULL),
					1);
				check_occupancy(r, 1);
				assert_int_equal(
					bp_ring_dequeue_burst(r, out, 2, NULL),
					1);
				assert_ptr_equal(out[0], it(i));
				check_occupancy(r, 0);
			}
			assert_int_equal(bp_ring_high_water(r), 1);
			/* Full and empty straddling the wrap. */
			bp_ring_destroy(r);
			r = ring_new_at(cap, mode | BP_RING_HWM, starts[s]);
			fill_seq(v, cap, 1000);
			assert_int_equal(bp_ring_enqueue_burst(r, v, cap, NULL),
					 (int)cap);
			check_occupancy(r, cap);
			assert_int_equal(bp_ring_high_water(r), (long)cap);
			assert_int_equal(bp_ring_enqueue_burst(r, v, 1, NULL),
					 0);
			assert_int_equal(
				bp_ring_dequeue_bulk(r, out, cap, NULL),
				(int)cap);
			check_seq(out, cap, 1000);
			check_occupancy(r, 0);
			assert_int_equal(bp_ring_dequeue_burst(r, out, 1, NULL),
					 0);
			/* Random laps through (and well past) the wrap. */
			run_laps(r, 2000, starts[s] ^ cap);
			/* Close after the wrap. */
			fill_seq(v, cap, 7);
			assert_int_equal(bp_ring_enqueue_bulk(r, v, cap, NULL),
					 (int)cap);
			assert_int_equal(bp_ring_close(r), 0);
			assert_int_equal(bp_ring_enqueue_burst(r, v, 1, NULL),
					 -EPIPE);
			check_occupancy(r, cap);
			assert_int_equal(
				bp_ring_dequeue_burst(r, out, 64, NULL),
				(int)cap);
			check_seq(out, cap, 7);
			assert_int_equal(
				bp_ring_dequeue_burst(r, out, 64, NULL),
				-EPIPE);
			bp_ring_destroy(r);
		}
	}
}

/* ----------------------------------------------------------------- close */

/*
 * close: enqueues fail with -EPIPE (also the blocking ones, at once);
 * dequeues drain what is left, then -EPIPE; a bulk dequeue of more than is
 * left is -EPIPE while a burst still drains; idempotent.
 */
static void test_close(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r = ring_new(8, mode);
	struct bp_ring_zc zc;
	void *v[8], *out[8];

	fill_seq(v, 8, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 5, NULL), 5);
	assert_int_equal(bp_ring_is_closed(r), 0);
	assert_int_equal(bp_ring_close(r), 0);
	assert_int_not_equal(bp_ring_is_closed(r), 0);
	assert_int_equal(bp_ring_close(r), 0);
	assert_int_not_equal(bp_ring_is_closed(r), 0);

	assert_int_equal(bp_ring_enqueue_bulk(r, v, 1, NULL), -EPIPE);
	assert_int_equal(bp_ring_enqueue_burst(r, v, 1, NULL), -EPIPE);
	assert_int_equal(bp_ring_enqueue_bulk_wait(r, v, 1, -1), -EPIPE);
	assert_int_equal(bp_ring_enqueue_burst_wait(r, v, 1, -1), -EPIPE);
	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 1, &zc), -EPIPE);
	assert_int_equal(bp_ring_enqueue_zc_burst_start(r, 1, &zc), -EPIPE);
	check_occupancy(r, 5);

	assert_int_equal(bp_ring_dequeue_bulk(r, out, 2, NULL), 2);
	check_seq(out, 2, 0);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, out, 1, -1), 1);
	check_seq(out, 1, 2);
	/* Two left: a bulk of three is end of stream, a burst still drains. */
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 3, NULL), -EPIPE);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, out, 3, -1), -EPIPE);
	check_occupancy(r, 2);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 2);
	check_seq(out, 2, 3);
	check_occupancy(r, 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), -EPIPE);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 1, NULL), -EPIPE);
	assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 8, -1), -EPIPE);
	assert_int_equal(bp_ring_dequeue_bulk_wait(r, out, 1, -1), -EPIPE);
	assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 8, 0), -EPIPE);
	/* n = 0 moves nothing and says 0, even at the end of the stream */
	assert_int_equal(bp_ring_dequeue_burst(r, out, 0, NULL), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 0, NULL), 0);
	assert_int_equal(bp_ring_enqueue_burst(r, v, 0, NULL), 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 0, NULL), 0);
	assert_int_equal(bpi_ring_dequeue_burst_nowake(r, out, 0), 0);
	assert_int_equal(bp_ring_close(r), 0);
	bp_ring_destroy(r);

	/*
	 * Slots reserved before close still arrive: while a zero-copy
	 * reservation is open the stream has not ended (0, not -EPIPE), and
	 * the reservation can be put and finished after close.
	 */
	r = ring_new(8, mode);
	fill_seq(v, 1, 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 1, NULL), 1);
	assert_int_equal(bp_ring_enqueue_zc_bulk_start(r, 2, &zc), 2);
	assert_int_equal(bp_ring_close(r), 0);
	assert_int_equal(bp_ring_enqueue_burst(r, v, 1, NULL), -EPIPE);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 1);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 2, NULL), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 3, NULL), -EPIPE);
	assert_int_equal(bp_ring_zc_put(&zc, it(1)), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 2, NULL), 0);
	assert_int_equal(bp_ring_zc_put(&zc, it(2)), 0);
	assert_int_equal(bp_ring_enqueue_zc_finish(r, &zc), 0);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 2, NULL), 2);
	check_seq(out, 2, 1);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), -EPIPE);
	bp_ring_destroy(r);

	/* Closing an empty ring ends the stream at once. */
	r = ring_new(8, mode);
	assert_int_equal(bp_ring_close(r), 0);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 8, NULL), -EPIPE);
	assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 8, 1000000),
			 -EPIPE);
	check_occupancy(r, 0);
	bp_ring_destroy(r);
}

/* ------------------------------------------------------- high-water mark */

/*
 * The high-water mark is the largest count seen after an enqueue, sampled
 * once per min(256, capacity / 8) items and on every operation at least
 * that big: such an operation always updates it, it never goes down, it
 * never exceeds the real maximum, and it lags that by less than one
 * interval when items arrive one by one.
 */
static void test_high_water(void **state)
{
	unsigned mode = mode_of(state);
	struct bp_ring *r = ring_new(16, mode);
	static void *big[4096];
	void *v[16], *out[16];
	long hw;

	assert_int_equal(bp_ring_high_water(r), -EOPNOTSUPP);
	bp_ring_destroy(r);

	/* Capacity 16: interval 2, so every operation of >= 2 items samples. */
	r = ring_new(16, mode | BP_RING_HWM);
	assert_int_equal(bp_ring_flags(r), mode | BP_RING_HWM);
	fill_seq(v, 16, 0);
	assert_int_equal(bp_ring_high_water(r), 0);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 5, NULL), 5);
	assert_int_equal(bp_ring_high_water(r), 5);
	assert_int_equal(bp_ring_dequeue_bulk(r, out, 3, NULL), 3);
	assert_int_equal(bp_ring_high_water(r), 5);
	assert_int_equal(bp_ring_enqueue_bulk(r, v, 2, NULL), 2);
	/* Count is now 4: the mark stays at 5. */
	assert_int_equal(bp_ring_high_water(r), 5);
	assert_int_equal(zc_enqueue(r, 1, 4, 0), 4);
	assert_int_equal(bp_ring_high_water(r), 8);
	assert_int_equal(bp_ring_enqueue_burst(r, v, 16, NULL), 8);
	assert_int_equal(bp_ring_high_water(r), 16);
	assert_int_equal(bp_ring_dequeue_burst(r, out, 16, NULL), 16);
	assert_int_equal(bp_ring_high_water(r), 16);
	bp_ring_destroy(r);

	/* Capacity 4096: interval 256. */
	r = ring_new(4096, mode | BP_RING_HWM);
	fill_seq(big, 4096, 0);
	for (unsigned i = 0; i < 1000; i++)
		assert_int_equal(bp_ring_enqueue_burst(r, big + i, 1, NULL), 1);
	hw = bp_ring_high_water(r);
	assert_true(hw > 1000 - 256 && hw <= 1000);
	assert_int_equal(bp_ring_dequeue_burst(r, big, 4096, NULL), 1000);
	fill_seq(big, 4096, 0);
	/* A big operation samples, but 300 < the mark: unchanged. */
	assert_int_equal(bp_ring_enqueue_bulk(r, big, 300, NULL), 300);
	assert_int_equal(bp_ring_high_water(r), hw);
	assert_int_equal(bp_ring_enqueue_bulk(r, big, 2000, NULL), 2000);
	assert_int_equal(bp_ring_high_water(r), 2300);
	assert_int_equal(zc_enqueue(r, 0, 256, 0), 256);
	assert_int_equal(bp_ring_high_water(r), 2556);
	bp_ring_destroy(r);
}

/* ------------------------------------------------------------- timeouts */

static const enum bp_wait_strategy strategies[3] = {
	BP_WAIT_SPIN_SLEEP, BP_WAIT_BUSY_POLL, BP_WAIT_SLEEP};

#define MS (INT64_C(1000000))

/* rc must be -ETIMEDOUT, reached no earlier than tmo after t0. */
static void check_timed_out(int rc, int64_t t0, int64_t tmo)
{
	int64_t dt = bpt_now_ns() - t0;

	assert_int_equal(rc, -ETIMEDOUT);
	if (tmo > 0)
		assert_true(dt >= tmo - MS / 2); /* futex granularity */
	assert_true(dt < 5000 * MS);		 /* only a loose upper bound */
}

#define EXPECT_TIMEOUT(call, tmo)                                              \
	do {                                                                   \
		int64_t t0_ = bpt_now_ns();                                    \
		int rc_ = (call);                                              \
		check_timed_out(rc_, t0_, (tmo));                              \
	} while (0)

/*
 * Every blocking call that cannot move anything returns -ETIMEDOUT no
 * earlier than its timeout (20 ms), with every wait strategy; timeout 0
 * returns at once. Only a loose upper bound (seconds): the clock is noisy.
 */
static void test_timeouts(void **state)
{
	unsigned mode = mode_of(state);

	for (unsigned s = 0; s < 3; s++) {
		struct bp_ring *r = ring_new(4, mode);
		struct bp_wait_policy p;
		void *v[4], *out[4];

		bp_wait_policy_init(&p);
		p.strategy = strategies[s];
		assert_int_equal(bp_ring_set_wait_policy(r, &p), 0);
		fill_seq(v, 4, 0);

		/* Empty ring: dequeues time out. */
		EXPECT_TIMEOUT(bp_ring_dequeue_burst_wait(r, out, 1, 20 * MS),
			       20 * MS);
		EXPECT_TIMEOUT(bp_ring_dequeue_bulk_wait(r, out, 1, 20 * MS),
			       20 * MS);
		EXPECT_TIMEOUT(bp_ring_dequeue_burst_wait(r, out, 1, 0), 0);
		EXPECT_TIMEOUT(bp_ring_dequeue_bulk_wait(r, out, 1, 0), 0);
		/* One item, bulk of two: times out and leaves the item. */
		assert_int_equal(bp_ring_enqueue_bulk(r, v, 1, NULL), 1);
		EXPECT_TIMEOUT(bp_ring_dequeue_bulk_wait(r, out, 2, 20 * MS),
			       20 * MS);
		check_occupancy(r, 1);
		/* A burst with something there returns at once. */
		assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 2, 0), 1);
		assert_ptr_equal(out[0], v[0]);

		/* Full ring: enqueues time out. */
		assert_int_equal(bp_ring_enqueue_bulk(r, v, 4, NULL), 4);
		EXPECT_TIMEOUT(bp_ring_enqueue_bulk_wait(r, v, 1, 20 * MS),
			       20 * MS);
		EXPECT_TIMEOUT(bp_ring_enqueue_burst_wait(r, v, 1, 20 * MS),
			       20 * MS);
		EXPECT_TIMEOUT(bp_ring_enqueue_bulk_wait(r, v, 1, 0), 0);
		EXPECT_TIMEOUT(bp_ring_enqueue_burst_wait(r, v, 1, 0), 0);
		check_occupancy(r, 4);
		/* Three free, bulk of four: times out, nothing enqueued. */
		assert_int_equal(bp_ring_dequeue_bulk(r, out, 3, NULL), 3);
		EXPECT_TIMEOUT(bp_ring_enqueue_bulk_wait(r, v, 4, 20 * MS),
			       20 * MS);
		check_occupancy(r, 1);
		assert_int_equal(bp_ring_enqueue_burst_wait(r, v, 4, 0), 3);
		check_occupancy(r, 4);
		bp_ring_destroy(r);
	}
}

/* ---------------------------------------------------------- wait policy */

/* Defaults as documented; unknown strategies refused by check and set. */
static void test_wait_policy(void **state)
{
	struct bp_wait_policy p;
	struct bp_ring *r = ring_new(8, 0);

	(void)state;
	memset(&p, 0xa5, sizeof(p));
	bp_wait_policy_init(&p);
	assert_int_equal(p.strategy, BP_WAIT_SPIN_SLEEP);
	assert_int_equal(p.spin_ns, 20000);
	assert_int_equal(p.yields, 8);
	assert_int_equal(bp_wait_policy_check(&p), 0);
	assert_int_equal(bp_ring_set_wait_policy(r, &p), 0);
	for (unsigned s = 0; s < 3; s++) {
		p.strategy = strategies[s];
		p.spin_ns = 0;
		p.yields = 0;
		assert_int_equal(bp_wait_policy_check(&p), 0);
		assert_int_equal(bp_ring_set_wait_policy(r, &p), 0);
	}
	static const int bad[] = {3, 4, 100, -1, INT_MAX, INT_MIN};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bp_wait_policy_init(&p);
		p.strategy = (enum bp_wait_strategy)bad[i];
		assert_int_equal(bp_wait_policy_check(&p), -EINVAL);
		assert_int_equal(bp_ring_set_wait_policy(r, &p), -EINVAL);
	}
	/* A refused policy left the ring usable with the old one. */
	void *v[1] = {it(1)}, *out[1];

	assert_int_equal(bp_ring_enqueue_burst_wait(r, v, 1, -1), 1);
	assert_int_equal(bp_ring_dequeue_burst_wait(r, out, 1, -1), 1);
	bp_ring_destroy(r);
}

/* --------------------------------------------------------------- errors */

/* bp_strerror never returns NULL or "", for any int; bp_version is X.Y.Z. */
static void test_strerror(void **state)
{
	static const int codes[] = {
		0,	     -EPIPE,  -EINVAL, -ENOMEM, -ETIMEDOUT, -EINTR,
		-EOPNOTSUPP, -ERANGE, -EAGAIN, -99999,	99999,	    1,
	};
	unsigned maj, min, pat;
	char tail;

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = bp_strerror(codes[i]);

		assert_non_null(s);
		assert_true(s[0] != '\0');
	}
	/* Positive values are errno values too. */
	assert_string_equal(bp_strerror(EPIPE), bp_strerror(-EPIPE));
	assert_string_equal(bp_strerror(EINVAL), bp_strerror(-EINVAL));
	/* Different errors, different text. */
	assert_string_not_equal(bp_strerror(-EPIPE), bp_strerror(-EINVAL));
	assert_string_not_equal(bp_strerror(0), bp_strerror(-EINVAL));

	assert_non_null(bp_version());
	assert_int_equal(
		sscanf(bp_version(), "%u.%u.%u%c", &maj, &min, &pat, &tail), 3);
}

/*
 * Any int is a valid argument, the extremes too (-INT_MIN overflows: run
 * under UBSan to see it). Last in the program: UBSan aborts on a hit.
 */
static void test_strerror_extremes(void **state)
{
	static const int codes[] = {INT_MAX, -INT_MAX, INT_MIN, INT_MIN + 1};

	(void)state;
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = bp_strerror(codes[i]);

		assert_non_null(s);
		assert_true(s[0] != '\0');
	}
}

/* ---------------------------------------------------------------- waitq */

/*
 * The eventcount alone: zero memory is a valid queue; a wake with nobody
 * announced is a no-op; a stale key returns 0 at once; a deadline in the
 * past returns -ETIMEDOUT; cancel undoes prepare.
 */
static void test_waitq(void **state)
{
	struct bpi_waitq q;
	uint32_t key, seq0;
	int64_t t0;

	(void)state;
	memset(&q, 0, sizeof(q));
	bpi_waitq_wake_all(&q);
	assert_int_equal(atomic_load(&q.sleepers), 0);
	bpi_waitq_init(&q);
	assert_int_equal(atomic_load(&q.sleepers), 0);
	seq0 = atomic_load(&q.seq);
	bpi_waitq_wake_all(&q);
	assert_int_equal(atomic_load(&q.seq), seq0);

	bpt_watchdog_arm(60, "test_waitq");
	/* Stale key: a wake came between prepare and sleep. */
	key = bpi_waitq_prepare(&q);
	assert_int_equal(atomic_load(&q.sleepers), 1);
	bpi_waitq_wake_all(&q);
	t0 = bpt_now_ns();
	assert_int_equal(bpi_waitq_sleep(&q, key, -1), 0);
	assert_true(bpt_now_ns() - t0 < 2000 * MS);
	bpi_waitq_cancel(&q);
	assert_int_equal(atomic_load(&q.sleepers), 0);

	/* A key that never matched, with a deadline: still at once. */
	key = bpi_waitq_prepare(&q);
	t0 = bpt_now_ns();
	assert_int_equal(bpi_waitq_sleep(&q, key + 1, bp_now_ns() + 5000 * MS),
			 0);
	assert_true(bpt_now_ns() - t0 < 2000 * MS);
	bpi_waitq_cancel(&q);

	/* Deadline in the past. */
	key = bpi_waitq_prepare(&q);
	assert_int_equal(bpi_waitq_sleep(&q, key, bp_now_ns() - 1), -ETIMEDOUT);
	assert_int_equal(bpi_waitq_sleep(&q, key, 0), -ETIMEDOUT);
	bpi_waitq_cancel(&q);
	assert_int_equal(atomic_load(&q.sleepers), 0);

	/* A short real sleep ends at its deadline. */
	key = bpi_waitq_prepare(&q);
	t0 = bp_now_ns();
	assert_int_equal(bpi_waitq_sleep(&q, key, t0 + 10 * MS), -ETIMEDOUT);
	assert_true(bp_now_ns() - t0 >= 10 * MS);
	bpi_waitq_cancel(&q);
	assert_int_equal(atomic_load(&q.sleepers), 0);
	bpt_watchdog_arm(BPT_TSAN ? 600 : 90,
			 "test_ring_unit (see the last RUN line)");

	/* bp_now_ns is CLOCK_MONOTONIC. */
	t0 = bpt_now_ns();
	int64_t lib = bp_now_ns();

	assert_true(lib >= t0 && lib - t0 < 1000 * MS);
}

/* ------------------------------------------------------- wake-one queue */

#define W1_THREADS 4

struct w1 {
	struct bpi_waitq q;
	atomic_int tokens, taken, woke, stop;
};

static int w1_more(void *arg)
{
	struct w1 *s = arg;

	return atomic_load(&s->tokens) > 0;
}

/* Take a token if there is one, else sleep on the queue until there is. */
static void *w1_main(void *arg)
{
	struct w1 *s = arg;

	while (!atomic_load(&s->stop)) {
		int t = atomic_load(&s->tokens);

		if (t > 0 &&
		    atomic_compare_exchange_strong(&s->tokens, &t, t - 1)) {
			atomic_fetch_add(&s->taken, 1);
			bpi_waitq_pass_on(&s->q, w1_more, s);
			continue;
		}
		uint32_t key = bpi_waitq_prepare(&s->q);

		if (atomic_load(&s->tokens) > 0 || atomic_load(&s->stop)) {
			bpi_waitq_cancel(&s->q);
			continue;
		}
		bpi_waitq_sleep(&s->q, key, -1);
		bpi_waitq_cancel(&s->q);
		atomic_fetch_add(&s->woke, 1);
	}
	return NULL;
}

static void w1_settle(struct w1 *s)
{
	/* every thread announced, then time to get into the kernel */
	while (atomic_load(&s->q.sleepers) != W1_THREADS)
		bpt_sleep_ms(1);
	bpt_sleep_ms(100);
}

/*
 * A wake-one queue: one publication wakes one of four sleepers, not all;
 * pass_on wakes more while tokens are left; a wake of all reaches every
 * sleeper even when a wake-one left the word disarmed (the state while the
 * thread it woke is busy), which is how close() ends a pool of workers.
 */
static void test_waitq_wake_one(void **state)
{
	struct w1 *s = calloc(1, sizeof(*s));
	pthread_t t[W1_THREADS];

	(void)state;
	assert_non_null(s);
	bpi_waitq_init(&s->q);
	bpi_waitq_set_wake_one(&s->q);
	bpt_watchdog_arm(BPT_TSAN ? 600 : 90, "test_waitq_wake_one");
	for (int i = 0; i < W1_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, w1_main, s), 0);
	w1_settle(s);

	atomic_store(&s->tokens, 1);
	bpi_waitq_wake(&s->q);
	while (atomic_load(&s->taken) != 1)
		bpt_sleep_ms(1);
	w1_settle(s);
	/* one woken (a spurious futex wake-up could add one, never three) */
	assert_in_range(atomic_load(&s->woke), 1, 2);

	/* many tokens, one wake: the woken thread takes or passes them on */
	atomic_store(&s->tokens, 100);
	bpi_waitq_wake(&s->q);
	while (atomic_load(&s->taken) != 101)
		bpt_sleep_ms(1);
	w1_settle(s);

	/* disarmed with everyone asleep: wake_all must still reach them */
	atomic_fetch_and(&s->q.seq, ~1u);
	atomic_store(&s->stop, 1);
	bpi_waitq_wake_all(&s->q);
	for (int i = 0; i < W1_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(atomic_load(&s->tokens), 0);
	free(s);
	bpt_watchdog_arm(BPT_TSAN ? 600 : 90,
			 "test_ring_unit (see the last RUN line)");
}

/* One entry per ring mode; the mode reaches the test as its state. */
// clang-format off
#define MODE_TESTS(f)                                                 \
	{ #f "/mpmc", f, NULL, NULL, (void *)&modes[0] },             \
	{ #f "/sp",   f, NULL, NULL, (void *)&modes[1] },             \
	{ #f "/sc",   f, NULL, NULL, (void *)&modes[2] },             \
	{ #f "/spsc", f, NULL, NULL, (void *)&modes[3] }
#define ONE_MODE_TEST(f, name, m)                                     \
	{ #f "/" name, f, NULL, NULL, (void *)&modes[m] }
// clang-format on

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_invalid),
		cmocka_unit_test(test_capacity_rounding),
		MODE_TESTS(test_capacity_one),
		MODE_TESTS(test_full_empty),
		MODE_TESTS(test_null_items),
		MODE_TESTS(test_bulk_burst),
		MODE_TESTS(test_odd_item),
		MODE_TESTS(test_leaf_runs),
		MODE_TESTS(test_wide_runs),
		MODE_TESTS(test_invalid_args),
		MODE_TESTS(test_bulk_too_big),
		cmocka_unit_test(test_quiet),
		MODE_TESTS(test_zc_producer),
		MODE_TESTS(test_zc_producer_finish),
		MODE_TESTS(test_available_counts_reserved),
		MODE_TESTS(test_ready),
		ONE_MODE_TEST(test_zc_consumer_mc, "mpmc", 0),
		ONE_MODE_TEST(test_zc_consumer_mc, "sp", 1),
		ONE_MODE_TEST(test_zc_consumer, "sc", 2),
		ONE_MODE_TEST(test_zc_consumer, "spsc", 3),
		MODE_TESTS(test_wrap_laps),
		MODE_TESTS(test_index_overflow),
		MODE_TESTS(test_close),
		MODE_TESTS(test_high_water),
		MODE_TESTS(test_timeouts),
		cmocka_unit_test(test_wait_policy),
		cmocka_unit_test(test_strerror),
		cmocka_unit_test(test_waitq),
		cmocka_unit_test(test_waitq_wake_one),
		cmocka_unit_test(test_strerror_extremes), /* keep last */
	};

	/* Line-buffered, so a killed run still shows the test it was in. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Every test here is single-threaded and short: a hang is a bug. */
	bpt_watchdog_arm(BPT_TSAN ? 600 : 90,
			 "test_ring_unit (see the last RUN line)");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
