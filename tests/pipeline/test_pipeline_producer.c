/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_producer - producer handles: the flush deadline is a real
 * max age (staged jobs reach the pipeline without another call), drain and
 * abort take what is staged, bp_producer_submit agrees with
 * bp_pipeline_submit before start and after drain, and each handle's order
 * holds while its owner and the flusher race to submit.
 *
 *   test_pipeline_producer          the unit tests (cmocka)
 *   test_pipeline_producer stress   the race: several handles, tiny
 *                                   deadlines, ordered and unordered, idle
 *                                   gaps, drains that overlap submits
 *
 * Every job is numbered by its handle; the sink checks that each handle's
 * jobs arrive in order (ordered pipelines) and after drain every job's seq
 * is checked to grow with its number (the order it entered the pipeline),
 * and that every job accepted reached the sink exactly once. Time bounds
 * are generous (a job that is never delivered is what they catch).
 * BP_STRESS_SCALE multiplies the stress rounds, BP_SEED replays one.
 */
#include <errno.h>
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

PT_DEFINE_GLOBALS;

#define MAX_HANDLES 8

struct pjob {
	struct bp_job hdr;
	unsigned handle, num;
	atomic_uint delivered;
};

struct sinkc {
	atomic_uint count, ok, cancelled;
	atomic_uint per_handle[MAX_HANDLES];
	bool ordered;
	unsigned next_num[MAX_HANDLES]; /* sink thread only */
};

struct logc {
	atomic_uint count;
	char last[256]; /* written by the thread that logs, read after */
};

static void sink_fn(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct sinkc *s = ctx;

	for (unsigned i = 0; i < n; i++) {
		struct pjob *j = (struct pjob *)jobs[i];

		if (atomic_fetch_add(&j->delivered, 1) != 0)
			pt_fail("handle %u job %u delivered twice", j->handle,
				j->num);
		if (s->ordered && j->handle < MAX_HANDLES) {
			if (j->num != s->next_num[j->handle])
				pt_fail("ordered: handle %u job %u arrived, "
					"expected %u",
					j->handle, j->num,
					s->next_num[j->handle]);
			s->next_num[j->handle] = j->num + 1;
		}
		if (j->hdr.status == BP_JOB_OK)
			atomic_fetch_add(&s->ok, 1);
		else if (j->hdr.status == BP_JOB_CANCELLED)
			atomic_fetch_add(&s->cancelled, 1);
		if (j->handle < MAX_HANDLES)
			atomic_fetch_add(&s->per_handle[j->handle], 1);
	}
	atomic_fetch_add(&s->count, n);
}

static void log_fn(void *ctx, enum bp_log_level lvl, const char *msg)
{
	struct logc *l = ctx;

	(void)lvl;
	snprintf(l->last, sizeof(l->last), "%s", msg);
	atomic_fetch_add(&l->count, 1);
}

static void process(void *state, struct bp_worker *w, struct bp_job **jobs,
		    unsigned n)
{
	(void)state;
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage stage = {.name = "pass", .process = process};

static struct logc logs;

static struct bp_pipeline *make(struct sinkc *s, unsigned workers,
				unsigned batch, uint64_t deadline_ns,
				bool ordered, bool start)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p = NULL;

	memset(s, 0, sizeof(*s));
	s->ordered = ordered;
	bp_pipeline_config_init(&c);
	c.stage = &stage;
	c.sink = sink_fn;
	c.sink_ctx = s;
	c.log = log_fn;
	c.log_ctx = &logs;
	c.workers = workers;
	c.max_batch = batch;
	c.max_inflight = 256;
	c.ordered = ordered;
	c.flush_deadline_ns = deadline_ns;
	if (bp_pipeline_create(&c, &p) != 0)
		return NULL;
	if (start && bp_pipeline_start(p) != 0) {
		bp_pipeline_destroy(p);
		return NULL;
	}
	return p;
}

static void jobs_init(struct pjob *j, unsigned n, unsigned handle)
{
	for (unsigned i = 0; i < n; i++) {
		memset(&j[i], 0, sizeof(j[i]));
		j[i].handle = handle;
		j[i].num = i;
		atomic_init(&j[i].delivered, 0);
	}
}

static bool wait_count(atomic_uint *c, unsigned n, int64_t ms)
{
	int64_t end = pt_now_ns() + ms * 1000000;

	while (atomic_load(c) < n) {
		if (pt_now_ns() > end)
			return false;
		pt_sleep_ns(100000);
	}
	return true;
}

/* submitted == delivered, from the pipeline's own counters and the sink. */
static bool conserved(struct bp_pipeline *p, struct sinkc *s)
{
	struct bp_pipeline_stats st;

	if (bp_pipeline_get_stats(p, &st) != 0)
		return false;
	if (st.submitted != st.ok + st.failed + st.cancelled ||
	    st.submitted != atomic_load(&s->count)) {
		fprintf(stderr,
			"submitted %llu, ok %llu, failed %llu, cancelled %llu, "
			"sink %u\n",
			(unsigned long long)st.submitted,
			(unsigned long long)st.ok,
			(unsigned long long)st.failed,
			(unsigned long long)st.cancelled,
			atomic_load(&s->count));
		return false;
	}
	return true;
}

/* ---------------------------------------------------------------- unit */

/*
 * 10 jobs staged with a 20 ms deadline, then the producer goes idle: they
 * reach the sink by themselves (before, they waited for a next call that
 * never came).
 */
static void test_idle_handle_flushed(void **unused)
{
	struct sinkc s;
	struct bp_pipeline *p = make(&s, 2, 64, 20 * 1000000ull, false, true);
	struct bp_producer *pr = NULL;
	struct pjob j[10];
	int64_t t0;

	(void)unused;
	assert_non_null(p);
	jobs_init(j, 10, 0);
	assert_int_equal(bp_producer_create(p, &pr), 0);
	t0 = pt_now_ns();
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(bp_producer_submit(pr, &j[i].hdr), 0);
	if (!wait_count(&s.count, 10, 1000))
		fail_msg("%u of 10 staged jobs delivered %lld ms after the "
			 "first was staged (deadline 20 ms)",
			 atomic_load(&s.count),
			 (long long)((pt_now_ns() - t0) / 1000000));
	assert_int_equal(bp_producer_staged(pr), 0);
	for (unsigned i = 0; i < 10; i++)
		assert_true(j[i].hdr.seq == i); /* submitted in staging order */
	assert_int_equal(bp_producer_destroy(pr), 0);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_true(conserved(p, &s));
	bp_pipeline_destroy(p);
	assert_int_equal(pt_failures(), 0);
}

