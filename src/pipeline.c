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
 * workers read it through RCU (QSBR: each pass announces a quiescent state,
 * which costs a load and a compare when nothing changed); the writer
 * publishes a new copy, waits for a grace period and frees the old one.
 * Producers read max_batch and the flush deadline from two relaxed atomics
 * instead, because application threads are not RCU readers.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <urcu/urcu-qsbr.h>

#include "pipeline_internal.h"
#include "ring_internal.h"
#include "tsan.h"
#include "wait_internal.h"

void bpi_log(const struct bp_pipeline *p, enum bp_log_level lvl,
	     const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!p->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->cfg.log(p->cfg.log_ctx, lvl, msg);
}

void bp_pipeline_config_init(struct bp_pipeline_config *c)
{
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
	p->nworkers = c->workers;
	bp_waitq_init(&p->start_wq);
	bp_waitq_init(&p->sink_wq);
	bp_waitq_init(&p->stop_wq);
	bp_waitq_init(&p->progress_wq);
	/*
	 * Workers, the sink and blocked producers go to sleep and wake up
	 * often (more so with more workers than cores): on these queues the
	 * wakers pay a fence per batch instead of every sleeper paying a
	 * membarrier, which interrupts all CPUs. Measured with 16 workers on
	 * 2 cores: 21-26 -> 31-38 M jobs/s at B=32 (interleaved A/B), 2 workers
	 * within noise (41-44 vs 44-47).
	 */
	bp_waitq_set_waker_fences(&p->sink_wq);
	bp_waitq_set_waker_fences(&p->progress_wq);
	atomic_init(&p->live_max_batch, c->max_batch);
	atomic_init(&p->live_flush_ns, c->flush_deadline_ns);
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
	p->live->max_batch = c->max_batch;
	p->live->worker_wait = c->worker_wait;
	p->live->stage_ctx = c->stage_ctx;

	rc = bp_ring_create(c->ingress_capacity, BP_RING_HWM, &p->ingress);
	if (rc)
		goto fail;
	bp_waitq_set_waker_fences(bpi_ring_not_empty(p->ingress));
	/*
	 * Idle workers are interchangeable: a publication wakes one, and a
	 * worker that leaves ready jobs behind wakes the next (take_batch).
	 * Waking them all made a herd: with 16 sleeping workers on 2 cores
	 * every batch woke 16 threads and 15 went back to sleep.
	 */
	bp_waitq_set_wake_one(bpi_ring_not_empty(p->ingress));
	bp_waitq_set_waker_fences(bpi_ring_not_full(p->ingress));
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
		w->buf = malloc(c->max_inflight * sizeof(*w->buf));
		w->done = malloc(c->max_inflight * sizeof(*w->done));
		rc = bp_ring_create(c->egress_capacity,
				    BP_RING_SP | BP_RING_SC | BP_RING_HWM,
				    &w->egress);
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

/* name: shown by top -H, perf and gdb; at most 15 characters */
static int start_thread(pthread_t *t, int cpu, void *(*fn)(void *), void *arg,
			const char *name)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	rc = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		pthread_setname_np(*t, name); /* a name is a courtesy: ignore */
	return -rc;
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
	/* relaxed: start is called once, before any drain/abort (pipeline.h) */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) != P_CREATED)
		return -EINVAL;
	for (; started < p->nworkers; started++) {
		struct bp_worker *w = &p->workers[started];

		char name[24];

		snprintf(name, sizeof(name), "bp-worker-%u", started);
		name[15] = '\0'; /* the kernel keeps 15 characters */
		rc = start_thread(&w->thread, w->cpu, bpi_worker_main, w, name);
		if (rc) {
			bpi_log(p, BP_LOG_ERROR,
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
			bpi_log(p, BP_LOG_ERROR, "worker %u: stage init: %s", i,
				bp_strerror(rc));
	}
	if (!rc) {
		rc = start_thread(&p->sink_thread, p->cfg.sink_cpu,
				  bpi_sink_main, p, "bp-sink");
		if (rc)
			bpi_log(p, BP_LOG_ERROR, "cannot start the sink: %s",
				bp_strerror(rc));
		p->sink_started = rc == 0;
	}
	/* release: workers see everything start() did before go */
	atomic_store_explicit(&p->start_go, rc ? -1 : 1, memory_order_release);
	bp_waitq_wake_all_slow(&p->start_wq);
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

	if (!p || !jobs || n == 0 || (flags & ~BP_SUBMIT_NONBLOCK))
		return -EINVAL;
	/* relaxed: a stale RUNNING is caught by the ring's -EPIPE */
	if (atomic_load_explicit(&p->state, memory_order_relaxed) == P_CREATED)
		return -EINVAL;
	/* validate before reserving: a reservation cannot be handed back */
	for (unsigned i = 0; i < n; i++)
		if (!jobs[i] || ((uintptr_t)jobs[i] & 1))
			return -EINVAL;
	now = bp_now_ns();
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
		int64_t left = deadline < 0 ? -1 : deadline - bp_now_ns();

		if (deadline >= 0 && left <= 0)
			return done ? (int)done : -ETIMEDOUT;
		int rc = bpi_wait_loop(&p->cfg.producer_wait,
				       bpi_ring_not_full(p->ingress),
				       ingress_has_room, p->ingress, left);
		if (rc < 0)
			return done ? (int)done : rc;
		now = bp_now_ns();
	}
	return (int)done;
}

