/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_flush - bp_pipeline_flush: once it returns 0, every job
 * accepted before the call has reached the sink (checked job by job, with
 * other threads submitting all the while, through bp_pipeline_submit and
 * through producer handles whose flush deadline is far away), ordered and
 * unordered; the pipeline goes on taking jobs after it; it times out with
 * a job held in the stage, says -EDEADLK from the sink, 0 before start
 * and after drain, and ends with a drain that runs under it.
 *
 * Time bounds are generous: what they catch is a job that is never
 * delivered, or a flush that never returns.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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
#include "src/pipeline_internal.h" /* the ingress ring's waiters */
#include "src/ring_internal.h"

PT_DEFINE_GLOBALS;

#define SEC INT64_C(1000000000)

struct fjob {
	struct bp_job hdr;
	atomic_uint delivered;
};

struct fsink {
	atomic_uint count;
	struct bp_pipeline *p; /* for the sink's own flush */
	atomic_int flush_rc;   /* what a flush from the sink said */
	atomic_int try_flush;  /* the sink calls bp_pipeline_flush once */
};

static void fsink_fn(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct fsink *s = ctx;

	for (unsigned i = 0; i < n; i++) {
		struct fjob *j = (struct fjob *)jobs[i];

		if (atomic_fetch_add(&j->delivered, 1) != 0)
			pt_fail("a job delivered twice");
	}
	atomic_fetch_add(&s->count, n);
	if (atomic_exchange(&s->try_flush, 0))
		atomic_store(&s->flush_rc, bp_pipeline_flush(s->p, SEC));
}

/* The stage: pass, or hold every job until `open` (gated pipelines). */
static atomic_int gate_open = 1;