/* Before start: -EINVAL like bp_pipeline_submit; after drain: -EPIPE. */
static void test_submit_lifecycle(void **unused)
{
	struct sinkc s;
	struct bp_pipeline *p =
		make(&s, 1, 8, 3600ull * 1000000000, false, false);
	struct bp_producer *pr = NULL, *late = NULL;
	struct bp_job *raw;
	struct pjob j[4];

	(void)unused;
	assert_non_null(p);
	jobs_init(j, 4, 0);
	raw = &j[0].hdr;
	assert_int_equal(bp_producer_create(p, &pr), 0); /* before start: ok */
	assert_int_equal(bp_pipeline_submit(p, &raw, 1, 0, -1), -EINVAL);
	assert_int_equal(bp_producer_submit(pr, &j[0].hdr), -EINVAL);
	assert_non_null(strstr(logs.last, "not started"));
	assert_int_equal(bp_producer_staged(pr), 0);
	assert_int_equal(bp_producer_flush(pr), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(bp_producer_submit(pr, &j[0].hdr), 0);
	assert_int_equal(bp_producer_submit(pr, &j[1].hdr), 0);
	assert_int_equal(bp_producer_staged(pr), 2);
	assert_int_equal(bp_pipeline_drain(p), 0);
	/* drain took the staged jobs */
	assert_int_equal(atomic_load(&s.count), 2);
	assert_int_equal(bp_producer_staged(pr), 0);
	raw = &j[2].hdr;
	assert_int_equal(bp_pipeline_submit(p, &raw, 1, 0, -1), -EPIPE);
	assert_int_equal(bp_producer_submit(pr, &j[2].hdr), -EPIPE);
	assert_int_equal(bp_producer_staged(pr), 0);
	assert_int_equal(bp_producer_flush(pr), 0);
	/* a handle created now is closed from the start */
	assert_int_equal(bp_producer_create(p, &late), 0);
	assert_int_equal(bp_producer_submit(late, &j[3].hdr), -EPIPE);
	assert_int_equal(bp_producer_destroy(late), 0);
	assert_int_equal(bp_producer_destroy(pr), 0);
	assert_int_equal(atomic_load(&j[2].delivered), 0);
	assert_true(conserved(p, &s));
	bp_pipeline_destroy(p);
	assert_int_equal(pt_failures(), 0);
}

/* A pipeline drained without ever starting: handles refuse with -EPIPE. */
static void test_never_started(void **unused)
{
	struct sinkc s;
	struct bp_pipeline *p = make(&s, 1, 8, 1000, false, false);
	struct bp_producer *pr = NULL;
	struct pjob j[1];

	(void)unused;
	assert_non_null(p);
	jobs_init(j, 1, 0);
	assert_int_equal(bp_producer_create(p, &pr), 0);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(bp_producer_submit(pr, &j[0].hdr), -EPIPE);
	assert_int_equal(bp_producer_destroy(pr), 0);
	bp_pipeline_destroy(p);
	assert_int_equal(atomic_load(&s.count), 0);
}

/* Drain submits what every handle staged: each job reaches the sink once. */
static void test_drain_takes_staged(void **unused)
{
	struct sinkc s;
	struct bp_pipeline *p =
		make(&s, 2, 64, 3600ull * 1000000000, true, true);
	struct bp_producer *pr[2] = {NULL, NULL};
	struct pjob a[5], b[3];

	(void)unused;
	assert_non_null(p);
	jobs_init(a, 5, 0);
	jobs_init(b, 3, 1);
	assert_int_equal(bp_producer_create(p, &pr[0]), 0);
	assert_int_equal(bp_producer_create(p, &pr[1]), 0);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(bp_producer_submit(pr[0], &a[i].hdr), 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(bp_producer_submit(pr[1], &b[i].hdr), 0);
	assert_int_equal(atomic_load(&s.count), 0); /* far deadline */
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&s.count), 8);
	assert_int_equal(atomic_load(&s.ok), 8);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(atomic_load(&a[i].delivered), 1);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(atomic_load(&b[i].delivered), 1);
	assert_int_equal(bp_producer_staged(pr[0]), 0);
	assert_int_equal(bp_producer_destroy(pr[0]), 0);
	assert_int_equal(bp_producer_destroy(pr[1]), 0);
	assert_true(conserved(p, &s));
	bp_pipeline_destroy(p);
	assert_int_equal(pt_failures(), 0);
}

/* Abort: staged jobs are submitted, then cancelled like any other job. */
static void test_abort_cancels_staged(void **unused)
{
	struct sinkc s;
	struct bp_pipeline *p =
		make(&s, 2, 64, 3600ull * 1000000000, false, true);
	struct bp_producer *pr = NULL;
	struct pjob j[6];

	(void)unused;
	assert_non_null(p);
	jobs_init(j, 6, 0);
	assert_int_equal(bp_producer_create(p, &pr), 0);
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(bp_producer_submit(pr, &j[i].hdr), 0);
	assert_int_equal(bp_pipeline_abort(p), 0);
	assert_int_equal(atomic_load(&s.count), 6);
	assert_int_equal(atomic_load(&s.cancelled), 6);
	assert_int_equal(bp_producer_staged(pr), 0);
	assert_int_equal(bp_producer_submit(pr, &j[0].hdr), -EPIPE);
	assert_int_equal(bp_producer_destroy(pr), 0);
	assert_true(conserved(p, &s));
	bp_pipeline_destroy(p);
	assert_int_equal(pt_failures(), 0);
}

