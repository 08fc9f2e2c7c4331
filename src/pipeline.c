/* SPDX-License-Identifier: MIT */
/*
 * Pipeline lifecycle: configuration, create, start, submit, drain, abort,
 * destroy, and live reconfiguration.
 *
 * Submission order is the ingress ring's position: bp_pipeline_submit reserves
 * k slots (bpi_ring_reserve_burst), stamps each job with its position as seq,
 * and publishes them (bpi_ring_publish). A reservation is a commitment (nothing
 * is handed back), so seqs are dense and the ordered sink never waits for a
 * gap.
 *
 * Live configuration lives in a struct that is replaced, never changed:
 * workers load it each pass (a load and a compare when nothing changed);
 * the writer publishes a new copy, waits until every worker has
 * acknowledged it or is idle, and frees the old one (reconfigure()).
 * Producers read max_batch and the flush deadline from two relaxed atomics
 * instead.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/base/spin.h"
#include "src/base/thread.h"
#include "src/pipeline_internal.h"
#include "src/ring_internal.h"
#include "src/self.h"
#include "src/wait_internal.h"

void bp_pipeline_config_init(struct bp_pipeline_config *c)
{
	if (!c)
		return;
	memset(c, 0, sizeof(*c));
	c->workers = 2;
	c->ingress_capacity = 4096;
	c->egress_capacity = 1024;
	c->max_batch = 32;
	c->max_inflight = 1024;
	c->flush_deadline_ns = 50000;
	bp_wait_policy_init(&c->worker_wait);
	bp_wait_policy_init(&c->sink_wait);
	bp_wait_policy_init(&c->producer_wait);
	c->sink_cpu = -1;
}

/* Validation reports through the caller's log callback, if any. */
static int invalid(const struct bp_pipeline_config *c, const char *what)
{
	if (c->log) {
		char msg[160];

		snprintf(msg, sizeof(msg), "bp_pipeline_create: invalid %s",
			 what);
		c->log(c->log_ctx, BP_LOG_ERROR, msg);
	}
	return -EINVAL;
}

static int check_config(const struct bp_pipeline_config *c)
{
	if (c->workers < 1 || c->workers > BP_MAX_WORKERS)
		return invalid(c, "workers (1..256)");
	if (c->ingress_capacity < 1 || c->ingress_capacity > BP_MAX_RING)
		return invalid(c, "ingress_capacity (1..2^24)");
	if (c->egress_capacity < 1 || c->egress_capacity > BP_MAX_RING)
		return invalid(c, "egress_capacity (1..2^24)");
	if (c->max_batch < 1 || c->max_batch > BP_MAX_BATCH)
		return invalid(c, "max_batch (1..4096)");
	if (c->max_inflight < c->max_batch || c->max_inflight > BP_MAX_INFLIGHT)
		return invalid(c, "max_inflight (max_batch..65536)");
	if (bp_wait_policy_check(&c->worker_wait))
		return invalid(c, "worker_wait (unknown strategy)");
	if (bp_wait_policy_check(&c->sink_wait))
		return invalid(c, "sink_wait (unknown strategy)");
	if (bp_wait_policy_check(&c->producer_wait))
		return invalid(c, "producer_wait (unknown strategy)");
	if (c->n_worker_cpus > 0 && !c->worker_cpus)
		return invalid(c, "worker_cpus (NULL with n_worker_cpus > 0)");
	for (unsigned i = 0; i < c->n_worker_cpus; i++)
		if (c->worker_cpus[i] < 0 || c->worker_cpus[i] >= CPU_SETSIZE)
			return invalid(c, "worker_cpus entry");
	if (c->sink_cpu < -1 || c->sink_cpu >= CPU_SETSIZE)
		return invalid(c, "sink_cpu");
	if (!c->stage || !c->stage->process)
		return invalid(c, "stage (NULL, or no process callback)");
	if (!c->sink)
		return invalid(c, "sink (NULL)");
	for (unsigned i = 0; i < sizeof(c->reserved_) / sizeof(c->reserved_[0]);
	     i++)
		if (c->reserved_[i])
			return invalid(c, "reserved_ (not zero: a field of a "
					  "later version, or not built with "
					  "bp_pipeline_config_init)");
	for (unsigned i = 0;
	     i < sizeof(c->stage->reserved_) / sizeof(c->stage->reserved_[0]);
	     i++)
		if (c->stage->reserved_[i])
			return invalid(c, "stage reserved_ (not NULL: a "
					  "callback of a later version)");
	return 0;
}

