/* SPDX-License-Identifier: MIT */
/*
 * bp_pipeline_flush: wait until every job accepted before the call has been
 * delivered, with intake open (src/flush.c). Two steps, each a request
 * generation that a library thread answers:
 *
 * 1. The flusher (src/flusher.c) submits the jobs staged in producer
 *    handles: it snapshots every handle's tail in its next walk and claims
 *    what is staged below it as if it were due, until every handle's head
 *    has passed its snapshot (fl.force_req / fl.force_done).
 * 2. The sink marks ingress: at the request it reads how many positions
 *    producers have reserved (every job accepted so far, and every job it
 *    has delivered, is below that mark), then counts the jobs it delivers
 *    below the mark until all of them are through (req / done below).
 *    With ingress lanes, a mark per lane, and a seq is below the mark of
 *    its lane (src/lanes.h).
 *
 * The sink's side costs it one load per loop while nobody flushes, and a
 * compare per job while a flush is open.
 */
#ifndef BP_SRC_FLUSH_H
#define BP_SRC_FLUSH_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <batchpipe/job.h>
#include <batchpipe/pipeline.h> /* BP_MAX_LANES */
#include <batchpipe/ring.h> /* BP_FALSE_SHARING */

#include "src/waitq.h"

struct bp_pipeline;

struct bpi_flush {
	/* callers' line: fetch_add by each bp_pipeline_flush */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t req;
	/* the sink's answer: every request up to done is delivered */
	alignas(BP_FALSE_SHARING) _Atomic uint64_t done;
	/* flush callers sleep here; the sink and the flusher wake it */
	struct bpi_waitq wq;
	/* the sink's own, from here on */
	alignas(BP_FALSE_SHARING) uint64_t adopted; /* request being answered */
	bool open;	    /* a mark is set, not yet reached */
	unsigned lane_bits; /* the pipeline's (src/lanes.h), set by create */
	uint64_t target;    /* jobs below the mark */
	uint64_t below;	    /* of them, delivered */
	uint64_t delivered; /* every job the sink has delivered */
	/* per lane: lane positions below it (modulo their space) count;
	 * last, so that the fields read per batch share a line */
	uint64_t mark[BP_MAX_LANES];
};

/*
 * The sink, once per loop: the request to answer now (0: none). Its value
 * is what the sink adopts (bpi_flush_sink_adopt): a later one, read again,
 * could come from a caller whose submits this acquire does not order.
 */
static inline uint64_t bpi_flush_pending(struct bpi_flush *f)
{
	uint64_t req;

	if (f->open)
		return 0;
	/* acquire: pairs with the caller's seq_cst increment, so the jobs it
	 * (and every caller before it) submitted are in the reservation
	 * count the sink reads next */
	req = atomic_load_explicit(&f->req, memory_order_acquire);
	return req != f->adopted ? req : 0;
}

/* Set the mark for request req (cold path, out of line). */
void bpi_flush_sink_adopt(struct bp_pipeline *p, struct bpi_flush *f,
			  uint64_t req);

/* The mark is reached and delivered: answer, wake the callers
 * (src/flush.c). */
void bpi_flush_sink_done(struct bpi_flush *f);

/*
 * deliver()'s part, before the sink callback (which may recycle the jobs):
 * count n jobs about to be delivered, those below the mark apart. A seq is
 * its lane position << lane_bits | its lane; the position is below its
 * lane's mark in their space, the seq space >> lane_bits: (mark - 1 -
 * position) lands in the lower half. Returns whether the mark is reached:
 * the caller answers with bpi_flush_sink_done() once the callback has
 * returned.
 */
static inline bool bpi_flush_count(struct bpi_flush *f,
				   struct bp_job *const *jobs, unsigned n,
				   uint64_t seq_mask)
{
	f->delivered += n;
	if (__builtin_expect(!f->open, 1))
		return false;
	const unsigned bits = f->lane_bits;
	const uint64_t lanes = (UINT64_C(1) << bits) - 1;
	const uint64_t space = seq_mask >> bits;

	for (unsigned i = 0; i < n; i++) {
		uint64_t seq = jobs[i]->seq;

		f->below += ((f->mark[seq & lanes] - 1 - (seq >> bits)) &
			     space) < (space >> 1);
	}
	return f->below >= f->target;
}

#endif