/*
 * A handle outliving its pipeline: destroy logs it and closes the handle,
 * whose calls then fail cleanly and whose destroy still frees it (ASAN
 * checks nothing freed is touched).
 */
static void test_handle_outlives_pipeline(void **unused)
{
	struct sinkc s;
	struct bp_pipeline *p =
		make(&s, 1, 64, 3600ull * 1000000000, false, true);
	struct bp_producer *pr = NULL;
	struct pjob j[2];
	unsigned logs0;

	(void)unused;
	assert_non_null(p);
	jobs_init(j, 2, 0);
	assert_int_equal(bp_producer_create(p, &pr), 0);
	assert_int_equal(bp_producer_submit(pr, &j[0].hdr), 0);
	logs0 = atomic_load(&logs.count);
	bp_pipeline_destroy(p); /* drains: the staged job is delivered */
	assert_int_equal(atomic_load(&s.count), 1);
	assert_true(atomic_load(&logs.count) > logs0);
	assert_non_null(strstr(logs.last, "producer handle"));
	assert_int_equal(bp_producer_submit(pr, &j[1].hdr), -EPIPE);
	assert_int_equal(bp_producer_staged(pr), 0);
	assert_int_equal(bp_producer_flush(pr), 0);
	assert_int_equal(bp_producer_destroy(pr), 0);
	assert_int_equal(pt_failures(), 0);
}

/* ------------------------------------------------- producers that race */

struct prod {
	struct bp_pipeline *p;
	struct sinkc *s;
	unsigned id, n, seed;
	bool idle_checks; /* pause and wait for delivery without a call */
	struct pjob *jobs;
	unsigned accepted; /* jobs bp_producer_submit returned 0 for */
	int last_rc;
};

/*
 * A drain with a timeout while a handle's own flush is blocked in a submit
 * (ingress full behind a stage that holds its jobs): the drain returns
 * -ETIMEDOUT at its deadline instead of waiting for that submit (it used
 * to wait for the claim without a limit), and once the stage lets go
 * everything is accounted for: delivered, or handed back to the producer.
 */
static atomic_bool stuck_release;

static void stuck_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	(void)state;
	while (!atomic_load(&stuck_release))
		pt_sleep_ns(1000000);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage stuck_stage = {.name = "stuck",
					    .process = stuck_process};

/*
 * One worker whose stage holds every batch (until stuck_release), ingress
 * 4, batches and inflight 4: 8 jobs fill the pipeline.
 */
static void stuck_config(struct bp_pipeline_config *c, struct sinkc *s,
			 uint64_t deadline_ns)
{
	bp_pipeline_config_init(c);
	c->stage = &stuck_stage;
	c->sink = sink_fn;
	c->sink_ctx = s;
	c->log = log_fn;
	c->log_ctx = &logs;
	c->workers = 1;
	c->ingress_capacity = 4;
	c->max_batch = 4;
	c->max_inflight = 4;
	c->flush_deadline_ns = deadline_ns;
}

struct stuck_prod {
	struct bp_producer *pr;
	struct pjob *jobs;
	unsigned n, accepted, refused;
	int destroy_rc;
	unsigned staged_at_destroy;
};

static void *stuck_producer(void *arg)
{
	struct stuck_prod *sp = arg;

	for (unsigned i = 0; i < sp->n; i++) {
		int rc = bp_producer_submit(sp->pr, &sp->jobs[i].hdr);

		if (rc == 0)
			sp->accepted++;
		else
			sp->refused++; /* the caller still owns this job */
	}
	sp->staged_at_destroy = bp_producer_staged(sp->pr);
	sp->destroy_rc = bp_producer_destroy(sp->pr);
	return NULL;
}

static void test_drain_timeout_blocked_handle(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p = NULL;
	struct bp_pipeline_stats st;
	struct stuck_prod sp = {.n = 64};
	struct sinkc s;
	pthread_t t;
	int64_t t0;
	int rc;

	(void)unused;
	memset(&s, 0, sizeof(s));
	atomic_store(&stuck_release, false);
	sp.jobs = calloc(sp.n, sizeof(*sp.jobs));
	assert_non_null(sp.jobs);
	jobs_init(sp.jobs, sp.n, 0);
	stuck_config(&c, &s, 1000000000); /* the owner flushes at 4 jobs */
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(bp_producer_create(p, &sp.pr), 0);
	assert_int_equal(pthread_create(&t, NULL, stuck_producer, &sp), 0);
	/* the worker holds 4 jobs, ingress holds 4: the owner's flush blocks */
	pt_sleep_ns(200000000);
	t0 = pt_now_ns();
	rc = bp_pipeline_drain_timeout(p, 300000000);
	assert_int_equal(rc, -ETIMEDOUT);
	/* generous: it waited without a limit before */
	assert_true(pt_now_ns() - t0 < 5000000000LL);
	atomic_store(&stuck_release, true);
	assert_int_equal(bp_pipeline_drain(p), 0);
	pthread_join(t, NULL); /* its blocked submit got -EPIPE or room */
	assert_int_equal(bp_pipeline_get_stats(p, &st), 0);
	assert_true(conserved(p, &s));
	/* every job: delivered, refused by a call, or left staged at destroy */
	assert_int_equal(sp.accepted + sp.refused, sp.n);
	assert_int_equal(st.submitted + sp.refused + sp.staged_at_destroy,
			 sp.n);
	if (sp.staged_at_destroy)
		assert_true(sp.destroy_rc < 0);
	bp_pipeline_destroy(p);
	free(sp.jobs);
}

/*
 * The owner flushes after drain has closed its handle but before drain
 * could submit the handle's jobs (ingress is full): flush returns 0, the
 * jobs are drain's to submit, and bp_producer_staged says 0 as well (it
 * said 3 while drain waited for room: a stress run under TSAN caught the
 * owner's "staged after a flush that returned 0").
 */
static void *plain_drainer(void *arg)
{
	return (void *)(intptr_t)bp_pipeline_drain(arg);
}