static void fprocess(void *state, struct bp_worker *w, struct bp_job **jobs,
		     unsigned n)
{
	(void)state;
	while (!atomic_load(&gate_open))
		pt_sleep_ns(100000);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage fstage = {.name = "flush-test",
				       .process = fprocess};

static atomic_uint logged;

static void flog(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	(void)lvl;
	(void)msg;
	atomic_fetch_add(&logged, 1);
}

/* The tests' config: this file's stage, sink and log; s cleared. */
static void fconfig(struct bp_pipeline_config *c, struct fsink *s,
		    unsigned workers, uint64_t flush_deadline_ns)
{
	memset(s, 0, sizeof(*s));
	bp_pipeline_config_init(c);
	c->stage = &fstage;
	c->sink = fsink_fn;
	c->sink_ctx = s;
	c->log = flog;
	c->workers = workers;
	c->flush_deadline_ns = flush_deadline_ns;
}

static struct bp_pipeline *fcreate(struct fsink *s,
				   const struct bp_pipeline_config *c,
				   bool start)
{
	struct bp_pipeline *p = NULL;

	assert_int_equal(bp_pipeline_create(c, &p), 0);
	s->p = p;
	if (start)
		assert_int_equal(bp_pipeline_start(p), 0);
	return p;
}

static struct bp_pipeline *fmake(struct fsink *s, unsigned workers,
				 bool ordered, uint64_t flush_deadline_ns,
				 bool start)
{
	struct bp_pipeline_config c;

	fconfig(&c, s, workers, flush_deadline_ns);
	c.max_batch = 16;
	c.ordered = ordered;
	return fcreate(s, &c, start);
}

static struct fjob *fjobs(unsigned n)
{
	struct fjob *j = calloc(n, sizeof(*j));

	assert_non_null(j);
	return j;
}

/* ---------------------------------------------- with producers running */

#define PROD_JOBS 20000

struct fprod {
	struct bp_pipeline *p;
	struct fjob *jobs;
	bool handle;	   /* through a producer handle, else direct */
	atomic_uint accepted; /* jobs [0, accepted) were accepted */
	pthread_t t;
};

static void *fprod_main(void *arg)
{
	struct fprod *f = arg;
	struct bp_producer *h = NULL;

	if (f->handle && bp_producer_create(f->p, &h) != 0) {
		pt_fail("bp_producer_create");
		return NULL;
	}
	for (unsigned i = 0; i < PROD_JOBS; i++) {
		struct bp_job *j = &f->jobs[i].hdr;
		int rc = f->handle ? bp_producer_submit(h, j)
				   : bp_pipeline_submit(f->p, &j, 1, 0, -1);

		if (rc != (f->handle ? 0 : 1)) {
			pt_fail("submit of job %u: %d", i, rc);
			break;
		}
		/* release: the flush's look at it comes after the accept */
		atomic_store_explicit(&f->accepted, i + 1,
				      memory_order_release);
		if (i % 64 == 0)
			pt_sleep_ns(20000); /* let the flushes overlap */
	}
	if (h && bp_producer_destroy(h) != 0)
		pt_fail("bp_producer_destroy");
	return NULL;
}

/*
 * Two producers, one through a handle whose flush deadline is 10 s away
 * (nothing but a flush or a full batch submits its jobs), flushed over and
 * over: after each 0, every job either producer had accepted before the
 * call is delivered.
 */
static void flush_under_load(bool ordered, unsigned lanes)
{
	struct fsink s;
	struct bp_pipeline_config c;
	struct bp_pipeline *p;
	struct fprod pr[2];
	unsigned rounds = 0;
	bool running = true;

	fconfig(&c, &s, 2, 10 * SEC);
	c.max_batch = 16;
	c.ordered = ordered;
	c.ingress_lanes = lanes; /* a mark per lane (src/flush.h) */
	p = fcreate(&s, &c, true);
	for (unsigned k = 0; k < 2; k++) {
		pr[k].p = p;
		pr[k].jobs = fjobs(PROD_JOBS);
		pr[k].handle = k == 0;
		atomic_init(&pr[k].accepted, 0);
		assert_int_equal(
			pthread_create(&pr[k].t, NULL, fprod_main, &pr[k]), 0);
	}
	while (running) {
		unsigned before[2];

		running = false;
		for (unsigned k = 0; k < 2; k++) {
			before[k] = atomic_load_explicit(&pr[k].accepted,
							 memory_order_acquire);
			running |= before[k] < PROD_JOBS;
		}
		assert_int_equal(bp_pipeline_flush(p, 30 * SEC), 0);
		for (unsigned k = 0; k < 2; k++)
			for (unsigned i = 0; i < before[k]; i++)
				if (!atomic_load(&pr[k].jobs[i].delivered))
					fail_msg("producer %u job %u accepted "
						 "before the flush, not "
						 "delivered after it",
						 k, i);
		rounds++;
	}
	for (unsigned k = 0; k < 2; k++)
		assert_int_equal(pthread_join(pr[k].t, NULL), 0);
	assert_true(rounds >= 2);
	/* with lanes, the handle and the raw producer were dealt one each:
	 * the flushes had a mark in two lanes to reach */
	if (lanes > 1 && (pr[0].jobs[0].hdr.seq & (lanes - 1)) ==
				 (pr[1].jobs[0].hdr.seq & (lanes - 1)))
		fail_msg("the two producers share lane %llu",
			 (unsigned long long)(pr[0].jobs[0].hdr.seq &
					      (lanes - 1)));
	/* the pipeline is open after every flush: drain takes the rest */
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&s.count), 2 * PROD_JOBS);
	bp_pipeline_destroy(p);
	for (unsigned k = 0; k < 2; k++)
		free(pr[k].jobs);
	assert_int_equal(pt_failures(), 0);
}

static void test_flush_unordered(void **unused)
{
	(void)unused;
	flush_under_load(false, 0);
}

static void test_flush_lanes(void **unused)
{
	(void)unused;
	flush_under_load(false, 4);
}

/*
 * Ingress lanes: a handle whose lane is full does not hold up a handle of
 * another lane. The one worker holds its job (the stage waits for
 * gate_open), main fills lane 0, handle A (lane 0) stages a job the
 * flusher cannot submit, then handle B (lane 1) stages one: the flusher
 * submits B's within its deadline (1 ms) and a wait for room in lane 0.
 */