static void free_pipeline(struct bp_pipeline *p)
{
	if (p->workers) {
		for (unsigned i = 0; i < p->nworkers; i++) {
			struct bp_worker *w = &p->workers[i];

			bp_ring_destroy(w->egress);
			free(w->buf);
			free(w->done);
		}
		bpi_free_aligned(p->workers, p->nworkers * sizeof(*p->workers),
				 BP_FALSE_SHARING);
	}
	bp_ring_destroy(p->ingress);
	free(p->window);
	free(p->window_worker);
	free(p->sink_ended);
	free(p->sink_credit);
	free(p->cpus);
	free(p->live);
	bpi_free_aligned(p, sizeof(*p), BP_FALSE_SHARING);
}

int bp_pipeline_create(const struct bp_pipeline_config *c,
		       struct bp_pipeline **pp)
{
	struct bp_pipeline *p;
	int rc;

	if (!c || !pp)
		return -EINVAL;
	rc = check_config(c);
	if (rc)
		return rc;
	p = bpi_alloc_aligned(sizeof(*p), BP_FALSE_SHARING);
	if (!p)
		return -ENOMEM;
	p->cfg = *c;
	p->log = (struct bpi_logger){c->log, c->log_ctx};
	/* the caller may free or reuse its table (a compound literal in a
	 * helper's frame) once create returns */
	p->stage = *c->stage;
	p->cfg.stage = &p->stage;
	p->nworkers = c->workers;
	bpi_waitq_init(&p->start_wq);
	bpi_waitq_init(&p->sink_wq);
	bpi_waitq_init(&p->stop_wq);
	/*
	 * Workers, the sink and blocked producers go to sleep and wake up
	 * often (more so with more workers than cores): on these queues the
	 * wakers pay a fence per batch instead of every sleeper paying a
	 * membarrier, which interrupts all CPUs. Measured with 16 workers on
	 * 2 cores: 21-26 -> 31-38 M jobs/s at B=32 (interleaved A/B), 2 workers
	 * within noise (41-44 vs 44-47).
	 */
	bpi_waitq_set_waker_fences(&p->sink_wq);
	atomic_init(&p->live_max_batch, c->max_batch);
	atomic_init(&p->live_flush_ns, bpi_flush_age(c->flush_deadline_ns));
	rc = -ENOMEM;
	if (c->n_worker_cpus) {
		p->cpus = malloc(c->n_worker_cpus * sizeof(int));
		if (!p->cpus)
			goto fail;
		memcpy(p->cpus, c->worker_cpus, c->n_worker_cpus * sizeof(int));
		p->cfg.worker_cpus = p->cpus;
	}
	p->live = malloc(sizeof(*p->live));
	p->sink_ended = calloc(c->workers, sizeof(*p->sink_ended));
	p->sink_credit = calloc(c->workers, sizeof(*p->sink_credit));
	if (!p->live || !p->sink_ended || !p->sink_credit)
		goto fail;
	p->live->gen = LIVE_GEN_FIRST;
	p->live->max_batch = c->max_batch;
	p->live->worker_wait = c->worker_wait;
	p->live->stage_ctx = c->stage_ctx;