static void test_flush_while_drain_holds(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p = NULL;
	struct bp_producer *pr = NULL;
	struct pjob j[11];
	struct bp_job *ptrs[8];
	struct sinkc s;
	pthread_t t;
	void *drc;
	int64_t end;

	(void)unused;
	pt_watchdog_arm(60, "flush while drain holds the handle's jobs");
	memset(&s, 0, sizeof(s));
	atomic_store(&stuck_release, false);
	jobs_init(j, 11, 0);
	/* the flusher stays out: its deadline never comes */
	stuck_config(&c, &s, UINT64_MAX);
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(bp_producer_create(p, &pr), 0);
	/* the worker holds 4 (its stage is stuck), ingress holds 4 */
	for (unsigned i = 0; i < 8; i++)
		ptrs[i] = &j[i].hdr;
	assert_int_equal(bp_pipeline_submit(p, ptrs, 4, 0, -1), 4);
	end = pt_now_ns() + 5000000000LL;
	for (unsigned more = 0; more < 4;) {
		int rc = bp_pipeline_submit(p, ptrs + 4 + more, 4 - more,
					    BP_SUBMIT_NONBLOCK, 0);

		if (rc > 0) {
			more += (unsigned)rc;
			continue;
		}
		assert_int_equal(rc, -EAGAIN); /* until the worker takes 4 */
		assert_true(pt_now_ns() < end);
		pt_sleep_ns(1000000);
	}
	for (unsigned i = 8; i < 11; i++)
		assert_int_equal(bp_producer_submit(pr, &j[i].hdr), 0);
	assert_int_equal(bp_producer_staged(pr), 3);

	assert_int_equal(pthread_create(&t, NULL, plain_drainer, p), 0);
	/* drain closes the handle, takes its 3 jobs, then waits for room */
	end = pt_now_ns() + 5000000000LL;
	while (bp_producer_staged(pr) != 0 && pt_now_ns() < end)
		pt_sleep_ns(1000000);
	assert_int_equal(bp_producer_staged(pr), 0);
	assert_int_equal(bp_producer_flush(pr), 0); /* drain's to submit */
	assert_int_equal(bp_producer_staged(pr), 0);
	assert_int_equal(atomic_load(&s.count), 0); /* all still held */

	atomic_store(&stuck_release, true);
	assert_int_equal(pthread_join(t, &drc), 0);
	assert_int_equal((int)(intptr_t)drc, 0);
	assert_int_equal(atomic_load(&s.count), 11);
	for (unsigned i = 0; i < 11; i++)
		assert_int_equal(atomic_load(&j[i].delivered), 1);
	assert_true(conserved(p, &s));
	assert_int_equal(bp_producer_destroy(pr), 0);
	bp_pipeline_destroy(p);
	pt_watchdog_disarm();
}

/*
 * The owner destroys its handle while a drain_timeout that closed it waits
 * for room to submit its jobs, and the drain then gives up at its deadline:
 * destroy waits for that and returns -EPIPE, so the jobs are the owner's
 * again, not lost. (Destroy returned 0 at once, "the drain submits them",
 * and the drain freed the handle with its 3 accepted jobs still staged:
 * never delivered, and nothing but the timed-out drain said so.)
 */
static struct bp_pipeline *dd_p;

static void *timed_drainer(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)bp_pipeline_drain_timeout(dd_p, 300000000);
}

static void test_destroy_during_timed_drain(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_producer *pr = NULL;
	struct pjob j[11];
	struct bp_job *ptrs[8];
	struct sinkc s;
	pthread_t t;
	void *drc;
	int64_t end;

	(void)unused;
	pt_watchdog_arm(60, "destroy while a timed drain holds the jobs");
	memset(&s, 0, sizeof(s));
	atomic_store(&stuck_release, false);
	jobs_init(j, 11, 0);
	stuck_config(&c, &s, UINT64_MAX);
	assert_int_equal(bp_pipeline_create(&c, &dd_p), 0);
	assert_int_equal(bp_pipeline_start(dd_p), 0);
	assert_int_equal(bp_producer_create(dd_p, &pr), 0);
	/* the worker holds 4 (its stage is stuck), ingress holds 4 */
	for (unsigned i = 0; i < 8; i++)
		ptrs[i] = &j[i].hdr;
	assert_int_equal(bp_pipeline_submit(dd_p, ptrs, 4, 0, -1), 4);
	end = pt_now_ns() + 5000000000LL;
	for (unsigned more = 0; more < 4;) {
		int rc = bp_pipeline_submit(dd_p, ptrs + 4 + more, 4 - more,
					    BP_SUBMIT_NONBLOCK, 0);

		if (rc > 0)
			more += (unsigned)rc;
		else
			pt_sleep_ns(1000000);
		assert_true(pt_now_ns() < end);
	}
	for (unsigned i = 8; i < 11; i++)
		assert_int_equal(bp_producer_submit(pr, &j[i].hdr), 0);
	assert_int_equal(pthread_create(&t, NULL, timed_drainer, NULL), 0);
	/* drain closes the handle, takes its 3 jobs, waits for room */
	while (bp_producer_staged(pr) != 0 && pt_now_ns() < end)
		pt_sleep_ns(1000000);
	assert_int_equal(bp_producer_destroy(pr), -EPIPE);
	assert_int_equal(pthread_join(t, &drc), 0);
	assert_int_equal((int)(intptr_t)drc, -ETIMEDOUT);
	atomic_store(&stuck_release, true);
	assert_int_equal(bp_pipeline_drain(dd_p), 0);
	/* 8 delivered; the 3 staged ones handed back by destroy's -EPIPE */
	assert_int_equal(atomic_load(&s.count), 8);
	for (unsigned i = 8; i < 11; i++)
		assert_int_equal(atomic_load(&j[i].delivered), 0);
	assert_true(conserved(dd_p, &s));
	bp_pipeline_destroy(dd_p);
	pt_watchdog_disarm();
}

