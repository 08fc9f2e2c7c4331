/* SPDX-License-Identifier: MIT */
/*
 * Ingress lanes (the design: src/lanes.h): building them, closing them,
 * their sums, and a worker's take from them.
 */
#include <errno.h>
#include <stdlib.h>

#include "src/pipeline_internal.h"

/* Pipelines made so far: each one's lanes_id (relaxed). */
static _Atomic uint64_t lanes_made;

int bpi_lanes_create(struct bp_pipeline *p, const struct bp_pipeline_config *c)
{
	unsigned n = c->ingress_lanes > 1 ? c->ingress_lanes : 1;
	/* the capacity shared out, rounded up (the ring rounds up too) */
	unsigned cap = (c->ingress_capacity + n - 1) / n;
	int rc;

	p->lanes = bpi_alloc_aligned(sizeof(*p->lanes) * n, BP_FALSE_SHARING);
	if (!p->lanes)
		return -ENOMEM;
	p->nlanes = n;
	p->lane_bits = (unsigned)__builtin_ctz(n);
	/* relaxed: a name; 0 is no pipeline's */
	p->lanes_id = atomic_fetch_add_explicit(&lanes_made, 1,
						memory_order_relaxed) +
		      1;
	p->flush.lane_bits = p->lane_bits;
	for (unsigned i = 0; i < n; i++) {
		struct bpi_lane *l = &p->lanes[i];

		l->ring = NULL;
		l->index = i;
		/* relaxed: before any thread of the pipeline exists */
		atomic_store_explicit(&l->room_need, ROOM_NOBODY,
				      memory_order_relaxed);
	}
	for (unsigned i = 0; i < n; i++) {
		struct bp_ring *r;

		rc = bp_ring_create(cap, BP_RING_HWM, &r);
		if (rc)
			return rc;
		p->lanes[i].ring = r;
		/* producers waiting for room sleep on each lane's own */
		bpi_waitq_set_waker_fences(bpi_ring_not_full(r));
	}
	p->ingress = p->lanes[0].ring;
	p->intake_wq = bpi_ring_not_empty(p->ingress);
	/*
	 * Idle workers sleep on lane 0's not-empty queue, whatever lane a job
	 * comes in (src/submit.c wakes it). They are interchangeable: a
	 * publication wakes one, and a worker that leaves ready jobs behind
	 * wakes the next (worker.c's pass_wake_on). Waking them all made a
	 * herd: with 16 sleeping workers on 2 cores every batch woke 16
	 * threads and 15 went back to sleep.
	 */
	bpi_waitq_set_waker_fences(bpi_ring_not_empty(p->ingress));
	bpi_waitq_set_wake_one(bpi_ring_not_empty(p->ingress));
	return 0;
}

void bpi_lanes_free(struct bp_pipeline *p)
{
	if (!p->lanes)
		return;
	for (unsigned i = 0; i < p->nlanes; i++)
		bp_ring_destroy(p->lanes[i].ring);
	bpi_free_aligned(p->lanes, sizeof(*p->lanes) * p->nlanes,
			 BP_FALSE_SHARING);
	p->lanes = NULL;
	p->ingress = NULL;
}

void bpi_lanes_close(struct bp_pipeline *p)
{
	for (unsigned i = p->nlanes; i-- > 0;)
		bp_ring_close(p->lanes[i].ring);
}

uint64_t bpi_lanes_enqueued(const struct bp_pipeline *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nlanes; i++)
		n += bpi_ring_enqueued(p->lanes[i].ring);
	return n & (BPI_RING_POS_SPACE - 1);
}

uint64_t bpi_lanes_dequeued(const struct bp_pipeline *p)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < p->nlanes; i++)
		n += bpi_ring_dequeued(p->lanes[i].ring);
	return n & (BPI_RING_POS_SPACE - 1);
}

long bpi_lanes_high_water(const struct bp_pipeline *p)
{
	long n = 0;

	for (unsigned i = 0; i < p->nlanes; i++) {
		long h = bp_ring_high_water(p->lanes[i].ring);

		n += h > 0 ? h : 0;
	}
	return n;
}

int bpi_lanes_take(struct bp_pipeline *p, unsigned *next, void **items,
		   unsigned n, struct bpi_lane **lane)
{
	const unsigned mask = p->nlanes - 1;
	unsigned at = *next & mask, ended = 0;

	for (unsigned i = 0; i <= mask; i++, at = (at + 1) & mask) {
		struct bpi_lane *l = &p->lanes[at];
		int k = bpi_ring_dequeue_burst_nowake(l->ring, items, n);

		if (k > 0) {
			/* the next take starts at the next lane: a producer
			 * that keeps its lane full does not starve the others
			 */
			*next = at + 1;
			*lane = l;
			return k;
		}
		ended += k == -EPIPE;
	}
	/* a lane closed and drained stays so: all of them at once */
	return ended == mask + 1 ? -EPIPE : 0;
}

int bpi_lanes_ready(const struct bp_pipeline *p)
{
	unsigned ended = 0;

	for (unsigned i = 0; i < p->nlanes; i++) {
		int r = bpi_ring_peek(p->lanes[i].ring);

		if (r > 0)
			return 1;
		ended += r < 0;
	}
	return ended == p->nlanes;
}

int bpi_lanes_ended(const struct bp_pipeline *p)
{
	for (unsigned i = 0; i < p->nlanes; i++)
		if (bpi_ring_peek(p->lanes[i].ring) >= 0)
			return 0;
	return 1;
}

__thread struct bpi_thread_lane bpi_thread_lane;

static struct bpi_lane *deal(struct bp_pipeline *p)
{
	/* relaxed: a counter; what it deals is read by its dealer alone */
	unsigned k = atomic_fetch_add_explicit(&p->lanes_dealt, 1,
					       memory_order_relaxed);

	return &p->lanes[k & (p->nlanes - 1)];
}

struct bpi_lane *bpi_lane_deal_thread(struct bp_pipeline *p)
{
	/* the lane first: a signal handler that submits between the two
	 * stores finds no id of p, and is dealt a lane of its own */
	bpi_thread_lane.lane = deal(p);
	bpi_thread_lane.id = p->lanes_id;
	return bpi_thread_lane.lane;
}

struct bpi_lane *bpi_lane_of_handle(struct bp_pipeline *p)
{
	return deal(p);
}
