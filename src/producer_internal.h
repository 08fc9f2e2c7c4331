/* SPDX-License-Identifier: MIT */
/*
 * Producer handles, shared by producer.c (the owner's calls) and flusher.c
 * (the pipeline's flusher thread, the registry, drain).
 *
 * A handle's staging buffer is a single-producer queue of positions
 * [head, tail). The owner appends at tail: per job a plain store of the job,
 * a release store of its staging time and a release store of tail, no
 * read-modify-write. Whoever submits staged jobs (the owner: batch full,
 * deadline seen, flush; the flusher: deadline passed while the owner is
 * away; drain: everything) first *claims* them: one compare-and-swap sets
 * CLAIM_BUSY in the claim word, which also holds head; the claimer submits
 * [head, tail) in order and stores the new head with CLAIM_BUSY clear. One
 * claim at a time, so the jobs of one handle enter the pipeline in the order
 * they were staged, whoever submits them.
 *
 * Drain sets CLAIM_CLOSED with its claim, and so does the owner's last
 * flush in bp_producer_destroy (or an owner's submit that met a closed
 * intake); nobody clears it: a closed handle takes nothing more, and only
 * the jobs below claim_end are anyone's but the owner's (drain submits
 * them). A handle created before bp_pipeline_start
 * carries CLAIM_IDLE until start clears it: the owner's one look at the
 * claim word per job also tells it whether the pipeline runs. Producers learn
 * about claims by loading the claim word after their tail store; the other side
 * orders its claim before its look at tail with a membarrier (bpi_barrier_all),
 * so of a producer's tail store and a concurrent claim, at least one sees the
 * other.
 */
#ifndef BP_SRC_PRODUCER_INTERNAL_H
#define BP_SRC_PRODUCER_INTERNAL_H

#include "src/pipeline_internal.h"

#define CLAIM_BUSY   1u		/* a claim is submitting from head */
#define CLAIM_CLOSED 2u		/* drain took the handle for good */
#define CLAIM_IDLE   4u		/* not started yet: nothing goes in */
#define CLAIM_SHIFT  3		/* claim word = head << CLAIM_SHIFT | flags */
#define CLAIM_STALE  UINT64_MAX /* never a claim word: look again */

struct bp_producer {
	/* the owner's line: written per job by the owner only */
	alignas(BP_FALSE_SHARING) struct bp_pipeline *p;
	struct bp_job **slots;	   /* cap entries, position & mask */
	_Atomic int64_t *stage_ns; /* staging time of each slot's job */
	unsigned cap, mask;	   /* cap: a power of two >= max_inflight */
	uint64_t head_seen;	   /* head as the owner last saw it */
	uint64_t room_end;	   /* head_seen + cap: the buffer is full */
	uint64_t batch_end;	   /* head_seen + max_batch: flush */
	uint64_t claim_seen;	   /* the claim word then, or CLAIM_STALE */
	int64_t due_ns;		   /* job head_seen's staging time + deadline */
	bool fence;		   /* no membarrier: fence per job */
	_Atomic uint64_t tail;	   /* owner: release per job; claimers read */
	_Atomic uint64_t claim;	   /* head << CLAIM_SHIFT | CLAIM_* */
	/*
	 * The tail a flusher or drain claim saw. On a closed handle: drain
	 * submits every staged job below it (an owner whose job is below it
	 * was taken), none at or above it.
	 */
	_Atomic uint64_t claim_end;
	_Atomic int flusher_err;    /* the flusher's last submit failed */
	bool detached;		    /* its pipeline was destroyed first */
	bool drain_claimed;  /* the stopper's: drain closed and submits it */
	unsigned drain_pins; /* under the registry lock: drain is using it */
	bool free_on_unpin;  /* under the registry lock: destroyed, drain frees
			      */
	struct bpi_waitq claim_wq;   /* waiters for CLAIM_BUSY to clear */
	/* registry: the flusher walks it without a lock (flusher.c) */
	_Atomic(struct bp_producer *) next;
};

static inline uint64_t bpi_claim_head(uint64_t c)
{
	return c >> CLAIM_SHIFT;
}

/*
 * The owner's submit of its staged jobs [h, t) in order, blocking (two
 * calls where the range wraps). Adds the count accepted to *done; returns
 * 0 or the first error (-EINTR included: the owner's call returns it).
 */
int bpi_producer_submit_range(struct bp_producer *pr, uint64_t h, uint64_t t,
			      uint64_t *done);

/*
 * Submit [h, t) in order as far as ingress has room now, without waiting
 * (a claimer other than the owner never waits holding a claim: the thread
 * ingress waits for may be the one waiting for the claim). Adds the count
 * to *done; returns 0 (all in), -EAGAIN (ingress full) or an error.
 */
int bpi_producer_submit_some(struct bp_producer *pr, uint64_t h, uint64_t t,
			     uint64_t *done);

/*
 * End a claim closing the handle for good at head: what is below
 * claim_end is submitted by whoever closed it (drain); setting claim_end
 * to head says nothing more will be.
 */
void bpi_producer_close_at(struct bp_producer *pr, uint64_t head);

/* End a claim: publish the new head with flags (CLAIM_CLOSED or 0). */
void bpi_producer_release(struct bp_producer *pr, uint64_t head,
			  unsigned flags);

/*
 * Wait until no claim is in progress, or until the CLOCK_MONOTONIC deadline
 * (< 0: none); returns the claim word then (still CLAIM_BUSY only at the
 * deadline).
 */
uint64_t bpi_producer_wait_claim(struct bp_producer *pr, int64_t deadline);

/* Registry (flusher.c): add starts the flusher with the first handle. */
int bpi_flusher_add(struct bp_pipeline *p, struct bp_producer *pr);
/* Unlink pr; returns whether the caller frees it (false: drain will). */
bool bpi_flusher_remove(struct bp_pipeline *p, struct bp_producer *pr);
/* Free a handle's memory (drain, for one destroyed while it held it). */
void bpi_producer_free(struct bp_producer *pr);

#endif
