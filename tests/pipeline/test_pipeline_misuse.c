/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_misuse - misuse of the pipeline fails loudly, never as a
 * hang, a crash, a lost or a doubled job:
 *
 *   - a stage that never completes a job: bp_pipeline_drain_timeout returns
 *     -ETIMEDOUT and logs who holds what (and the stage's stall_report);
 *     drain, abort or destroy continue
 *     from there; several stoppers at once, with and without timeouts;
 *   - a job completed twice (in one call or two): that repeat refused by
 *     the worker, the other jobs accepted, never delivered twice, never a
 *     wedged ordered pipeline;
 *   - drain, abort, destroy, a blocking submit and the live changes from a
 *     stage or sink callback: -EDEADLK (destroy: nothing), not a hang;
 *   - the stage table may go away after create (a compound literal in a
 *     helper's frame, a table overwritten on the heap);
 *   - live changes after drain or abort: -EPIPE; a second start, also from
 *     a stage init: -EINVAL; bp_worker_* with NULL.
 *
 * Deterministic: a stage holds jobs until the test releases them; every
 * wait is bounded, timeouts asserted are one-sided (the call returned
 * -ETIMEDOUT, no sooner than its timeout), and a hang trips the watchdog
 * (BP_WATCHDOG_S=N changes it; BP_ONLY=glob runs the matching tests only).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <batchpipe/batchpipe.h>

#include "pt_common.h"
#include "src/pipeline_internal.h" /* stoppers: who is inside */

PT_DEFINE_GLOBALS;

#define MS INT64_C(1000000)

/* ------------------------------------------------------------ fixtures */

struct tjob {
	struct bp_job hdr;
	unsigned idx;
	atomic_uint delivered;
};

static void tjobs_init(struct tjob *j, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		memset(&j[i], 0, sizeof(j[i]));
		j[i].idx = i;
		atomic_init(&j[i].delivered, 0);
	}
}

static void submit_all(struct bp_pipeline *p, struct tjob *j, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct bp_job *jp = &j[i].hdr;

		assert_int_equal(bp_pipeline_submit(p, &jp, 1, 0, -1), 1);
	}
}

/* Log lines, captured for the asserts (test code: a mutex is fine). */
struct logcap {
	pthread_mutex_t lock;
	char all[16384];
};

static struct logcap logs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void log_fn(void *ctx, enum bp_log_level lvl, const char *msg)
{
	struct logcap *l = ctx;
	size_t len;

	(void)lvl;
	pthread_mutex_lock(&l->lock);
	len = strlen(l->all);
	snprintf(l->all + len, sizeof(l->all) - len, "%s\n", msg);
	pthread_mutex_unlock(&l->lock);
}

static void logs_reset(void)
{
	pthread_mutex_lock(&logs.lock);
	logs.all[0] = '\0';
	pthread_mutex_unlock(&logs.lock);
}

static bool logged(const char *needle)
{
	bool found;

	pthread_mutex_lock(&logs.lock);
	found = strstr(logs.all, needle) != NULL;
	pthread_mutex_unlock(&logs.lock);
	if (!found)
		fprintf(stderr, "log lacks \"%s\"; it has:\n%s", needle,
			logs.all);
	return found;
}

/*
 * What every test shares with its stage and sink: the pipeline, what the
 * sink saw, the stage's instructions, and what calls from callbacks
 * returned (written by one callback thread, read by main after drain).
 */
struct fix {
	struct bp_pipeline *p;
	atomic_uint count; /* jobs the sink saw */
	unsigned ok, failed, cancelled;
	atomic_int hold;      /* the stage keeps every job it takes */
	atomic_int release;   /* poll completes what the stage holds */
	atomic_int cancels;   /* cancel callbacks */
	atomic_int processed; /* process callbacks */
	atomic_int bad_calls; /* a stale stage table was used */
	atomic_int rc[16];    /* results of calls made from callbacks */
	atomic_int calls_done;
	atomic_int gate;       /* main lets a blocked callback go on */
	struct tjob extra[16]; /* jobs a callback submits */
	int mode;	       /* which misuse the callbacks commit */
};

static void fix_init(struct fix *f)
{
	memset(f, 0, sizeof(*f));
	tjobs_init(f->extra, 16);
}

static void sink_count_jobs(struct fix *f, struct bp_job **jobs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct tjob *j = (struct tjob *)jobs[i];

		if (atomic_fetch_add_explicit(&j->delivered, 1,
					      memory_order_relaxed) != 0)
			pt_fail("job %u delivered twice", j->idx);
		if (j->hdr.status == BP_JOB_OK)
			f->ok++;
		else if (j->hdr.status == BP_JOB_CANCELLED)
			f->cancelled++;
		else
			f->failed++;
	}
	/* release: main reads the counts above after seeing count */
	atomic_fetch_add_explicit(&f->count, n, memory_order_release);
}

static unsigned sink_seen(struct fix *f)
{
	/* acquire: pairs with sink_count_jobs' release */
	return atomic_load_explicit(&f->count, memory_order_acquire);
}

static void sink_plain(void *ctx, struct bp_job **jobs, unsigned n)
{
	sink_count_jobs(ctx, jobs, n);
}

static bool wait_until(atomic_int *v, int want, int64_t ms)
{
	int64_t end = pt_now_ns() + ms * MS;

	while (atomic_load(v) < want) {
		if (pt_now_ns() > end)
			return false;
		pt_sleep_ns(MS);
	}
	return true;
}