/*
 * An owner submitting while bp_pipeline_start opens its handle: calls
 * before the opening get -EINVAL (not started), every later one is taken;
 * none gets -EPIPE from a running pipeline. (An owner taking a job back
 * before start used to end its claim by storing "not started" over the
 * opening, and the handle refused every job for good.)
 */
struct start_race {
	struct bp_producer *pr;
	struct pjob jobs[32];
	atomic_bool go;
	int bad_rc;
	unsigned taken;
};

static void *start_race_owner(void *arg)
{
	struct start_race *r = arg;
	unsigned i = 0;

	while (!atomic_load(&r->go))
		;
	while (i < 32) {
		int rc = bp_producer_submit(r->pr, &r->jobs[i].hdr);

		if (rc == 0) {
			r->taken++;
			i++;
		} else if (rc != -EINVAL) {
			r->bad_rc = rc;
			return NULL;
		}
	}
	return NULL;
}

static void test_start_races_owner(void **unused)
{
	unsigned iters = BP_TSAN ? 50 : 200;

	(void)unused;
	for (unsigned it = 0; it < iters; it++) {
		struct start_race r = {.bad_rc = 0};
		struct sinkc s;
		struct bp_pipeline *p = make(&s, 1, 8, 1000000, false, false);
		pthread_t t;

		assert_non_null(p);
		jobs_init(r.jobs, 32, 0);
		assert_int_equal(bp_producer_create(p, &r.pr), 0);
		assert_int_equal(pthread_create(&t, NULL, start_race_owner, &r),
				 0);
		atomic_store(&r.go, true);
		for (volatile unsigned k = 0; k < (it % 64) * 64; k++)
			;
		assert_int_equal(bp_pipeline_start(p), 0);
		pthread_join(t, NULL);
		if (r.bad_rc)
			fail_msg("iteration %u: bp_producer_submit returned %d "
				 "(%s) on a started pipeline",
				 it, r.bad_rc, bp_strerror(r.bad_rc));
		assert_int_equal(bp_producer_destroy(r.pr), 0);
		assert_int_equal(bp_pipeline_drain(p), 0);
		assert_true(conserved(p, &s));
		assert_int_equal(atomic_load(&s.count), r.taken);
		bp_pipeline_destroy(p);
	}
}

/*
 * A handle used by the sink callback: its flush while the flusher's claim
 * waits for ingress room (which only this sink can make, by returning)
 * returns -EDEADLK instead of hanging, and every job still arrives.
 */
static struct bp_producer *sink_pr;
static struct pjob sink_staged[63];
static atomic_int sink_flush_rc = 1;
static atomic_uint sink_calls, sink_jobs;

static void sink_owner_fn(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	atomic_fetch_add(&sink_jobs, n);
	if (atomic_fetch_add(&sink_calls, 1) != 0)
		return;
	for (unsigned i = 0; i < 63; i++)
		if (bp_producer_submit(sink_pr, &sink_staged[i].hdr) != 0)
			pt_fail("sink: staging job %u", i);
	pt_sleep_ns(200000000); /* the flusher claims and blocks */
	atomic_store(&sink_flush_rc, bp_producer_flush(sink_pr));
}

static void test_handle_in_sink(void **unused)
{
	static struct pjob direct[64];
	struct bp_job *js[64];
	struct bp_pipeline_config c;
	struct bp_pipeline *p = NULL;
	int rc;

	(void)unused;
	jobs_init(direct, 64, MAX_HANDLES);
	jobs_init(sink_staged, 63, MAX_HANDLES);
	for (unsigned i = 0; i < 64; i++)
		js[i] = &direct[i].hdr;
	bp_pipeline_config_init(&c);
	c.stage = &stage;
	c.sink = sink_owner_fn;
	c.log = log_fn;
	c.log_ctx = &logs;
	c.workers = 1;
	c.ingress_capacity = 4;
	c.egress_capacity = 1;
	c.max_batch = 64;
	c.max_inflight = 64;
	c.flush_deadline_ns = 20000000; /* the 63 stagings fit in it */
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(bp_producer_create(p, &sink_pr), 0);
	pt_watchdog_arm(60, "a handle flushed from the sink callback");
	assert_int_equal(bp_pipeline_submit(p, js, 64, 0, -1), 64);
	assert_true(wait_count(&sink_jobs, 64 + 63, 20000));
	rc = atomic_load(&sink_flush_rc);
	assert_true(rc == 0 || rc == -EDEADLK);
	assert_int_equal(bp_producer_destroy(sink_pr), 0);
	assert_int_equal(bp_pipeline_drain(p), 0);
	pt_watchdog_disarm();
	bp_pipeline_destroy(p);
}

/*
 * A drain with a timeout that could not claim a handle (its owner's flush
 * was blocked in a submit), and whose blocked submit then completes before
 * intake closes: the handle must still end up closed. It stayed open, so
 * later submits returned 0 for jobs that never arrived, and after
 * bp_pipeline_destroy they used the freed pipeline.
 */
static struct bp_pipeline *late_p;
static atomic_int late_drain_rc = 1;

static void late_log(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	(void)lvl;
	if (strstr(msg, "still blocked at the deadline")) {
		/* let the stage go inside drain's window: the submit ends */
		atomic_store(&stuck_release, true);
		pt_sleep_ns(200000000);
	}
}

static void *late_drainer(void *arg)
{
	(void)arg;
	pt_sleep_ns(200000000); /* the owner's flush is blocked by now */
	atomic_store(&late_drain_rc,
		     bp_pipeline_drain_timeout(late_p, 300000000));
	if (bp_pipeline_drain(late_p) != 0)
		pt_fail("late: the second drain");
	return NULL;
}

