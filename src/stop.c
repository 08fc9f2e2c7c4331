/* SPDX-License-Identifier: MIT */
/*
 * The end of a pipeline: drain (intake closes, everything accepted is
 * delivered), abort (what has not been processed is cancelled), both with
 * or without a deadline, any number of callers, none of them a thread of
 * the pipeline; then destroy. A stopper that waits says what it waits for
 * (report_stall), and a drain checks conservation when it is done.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "src/flusher.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

static bool worker_exited(const struct bp_worker *w)
{
	/* acquire: pairs with bpi_thread_exited's release */
	return atomic_load_explicit(&w->exited, memory_order_acquire);
}

/* Wake condition of the joiner: every thread start() made has exited. */
static int threads_exited(void *arg)
{
	struct bp_pipeline *p = arg;

	for (unsigned i = 0; i < p->nworkers; i++)
		if (p->workers[i].thread_started &&
		    !worker_exited(&p->workers[i]))
			return 0;
	/* acquire: pairs with bpi_thread_exited's release */
	return !p->sink_started ||
	       atomic_load_explicit(&p->sink_exited, memory_order_acquire);
}

/* A stage's own words on what its jobs wait for, and its link's fill. */
static void report_stage(struct bp_pipeline *p, const struct bpi_stage *st,
			 enum bp_log_level lvl, const char *who)
{
	const char *name = st->table.name ? st->table.name : "(unnamed)";

	if (st->index > 0 && bp_ring_count(st->in))
		bpi_log(&p->log, lvl,
			"%s: stage %u (%s): %u jobs queued in front of it%s",
			who, st->index, name, bp_ring_count(st->in),
			bp_ring_is_closed(st->in) ? " (intake ended)" : "");
	/* relaxed: a snapshot of what the serial worker published last
	 * (order_take, order_flush); nothing else is read through them */
	unsigned parked = st->order ? atomic_load_explicit(
					      &st->stall_parked,
					      memory_order_relaxed)
				    : 0;

	if (parked)
		bpi_log(&p->log, lvl,
			"%s: stage %u (%s, serial): %u jobs filed, waiting for "
			"seq %llu",
			who, st->index, name, parked,
			(unsigned long long)atomic_load_explicit(
				&st->stall_next, memory_order_relaxed));
	if (st->table.stall_report) {
		char buf[1024] = "";
		int n = st->table.stall_report(st->create_ctx, buf,
					       sizeof(buf));

		buf[sizeof(buf) - 1] = '\0'; /* whatever the stage wrote */
		if (n > 0)
			bpi_log(&p->log, lvl, "%s: stage %s: %s%s", who, name,
				buf, (size_t)n >= sizeof(buf) ? "..." : "");
	}
}

/*
 * Log what a stopper waits for: every worker still running with its
 * counts, and the sink. Counters are snapshots of the threads' own stats.
 */
static void report_stall(struct bp_pipeline *p, enum bp_log_level lvl,
			 const char *who, const char *what)
{
	uint64_t handed = 0, queued = 0, delivered, window;
	unsigned running = 0;

	bpi_log(&p->log, lvl,
		"%s: %s; intake is closed, still waiting for:", who, what);
	for (unsigned i = 0; i < p->nworkers; i++) {
		struct bp_worker *w = &p->workers[i];
		/* taken last: snapshots of a running worker only grow */
		uint64_t h = bpi_stat_get(&w->st_handed),
			 done = bpi_stat_get(&w->st_completed),
			 taken = bpi_stat_get(&w->st_jobs);

		handed += h;
		queued += bp_ring_count(w->egress);
		if (worker_exited(w))
			continue;
		if (p->nstages == 1)
			bpi_log(&p->log, lvl,
				"%s: worker %u: took %llu jobs, completed %llu, "
				"handed %llu to the sink: %llu still in the "
				"stage",
				who, i, (unsigned long long)taken,
				(unsigned long long)done, (unsigned long long)h,
				(unsigned long long)(taken > done ? taken - done
								  : 0));
		else
			bpi_log(&p->log, lvl,
				"%s: stage %u (%s) worker %u: took %llu jobs, "
				"completed %llu, handed on %llu: %llu still in "
				"the stage",
				who, w->st->index,
				w->st->table.name ? w->st->table.name
						  : "unnamed",
				w->id, (unsigned long long)taken,
				(unsigned long long)done, (unsigned long long)h,
				(unsigned long long)(taken > done ? taken - done
								  : 0));
		running++;
	}
	for (unsigned k = 0; running && k < p->nstages; k++)
		report_stage(p, &p->stages[k], lvl, who);
	/* acquire: pairs with bpi_thread_exited's release */
	if (atomic_load_explicit(&p->sink_exited, memory_order_acquire))
		return;
	delivered = bpi_stat_get(&p->st_ok) + bpi_stat_get(&p->st_failed) +
		    bpi_stat_get(&p->st_cancelled);
	/* ordered: handed to the sink, neither queued nor delivered */
	window = p->cfg.ordered && p->nstages == 1 &&
				 handed > queued + delivered
			 ? handed - queued - delivered
			 : 0;
	if (p->cfg.ordered && p->nstages > 1)
		/* a chain's handed counts include the links: the window's
		 * fill is not known here, but what it waits for is */
		bpi_log(&p->log, lvl,
			"%s: sink: %s: delivered %llu of %llu submitted, %llu "
			"queued for it; ordered: waiting for seq %llu",
			who, queued ? "behind" : "waiting for the workers",
			(unsigned long long)delivered,
			(unsigned long long)bpi_lanes_enqueued(p),
			(unsigned long long)queued,
			/* relaxed: a snapshot; the sink's count, which in an
			 * ordered chain is the next seq it delivers */
			(unsigned long long)atomic_load_explicit(
				&p->gate_delivered, memory_order_relaxed));
	else
		bpi_log(&p->log, lvl,
			"%s: sink: %s: delivered %llu of %llu submitted, %llu "
			"queued for it, %llu in its reorder window",
			who, queued ? "behind" : "waiting for the workers",
			(unsigned long long)delivered,
			(unsigned long long)bpi_lanes_enqueued(p),
			(unsigned long long)queued, (unsigned long long)window);
}