static bool wait_seen(struct fix *f, unsigned want, int64_t ms)
{
	int64_t end = pt_now_ns() + ms * MS;

	while (sink_seen(f) < want) {
		if (pt_now_ns() > end)
			return false;
		pt_sleep_ns(MS);
	}
	return true;
}

/* Wait (bounded) until the workers have taken n jobs in all. */
static bool wait_taken(struct bp_pipeline *p, uint64_t n, int64_t ms)
{
	int64_t end = pt_now_ns() + ms * MS;
	struct bp_pipeline_stats st;

	for (;;) {
		if (bp_pipeline_get_stats(p, &st) == 0 && st.worker_jobs >= n)
			return true;
		if (pt_now_ns() > end)
			return false;
		pt_sleep_ns(MS);
	}
}

/* ------------------------------------------------- a stage that holds jobs */

#define HOLD_MAX 256

struct hold_state {
	struct bp_job *held[HOLD_MAX];
	unsigned n;
};

static int hold_init(struct bp_worker *w, void **state)
{
	(void)w;
	*state = calloc(1, sizeof(struct hold_state));
	return *state ? 0 : -ENOMEM;
}

static void hold_fini(void *state, struct bp_worker *w)
{
	(void)w;
	free(state);
}

/* Completes at once unless told to hold; held jobs wait for release. */
static void hold_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			 unsigned n)
{
	struct hold_state *s = state;
	struct fix *f = bp_worker_stage_ctx(w);

	atomic_fetch_add(&f->processed, 1);
	if (!atomic_load(&f->hold)) {
		if (bp_worker_complete(w, jobs, n) != (int)n)
			pt_fail("complete of fresh jobs refused");
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		if (s->n == HOLD_MAX) {
			pt_fail("hold stage full");
			return;
		}
		s->held[s->n++] = jobs[i];
	}
}

static void hold_complete_all(struct hold_state *s, struct bp_worker *w,
			      int32_t status)
{
	for (unsigned i = 0; i < s->n; i++)
		s->held[i]->status = status;
	if (s->n && bp_worker_complete(w, s->held, s->n) != (int)s->n)
		pt_fail("complete of held jobs refused");
	s->n = 0;
}

static void hold_poll(void *state, struct bp_worker *w)
{
	struct fix *f = bp_worker_stage_ctx(w);

	if (atomic_load(&f->release))
		hold_complete_all(state, w, BP_JOB_OK);
}

static void hold_cancel(void *state, struct bp_worker *w)
{
	struct fix *f = bp_worker_stage_ctx(w);

	atomic_fetch_add(&f->cancels, 1);
	hold_complete_all(state, w, BP_JOB_CANCELLED);
}

/* What the stage's jobs wait for: the stopper logs it with its report. */
static int hold_stall_report(void *ctx, char *buf, size_t size)
{
	struct fix *f = ctx;

	if (!atomic_load(&f->hold) || atomic_load(&f->release))
		return 0;
	return snprintf(buf, size, "the test holds the jobs");
}

static const struct bp_stage hold_stage = {
	.name = "hold",
	.init = hold_init,
	.process = hold_process,
	.poll = hold_poll,
	.cancel = hold_cancel,
	.fini = hold_fini,
	.stall_report = hold_stall_report,
};

/* The same without a cancel callback: abort cannot make it let go. */
static const struct bp_stage hold_stage_nocancel = {
	.name = "hold-nocancel",
	.init = hold_init,
	.process = hold_process,
	.poll = hold_poll,
	.fini = hold_fini,
};

static void base_config(struct bp_pipeline_config *c, struct fix *f,
			const struct bp_stage *st)
{
	bp_pipeline_config_init(c);
	c->workers = 1;
	c->stage = st;
	c->stage_ctx = f;
	c->sink = sink_plain;
	c->sink_ctx = f;
	c->log = log_fn;
	c->log_ctx = &logs;
}

static struct bp_pipeline *make(struct bp_pipeline_config *c, struct fix *f)
{
	assert_int_equal(bp_pipeline_create(c, &f->p), 0);
	assert_int_equal(bp_pipeline_start(f->p), 0);
	return f->p;
}

static void assert_conservation(struct fix *f)
{
	struct bp_pipeline_stats st;

	assert_int_equal(bp_pipeline_get_stats(f->p, &st), 0);
	assert_true(st.submitted == st.ok + st.failed + st.cancelled);
	assert_true(st.submitted == sink_seen(f));
	assert_true(st.ok == f->ok && st.cancelled == f->cancelled &&
		    st.failed == f->failed);
}

/* ------------------------------------------------------ 1. bounded drain */

