/* SPDX-License-Identifier: MIT */
/*
 * Ingress lanes (src/lanes.c): ingress as ingress_lanes rings instead of
 * one, so that producers do not contend for one claim. With one lane (the
 * default) lane 0 is ingress as it always was: a submit tests nlanes and
 * goes the old way, a take reaches the ring through its lane.
 *
 * - A producer reserves and publishes in its lane: bp_pipeline_submit in
 *   the calling thread's (bpi_thread_lane), a producer handle in its
 *   own. A job's seq is its lane position << lane_bits | its lane
 *   (bpi_lane_seq): unique, increasing within a lane, not dense.
 * - Every lane publishes quietly and wakes one queue, lane 0's not-empty
 *   (a wake-one, waker-fences queue): idle stage 0 workers sleep there
 *   as they did on the one ingress, whatever lane a job comes in.
 * - Room: each lane has its own room_need, and its producers wait for room
 *   on its not-full queue (src/submit.c), woken by the takes from it.
 * - Workers take from one lane per take, the lanes in turn from where the
 *   worker last took; the end of the stream is every lane closed and
 *   drained. Close closes lane 0 last: its close wakes the idle workers,
 *   who then see every lane closed.
 */
#ifndef BP_SRC_LANES_H
#define BP_SRC_LANES_H

#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include <batchpipe/ring.h>

#include "src/ring_internal.h"

struct bp_pipeline;
struct bp_pipeline_config;

struct bpi_lane {
	/* read by its producers and by every worker's take */
	alignas(BP_FALSE_SHARING) struct bp_ring *ring;
	unsigned index;
	/*
	 * The smallest count of free slots a thread waiting for room in this
	 * lane waits for, ROOM_NOBODY when none says (src/submit.c). Written
	 * by waiters and by the worker that wakes them; read by every take
	 * from this lane: a line of its own.
	 */
	alignas(BP_FALSE_SHARING) _Atomic unsigned room_need;
};

/* room_need when no thread waits for room in a lane */
#define ROOM_NOBODY UINT_MAX

/*
 * Build p->lanes (c->ingress_lanes of them, 1 for 0) and p->ingress, lane
 * 0's ring; -ENOMEM or a ring's error. bpi_lanes_free frees what it built.
 */
int bpi_lanes_create(struct bp_pipeline *p,
		     const struct bp_pipeline_config *c);
void bpi_lanes_free(struct bp_pipeline *p);

/* Close every lane, lane 0 last (its close wakes the idle workers). */
void bpi_lanes_close(struct bp_pipeline *p);

/* Sums over the lanes: reserved, taken (mod 2^63), high-water marks. */
uint64_t bpi_lanes_enqueued(const struct bp_pipeline *p);
uint64_t bpi_lanes_dequeued(const struct bp_pipeline *p);
long bpi_lanes_high_water(const struct bp_pipeline *p);

/*
 * Up to n jobs from the first lane from *next on that has some (then *next
 * is the lane after it); 0, or -EPIPE when every lane is closed and
 * drained. *lane: the lane taken from (its room wake is the caller's).
 */
int bpi_lanes_take(struct bp_pipeline *p, unsigned *next, void **items,
		   unsigned n, struct bpi_lane **lane);

/*
 * A worker's wake condition: a lane has a published job at its head, or
 * every lane is closed and drained. A lane closed and drained while
 * another is not says no: the take would find nothing.
 */
int bpi_lanes_ready(const struct bp_pipeline *p);

/* Every lane closed and drained: no job can come. */
int bpi_lanes_ended(const struct bp_pipeline *p);

/*
 * Lanes are dealt round-robin per pipeline, to threads (at their first
 * submit) and to handles (at their creation) from one count, so that as
 * many producers as lanes get one each. A thread keeps the lane of the
 * last pipeline it submitted to with lanes (lanes_id names it; a thread
 * that alternates between two such pipelines is dealt a lane each time
 * it comes back, which is correct, a lane being a multi-producer ring).
 * The default TLS model (one __tls_get_addr call per submit with lanes,
 * from the shared library) keeps the library loadable with dlopen, as
 * src/self.c says; initial-exec would save the call and need static TLS.
 */
struct bpi_thread_lane {
	uint64_t id; /* the pipeline's lanes_id; 0: none */
	struct bpi_lane *lane;
};
extern __thread struct bpi_thread_lane bpi_thread_lane;

/* Deal the calling thread a lane of p (cold: its first submit). */
struct bpi_lane *bpi_lane_deal_thread(struct bp_pipeline *p);

/* A new producer handle's lane of p. */
struct bpi_lane *bpi_lane_of_handle(struct bp_pipeline *p);

/*
 * The seq of the job at lane position pos of lane `lane` (the seq space
 * is 63 bits: the lane position's top lane_bits bits are dropped).
 */
static inline uint64_t bpi_lane_seq(uint64_t pos, unsigned lane,
				    unsigned lane_bits)
{
	return ((pos << lane_bits) | lane) & (BPI_RING_POS_SPACE - 1);
}

#endif