static void test_timed_out_handle_closed(void **unused)
{
	static struct pjob jobs[16];
	struct bp_pipeline_config c;
	struct bp_producer *pr;
	struct sinkc s;
	unsigned refused = 0;
	pthread_t t;

	(void)unused;
	memset(&s, 0, sizeof(s));
	atomic_store(&stuck_release, false);
	jobs_init(jobs, 16, 0);
	stuck_config(&c, &s, 1000000000);
	c.log = late_log;
	c.log_ctx = NULL;
	assert_int_equal(bp_pipeline_create(&c, &late_p), 0);
	assert_int_equal(bp_pipeline_start(late_p), 0);
	assert_int_equal(bp_producer_create(late_p, &pr), 0);
	assert_int_equal(pthread_create(&t, NULL, late_drainer, NULL), 0);
	for (unsigned i = 0; i < 12; i++)
		refused += bp_producer_submit(pr, &jobs[i].hdr) != 0;
	pthread_join(t, NULL);
	/* every job: delivered, refused, or still staged (none lost) */
	assert_int_equal(
		atomic_load(&s.count) + refused + bp_producer_staged(pr), 12);
	assert_int_equal(bp_producer_submit(pr, &jobs[12].hdr), -EPIPE);
	bp_pipeline_destroy(late_p);
	/* closed and detached: no call reaches the freed pipeline */
	for (unsigned i = 13; i < 16; i++)
		assert_int_equal(bp_producer_submit(pr, &jobs[i].hdr), -EPIPE);
	bp_producer_destroy(pr);
}

/*
 * The sink creates and destroys a handle while drain waits for room in
 * ingress to submit another handle's staged jobs: drain holds no lock
 * across that wait, so both return (create spun for ever on the registry
 * lock drain held, and drain waited for the sink).
 */
static struct bp_pipeline *reg_p;
static atomic_bool reg_draining, reg_created;
static atomic_int reg_create_rc = 1;
static atomic_uint reg_jobs;

static void reg_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct bp_producer *x;

	(void)ctx;
	(void)jobs;
	atomic_fetch_add(&reg_jobs, n);
	if (!atomic_load(&reg_draining) || atomic_exchange(&reg_created, true))
		return;
	pt_sleep_ns(100000000); /* drain fills ingress and waits for room */
	atomic_store(&reg_create_rc, bp_producer_create(reg_p, &x));
	if (atomic_load(&reg_create_rc) == 0 && bp_producer_destroy(x) != 0)
		pt_fail("sink: destroying its handle");
}

static void test_handle_created_in_sink_during_drain(void **unused)
{
	static struct pjob jobs[200];
	struct bp_pipeline_config c;
	struct bp_producer *pr;

	(void)unused;
	atomic_store(&reg_draining, false);
	atomic_store(&reg_created, false);
	jobs_init(jobs, 200, MAX_HANDLES);
	bp_pipeline_config_init(&c);
	c.stage = &stage;
	c.sink = reg_sink;
	c.log = log_fn;
	c.log_ctx = &logs;
	c.workers = 1;
	c.ingress_capacity = 4;
	c.egress_capacity = 1;
	c.max_batch = 4;
	c.max_inflight = 256;
	c.flush_deadline_ns = 10000000000ull; /* only drain submits them */
	assert_int_equal(bp_pipeline_create(&c, &reg_p), 0);
	assert_int_equal(bp_pipeline_start(reg_p), 0);
	/* a batch larger than what is staged keeps it all staged */
	assert_int_equal(bp_pipeline_set_max_batch(reg_p, 250), 0);
	assert_int_equal(bp_producer_create(reg_p, &pr), 0);
	for (unsigned i = 0; i < 200; i++)
		assert_int_equal(bp_producer_submit(pr, &jobs[i].hdr), 0);
	pt_watchdog_arm(60, "drain while the sink creates a handle");
	atomic_store(&reg_draining, true);
	assert_int_equal(bp_pipeline_drain(reg_p), 0);
	pt_watchdog_disarm();
	assert_int_equal(atomic_load(&reg_jobs), 200);
	/* created during drain: born closed, but created */
	assert_int_equal(atomic_load(&reg_create_rc), 0);
	assert_int_equal(bp_producer_destroy(pr), 0);
	bp_pipeline_destroy(reg_p);
}

static unsigned rnd(unsigned *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 16) & 0x7fff;
}

static void *producer_main(void *arg)
{
	struct prod *pp = arg;
	struct bp_producer *pr = NULL;
	unsigned i = 0;
	int rc = bp_producer_create(pp->p, &pr);

	if (rc) {
		pt_fail("handle %u: create: %d", pp->id, rc);
		return NULL;
	}
	while (i < pp->n) {
		unsigned burst = 1 + rnd(&pp->seed) % 40;

		for (; burst && i < pp->n; burst--, i++) {
			rc = bp_producer_submit(pr, &pp->jobs[i].hdr);
			if (rc == -EPIPE)
				goto out; /* drain began: this one not taken */
			if (rc) {
				pt_fail("handle %u: submit: %d", pp->id, rc);
				goto out;
			}
			pp->accepted++;
		}
		switch (rnd(&pp->seed) % 4) {
		case 0: /* go idle: the flusher must deliver, no call needed */
			if (pp->idle_checks &&
			    !wait_count(&pp->s->per_handle[pp->id],
					pp->accepted, 2000))
				pt_fail("handle %u: %u accepted, %u delivered "
					"while idle 2 s",
					pp->id, pp->accepted,
					atomic_load(
						&pp->s->per_handle[pp->id]));
			break;
		case 1:
			pt_sleep_ns(rnd(&pp->seed) % 50 * 1000);
			break;
		default:
			break; /* straight on: race the flusher */
		}
	}
out:
	pp->last_rc = rc;
	rc = bp_producer_destroy(pr);
	if (rc != 0)
		pt_fail("handle %u: destroy: %d", pp->id, rc);
	return NULL;
}

/*
 * One run: nh handles on threads, tiny deadline; drain after they finish
 * or (overlap) while they submit. Returns the failures it found.
 */