/* A stage that keeps its jobs: the drain gives up, saying who holds them. */
static void test_drain_timeout_reports(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[5];
	int64_t t0, t1;

	(void)unused;
	pt_watchdog_arm(60, "test_drain_timeout_reports");
	fix_init(&f);
	logs_reset();
	tjobs_init(j, 5);
	base_config(&c, &f, &hold_stage);
	make(&c, &f);
	submit_all(f.p, j, 2); /* completed at once */
	assert_true(wait_seen(&f, 2, 10000));
	atomic_store(&f.hold, 1);
	submit_all(f.p, j + 2, 3); /* held for ever */
	assert_true(wait_taken(f.p, 5, 10000));
	t0 = pt_now_ns();
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 100 * MS), -ETIMEDOUT);
	t1 = pt_now_ns();
	assert_true(t1 - t0 >= 100 * MS);
	assert_true(logged("bp_pipeline_drain: timed out"));
	assert_true(logged("worker 0: took 5 jobs, completed 2, handed 2 to "
			   "the sink: 3 still in the stage"));
	assert_true(logged("sink: waiting for the workers: delivered 2 of 5"));
	/* the stage's own words (its stall_report) */
	assert_true(logged("bp_pipeline_drain: stage hold: the test holds the "
			   "jobs"));
	/* intake stays closed */
	struct bp_job *jp = &f.extra[0].hdr;

	assert_int_equal(bp_pipeline_submit(f.p, &jp, 1, 0, -1), -EPIPE);
	/* again: continues the same drain, and times out again */
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 0), -ETIMEDOUT);
	assert_int_equal(sink_seen(&f), 2);
	/* the stage lets go: a drain without a limit finishes */
	atomic_store(&f.release, 1);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_int_equal(sink_seen(&f), 5);
	assert_int_equal(f.ok, 5);
	assert_conservation(&f);
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 0), 0);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/*
 * A fresh pipeline of one worker whose stage holds every job it takes
 * (f->hold set before start), with n jobs of j initialised and `submit` of
 * them submitted.
 */
static void start_holding(struct fix *f, const struct bp_stage *st,
			  struct tjob *j, unsigned n, unsigned submit)
{
	struct bp_pipeline_config c;

	fix_init(f);
	logs_reset();
	tjobs_init(j, n);
	base_config(&c, f, st);
	atomic_store(&f->hold, 1);
	make(&c, f);
	submit_all(f->p, j, submit);
}

/* After a timed-out drain, abort gives the cancel callback its chance. */
static void test_drain_timeout_then_abort(void **unused)
{
	struct fix f;
	struct tjob j[4];

	(void)unused;
	pt_watchdog_arm(60, "test_drain_timeout_then_abort");
	start_holding(&f, &hold_stage, j, 4, 4);
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 50 * MS), -ETIMEDOUT);
	assert_int_equal(atomic_load(&f.cancels), 0);
	assert_int_equal(bp_pipeline_abort(f.p), 0);
	assert_int_equal(atomic_load(&f.cancels), 1);
	assert_int_equal(sink_seen(&f), 4);
	assert_int_equal(f.cancelled, 4);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/* destroy after a timed-out drain aborts (and so finishes) and frees. */
static void test_destroy_after_timeout_aborts(void **unused)
{
	struct fix f;
	struct tjob j[3];

	(void)unused;
	pt_watchdog_arm(60, "test_destroy_after_timeout_aborts");
	start_holding(&f, &hold_stage, j, 3, 3);
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 20 * MS), -ETIMEDOUT);
	bp_pipeline_destroy(f.p);
	assert_true(logged("bp_pipeline_destroy: a drain timed out before: "
			   "aborting"));
	assert_int_equal(atomic_load(&f.cancels), 1);
	assert_int_equal(sink_seen(&f), 3);
	assert_int_equal(f.cancelled, 3);
	assert_int_equal(pt_failures(), 0);
}

struct stopper {
	pthread_t t;
	struct bp_pipeline *p;
	int64_t timeout_ns; /* < 0: bp_pipeline_drain; INT64_MIN: abort */
	atomic_int rc;
	atomic_int done;
};

static void *stopper_main(void *arg)
{
	struct stopper *s = arg;
	int rc;

	if (s->timeout_ns == INT64_MIN)
		rc = bp_pipeline_abort(s->p);
	else if (s->timeout_ns < 0)
		rc = bp_pipeline_drain(s->p);
	else
		rc = bp_pipeline_drain_timeout(s->p, s->timeout_ns);
	atomic_store(&s->rc, rc);
	atomic_store(&s->done, 1);
	return NULL;
}

static void stopper_go(struct stopper *s, struct bp_pipeline *p,
		       int64_t timeout_ns)
{
	s->p = p;
	s->timeout_ns = timeout_ns;
	atomic_init(&s->rc, 1);
	atomic_init(&s->done, 0);
	assert_int_equal(pthread_create(&s->t, NULL, stopper_main, s), 0);
}

/*
 * Several stoppers at once: one without a limit, others with timeouts that
 * expire while it joins (they return -ETIMEDOUT, it keeps waiting), one
 * that gives up while holding the join and leaves it to the next.
 */
static void test_concurrent_stoppers(void **unused)
{
	struct fix f;
	struct tjob j[6];
	struct stopper a, b, d;

	(void)unused;
	pt_watchdog_arm(60, "test_concurrent_stoppers");
	start_holding(&f, &hold_stage, j, 6, 6);
	/* main joins first, gives up; then a drain without a limit takes over
	 */
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 30 * MS), -ETIMEDOUT);
	stopper_go(&a, f.p, -1);
	stopper_go(&b, f.p, 40 * MS);
	assert_true(wait_until(&b.done, 1, 10000));
	assert_int_equal(atomic_load(&b.rc), -ETIMEDOUT);
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 30 * MS), -ETIMEDOUT);
	assert_int_equal(atomic_load(&a.done), 0); /* still waiting */
	stopper_go(&d, f.p, 60000 * MS); /* a long timeout: finishes */
	pt_sleep_ns(20 * MS);
	atomic_store(&f.release, 1);
	assert_true(wait_until(&a.done, 1, 20000));
	assert_true(wait_until(&d.done, 1, 20000));
	assert_int_equal(atomic_load(&a.rc), 0);
	assert_int_equal(atomic_load(&d.rc), 0);
	pthread_join(a.t, NULL);
	pthread_join(b.t, NULL);
	pthread_join(d.t, NULL);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_int_equal(f.ok, 6);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/*
 * Two stoppers in other threads are inside (waiting on a stage that holds
 * its jobs), the stage lets go, and the main thread's drain returns first:
 * destroy right after it must wait until they are out of the pipeline (a
 * stopper still in its wait loop wrote freed memory, seen by ASAN).
 */
