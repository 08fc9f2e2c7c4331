/* SPDX-License-Identifier: MIT */
/*
 * test_abi - the layouts callers compile into their programs (the structs
 * they allocate or embed) are the ones the soname promises, and the room
 * reserved for growth is enforced: a config or stage table with a reserved
 * field set is refused, and stats leave theirs zero.
 *
 * The sizes and offsets are those of x86_64 (LP64). A change that moves
 * one is an ABI change: it needs a new soname (README, "ABI"), and then
 * this table is updated with it.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <batchpipe/batchpipe.h>

#if defined(__x86_64__) && defined(__LP64__)
/* embedded in every job: the first cache line is the pipeline's */
_Static_assert(sizeof(struct bp_job) == 96, "struct bp_job size");
_Static_assert(offsetof(struct bp_job, seq) == 0, "bp_job.seq");
_Static_assert(offsetof(struct bp_job, submit_ns) == 8, "bp_job.submit_ns");
_Static_assert(offsetof(struct bp_job, status) == 16, "bp_job.status");
/* 0.4.0: pipeline_word next to status (one 8-byte word), then stage_word */
_Static_assert(offsetof(struct bp_job, pipeline_word) == 20,
	       "bp_job.pipeline_word");
_Static_assert(offsetof(struct bp_job, stage_word) == 24, "bp_job.stage_word");
_Static_assert(offsetof(struct bp_job, stage) == 28, "bp_job.stage");
_Static_assert(offsetof(struct bp_job, op_context) == 32, "bp_job.op_context");
/* on the caller's stack, filled by the zero-copy calls */
_Static_assert(sizeof(struct bp_ring_zc) == 56, "struct bp_ring_zc size");
_Static_assert(sizeof(struct bp_wait_policy) == 12, "bp_wait_policy size");
/* caller-allocated, grown only into their reserved_ tails */
_Static_assert(sizeof(struct bp_pipeline_config) == 224,
	       "struct bp_pipeline_config size");
_Static_assert(offsetof(struct bp_pipeline_config, stages) == 160,
	       "bp_pipeline_config.stages");
_Static_assert(offsetof(struct bp_pipeline_config, ingress_lanes) == 176,
	       "bp_pipeline_config.ingress_lanes");
_Static_assert(offsetof(struct bp_pipeline_config, reserved_) == 184,
	       "bp_pipeline_config.reserved_");
_Static_assert(sizeof(struct bp_chain_stage) == 80,
	       "struct bp_chain_stage size");
_Static_assert(sizeof(struct bp_pipeline_stats) == 2304,
	       "struct bp_pipeline_stats size");
_Static_assert(sizeof(struct bp_stage_stats) == 208,
	       "struct bp_stage_stats size");
_Static_assert(sizeof(struct bp_stage) == 88, "struct bp_stage size");
_Static_assert(offsetof(struct bp_stage, stall_report) == 56,
	       "bp_stage.stall_report");
_Static_assert(offsetof(struct bp_stage, ctx) == 64, "bp_stage.ctx");
_Static_assert(offsetof(struct bp_stage, reserved_) == 72,
	       "bp_stage.reserved_");
#endif

static int failed;

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "FAIL: %s\n", what);
		failed = 1;
	}
}

static void process(void *state, struct bp_worker *w, struct bp_job **jobs,
		    unsigned n)
{
	(void)state;
	bp_worker_complete(w, jobs, n);
}

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	(void)n;
}

static int logged;

static void log_cb(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	(void)lvl;
	logged += strstr(msg, "reserved_") != NULL;
}

static void noop(void)
{
}

int main(void)
{
	struct bp_stage stage = {.name = "abi", .process = process};
	struct bp_pipeline_config c;
	struct bp_pipeline_stats st;
	struct bp_pipeline *p = NULL;
	int rc;

	bp_pipeline_config_init(&c);
	for (unsigned i = 0; i < sizeof(c.reserved_) / sizeof(c.reserved_[0]);
	     i++)
		check(c.reserved_[i] == 0, "config_init zeroes reserved_");
	c.stage = &stage;
	c.sink = sink;
	c.log = log_cb;

	c.reserved_[3] = 1;
	rc = bp_pipeline_create(&c, &p);
	check(rc == -EINVAL && !p, "a config with reserved_ set is refused");
	check(logged == 1, "the refusal names reserved_ in the log");
	c.reserved_[3] = 0;
	check(c.reserved32_ == 0, "config_init zeroes reserved32_");
	c.reserved32_ = 1;
	rc = bp_pipeline_create(&c, &p);
	check(rc == -EINVAL && !p, "a config with reserved32_ set is refused");
	c.reserved32_ = 0;

	stage.reserved_[1] = noop;
	rc = bp_pipeline_create(&c, &p);
	check(rc == -EINVAL && !p, "a stage with reserved_ set is refused");
	check(logged == 2, "the refusal names the stage's reserved_");
	stage.reserved_[1] = NULL;

	rc = bp_pipeline_create(&c, &p);
	check(rc == 0 && p, "the same config with reserved_ zero is taken");
	if (rc == 0) {
		memset(&st, 0xa5, sizeof(st));
		check(bp_pipeline_get_stats(p, &st) == 0, "stats");
		for (unsigned i = 0;
		     i < sizeof(st.reserved_) / sizeof(st.reserved_[0]); i++)
			check(st.reserved_[i] == 0, "stats write reserved_ 0");
		bp_pipeline_destroy(p);
	}
	printf("config %zu bytes, stats %zu, stage %zu, job %zu: %s\n",
	       sizeof(struct bp_pipeline_config),
	       sizeof(struct bp_pipeline_stats), sizeof(struct bp_stage),
	       sizeof(struct bp_job), failed ? "FAILED" : "ok");
	return failed;
}