static unsigned race_run(unsigned nh, unsigned workers, unsigned batch,
			 uint64_t deadline_ns, bool ordered, bool overlap,
			 unsigned per, unsigned seed)
{
	struct sinkc *s = calloc(1, sizeof(*s));
	struct prod pp[MAX_HANDLES];
	pthread_t t[MAX_HANDLES];
	struct bp_pipeline *p =
		make(s, workers, batch, deadline_ns, ordered, true);
	unsigned fails0 = pt_failures(), accepted = 0;

	if (!p) {
		pt_fail("pipeline create/start");
		free(s);
		return 1;
	}
	for (unsigned h = 0; h < nh; h++) {
		pp[h] = (struct prod){.p = p,
				      .s = s,
				      .id = h,
				      .n = per,
				      .seed = seed * 31 + h,
				      .idle_checks = !overlap,
				      .jobs = calloc(per, sizeof(struct pjob))};
		jobs_init(pp[h].jobs, per, h);
		pthread_create(&t[h], NULL, producer_main, &pp[h]);
	}
	if (overlap) /* drain once they are well under way */
		wait_count(&s->count, nh * per / 4 + rnd(&seed) % per, 5000);
	else
		for (unsigned h = 0; h < nh; h++)
			pthread_join(t[h], NULL);
	bp_pipeline_drain(p);
	if (overlap)
		for (unsigned h = 0; h < nh; h++)
			pthread_join(t[h], NULL);
	for (unsigned h = 0; h < nh; h++) {
		uint64_t prev = 0;

		accepted += pp[h].accepted;
		if (!overlap && pp[h].accepted != per)
			pt_fail("handle %u: %u of %u accepted", h,
				pp[h].accepted, per);
		for (unsigned i = 0; i < per; i++) {
			struct pjob *j = &pp[h].jobs[i];
			unsigned d = atomic_load(&j->delivered);

			/* accepted: delivered once; the rest: never */
			if (d != (i < pp[h].accepted)) {
				pt_fail("handle %u job %u (of %u accepted) "
					"delivered %u times",
					h, i, pp[h].accepted, d);
				break;
			}
			if (i < pp[h].accepted) {
				if (i > 0 && j->hdr.seq <= prev) {
					pt_fail("handle %u: job %u entered the "
						"pipeline before job %u",
						h, i, i - 1);
					break;
				}
				prev = j->hdr.seq;
			}
		}
		free(pp[h].jobs);
	}
	if (atomic_load(&s->count) != accepted)
		pt_fail("%u accepted, %u delivered", accepted,
			atomic_load(&s->count));
	if (!conserved(p, s))
		pt_fail("conservation");
	bp_pipeline_destroy(p);
	free(s);
	return pt_failures() - fails0;
}

/* One short overlap run in the unit suite: submit either lands or fails. */
static void test_drain_overlaps_submit(void **unused)
{
	(void)unused;
	pt_watchdog_arm(60, "drain overlapping producers");
	for (unsigned r = 0; r < 4; r++)
		assert_int_equal(
			race_run(3, 2, 16, 1000, r & 1, true, 20000, r + 1), 0);
	pt_watchdog_disarm();
}

/*
 * Owners submitting while bp_pipeline_drain_timeout runs: a drain that
 * returns 0 has delivered every job a submit accepted, and says nothing
 * about a blocked owner (no owner blocks here: ingress always drains).
 * Before, drain's wait for an owner's claim re-read the claim after seeing
 * it free; an owner claiming again in between looked like "the deadline
 * passed", the handle was closed with its staged jobs left in it, and the
 * drain returned 0 (about 1 round in 12).
 */
struct owner {
	struct bp_pipeline *p;
	struct pjob *jobs;
	unsigned id, n, accepted;
	atomic_bool *go;
};

static atomic_uint blocked_logs;

static void race_log(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	(void)lvl;
	if (strstr(msg, "still blocked"))
		atomic_fetch_add(&blocked_logs, 1);
}

static void *racing_owner(void *arg)
{
	struct owner *o = arg;
	struct bp_producer *pr = NULL;
	int rc = bp_producer_create(o->p, &pr);

	if (rc) {
		pt_fail("owner %u: create: %d", o->id, rc);
		return NULL;
	}
	while (!atomic_load(o->go))
		;
	for (unsigned i = 0; i < o->n; i++) {
		rc = bp_producer_submit(pr, &o->jobs[i].hdr);
		if (rc == -EPIPE)
			break; /* closed by drain: this one not taken */
		if (rc) {
			pt_fail("owner %u: submit: %d", o->id, rc);
			break;
		}
		o->accepted++;
	}
	rc = bp_producer_destroy(pr);
	if (rc)
		pt_fail("owner %u: destroy: %d (%u staged)", o->id, rc,
			bp_producer_staged(pr));
	return NULL;
}