static void test_destroy_waits_for_stoppers(void **unused)
{
	enum { STOPPERS = 6 };

	(void)unused;
	pt_watchdog_arm(120, "test_destroy_waits_for_stoppers");
	for (unsigned r = 0; r < 100; r++) {
		struct fix f;
		struct tjob j[8];
		struct stopper st[STOPPERS];
		int64_t end = pt_now_ns() + 10000 * MS;

		start_holding(&f, &hold_stage, j, 8, 8);
		for (unsigned i = 0; i < STOPPERS; i++)
			stopper_go(&st[i], f.p, i % 2 ? -1 : 60000 * MS);
		/* all inside before destroy: none may begin after it */
		while (atomic_load(&f.p->stoppers) < STOPPERS &&
		       pt_now_ns() < end)
			pt_sleep_ns(100000);
		assert_int_equal(atomic_load(&f.p->stoppers), STOPPERS);
		/* the stage lets go, or the main thread aborts */
		if (r % 3 == 1) {
			assert_int_equal(bp_pipeline_abort(f.p), 0);
		} else {
			atomic_store(&f.release, 1);
			if (r % 3 == 0)
				assert_int_equal(bp_pipeline_drain(f.p), 0);
			else /* as a drain that returns once it sees stopped */
				while (atomic_load(&f.p->state) != P_STOPPED)
					;
		}
		bp_pipeline_destroy(f.p); /* the others may still be inside */
		for (unsigned i = 0; i < STOPPERS; i++) {
			pthread_join(st[i].t, NULL);
			assert_int_equal(atomic_load(&st[i].rc), 0);
		}
		assert_int_equal(sink_seen(&f), 8);
	}
	pt_watchdog_disarm();
	assert_int_equal(pt_failures(), 0);
}

/*
 * An abort from another thread while a drain without a limit waits on a
 * stage that holds its jobs: the cancel callback runs, both return.
 */
static void test_abort_rescues_drain(void **unused)
{
	struct fix f;
	struct tjob j[3];
	struct stopper a, b;

	(void)unused;
	pt_watchdog_arm(60, "test_abort_rescues_drain");
	start_holding(&f, &hold_stage, j, 3, 3);
	assert_true(wait_taken(f.p, 3, 10000)); /* so cancel has them */
	stopper_go(&a, f.p, -1);
	stopper_go(&b, f.p, 20 * MS);
	assert_true(wait_until(&b.done, 1, 10000));
	assert_int_equal(atomic_load(&b.rc), -ETIMEDOUT);
	assert_int_equal(bp_pipeline_abort(f.p), 0);
	assert_true(wait_until(&a.done, 1, 20000));
	assert_int_equal(atomic_load(&a.rc), 0);
	pthread_join(a.t, NULL);
	pthread_join(b.t, NULL);
	assert_int_equal(f.cancelled, 3);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/* A stage without cancel: abort cannot help, abort's own waits go on. */
static void test_timeout_without_cancel(void **unused)
{
	struct fix f;
	struct tjob j[2];
	struct stopper a;

	(void)unused;
	pt_watchdog_arm(60, "test_timeout_without_cancel");
	start_holding(&f, &hold_stage_nocancel, j, 2, 2);
	/* taken before the abort: jobs taken after it are cancelled at once */
	assert_true(wait_taken(f.p, 2, 10000));
	stopper_go(&a, f.p, INT64_MIN); /* abort, in the background */
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 30 * MS), -ETIMEDOUT);
	assert_int_equal(atomic_load(&a.done), 0);
	pthread_mutex_lock(&logs.lock); /* no stall_report, no stage line */
	bool stage_line = strstr(logs.all, "stage hold-nocancel") != NULL;
	pthread_mutex_unlock(&logs.lock);
	assert_false(stage_line);
	atomic_store(&f.release, 1); /* the stage completes them after all */
	assert_true(wait_until(&a.done, 1, 20000));
	assert_int_equal(atomic_load(&a.rc), 0);
	pthread_join(a.t, NULL);
	assert_int_equal(sink_seen(&f), 2);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/* A healthy pipeline drains within its timeout. */
static void test_drain_timeout_ok(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[32];

	(void)unused;
	pt_watchdog_arm(60, "test_drain_timeout_ok");
	fix_init(&f);
	tjobs_init(j, 32);
	base_config(&c, &f, &hold_stage);
	c.workers = 2;
	make(&c, &f);
	submit_all(f.p, j, 32);
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 30000 * MS), 0);
	assert_int_equal(f.ok, 32);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(bp_pipeline_drain_timeout(NULL, 0), -EINVAL);
	assert_int_equal(pt_failures(), 0);
}

/* ------------------------------------------------- 2. double completion */

/* A synchronous stage that completes every batch twice. */
static void twice_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	struct fix *f = bp_worker_stage_ctx(w);
	int rc;

	(void)state;
	if (bp_worker_complete(w, jobs, n) != (int)n)
		pt_fail("first completion refused");
	rc = bp_worker_complete(w, jobs, n);
	if (rc != 0)
		pt_fail("second completion returned %d", rc);
	atomic_fetch_add(&f->calls_done, 1);
}

static const struct bp_stage twice_stage = {.name = "twice",
					    .process = twice_process};

