/* SPDX-License-Identifier: MIT */
/*
 * The flusher: one thread per pipeline, started with its first producer
 * handle, that submits a handle's staged jobs once the oldest is older than
 * the flush deadline and the owner has not done it. It sleeps until the
 * earliest deadline of any handle; a producer that stages the first job of
 * a batch wakes it only if that batch is due before it would wake anyway
 * (once per batch, not per job). It claims a handle's staged jobs as the
 * owner does (src/claim.h) and submits what ingress has room for,
 * never waiting with a claim held: when ingress is full it ends the claim
 * and waits for room holding nothing (the owner may be a thread ingress
 * waits for).
 *
 * Also here: the registry of handles (a list the flusher walks without a
 * lock; changes take a flag lock, a cold path; a removed handle is freed
 * only after the walk that could still see it), and what drain and destroy
 * do with handles.
 *
 * A job the flusher's look at tail missed while its owner was staging it,
 * with the owner's look at claim missing the flusher's claim, would wait
 * for the owner's next call. The flusher looks again when it wakes; before
 * it sleeps without a deadline after a claim it issues a membarrier first,
 * which makes every such tail store visible to its last look.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "src/base/spin.h"
#include "src/claim.h"
#include "src/flusher.h"
#include "src/handle.h"
#include "src/wait_internal.h"

/* ----------------------------------------------------------- the walk */

/*
 * Submit what a claim (taken with head h) covers as far as ingress has room,
 * then end the claim. Returns whether ingress was full: the rest stays
 * staged, and the flusher waits for room holding no claim (the owner may be
 * a thread ingress waits for, the sink among them).
 */
static bool flusher_submit(struct bp_pipeline *p, struct bp_producer *pr,
			   uint64_t h)
{
	uint64_t t, done = 0;
	int rc = 0;

	/* relaxed: ordered by the claim's acquire (set before ours) */
	if (atomic_load_explicit(&pr->flusher_err, memory_order_relaxed)) {
		bpi_claim_release(pr, h, 0);
		return false;
	}
	/* acquire: the jobs below tail are stored (pairs with the owner) */
	t = atomic_load_explicit(&pr->tail, memory_order_acquire);
	/* relaxed: the submit's publication carries it to whoever saw a job */
	atomic_store_explicit(&pr->claim_end, t, memory_order_relaxed);
	rc = bpi_claim_submit(pr, h, t, false, &done);
	if (rc != -EPIPE)
		/* where this claim stopped: a later claim's BUSY window shows
		 * no stale end past head (bp_producer_staged). relaxed:
		 * published by the release below */
		atomic_store_explicit(&pr->claim_end, h + done,
				      memory_order_relaxed);
	if (rc == -EAGAIN) {
		bpi_claim_release(pr, h + done, 0);
		return true;
	}
	if (rc < 0) {
		/*
		 * What was not accepted stays staged, in order: the owner's
		 * flush or destroy retries it and reports its own error.
		 * relaxed: published by the release that ends the claim.
		 */
		atomic_store_explicit(&pr->flusher_err, rc,
				      memory_order_relaxed);
		bpi_log(&p->log, BP_LOG_WARN,
			"producer flush deadline: submit failed: %s; %llu "
			"job(s) stay staged for bp_producer_flush",
			bp_strerror(rc), (unsigned long long)(t - h - done));
	}
	/* -EPIPE: intake is closed for good, and so is the handle */
	if (rc == -EPIPE)
		bpi_claim_close_at(pr, h + done);
	else
		bpi_claim_release(pr, h + done, 0);
	return false;
}

/*
 * A flush round (bp_pipeline_flush): the first walk of the round notes
 * every handle's tail; jobs staged below it are due at once, and the
 * round lasts while a handle's head is below it. A handle a drain closed
 * keeps the round open (drain submits its jobs, and the flush waits for
 * the end instead); one its owner closed, or whose last submit by the
 * flusher failed (the owner gets those jobs back, with the error, from its
 * next call: they are no longer the pipeline's), does not. Returns whether
 * jobs of pr stay for the round.
 */
