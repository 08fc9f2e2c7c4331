/* SPDX-License-Identifier: MIT */
/*
 * Live changes of a running pipeline: max_batch, the flush deadline, the
 * workers' wait policy, the stage's context; in a chain, per stage (each
 * stage has its own live copy, acknowledged by its own workers).
 *
 * What workers read lives in a struct that is replaced, never changed:
 * workers load it each pass (a load and a compare when nothing changed);
 * the writer publishes a new copy, waits until every worker has
 * acknowledged it or is idle, and frees the old one (reconfigure()).
 * Producers read max_batch and the flush deadline from two relaxed atomics
 * instead.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "src/base/spin.h"
#include "src/pipeline_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

/*
 * Wait until worker w no longer uses any copy older than gen: it has
 * acknowledged gen (or newer), or it is offline. Only this pipeline's
 * workers count; a worker inside a long stage callback is waited for, with
 * a warning after WAIT_WARN_NS, since that is what the caller asked for.
 *
 * The worker publishes LIVE_GEN_FIRST before it loads the live pointer when
 * coming online (worker.c), and this thread swapped the pointer before
 * loading cfg_seen: both seq_cst, so if this load still sees OFFLINE, the
 * worker's load comes later in the single total order and finds the new
 * copy (the old one is never in its hands).
 */
#define WAIT_WARN_NS 1000000000

static void wait_ack(struct bp_pipeline *p, struct bp_worker *w, uint64_t gen,
		     const char *what)
{
	int64_t t0 = 0, pause_ns = 1000;
	unsigned spins = 0;
	bool warned = false;

	for (;;) {
		/* seq_cst: see above; it also acquires what the worker did
		 * with the old copy before its release of cfg_seen */
		uint64_t seen = atomic_load_explicit(&w->cfg_seen,
						     memory_order_seq_cst);

		if (seen == LIVE_GEN_OFFLINE || seen >= gen)
			return;
		/* a worker pass is short: yield first, then sleep growing */
		if (spins++ < 64) {
			sched_yield();
			continue;
		}
		if (!t0)
			t0 = bpi_now_ns();
		if (!warned && bpi_now_ns() - t0 > WAIT_WARN_NS) {
			bpi_log(&p->log, BP_LOG_WARN,
				"%s: waiting for worker %u, inside a stage "
				"callback for more than 1 s",
				what, w->id);
			warned = true;
		}
		struct timespec ts = {0, (long)pause_ns};

		nanosleep(&ts, NULL);
		if (pause_ns < 1000000)
			pause_ns *= 2;
	}
}

/*
 * Publish a modified copy of the live configuration, wait until no worker
 * can be using the old one, and free it. Reconfiguration is a cold path:
 * one at a time, callers spin briefly on a flag to serialise (never a
 * worker).
 *
 * Why not liburcu (call_rcu or synchronize_rcu): its QSBR domain is the
 * whole process's. A grace period waits for every registered thread, the
 * application's and other pipelines' included, so one application thread
 * that stays online made a live change block for seconds; and call_rcu's
 * caller must itself be a registered, online reader, which the caller here
 * need not be, while rcu_barrier at destroy would wait for everyone's
 * callbacks. The acknowledgement below depends on this pipeline's workers
 * alone.
 */
static int reconfigure(struct bp_pipeline *p, struct bpi_stage *st,
		       void (*edit)(struct bpi_live_cfg *, const void *),
		       const void *arg, const char *what)
{
	struct bpi_live_cfg *nc, *old;

	/* the callers refused a call from p's own threads (-EDEADLK) */
	nc = malloc(sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	/* the previous reconfiguration's writes are visible (acquire) */
	bpi_spin_lock(&p->reconfig_busy);
	/* relaxed: only reconfigurations store it, and they are serialised */
	old = atomic_load_explicit(&st->live, memory_order_relaxed);
	*nc = *old;
	nc->gen = old->gen + 1;
	edit(nc, arg);
	/*
	 * seq_cst: release for the workers' acquire of the pointer (they see
	 * nc's fields), and ordered before the loads of cfg_seen in wait_ack
	 */
	atomic_store_explicit(&st->live, nc, memory_order_seq_cst);
	for (unsigned i = st->first; i < st->first + st->nworkers; i++)
		wait_ack(p, &p->workers[i], nc->gen, what);
	free(old);
	bpi_spin_unlock(&p->reconfig_busy);
	return 0;
}

/* reconfigure() every stage, one after another. */
static int reconfigure_all(struct bp_pipeline *p,
			   void (*edit)(struct bpi_live_cfg *, const void *),
			   const void *arg, const char *what)
{
	for (unsigned k = 0; k < p->nstages; k++) {
		int rc = reconfigure(p, &p->stages[k], edit, arg, what);

		if (rc)
			return rc;
	}
	return 0;
}

/*
 * The checks every live change makes first. waits: the change waits for
 * every worker (a grace period), which a worker must not do from its own
 * callback: it would go on using the configuration it may free.
 */
static int live_change_check(struct bp_pipeline *p, bool waits, const char *who)
{
	/* first: a call from a callback is wrong whatever the state */
	if (waits && bpi_self_is(p)) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"%s: called from a stage or sink callback of this "
			"pipeline: it would wait for the workers",
			who);
		return -EDEADLK;
	}
	/* relaxed: a change racing with a stop may go either way; one made
	 * after drain or abort returned sees it */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) >= P_STOPPING)
		return -EPIPE;
	return 0;
}

