/* SPDX-License-Identifier: MIT */
/*
 * Producer handles: the owner's calls. Jobs are staged in the handle's
 * single-producer queue and submitted as one batch when max_batch are
 * staged, when the owner finds the oldest staged job older than the flush
 * deadline, on bp_producer_flush, or by the pipeline's flusher thread once
 * that deadline passes while the owner is away (flusher.c). The deadline is
 * a max age measured from the oldest staged job: adding jobs never
 * postpones it. How claims keep each handle's order: src/claim.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "src/claim.h"
#include "src/flusher.h"
#include "src/handle.h"
#include "src/self.h"
#include "src/wait_internal.h"

/* bp_producer_submit reads the clock once per this many jobs (a power of 2) */
#define CLOCK_EVERY 8

/* The owner's view of head, and where the buffer is full from it. */
static inline void saw_head(struct bp_producer *pr, uint64_t h)
{
	pr->head_seen = h;
	pr->room_end = h + pr->cap;
}

/* How the owner flushes (own_flush). */
enum {
	/* a claim in progress is waited for, then what is left is claimed;
	 * without it, that claim's owner takes what it sees */
	OWN_WAIT = 1,
	/* on an error, the job the caller just staged is taken back (before
	 * the claim ends, so nobody else can submit it): the caller reports
	 * it as not taken */
	OWN_UNSTAGE_LAST = 2,
	/* bp_producer_destroy: claim even with nothing staged, and end the
	 * claim closing the handle, so that nobody (flusher, drain) submits
	 * what a failed flush leaves to the caller */
	OWN_CLOSE = 4,
};

/*
 * The owner claims and submits everything staged. 0 does not always mean
 * the jobs are in, nor that the buffer has room: without OWN_WAIT a claim
 * in progress takes what it saw, and on a handle a drain closed the drain
 * submits what is below claim_end, perhaps not yet (make_room looks at
 * head again).
 */
static int own_flush(struct bp_producer *pr, unsigned how)
{
	uint64_t c = bpi_claim_word(pr);
	uint64_t h, done = 0;
	/* relaxed: the owner's own store */
	uint64_t t = atomic_load_explicit(&pr->tail, memory_order_relaxed);
	int rc = 0;

	for (;;) {
		if (c & CLAIM_BUSY) {
			if (!(how & OWN_WAIT))
				return 0;
			/* short: the flusher's and drain's claims never wait */
			c = bpi_claim_wait(pr, -1);
			continue;
		}
		if (c & CLAIM_CLOSED) {
			/* relaxed: ordered by the acquire of c (its release) */
			uint64_t end = atomic_load_explicit(
				&pr->claim_end, memory_order_relaxed);

			if ((how & OWN_CLOSE) && end > bpi_claim_head(c) &&
			    !bpi_self_is(pr->p)) {
				c = bpi_claim_wait_drain(pr, c);
				continue; /* claim_end is final now */
			}
			if (end >= t)
				return 0; /* drain submits them all */
			if (how & OWN_UNSTAGE_LAST)
				/*
				 * The job just staged (t - 1) is not drain's:
				 * take it back, the caller is told it was not
				 * taken. relaxed: as in closed_after_stage.
				 */
				atomic_store_explicit(&pr->tail, t - 1,
						      memory_order_relaxed);
			return -EPIPE;
		}
		if (bpi_claim_head(c) == t && !(how & OWN_CLOSE))
			return 0; /* nothing staged */
		if (bpi_claim_try(pr, &c, 0))
			break;
	}
	h = bpi_claim_head(c);
	if (h == t) {
		/* nothing staged (OWN_CLOSE) */
	} else if ((h & pr->mask) + (t - h) <= pr->cap) {
		/* the usual case: one run, no wrap */
		rc = bpi_submit_lane(pr->p, pr->lane,
				     pr->slots + (h & pr->mask),
				     (unsigned)(t - h), 0, -1);
		done = rc > 0 ? (uint64_t)rc : 0;
		rc = rc < 0 ? rc : 0;
		if (rc == 0 && h + done < t) /* partial, then an error */
			rc = bpi_claim_submit(pr, h + done, t, true, &done);
	} else {
		rc = bpi_claim_submit(pr, h, t, true, &done);
	}
	if (rc < 0 && (how & OWN_UNSTAGE_LAST) && h + done < t) {
		/* relaxed: published by the release that ends the claim */
		atomic_store_explicit(&pr->tail, t - 1, memory_order_relaxed);
	}
	/* relaxed: the flusher re-reads it under its claim */
	if (rc == 0 &&
	    atomic_load_explicit(&pr->flusher_err, memory_order_relaxed))
		atomic_store_explicit(&pr->flusher_err, 0,
				      memory_order_relaxed);
	saw_head(pr, h + done);
	pr->claim_seen = CLAIM_STALE; /* the next job starts a batch */
	/* -EPIPE: intake is closed for good, and so is the handle */
	if (rc == -EPIPE || (how & OWN_CLOSE))
		bpi_claim_close_at(pr, h + done);
	else
		bpi_claim_release(pr, h + done, 0);
	return rc;
}