static bool force_owes(struct bp_pipeline *p, struct bp_producer *pr,
		       uint64_t c)
{
	struct bpi_flusher *fl = &p->fl;

	/* acquire: as the walk's look at tail */
	uint64_t t = atomic_load_explicit(&pr->tail, memory_order_acquire);

	if (pr->force_gen != fl->force_round) {
		pr->force_tail = t;
		pr->force_gen = fl->force_round;
	}
	/*
	 * Owed: staged below the snapshot and still staged. An owner whose
	 * submit failed takes its last job back (tail comes down): that job
	 * was never accepted, and the round does not wait for it.
	 */
	if (bpi_claim_head(c) >= (t < pr->force_tail ? t : pr->force_tail) ||
	    (c & CLAIM_IDLE))
		return false;
	if (c & CLAIM_CLOSED)
		/* relaxed: stopping is for good; a stale no is an owner's */
		return atomic_load_explicit(&p->state, memory_order_relaxed) >=
		       P_STOPPING;
	/* relaxed: a hint, as in walk() */
	return !atomic_load_explicit(&pr->flusher_err, memory_order_relaxed);
}

/*
 * How long the flusher waits for room in a full lane before it walks the
 * handles again. With one lane, until there is room: nobody can submit
 * before. With lanes, handles of other lanes may fall due meanwhile: until
 * the next deadline the walk saw (next), and for a handle whose first job
 * is staged after the walk, FULL_WAIT_MIN_NS, doubled while the lane stays
 * full, up to FULL_WAIT_MAX_NS: a lane that stays full (its workers held
 * back) costs the flusher a look every 16 ms, not every millisecond, and
 * such a handle waits that long at most.
 */
#define FULL_WAIT_MIN_NS INT64_C(1000000)
#define FULL_WAIT_MAX_NS INT64_C(16000000)

static int64_t full_wait_ns(struct bp_pipeline *p, int64_t next)
{
	int64_t wait = p->fl.full_backoff_ns, left;

	if (p->nlanes == 1)
		return -1;
	if (wait < FULL_WAIT_MIN_NS) /* the first, zeroed at create */
		wait = FULL_WAIT_MIN_NS;
	if (wait < FULL_WAIT_MAX_NS)
		p->fl.full_backoff_ns = 2 * wait;
	if (next < 0)
		return wait;
	left = next - bpi_now_ns();
	return left < 0 ? 0 : left < wait ? left : wait;
}

/*
 * Walk the handles once. claim: submit those whose oldest staged job is
 * due (or owed to a flush round). *next: the earliest deadline still
 * ahead (-1: none). Returns whether to walk again at once (a claim took
 * time, or a handle changed under the look). Sets *claimed after a claim,
 * fl->force_left when a flush round is owed jobs, *full to the ingress
 * lane of the first handle whose submit found it full.
 */
static bool walk(struct bp_pipeline *p, bool claim, int64_t *next,
		 bool *claimed, struct bpi_lane **full)
{
	struct bpi_flusher *fl = &p->fl;
	int64_t now = bpi_now_ns();
	/* relaxed: a live setting, read each walk */
	int64_t deadline_ns =
		atomic_load_explicit(&p->live_flush_ns, memory_order_relaxed);
	bool again = false;

	*next = -1;
	/* seq_cst: odd before the list loads; Dekker with bpi_flusher_remove */
	atomic_fetch_add_explicit(&fl->walks, 1, memory_order_seq_cst);
	/* seq_cst loads: see every removal ordered before the increment */
	for (struct bp_producer *pr = atomic_load(&fl->handles); pr;
	     pr = atomic_load(&pr->next)) {
		uint64_t c = bpi_claim_word(pr);
		uint64_t h = bpi_claim_head(c), t;
		bool owed = fl->force_round && force_owes(p, pr, c);
		int64_t due;

		fl->force_left |= owed;
		/* relaxed: hints; flusher_submit re-reads them under claim */
		if ((c & (CLAIM_BUSY | CLAIM_CLOSED | CLAIM_IDLE)) ||
		    atomic_load_explicit(&pr->flusher_err,
					 memory_order_relaxed))
			continue; /* the claim's owner takes all it sees */
		/* acquire: the jobs and times below tail (owner's release) */
		t = atomic_load_explicit(&pr->tail, memory_order_acquire);
		if (t == h)
			continue;
		/*
		 * The oldest staged job's time, then claim again: the owner
		 * reuses that slot only after head moved past it, so an
		 * unchanged claim word means the time belongs to job h.
		 * acquire: orders the re-read after it (pairs with the
		 * owner's release of the time).
		 */
		due = bpi_deadline(
			atomic_load_explicit(&pr->stage_ns[h & pr->mask],
					     memory_order_acquire),
			deadline_ns);
		if (owed)
			due = now; /* a flush waits for it */
		/* relaxed: ordered by the acquire above */
		if (atomic_load_explicit(&pr->claim, memory_order_relaxed) !=
		    c) {
			again = true;
			continue;
		}
		if (!claim || due > now) {
			if (*next < 0 || due < *next)
				*next = due;
			continue;
		}
		if (!bpi_claim_try(pr, &c, 0)) {
			again = true; /* the owner or drain got there first */
			continue;
		}
		if (flusher_submit(p, pr, h) && !*full)
			*full = pr->lane;
		*claimed = true;
		again = true;
	}
	/* seq_cst: even again; a waiting removal sees the walk ended */
	atomic_fetch_add_explicit(&fl->walks, 1, memory_order_seq_cst);
	bpi_waitq_wake(&fl->walk_wq);
	return again;
}

