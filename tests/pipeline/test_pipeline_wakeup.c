/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_wakeup - a sink batch wakes only the worker it let go on.
 *
 * Eight workers, each held back by the sink: egress rings of one slot and
 * max_inflight 1, so after every job a worker waits for the sink (room in
 * its egress ring; in ordered mode, the sink's delivery credit). The sink
 * takes one job from one worker per batch and spends 300 us on it. Workers
 * wait with BP_WAIT_SLEEP, so every wait that does not find its condition
 * true is one futex sleep: one voluntary context switch of that worker
 * thread (getrusage(RUSAGE_THREAD), read inside the stage callbacks).
 *
 * A batch frees one worker. Waking only that one costs about one sleep per
 * job over all workers; waking every held-back worker makes each of them
 * wake, find nothing and sleep again: about one sleep per job per worker
 * (7 to 8 per job here). The bound, 3 per job, is a count of events, not a
 * timing, and lies far from both.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <batchpipe/batchpipe.h>

#include "pt_common.h"

PT_DEFINE_GLOBALS;

#define WORKERS	    8
#define SINK_NS	    300000
#define MAX_PER_JOB 3.0

struct job {
	struct bp_job hdr;
};

/* per worker: voluntary switches at its first job, and at its last call */
static long first_csw[WORKERS], last_csw[WORKERS];
static bool seen[WORKERS];

static long thread_csw(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : -1;
}

static void process(void *state, struct bp_worker *w, struct bp_job **jobs,
		    unsigned n)
{
	unsigned id = bp_worker_id(w);

	(void)state;
	if (!seen[id]) {
		seen[id] = true;
		first_csw[id] = thread_csw();
	}
	last_csw[id] = thread_csw();
	for (unsigned i = 0; i < n; i++)
		jobs[i]->status = BP_JOB_OK;
	bp_worker_complete(w, jobs, n);
}

/* Runs on the worker thread once it is done: its final count. */
static void fini(void *state, struct bp_worker *w)
{
	(void)state;
	last_csw[bp_worker_id(w)] = thread_csw();
}

static const struct bp_stage stage = {
	.name = "wakeup", .process = process, .fini = fini};

/* A slow sink that does not sleep itself: spins SINK_NS per batch. */
static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	int64_t end = pt_now_ns() + SINK_NS;

	(void)ctx;
	(void)jobs;
	(void)n;
	while (pt_now_ns() < end)
		;
}

static int run(bool ordered)
{
	enum { N = 400 };
	static struct job jobs[N];
	struct bp_job *ptrs[N];
	struct bp_pipeline_config cfg;
	struct bp_pipeline_stats st;
	struct bp_pipeline *p = NULL;
	long sleeps = 0;
	int rc;

	for (unsigned i = 0; i < WORKERS; i++)
		seen[i] = false;
	bp_pipeline_config_init(&cfg);
	cfg.stage = &stage;
	cfg.sink = sink;
	cfg.workers = WORKERS;
	cfg.ordered = ordered;
	cfg.egress_capacity = 1;
	cfg.max_batch = 1;
	cfg.max_inflight = 1;
	cfg.worker_wait.strategy = BP_WAIT_SLEEP;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		fprintf(stderr, "FAIL: pipeline: %s\n", bp_strerror(rc));
		return 1;
	}
	for (unsigned i = 0; i < N; i++)
		ptrs[i] = &jobs[i].hdr;
	pt_watchdog_arm(60, "%s held-back pipeline",
			ordered ? "ordered" : "unordered");
	rc = bp_pipeline_submit(p, ptrs, N, 0, -1);
	if (rc != N) {
		fprintf(stderr, "FAIL: submit returned %d\n", rc);
		return 1;
	}
	bp_pipeline_drain(p); /* joins the workers: their counts are final */
	pt_watchdog_disarm();
	bp_pipeline_get_stats(p, &st);
	bp_pipeline_destroy(p);
	if (st.ok != N) {
		fprintf(stderr, "FAIL: %llu of %d jobs delivered\n",
			(unsigned long long)st.ok, N);
		return 1;
	}
	for (unsigned i = 0; i < WORKERS; i++)
		if (seen[i])
			sleeps += last_csw[i] - first_csw[i];
	printf("%s: %ld worker sleeps for %d jobs (%.2f per job, bound %.1f)\n",
	       ordered ? "ordered" : "unordered", sleeps, N, (double)sleeps / N,
	       MAX_PER_JOB);
	if ((double)sleeps > MAX_PER_JOB * N) {
		fprintf(stderr,
			"FAIL: %s: held-back workers slept %.2f times per job: "
			"a sink batch wakes workers it did not let go on\n",
			ordered ? "ordered" : "unordered", (double)sleeps / N);
		return 1;
	}
	return 0;
}

int main(void)
{
	int fail = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	fail |= run(false);
	fail |= run(true);
	return fail;
}
