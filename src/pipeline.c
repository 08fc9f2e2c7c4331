/* SPDX-License-Identifier: MIT */
/*
 * A pipeline's life up to running: create (every allocation, so that
 * nothing on the way allocates), start (the workers, their stage init,
 * the sink, then the producer handles open), and the free that create's
 * failure and bp_pipeline_destroy (src/stop.c) end with.
 *
 * Live configuration lives in a struct that is replaced, never changed
 * (src/live.c): create makes the first copy. Producers read max_batch and
 * the flush deadline from two relaxed atomics instead.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "src/flusher.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/wait_internal.h"

void bpi_pipeline_free(struct bp_pipeline *p)
{
	bpi_chain_free(p);
	bpi_lanes_free(p);
	free(p->sink_ended);
	free(p->sink_credit);
	bpi_free_aligned(p, sizeof(*p), BP_FALSE_SHARING);
}

int bp_pipeline_create(const struct bp_pipeline_config *c,
		       struct bp_pipeline **pp)
{
	struct bp_pipeline *p;
	int rc;

	if (!c || !pp)
		return -EINVAL;
	rc = bpi_config_check(c);
	if (rc)
		return rc;
	p = bpi_alloc_aligned(sizeof(*p), BP_FALSE_SHARING);
	if (!p)
		return -ENOMEM;
	p->cfg = *c;
	p->log = (struct bpi_logger){c->log, c->log_ctx};
	bpi_waitq_init(&p->start_wq);
	bpi_waitq_init(&p->sink_wq);
	bpi_waitq_init(&p->stop_wq);
	bpi_waitq_init(&p->flush.wq);
	bpi_waitq_init(&p->gate_wq);
	/*
	 * Workers, the sink and blocked producers go to sleep and wake up
	 * often (more so with more workers than cores): on these queues the
	 * wakers pay a fence per batch instead of every sleeper paying a
	 * membarrier, which interrupts all CPUs. Measured with 16 workers on
	 * 2 cores: 21-26 -> 31-38 M jobs/s at B=32 (interleaved A/B), 2 workers
	 * within noise (41-44 vs 44-47).
	 */
	bpi_waitq_set_waker_fences(&p->sink_wq);
	bpi_waitq_set_waker_fences(&p->gate_wq);
	rc = bpi_lanes_create(p, c);
	if (rc)
		goto fail;
	rc = bpi_chain_create(p, c);
	if (rc)
		goto fail;
	/* what producers, stats and the one-stage calls read: stage 0's */
	p->cfg.stage = &p->stages[0].table;
	p->cfg.stage_ctx = p->stages[0].create_ctx;
	p->cfg.max_batch = p->stages[0].max_batch;
	p->cfg.max_inflight = p->stages[0].max_inflight;
	p->cfg.workers = p->nworkers;
	p->cfg.worker_cpus = NULL; /* the stages have copies */
	p->cfg.n_worker_cpus = 0;
	p->cfg.stages = NULL;
	atomic_init(&p->live_max_batch, p->cfg.max_batch);
	atomic_init(&p->live_flush_ns, bpi_flush_age(c->flush_deadline_ns));
	rc = -ENOMEM;
	p->sink_ended = calloc(p->nworkers, sizeof(*p->sink_ended));
	p->sink_credit = calloc(p->nworkers, sizeof(*p->sink_credit));
	if (!p->sink_ended || !p->sink_credit)
		goto fail;
	*pp = p;
	return 0;
fail:
	bpi_pipeline_free(p);
	return rc;
}

struct inits_arg {
	struct bp_pipeline *p;
	unsigned n;
};

static int inits_done(void *arg)
{
	struct inits_arg *a = arg;

	/* acquire: pairs with the workers' release after init_rc */
	return atomic_load_explicit(&a->p->inits_done, memory_order_acquire) >=
	       a->n;
}

/* Wait until every worker has run its init (cold path: sleep at once). */
static void wait_inits(struct bp_pipeline *p, unsigned n)
{
	struct inits_arg a = {p, n};
	struct bp_wait_policy pol;

	bp_wait_policy_init(&pol);
	pol.strategy = BP_WAIT_SLEEP;
	while (bpi_wait_loop(&pol, &p->start_wq, inits_done, &a, -1) < 0)
		; /* -EINTR: a signal, not the condition; wait again */
}

int bp_pipeline_start(struct bp_pipeline *p)
{
	unsigned started = 0;
	int rc = 0;

	if (!p)
		return -EINVAL;
	/*
	 * relaxed: only the flag's own value matters; a second start (from
	 * another thread, or from a stage init while the first waits for it)
	 * must not start a second set of threads.
	 */
	if (atomic_exchange_explicit(&p->start_called, 1,
				     memory_order_relaxed)) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_start: called twice (the first call "
			"started or is starting the threads)");
		return -EINVAL;
	}
	/* relaxed: start is called once, before any drain/abort (pipeline.h) */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) !=
	    P_CREATED) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_start: the pipeline was already stopped");
		return -EINVAL;
	}
	/* before any worker runs: they read it without synchronisation */
	bpi_chain_set_wake_limits(p);
	for (; started < p->nworkers; started++) {
		struct bp_worker *w = &p->workers[started];

		rc = bpi_pipeline_thread_start(p, &w->thread, BP_THREAD_WORKER,
					       started, w->cpu, bpi_worker_main,
					       w);
		if (rc) {
			bpi_log(&p->log, BP_LOG_ERROR,
				"worker %u: cannot start thread (cpu %d): %s",
				started, w->cpu, bp_strerror(rc));
			break;
		}
		w->thread_started = true;
	}
	wait_inits(p, started);
	for (unsigned i = 0; i < started && !rc; i++) {
		/* relaxed: ordered by the acquire in wait_inits */
		rc = atomic_load_explicit(&p->workers[i].init_rc,
					  memory_order_relaxed);
		if (rc)
			bpi_log(&p->log, BP_LOG_ERROR,
				"worker %u: stage init: %s", i,
				bp_strerror(rc));
	}
	if (!rc) {
		rc = bpi_pipeline_thread_start(
			p, &p->sink_thread, BP_THREAD_SINK, 0, p->cfg.sink_cpu,
			bpi_sink_main, p);
		if (rc)
			bpi_log(&p->log, BP_LOG_ERROR,
				"cannot start the sink: %s", bp_strerror(rc));
		p->sink_started = rc == 0;
		p->sink_ran = rc == 0;
	}
	/* release: workers see everything start() did before go */
	atomic_store_explicit(&p->start_go, rc ? -1 : 1, memory_order_release);
	bpi_waitq_wake_all_slow(&p->start_wq);
	if (rc) {
		bpi_lanes_close(p); /* no submit may slip in */
		bpi_join_workers(p);
		/*
		 * Workers closed their egress rings on the way out: the
		 * pipeline is stopped for good. release: a later stopper
		 * (acquire) sees the joined threads' work.
		 */
		atomic_store_explicit(&p->state, P_STOPPED,
				      memory_order_release);
		return rc;
	}
	/* release: a stopper that sees RUNNING sees the started threads */
	atomic_store_explicit(&p->state, P_RUNNING, memory_order_release);
	bpi_flusher_open(p); /* producer handles take jobs from now on */
	return 0;
}