/*
 * How soon a flush round looks again at a handle whose owner is busy (a
 * submit of its own, perhaps blocked on a full ingress): from 20 us,
 * doubling to 1 ms while the owner stays busy.
 */
#define FORCE_POLL_MIN_NS INT64_C(20000)
#define FORCE_POLL_MAX_NS INT64_C(1000000)

/*
 * The request a round should begin for (0: none, or a round is on). Its
 * value is the round's: a later one, read again, could come from a caller
 * whose staged jobs this acquire does not order before the snapshot.
 */
static uint64_t force_asked(struct bpi_flusher *fl)
{
	uint64_t req;

	if (fl->force_round)
		return 0;
	/* acquire: pairs with bp_pipeline_flush's seq_cst increment (the
	 * wake's Dekker partner is the prepare's fence before this); its
	 * jobs, and every earlier caller's, are staged before the snapshot */
	req = atomic_load_explicit(&fl->force_req, memory_order_acquire);
	/* relaxed: only the flusher writes force_done */
	return req != atomic_load_explicit(&fl->force_done,
					   memory_order_relaxed)
		       ? req
		       : 0;
}

/* Begin a round for every request so far (later ones wait for the next). */
static void force_begin(struct bpi_flusher *fl)
{
	uint64_t req = force_asked(fl);

	if (req) {
		fl->force_round = req;
		fl->force_poll_ns = FORCE_POLL_MIN_NS;
	}
}

/* The round's jobs are all submitted: answer every request it covers. */
static void force_end(struct bp_pipeline *p)
{
	struct bpi_flusher *fl = &p->fl;

	/* release: the submits before the answer */
	atomic_store_explicit(&fl->force_done, fl->force_round,
			      memory_order_release);
	fl->force_round = 0;
	bpi_waitq_wake_all_slow(&p->flush.wq);
}