/*
 * The first job of a batch (nothing older is staged): make sure the
 * flusher wakes by this batch's deadline. Once per batch, not per job.
 */
static void announce_batch(struct bp_pipeline *p, int64_t now,
			   int64_t deadline_ns)
{
	int64_t due = bpi_deadline(now, deadline_ns);

	/*
	 * Dekker with the flusher going to sleep (store sleep_until, arm,
	 * look at tails): our tail store before our look at sleep_until, so
	 * either it sees our job or we see when it will wake.
	 */
	bpi_full_fence();
	/* relaxed: ordered by the fences on both sides */
	if (due <
	    atomic_load_explicit(&p->fl.sleep_until, memory_order_relaxed))
		bpi_waitq_wake(&p->fl.wq);
}

/*
 * The handle was closed by drain around our tail store: drain submitted
 * the job if its look at tail saw it. Drain's later claims (its slices)
 * submit only below claim_end, so a job at or above it can be taken back.
 */
static int closed_after_stage(struct bp_producer *pr, uint64_t c, uint64_t t)
{
	if (c & CLAIM_BUSY) /* short: drain's claims never wait */
		c = bpi_claim_wait(pr, -1);
	pr->claim_seen = CLAIM_STALE; /* every later call comes back here */
	saw_head(pr, bpi_claim_head(c));
	/* relaxed: ordered by the acquire of c (the closer's release) */
	if (atomic_load_explicit(&pr->claim_end, memory_order_relaxed) > t)
		return 0; /* drain's look at tail saw it: it submits it */
	/* relaxed: only the owner reads tail of a closed, idle handle */
	atomic_store_explicit(&pr->tail, t, memory_order_relaxed);
	return -EPIPE;
}

static int claim_changed(struct bp_producer *pr, uint64_t c, uint64_t t,
			 int64_t now);

/*
 * The pipeline has not started (or never will): take the job back, under a
 * claim so that nobody can submit it meanwhile. If start opened the handle
 * first, the job simply stays staged.
 */
static int idle_after_stage(struct bp_producer *pr, uint64_t c, uint64_t t,
			    int64_t now)
{
	int st;

	if (!bpi_claim_try(pr, &c, 0))
		return claim_changed(pr, c, t, now); /* opened or closed */
	/* relaxed: published by the release that ends the claim */
	atomic_store_explicit(&pr->tail, t, memory_order_relaxed);
	bpi_claim_release(pr, bpi_claim_head(c), CLAIM_IDLE);
	pr->claim_seen = CLAIM_STALE;
	/* relaxed: only which error to give */
	st = atomic_load_explicit(&pr->p->state, memory_order_relaxed);
	if (st >= P_STOPPING)
		return -EPIPE; /* start failed, or drained without a start */
	/* CREATED, or RUNNING with the handles not opened yet: not started */
	bpi_log(&pr->p->log, BP_LOG_ERROR,
		"bp_producer_submit: the pipeline is not started");
	return -EINVAL;
}

/*
 * The claim word changed since the owner's last look (a claim began or
 * ended, or the owner's own flush asked for a fresh look): once per batch.
 * The batch's deadline and size limit are fixed here, with the live values
 * of the moment.
 */