static void test_flush_full_lane(void **unused)
{
	struct fsink s;
	struct bp_pipeline_config c;
	struct bp_pipeline *p;
	struct bp_producer *a = NULL, *b = NULL;
	struct fjob *jobs = fjobs(16);
	unsigned n = 0, staged = 1;
	int64_t end;

	(void)unused;
	fconfig(&c, &s, 1, 1000000);
	c.ingress_lanes = 2;
	c.ingress_capacity = 8; /* 4 a lane */
	c.max_batch = 4;	/* a handle's job waits for the flusher */
	c.max_inflight = 4;
	atomic_store(&gate_open, 0);
	p = fcreate(&s, &c, true);
	/* dealt in this order: a lane 0, b lane 1, main lane 0 */
	assert_int_equal(bp_producer_create(p, &a), 0);
	assert_int_equal(bp_producer_create(p, &b), 0);
	/* the worker takes its job first, and holds it */
	{
		struct bp_pipeline_stats st;
		struct bp_job *h = &jobs[n++].hdr;

		assert_int_equal(bp_pipeline_submit(p, &h, 1, 0, -1), 1);
		end = pt_now_ns() + 5 * SEC;
		do
			assert_int_equal(bp_pipeline_get_stats(p, &st), 0);
		while (st.worker_jobs == 0 && pt_now_ns() < end);
		assert_int_equal(st.worker_jobs, 1);
	}
	for (;;) {
		struct bp_job *h = &jobs[n].hdr;
		int rc = bp_pipeline_submit(p, &h, 1, BP_SUBMIT_NONBLOCK, 0);

		if (rc == -EAGAIN)
			break;
		assert_int_equal(rc, 1);
		assert_int_equal(jobs[n].hdr.seq & 1, 0);
		assert_true(++n < 12);
	}
	assert_int_equal(bp_producer_submit(a, &jobs[n++].hdr), 0);
	pt_sleep_ns(20000000); /* the flusher finds lane 0 full, waits */
	assert_int_equal(bp_producer_submit(b, &jobs[n++].hdr), 0);
	end = pt_now_ns() + 2 * SEC;
	while ((staged = bp_producer_staged(b)) != 0 && pt_now_ns() < end)
		pt_sleep_ns(1000000);
	if (staged) {
		atomic_store(&gate_open, 1);
		fail_msg("handle B's job (lane 1) still staged after 2 s, "
			 "behind handle A's full lane 0");
	}
	assert_int_equal(bp_producer_staged(a), 1);
	assert_int_equal(jobs[n - 1].hdr.seq & 1, 1);
	atomic_store(&gate_open, 1);
	assert_int_equal(bp_producer_destroy(a), 0);
	assert_int_equal(bp_producer_destroy(b), 0);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&s.count), n);
	bp_pipeline_destroy(p);
	free(jobs);
}

static void test_flush_ordered(void **unused)
{
	(void)unused;
	flush_under_load(true, 0);
}

/* ----------------------------------------------------- one thread alone */

/*
 * Jobs staged in a handle whose flush deadline is 10 s away: a flush with
 * a 5 s limit gets them delivered (the flusher submits them at once), and
 * the handle keeps working after it.
 */
static void test_flush_takes_staged(void **unused)
{
	struct fsink s;
	struct bp_pipeline *p = fmake(&s, 1, false, 10 * SEC, true);
	struct fjob *j = fjobs(20);
	struct bp_producer *h;

	(void)unused;
	assert_int_equal(bp_producer_create(p, &h), 0);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(bp_producer_submit(h, &j[i].hdr), 0);
	assert_int_equal(atomic_load(&s.count), 0); /* staged: 10 < 16 */
	assert_int_equal(bp_pipeline_flush(p, 5 * SEC), 0);
	assert_int_equal(atomic_load(&s.count), 10);
	for (unsigned i = 10; i < 20; i++)
		assert_int_equal(bp_producer_submit(h, &j[i].hdr), 0);
	assert_int_equal(bp_pipeline_flush(p, 5 * SEC), 0);
	assert_int_equal(atomic_load(&s.count), 20);
	assert_int_equal(bp_producer_destroy(h), 0);
	assert_int_equal(bp_pipeline_drain(p), 0);
	for (unsigned i = 0; i < 20; i++)
		assert_int_equal(atomic_load(&j[i].delivered), 1);
	bp_pipeline_destroy(p);
	free(j);
	assert_int_equal(pt_failures(), 0);
}

