/* SPDX-License-Identifier: MIT */
/*
 * pipeline/plain_rings.h - the two rings of the plain variant (plain.c),
 * written for this one job and nothing else: job pointers, capacities a
 * power of two, 64-bit positions that never wrap, no close. Both have one
 * producer, which keeps a private copy of the consumers' tail, reloads it
 * only when the batch does not seem to fit, writes the slots and publishes
 * them with one release store of head (struct pl_idx, pl_room).
 *
 * struct pl_lane: one producer's lane of the ingress; every worker may
 * take from it. A worker keeps a private copy of head per lane (reloaded
 * when it shows fewer than B), reads up to B slots and claims them with
 * one CAS of tail. It reads before it claims: a failed CAS throws the
 * reads away, and a successful one proves tail did not move since, so the
 * producer, which writes only below the tail it has seen + capacity, did
 * not overwrite them. Nobody ever waits for another thread's step.
 *
 * struct pl_out: a worker's result ring to the sink (single producer,
 * single consumer), the cached-index ring of queues/q_spsc.c: the sink
 * keeps a copy of head too and reloads it only when short.
 *
 * A producer blocked on a full ring waits until it holds at most wake_at
 * jobs: half the capacity where the producer may sleep, since at the
 * first free slot every take paid a wake-up and the producer came back
 * for one batch (10x slower under sleep); any room under busy-poll, which
 * never sleeps (pl_can_go, and pl_wake_producer on the consumer's side).
 */
#ifndef BPBENCH_PIPELINE_PLAIN_RINGS_H
#define BPBENCH_PIPELINE_PLAIN_RINGS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <batchpipe/job.h>

#include "pipeline/plain_wait.h"

/* The indices of either ring. */
struct pl_idx {
	/* the producer's lines: its index, its copy of the tail, and where
	 * it sleeps while the ring is full */
	_Alignas(PL_LINE) _Atomic uint64_t head;
	uint64_t tail_cache;
	struct pl_parker room;
	/* the consumers' line; head_cache: the SP/SC consumer's copy */
	_Alignas(PL_LINE) _Atomic uint64_t tail;
	uint64_t head_cache;
	/* read-only after setup */
	_Alignas(PL_LINE) uint64_t cap, mask, wake_at;
};

struct pl_lane {
	struct pl_idx x;
	/* atomic only because a worker may read a slot that is being
	 * rewritten (its CAS then fails): relaxed accesses, plain moves */
	_Atomic(struct bp_job *) *slots;
};

struct pl_out {
	struct pl_idx x;
	struct bp_job **slots;
};

static inline unsigned pl_min(uint64_t a, uint64_t b)
{
	return (unsigned)(a < b ? a : b);
}

/* Producer: how many of n fit at head h (the tail reloaded if short). */
static inline unsigned pl_room(struct pl_idx *x, uint64_t h, unsigned n)
{
	uint64_t room = x->cap - (h - x->tail_cache);

	if (room < n) {
		/* acquire: pairs with the consumers' release of tail (the
		 * CAS, or the sink's store): they have read the slots we
		 * write again */
		x->tail_cache =
			atomic_load_explicit(&x->tail, memory_order_acquire);
		room = x->cap - (h - x->tail_cache);
	}
	return pl_min(n, room);
}

/* Producer, blocked on a full ring: may it go on? */
static inline bool pl_can_go(void *arg)
{
	struct pl_idx *x = arg;
	/* relaxed: only the caller writes head */
	uint64_t h = atomic_load_explicit(&x->head, memory_order_relaxed);

	/* acquire: as in pl_room */
	x->tail_cache = atomic_load_explicit(&x->tail, memory_order_acquire);
	return h - x->tail_cache <= x->wake_at;
}

/*
 * Consumer, after moving tail by a seq_cst CAS, or by a store followed by
 * pl_fence: wake the producer, if it is blocked and may now go on.
 */
static inline void pl_wake_producer(struct pl_idx *x)
{
	/* seq_cst: pairs with pl_wait_until's fence (see pl_try_unpark) */
	if (!atomic_load_explicit(&x->room.parked, memory_order_seq_cst))
		return;
	/* relaxed: a blocked producer does not move head; tail: at least
	 * our own move (a later take looks again) */
	if (atomic_load_explicit(&x->head, memory_order_relaxed) -
		    atomic_load_explicit(&x->tail, memory_order_relaxed) >
	    x->wake_at)
		return;
	pl_try_unpark(&x->room);
}