static __attribute__((noinline)) int
claim_changed(struct bp_producer *pr, uint64_t c, uint64_t t, int64_t now)
{
	struct bp_pipeline *p;
	uint64_t h;
	int64_t deadline_ns;

	if (c & CLAIM_CLOSED)
		return closed_after_stage(pr, c, t);
	if (c & CLAIM_IDLE)
		return idle_after_stage(pr, c, t, now);
	p = pr->p;
	h = bpi_claim_head(c);
	pr->claim_seen = c;
	saw_head(pr, h);
	/* relaxed: live settings, read once per batch */
	deadline_ns =
		atomic_load_explicit(&p->live_flush_ns, memory_order_relaxed);
	pr->batch_end = h + atomic_load_explicit(&p->live_max_batch,
						 memory_order_relaxed);
	/* relaxed: the owner's own store */
	pr->due_ns =
		bpi_deadline(atomic_load_explicit(&pr->stage_ns[h & pr->mask],
						  memory_order_relaxed),
			     deadline_ns);
	if (t + 1 >= pr->batch_end)
		return own_flush(pr, OWN_UNSTAGE_LAST);
	if (now >= pr->due_ns)
		return own_flush(pr, OWN_WAIT | OWN_UNSTAGE_LAST);
	if (h == t) /* still staged, and the oldest: a new batch */
		announce_batch(p, now, deadline_ns);
	return 0;
}

/*
 * The buffer looks full: look at head again, flush if it really is, and
 * look again after the flush. Room is only what head says: a flush that
 * returns 0 has not always made any (it found the handle closed by a drain
 * that submits the staged jobs itself, and may not have read them yet).
 */
static __attribute__((noinline)) int make_room(struct bp_producer *pr,
					       uint64_t t)
{
	for (;;) {
		/* slots below head are free again (the claim's release) */
		uint64_t c = bpi_claim_word(pr);
		int rc;

		saw_head(pr, bpi_claim_head(c));
		pr->claim_seen = CLAIM_STALE; /* due_ns may be stale too */
		/*
		 * Closed: a new job could only be refused, and the slots
		 * below claim_end may still be drain's to read: no room,
		 * whatever a flush would say about the jobs already staged.
		 */
		if (c & CLAIM_CLOSED)
			return -EPIPE;
		if (t != pr->room_end)
			return 0;
		rc = own_flush(pr, OWN_WAIT);
		if (rc < 0)
			return rc;
	}
}

/*
 * Per job: stage, then one look at the claim word. Whether the pipeline
 * runs is in that word too (CLAIM_IDLE before start, CLAIM_CLOSED after
 * drain), so a job staged at the wrong time is taken back on the slow path.
 */
int bp_producer_submit(struct bp_producer *pr, struct bp_job *job)
{
	uint64_t t, c;
	unsigned at;
	int64_t now;

	if (!pr || !job || ((uintptr_t)job & 1))
		return -EINVAL;
	/* relaxed: the owner's own store */
	t = atomic_load_explicit(&pr->tail, memory_order_relaxed);
	if (t == pr->room_end) {
		int rc = make_room(pr, t);

		if (rc < 0)
			return rc;
	}
	/*
	 * The clock, read for the first job of a batch (nothing staged below
	 * t by the claim word's head: relaxed, a stale head only means a read
	 * more) and then once per CLOCK_EVERY jobs: a read costs tens of ns
	 * on some machines, more than the rest of this call. A job is stamped
	 * with the last read, at most CLOCK_EVERY - 1 jobs old, so its age is
	 * over-, never understated: the flusher's deadline flush can only
	 * come early. The owner's own deadline check below uses the same
	 * read, so it may see a passed deadline a few calls late; the
	 * flusher, woken for that deadline (announce_batch), does not.
	 */
	if ((t & (CLOCK_EVERY - 1)) == 0 ||
	    t == bpi_claim_head(atomic_load_explicit(&pr->claim,
						     memory_order_relaxed)))
		pr->now_ns = bpi_now_ns();
	now = pr->now_ns;
	at = (unsigned)(t & pr->mask);
	pr->slots[at] = job;
	/* release: the flusher reads it before re-checking claim (seqlock) */
	atomic_store_explicit(&pr->stage_ns[at], now, memory_order_release);
	/* release: the job before the new tail; pairs with claimers' acquire */
	atomic_store_explicit(&pr->tail, t + 1, memory_order_release);
	/*
	 * Without membarrier the claimers cannot order our tail store before
	 * our claim load for us (bpi_barrier_all): fence here, as wait.h's
	 * wakers do.
	 */
	if (pr->fence)
		bpi_full_fence();
	/* claims that ended since (acquire: pairs with their release) */
	c = bpi_claim_word(pr);
	if (c != pr->claim_seen)
		return claim_changed(pr, c, t, now);
	if (t + 1 >= pr->batch_end)
		return own_flush(pr, OWN_UNSTAGE_LAST);
	if (now >= pr->due_ns)
		return own_flush(pr, OWN_WAIT | OWN_UNSTAGE_LAST);
	return 0;
}