/* A job held in the stage: -ETIMEDOUT, logged; then 0 once it goes. */
static void test_flush_timeout(void **unused)
{
	struct fsink s;
	struct bp_pipeline *p = fmake(&s, 1, false, 50000, true);
	struct fjob *j = fjobs(1);
	struct bp_job *one = &j[0].hdr;
	unsigned logs;

	(void)unused;
	atomic_store(&gate_open, 0);
	assert_int_equal(bp_pipeline_submit(p, &one, 1, 0, -1), 1);
	logs = atomic_load(&logged);
	assert_int_equal(bp_pipeline_flush(p, 50 * 1000000), -ETIMEDOUT);
	assert_true(atomic_load(&logged) > logs);
	assert_int_equal(bp_pipeline_flush(p, 0), -ETIMEDOUT);
	atomic_store(&gate_open, 1);
	assert_int_equal(bp_pipeline_flush(p, -1), 0);
	assert_int_equal(atomic_load(&s.count), 1);
	assert_int_equal(bp_pipeline_drain(p), 0);
	bp_pipeline_destroy(p);
	free(j);
}

/* From the sink callback: -EDEADLK (the sink would wait for itself). */
static void test_flush_from_sink(void **unused)
{
	struct fsink s;
	struct bp_pipeline *p = fmake(&s, 1, false, 50000, true);
	struct fjob *j = fjobs(1);
	struct bp_job *one = &j[0].hdr;

	(void)unused;
	atomic_store(&s.flush_rc, 1);
	atomic_store(&s.try_flush, 1);
	assert_int_equal(bp_pipeline_submit(p, &one, 1, 0, -1), 1);
	assert_int_equal(bp_pipeline_flush(p, 10 * SEC), 0);
	assert_int_equal(atomic_load(&s.flush_rc), -EDEADLK);
	assert_int_equal(bp_pipeline_drain(p), 0);
	bp_pipeline_destroy(p);
	free(j);
}

/* NULL, before start, after drain, and without a job ever. */
static void test_flush_lifecycle(void **unused)
{
	struct fsink s;
	struct bp_pipeline *p = fmake(&s, 2, true, 50000, false);
	struct fjob *j = fjobs(4);
	struct bp_job *a[4] = {&j[0].hdr, &j[1].hdr, &j[2].hdr, &j[3].hdr};

	(void)unused;
	assert_int_equal(bp_pipeline_flush(NULL, 0), -EINVAL);
	assert_int_equal(bp_pipeline_flush(p, 0), 0); /* not started */
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(bp_pipeline_flush(p, 10 * SEC), 0); /* nothing */
	assert_int_equal(bp_pipeline_submit(p, a, 4, 0, -1), 4);
	assert_int_equal(bp_pipeline_flush(p, 10 * SEC), 0);
	assert_int_equal(atomic_load(&s.count), 4);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(bp_pipeline_flush(p, 10 * SEC), 0); /* stopped */
	bp_pipeline_destroy(p);
	free(j);
}

struct flusher_arg {
	struct bp_pipeline *p;
	atomic_int rc;
};

static void *flush_thread(void *arg)
{
	struct flusher_arg *f = arg;

	atomic_store(&f->rc, bp_pipeline_flush(f->p, 30 * SEC));
	return NULL;
}

/*
 * A flush waiting on a job held in the stage, and staged jobs in a handle,
 * when a drain begins: it returns 0 once the drain has delivered them.
 */
