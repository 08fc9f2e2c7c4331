/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/stage.h - what a worker runs.
 *
 * A stage is a table of callbacks run by every worker thread, each worker
 * with its own state pointer (made by init, handed to the others, freed by
 * fini). The worker loop, per pass:
 *
 *     poll(state, w)                    if jobs are in the stage
 *     dequeue a burst of <= B jobs      only while below its in-flight limit
 *     process(state, w, jobs, n)
 *     hand the completed jobs to the sink in one batch
 *
 * A synchronous stage sets each job's status and calls bp_worker_complete()
 * inside process. An asynchronous stage keeps jobs in flight (posting them
 * somewhere) and completes them later from poll, in any order. A worker
 * never takes more than max_inflight jobs at once; that is the pipeline's
 * backpressure.
 *
 * All callbacks but stats_json and stall_report run on the worker's own
 * thread; none may block for long (poll is called again as long as jobs
 * are in flight).
 */
#ifndef BATCHPIPE_STAGE_H
#define BATCHPIPE_STAGE_H

#include <stddef.h>

#include <batchpipe/job.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

struct bp_worker;

struct bp_stage {
	const char *name;
	/* optional: make the worker's state; non-zero (negative errno) fails
	 * start */
	int (*init)(struct bp_worker *w, void **state);
	/* required: start (and, if synchronous, complete) n jobs */
	void (*process)(void *state, struct bp_worker *w, struct bp_job **jobs,
			unsigned n);
	/* optional: reap asynchronous completions; called on every pass of
	 * the worker loop while jobs are in the stage (taken, not completed) */
	void (*poll)(void *state, struct bp_worker *w);
	/*
	 * optional: the pipeline is aborting; complete every in-flight job soon
	 * (with BP_JOB_CANCELLED or its real outcome). Called once, then poll
	 * keeps being called until nothing is in flight.
	 */
	void (*cancel)(void *state, struct bp_worker *w);
	/* optional: free the state; nothing is in flight any more */
	void (*fini)(void *state, struct bp_worker *w);
	/*
	 * optional: the stage's own statistics as one JSON value, snprintf
	 * rules (returns the length needed), for bp_pipeline_report_json.
	 * stage_ctx is always the one given to bp_pipeline_create, also after
	 * bp_pipeline_set_stage_ctx: a stage with stats_json keeps that one
	 * valid for the pipeline's life. Any thread (report_json's caller).
	 */
	int (*stats_json)(void *stage_ctx, char *buf, size_t size);
	/*
	 * optional: what the stage's jobs wait for, as one line of text
	 * (snprintf rules; 0: nothing to say). A stopper waiting for the
	 * workers logs it with its own report: the one that joins, every 10 s
	 * it waits, and drain_timeout when it expires. Called on the
	 * stopper's thread while the workers run, possibly by two stoppers at
	 * once; stage_ctx as for stats_json; must not wait for the workers.
	 */
	int (*stall_report)(void *stage_ctx, char *buf, size_t size);
	/*
	 * optional: the stage's own context, for a stage that is one object
	 * (the RDMA stage's table carries its struct bp_rdma): a pipeline
	 * config whose stage_ctx is NULL gets this one.
	 */
	void *ctx;
	/*
	 * Room for callbacks of later versions (the table is the caller's,
	 * copied at create): must be NULL, or bp_pipeline_create returns
	 * -EINVAL (logged). Designated initializers leave it NULL.
	 */
	void (*reserved_[2])(void);
};

/*
 * Complete n jobs (their status already set): they go to the sink with the
 * worker's next hand-off. Only from the worker's own thread (inside a stage
 * callback, fini excepted). Each job must be one this worker took and has
 * not completed.
 *
 * Returns the number of jobs accepted: n, or fewer when some were
 * completed already (twice in this call, or in an earlier one): each such
 * repeat is refused by itself (logged, naming the worker and the first
 * repeated job's seq) and the other jobs are accepted, so a repeat never
 * reaches the sink twice and never stands in for a job the stage still
 * holds. Returns -EINVAL (logged, naming the worker) and accepts none of
 * the n, which stay the stage's as before the call, when a job pointer is
 * NULL or odd, jobs is NULL with n > 0, or the jobs not completed already
 * are more than the stage holds (another worker's job, or one this worker
 * never took); -EINVAL without a log for a NULL w. A job is told completed
 * by its pipeline_word (job.h), which submit sets again: the check holds
 * while the job is in the pipeline. A repeat that comes after the sink has
 * returned the job is the stage's bug the pipeline cannot see: it reads a
 * job that may be freed, or takes a resubmitted job's repeat for its
 * completion.
 */
int bp_worker_complete(struct bp_worker *w, struct bp_job **jobs, unsigned n);

/* This worker's index, 0 .. workers-1 (UINT_MAX for NULL). Any callback. */
unsigned bp_worker_id(const struct bp_worker *w);

/*
 * The stage context pointer as currently configured (bp_pipeline_config's
 * stage_ctx, replaced live by bp_pipeline_set_stage_ctx). Stable for the
 * duration of one callback. Only from the worker's own thread; NULL for a
 * NULL w.
 */
void *bp_worker_stage_ctx(const struct bp_worker *w);

/*
 * Jobs this worker holds against its max_inflight: taken and not yet handed
 * to the sink (with ordered output: not yet delivered by the sink). Only
 * from the worker's own thread; 0 for a NULL w.
 */
unsigned bp_worker_inflight(const struct bp_worker *w);

/*
 * For a stage whose poll sleeps while its jobs are in flight (on its
 * completion queues' descriptors, or for a back-off): a way to wake up for
 * new jobs as well, so that intake never waits on a completion wait.
 *
 * bp_worker_intake_fd: an eventfd of the pipeline's, the same for every
 * worker, made on the first call; -errno if it cannot be. Add it to the
 * stage's epoll set with EPOLLIN | EPOLLET and never read it: each job
 * publication that finds an armed worker writes it once, an event in every
 * set that holds it. Owned by the pipeline (closed by bp_pipeline_destroy;
 * take it out of a longer-lived set in fini).
 *
 * Around each sleep: bp_worker_intake_arm, then, if it returned 0, the
 * sleep (epoll_wait with the fd in the set), then bp_worker_intake_disarm,
 * always. arm returns 1 without arming when jobs this worker may take are
 * waiting already (do not sleep), 0 otherwise (armed; or not armed because
 * the worker holds max_inflight jobs and could take none, or intake is
 * closed and empty, so no job can come). Cost: the arm is
 * a fence and a look at ingress; a producer that finds a worker armed pays
 * one write(2) more on its wake-up path.
 *
 * Only from the worker's own thread, inside poll; -EINVAL for a NULL w
 * (arm), no-op (disarm).
 */
int bp_worker_intake_fd(struct bp_worker *w);
int bp_worker_intake_arm(struct bp_worker *w);
void bp_worker_intake_disarm(struct bp_worker *w);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_STAGE_H */
