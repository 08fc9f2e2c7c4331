/* SPDX-License-Identifier: MIT */
/*
 * The claim protocol of a producer handle: ending a claim, submitting what
 * it covers, waiting for one to end. Its states, and who claims when: the
 * table in src/claim.h.
 */
#include <batchpipe/pipeline.h>

#include "src/claim.h"
#include "src/wait_internal.h"

void bpi_claim_release(struct bp_producer *pr, uint64_t head, unsigned flags)
{
	/*
	 * release: our reads of the slots below head, and the claimer's
	 * flusher_err, before anyone who sees the new head; pairs with the
	 * acquire loads of claim (the owner reuses those slots after one)
	 */
	atomic_store_explicit(&pr->claim, head << CLAIM_SHIFT | flags,
			      memory_order_release);
	bpi_waitq_wake(&pr->claim_wq);
}

void bpi_claim_close_at(struct bp_producer *pr, uint64_t head)
{
	/* relaxed: published by the release that ends the claim */
	atomic_store_explicit(&pr->claim_end, head, memory_order_relaxed);
	bpi_claim_release(pr, head, CLAIM_CLOSED);
}

int bpi_claim_submit(struct bp_producer *pr, uint64_t h, uint64_t t, bool wait,
		     uint64_t *done)
{
	unsigned flags = wait ? 0 : BP_SUBMIT_NONBLOCK;
	int64_t timeout_ns = wait ? -1 : 0;

	while (h < t) {
		unsigned at = (unsigned)(h & pr->mask);
		uint64_t run = pr->cap - at < t - h ? pr->cap - at : t - h;
		int rc = bpi_submit_lane(pr->p, pr->lane, pr->slots + at,
					    (unsigned)run, flags, timeout_ns);

		if (rc < 0)
			return rc;
		h += (uint64_t)rc;
		*done += (uint64_t)rc;
	}
	return 0;
}

static int claim_free(void *arg)
{
	return !(bpi_claim_word(arg) & CLAIM_BUSY);
}

uint64_t bpi_claim_wait(struct bp_producer *pr, int64_t deadline)
{
	/*
	 * A claim in progress is the owner's blocking submit (it ends as soon
	 * as ingress has room) or a flusher's or drain's slice, which never
	 * waits. The word is looked at again after every wake-up: a claim that
	 * ended may be followed at once by the next (the owner's or the
	 * flusher's), and a busy word says "the deadline passed" only once it
	 * has. -EINTR is a signal, not the end of the claim: wait again.
	 */
	for (;;) {
		uint64_t c = bpi_claim_word(pr);
		int64_t left;

		if (!(c & CLAIM_BUSY))
			return c;
		left = deadline < 0 ? -1 : deadline - bpi_now_ns();
		if (deadline >= 0 && left <= 0)
			return c; /* still busy at the deadline */
		bpi_wait_loop(&pr->p->cfg.producer_wait, &pr->claim_wq,
			      claim_free, pr, left);
	}
}

struct drain_watch {
	struct bp_producer *pr;
	uint64_t c; /* the claim word when the owner began to wait */
};

/* Wake condition: drain moved on with the handle's jobs, or gave up. */
static int drain_moved(void *arg)
{
	struct drain_watch *dw = arg;
	uint64_t c = bpi_claim_word(dw->pr);

	/* relaxed: ordered by the acquire of c (the closer's release) */
	return c != dw->c ||
	       atomic_load_explicit(&dw->pr->claim_end, memory_order_relaxed) <=
		       bpi_claim_head(c);
}

/*
 * The drain may yet give up at its deadline and leave the jobs staged, so
 * the owner waits until it has submitted them all or given up (the rest is
 * the owner's), not longer than the drain itself.
 */
uint64_t bpi_claim_wait_drain(struct bp_producer *pr, uint64_t c)
{
	for (;;) {
		struct drain_watch dw = {pr, c};

		/* relaxed: ordered by the acquire of c */
		if (!(c & CLAIM_BUSY) &&
		    atomic_load_explicit(&pr->claim_end,
					 memory_order_relaxed) <=
			    bpi_claim_head(c))
			return c;
		if (c & CLAIM_BUSY) {
			c = bpi_claim_wait(pr, -1); /* a slice */
			continue;
		}
		/* woken by the drain's next release (-EINTR: look again) */
		(void)bpi_wait_loop(&pr->p->cfg.producer_wait, &pr->claim_wq,
				    drain_moved, &dw, -1);
		c = bpi_claim_word(pr);
	}
}

void bpi_claim_open(struct bp_producer *pr)
{
	uint64_t c = bpi_claim_word(pr);

	for (;;) {
		if (c & CLAIM_BUSY)
			c = bpi_claim_wait(pr, -1);
		/* release: the owner that sees it open sees a started
		 * pipeline; acquire on failure: as bpi_claim_word */
		else if (atomic_compare_exchange_weak_explicit(
				 &pr->claim, &c, c & ~(uint64_t)CLAIM_IDLE,
				 memory_order_release, memory_order_acquire))
			return;
	}
}