static void *flusher_main(void *arg)
{
	struct bp_pipeline *p = arg;
	struct bpi_flusher *fl = &p->fl;
	bool claimed = false; /* claims since the last membarrier */

	/* acquire: pairs with the release in bpi_flusher_close */
	while (!atomic_load_explicit(&fl->stop, memory_order_acquire)) {
		int64_t next, next2;
		struct bpi_lane *full = NULL;
		bool again;
		uint32_t key;

		force_begin(fl);
		fl->force_left = false;
		again = walk(p, true, &next, &claimed, &full);
		if (fl->force_round && !fl->force_left && !again) {
			force_end(p);
			continue;
		}
		if (fl->force_round && !again) {
			/* a handle's owner holds jobs the round waits for:
			 * look again soon, less often while it stays busy */
			int64_t soon = bpi_now_ns() + fl->force_poll_ns;

			if (fl->force_poll_ns < FORCE_POLL_MAX_NS)
				fl->force_poll_ns *= 2;
			if (next < 0 || soon < next)
				next = soon;
		}
		if (!full)
			fl->full_backoff_ns = FULL_WAIT_MIN_NS;
		if (again) {
			/* until room for a handle's batch, or close: no claim
			 * held. relaxed: any recent batch size will do */
			if (full)
				bpi_ingress_wait(
					p, full, 1,
					atomic_load_explicit(
						&p->live_max_batch,
						memory_order_relaxed),
					full_wait_ns(p, next));
			continue;
		}
		/*
		 * Going to sleep: say until when, arm, look again. seq_cst:
		 * Dekker with a producer's first job of a batch
		 * (announce_batch): it sees the new sleep_until or we see its
		 * job.
		 */
		atomic_store_explicit(&fl->sleep_until,
				      next < 0 ? INT64_MAX : next,
				      memory_order_seq_cst);
		key = bpi_waitq_prepare(&fl->wq);
		if (next < 0 && claimed) {
			bpi_barrier_all(); /* see the top of this file */
			claimed = false;
		}
		/* acquire: pairs with the release in bpi_flusher_close */
		if (walk(p, false, &next2, &claimed, &full) ||
		    atomic_load_explicit(&fl->stop, memory_order_acquire) ||
		    (next2 >= 0 && next2 <= bpi_now_ns()) ||
		    force_asked(fl) != 0) {
			bpi_waitq_cancel(&fl->wq);
			continue;
		}
		if (next < 0 || (next2 >= 0 && next2 < next))
			next = next2; /* never later than announced */
		bpi_waitq_sleep(&fl->wq, key,
				next); /* woken, timed out, EINTR */
		bpi_waitq_cancel(&fl->wq);
		/* relaxed: awake, producers need not wake us (0 < any due) */
		atomic_store_explicit(&fl->sleep_until, 0,
				      memory_order_relaxed);
	}
	return NULL;
}

/* ----------------------------------------------------------- registry */

static int start_flusher(struct bp_pipeline *p)
{
	struct bpi_flusher *fl = &p->fl;
	int rc;

	bpi_waitq_init(&fl->wq);
	/* the flusher sleeps often: wakers fence instead of a membarrier */
	bpi_waitq_set_waker_fences(&fl->wq);
	bpi_waitq_init(&fl->walk_wq);
	/* relaxed: the thread starts after (pthread_create orders it) */
	atomic_store_explicit(&fl->sleep_until, 0, memory_order_relaxed);
	/* signals blocked, the config's thread hooks, named bp-flush-0 */
	rc = bpi_pipeline_thread_start(p, &fl->thread, BP_THREAD_FLUSHER, 0, -1,
				       flusher_main, p);
	if (rc) {
		bpi_log(&p->log, BP_LOG_ERROR, "cannot start the flusher: %s",
			bp_strerror(rc));
		return rc;
	}
	fl->started = true;
	return 0;
}

bool bpi_flusher_started(struct bp_pipeline *p)
{
	bool started;

	bpi_spin_lock(&p->fl.lock); /* cold: once per bp_pipeline_flush */
	started = p->fl.started;
	bpi_spin_unlock(&p->fl.lock);
	return started;
}

int bpi_flusher_add(struct bp_pipeline *p, struct bp_producer *pr)
{
	struct bpi_flusher *fl = &p->fl;
	int rc = 0;

	bpi_spin_lock(&fl->lock);
	/* relaxed: ordered by the lock against drain's close */
	if (fl->closed ||
	    atomic_load_explicit(&p->state, memory_order_relaxed) == P_STOPPED)
		/* born closed: its submits get -EPIPE, like the pipeline's */
		atomic_store_explicit(&pr->claim, CLAIM_CLOSED,
				      memory_order_relaxed);
	else {
		if (!fl->started)
			rc = start_flusher(p);
		if (rc == 0 && !fl->running)
			/* opened by bpi_flusher_open; relaxed: published
			 * below */
			atomic_store_explicit(&pr->claim, CLAIM_IDLE,
					      memory_order_relaxed);
	}
	if (rc == 0) {
		/* relaxed: published by the release below */
		atomic_store_explicit(
			&pr->next,
			atomic_load_explicit(&fl->handles,
					     memory_order_relaxed),
			memory_order_relaxed);
		/* release: the handle's fields before the flusher sees it */
		atomic_store_explicit(&fl->handles, pr, memory_order_release);
	}
	bpi_spin_unlock(&fl->lock);
	return rc;
}