static void test_flush_during_drain(void **unused)
{
	struct fsink s;
	struct bp_pipeline *p = fmake(&s, 1, false, 10 * SEC, true);
	struct fjob *j = fjobs(5);
	struct bp_job *one = &j[0].hdr;
	struct flusher_arg f = {.p = p};
	struct bp_producer *h;
	pthread_t t;

	(void)unused;
	atomic_init(&f.rc, 1);
	atomic_store(&gate_open, 0);
	assert_int_equal(bp_producer_create(p, &h), 0);
	assert_int_equal(bp_pipeline_submit(p, &one, 1, 0, -1), 1);
	for (unsigned i = 1; i < 5; i++)
		assert_int_equal(bp_producer_submit(h, &j[i].hdr), 0);
	assert_int_equal(pthread_create(&t, NULL, flush_thread, &f), 0);
	pt_sleep_ms(20);
	atomic_store(&gate_open, 1);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&f.rc), 0);
	assert_int_equal(atomic_load(&s.count), 5);
	assert_int_equal(bp_producer_destroy(h), 0);
	bp_pipeline_destroy(p);
	free(j);
}

/* ------------------------------------- owners blocked on a full ingress */

/* A one-worker pipeline with a small ingress, its stage closed, filled. */
static struct bp_pipeline *blocked_pipeline(struct fsink *s, struct fjob *fill,
					    unsigned nfill, unsigned *filled)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p;

	fconfig(&c, s, 1, 10 * SEC);
	c.ingress_capacity = 8;
	c.max_batch = 4;
	c.max_inflight = 4;
	p = fcreate(s, &c, true);
	atomic_store(&gate_open, 0);
	/*
	 * Fill until ingress stays full: the worker takes what it can hold
	 * (a batch, then it waits in the closed stage) whenever it gets the
	 * CPU, so one -EAGAIN is not yet full for good.
	 */
	*filled = 0;
	for (unsigned full = 0; full < 20 && *filled < nfill;) {
		struct bp_job *j = &fill[*filled].hdr;

		if (bp_pipeline_submit(p, &j, 1, BP_SUBMIT_NONBLOCK, -1) == 1) {
			++*filled;
			full = 0;
		} else {
			full++;
			pt_sleep_ms(5);
		}
	}
	return p;
}

/* Until a thread sleeps waiting for room in ingress (10 s). */
static bool room_waiter_sleeps(struct bp_pipeline *p)
{
	int64_t end = pt_now_ns() + 10 * SEC;

	while (__atomic_load_n(&bpi_ring_not_full(p->ingress)->sleepers,
			       __ATOMIC_SEQ_CST) == 0)
		if (pt_now_ns() > end)
			return false;
		else
			pt_sleep_ns(100000);
	return true;
}

struct owner_arg {
	struct bp_producer *h;
	struct fjob *jobs;
	int rc[4];
	bool open_gate; /* when its submits are over */
};

/* Stages 4 jobs: the 4th fills a batch, whose submit blocks. */
static void *owner_main(void *arg)
{
	struct owner_arg *o = arg;

	for (unsigned i = 0; i < 4; i++)
		o->rc[i] = bp_producer_submit(o->h, &o->jobs[i].hdr);
	if (o->open_gate)
		atomic_store(&gate_open, 1);
	return NULL;
}

/* The owner blocked in its batch's submit, then a flush waiting for it. */
static void owner_then_flush(struct bp_pipeline *p, struct owner_arg *o,
			     pthread_t *ot, struct flusher_arg *f,
			     pthread_t *ft)
{
	assert_int_equal(bp_producer_create(p, &o->h), 0);
	assert_int_equal(pthread_create(ot, NULL, owner_main, o), 0);
	/* the owner's batch submit sleeps: ingress is full */
	assert_true(room_waiter_sleeps(p));
	f->p = p;
	atomic_init(&f->rc, 1);
	assert_int_equal(pthread_create(ft, NULL, flush_thread, f), 0);
	pt_sleep_ms(100); /* the round notes the owner's 4 jobs */
}

static void on_usr1(int sig)
{
	(void)sig;
}

/*
 * An owner blocked in its batch's submit when a flush's round begins, then
 * interrupted by a signal: its last job was never taken (-EINTR), the
 * other three are the round's. The flush returns 0 once they are
 * delivered, and the next flush does too (the round does not wait for the
 * job taken back).
 */