/*
 * Wait until every thread has exited (deadline < 0: without a limit,
 * reporting every STALL_REPORT_NS), then join them: the joins return at
 * once. Only the stopper holding p->joiner calls this. Returns 0 or
 * -ETIMEDOUT (nothing joined, the threads keep running).
 */
static int join_threads(struct bp_pipeline *p, int64_t deadline,
			const char *who)
{
	struct bp_wait_policy pol;

	bp_wait_policy_init(&pol);
	pol.strategy = BP_WAIT_SLEEP; /* cold path: sleep at once */
	for (;;) {
		int64_t left = STALL_REPORT_NS;

		if (deadline >= 0 && deadline - bpi_now_ns() < left)
			left = deadline - bpi_now_ns();
		int rc = bpi_wait_loop(&pol, &p->stop_wq, threads_exited, p,
				       left > 0 ? left : 0);

		if (rc > 0)
			break;
		if (rc != -ETIMEDOUT)
			continue; /* -EINTR: a signal; wait again */
		if (deadline >= 0 && bpi_now_ns() >= deadline)
			return -ETIMEDOUT;
		report_stall(p, BP_LOG_WARN, who, "still stopping");
	}
	bpi_join_workers(p);
	if (p->sink_started) {
		pthread_join(p->sink_thread, NULL);
		p->sink_started = false;
	}
	return 0;
}

/* After the join: conservation must hold; say so loudly if it does not. */
static void check_conservation(struct bp_pipeline *p, const char *who)
{
	struct bp_pipeline_stats s;

	uint64_t delivered, repeats = bpi_stat_get(&p->st_repeats);

	bp_pipeline_get_stats(p, &s);
	delivered = s.ok + s.failed + s.cancelled;
	if (s.submitted != delivered || repeats)
		bpi_log(&p->log, BP_LOG_ERROR,
			"%s: %llu jobs submitted, %llu delivered: %llu "
			"missing; "
			"the sink refused %llu repeated completions",
			who, (unsigned long long)s.submitted,
			(unsigned long long)delivered,
			(unsigned long long)(s.submitted > delivered
						     ? s.submitted - delivered
						     : 0),
			(unsigned long long)repeats);
}

static bool stopped(struct bp_pipeline *p)
{
	/* acquire: pairs with the release that published P_STOPPED */
	return atomic_load_explicit(&p->state, memory_order_acquire) ==
	       P_STOPPED;
}

/* Wake condition of a stopper that is not the joiner. */
static int stopped_or_unjoined(void *arg)
{
	struct bp_pipeline *p = arg;

	if (stopped(p))
		return 1;
	/* acquire: pairs with a joiner's release of the token */
	return atomic_load_explicit(&p->joiner, memory_order_acquire) == 0;
}

/*
 * Drain or abort, waiting up to timeout_ns (< 0: no limit). The first
 * caller to move the state out of RUNNING (or CREATED) closes intake.
 * Joining is done by whichever caller holds the joiner token; the others
 * wait for it, up to their own deadlines, and take the token over when a
 * joiner gives up at its deadline. So a timed-out drain leaves the
 * pipeline stopping, and any later drain, abort or destroy continues it.
 * An abort during a drain still takes effect: workers check the flag on
 * every pass.
 */
