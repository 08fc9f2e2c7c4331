/* SPDX-License-Identifier: MIT */
/*
 * A producer handle: a single-producer staging buffer in front of
 * bp_pipeline_submit, written by its owner (src/producer.c) and read by the
 * other claimers of its staged jobs, the flusher and drain (src/flusher.c).
 * Who may submit which jobs, when: src/claim.h.
 */
#ifndef BP_SRC_HANDLE_H
#define BP_SRC_HANDLE_H

#include <stdlib.h>

#include "src/pipeline_internal.h"

struct bp_producer {
	/* the owner's line: written per job by the owner only */
	alignas(BP_FALSE_SHARING) struct bp_pipeline *p;
	struct bpi_lane *lane;	   /* its ingress lane (src/lanes.h) */
	struct bp_job **slots;	   /* cap entries, position & mask */
	_Atomic int64_t *stage_ns; /* staging time of each slot's job */
	unsigned cap, mask;	   /* cap: a power of two >= max_inflight */
	uint64_t head_seen;	   /* head as the owner last saw it */
	uint64_t room_end;	   /* head_seen + cap: the buffer is full */
	uint64_t batch_end;	   /* head_seen + max_batch: flush */
	uint64_t claim_seen;	   /* the claim word then, or CLAIM_STALE */
	int64_t due_ns;		   /* job head_seen's staging time + deadline */
	int64_t now_ns;		/* the owner's last clock read (see submit) */
	bool fence;		/* no membarrier: fence per job */
	_Atomic uint64_t tail;	/* owner: release per job; claimers read */
	_Atomic uint64_t claim; /* head << CLAIM_SHIFT | CLAIM_* */
	/*
	 * The tail a flusher or drain claim saw. On a closed handle: drain
	 * submits every staged job below it (an owner whose job is below it
	 * was taken), none at or above it.
	 */
	_Atomic uint64_t claim_end;
	_Atomic int flusher_err; /* the flusher's last submit failed */
	bool detached;		 /* its pipeline was destroyed first */
	bool drain_claimed;  /* the stopper's: drain closed and submits it */
	unsigned drain_pins; /* under the registry lock: drain is using it */
	bool free_on_unpin;  /* under the registry lock: destroyed, drain frees
			      */
	struct bpi_waitq claim_wq; /* waiters for CLAIM_BUSY to clear */
	/* registry: the flusher walks it without a lock (flusher.c) */
	_Atomic(struct bp_producer *) next;
	/* the flusher's own: the tail when its flush round force_gen began */
	uint64_t force_gen, force_tail;
};

/* Free a handle's memory (its owner's destroy, or drain's unpin). */
static inline void bpi_producer_free(struct bp_producer *pr)
{
	free(pr->slots);
	free(pr->stage_ns);
	bpi_free_aligned(pr, sizeof(*pr), BP_FALSE_SHARING);
}

#endif