struct walk_seen {
	struct bpi_flusher *fl;
	uint64_t walk; /* the counter when the walk was seen in progress */
};

static int walk_ended(void *arg)
{
	struct walk_seen *w = arg;

	/* acquire: the walk's loads of the handle came before (its RMW) */
	return atomic_load_explicit(&w->fl->walks, memory_order_acquire) !=
	       w->walk;
}

/*
 * A walk in progress may still hold a handle unlinked before this call:
 * wait for it to end. seq_cst: after the unlink (Dekker with walk()).
 */
static void wait_walk_end(struct bpi_flusher *fl)
{
	struct walk_seen w = {fl, 0};
	struct bp_wait_policy pol;

	w.walk = atomic_load_explicit(&fl->walks, memory_order_seq_cst);
	if (!(w.walk & 1))
		return;
	bp_wait_policy_init(&pol);
	while (bpi_wait_loop(&pol, &fl->walk_wq, walk_ended, &w, -1) < 0)
		; /* -EINTR: a signal; wait again */
}

bool bpi_flusher_remove(struct bp_pipeline *p, struct bp_producer *pr)
{
	struct bpi_flusher *fl = &p->fl;
	_Atomic(struct bp_producer *) *link = &fl->handles;
	bool mine;

	bpi_spin_lock(&fl->lock);
	while (atomic_load_explicit(link, memory_order_relaxed) != pr)
		link = &atomic_load_explicit(link, memory_order_relaxed)->next;
	/* seq_cst: before the look at walks below (Dekker with walk()) */
	atomic_store_explicit(
		link, atomic_load_explicit(&pr->next, memory_order_relaxed),
		memory_order_seq_cst);
	/* drain holds it (pinned): drain frees it when done with it */
	pr->free_on_unpin = pr->drain_pins > 0;
	mine = !pr->free_on_unpin; /* pr may be gone once unlocked */
	bpi_spin_unlock(&fl->lock);
	wait_walk_end(fl);
	return mine;
}

void bpi_flusher_open(struct bp_pipeline *p)
{
	struct bpi_flusher *fl = &p->fl;

	bpi_spin_lock(&fl->lock);
	fl->running = true;
	for (struct bp_producer *pr =
		     atomic_load_explicit(&fl->handles, memory_order_relaxed);
	     pr; pr = atomic_load_explicit(&pr->next, memory_order_relaxed)) {
		/*
		 * An owner taking a job back before start (idle_after_stage)
		 * holds a claim that ends by storing IDLE again: open waits
		 * it out, or that store would undo the opening for good.
		 */
		bpi_claim_open(pr);
	}
	bpi_spin_unlock(&fl->lock);
}

/* ------------------------------------------------------ drain, destroy */

/*
 * Take a handle for good: claim it (waiting out a claim in progress up to
 * the deadline), close it, fix what drain submits (claim_end: with submit,
 * the tail seen after the barrier; else head, nothing) and end the claim at
 * once, so that no claim is held while drain waits for anything. Returns
 * whether it was taken.
 */
