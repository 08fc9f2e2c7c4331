/* SPDX-License-Identifier: MIT */
/*
 * outside: a program built outside the source tree against an installed
 * batchpipe (pkg-config or a meson subproject). A pipeline with a stage that
 * doubles and a sink that sums; exits 0 only when every job arrived once,
 * with the right value, and the counters agree.
 */
#include <stdint.h>
#include <stdio.h>

#include <batchpipe/batchpipe.h>

#define NJOBS 20000
#define BATCH 64

struct job {
	struct bp_job hdr; /* the pipeline sees &job->hdr */
	long in, out;
};

struct totals {
	long sum, delivered, bad; /* the sink thread's alone until drain */
};

static struct job jobs[NJOBS];

static void twice(void *state, struct bp_worker *w, struct bp_job **js,
		  unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)js[i];

		j->out = 2 * j->in;
		j->hdr.status = BP_JOB_OK;
	}
	bp_worker_complete(w, js, n);
}

static void sink(void *ctx, struct bp_job **js, unsigned n)
{
	struct totals *t = ctx;

	for (unsigned i = 0; i < n; i++) {
		const struct job *j = (const struct job *)js[i];

		t->sum += j->out;
		t->bad += j->hdr.status != BP_JOB_OK || j->out != 2 * j->in;
	}
	t->delivered += n;
}

int main(void)
{
	static const struct bp_stage stage = {.name = "twice",
					      .process = twice};
	struct bp_pipeline_config cfg;
	struct bp_pipeline_stats st;
	struct bp_pipeline *p;
	struct totals t = {0, 0, 0};
	struct bp_job *batch[BATCH];
	long want = 0;
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.stage = &stage;
	cfg.sink = sink;
	cfg.sink_ctx = &t;
	if ((rc = bp_pipeline_create(&cfg, &p)) < 0) {
		fprintf(stderr, "outside: create: %s\n", bp_strerror(rc));
		return 1;
	}
	if ((rc = bp_pipeline_start(p)) < 0) {
		fprintf(stderr, "outside: start: %s\n", bp_strerror(rc));
		bp_pipeline_destroy(p);
		return 1;
	}
	for (unsigned i = 0; i < NJOBS; i += BATCH) {
		unsigned n = NJOBS - i < BATCH ? NJOBS - i : BATCH;

		for (unsigned k = 0; k < n; k++) {
			jobs[i + k].in = (long)(i + k);
			want += 2 * (long)(i + k);
			batch[k] = &jobs[i + k].hdr;
		}
		/* blocking, no time limit: takes all n or fails */
		rc = bp_pipeline_submit(p, batch, n, 0, -1);
		if (rc != (int)n) {
			fprintf(stderr, "outside: submit: %d (%s)\n", rc,
				rc < 0 ? bp_strerror(rc) : "short");
			bp_pipeline_abort(p);
			bp_pipeline_destroy(p);
			return 1;
		}
	}
	bp_pipeline_drain(p);
	rc = bp_pipeline_get_stats(p, &st);
	bp_pipeline_destroy(p);
	if (rc < 0) {
		fprintf(stderr, "outside: stats: %s\n", bp_strerror(rc));
		return 1;
	}
	printf("batchpipe %s: delivered %ld of %d, sum %ld (want %ld), "
	       "submitted %llu ok %llu failed %llu cancelled %llu\n",
	       bp_version(), t.delivered, NJOBS, t.sum, want,
	       (unsigned long long)st.submitted, (unsigned long long)st.ok,
	       (unsigned long long)st.failed, (unsigned long long)st.cancelled);
	return t.delivered == NJOBS && t.bad == 0 && t.sum == want &&
			       st.submitted == NJOBS && st.ok == NJOBS &&
			       st.failed == 0 && st.cancelled == 0
		       ? 0
		       : 1;
}