	rc = bp_ring_create(c->ingress_capacity, BP_RING_HWM, &p->ingress);
	if (rc)
		goto fail;
	bpi_waitq_set_waker_fences(bpi_ring_not_empty(p->ingress));
	/*
	 * Idle workers are interchangeable: a publication wakes one, and a
	 * worker that leaves ready jobs behind wakes the next (take_batch).
	 * Waking them all made a herd: with 16 sleeping workers on 2 cores
	 * every batch woke 16 threads and 15 went back to sleep.
	 */
	bpi_waitq_set_wake_one(bpi_ring_not_empty(p->ingress));
	bpi_waitq_set_waker_fences(bpi_ring_not_full(p->ingress));
	p->workers = bpi_alloc_aligned(c->workers * sizeof(*p->workers),
				       BP_FALSE_SHARING);
	if (!p->workers) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < c->workers; i++) {
		struct bp_worker *w = &p->workers[i];

		w->p = p;
		w->id = i;
		w->cpu = c->n_worker_cpus ? c->worker_cpus[i % c->n_worker_cpus]
					  : -1;
		w->done_cap = c->max_inflight;
		bpi_waitq_init(&w->progress);
		/* the worker sleeps and wakes per sink batch: as sink_wq */
		bpi_waitq_set_waker_fences(&w->progress);
		w->buf = malloc(c->max_inflight * sizeof(*w->buf));
		w->done = malloc(c->max_inflight * sizeof(*w->done));
		/*
		 * Quiet: the sink sleeps on sink_wq and the worker on its
		 * progress queue, never on the ring's own queues, so hand-off
		 * and take use the calls without wake checks.
		 */
		rc = bpi_ring_create_at(c->egress_capacity,
					BP_RING_SP | BP_RING_SC | BP_RING_HWM |
						BPI_RING_QUIET,
					0, &w->egress);
		if (rc || !w->buf || !w->done) {
			rc = rc ? rc : -ENOMEM;
			goto fail;
		}
	}
	if (c->ordered) {
		/* see sink.c: workers * max_inflight jobs at most in the window
		 */
		uint64_t need = (uint64_t)c->workers * c->max_inflight,
			 size = 1;

		while (size < need)
			size <<= 1;
		p->window = calloc(size, sizeof(*p->window));
		p->window_worker = calloc(size, sizeof(*p->window_worker));
		if (!p->window || !p->window_worker) {
			rc = -ENOMEM;
			goto fail;
		}
		p->window_mask = size - 1;
	}
	*pp = p;
	return 0;
fail:
	free_pipeline(p);
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

int bpi_pipeline_thread_start(struct bp_pipeline *p, pthread_t *t,
			      enum bp_thread_role role, unsigned index, int cpu,
			      void *(*fn)(void *), void *arg)
{
	char name[24];

	switch (role) {
	case BP_THREAD_WORKER:
		snprintf(name, sizeof(name), "bp-worker-%u", index);
		break;
	case BP_THREAD_SINK:
		snprintf(name, sizeof(name), "bp-sink");
		break;
	case BP_THREAD_FLUSHER:
		snprintf(name, sizeof(name), "bp-flush-%u", index);
		break;
	default:
		snprintf(name, sizeof(name), "bp-%u", index);
		break;
	}
	return bpi_thread_start(t, &(struct bpi_thread_spec){
					   .fn = fn,
					   .arg = arg,
					   .name = name,
					   .cpu = cpu,
					   .role = role,
					   .index = index,
					   .on_start = p->cfg.thread_start,
					   .on_stop = p->cfg.thread_stop,
					   .hook_ctx = p->cfg.thread_ctx,
				   });
}

