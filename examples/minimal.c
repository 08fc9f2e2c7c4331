/* SPDX-License-Identifier: MIT */
/* minimal: two producer threads, a squaring stage, a sink that sums. */
#include <pthread.h>
#include <stdio.h>

#include <batchpipe/batchpipe.h>

#define PER_PRODUCER 100000

struct job {
	struct bp_job hdr; /* the pipeline sees &job->hdr */
	long in, out;
};

static struct bp_pipeline *pipe_;
static struct job jobs[2][PER_PRODUCER];
static long sum, delivered; /* touched by the sink thread only */

static void square(void *state, struct bp_worker *w, struct bp_job **js,
		   unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)js[i];

		j->out = j->in * j->in;
		j->hdr.status = BP_JOB_OK;
	}
	bp_worker_complete(w, js, n); /* a synchronous stage completes here */
}

static void sink(void *ctx, struct bp_job **js, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++)
		sum += ((struct job *)js[i])->out;
	delivered += n;
}

static void *produce(void *arg)
{
	struct job *mine = arg;
	struct bp_producer *pr;

	if (bp_producer_create(pipe_, &pr) < 0)
		return arg;
	for (long i = 0; i < PER_PRODUCER; i++) {
		mine[i].in = i % 100;
		bp_producer_submit(pr, &mine[i].hdr); /* batches of max_batch */
	}
	bp_producer_destroy(pr); /* flushes the rest */
	return NULL;
}

int main(void)
{
	static const struct bp_stage stage = { .name = "square", .process = square };
	struct bp_pipeline_config cfg;
	struct bp_pipeline_stats st;
	pthread_t t[2];
	char json[4096];
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.stage = &stage;
	cfg.sink = sink;
	if ((rc = bp_pipeline_create(&cfg, &pipe_)) < 0 ||
	    (rc = bp_pipeline_start(pipe_)) < 0) {
		fprintf(stderr, "pipeline: %s\n", bp_strerror(rc));
		return 1;
	}
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, produce, jobs[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	bp_pipeline_drain(pipe_); /* everything delivered, threads joined */
	bp_pipeline_get_stats(pipe_, &st);
	bp_pipeline_stats_json(&st, json, sizeof(json));
	printf("delivered %ld, sum %ld\n%s\n", delivered, sum, json);
	bp_pipeline_destroy(pipe_);
	/* each producer sends 1000 rounds of 0..99: sum of squares 328350 */
	return delivered == 2 * PER_PRODUCER && sum == 2 * 1000 * 328350L ? 0 : 1;
}