static bool close_handle(struct bp_producer *pr, int64_t deadline, bool submit)
{
	uint64_t c = bpi_claim_word(pr);

	for (;;) {
		/*
		 * Closed already: by the owner's bp_producer_destroy (what its
		 * last flush could not submit is the owner's), or by an owner
		 * that met a closed intake. claim_end says what is drain's.
		 */
		if (c & CLAIM_CLOSED)
			return true;
		if (c & CLAIM_BUSY) {
			/* without a deadline in slices, saying what it waits
			 * for */
			int64_t slice = bpi_now_ns() + STALL_REPORT_NS;
			bool sliced = deadline < 0 || deadline > slice;

			c = bpi_claim_wait(pr, sliced ? slice : deadline);
			if ((c & CLAIM_BUSY) && !sliced)
				return false; /* the deadline passed */
			if (c & CLAIM_BUSY)
				bpi_log(&pr->p->log, BP_LOG_WARN,
					"drain: a producer handle's owner is "
					"still blocked in a submit (ingress "
					"full: the workers are not taking "
					"jobs)");
		} else if (bpi_claim_try(pr, &c, CLAIM_CLOSED))
			break;
	}
	/*
	 * The owner now sees CLAIM_CLOSED after its tail store, or its tail
	 * store is seen below (producer.c, closed_after_stage).
	 */
	bpi_barrier_all();
	/* acquire: the jobs below tail (pairs with the owner's release) */
	atomic_store_explicit(
		&pr->claim_end,
		submit ? atomic_load_explicit(&pr->tail, memory_order_acquire)
		       : bpi_claim_head(c),
		memory_order_relaxed); /* published by the release below */
	bpi_claim_release(pr, bpi_claim_head(c), CLAIM_CLOSED);
	return true;
}

/*
 * Submit a closed handle's jobs below claim_end, a claim per slice that fits
 * ingress, waiting for room with no claim held. At the deadline (or an
 * error) what is left stays staged: claim_end comes down to head.
 */
static int drain_handle(struct bp_pipeline *p, struct bp_producer *pr,
			int64_t deadline)
{
	for (;;) {
		uint64_t c = bpi_claim_word(pr);
		uint64_t h = bpi_claim_head(c), done = 0, end;
		int64_t left;
		int rc;

		/* defensive: nobody else claims a closed handle */
		if (c & CLAIM_BUSY) {
			bpi_claim_wait(pr, -1);
			continue;
		}
		if (!bpi_claim_try(pr, &c, 0))
			continue;
		/* relaxed: only closers store it, under a claim */
		end = atomic_load_explicit(&pr->claim_end,
					   memory_order_relaxed);
		rc = h < end ? bpi_claim_submit(pr, h, end, false, &done) : 0;
		if (rc == 0) {
			bpi_claim_release(pr, h + done, CLAIM_CLOSED);
			return 0;
		}
		left = deadline < 0 ? -1 : deadline - bpi_now_ns();
		if (rc != -EAGAIN || (deadline >= 0 && left <= 0)) {
			rc = rc == -EAGAIN ? -ETIMEDOUT : rc;
			bpi_log(&p->log, BP_LOG_ERROR,
				"drain: a producer's staged jobs: %s; %llu "
				"job(s) stay staged for bp_producer_destroy",
				bp_strerror(rc),
				(unsigned long long)(end - h - done));
			bpi_claim_close_at(pr, h + done);
			return rc;
		}
		bpi_claim_release(pr, h + done, CLAIM_CLOSED);
		/*
		 * Room comes from the workers. Without a deadline, wait in
		 * slices and say what drain waits for, never silently.
		 */
		if (deadline < 0 || left > STALL_REPORT_NS)
			left = STALL_REPORT_NS;
		unsigned jobs = end - h - done < UINT_MAX
					? (unsigned)(end - h - done)
					: UINT_MAX;

		if (bpi_ingress_wait(p, pr->lane, jobs, jobs, left) ==
			    -ETIMEDOUT &&
		    left == STALL_REPORT_NS)
			bpi_log(&p->log, BP_LOG_WARN,
				"drain: %llu job(s) staged in a producer "
				"handle still wait for room in ingress (the "
				"workers are not taking jobs)",
				(unsigned long long)(end - h - done));
	}
}

/*
 * Drain's part of the handles. The registry lock is held only to close the
 * registry and to take or give back the handles (pinned: a destroy meanwhile
 * unlinks the handle and leaves its free to the unpin here), never across
 * a wait: a stage or sink callback that creates or destroys a handle during
 * drain must not wait for a drain that waits for it.
 */