int bp_producer_flush(struct bp_producer *pr)
{
	if (!pr)
		return -EINVAL;
	if (pr->detached)
		return bp_producer_staged(pr) ? -EPIPE : 0;
	return own_flush(pr, OWN_WAIT);
}

unsigned bp_producer_staged(const struct bp_producer *pr)
{
	uint64_t c, h, e, t;

	if (!pr)
		return 0;
	c = bpi_claim_word(pr);
	h = bpi_claim_head(c);
	if (c & (CLAIM_BUSY | CLAIM_CLOSED)) {
		/*
		 * BUSY: the flusher's or drain's claim in progress: what it
		 * took is no longer staged (and may even be delivered). The
		 * claimer stores claim_end after its CAS, so this may still
		 * be an earlier claim's: the flusher leaves it at the head it
		 * released, drain's close sets it for good, so a stale one is
		 * at most head. CLOSED: drain has taken everything below
		 * claim_end to submit, as own_flush counts it (a timed-out or
		 * failed drain lowers it to what it did submit). relaxed:
		 * for CLOSED ordered by the acquire of c (stored before the
		 * release that set CLOSED); for BUSY a snapshot.
		 */
		e = atomic_load_explicit(&pr->claim_end, memory_order_relaxed);
		if (e > h)
			h = e;
	}
	/* relaxed: the owner's own store */
	t = atomic_load_explicit(&pr->tail, memory_order_relaxed);
	/* claim_end may be past a job the owner took back */
	return t > h ? (unsigned)(t - h) : 0;
}

int bp_producer_create(struct bp_pipeline *p, struct bp_producer **out)
{
	struct bp_producer *pr;
	unsigned cap = 1;
	int rc;

	if (!p || !out)
		return -EINVAL;
	pr = bpi_alloc_aligned(sizeof(*pr), BP_FALSE_SHARING); /* zeroed */
	if (!pr)
		return -ENOMEM;
	/* live max_batch never exceeds max_inflight (set_max_batch checks) */
	while (cap < p->cfg.max_inflight)
		cap <<= 1;
	pr->cap = cap;
	pr->mask = cap - 1;
	saw_head(pr, 0);
	pr->slots = malloc(cap * sizeof(*pr->slots));
	pr->stage_ns = calloc(cap, sizeof(*pr->stage_ns));
	pr->p = p;
	/* its own lane, for every submit of its jobs, by any thread */
	pr->lane = bpi_lane_of_handle(p);
	pr->claim_seen = CLAIM_STALE;
	bpi_waitq_init(&pr->claim_wq); /* settles membarrier (waitq.c) */
	/* settled by the pthread_once in bpi_waitq_init */
	pr->fence = bpi_waitq_fence_needed();
	rc = pr->slots && pr->stage_ns ? bpi_flusher_add(p, pr) : -ENOMEM;
	if (rc) {
		bpi_producer_free(pr);
		return rc;
	}
	*out = pr;
	return 0;
}

int bp_producer_destroy(struct bp_producer *pr)
{
	int rc;

	if (!pr)
		return 0;
	/*
	 * The last flush closes the handle as it ends its claim: jobs it
	 * could not submit are the caller's (the error says so), and neither
	 * the flusher nor a drain takes them after it. A drain that closed
	 * the handle first submits everything it saw staged (0 here).
	 */
	rc = pr->detached ? bp_producer_flush(pr)
			  : own_flush(pr, OWN_WAIT | OWN_CLOSE);
	/* a drain holding the handle frees it when it is done with it */
	if (pr->detached || bpi_flusher_remove(pr->p, pr))
		bpi_producer_free(pr);
	return rc < 0 ? rc : 0;
}
