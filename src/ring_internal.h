/* SPDX-License-Identifier: MIT */
/* Internal ring entry points: hidden from the shared library, used by tests. */
#ifndef BP_SRC_RING_INTERNAL_H
#define BP_SRC_RING_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <batchpipe/ring.h>

struct bpi_waitq;

/*
 * Private creation flag: nobody ever sleeps on this ring's own wait queues
 * (its users wait on queues of their own, as the pipeline's sink and
 * workers do on its egress rings), so its users may move items with the
 * quiet calls below, which skip the wake checks. The blocking calls refuse
 * such a ring with -EOPNOTSUPP instead of sleeping where a quiet call
 * would not wake them; close still wakes (it is cold). bp_ring_create()
 * refuses the flag and bp_ring_flags() does not show it.
 */
#define BPI_RING_QUIET 0x80000000u

/*
 * bp_ring_create() with both indices starting at position `start` instead of
 * 0, so tests can cross the wrap of the 63-bit position space within a few
 * items (positions live in 64-bit words as 2*pos | closed-bit). Also takes
 * BPI_RING_QUIET.
 */
int bpi_ring_create_at(size_t capacity, unsigned flags, uint64_t start,
		       struct bp_ring **ringp);

/* Largest position value + 1: positions wrap modulo this. */
#define BPI_RING_POS_SPACE (UINT64_C(1) << 63)

/*
 * The eventcounts of a ring, for callers that wait on conditions of their
 * own (the pipeline): not-empty is woken by every enqueue and by close,
 * not-full by every dequeue and by close (not by the quiet calls).
 */
struct bpi_waitq *bpi_ring_not_empty(struct bp_ring *r);
struct bpi_waitq *bpi_ring_not_full(struct bp_ring *r);

/*
 * The two halves of an enqueue, for callers that must stamp items with
 * their position before publishing them (the pipeline's seq):
 * bpi_ring_reserve_burst() claims up to n slots (count, 0 or -EPIPE; the
 * first position in *pos); bpi_ring_publish() stores all k of them and
 * wakes consumers. Every reserved slot must be published.
 */
int bpi_ring_reserve_burst(struct bp_ring *r, unsigned n, uint64_t *pos);
void bpi_ring_publish(struct bp_ring *r, uint64_t pos, void *const *items,
		      unsigned k);

/*
 * For BPI_RING_QUIET rings: bpi_ring_publish() and bp_ring_dequeue_burst()
 * (without *available) minus the wake check, which costs a load of the
 * queue's line and, on a waker-fences queue or without membarrier, a full
 * fence. Publish before waking the queue the consumer really sleeps on.
 */
void bpi_ring_publish_quiet(struct bp_ring *r, uint64_t pos, void *const *items,
			    unsigned k);
int bpi_ring_dequeue_burst_quiet(struct bp_ring *r, void **items, unsigned n);

/*
 * bpi_ring_publish() and bpi_ring_publish_quiet() of one item (k == 1),
 * without the set-up that runs of any length need: the one-job submit.
 */
void bpi_ring_publish_one(struct bp_ring *r, uint64_t pos, void *item);
void bpi_ring_publish_one_quiet(struct bp_ring *r, uint64_t pos, void *item);

/*
 * One look at the reservations: the next position producers will reserve
 * (modulo BPI_RING_POS_SPACE), and in *count how many they have reserved
 * since the ring was made (as bpi_ring_enqueued). Relaxed: a caller that
 * must see a given reservation orders itself after it.
 */
uint64_t bpi_ring_reserved_pos(const struct bp_ring *r, uint64_t *count);

/*
 * bp_ring_dequeue_burst() without its not-full wake check, for a consumer
 * that wakes the ring's producers on a condition of its own (the
 * pipeline's ingress: bpi_ingress_taken). On a multi-consumer ring the
 * claim is a seq_cst CAS, so the caller may wake with
 * bpi_waitq_wake_after_rmw() after a count > 0.
 */
int bpi_ring_dequeue_burst_nowake(struct bp_ring *r, void **items, unsigned n);

/*
 * Non-zero when a dequeue would not come back empty-handed: the slot at the
 * consumers' head is published, or the ring is closed and drained (the
 * dequeue reports the end of the stream). Unlike bp_ring_count() > 0 it
 * stays false while a producer that reserved the next slot has not yet
 * published it, so a waiter keeps yielding to that producer instead of
 * retrying a dequeue that cannot succeed.
 */
int bpi_ring_ready(const struct bp_ring *r);

/*
 * bpi_ring_ready() telling its two answers apart: 1 when the slot at the
 * consumers' head is published, -1 when the ring is closed and drained
 * (the end of the stream), 0 otherwise. Reads the producers' line only
 * once the ring is closed.
 */
int bpi_ring_peek(const struct bp_ring *r);

/* Items ever reserved for enqueue since creation (mod 2^63). */
uint64_t bpi_ring_enqueued(const struct bp_ring *r);

/* Items ever claimed by dequeues since creation (mod 2^63); relaxed. */
uint64_t bpi_ring_dequeued(const struct bp_ring *r);

#endif