int bpi_flusher_close(struct bp_pipeline *p, int64_t deadline)
{
	struct bpi_flusher *fl = &p->fl;
	struct bp_producer *pr, **all;
	unsigned n = 0, k;
	int ret = 0;

	bpi_spin_lock(&fl->lock);
	if (fl->closed) {
		bpi_spin_unlock(&fl->lock);
		return 0;
	}
	fl->closed = true; /* handles created from now on are born closed */
	for (pr = atomic_load_explicit(&fl->handles, memory_order_relaxed); pr;
	     pr = atomic_load_explicit(&pr->next, memory_order_relaxed))
		n++;
	all = malloc((n ? n : 1) * sizeof(*all));
	if (!all) {
		bpi_spin_unlock(&fl->lock);
		bpi_log(&p->log, BP_LOG_ERROR,
			"drain: no memory to take the producer handles: their "
			"staged jobs stay staged");
		return -ENOMEM;
	}
	n = 0;
	for (pr = atomic_load_explicit(&fl->handles, memory_order_relaxed); pr;
	     pr = atomic_load_explicit(&pr->next, memory_order_relaxed)) {
		pr->drain_pins++;
		all[n++] = pr;
	}
	bpi_spin_unlock(&fl->lock);
	/* close every handle first, then submit: no claim held meanwhile */
	for (unsigned i = 0; i < n; i++) {
		pr = all[i];
		pr->drain_claimed = close_handle(pr, deadline, true);
		if (!pr->drain_claimed) {
			/*
			 * A submit blocked on a full ingress holds the claim
			 * (the owner's): bpi_flusher_join closes the handle
			 * once intake is closed and that submit returned.
			 */
			bpi_log(&p->log, BP_LOG_ERROR,
				"drain: a producer handle's submit is still "
				"blocked at the deadline: its staged jobs are "
				"left to bp_producer_flush/destroy");
			ret = -ETIMEDOUT;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		int rc = all[i]->drain_claimed
				 ? drain_handle(p, all[i], deadline)
				 : 0;

		ret = ret ? ret : rc;
	}
	bpi_spin_lock(&fl->lock);
	k = 0; /* keep those destroyed meanwhile: ours to free */
	for (unsigned i = 0; i < n; i++)
		if (--all[i]->drain_pins == 0 && all[i]->free_on_unpin)
			all[k++] = all[i];
	if (fl->started) {
		/* release: pairs with the flusher's acquire of stop */
		atomic_store_explicit(&fl->stop, 1, memory_order_release);
		bpi_waitq_wake_all_slow(&fl->wq);
		/* a flush waiting for a round: there will be none */
		bpi_waitq_wake_all_slow(&p->flush.wq);
	}
	bpi_spin_unlock(&fl->lock);
	if (k) {
		wait_walk_end(
			fl); /* unlinked before: no walk sees them after */
		for (unsigned i = 0; i < k; i++)
			bpi_producer_free(all[i]);
	}
	free(all);
	return ret;
}

void bpi_flusher_join(struct bp_pipeline *p)
{
	struct bpi_flusher *fl = &p->fl;

	bpi_spin_lock(&fl->lock);
	/*
	 * Intake is closed: a submit that held a handle's claim past drain's
	 * deadline has returned (or returns soon with -EPIPE). Close such
	 * handles now, so that none stays open after drain.
	 */
	for (struct bp_producer *pr =
		     atomic_load_explicit(&fl->handles, memory_order_relaxed);
	     pr; pr = atomic_load_explicit(&pr->next, memory_order_relaxed))
		if (!pr->drain_claimed)
			pr->drain_claimed = close_handle(pr, -1, false);
	/* the flusher takes no registry lock: joining under it is safe */
	if (fl->started) {
		pthread_join(fl->thread, NULL);
		fl->started = false;
	}
	bpi_spin_unlock(&fl->lock);
}

void bpi_flusher_destroy(struct bp_pipeline *p)
{
	struct bpi_flusher *fl = &p->fl;
	unsigned left = 0;

	bpi_flusher_close(p, -1);
	bpi_flusher_join(p);
	bpi_spin_lock(&fl->lock);
	for (struct bp_producer *pr =
		     atomic_load_explicit(&fl->handles, memory_order_relaxed);
	     pr; pr = atomic_load_explicit(&pr->next, memory_order_relaxed)) {
		pr->detached = true;
		left++;
	}
	bpi_spin_unlock(&fl->lock);
	if (left)
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_destroy: %u producer handle(s) not "
			"destroyed first: closed (their calls return -EPIPE); "
			"bp_producer_destroy still frees them",
			left);
}