static void join_workers(struct bp_pipeline *p)
{
	for (unsigned i = 0; i < p->nworkers; i++) {
		if (p->workers[i].thread_started) {
			pthread_join(p->workers[i].thread, NULL);
			p->workers[i].thread_started = false;
		}
	}
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
			bpi_log(&p->log, BP_LOG_ERROR, "worker %u: stage init: %s", i,
				bp_strerror(rc));
	}
	if (!rc) {
		rc = bpi_pipeline_thread_start(
			p, &p->sink_thread, BP_THREAD_SINK, 0, p->cfg.sink_cpu,
			bpi_sink_main, p);
		if (rc)
			bpi_log(&p->log, BP_LOG_ERROR, "cannot start the sink: %s",
				bp_strerror(rc));
		p->sink_started = rc == 0;
	}
	/* release: workers see everything start() did before go */
	atomic_store_explicit(&p->start_go, rc ? -1 : 1, memory_order_release);
	bpi_waitq_wake_all_slow(&p->start_wq);
	if (rc) {
		bp_ring_close(p->ingress); /* no submit may slip in */
		join_workers(p);
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

/* ------------------------------------------------------------- submit */

static int ingress_has_room(void *arg)
{
	struct bp_ring *r = arg;

	return bp_ring_free_count(r) > 0 || bp_ring_is_closed(r);
}

int bp_pipeline_submit(struct bp_pipeline *p, struct bp_job **jobs, unsigned n,
		       unsigned flags, int64_t timeout_ns)
{
	int64_t now, deadline;
	unsigned done = 0;

	/* n > INT_MAX: the count accepted would not fit the return value */
	if (!p || !jobs || n == 0 || n > INT_MAX ||
	    (flags & ~BP_SUBMIT_NONBLOCK))
		return -EINVAL;
	/* relaxed: a stale RUNNING is caught by the ring's -EPIPE */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) == P_CREATED)
		return -EINVAL;
	/* validate before reserving: a reservation cannot be handed back */
	for (unsigned i = 0; i < n; i++)
		if (!jobs[i] || ((uintptr_t)jobs[i] & 1))
			return -EINVAL;
	now = bpi_now_ns();
	deadline = bpi_deadline(now, timeout_ns);
	while (done < n) {
		uint64_t pos;
		int k = bpi_ring_reserve_burst(p->ingress, n - done, &pos);

		if (k > 0) {
			struct bp_job **js = jobs + done;

			/* the position is the seq: stamp, then publish */
			for (unsigned i = 0; i < (unsigned)k; i++) {
				js[i]->seq = (pos + i) & SEQ_MASK;
				js[i]->submit_ns = now;
				js[i]->status = BP_JOB_OK;
				js[i]->pipeline_word = JOB_SUBMITTED;
			}
			bpi_ring_publish(p->ingress, pos, (void *const *)js,
					 (unsigned)k);
			done += (unsigned)k;
			continue;
		}
		if (k < 0) /* -EPIPE: drain or abort has begun */
			return done ? (int)done : k;
		if (flags & BP_SUBMIT_NONBLOCK)
			return done ? (int)done : -EAGAIN;
		int64_t left = deadline < 0 ? -1 : deadline - bpi_now_ns();

		if (deadline >= 0 && left <= 0)
			return done ? (int)done : -ETIMEDOUT;
		/* only the pipeline's own threads make room in ingress */
		if (bpi_self_is(p)) {
			bpi_log(&p->log, BP_LOG_ERROR,
				"bp_pipeline_submit: a blocking submit from a "
				"stage or sink callback would wait for its own "
				"thread (ingress is full; use "
				"BP_SUBMIT_NONBLOCK)");
			return done ? (int)done : -EDEADLK;
		}
		int rc = bpi_wait_loop(&p->cfg.producer_wait,
				       bpi_ring_not_full(p->ingress),
				       ingress_has_room, p->ingress, left);
		if (rc < 0)
			return done ? (int)done : rc;
		now = bpi_now_ns();
	}
	return (int)done;
}

/* ----------------------------------------------------- drain, abort, destroy
 */

void bpi_thread_exited(struct bp_pipeline *p, _Atomic int *exited)
{
	/* release: the stopper that sees it (acquire) joins, then may free */
	atomic_store_explicit(exited, 1, memory_order_release);
	bpi_waitq_wake_all_slow(&p->stop_wq);
}

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

/*
 * Log what a stopper waits for: every worker still running with its
 * counts, and the sink. Counters are snapshots of the threads' own stats.
 */
static void report_stall(struct bp_pipeline *p, enum bp_log_level lvl,
			 const char *who, const char *what)
{
	uint64_t handed = 0, queued = 0, delivered, window;
	unsigned running = 0;

	bpi_log(&p->log, lvl, "%s: %s; intake is closed, still waiting for:", who,
		what);
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
		bpi_log(&p->log, lvl,
			"%s: worker %u: took %llu jobs, completed %llu, handed "
			"%llu to the sink: %llu still in the stage",
			who, i, (unsigned long long)taken,
			(unsigned long long)done, (unsigned long long)h,
			(unsigned long long)(taken > done ? taken - done : 0));
		running++;
	}
	if (running && p->stage.stall_report) {
		char buf[1024] = "";
		int n = p->stage.stall_report(p->cfg.stage_ctx, buf,
					      sizeof(buf));

		buf[sizeof(buf) - 1] = '\0'; /* whatever the stage wrote */
		if (n > 0)
			bpi_log(&p->log, lvl, "%s: stage %s: %s%s", who,
				p->stage.name ? p->stage.name : "(unnamed)",
				buf, (size_t)n >= sizeof(buf) ? "..." : "");
	}
	/* acquire: pairs with bpi_thread_exited's release */
	if (atomic_load_explicit(&p->sink_exited, memory_order_acquire))
		return;
	delivered = bpi_stat_get(&p->st_ok) + bpi_stat_get(&p->st_failed) +
		    bpi_stat_get(&p->st_cancelled);
	/* ordered: handed to the sink, neither queued nor delivered */
	window = p->cfg.ordered && handed > queued + delivered
			 ? handed - queued - delivered
			 : 0;
	bpi_log(&p->log, lvl,
		"%s: sink: %s: delivered %llu of %llu submitted, %llu queued "
		"for it, %llu in its reorder window",
		who, queued ? "behind" : "waiting for the workers",
		(unsigned long long)delivered,
		(unsigned long long)bpi_ring_enqueued(p->ingress),
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
	join_workers(p);
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

	bp_pipeline_stats(p, &s);
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
		/* producers get -EPIPE from here on */
		bp_ring_close(p->ingress);
		bpi_flusher_join(p);
	} else if (st == P_CREATED &&
		   atomic_compare_exchange_strong_explicit(
			   &p->state, &st, P_STOPPED, memory_order_acq_rel,
			   memory_order_acquire)) {
		/* never started: nothing was submitted */
		bp_ring_close(p->ingress);
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
	free_pipeline(p);
}