static int stop_in(struct bp_pipeline *p, bool abort, int64_t timeout_ns,
		   const char *who)
{
	int64_t deadline = bpi_deadline(bpi_now_ns(), timeout_ns);
	struct bp_wait_policy pol;
	int st = P_RUNNING, handles_rc = 0;

	if (bpi_self_is(p)) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"%s: called from a stage or sink callback of this "
			"pipeline: it would wait for its own thread",
			who);
		return -EDEADLK;
	}
	if (abort)
		/* release: workers that see it also see everything before */
		atomic_store_explicit(&p->aborting, 1, memory_order_release);
	/* acq_rel: one stopper wins; it sees what start() published */
	if (atomic_compare_exchange_strong_explicit(&p->state, &st, P_STOPPING,
						    memory_order_acq_rel,
						    memory_order_acquire)) {
		/*
		 * Producer handles' staged jobs go in before intake closes.
		 * A failure (the deadline came first) is logged: they stay
		 * with their handles, and this stopper does not return 0,
		 * since jobs a submit accepted did not reach the sink.
		 */
		handles_rc = bpi_flusher_close(p, deadline);
		if (handles_rc)
			/* release: a flush reads it after the sink's end */
			atomic_store_explicit(&p->handles_stranded, 1,
					      memory_order_release);
		/* producers get -EPIPE from here on */
		bpi_lanes_close(p);
		bpi_flusher_join(p);
	} else if (st == P_CREATED &&
		   atomic_compare_exchange_strong_explicit(
			   &p->state, &st, P_STOPPED, memory_order_acq_rel,
			   memory_order_acquire)) {
		/* never started: nothing was submitted */
		bpi_lanes_close(p);
		bpi_waitq_wake_all_slow(&p->stop_wq);
		return 0;
	}
	bp_wait_policy_init(&pol);
	pol.strategy = BP_WAIT_SLEEP; /* cold path: sleep at once */
	for (;;) {
		int expect = 0, rc;

		if (stopped(p))
			return handles_rc;
		/* acquire: the previous joiner's joins and flags are visible */
		if (atomic_compare_exchange_strong_explicit(
			    &p->joiner, &expect, 1, memory_order_acquire,
			    memory_order_relaxed)) {
			rc = join_threads(p, deadline, who);
			if (rc == 0) {
				check_conservation(p, who);
				/* release: a waiting stopper sees the joins */
				atomic_store_explicit(&p->state, P_STOPPED,
						      memory_order_release);
			}
			/* release: the next joiner sees what this one did */
			atomic_store_explicit(&p->joiner, 0,
					      memory_order_release);
			bpi_waitq_wake_all_slow(&p->stop_wq);
			if (rc == 0)
				return handles_rc;
			break;
		}
		int64_t left = deadline < 0 ? -1 : deadline - bpi_now_ns();

		rc = bpi_wait_loop(&pol, &p->stop_wq, stopped_or_unjoined, p,
				   deadline < 0 ? -1 : (left > 0 ? left : 0));
		if (rc == -ETIMEDOUT)
			break;
		/* woken, or -EINTR: look again */
	}
	/* relaxed: destroy reads it later in this caller's program order */
	atomic_store_explicit(&p->stop_gave_up, 1, memory_order_relaxed);
	report_stall(p, BP_LOG_ERROR, who, "timed out");
	return -ETIMEDOUT;
}

/*
 * Every stopper is counted while inside, so that destroy can wait for one
 * that another thread's stop has not yet let go of p (it may still be in
 * its wait loop when the pipeline is stopped and another caller returns).
 */
static int stop(struct bp_pipeline *p, bool abort, int64_t timeout_ns,
		const char *who)
{
	int rc;

	/* relaxed: destroy only needs the count, ordered by the release */
	atomic_fetch_add_explicit(&p->stoppers, 1, memory_order_relaxed);
	rc = stop_in(p, abort, timeout_ns, who);
	/* release: our last use of p before destroy's acquire frees it */
	atomic_fetch_sub_explicit(&p->stoppers, 1, memory_order_release);
	return rc;
}

/*
 * destroy's own stop has returned, so the pipeline is stopped: every other
 * stopper is on its way out. It touches p until its count drops, so wait
 * for that, polling (cold path; nothing may wake us from p once it is out).
 */
static void wait_stoppers_out(struct bp_pipeline *p)
{
	/* acquire: pairs with stop()'s release */
	while (atomic_load_explicit(&p->stoppers, memory_order_acquire) != 0) {
		struct timespec ts = {0, 100000};

		nanosleep(&ts, NULL);
	}
}

int bp_pipeline_drain_timeout(struct bp_pipeline *p, int64_t timeout_ns)
{
	return p ? stop(p, false, timeout_ns, "bp_pipeline_drain") : -EINVAL;
}

int bp_pipeline_drain(struct bp_pipeline *p)
{
	return bp_pipeline_drain_timeout(p, -1);
}

int bp_pipeline_abort(struct bp_pipeline *p)
{
	return p ? stop(p, true, -1, "bp_pipeline_abort") : -EINVAL;
}

void bp_pipeline_destroy(struct bp_pipeline *p)
{
	bool gave_up;

	if (!p)
		return;
	if (bpi_self_is(p)) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_destroy: called from a stage or sink "
			"callback of this pipeline: ignored, nothing freed");
		return;
	}
	/* relaxed: set by a stopper that returned to this caller's program */
	gave_up =
		atomic_load_explicit(&p->stop_gave_up, memory_order_relaxed) &&
		!stopped(p);
	if (gave_up)
		bpi_log(&p->log, BP_LOG_WARN,
			"bp_pipeline_destroy: a drain timed out before: "
			"aborting, and waiting without a limit for the stage "
			"to complete or cancel what it holds");
	stop(p, gave_up, -1, "bp_pipeline_destroy");
	wait_stoppers_out(p);
	bpi_flusher_destroy(p);
	bpi_pipeline_free(p);
}
