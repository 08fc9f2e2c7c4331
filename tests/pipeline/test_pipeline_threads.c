/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_threads - the threads the pipeline creates:
 *
 *   - signals sent to the process never run the application's handler on
 *     a library thread (they start with asynchronous signals blocked),
 *     even when the thread that called bp_pipeline_start had them open;
 *   - the thread_start hook runs once on each worker and on the sink, on
 *     that thread, with its role and index, named already, before the
 *     stage's init; thread_stop runs once on each, after the stage's fini;
 *     both also on a start that fails.
 *
 * The library's threads are told apart by the ids their start hook
 * records. The signal test sends SIGUSR1 with kill() from a thread that
 * blocks it, while the main thread blocks it too and one application
 * thread leaves it open: the kernel picks among the threads that leave it
 * open, so without the blocking in the library the workers and the sink
 * take their share.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
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
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include <batchpipe/batchpipe.h>

#include "pt_common.h"

PT_DEFINE_GLOBALS;

#define NWORKERS 4
#define NTHREADS (NWORKERS + 1) /* and the sink */
#define NJOBS	 256

/* ------------------------------------------------------- thread records */

/* One per library thread: filled by the hooks and the stage, on it. */
struct rec {
	_Atomic pid_t tid; /* 0 until the start hook ran */
	pthread_t self;
	atomic_uint starts, stops;
	atomic_uint inits, finis; /* workers: the stage's init and fini */
	atomic_bool init_after_start, fini_before_stop, stop_on_same;
	char name[16];
};

static struct rec recs[NTHREADS]; /* workers 0..N-1, then the sink */
static atomic_uint bad_role; /* a hook got a role, index or ctx it should not */
static atomic_ulong delivered;
static atomic_bool sink_on_sink_thread;
static int fail_init_worker = -1;

/* On a library thread: which record is this thread's (set by the hook). */
static _Thread_local struct rec *mine;

static struct rec *rec_of(enum bp_thread_role role, unsigned index)
{
	if (role == BP_THREAD_WORKER && index < NWORKERS)
		return &recs[index];
	if (role == BP_THREAD_SINK && index == 0)
		return &recs[NWORKERS];
	atomic_fetch_add(&bad_role, 1);
	return NULL;
}

static void on_start(void *ctx, enum bp_thread_role role, unsigned index)
{
	struct rec *r = rec_of(role, index);

	if (ctx != recs) /* cmocka is not thread-safe: main asserts */
		atomic_fetch_add(&bad_role, 1);
	if (!r)
		return;
	r->self = pthread_self();
	pthread_getname_np(pthread_self(), r->name, sizeof(r->name));
	mine = r;
	atomic_fetch_add(&r->starts, 1);
	atomic_store(&r->tid, bpt_gettid());
}

static void on_stop(void *ctx, enum bp_thread_role role, unsigned index)
{
	struct rec *r = rec_of(role, index);

	(void)ctx;
	if (!r)
		return;
	atomic_store(&r->stop_on_same,
		     mine == r && pthread_equal(r->self, pthread_self()));
	atomic_store(&r->fini_before_stop, atomic_load(&r->finis) == 1);
	atomic_fetch_add(&r->stops, 1);
}

/* A pid_t set in a signal handler: only atomics, no library calls. */
static bool is_library_tid(pid_t tid)
{
	for (unsigned i = 0; i < NTHREADS; i++)
		if (atomic_load(&recs[i].tid) == tid)
			return true;
	return false;
}

static void reset_recs(void)
{
	memset(recs, 0, sizeof(recs));
	atomic_store(&bad_role, 0);
	atomic_store(&sink_on_sink_thread, true);
}

/* --------------------------------------------------------------- stage */

static int st_init(struct bp_worker *w, void **state)
{
	unsigned id = bp_worker_id(w);
	struct rec *r = &recs[id];

	*state = NULL;
	atomic_store(&r->init_after_start,
		     mine == r && atomic_load(&r->starts) == 1 &&
			     pthread_equal(r->self, pthread_self()));
	atomic_fetch_add(&r->inits, 1);
	return (int)id == fail_init_worker ? -ENODEV : 0;
}

static void st_fini(void *state, struct bp_worker *w)
{
	(void)state;
	atomic_fetch_add(&recs[bp_worker_id(w)].finis, 1);
}

static void st_process(void *state, struct bp_worker *w, struct bp_job **jobs,
		       unsigned n)
{
	(void)state;
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage stage = {
	.name = "threads",
	.init = st_init,
	.process = st_process,
	.fini = st_fini,
};

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	if (mine != &recs[NWORKERS])
		atomic_store(&sink_on_sink_thread, false);
	atomic_fetch_add(&delivered, n);
}

static void config(struct bp_pipeline_config *c)
{
	bp_pipeline_config_init(c);
	c->workers = NWORKERS;
	c->stage = &stage;
	c->sink = sink;
	c->thread_start = on_start;
	c->thread_stop = on_stop;
	c->thread_ctx = recs;
}

/* ------------------------------------------------------------- signals */

static atomic_ulong handled, handled_by_library;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&handled, 1);
	if (is_library_tid(bpt_gettid()))
		atomic_fetch_add(&handled_by_library, 1);
}

static atomic_bool signals_done;

/* The application thread that takes the signals: it leaves SIGUSR1 open. */
static void *catcher_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&signals_done))
		pt_sleep_ns(100000);
	return NULL;
}

static void *signaller_main(void *arg)
{
	unsigned long n = *(unsigned long *)arg;

	for (unsigned long i = 0; i < n; i++) {
		kill(getpid(), SIGUSR1);
		if (i % 8 == 0)
			pt_sleep_ns(20000); /* let the pending one be taken */
	}
	return NULL;
}