/* ------------------------------------------------------ live changes */

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
static int reconfigure(struct bp_pipeline *p,
		       void (*edit)(struct live_cfg *, const void *),
		       const void *arg, const char *what)
{
	struct live_cfg *nc, *old;

	/* the callers refused a call from p's own threads (-EDEADLK) */
	nc = malloc(sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	/* the previous reconfiguration's writes are visible (acquire) */
	bpi_spin_lock(&p->reconfig_busy);
	/* relaxed: only reconfigurations store it, and they are serialised */
	old = atomic_load_explicit(&p->live, memory_order_relaxed);
	*nc = *old;
	nc->gen = old->gen + 1;
	edit(nc, arg);
	/*
	 * seq_cst: release for the workers' acquire of the pointer (they see
	 * nc's fields), and ordered before the loads of cfg_seen in wait_ack
	 */
	atomic_store_explicit(&p->live, nc, memory_order_seq_cst);
	for (unsigned i = 0; i < p->nworkers; i++)
		wait_ack(p, &p->workers[i], nc->gen, what);
	free(old);
	bpi_spin_unlock(&p->reconfig_busy);
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

static void edit_batch(struct live_cfg *c, const void *arg)
{
	c->max_batch = *(const unsigned *)arg;
}

static void edit_wait(struct live_cfg *c, const void *arg)
{
	c->worker_wait = *(const struct bp_wait_policy *)arg;
}

static void edit_ctx(struct live_cfg *c, const void *arg)
{
	c->stage_ctx = *(void *const *)arg;
}

int bp_pipeline_set_max_batch(struct bp_pipeline *p, unsigned max_batch)
{
	if (!p)
		return -EINVAL;
	if (max_batch < 1 || max_batch > BP_MAX_BATCH ||
	    max_batch > p->cfg.max_inflight) {
		bpi_log(&p->log, BP_LOG_ERROR,
			"bp_pipeline_set_max_batch: %u is outside 1..%u",
			max_batch,
			p->cfg.max_inflight < BP_MAX_BATCH ? p->cfg.max_inflight
							   : BP_MAX_BATCH);
		return -EINVAL;
	}
	int rc = live_change_check(p, true, "bp_pipeline_set_max_batch");

	if (rc)
		return rc;
	rc = reconfigure(p, edit_batch, &max_batch,
			 "bp_pipeline_set_max_batch");

	if (rc == 0)
		/* relaxed: producers pick it up on their next call */
		atomic_store_explicit(&p->live_max_batch, max_batch,
				      memory_order_relaxed);
	return rc;
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
		  : reconfigure(p, edit_wait, w, "bp_pipeline_set_worker_wait");
}

int bp_pipeline_set_stage_ctx(struct bp_pipeline *p, void *ctx)
{
	if (!p)
		return -EINVAL;
	int rc = live_change_check(p, true, "bp_pipeline_set_stage_ctx");

	return rc ? rc
		  : reconfigure(p, edit_ctx, &ctx, "bp_pipeline_set_stage_ctx");
}