static void edit_batch(struct bpi_live_cfg *c, const void *arg)
{
	c->max_batch = *(const unsigned *)arg;
}

static void edit_wait(struct bpi_live_cfg *c, const void *arg)
{
	c->worker_wait = *(const struct bp_wait_policy *)arg;
}

static void edit_ctx(struct bpi_live_cfg *c, const void *arg)
{
	c->stage_ctx = *(void *const *)arg;
}

/* max_batch within 1 .. min(BP_MAX_BATCH, the stage's max_inflight)? */
static bool batch_fits(struct bp_pipeline *p, const struct bpi_stage *st,
		       unsigned max_batch, const char *who)
{
	unsigned top = st->max_inflight < BP_MAX_BATCH ? st->max_inflight
						       : BP_MAX_BATCH;

	/* stage 0 of a gated chain: a batch never larger than the gate */
	if (st->index == 0 && p->gate && p->gate < top)
		top = p->gate;

	if (max_batch >= 1 && max_batch <= top)
		return true;
	bpi_log(&p->log, BP_LOG_ERROR, "%s: %u is outside 1..%u (stage %u)",
		who, max_batch, top, st->index);
	return false;
}

/* One stage's max_batch; stage 0's is also the producer handles' batch. */
static int set_batch(struct bp_pipeline *p, struct bpi_stage *st,
		     unsigned max_batch, const char *who)
{
	int rc = reconfigure(p, st, edit_batch, &max_batch, who);

	if (rc == 0 && st->index == 0)
		/* relaxed: producers pick it up on their next call */
		atomic_store_explicit(&p->live_max_batch, max_batch,
				      memory_order_relaxed);
	return rc;
}

int bp_pipeline_set_max_batch(struct bp_pipeline *p, unsigned max_batch)
{
	const char *who = "bp_pipeline_set_max_batch";
	int rc;

	if (!p)
		return -EINVAL;
	for (unsigned k = 0; k < p->nstages; k++)
		if (!batch_fits(p, &p->stages[k], max_batch, who))
			return -EINVAL;
	rc = live_change_check(p, true, who);
	for (unsigned k = 0; rc == 0 && k < p->nstages; k++)
		rc = set_batch(p, &p->stages[k], max_batch, who);
	return rc;
}

int bp_pipeline_set_max_batch_at(struct bp_pipeline *p, unsigned stage,
				 unsigned max_batch)
{
	const char *who = "bp_pipeline_set_max_batch_at";
	struct bpi_stage *st;
	int rc;

	if (!p || !(st = bpi_chain_stage(p, stage, who)))
		return -EINVAL;
	if (!batch_fits(p, st, max_batch, who))
		return -EINVAL;
	rc = live_change_check(p, true, who);
	return rc ? rc : set_batch(p, st, max_batch, who);
}

int bp_pipeline_set_flush_deadline(struct bp_pipeline *p, uint64_t ns)
{
	if (!p)
		return -EINVAL;
	int rc = live_change_check(p, false, "bp_pipeline_set_flush_deadline");

	if (rc)
		return rc;
	/* relaxed: producers pick it up on their next call */
	atomic_store_explicit(&p->live_flush_ns, bpi_flush_age(ns),
			      memory_order_relaxed);
	return 0;
}

int bp_pipeline_set_worker_wait(struct bp_pipeline *p,
				const struct bp_wait_policy *w)
{
	if (!p)
		return -EINVAL;
	if (bp_wait_policy_check(w)) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_set_worker_wait: NULL or unknown policy");
		return -EINVAL;
	}
	int rc = live_change_check(p, true, "bp_pipeline_set_worker_wait");

	return rc ? rc
		  : reconfigure_all(p, edit_wait, w,
				    "bp_pipeline_set_worker_wait");
}

int bp_pipeline_set_stage_ctx(struct bp_pipeline *p, void *ctx)
{
	if (!p)
		return -EINVAL;
	int rc = live_change_check(p, true, "bp_pipeline_set_stage_ctx");

	return rc ? rc
		  : reconfigure(p, &p->stages[0], edit_ctx, &ctx,
				"bp_pipeline_set_stage_ctx");
}

int bp_pipeline_set_stage_ctx_at(struct bp_pipeline *p, unsigned stage,
				 void *ctx)
{
	const char *who = "bp_pipeline_set_stage_ctx_at";
	struct bpi_stage *st;
	int rc;

	if (!p || !(st = bpi_chain_stage(p, stage, who)))
		return -EINVAL;
	rc = live_change_check(p, true, who);
	return rc ? rc : reconfigure(p, st, edit_ctx, &ctx, who);
}