static void test_complete_twice_refused(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[64];

	(void)unused;
	pt_watchdog_arm(60, "test_complete_twice_refused");
	fix_init(&f);
	logs_reset();
	tjobs_init(j, 64);
	base_config(&c, &f, &twice_stage);
	c.max_inflight = 32; /* an underflowed in-flight count stops takes */
	make(&c, &f);
	submit_all(f.p, j, 64);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_int_equal(sink_seen(&f), 64); /* each once: see sink */
	assert_conservation(&f);
	assert_true(logged("worker 0: bp_worker_complete: "));
	assert_true(logged("jobs refused: completed already"));
	assert_false(strstr(logs.all, "missing"));
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/*
 * An asynchronous stage holding three jobs A, B, C completes {A, A}, then
 * A again, then {B, C}. Each repeat is refused by itself: A is accepted
 * once, B and C after it, all three reach the sink once, and nothing
 * wedges. (The worker used to count jobs only: {A, A} passed as two of the
 * three it held, the sink refused the repeat, {B, C} then overran and was
 * refused, and an ordered pipeline waited for B's seq for good; unordered,
 * A arrived twice and B never.)
 */
/* its state is a hold_state (three of its slots used) */
static void trio_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			 unsigned n)
{
	struct hold_state *s = state;

	(void)w;
	for (unsigned i = 0; i < n && s->n < 3; i++)
		s->held[s->n++] = jobs[i];
}

static void trio_poll(void *state, struct bp_worker *w)
{
	struct hold_state *s = state;
	struct fix *f = bp_worker_stage_ctx(w);

	if (s->n < 3 || atomic_load(&f->calls_done))
		return;
	struct bp_job *a_twice[2] = {s->held[0], s->held[0]};

	atomic_store(&f->rc[0], bp_worker_complete(w, a_twice, 2));
	atomic_store(&f->rc[1], bp_worker_complete(w, &s->held[0], 1));
	atomic_store(&f->rc[2], bp_worker_complete(w, &s->held[1], 2));
	atomic_store(&f->calls_done, 1);
}

static const struct bp_stage trio_stage = {.name = "trio",
					   .init = hold_init,
					   .process = trio_process,
					   .poll = trio_poll,
					   .fini = hold_fini};

static void repeat_run(bool ordered)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[3];
	struct bp_job *jp[3] = {&j[0].hdr, &j[1].hdr, &j[2].hdr};

	fix_init(&f);
	logs_reset();
	tjobs_init(j, 3);
	base_config(&c, &f, &trio_stage);
	c.ordered = ordered;
	make(&c, &f);
	assert_int_equal(bp_pipeline_submit(f.p, jp, 3, 0, -1), 3);
	assert_true(wait_until(&f.calls_done, 1, 10000));
	assert_int_equal(atomic_load(&f.rc[0]), 1);
	assert_int_equal(atomic_load(&f.rc[1]), 0);
	assert_int_equal(atomic_load(&f.rc[2]), 2);
	/* bounded: an ordered pipeline waiting for B's seq trips it */
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 10000 * MS), 0);
	assert_int_equal(sink_seen(&f), 3);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&j[i].delivered), 1);
	assert_conservation(&f);
	assert_true(logged("bp_worker_complete: 1 of 2 jobs refused: "
			   "completed already (the first: job seq 0); the "
			   "other 1 accepted"));
	assert_true(logged("bp_worker_complete: 1 of 1 jobs refused"));
	assert_false(strstr(logs.all, "missing"));
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

static void test_ordered_repeat_refused(void **unused)
{
	(void)unused;
	pt_watchdog_arm(60, "test_ordered_repeat_refused");
	repeat_run(true);
}

static void test_unordered_repeat_refused(void **unused)
{
	(void)unused;
	pt_watchdog_arm(60, "test_unordered_repeat_refused");
	repeat_run(false);
}

/* NULL and odd job pointers are refused whole; NULL workers are harmless. */
static void nulljob_process(void *state, struct bp_worker *w,
			    struct bp_job **jobs, unsigned n)
{
	struct fix *f = bp_worker_stage_ctx(w);
	struct bp_job *null_job = NULL;
	struct bp_job *odd = (struct bp_job *)((uintptr_t)jobs[0] | 1);

	(void)state;
	if (!atomic_load(&f->calls_done)) {
		atomic_store(&f->rc[0], bp_worker_complete(w, &null_job, 1));
		atomic_store(&f->rc[1], bp_worker_complete(w, &odd, 1));
		atomic_store(&f->rc[2], bp_worker_complete(w, NULL, 1));
		atomic_store(&f->rc[3], bp_worker_complete(w, NULL, 0));
		atomic_store(&f->calls_done, 1);
	}
	if (bp_worker_complete(w, jobs, n) != (int)n)
		pt_fail("good completion refused after bad ones");
}

static const struct bp_stage nulljob_stage = {.name = "nulljob",
					      .process = nulljob_process};

