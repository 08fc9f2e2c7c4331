/* SPDX-License-Identifier: MIT */
/*
 * run_batchpipe.c - variant (a) of `bpbench app`: the application written
 * the way README.md's "pipeline in one screen" shows it. Each producer
 * thread has a producer handle (bp_producer_create) and hands over every
 * job with bp_producer_submit, which submits max_batch = B of them at a
 * time; a stage computes the CRC32C of each job's payload on 2 workers; an
 * ordered pipeline gives the jobs to one sink callback in submission order,
 * which checks each one. Everything else is bp_pipeline_config_init's
 * default: waits (spin, then sleep), ring sizes, max_inflight, the flush
 * deadline, no pinning.
 */
#include <inttypes.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>

#include "app/app.h"

static void app_bp_process(void *state, struct bp_worker *w,
			   struct bp_job **jobs, unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		/* the header is the job's first member */
		app_compute((struct app_job *)jobs[i]);
		jobs[i]->status = BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage app_bp_stage = {
	.name = "crc32c",
	.process = app_bp_process,
};

/* Ordered: hdr.seq is the global submission order, and jobs come in it. */
static void app_bp_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct app_check *c = ctx;

	for (unsigned i = 0; i < n; i++) {
		if (__builtin_expect(jobs[i]->status != BP_JOB_OK, 0))
			bench_die("bpbench app: VERIFY FAILED: batchpipe "
				  "B=%u: job %" PRIu64 " has status %d\n",
				  c->B, jobs[i]->seq, (int)jobs[i]->status);
		app_check_job(c, (struct app_job *)jobs[i], jobs[i]->seq);
	}
	app_check_release(c);
}

static void app_bp_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	(void)level;
	fprintf(stderr, "bpbench app: batchpipe says: %s\n", msg);
}

static void *app_bp_producer(void *arg)
{
	struct app_producer *pr = arg;
	struct bp_producer *h;
	unsigned jobs = pr->run->o->jobs;
	int rc = bp_producer_create(pr->ctx, &h);

	if (rc)
		bench_die("bpbench app: bp_producer_create: %s\n",
			  bp_strerror(rc));
	app_run_wait_start(pr->run);
	for (uint64_t k = 0; k < jobs; k++) {
		rc = bp_producer_submit(h, &app_job_take(pr, k)->hdr);
		if (rc)
			bench_die("bpbench app: bp_producer_submit: %s\n",
				  bp_strerror(rc));
	}
	/* submits what is still staged */
	rc = bp_producer_destroy(h);
	if (rc)
		bench_die("bpbench app: bp_producer_destroy: %s\n",
			  bp_strerror(rc));
	return NULL;
}

void app_run_batchpipe(struct app_run *r)
{
	uint64_t total = (uint64_t)r->o->producers * r->o->jobs;
	struct bp_pipeline_config cfg;
	struct bp_pipeline_stats st;
	struct bp_pipeline *p;
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.workers = r->o->workers;
	cfg.max_batch = r->B;
	cfg.ordered = true;
	cfg.stage = &app_bp_stage;
	cfg.sink = app_bp_sink;
	cfg.sink_ctx = &r->check;
	cfg.log = app_bp_log;
	rc = bp_pipeline_create(&cfg, &p);
	if (!rc)
		rc = bp_pipeline_start(p);
	if (rc)
		bench_die("bpbench app: bp_pipeline_create/start: %s\n",
			  bp_strerror(rc));
	app_run_spawn_producers(r, app_bp_producer, p);
	app_run_begin(r);
	app_run_join_producers(r);
	rc = bp_pipeline_drain(p);
	if (rc)
		bench_die("bpbench app: bp_pipeline_drain: %s\n",
			  bp_strerror(rc));
	app_run_end(r);
	bp_pipeline_get_stats(p, &st);
	if (st.submitted != total || st.ok != total)
		bench_die("bpbench app: VERIFY FAILED: batchpipe B=%u: %" PRIu64
			  " jobs, pipeline submitted %" PRIu64 " ok %" PRIu64
			  " failed %" PRIu64 " cancelled %" PRIu64 "\n",
			  r->B, total, st.submitted, st.ok, st.failed,
			  st.cancelled);
	bp_pipeline_destroy(p);
}
