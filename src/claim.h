/* SPDX-License-Identifier: MIT */
/*
 * The claim protocol of a producer handle: who may submit a handle's staged
 * jobs, and when. Every claim is taken here (bpi_claim_try), ended here
 * (bpi_claim_release, bpi_claim_close_at) and waited for here.
 *
 * A handle's staging buffer is a single-producer queue of positions
 * [head, tail) (src/handle.h). The owner appends at tail: per job a plain
 * store of the job, a release store of its staging time and a release store
 * of tail, no read-modify-write. Whoever submits staged jobs first claims
 * them: one compare-and-swap sets CLAIM_BUSY in the claim word, which also
 * holds head; the claimer submits [head, tail) in order and stores the new
 * head with CLAIM_BUSY clear. One claim at a time, so the jobs of one handle
 * enter the pipeline in the order they were staged, whoever submits them.
 *
 * The claim word is head << CLAIM_SHIFT | flags:
 *   CLAIM_BUSY    a claim is in progress (submitting from head);
 *   CLAIM_CLOSED  the handle takes nothing more, for good; only the jobs
 *                 below claim_end are anyone's but the owner's (drain
 *                 submits them);
 *   CLAIM_IDLE    created before bp_pipeline_start, not opened yet:
 *                 nothing goes in (the owner's one look at the word per job
 *                 also tells it whether the pipeline runs).
 *
 * Who claims, when, and what they may do while holding the claim (takes:
 * the flags its compare-and-swap sets; ends: the flags its release stores):
 *
 *  claimer          when                   may, holding it     takes -> ends
 *  ---------------  ---------------------  ------------------  -------------
 *  owner            max_batch staged; the  submit [head,tail)  BUSY -> 0;
 *  (own_flush,      deadline seen on its   blocking; on an     CLOSED on
 *   producer.c)     own call; flush;       error take back     -EPIPE and in
 *                   destroy                the job just staged destroy
 *  owner before     a job staged while     take that job back  BUSY -> IDLE
 *  start (idle_     the word says IDLE
 *   after_stage)
 *  flusher (walk,   the oldest staged job  submit what         BUSY -> 0;
 *   flusher.c)      is past the deadline,  ingress has room    CLOSED on
 *                   or a flush round owes  for now, never wait -EPIPE
 *                   it; the owner away
 *  drain's close    drain or abort         a membarrier; fix   BUSY|CLOSED
 *  (close_handle,   begins; join, for a    claim_end; nothing  -> CLOSED
 *   flusher.c)      handle it missed       else                at once
 *  drain's submit   after the close, per   submit below        BUSY -> CLOSED
 *  (drain_handle,   slice of ingress room  claim_end what
 *   flusher.c)                             fits, never wait
 *
 * bpi_claim_open (bp_pipeline_start) clears CLAIM_IDLE; it is not a claim
 * and waits out one in progress. Nobody clears CLAIM_CLOSED.
 *
 * A claimer other than the owner never waits holding a claim: the thread
 * ingress waits for may be the one waiting for the claim. Producers learn
 * about claims by loading the claim word after their tail store; the other
 * side orders its claim before its look at tail with a membarrier
 * (bpi_barrier_all), so of a producer's tail store and a concurrent claim,
 * at least one sees the other.
 */
#ifndef BP_SRC_CLAIM_H
#define BP_SRC_CLAIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "src/handle.h"

#define CLAIM_BUSY   1u		/* a claim is submitting from head */
#define CLAIM_CLOSED 2u		/* closed for good: nothing more goes in */
#define CLAIM_IDLE   4u		/* not started yet: nothing goes in */
#define CLAIM_SHIFT  3		/* claim word = head << CLAIM_SHIFT | flags */
#define CLAIM_STALE  UINT64_MAX /* never a claim word: look again */

static inline uint64_t bpi_claim_head(uint64_t c)
{
	return c >> CLAIM_SHIFT;
}

/* The claim word now. acquire: pairs with the release that ended a claim. */
static inline uint64_t bpi_claim_word(const struct bp_producer *pr)
{
	return atomic_load_explicit(&pr->claim, memory_order_acquire);
}

/*
 * Take the claim if the word is still *c: set CLAIM_BUSY and `flags`
 * (0, or CLAIM_CLOSED for drain's close). The caller has checked that *c
 * is not busy. On failure *c is the word now (it changed: a strong
 * compare-and-swap). acquire, both ways: the previous claimer's reads of
 * the slots come before ours (pairs with its release).
 */
static inline bool bpi_claim_try(struct bp_producer *pr, uint64_t *c,
				 unsigned flags)
{
	return atomic_compare_exchange_strong_explicit(
		&pr->claim, c, *c | CLAIM_BUSY | flags, memory_order_acquire,
		memory_order_acquire);
}

/* End a claim: publish the new head with flags (0, CLAIM_CLOSED, IDLE). */
void bpi_claim_release(struct bp_producer *pr, uint64_t head, unsigned flags);

/*
 * End a claim closing the handle for good at head: what is below
 * claim_end is submitted by whoever closed it (drain); setting claim_end
 * to head says nothing more will be.
 */
void bpi_claim_close_at(struct bp_producer *pr, uint64_t head);

/*
 * Submit the claimed jobs [h, t) in order (two calls where the range
 * wraps), adding the count accepted to *done. wait: the owner's submit,
 * blocking; returns 0 or the first error (-EINTR included). !wait: as far
 * as ingress has room now (every other claimer); returns 0 (all in),
 * -EAGAIN (ingress full) or an error.
 */
int bpi_claim_submit(struct bp_producer *pr, uint64_t h, uint64_t t, bool wait,
		     uint64_t *done);

/*
 * Wait until no claim is in progress, or until the CLOCK_MONOTONIC deadline
 * (< 0: none); returns the claim word then (still CLAIM_BUSY only at the
 * deadline).
 */
uint64_t bpi_claim_wait(struct bp_producer *pr, int64_t deadline);

/*
 * The owner, on a handle a drain has closed and still has to submit from
 * (claim_end past head): wait until the drain has submitted everything it
 * took or given up (claim_end down to head). c: the word the owner saw.
 * Returns the word then, CLAIM_BUSY clear and claim_end final.
 */
uint64_t bpi_claim_wait_drain(struct bp_producer *pr, uint64_t c);

/*
 * bp_pipeline_start: clear CLAIM_IDLE (waiting out a claim in progress, an
 * owner taking a job back, whose release would store IDLE again).
 */
void bpi_claim_open(struct bp_producer *pr);

#endif