static void test_complete_bad_pointers(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[4];
	struct bp_job *jp[4];

	(void)unused;
	pt_watchdog_arm(60, "test_complete_bad_pointers");
	fix_init(&f);
	logs_reset();
	tjobs_init(j, 4);
	for (unsigned i = 0; i < 4; i++)
		jp[i] = &j[i].hdr;
	base_config(&c, &f, &nulljob_stage);
	make(&c, &f);
	assert_int_equal(bp_pipeline_submit(f.p, jp, 4, 0, -1), 4);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_conservation(&f);
	assert_int_equal(sink_seen(&f), 4);
	assert_int_equal(atomic_load(&f.calls_done), 1);
	assert_int_equal(atomic_load(&f.rc[0]), -EINVAL);
	assert_int_equal(atomic_load(&f.rc[1]), -EINVAL);
	assert_int_equal(atomic_load(&f.rc[2]), -EINVAL);
	assert_int_equal(atomic_load(&f.rc[3]), 0);
	assert_true(logged("a NULL or odd job pointer"));
	assert_true(logged("NULL jobs"));
	bp_pipeline_destroy(f.p);
	assert_int_equal(bp_worker_complete(NULL, jp, 1), -EINVAL);
	assert_int_equal(bp_worker_id(NULL), UINT_MAX);
	assert_null(bp_worker_stage_ctx(NULL));
	assert_int_equal(bp_worker_inflight(NULL), 0);
	assert_int_equal(pt_failures(), 0);
}

/* --------------------------------------------- 3. -EDEADLK from callbacks */

enum {
	CALL_DRAIN,
	CALL_DRAIN_TIMEOUT,
	CALL_ABORT,
	CALL_SET_BATCH,
	CALL_SET_WAIT,
	CALL_SET_CTX,
	CALL_SET_FLUSH,
	CALL_SUBMIT_NB,
	CALL_SUBMIT_FILL,
	CALL_SUBMIT_FULL,
	CALL_N
};

/*
 * From a callback of f->p: every call that would wait for the pipeline's
 * own threads. The ingress ring holds 4 jobs and nobody takes any while
 * this runs (one worker: this one, or it is held by this sink), so the
 * blocking submits fill it and then find it full.
 */
static void self_calls(struct fix *f)
{
	struct bp_wait_policy wp;
	struct bp_job *xs[16];

	for (unsigned i = 0; i < 16; i++)
		xs[i] = &f->extra[i].hdr;
	bp_wait_policy_init(&wp);
	atomic_store(&f->rc[CALL_DRAIN], bp_pipeline_drain(f->p));
	atomic_store(&f->rc[CALL_DRAIN_TIMEOUT],
		     bp_pipeline_drain_timeout(f->p, 1000 * MS));
	atomic_store(&f->rc[CALL_ABORT], bp_pipeline_abort(f->p));
	bp_pipeline_destroy(f->p); /* logged, nothing done */
	atomic_store(&f->rc[CALL_SET_BATCH],
		     bp_pipeline_set_max_batch(f->p, 1));
	atomic_store(&f->rc[CALL_SET_WAIT],
		     bp_pipeline_set_worker_wait(f->p, &wp));
	atomic_store(&f->rc[CALL_SET_CTX], bp_pipeline_set_stage_ctx(f->p, f));
	atomic_store(&f->rc[CALL_SET_FLUSH],
		     bp_pipeline_set_flush_deadline(f->p, 1000));
	atomic_store(&f->rc[CALL_SUBMIT_NB],
		     bp_pipeline_submit(f->p, xs, 1, BP_SUBMIT_NONBLOCK, 0));
	/* 15 more than fit: the call stops where it would have to wait */
	atomic_store(&f->rc[CALL_SUBMIT_FILL],
		     bp_pipeline_submit(f->p, xs + 1, 15, 0, -1));
	atomic_store(&f->rc[CALL_SUBMIT_FULL],
		     bp_pipeline_submit(f->p, xs + 15, 1, 0, -1));
	atomic_store(&f->calls_done, 1);
}

static void assert_self_calls(struct fix *f)
{
	assert_int_equal(atomic_load(&f->calls_done), 1);
	assert_int_equal(atomic_load(&f->rc[CALL_DRAIN]), -EDEADLK);
	assert_int_equal(atomic_load(&f->rc[CALL_DRAIN_TIMEOUT]), -EDEADLK);
	assert_int_equal(atomic_load(&f->rc[CALL_ABORT]), -EDEADLK);
	assert_int_equal(atomic_load(&f->rc[CALL_SET_BATCH]), -EDEADLK);
	assert_int_equal(atomic_load(&f->rc[CALL_SET_WAIT]), -EDEADLK);
	assert_int_equal(atomic_load(&f->rc[CALL_SET_CTX]), -EDEADLK);
	assert_int_equal(atomic_load(&f->rc[CALL_SET_FLUSH]), 0);
	assert_int_equal(atomic_load(&f->rc[CALL_SUBMIT_NB]), 1);
	/* 3 more fit in the ring of 4 */
	assert_int_equal(atomic_load(&f->rc[CALL_SUBMIT_FILL]), 3);
	assert_int_equal(atomic_load(&f->rc[CALL_SUBMIT_FULL]), -EDEADLK);
	assert_true(logged("bp_pipeline_drain: called from a stage or sink "
			   "callback of this pipeline"));
	assert_true(logged("bp_pipeline_abort: called from a stage or sink"));
	assert_true(logged("bp_pipeline_destroy: called from a stage or sink "
			   "callback of this pipeline: ignored"));
	assert_true(logged("bp_pipeline_set_max_batch: called from a stage"));
	assert_true(logged("bp_pipeline_submit: a blocking submit from a "
			   "stage or sink callback"));
}

/* The first job makes the calls from the worker; all jobs complete. */
static void selfcall_process(void *state, struct bp_worker *w,
			     struct bp_job **jobs, unsigned n)
{
	struct fix *f = bp_worker_stage_ctx(w);