/* One round; timed: drain_timeout(3 s), else plain drain. */
static unsigned owners_race_round(unsigned seed, bool timed)
{
	enum { OWNERS = 8, PER = 2500 };
	struct bp_pipeline_config c;
	struct bp_pipeline *p = NULL;
	struct owner o[OWNERS];
	pthread_t t[OWNERS];
	atomic_bool go = false;
	struct sinkc *s = calloc(1, sizeof(*s));
	unsigned fails0 = pt_failures(), accepted = 0;
	int rc;

	bp_pipeline_config_init(&c);
	c.stage = &stage;
	c.sink = sink_fn;
	c.sink_ctx = s;
	c.log = race_log;
	c.workers = 2;
	c.max_batch = 4; /* an owner claims every 4th job */
	/*
	 * Every 4th round a staging buffer of 8: an owner whose flushes find
	 * the flusher's claim busy fills it and takes the make_room path,
	 * which once staged a job over one a drain had still to submit
	 * (its flush found the handle closed and said "room").
	 */
	c.max_inflight = seed % 4 == 3 ? 8 : 64;
	c.flush_deadline_ns = 1000 * (seed % 3); /* the flusher claims too */
	if (bp_pipeline_create(&c, &p) || bp_pipeline_start(p)) {
		pt_fail("pipeline create/start");
		free(s);
		return 1;
	}
	for (unsigned i = 0; i < OWNERS; i++) {
		o[i] = (struct owner){.p = p,
				      .jobs = calloc(PER, sizeof(struct pjob)),
				      .id = i,
				      .n = PER,
				      .go = &go};
		jobs_init(o[i].jobs, PER, i);
		pthread_create(&t[i], NULL, racing_owner, &o[i]);
	}
	atomic_store(&go, true);
	pt_sleep_ns((seed * 7919u) % 2000 * 1000); /* 0-2 ms of submits */
	rc = timed ? bp_pipeline_drain_timeout(p, 3000000000LL)
		   : bp_pipeline_drain(p);
	if (rc != 0)
		pt_fail("drain%s returned %d", timed ? "_timeout(3 s)" : "",
			rc);
	/* what was delivered when drain returned: nothing comes later */
	for (unsigned i = 0; i < OWNERS; i++)
		pthread_join(t[i], NULL);
	for (unsigned i = 0; i < OWNERS; i++) {
		unsigned lost = 0, twice = 0, extra = 0;
		unsigned first_lost = PER, first_extra = PER;

		accepted += o[i].accepted;
		for (unsigned k = 0; k < PER; k++) {
			unsigned d = atomic_load(&o[i].jobs[k].delivered);

			if (k < o[i].accepted && d == 0 && !lost++)
				first_lost = k;
			twice += d > 1;
			if (k >= o[i].accepted && d != 0 && !extra++)
				first_extra = k;
		}
		if (lost || twice || extra)
			pt_fail("round seed %u, owner %u: %u accepted; %u of "
				"them not delivered (the first: job %u), %u "
				"delivered twice, %u not accepted but "
				"delivered (the first: job %u)",
				seed, i, o[i].accepted, lost, first_lost, twice,
				extra, first_extra);
		free(o[i].jobs);
	}
	if (rc == 0 && atomic_load(&s->count) != accepted)
		pt_fail("round seed %u: %u accepted, %u delivered", seed,
			accepted, atomic_load(&s->count));
	bp_pipeline_destroy(p);
	free(s);
	return pt_failures() - fails0;
}

static unsigned owners_race(unsigned rounds, unsigned seed)
{
	unsigned bad = 0;

	atomic_store(&blocked_logs, 0);
	for (unsigned r = 0; r < rounds && !bad; r++)
		bad += owners_race_round(seed + r, r & 1);
	if (atomic_load(&blocked_logs))
		pt_fail("%u 'still blocked' log lines, and no owner blocked",
			atomic_load(&blocked_logs));
	return bad + (atomic_load(&blocked_logs) != 0);
}

static void test_drain_races_owners(void **unused)
{
	(void)unused;
	pt_watchdog_arm(PT_TSAN ? 600 : 120, "drain racing 8 owners");
	assert_int_equal(owners_race(PT_TSAN ? 6 : 40, 1), 0);
	pt_watchdog_disarm();
}

static int stress(void)
{
	unsigned long scale = pt_env_ulong("BP_STRESS_SCALE", PT_STRESS_SCALE);
	unsigned seed = (unsigned)pt_env_ulong(
		"BP_SEED", (unsigned long)(pt_now_ns() % 1000000007) + 1);
	unsigned rounds = (unsigned)(8 * scale / (PT_TSAN ? 4 : 1)) + 1;
	unsigned per = PT_TSAN ? 3000 : 20000, bad = 0;

	printf("seed %u (BP_SEED=%u replays), %u rounds\n", seed, seed, rounds);
	for (unsigned r = 0; r < rounds && !bad; r++) {
		unsigned s = seed + r;
		unsigned nh = 2 + rnd(&s) % 5, nw = 1 + rnd(&s) % 3;
		unsigned batch = 1 + rnd(&s) % 32;
		bool ordered = rnd(&s) & 1, overlap = (r % 3) == 2;
		/* 1 us: the owner's own check and the flusher's wake-up
		 * compete; 30 us: the flusher wins more often (idle gaps) */
		static const uint64_t deadlines[] = {1000, 1000, 30000};
		uint64_t deadline = deadlines[rnd(&s) % 3];

		pt_watchdog_arm(PT_TSAN ? 300 : 120,
				"round %u: %u handles, %u workers, B=%u, "
				"deadline %llu ns, %s, %s",
				r, nh, nw, batch, (unsigned long long)deadline,
				ordered ? "ordered" : "unordered",
				overlap ? "drain overlaps" : "drain after");
		bad += race_run(nh, nw, batch, deadline, ordered, overlap, per,
				s);
		printf("round %u: %u handles, %u workers, B=%u, deadline %llu "
		       "ns, %s, %s: %s\n",
		       r, nh, nw, batch, (unsigned long long)deadline,
		       ordered ? "ordered" : "unordered",
		       overlap ? "drain overlaps" : "drain after",
		       bad ? "FAIL" : "ok");
	}
	if (!bad) {
		unsigned n = (unsigned)(200 * scale / (PT_TSAN ? 8 : 1)) + 2;

		pt_watchdog_arm(PT_TSAN ? 1800 : 600,
				"%u rounds of drain racing 8 owners", n);
		bad += owners_race(n, seed);
		printf("drain racing 8 owners, %u rounds: %s\n", n,
		       bad ? "FAIL" : "ok");
	}
	pt_watchdog_disarm();
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_handle_flushed),
		cmocka_unit_test(test_submit_lifecycle),
		cmocka_unit_test(test_never_started),
		cmocka_unit_test(test_drain_takes_staged),
		cmocka_unit_test(test_abort_cancels_staged),
		cmocka_unit_test(test_handle_outlives_pipeline),
		cmocka_unit_test(test_drain_overlaps_submit),
		cmocka_unit_test(test_drain_races_owners),
		cmocka_unit_test(test_drain_timeout_blocked_handle),
		cmocka_unit_test(test_flush_while_drain_holds),
		cmocka_unit_test(test_destroy_during_timed_drain),
		cmocka_unit_test(test_start_races_owner),
		cmocka_unit_test(test_handle_in_sink),
		cmocka_unit_test(test_timed_out_handle_closed),
		cmocka_unit_test(test_handle_created_in_sink_during_drain),
	};

	if (argc > 1 && strcmp(argv[1], "stress") == 0)
		return stress();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