/* ----------------------------------------------------- drain, abort, destroy
 */

/* Wake condition of a second stopper: the first one has finished. */
static int stopped(void *arg)
{
	struct bp_pipeline *p = arg;

	/* acquire: pairs with the release that published P_STOPPED */
	return atomic_load_explicit(&p->state, memory_order_acquire) ==
	       P_STOPPED;
}

/*
 * Drain or abort. The first caller to move the state out of RUNNING (or
 * CREATED) does the work; any other caller, from any thread, waits until
 * it is done. An abort during a drain still takes effect: workers check
 * the flag on every pass.
 */
static int stop(struct bp_pipeline *p, bool abort)
{
	int st = P_RUNNING;

	if (abort)
		/* release: workers that see it also see everything before */
		atomic_store_explicit(&p->aborting, 1, memory_order_release);
	/* acq_rel: one stopper wins; it sees what start() published */
	if (!atomic_compare_exchange_strong_explicit(&p->state, &st, P_STOPPING,
						     memory_order_acq_rel,
						     memory_order_acquire)) {
		if (st == P_CREATED &&
		    atomic_compare_exchange_strong_explicit(
			    &p->state, &st, P_STOPPED, memory_order_acq_rel,
			    memory_order_acquire)) {
			/* never started: nothing was submitted */
			bp_ring_close(p->ingress);
			bp_waitq_wake_all_slow(&p->stop_wq);
			return 0;
		}
		if (st != P_STOPPED) {
			/* another thread is stopping the pipeline: wait for it
			 */
			struct bp_wait_policy pol;

			bp_wait_policy_init(&pol);
			while (bpi_wait_loop(&pol, &p->stop_wq, stopped, p,
					     -1) < 0)
				; /* -EINTR: a signal; wait again */
		}
		return 0;
	}
	/* producer handles' staged jobs go in before intake closes */
	bpi_flusher_close(p);
	bp_ring_close(p->ingress); /* producers get -EPIPE from here on */
	join_workers(p);
	if (p->sink_started) {
		pthread_join(p->sink_thread, NULL);
		p->sink_started = false;
	}
	/* release: a waiting stopper sees the joined threads' work */
	atomic_store_explicit(&p->state, P_STOPPED, memory_order_release);
	bp_waitq_wake_all_slow(&p->stop_wq);
	return 0;
}

int bp_pipeline_drain(struct bp_pipeline *p)
{
	return p ? stop(p, false) : -EINVAL;
}

int bp_pipeline_abort(struct bp_pipeline *p)
{
	return p ? stop(p, true) : -EINVAL;
}

void bp_pipeline_destroy(struct bp_pipeline *p)
{
	if (!p)
		return;
	stop(p, false);
	bpi_flusher_destroy(p);
	free_pipeline(p);
}

/* ------------------------------------------------------ live changes */

/*
 * Publish a modified copy of the live configuration and free the old one
 * after a grace period. Reconfiguration is a cold path: one at a time,
 * callers spin briefly on a flag to serialise (never a worker).
 */
static int reconfigure(struct bp_pipeline *p,
		       void (*edit)(struct live_cfg *, const void *),
		       const void *arg)
{
	struct live_cfg *nc = malloc(sizeof(*nc)), *old;
	int expect = 0;

	if (!nc)
		return -ENOMEM;
	/* acquire: the previous reconfiguration's writes are visible */
	while (!atomic_compare_exchange_weak_explicit(
		&p->reconfig_busy, &expect, 1, memory_order_acquire,
		memory_order_relaxed)) {
		expect = 0;
		sched_yield();
	}
	old = p->live;
	*nc = *old;
	edit(nc, arg);
	bp_tsan_release(nc); /* TSAN: workers acquire it after dereferencing */
	old = rcu_xchg_pointer(&p->live, nc);
	/* every worker has passed a quiescent state: none can see old */
	urcu_qsbr_synchronize_rcu();
	for (unsigned i = 0; i < p->nworkers; i++)
		bp_tsan_acquire(&p->workers[i]); /* TSAN: see worker.c */
	free(old);
	/* release: pairs with the acquire above */
	atomic_store_explicit(&p->reconfig_busy, 0, memory_order_release);
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
	if (!p || max_batch < 1 || max_batch > BP_MAX_BATCH ||
	    max_batch > p->cfg.max_inflight)
		return -EINVAL;
	int rc = reconfigure(p, edit_batch, &max_batch);

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
	/* relaxed: producers pick it up on their next call */
	atomic_store_explicit(&p->live_flush_ns, ns, memory_order_relaxed);
	return 0;
}

int bp_pipeline_set_worker_wait(struct bp_pipeline *p,
				const struct bp_wait_policy *w)
{
	if (!p || bp_wait_policy_check(w))
		return -EINVAL;
	return reconfigure(p, edit_wait, w);
}

int bp_pipeline_set_stage_ctx(struct bp_pipeline *p, void *ctx)
{
	if (!p)
		return -EINVAL;
	return reconfigure(p, edit_ctx, &ctx);
}