static void test_flush_owner_interrupted(void **unused)
{
	struct fsink s;
	struct fjob *fill = fjobs(64), *hj = fjobs(4);
	struct owner_arg o = {.jobs = hj};
	struct flusher_arg f;
	struct sigaction sa;
	unsigned filled;
	pthread_t ot, ft;
	struct bp_pipeline *p = blocked_pipeline(&s, fill, 64, &filled);

	(void)unused;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART: the futex wait ends */
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	owner_then_flush(p, &o, &ot, &f, &ft);
	assert_int_equal(pthread_kill(ot, SIGUSR1), 0);
	assert_int_equal(pthread_join(ot, NULL), 0);
	assert_int_equal(o.rc[0], 0);
	assert_int_equal(o.rc[3], -EINTR); /* the 4th was not taken */
	atomic_store(&gate_open, 1);
	assert_int_equal(pthread_join(ft, NULL), 0);
	assert_int_equal(atomic_load(&f.rc), 0);
	assert_int_equal(atomic_load(&s.count), filled + 3);
	assert_int_equal(bp_pipeline_flush(p, 10 * SEC), 0);
	assert_int_equal(bp_producer_destroy(o.h), 0);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&s.count), filled + 3);
	bp_pipeline_destroy(p);
	free(fill);
	free(hj);
	signal(SIGUSR1, SIG_DFL);
}

/*
 * An owner blocked in its batch's submit while a flush waits, and a drain
 * whose deadline passes first: the owner's jobs stay staged (it gets
 * -EPIPE), so the flush cannot say they were delivered: -EPIPE.
 */
static void test_flush_drain_strands(void **unused)
{
	struct fsink s;
	struct fjob *fill = fjobs(64), *hj = fjobs(4);
	struct owner_arg o = {.jobs = hj, .open_gate = true};
	struct flusher_arg f;
	unsigned filled;
	pthread_t ot, ft;
	struct bp_pipeline *p = blocked_pipeline(&s, fill, 64, &filled);

	(void)unused;
	owner_then_flush(p, &o, &ot, &f, &ft);
	assert_int_equal(bp_pipeline_drain_timeout(p, 200 * 1000000),
			 -ETIMEDOUT);
	assert_int_equal(pthread_join(ot, NULL), 0);
	assert_int_equal(o.rc[3], -EPIPE);
	assert_int_equal(pthread_join(ft, NULL), 0);
	assert_int_equal(atomic_load(&f.rc), -EPIPE);
	assert_int_equal(bp_producer_staged(o.h), 3);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&s.count), filled);
	assert_int_equal(bp_producer_destroy(o.h), -EPIPE);
	bp_pipeline_destroy(p);
	free(fill);
	free(hj);
}

/* Drained before it was started: no sink ever ran, nothing was accepted. */
static void test_flush_never_started(void **unused)
{
	struct fsink s;
	struct bp_pipeline *p = fmake(&s, 1, false, 50000, false);

	(void)unused;
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(bp_pipeline_flush(p, 10 * SEC), 0);
	bp_pipeline_destroy(p);
}

/* After every test, also a failed one: the stage lets jobs through. */
static int reopen_gate(void **unused)
{
	(void)unused;
	atomic_store(&gate_open, 1);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_flush_lifecycle, reopen_gate),
		cmocka_unit_test_teardown(test_flush_takes_staged, reopen_gate),
		cmocka_unit_test_teardown(test_flush_timeout, reopen_gate),
		cmocka_unit_test_teardown(test_flush_from_sink, reopen_gate),
		cmocka_unit_test_teardown(test_flush_during_drain, reopen_gate),
		cmocka_unit_test_teardown(test_flush_never_started, reopen_gate),
		cmocka_unit_test_teardown(test_flush_owner_interrupted, reopen_gate),
		cmocka_unit_test_teardown(test_flush_drain_strands, reopen_gate),
		cmocka_unit_test_teardown(test_flush_unordered, reopen_gate),
		cmocka_unit_test_teardown(test_flush_lanes, reopen_gate),
		cmocka_unit_test_teardown(test_flush_full_lane, reopen_gate),
		cmocka_unit_test_teardown(test_flush_ordered, reopen_gate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