	(void)state;
	if (!atomic_exchange(&f->processed, 1))
		self_calls(f);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage selfcall_stage = {.name = "selfcall",
					       .process = selfcall_process};

static void test_deadlk_from_stage(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[1];

	(void)unused;
	pt_watchdog_arm(60, "test_deadlk_from_stage");
	fix_init(&f);
	logs_reset();
	tjobs_init(j, 1);
	base_config(&c, &f, &selfcall_stage);
	c.ingress_capacity = 4;
	c.max_batch = 1;
	make(&c, &f);
	submit_all(f.p, j, 1);
	assert_true(wait_until(&f.calls_done, 1, 20000));
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_self_calls(&f);
	assert_int_equal(sink_seen(&f), 5); /* the job and 4 extra */
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/*
 * The sink makes the calls on its first batch, once the worker is held
 * inside process (on a gate main opens afterwards): nobody drains ingress.
 */
static void gated_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	struct fix *f = bp_worker_stage_ctx(w);
	int64_t end = pt_now_ns() + 20000 * MS;

	(void)state;
	if (atomic_fetch_add(&f->processed, 1) == 1)
		while (!atomic_load(&f->gate) && pt_now_ns() < end)
			pt_sleep_ns(MS);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage gated_stage = {.name = "gated",
					    .process = gated_process};

static void sink_selfcall(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct fix *f = ctx;

	sink_count_jobs(f, jobs, n);
	if (atomic_load(&f->calls_done))
		return;
	if (!wait_until(&f->processed, 2, 20000))
		pt_fail("the worker did not reach the gate");
	self_calls(f);
}

static void test_deadlk_from_sink(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[2];

	(void)unused;
	pt_watchdog_arm(60, "test_deadlk_from_sink");
	fix_init(&f);
	logs_reset();
	tjobs_init(j, 2);
	base_config(&c, &f, &gated_stage);
	c.sink = sink_selfcall;
	c.ingress_capacity = 4;
	c.max_batch = 1;
	c.max_inflight = 1;
	make(&c, &f);
	submit_all(f.p, j, 1);	   /* completed: the sink's first batch */
	submit_all(f.p, j + 1, 1); /* holds the worker until the gate opens */
	assert_true(wait_until(&f.calls_done, 1, 30000));
	atomic_store(&f.gate, 1);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_self_calls(&f);
	assert_int_equal(sink_seen(&f), 6); /* the two and 4 extra */
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/* A stage init that calls start or drain on the pipeline starting it. */
static int selfstart_init(struct bp_worker *w, void **state)
{
	struct fix *f = bp_worker_stage_ctx(w);

	*state = NULL;
	atomic_store(&f->rc[0], bp_pipeline_start(f->p));
	atomic_store(&f->rc[1], bp_pipeline_drain(f->p));
	return 0;
}

static void sync_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			 unsigned n)
{
	(void)state;
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage selfstart_stage = {
	.name = "selfstart", .init = selfstart_init, .process = sync_process};

static void test_start_misuse(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[8];

	(void)unused;
	pt_watchdog_arm(60, "test_start_misuse");
	fix_init(&f);
	logs_reset();
	tjobs_init(j, 8);
	base_config(&c, &f, &selfstart_stage);
	c.workers = 2;
	assert_int_equal(bp_pipeline_create(&c, &f.p), 0);
	assert_int_equal(bp_pipeline_start(f.p), 0);
	assert_int_equal(atomic_load(&f.rc[0]), -EINVAL);
	assert_int_equal(atomic_load(&f.rc[1]), -EDEADLK);
	assert_int_equal(bp_pipeline_start(f.p), -EINVAL);
	assert_true(logged("bp_pipeline_start: called twice"));
	submit_all(f.p, j, 8);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_int_equal(bp_pipeline_start(f.p), -EINVAL);
	assert_int_equal(sink_seen(&f), 8);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(bp_pipeline_start(NULL), -EINVAL);
	assert_int_equal(pt_failures(), 0);
}

/* ------------------------------------------- 4. the stage table is copied */

static void stale_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	struct fix *f = bp_worker_stage_ctx(w);

	(void)state;
	atomic_fetch_add(&f->bad_calls, 1);
	bp_worker_complete(w, jobs, n);
}

static void counting_process(void *state, struct bp_worker *w,
			     struct bp_job **jobs, unsigned n)
{
	struct fix *f = bp_worker_stage_ctx(w);

	(void)state;
	atomic_fetch_add(&f->processed, 1);
	bp_worker_complete(w, jobs, n);
}

/* The README's pattern: the table is a compound literal in this frame. */
static __attribute__((noinline)) void create_in_helper(struct fix *f)
{
	struct bp_pipeline_config c;

	base_config(&c, f, NULL);
	c.stage = &(struct bp_stage){.name = "on-the-stack",
				     .process = counting_process};
	assert_int_equal(bp_pipeline_create(&c, &f->p), 0);
}

/* Overwrite the stack where create_in_helper's frame was. */
static __attribute__((noinline)) void scribble_stack(void)
{
	volatile unsigned char junk[8192];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0;
}

static void test_stage_table_on_stack(void **unused)
{
	struct fix f;
	struct tjob j[8];
	char buf[512];

	(void)unused;
	pt_watchdog_arm(60, "test_stage_table_on_stack");
	fix_init(&f);
	tjobs_init(j, 8);
	create_in_helper(&f);
	scribble_stack();
	assert_int_equal(bp_pipeline_start(f.p), 0);
	submit_all(f.p, j, 8);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_int_equal(sink_seen(&f), 8);
	assert_true(atomic_load(&f.processed) > 0);
	assert_true(bp_pipeline_report_json(f.p, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\"name\":\"on-the-stack\""));
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/* A table on the heap, overwritten after create: the copy is used. */
static void test_stage_table_overwritten(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[8];
	struct bp_stage *st = malloc(sizeof(*st));
	char buf[512];

	(void)unused;
	pt_watchdog_arm(60, "test_stage_table_overwritten");
	assert_non_null(st);
	fix_init(&f);
	tjobs_init(j, 8);
	*st = (struct bp_stage){.name = "first", .process = counting_process};
	base_config(&c, &f, st);
	assert_int_equal(bp_pipeline_create(&c, &f.p), 0);
	*st = (struct bp_stage){.name = "stale", .process = stale_process};
	assert_int_equal(bp_pipeline_start(f.p), 0);
	submit_all(f.p, j, 8);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_int_equal(atomic_load(&f.bad_calls), 0);
	assert_true(atomic_load(&f.processed) > 0);
	assert_true(bp_pipeline_report_json(f.p, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, "\"name\":\"first\""));
	free(st);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

/* Other calls' bad input: -EINVAL or nothing, never a crash. */
static void test_other_bad_input(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[1];
	struct bp_job *jp = &j[0].hdr;

	(void)unused;
	pt_watchdog_arm(60, "test_other_bad_input");
	fix_init(&f);
	tjobs_init(j, 1);
	bp_pipeline_config_init(NULL);
	base_config(&c, &f, &hold_stage);
	make(&c, &f);
	/* a count that cannot come back as an int; never read past jobs */
	assert_int_equal(bp_pipeline_submit(f.p, &jp, 0x80000000u,
					    BP_SUBMIT_NONBLOCK, 0),
			 -EINVAL);
	assert_int_equal(bp_pipeline_submit(f.p, &jp, 1, 0, -1), 1);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	assert_conservation(&f);
	bp_pipeline_destroy(f.p);
	assert_int_equal(bp_pipeline_drain(NULL), -EINVAL);
	assert_int_equal(bp_pipeline_abort(NULL), -EINVAL);
	bp_pipeline_destroy(NULL);
	assert_int_equal(pt_failures(), 0);
}

/* ----------------------------------------- 5. live changes after a stop */

static void assert_live_changes(struct bp_pipeline *p, int want)
{
	struct bp_wait_policy wp;

	bp_wait_policy_init(&wp);
	assert_int_equal(bp_pipeline_set_max_batch(p, 4), want);
	assert_int_equal(bp_pipeline_set_flush_deadline(p, 1000), want);
	assert_int_equal(bp_pipeline_set_worker_wait(p, &wp), want);
	assert_int_equal(bp_pipeline_set_stage_ctx(p, NULL), want);
}

static void test_live_after_stop(void **unused)
{
	struct bp_pipeline_config c;
	struct fix f;
	struct tjob j[4];

	(void)unused;
	pt_watchdog_arm(60, "test_live_after_stop");
	for (int abort = 0; abort < 2; abort++) {
		fix_init(&f);
		tjobs_init(j, 4);
		base_config(&c, &f, &hold_stage);
		assert_int_equal(bp_pipeline_create(&c, &f.p), 0);
		assert_live_changes(f.p, 0); /* before start: allowed */
		assert_int_equal(bp_pipeline_set_stage_ctx(f.p, &f), 0);
		assert_int_equal(bp_pipeline_start(f.p), 0);
		submit_all(f.p, j, 4);
		if (abort)
			assert_int_equal(bp_pipeline_abort(f.p), 0);
		else
			assert_int_equal(bp_pipeline_drain(f.p), 0);
		assert_live_changes(f.p, -EPIPE);
		/* out-of-range values are still -EINVAL */
		assert_int_equal(bp_pipeline_set_max_batch(f.p, 0), -EINVAL);
		assert_conservation(&f);
		bp_pipeline_destroy(f.p);
	}
	/* a stop that has begun but not finished: -EPIPE already */
	start_holding(&f, &hold_stage, j, 4, 1);
	assert_int_equal(bp_pipeline_drain_timeout(f.p, 10 * MS), -ETIMEDOUT);
	assert_live_changes(f.p, -EPIPE);
	atomic_store(&f.release, 1);
	assert_int_equal(bp_pipeline_drain(f.p), 0);
	bp_pipeline_destroy(f.p);
	assert_int_equal(pt_failures(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drain_timeout_reports),
		cmocka_unit_test(test_drain_timeout_then_abort),
		cmocka_unit_test(test_destroy_after_timeout_aborts),
		cmocka_unit_test(test_concurrent_stoppers),
		cmocka_unit_test(test_destroy_waits_for_stoppers),
		cmocka_unit_test(test_abort_rescues_drain),
		cmocka_unit_test(test_timeout_without_cancel),
		cmocka_unit_test(test_drain_timeout_ok),
		cmocka_unit_test(test_complete_twice_refused),
		cmocka_unit_test(test_ordered_repeat_refused),
		cmocka_unit_test(test_unordered_repeat_refused),
		cmocka_unit_test(test_complete_bad_pointers),
		cmocka_unit_test(test_deadlk_from_stage),
		cmocka_unit_test(test_deadlk_from_sink),
		cmocka_unit_test(test_start_misuse),
		cmocka_unit_test(test_stage_table_on_stack),
		cmocka_unit_test(test_stage_table_overwritten),
		cmocka_unit_test(test_other_bad_input),
		cmocka_unit_test(test_live_after_stop),
	};

	/* BP_ONLY=name (a glob) runs only the matching tests */
	if (getenv("BP_ONLY"))
		cmocka_set_test_filter(getenv("BP_ONLY"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
