/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/job.h - the header every job carries.
 *
 * Jobs are intrusive: the application embeds struct bp_job at the start of
 * its own job struct (or anywhere, and uses container_of) and passes
 * pointers to the header. The library allocates nothing per job.
 */
#ifndef BATCHPIPE_JOB_H
#define BATCHPIPE_JOB_H

#include <errno.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Job status: BP_JOB_OK, a negative errno (failed), or BP_JOB_CANCELLED. */
#define BP_JOB_OK	 0
#define BP_JOB_CANCELLED (-ECANCELED)

/* bp_job.stage of a job no stage of a chain has failed */
#define BP_JOB_NO_STAGE 0xffffffffu

struct bp_job {
	/* the fields the pipeline touches come first: one cache line */
	/* submission order, set by the pipeline at submit (with ingress
	 * lanes: unique, in order within a lane; pipeline.h) */
	uint64_t seq;
	int64_t submit_ns; /* CLOCK_MONOTONIC at submission (latency stats) */
	int32_t status;	   /* BP_JOB_OK at submit; a stage sets a failure */
	/*
	 * The pipeline's own word: it marks a job as submitted and not yet
	 * completed, so that a stage completing a job twice is refused. A
	 * bp_rdma_direct handle (no pipeline) marks its jobs out and back
	 * in it the same way. Nobody else writes it.
	 */
	uint32_t pipeline_word;
	/* the stage's own word while the job is in the stage (the RDMA
	 * stage keeps its in-flight slot there); the pipeline never touches
	 * it */
	uint32_t stage_word;
	/*
	 * The stage of a chain that first failed or cancelled the job
	 * (written by the pipeline; meaningful when status is not
	 * BP_JOB_OK): 0 in a one-stage pipeline; in a chain,
	 * BP_JOB_NO_STAGE until a stage completes the job failed (and again
	 * when a stage with BP_STAGE_TAKES_FAILED completes it ok).
	 */
	uint32_t stage;
	/*
	 * Per-operation context for an asynchronous stage: room and alignment
	 * for libfabric's struct fi_context2 (8 pointers), so an RDMA stage can
	 * pass job->op_context as the operation context and find the job again
	 * from a completion (container_of). Owned by the stage while the job
	 * is in flight.
	 */
	void *op_context[8];
};

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_JOB_H */