static void test_signals_stay_off_library_threads(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p;
	struct sigaction sa;
	sigset_t usr1, old;
	pthread_t catcher, signaller;
	unsigned long nsig = PT_TSAN ? 500 : 4000;
	static struct bp_job jobs[NJOBS];
	struct bp_job *ptrs[NJOBS];

	(void)unused;
	pt_watchdog_arm(120, "signals test");
	reset_recs();
	atomic_store(&handled, 0);
	atomic_store(&handled_by_library, 0);
	atomic_store(&signals_done, false);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	/* start the pipeline with SIGUSR1 open, as a plain program would */
	assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &usr1, &old), 0);
	config(&c);
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(pthread_create(&catcher, NULL, catcher_main, NULL), 0);
	/* main and the signaller (which inherits this mask) block it */
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &usr1, NULL), 0);
	assert_int_equal(
		pthread_create(&signaller, NULL, signaller_main, &nsig), 0);
	/* keep the library's threads busy and sleeping by turns meanwhile */
	for (unsigned i = 0; i < NJOBS; i++)
		ptrs[i] = &jobs[i];
	for (unsigned round = 0; round < 40; round++) {
		unsigned long want = atomic_load(&delivered) + NJOBS;

		assert_int_equal(bp_pipeline_submit(p, ptrs, NJOBS, 0, -1),
				 NJOBS);
		while (atomic_load(&delivered) < want)
			sched_yield();
		pt_sleep_ns(200000);
	}
	pthread_join(signaller, NULL);
	/* the last signal may still be pending: the catcher takes it */
	for (int i = 0; i < 2000 && atomic_load(&handled) == 0; i++)
		pt_sleep_ms(1);
	atomic_store(&signals_done, true);
	pthread_join(catcher, NULL);
	assert_int_equal(bp_pipeline_drain(p), 0);
	bp_pipeline_destroy(p);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pt_watchdog_disarm();

	printf("SIGUSR1: %lu handled, %lu on library threads\n",
	       atomic_load(&handled), atomic_load(&handled_by_library));
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_not_equal(atomic_load(&recs[i].tid), 0);
	assert_true(atomic_load(&handled) > 0);
	assert_int_equal(atomic_load(&handled_by_library), 0);
}

/* --------------------------------------------------------------- hooks */

static void check_hooks_ran(unsigned started_workers, bool sink_started)
{
	assert_int_equal(atomic_load(&bad_role), 0);
	for (unsigned i = 0; i < NTHREADS; i++) {
		struct rec *r = &recs[i];
		bool is_sink = i == NWORKERS;
		unsigned want = is_sink ? sink_started : i < started_workers;
		char name[16];

		assert_int_equal(atomic_load(&r->starts), want);
		assert_int_equal(atomic_load(&r->stops), want);
		if (!want)
			continue;
		assert_true(atomic_load(&r->stop_on_same));
		if (is_sink) {
			assert_string_equal(r->name, "bp-sink");
			continue;
		}
		snprintf(name, sizeof(name), "bp-worker-%u", i);
		assert_string_equal(r->name, name);
		assert_int_equal(atomic_load(&r->inits), 1);
		assert_true(atomic_load(&r->init_after_start));
		assert_int_equal(atomic_load(&r->finis),
				 (int)i == fail_init_worker ? 0 : 1);
		if ((int)i != fail_init_worker)
			assert_true(atomic_load(&r->fini_before_stop));
	}
}

static void test_hooks_once_per_thread(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p;
	static struct bp_job jobs[NJOBS];
	struct bp_job *ptrs[NJOBS];

	(void)unused;
	reset_recs();
	fail_init_worker = -1;
	atomic_store(&delivered, 0);
	config(&c);
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	for (unsigned i = 0; i < NJOBS; i++)
		ptrs[i] = &jobs[i];
	assert_int_equal(bp_pipeline_submit(p, ptrs, NJOBS, 0, -1), NJOBS);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&delivered), NJOBS);
	assert_true(atomic_load(&sink_on_sink_thread));
	check_hooks_ran(NWORKERS, true);
	/* distinct threads, none of them this one */
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_false(pthread_equal(recs[i].self, pthread_self()));
		for (unsigned j = 0; j < i; j++)
			assert_int_not_equal(atomic_load(&recs[i].tid),
					     atomic_load(&recs[j].tid));
	}
	bp_pipeline_destroy(p);
}

/* A failed start joins its threads: each ran its stop hook by then. */
static void test_hooks_on_failed_start(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p;

	(void)unused;
	reset_recs();
	fail_init_worker = 2;
	config(&c);
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), -ENODEV);
	check_hooks_ran(NWORKERS, false);
	bp_pipeline_destroy(p);
	fail_init_worker = -1;
}

/* No hooks (the default): threads run as before. */
static void test_no_hooks(void **unused)
{
	struct bp_pipeline_config c;
	struct bp_pipeline *p;
	static struct bp_job job;
	struct bp_job *ptr = &job;

	(void)unused;
	reset_recs();
	config(&c);
	c.thread_start = c.thread_stop = NULL;
	assert_int_equal(bp_pipeline_create(&c, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	assert_int_equal(bp_pipeline_submit(p, &ptr, 1, 0, -1), 1);
	assert_int_equal(bp_pipeline_drain(p), 0);
	bp_pipeline_destroy(p);
	for (unsigned i = 0; i < NTHREADS; i++)
		assert_int_equal(atomic_load(&recs[i].starts), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hooks_once_per_thread),
		cmocka_unit_test(test_hooks_on_failed_start),
		cmocka_unit_test(test_no_hooks),
		cmocka_unit_test(test_signals_stay_off_library_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
