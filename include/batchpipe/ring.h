/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/ring.h - bounded lock-free ring of pointer-sized items that moves
 * items in batches.
 *
 * ITEMS. An item is a `void *` whose lowest bit is 0: any pointer to an object
 * aligned to 2 bytes or more (every malloc'd or struct pointer), NULL, or an
 * integer shifted left by one. The ring uses that bit to tell an item of the
 * current lap from a stale one, which is what lets consumers find ready items
 * without reading the producers' index. Enqueueing an item with bit 0 set is
 * refused with -EINVAL and nothing is enqueued.
 *
 * MODES. Each side is single (BP_RING_SP / BP_RING_SC: exactly one thread at a
 * time uses that side) or multi (the default). The multi modes are
 * preemption-tolerant: no thread ever waits for another one to finish its
 * step, so a thread descheduled in the middle of an operation does not stall
 * the others on its side. See src/ring.c for the design.
 *
 * BATCHES. Every operation moves a batch with one reservation and one
 * publication per side:
 *   *_bulk   all n items or none;
 *   *_burst  as many as possible, up to n.
 * They return the number of items moved (>= 0) or a negative errno.
 *
 * END OF STREAM. bp_ring_close() stops intake: enqueues fail with -EPIPE;
 * dequeues take what is left and then return -EPIPE ("end of stream"), which
 * is distinct from 0 ("empty for now"). In single-producer mode close is a
 * producer-side operation: call it from the producer thread (or once no
 * enqueue can be running).
 *
 * All functions that take a struct bp_ring * require a valid ring; those that
 * validate arguments say so. Error codes are negative errno values;
 * bp_strerror() turns them into text.
 */
#ifndef BATCHPIPE_RING_H
#define BATCHPIPE_RING_H

#include <stddef.h>
#include <stdint.h>

#include <batchpipe/error.h>
#include <batchpipe/wait.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

struct bp_ring;

/* Creation flags. */
#define BP_RING_SP 0x1u /* single producer */
#define BP_RING_SC 0x2u /* single consumer */
#define BP_RING_HWM                                                            \
	0x4u /* track the high-water mark (a little cost per enqueue) */

/* Largest capacity accepted: 2^30 slots (counts fit in an int). */
#define BP_RING_MAX_CAPACITY (1u << 30)

/*
 * Create a ring with room for at least `capacity` items; a capacity that is
 * not a power of two is rounded up to the next one (bp_ring_capacity() tells
 * the real one). Memory is cache-line aligned.
 * Returns 0 and sets *ringp, or -EINVAL (ringp NULL, capacity 0 or above
 * BP_RING_MAX_CAPACITY, unknown flag), -ENOMEM. Any thread.
 */
int bp_ring_create(size_t capacity, unsigned flags, struct bp_ring **ringp);

/* Free a ring; NULL is accepted. No other thread may be using it. */
void bp_ring_destroy(struct bp_ring *r);

/*
 * The real capacity (a power of two, >= the one asked for) and the creation
 * flags (BP_RING_*). Both are fixed at creation: any thread, any time.
 */
unsigned bp_ring_capacity(const struct bp_ring *r);
unsigned bp_ring_flags(const struct bp_ring *r);

/*
 * Non-blocking operations. `items` may be NULL only when n is 0. Any
 * thread may call them, within the ring's mode (SP: one producer thread at
 * a time; SC: one consumer thread at a time).
 * enqueue: returns the count enqueued (bulk: n or 0), -EPIPE if closed,
 *          -EINVAL if an item has bit 0 set, items is NULL with n > 0, or
 *          (bulk) n is greater than the capacity: such a bulk could never
 *          fit, and a caller retrying on 0 would spin forever. A burst of
 *          more than the capacity takes what fits. *free_space (if not
 *          NULL) gets the free room left after the operation, as seen by
 *          this thread (not set on -EINVAL).
 * dequeue: returns the count dequeued (bulk: n or 0), -EPIPE at end of
 *          stream (closed and empty; for bulk: closed and fewer than n left,
 *          the rest can still be taken with a burst), or -EINVAL (items
 *          NULL with n > 0; bulk: n greater than the capacity, as for
 *          enqueue). *available (if not NULL) gets the number of items left
 *          after it, as seen by this thread (a snapshot; not set on
 *          -EINVAL).
 */
int bp_ring_enqueue_bulk(struct bp_ring *r, void *const *items, unsigned n,
			 unsigned *free_space);
int bp_ring_enqueue_burst(struct bp_ring *r, void *const *items, unsigned n,
			  unsigned *free_space);
int bp_ring_dequeue_bulk(struct bp_ring *r, void **items, unsigned n,
			 unsigned *available);
int bp_ring_dequeue_burst(struct bp_ring *r, void **items, unsigned n,
			  unsigned *available);

/*
 * Blocking operations: like the above, but when nothing can be moved they
 * wait, following the ring's wait policy, until something can (burst: at
 * least one item; bulk: all n), the ring is closed, or `timeout_ns` passes
 * (timeout_ns < 0: wait forever; 0: do not wait). Same threads as the
 * non-blocking calls.
 * Extra returns: -ETIMEDOUT (nothing moved in time), -EINTR (a signal
 * interrupted a sleep), -EINVAL (n greater than the capacity for a bulk
 * operation: it could never succeed). A waiter sleeps only as the ring's
 * wait policy says and is woken by the other side's next successful
 * operation or by bp_ring_close().
 */
int bp_ring_enqueue_bulk_wait(struct bp_ring *r, void *const *items, unsigned n,
			      int64_t timeout_ns);
int bp_ring_enqueue_burst_wait(struct bp_ring *r, void *const *items,
			       unsigned n, int64_t timeout_ns);
int bp_ring_dequeue_bulk_wait(struct bp_ring *r, void **items, unsigned n,
			      int64_t timeout_ns);
int bp_ring_dequeue_burst_wait(struct bp_ring *r, void **items, unsigned n,
			       int64_t timeout_ns);

/*
 * How blocked callers wait (default: spin-then-sleep). May be changed at any
 * time, from any thread; threads already waiting finish their current wait
 * the old way. Returns 0, or -EINVAL (r NULL, or bp_wait_policy_check()
 * refuses p).
 */
int bp_ring_set_wait_policy(struct bp_ring *r, const struct bp_wait_policy *p);

/*
 * Close the ring: later enqueues fail with -EPIPE, every waiter is woken.
 * Idempotent. Returns 0. Any thread, except in single-producer mode (see
 * END OF STREAM above).
 */
int bp_ring_close(struct bp_ring *r);

/*
 * Non-zero once bp_ring_close() has been called (the ring stays closed),
 * 0 before. Items may still be left to dequeue: the end of the stream is a
 * dequeue's -EPIPE. Any thread; a snapshot.
 */
int bp_ring_is_closed(const struct bp_ring *r);

/*
 * Occupancy, from any thread. bp_ring_count() returns the items in the
 * ring (reserved by producers and not yet taken, 0 .. capacity), exact
 * when the ring is quiet and a snapshot otherwise; bp_ring_free_count() is
 * capacity minus that. bp_ring_high_water() returns the largest count
 * observed after an enqueue, sampled once per min(256, capacity / 8) items
 * (and on every operation at least that big, so it is cheap under load),
 * or -EOPNOTSUPP if the ring was created without BP_RING_HWM.
 */
unsigned bp_ring_count(const struct bp_ring *r);
unsigned bp_ring_free_count(const struct bp_ring *r);
long bp_ring_high_water(const struct bp_ring *r);

/*
 * ZERO-COPY. Reserve slots, fill or read them in place, then finish.
 *
 * Producer side (any mode): *_zc_*_start reserves k slots (returned; bulk: n
 * or 0) and describes them in *zc. Store each of the k items with
 * bp_ring_zc_put() - each becomes visible to consumers as soon as it is put,
 * in ring order - then call bp_ring_enqueue_zc_finish(). Every reserved slot
 * must be put: other producers may already hold slots after them.
 *
 * Consumer side (single-consumer rings only; -EOPNOTSUPP otherwise):
 * *_zc_*_start finds k ready items (bulk: n or 0), read them with
 * bp_ring_zc_get(), then bp_ring_dequeue_zc_finish(r, zc, m) releases the
 * first m <= k of them; the others stay at the head of the ring.
 *
 * Returns: start as the non-blocking operations (count, -EPIPE, and
 * -EINVAL for zc NULL or a bulk start of more than the capacity);
 * finish: 0, or -EINVAL (zc NULL, m > k, or an enqueue reservation not
 * fully put). Consumer-side calls on a multi-consumer ring: -EOPNOTSUPP.
 * Same threads as the copying calls of that side.
 */
struct bp_ring_zc {
	uintptr_t *slot[2]; /* the reserved slots: slot[0][0..n[0]), then
			       slot[1][0..n[1]) */
	unsigned n[2];
	uintptr_t lap[2]; /* lap tag of each part */
	unsigned count;	  /* n[0] + n[1] */
	unsigned put;	  /* enqueue side: number of items put so far */
	uint64_t pos;	  /* internal: position of the first slot */
};

int bp_ring_enqueue_zc_bulk_start(struct bp_ring *r, unsigned n,
				  struct bp_ring_zc *zc);
int bp_ring_enqueue_zc_burst_start(struct bp_ring *r, unsigned n,
				   struct bp_ring_zc *zc);
int bp_ring_enqueue_zc_finish(struct bp_ring *r, struct bp_ring_zc *zc);
int bp_ring_dequeue_zc_bulk_start(struct bp_ring *r, unsigned n,
				  struct bp_ring_zc *zc);
int bp_ring_dequeue_zc_burst_start(struct bp_ring *r, unsigned n,
				   struct bp_ring_zc *zc);
int bp_ring_dequeue_zc_finish(struct bp_ring *r, struct bp_ring_zc *zc,
			      unsigned m);

/*
 * Item i (0 <= i < zc->count) of a dequeue reservation, on the consumer
 * thread that started it, before its finish releases the slot.
 */
static inline void *bp_ring_zc_get(const struct bp_ring_zc *zc, unsigned i)
{
	/* relaxed: the acquire fence in *_zc_*_start ordered the contents
	 * (acquire under TSAN, which does not see that fence) */
	uintptr_t v = __atomic_load_n(
		i < zc->n[0] ? &zc->slot[0][i] : &zc->slot[1][i - zc->n[0]],
		BP_TSAN ? __ATOMIC_ACQUIRE : __ATOMIC_RELAXED);

	return (void *)(v & ~(uintptr_t)1);
}

/*
 * Store the next item of an enqueue reservation (items are put in order),
 * on the producer thread that started it. Returns 0, -EINVAL if the item has
 * bit 0 set (nothing stored: put a valid item instead) or -ERANGE if all
 * reserved slots are already put.
 */
static inline int bp_ring_zc_put(struct bp_ring_zc *zc, void *item)
{
	unsigned i = zc->put, part = i < zc->n[0] ? 0 : 1;

	if (i >= zc->count)
		return -ERANGE;
	if ((uintptr_t)item & 1)
		return -EINVAL;
	/* release: the item's contents before its slot (the publication) */
	__atomic_store_n(&zc->slot[part][part ? i - zc->n[0] : i],
			 (uintptr_t)item | zc->lap[part], __ATOMIC_RELEASE);
	zc->put = i + 1;
	return 0;
}

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_RING_H */