/* Producer: put up to n jobs in its lane; returns how many went in. */
static inline unsigned pl_lane_push(struct pl_lane *l,
				    struct bp_job *const *jobs, unsigned n)
{
	/* relaxed: only this thread writes head */
	uint64_t h = atomic_load_explicit(&l->x.head, memory_order_relaxed);
	unsigned k = pl_room(&l->x, h, n);

	for (unsigned i = 0; i < k; i++)
		/* relaxed: published by the head store below */
		atomic_store_explicit(&l->slots[(h + i) & l->x.mask], jobs[i],
				      memory_order_relaxed);
	/* release: the slots before the index that shows them; pairs with
	 * pl_lane_take's acquire of head */
	atomic_store_explicit(&l->x.head, h + k, memory_order_release);
	return k;
}

/* Worker: claim up to max jobs into out; *head_cache is this worker's. */
static inline unsigned pl_lane_take(struct pl_lane *l, uint64_t *head_cache,
				    struct bp_job **out, unsigned max)
{
	/* relaxed: the CAS checks it; a stale value costs a retry */
	uint64_t t = atomic_load_explicit(&l->x.tail, memory_order_relaxed);

	for (;;) {
		uint64_t avail = *head_cache - t;
		unsigned k;

		/* a cached head behind the tail reads as a huge avail */
		if (avail < max || avail > l->x.cap) {
			/* acquire: pairs with pl_lane_push's release of
			 * head: the slots below it are written */
			*head_cache = atomic_load_explicit(
				&l->x.head, memory_order_acquire);
			avail = *head_cache - t;
			if (avail == 0 || avail > l->x.cap)
				return 0;
		}
		k = pl_min(avail, max);
		for (unsigned i = 0; i < k; i++)
			/* relaxed: ordered by the head acquire; valid if
			 * the CAS below succeeds */
			out[i] = atomic_load_explicit(
				&l->slots[(t + i) & l->x.mask],
				memory_order_relaxed);
		/* seq_cst on success: a release, our slot reads before the
		 * producer's acquire of tail lets it reuse them, and the
		 * RMW that pl_wake_producer relies on; relaxed on failure:
		 * t is reloaded and nothing read is kept */
		if (atomic_compare_exchange_weak_explicit(&l->x.tail, &t, t + k,
							  memory_order_seq_cst,
							  memory_order_relaxed))
			return k;
	}
}

/* Anyone: does the ring hold a job nobody has taken? */
static inline bool pl_ready(struct pl_idx *x)
{
	/* relaxed: only compared; the takes re-read what they use */
	uint64_t t = atomic_load_explicit(&x->tail, memory_order_relaxed);

	/* acquire: pairs with the producer's release of head */
	return atomic_load_explicit(&x->head, memory_order_acquire) != t;
}

/* Worker: put up to n jobs in its result ring; returns how many. */
static inline unsigned pl_out_push(struct pl_out *o, struct bp_job *const *jobs,
				   unsigned n)
{
	/* relaxed: only this thread writes head */
	uint64_t h = atomic_load_explicit(&o->x.head, memory_order_relaxed);
	unsigned k = pl_room(&o->x, h, n);

	for (unsigned i = 0; i < k; i++)
		o->slots[(h + i) & o->x.mask] = jobs[i];
	/* release: the slots (and the stage's writes to the jobs) before
	 * the index; pairs with pl_out_take's acquire of head */
	atomic_store_explicit(&o->x.head, h + k, memory_order_release);
	return k;
}

/* Sink: take up to max jobs; the slots are free again on return. */
static inline unsigned pl_out_take(struct pl_out *o, struct bp_job **out,
				   unsigned max)
{
	/* relaxed: only this thread writes tail */
	uint64_t t = atomic_load_explicit(&o->x.tail, memory_order_relaxed);
	uint64_t ready = o->x.head_cache - t;
	unsigned k;

	if (ready < max) {
		/* acquire: pairs with pl_out_push's release of head */
		o->x.head_cache =
			atomic_load_explicit(&o->x.head, memory_order_acquire);
		ready = o->x.head_cache - t;
	}
	k = pl_min(ready, max);
	if (!k)
		return 0;
	for (unsigned i = 0; i < k; i++)
		out[i] = o->slots[(t + i) & o->x.mask];
	/* release: our reads of the slots before the worker reuses them;
	 * pairs with pl_room's acquire of tail */
	atomic_store_explicit(&o->x.tail, t + k, memory_order_release);
	return k;
}

#endif /* BPBENCH_PIPELINE_PLAIN_RINGS_H */
