/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_chain - chains of stages (bp_pipeline_config.stages).
 *
 * Three stages: stage 0 computes a value from the job's seq; stage 1
 * checks it and fails every job whose seq % FAIL_EVERY == FAIL_AT (-EIO);
 * stage 2 is asynchronous: it holds the jobs it takes and completes them
 * from poll in reverse order of taking. Each stage marks the job with its
 * bit and checks the bits of the stages before it, so a job that skipped a
 * stage or visited one twice is caught where it happens. With P producers
 * submitting concurrently, for every mode (unordered, ordered; with and
 * without BP_STAGE_TAKES_FAILED on stage 2; a small chain_max_inflight):
 *
 *   - every job reaches the sink exactly once; the failed ones with -EIO
 *     and job->stage 1 (the first stage that failed them, also when
 *     stage 2 takes them), having skipped stage 2 unless it takes them;
 *     the others ok, through all three stages in order;
 *   - ordered: the sink sees seqs in submission order;
 *   - stage 0 never holds more than the gate allows ahead of the sink;
 *   - bp_worker_id() is within the worker's stage;
 *   - the report has every stage, with the jobs each took.
 *
 * A serial stage (BP_STAGE_SERIAL) between two parallel ones: its process
 * sees every ok job in submission order and no failed one, and jobs
 * stage 0 failed still reach the sink once, with stage 0 named.
 *
 * Then: abort during a live change while producers submit (every job
 * accounted: ok + failed + cancelled == submitted, cancelled jobs with the
 * stage that cancelled them), flush racing with producers and with a
 * drain, live changes per stage (the new stage context is what the stage
 * sees once the call returned), and the config's misuse (each -EINVAL).
 * Scaled down under TSAN.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <batchpipe/batchpipe.h>

#include "pt_common.h"

PT_DEFINE_GLOBALS;

#define FAIL_EVERY 7
#define FAIL_AT	   3
#define PRODUCERS  4
#define HOLD	   16 /* stage 2 holds up to this many per worker */

struct job {
	struct bp_job hdr;
	uint64_t value;	      /* stage 0 writes, stage 1 checks */
	atomic_uint visits;   /* bit k: stage k processed it */
	atomic_int delivered; /* sink */
};

static uint64_t value_of(uint64_t seq)
{
	return seq * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995u;
}

/* ------------------------------------------------------------ the run */

struct run {
	struct job *jobs;
	unsigned n;
	bool ordered, takes_failed;
	unsigned gate; /* chain_max_inflight, 0: default */
	unsigned lanes; /* ingress_lanes, 0: default */
	unsigned gate_limit; /* what stage 0 may hold ahead of the sink */
	atomic_uint delivered, failed, cancelled;
	atomic_llong next_seq; /* ordered: the seq the sink expects */
	atomic_llong ahead;    /* stage 0 took, the sink has not delivered */
	atomic_llong max_ahead;
	unsigned stage_workers[3];
	/* what each stage's callbacks may see: ctx, or during a change
	 * (until the call returned) ctx_old */
	atomic_uintptr_t ctx[3], ctx_old[3];
	atomic_int ctx_wrong; /* a callback saw another stage's context */
	struct prod *prods;   /* the producers, for flush's snapshot */
};

static struct run R;

static bool mark(struct bp_worker *w, struct job *j, unsigned k)
{
	unsigned before = atomic_fetch_or(&j->visits, 1u << k);
	unsigned want = (1u << k) - 1;

	if (R.takes_failed && k == 2)
		want = 3; /* failed or not, both before it */
	if (before != want) {
		pt_fail("stage %u: job seq %llu came with visits 0x%x, not 0x%x",
			k, (unsigned long long)j->hdr.seq, before, want);
		return false;
	}
	if (bp_worker_id(w) >= R.stage_workers[k])
		pt_fail("stage %u: worker id %u of %u", k, bp_worker_id(w),
			R.stage_workers[k]);
	return true;
}

static void check_ctx(struct bp_worker *w, unsigned k)
{
	uintptr_t c = (uintptr_t)bp_worker_stage_ctx(w);

	if (c != atomic_load(&R.ctx[k]) && c != atomic_load(&R.ctx_old[k]))
		atomic_store(&R.ctx_wrong, 1);
}

static void s0_process(void *state, struct bp_worker *w,
		       struct bp_job **jobs, unsigned n)
{
	long long a;

	(void)state;
	check_ctx(w, 0);
	a = atomic_fetch_add(&R.ahead, n) + n;
	for (long long m = atomic_load(&R.max_ahead); a > m;)
		if (atomic_compare_exchange_weak(&R.max_ahead, &m, a))
			break;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];

		mark(w, j, 0);
		j->value = value_of(j->hdr.seq);
		jobs[i]->status = BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

static void s1_process(void *state, struct bp_worker *w,
		       struct bp_job **jobs, unsigned n)
{
	(void)state;
	check_ctx(w, 1);
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];

		mark(w, j, 1);
		if (j->value != value_of(j->hdr.seq))
			pt_fail("stage 1: job seq %llu lost stage 0's value",
				(unsigned long long)j->hdr.seq);
		jobs[i]->status = j->hdr.seq % FAIL_EVERY == FAIL_AT
					  ? -EIO
					  : BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

/* stage 2: hold, complete in reverse from poll */
struct s2 {
	struct bp_job *held[BP_MAX_INFLIGHT > 4096 ? 4096 : BP_MAX_INFLIGHT];
	unsigned n;
};

static int s2_init(struct bp_worker *w, void **state)
{
	(void)w;
	*state = calloc(1, sizeof(struct s2));
	return *state ? 0 : -ENOMEM;
}

static void s2_fini(void *state, struct bp_worker *w)
{
	(void)w;
	if (((struct s2 *)state)->n)
		pt_fail("stage 2: fini with %u jobs held",
			((struct s2 *)state)->n);
	free(state);
}

static void s2_process(void *state, struct bp_worker *w,
		       struct bp_job **jobs, unsigned n)
{
	struct s2 *s = state;

	check_ctx(w, 2);
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];

		mark(w, j, 2);
		if (jobs[i]->status != BP_JOB_OK &&
		    (jobs[i]->status != -EIO || jobs[i]->stage != 1))
			pt_fail("stage 2: a failed job came with status %d "
				"from stage %u",
				jobs[i]->status, jobs[i]->stage);
		s->held[s->n++] = jobs[i];
	}
}

static void s2_poll(void *state, struct bp_worker *w)
{
	struct s2 *s = state;

	/* reverse order of taking, a few at a time */
	while (s->n) {
		struct bp_job *j = s->held[--s->n];

		if (bp_worker_complete(w, &j, 1) != 1)
			pt_fail("stage 2: complete refused");
		if (s->n % 5 == 0)
			break;
	}
}

static void s2_cancel(void *state, struct bp_worker *w)
{
	struct s2 *s = state;

	for (unsigned i = 0; i < s->n; i++)
		if (s->held[i]->status == BP_JOB_OK)
			s->held[i]->status = BP_JOB_CANCELLED;
	bp_worker_complete(w, s->held, s->n);
	s->n = 0;
}

static const struct bp_stage stage0 = {.name = "value",
				       .process = s0_process};
static const struct bp_stage stage1 = {.name = "check",
				       .process = s1_process};
static const struct bp_stage stage2 = {.name = "reverse",
				       .init = s2_init,
				       .process = s2_process,
				       .poll = s2_poll,
				       .cancel = s2_cancel,
				       .fini = s2_fini};

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	atomic_fetch_sub(&R.ahead, n);
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];
		unsigned v = atomic_load(&j->visits);
		int st = jobs[i]->status;

		if (atomic_fetch_add(&j->delivered, 1))
			pt_fail("job seq %llu delivered twice",
				(unsigned long long)j->hdr.seq);
		if (R.ordered) {
			long long want = atomic_load(&R.next_seq);

			if ((long long)j->hdr.seq != want)
				pt_fail("ordered: seq %llu delivered, %lld "
					"expected",
					(unsigned long long)j->hdr.seq, want);
			atomic_store(&R.next_seq, (long long)j->hdr.seq + 1);
		}
		if (st == BP_JOB_CANCELLED) {
			atomic_fetch_add(&R.cancelled, 1);
			if (j->hdr.stage > 2)
				pt_fail("cancelled in stage %u", j->hdr.stage);
		} else if (j->hdr.seq % FAIL_EVERY == FAIL_AT) {
			unsigned want_stage = 1; /* the first to fail it */
			unsigned want_v = R.takes_failed ? 7 : 3;

			atomic_fetch_add(&R.failed, 1);
			if (st != -EIO || j->hdr.stage != want_stage ||
			    v != want_v)
				pt_fail("failed job seq %llu: status %d stage "
					"%u visits 0x%x (want -EIO, %u, 0x%x)",
					(unsigned long long)j->hdr.seq, st,
					j->hdr.stage, v, want_stage, want_v);
		} else if (st != BP_JOB_OK || v != 7) {
			pt_fail("job seq %llu: status %d visits 0x%x",
				(unsigned long long)j->hdr.seq, st, v);
		}
	}
	atomic_fetch_add_explicit(&R.delivered, n, memory_order_release);
}

static void test_log(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	if (getenv("BP_TEST_VERBOSE") || lvl == BP_LOG_ERROR)
		fprintf(stderr, "[log %d] %s\n", lvl, msg);
}

static struct bp_pipeline *open_chain(unsigned w0, unsigned w1, unsigned w2,
				      unsigned B)
{
	struct bp_chain_stage cs[3];
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;
	int rc;

	memset(cs, 0, sizeof(cs));
	cs[0] = (struct bp_chain_stage){
		.stage = &stage0,
		.workers = w0,
		.stage_ctx = (void *)atomic_load(&R.ctx[0])};
	cs[1] = (struct bp_chain_stage){
		.stage = &stage1,
		.workers = w1,
		.stage_ctx = (void *)atomic_load(&R.ctx[1]),
		.capacity = 64};
	cs[2] = (struct bp_chain_stage){
		.stage = &stage2,
		.workers = w2,
		.stage_ctx = (void *)atomic_load(&R.ctx[2]),
		.max_inflight = HOLD,
		.max_batch = B < HOLD ? B : HOLD,
		.flags = R.takes_failed ? BP_STAGE_TAKES_FAILED : 0};
	R.stage_workers[0] = w0;
	R.stage_workers[1] = w1;
	R.stage_workers[2] = w2;
	bp_pipeline_config_init(&cfg);
	cfg.stages = cs;
	cfg.n_stages = 3;
	cfg.ordered = R.ordered;
	cfg.max_batch = B;
	cfg.max_inflight = 256;
	cfg.ingress_capacity = 512;
	cfg.chain_max_inflight = R.gate;
	cfg.ingress_lanes = R.lanes;
	cfg.sink = sink;
	cfg.log = test_log;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		pt_fail("chain: %s", bp_strerror(rc));
		bp_pipeline_destroy(p);
		return NULL;
	}
	/* stage 0's workers may each take up to a batch past the gate */
	R.gate_limit = R.gate ? R.gate + w0 * B : 0;
	return p;
}

static void reset(unsigned n)
{
	free(R.jobs);
	memset(&R, 0, sizeof(R));
	R.jobs = calloc(n, sizeof(*R.jobs));
	R.n = n;
	for (int k = 0; k < 3; k++)
		atomic_store(&R.ctx[k], (uintptr_t)(0x1000 * (k + 1)));
}

struct prod {
	struct bp_pipeline *p;
	unsigned first, n, B;
	atomic_uint *accepted;
	atomic_uint done; /* jobs [first, first + done) accepted */
};

static void *producer(void *arg)
{
	struct prod *a = arg;

	for (unsigned i = 0; i < a->n;) {
		struct bp_job *h[64];
		unsigned k = a->n - i < a->B ? a->n - i : a->B;
		int rc;

		for (unsigned m = 0; m < k; m++)
			h[m] = &R.jobs[a->first + i + m].hdr;
		rc = bp_pipeline_submit(a->p, h, k, 0, -1);
		if (rc == -EPIPE)
			break; /* aborted */
		if (rc <= 0) {
			pt_fail("submit: %s", bp_strerror(rc));
			break;
		}
		atomic_fetch_add(a->accepted, (unsigned)rc);
		i += (unsigned)rc;
		atomic_store(&a->done, i);
	}
	return NULL;
}

static unsigned run_producers(struct bp_pipeline *p, unsigned B,
			      void (*meanwhile)(struct bp_pipeline *))
{
	pthread_t t[PRODUCERS];
	struct prod a[PRODUCERS];
	atomic_uint accepted = 0;
	unsigned per = R.n / PRODUCERS;

	for (unsigned i = 0; i < PRODUCERS; i++) {
		a[i] = (struct prod){p, i * per, per, B > 64 ? 64 : B,
				     &accepted, 0};
		pthread_create(&t[i], NULL, producer, &a[i]);
	}
	R.prods = a;
	if (meanwhile)
		meanwhile(p);
	for (unsigned i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	R.prods = NULL;
	return atomic_load(&accepted);
}

/*
 * After a drain, each stage's counters: its workers, the jobs it took (all
 * of them but those stage 1 failed, for stage 2 unless it takes failed
 * jobs), every one completed and handed on, its take sizes adding up to
 * its takes; together the pipeline's worker_jobs. No stage 3.
 */
static void check_stage_stats(struct bp_pipeline *p, unsigned n)
{
	struct bp_pipeline_stats all;
	uint64_t jobs_sum = 0;

	for (unsigned k = 0; k < 3; k++) {
		struct bp_stage_stats s;
		uint64_t takes = 0;
		unsigned jobs = k < 2 || R.takes_failed
					? n
					: n - (unsigned)atomic_load(&R.failed);
		int rc = bp_pipeline_get_stage_stats(p, k, &s);

		if (rc) {
			pt_fail("stage %u stats: %s", k, bp_strerror(rc));
			return;
		}
		for (unsigned b = 0; b < BP_BATCH_BUCKETS; b++)
			takes += s.batch_hist[b];
		if (s.workers != R.stage_workers[k] || s.jobs != jobs ||
		    s.completed != jobs || s.handed != jobs ||
		    takes != s.batches || (jobs && !s.batches) ||
		    s.batches > s.jobs || s.queue_high_water > 512)
			pt_fail("stage %u stats: workers %u jobs %llu completed "
				"%llu handed %llu batches %llu (hist %llu) high "
				"water %u; want %u workers, %u jobs",
				k, s.workers, (unsigned long long)s.jobs,
				(unsigned long long)s.completed,
				(unsigned long long)s.handed,
				(unsigned long long)s.batches,
				(unsigned long long)takes, s.queue_high_water,
				R.stage_workers[k], jobs);
		for (unsigned i = 0; i < 8; i++)
			if (s.reserved_[i])
				pt_fail("stage %u stats: reserved_ not 0", k);
		jobs_sum += s.jobs;
	}
	bp_pipeline_get_stats(p, &all);
	if (all.worker_jobs != jobs_sum)
		pt_fail("stages took %llu jobs, the pipeline's worker_jobs %llu",
			(unsigned long long)jobs_sum,
			(unsigned long long)all.worker_jobs);
	{
		struct bp_stage_stats s;

		if (bp_pipeline_get_stage_stats(p, 3, &s) != -EINVAL ||
		    bp_pipeline_get_stage_stats(p, 0, NULL) != -EINVAL ||
		    bp_pipeline_get_stage_stats(NULL, 0, &s) != -EINVAL)
			pt_fail("stage stats: no -EINVAL for stage 3 or NULL");
	}
}

/* The report names every stage, with the jobs each took. */
static void check_report(struct bp_pipeline *p, unsigned n)
{
	char buf[16384];
	int len = bp_pipeline_report_json(p, buf, sizeof(buf));
	const char *names[3] = {"value", "check", "reverse"};
	const char *at;

	if (len <= 0 || (size_t)len >= sizeof(buf)) {
		pt_fail("report: %d", len);
		return;
	}
	at = strstr(buf, "\"stages\":[");
	for (unsigned k = 0; at && k < 3; k++) {
		char want[96];
		unsigned jobs = k < 2 || R.takes_failed
					? n
					: n - (unsigned)atomic_load(&R.failed);

		snprintf(want, sizeof(want),
			 "{\"name\":\"%s\",\"workers\":%u,\"jobs\":%u,",
			 names[k], R.stage_workers[k], jobs);
		at = strstr(at, want);
		if (!at)
			pt_fail("report: no %s in %s", want, buf);
	}
	if (!strstr(buf, "\"stages\":["))
		pt_fail("report without stages: %s", buf);
	check_stage_stats(p, n);
}

static void one_mode(const char *name, bool ordered, bool takes_failed,
		     unsigned gate, unsigned lanes, unsigned B, unsigned n)
{
	struct bp_pipeline *p;
	unsigned accepted, want_failed = 0;
	int rc;

	reset(n);
	R.ordered = ordered;
	R.takes_failed = takes_failed;
	R.gate = gate;
	R.lanes = lanes;
	p = open_chain(2, 3, 2, B);
	if (!p)
		return;
	accepted = run_producers(p, B, NULL);
	rc = bp_pipeline_drain(p);
	if (rc || accepted != n)
		pt_fail("%s: drain %s, %u of %u accepted", name, bp_strerror(rc),
			accepted, n);
	if (atomic_load(&R.delivered) != n)
		pt_fail("%s: %u of %u delivered", name,
			atomic_load(&R.delivered), n);
	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&R.jobs[i].delivered) != 1)
			pt_fail("%s: job %u delivered %d times", name, i,
				atomic_load(&R.jobs[i].delivered));
	/* stage 1 fails by seq (dense without lanes: every FAIL_EVERY-th) */
	for (unsigned i = 0; i < n; i++)
		want_failed += R.jobs[i].hdr.seq % FAIL_EVERY == FAIL_AT;
	if (!lanes && want_failed != (n + FAIL_EVERY - 1 - FAIL_AT) / FAIL_EVERY)
		pt_fail("%s: seqs not dense", name);
	if (atomic_load(&R.failed) != want_failed)
		pt_fail("%s: %u failed, %u expected", name,
			atomic_load(&R.failed), want_failed);
	if (R.gate && atomic_load(&R.max_ahead) > (long long)R.gate_limit)
		pt_fail("%s: stage 0 held %lld ahead of the sink, gate %u "
			"(limit %u)",
			name, (long long)atomic_load(&R.max_ahead), R.gate,
			R.gate_limit);
	if (atomic_load(&R.ctx_wrong))
		pt_fail("%s: a stage saw another stage's context", name);
	check_report(p, n);
	printf("%-28s B=%-3u %u jobs, %u failed, most ahead of the sink %lld\n",
	       name, B, n, atomic_load(&R.failed),
	       (long long)atomic_load(&R.max_ahead));
	bp_pipeline_destroy(p);
}

/* ------------------------------------------------------ serial stage */

/*
 * A serial stage's checks (its stage context): process calls never
 * overlap, get at most B jobs, and see the ok jobs in seq order with only
 * the failed seqs (FAIL_AT) missing; bit: its mark in the job's visits.
 * An async one holds what it gets and completes it from poll.
 */
struct serial_check {
	atomic_llong last;
	atomic_uint seen, calls;
	atomic_int inside;
	unsigned B, bit;
	bool async;
};

/* stage 0 of the serial chains: fails seq % FAIL_EVERY == FAIL_AT */
static void sf_process(void *state, struct bp_worker *w, struct bp_job **jobs,
		       unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];

		atomic_fetch_or(&j->visits, 1u);
		jobs[i]->status = j->hdr.seq % FAIL_EVERY == FAIL_AT
					  ? -EIO
					  : BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

struct ser_state {
	struct bp_job *held[256];
	unsigned n;
};

static int ser_init(struct bp_worker *w, void **state)
{
	(void)w;
	*state = calloc(1, sizeof(struct ser_state));
	return *state ? 0 : -ENOMEM;
}

static void ser_fini(void *state, struct bp_worker *w)
{
	(void)w;
	if (((struct ser_state *)state)->n)
		pt_fail("serial: fini with jobs held");
	free(state);
}

static void ser_process(void *state, struct bp_worker *w,
			struct bp_job **jobs, unsigned n)
{
	struct serial_check *c = bp_worker_stage_ctx(w);
	struct ser_state *s = state;

	if (atomic_fetch_add(&c->inside, 1))
		pt_fail("serial: two process calls at once");
	atomic_fetch_add(&c->calls, 1);
	if (n > c->B)
		pt_fail("serial: process got %u jobs, max_batch %u", n, c->B);
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];
		long long last = atomic_load(&c->last);

		atomic_fetch_or(&j->visits, c->bit);
		if (jobs[i]->status != BP_JOB_OK)
			pt_fail("serial: a failed job (seq %llu) came in",
				(unsigned long long)j->hdr.seq);
		if ((long long)j->hdr.seq <= last)
			pt_fail("serial: seq %llu after %lld",
				(unsigned long long)j->hdr.seq, last);
		/* the next ok seq: failed ones (FAIL_AT) skipped */
		for (long long q = last + 1; q < (long long)j->hdr.seq; q++)
			if (q % FAIL_EVERY != FAIL_AT)
				pt_fail("serial: seq %lld skipped (now %llu)", q,
					(unsigned long long)j->hdr.seq);
		atomic_store(&c->last, (long long)j->hdr.seq);
		atomic_fetch_add(&c->seen, 1);
		if (c->async)
			s->held[s->n++] = jobs[i];
	}
	atomic_fetch_sub(&c->inside, 1);
	if (!c->async)
		bp_worker_complete(w, jobs, n);
}

static void ser_poll(void *state, struct bp_worker *w)
{
	struct ser_state *s = state;

	/* complete a few at a time, newest first */
	for (unsigned k = 0; k < 3 && s->n; k++) {
		struct bp_job *j = s->held[--s->n];

		bp_worker_complete(w, &j, 1);
	}
}

static void after_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];

		if (atomic_fetch_or(&j->visits, 4u) != 3)
			pt_fail("after the serial stage: visits 0x%x",
				atomic_load(&j->visits));
	}
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage sf_stage = {.name = "fail-some",
					 .process = sf_process};
static const struct bp_stage ser_stage = {.name = "serial",
					  .init = ser_init,
					  .process = ser_process,
					  .poll = ser_poll,
					  .fini = ser_fini};
static const struct bp_stage after_stage = {.name = "after",
					    .process = after_process};

static void serial_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];
		bool fails = j->hdr.seq % FAIL_EVERY == FAIL_AT;
		unsigned v = atomic_load(&j->visits);

		if (atomic_fetch_add(&j->delivered, 1))
			pt_fail("serial chain: seq %llu delivered twice",
				(unsigned long long)j->hdr.seq);
		if (fails && (jobs[i]->status != -EIO || jobs[i]->stage != 0 ||
			      v != 1))
			pt_fail("serial chain: failed seq %llu: status %d "
				"stage %u visits 0x%x",
				(unsigned long long)j->hdr.seq, jobs[i]->status,
				jobs[i]->stage, v);
		if (!fails && (jobs[i]->status != BP_JOB_OK || v != 7 ||
			       jobs[i]->stage != BP_JOB_NO_STAGE))
			pt_fail("serial chain: seq %llu: status %d stage %u "
				"visits 0x%x",
				(unsigned long long)j->hdr.seq, jobs[i]->status,
				jobs[i]->stage, v);
		if (R.ordered) {
			long long want = atomic_load(&R.next_seq);

			if ((long long)j->hdr.seq != want)
				pt_fail("serial chain, ordered: seq %llu, %lld "
					"expected",
					(unsigned long long)j->hdr.seq, want);
			atomic_store(&R.next_seq, want + 1);
		}
	}
	atomic_fetch_add(&R.delivered, n);
}

/*
 * Shapes: fail-some (3 workers) -> serial -> after (2 workers); or, with
 * two_serial, fail-some -> serial -> serial (the last stage), each serial
 * stage checking its order; async: the serial stages complete from poll.
 */
static void test_serial(bool ordered, unsigned B, unsigned n, bool two_serial,
			bool async)
{
	static struct serial_check chk[2];
	struct bp_chain_stage cs[3];
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;
	unsigned accepted, ok = n - (n + FAIL_EVERY - 1 - FAIL_AT) / FAIL_EVERY;
	int rc;

	reset(n);
	R.ordered = ordered;
	for (int k = 0; k < 2; k++) {
		atomic_store(&chk[k].last, -1);
		atomic_store(&chk[k].seen, 0);
		atomic_store(&chk[k].calls, 0);
		atomic_store(&chk[k].inside, 0);
		chk[k].B = B;
		chk[k].bit = k ? 4u : 2u;
		chk[k].async = async;
	}
	memset(cs, 0, sizeof(cs));
	cs[0] = (struct bp_chain_stage){.stage = &sf_stage, .workers = 3};
	cs[1] = (struct bp_chain_stage){.stage = &ser_stage,
					.stage_ctx = &chk[0],
					.workers = 1,
					.flags = BP_STAGE_SERIAL,
					.capacity = 32,
					/* its own limit, below the buffer's */
					.max_inflight = 16 > B ? 16 : B};
	cs[2] = two_serial ? (struct bp_chain_stage){.stage = &ser_stage,
						     .stage_ctx = &chk[1],
						     .workers = 1,
						     .flags = BP_STAGE_SERIAL,
						     .max_inflight = 64}
			   : (struct bp_chain_stage){.stage = &after_stage,
						     .workers = 2};
	bp_pipeline_config_init(&cfg);
	cfg.stages = cs;
	cfg.n_stages = 3;
	cfg.ordered = ordered;
	cfg.max_batch = B;
	cfg.max_inflight = 64;
	cfg.ingress_capacity = 256;
	cfg.sink = serial_sink;
	cfg.log = test_log;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		pt_fail("serial chain: %s", bp_strerror(rc));
		bp_pipeline_destroy(p);
		return;
	}
	accepted = run_producers(p, B, NULL);
	if ((rc = bp_pipeline_drain(p)) != 0 || accepted != n ||
	    atomic_load(&R.delivered) != n)
		pt_fail("serial chain: drain %s, %u accepted, %u delivered of "
			"%u",
			bp_strerror(rc), accepted, atomic_load(&R.delivered),
			n);
	for (int k = 0; k < (two_serial ? 2 : 1); k++)
		if (atomic_load(&chk[k].seen) != ok)
			pt_fail("serial chain: serial stage %d saw %u jobs, "
				"not %u",
				k + 1, atomic_load(&chk[k].seen), ok);
	printf("serial stage%s%s%s B=%-3u %u jobs in order in %u calls\n",
	       two_serial ? " x2" : "", async ? ", async" : "",
	       ordered ? ", ordered" : "", B, atomic_load(&chk[0].seen),
	       atomic_load(&chk[0].calls));
	bp_pipeline_destroy(p);
}

/*
 * A stage that takes failed jobs recovers them (sets them ok); the next
 * stage fails others: the sink sees those named with the stage that
 * failed them last, not the one that failed the recovered job first.
 */
static void rc_fail0(void *state, struct bp_worker *w, struct bp_job **jobs,
		     unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++)
		jobs[i]->status = jobs[i]->seq % 2 ? -EIO : BP_JOB_OK;
	bp_worker_complete(w, jobs, n);
}

static void rc_recover(void *state, struct bp_worker *w, struct bp_job **jobs,
		       unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		if (jobs[i]->status != BP_JOB_OK && jobs[i]->stage != 0)
			pt_fail("recover: a failed job came from stage %u",
				jobs[i]->stage);
		jobs[i]->status = BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

static void rc_fail2(void *state, struct bp_worker *w, struct bp_job **jobs,
		     unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++)
		jobs[i]->status = jobs[i]->seq % 3 == 0 ? -EPROTO : BP_JOB_OK;
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage rc0 = {.name = "fail-odd", .process = rc_fail0};
static const struct bp_stage rc1 = {.name = "recover",
				    .process = rc_recover};
static const struct bp_stage rc2 = {.name = "fail-third",
				    .process = rc_fail2};

static void recover_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++) {
		bool third = jobs[i]->seq % 3 == 0;

		if (third && (jobs[i]->status != -EPROTO || jobs[i]->stage != 2))
			pt_fail("recover: seq %llu status %d stage %u, want "
				"-EPROTO from stage 2",
				(unsigned long long)jobs[i]->seq,
				jobs[i]->status, jobs[i]->stage);
		if (!third && (jobs[i]->status != BP_JOB_OK ||
			       jobs[i]->stage != BP_JOB_NO_STAGE))
			pt_fail("recover: seq %llu status %d stage %u",
				(unsigned long long)jobs[i]->seq,
				jobs[i]->status, jobs[i]->stage);
	}
	atomic_fetch_add(&R.delivered, n);
}

/* B: max_batch and the producers' batch (1: the one-job paths) */
static void recover_run(unsigned B)
{
	enum { N = 3000 };
	struct bp_chain_stage cs[3] = {
		{.stage = &rc0, .workers = 2},
		{.stage = &rc1, .workers = 1, .flags = BP_STAGE_TAKES_FAILED},
		{.stage = &rc2, .workers = 2},
	};
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;
	unsigned accepted;

	reset(N);
	bp_pipeline_config_init(&cfg);
	cfg.stages = cs;
	cfg.n_stages = 3;
	cfg.max_batch = B;
	cfg.max_inflight = 64;
	cfg.sink = recover_sink;
	cfg.log = test_log;
	if (bp_pipeline_create(&cfg, &p) != 0 || bp_pipeline_start(p) != 0) {
		pt_fail("recover: pipeline");
		bp_pipeline_destroy(p);
		return;
	}
	accepted = run_producers(p, B, NULL);
	if (bp_pipeline_drain(p) != 0 || atomic_load(&R.delivered) != accepted)
		pt_fail("recover: %u of %u delivered", atomic_load(&R.delivered),
			accepted);
	printf("a failure recovered, another named, B=%u: %u jobs\n", B,
	       accepted);
	bp_pipeline_destroy(p);
}

static void test_recover(void)
{
	recover_run(8);
	recover_run(1);
}

/* ------------------------------------------- a completion given twice */

/*
 * Stage 0 holds what it takes and completes it from poll, each job twice:
 * the repeat must be refused (the job went on to stage 1, which accepts
 * only jobs marked for it), and every job still reaches the sink once.
 * Before the per-stage marks, the repeat was accepted as the completion of
 * a job the stage still held, which then never reached the sink.
 */
static atomic_uint repeats_refused;

struct twice {
	struct bp_job *held[64];
	unsigned n;
};

static int tw_init(struct bp_worker *w, void **state)
{
	(void)w;
	*state = calloc(1, sizeof(struct twice));
	return *state ? 0 : -ENOMEM;
}

static void tw_fini(void *state, struct bp_worker *w)
{
	(void)w;
	free(state);
}

static void tw_process(void *state, struct bp_worker *w, struct bp_job **jobs,
		       unsigned n)
{
	struct twice *t = state;

	(void)w;
	for (unsigned i = 0; i < n; i++) {
		jobs[i]->status = BP_JOB_OK;
		t->held[t->n++] = jobs[i];
	}
}

static void tw_poll(void *state, struct bp_worker *w)
{
	struct twice *t = state;

	while (t->n) {
		struct bp_job *j = t->held[--t->n];

		if (bp_worker_complete(w, &j, 1) != 1)
			pt_fail("twice: the first completion refused");
		/* again, while the stage may hold others: refused */
		if (bp_worker_complete(w, &j, 1) != 0)
			pt_fail("twice: a repeat accepted");
		else
			atomic_fetch_add(&repeats_refused, 1);
	}
}

static void pass_process(void *state, struct bp_worker *w,
			 struct bp_job **jobs, unsigned n)
{
	(void)state;
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage tw_stage = {.name = "twice",
					 .init = tw_init,
					 .process = tw_process,
					 .poll = tw_poll,
					 .fini = tw_fini};
static const struct bp_stage pass_stage = {.name = "pass",
					   .process = pass_process};

static void count_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++)
		if (atomic_fetch_add(&((struct job *)jobs[i])->delivered, 1))
			pt_fail("twice: a job delivered twice");
	atomic_fetch_add(&R.delivered, n);
}

static int refusals_logged;

static void refusal_log(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	if (lvl == BP_LOG_ERROR && strstr(msg, "stage 0 worker") &&
	    strstr(msg, "completed already"))
		__atomic_fetch_add(&refusals_logged, 1, __ATOMIC_RELAXED);
}

/*
 * A started two-stage chain of s0 (w0 workers) and s1 (w1), B = 8, 64 in
 * flight, delivering to count_sink; NULL (a failure told) if it cannot.
 */
static struct bp_pipeline *open_two(const char *name, const struct bp_stage *s0,
				    unsigned w0, const struct bp_stage *s1,
				    unsigned w1,
				    void (*log)(void *, enum bp_log_level,
						const char *))
{
	struct bp_chain_stage cs[2];
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;
	int rc;

	memset(cs, 0, sizeof(cs));
	cs[0] = (struct bp_chain_stage){.stage = s0, .workers = w0};
	cs[1] = (struct bp_chain_stage){.stage = s1, .workers = w1};
	bp_pipeline_config_init(&cfg);
	cfg.stages = cs;
	cfg.n_stages = 2;
	cfg.max_batch = 8;
	cfg.max_inflight = 64;
	cfg.sink = count_sink;
	if (log)
		cfg.log = log;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		pt_fail("%s: %s", name, bp_strerror(rc));
		bp_pipeline_destroy(p);
		return NULL;
	}
	return p;
}

/* Producers submit R.n jobs into p; drain; every one delivered once. */
static void run_and_drain(const char *name, struct bp_pipeline *p)
{
	unsigned accepted = run_producers(p, 8, NULL);
	int rc = bp_pipeline_drain_timeout(p, 20ll * 1000000000);

	if (rc || atomic_load(&R.delivered) != accepted || accepted != R.n)
		pt_fail("%s: drain %s, %u of %u delivered", name,
			bp_strerror(rc), atomic_load(&R.delivered), accepted);
}

static void test_repeat(void)
{
	enum { N = 2000 };
	struct bp_pipeline *p;

	reset(N);
	atomic_store(&repeats_refused, 0);
	p = open_two("twice", &tw_stage, 1, &pass_stage, 2, refusal_log);
	if (!p)
		return;
	run_and_drain("twice", p);
	if (atomic_load(&repeats_refused) != N)
		pt_fail("twice: %u repeats refused of %u",
			atomic_load(&repeats_refused), N);
	if (!__atomic_load_n(&refusals_logged, __ATOMIC_RELAXED))
		pt_fail("twice: no refusal logged with its stage");
	printf("a completion given twice: %u repeats refused, %u delivered\n",
	       atomic_load(&repeats_refused), atomic_load(&R.delivered));
	bp_pipeline_destroy(p);
}

/*
 * A repeat must not write the status of a job the next stage holds: stage
 * 0 completes job X, then keeps completing it again (each refused) while
 * stage 1, which has X, writes X's status over and over and reads each
 * value back. A completion that stored the 8-byte word of status and mark
 * it checks (worker.c's flip_marks) put back a status read before stage
 * 1's write: 2000 to 4500 of the 1M writes lost here. Stage 0 holds
 * a second job, so that its repeats take the batch path, not the one-job
 * refusal. The repeats read X's status as stage 1 writes it, a race by
 * the misuse's design: not under TSAN.
 */
enum { RS_WRITES = 1000000 };
static struct bp_job *rs_held[2];
static unsigned rs_nheld, rs_phase;	  /* stage 0's one worker's */
static atomic_int rs_stop, rs_ack;	  /* stage 1 -> 0, 0 -> 1 */
static unsigned long rs_lost, rs_repeats; /* stage 1's, stage 0's */

/* a pause between a write and its read-back: the window a repeat hits */
static inline void rs_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void rs0_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			unsigned n)
{
	(void)state;
	(void)w;
	for (unsigned i = 0; i < n; i++)
		rs_held[rs_nheld++] = jobs[i];
}

static void rs0_poll(void *state, struct bp_worker *w)
{
	(void)state;
	if (rs_nheld < 2 || rs_phase == 2)
		return;
	if (rs_phase == 0) { /* X goes on to stage 1 */
		if (bp_worker_complete(w, &rs_held[0], 1) != 1)
			pt_fail("repeat/status: X refused");
		rs_phase = 1;
		return;
	}
	/* acquire: pairs with stage 1's release of rs_stop after its writes */
	while (!atomic_load_explicit(&rs_stop, memory_order_acquire)) {
		if (bp_worker_complete(w, &rs_held[0], 1) != 0)
			pt_fail("repeat/status: a repeat accepted");
		rs_repeats++;
	}
	/* release: the last repeat before it; pairs with stage 1's acquire */
	atomic_store_explicit(&rs_ack, 1, memory_order_release);
	if (bp_worker_complete(w, &rs_held[1], 1) != 1)
		pt_fail("repeat/status: the second job refused");
	rs_phase = 2;
}

static void rs1_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		volatile int32_t *st = &jobs[i]->status;

		if (jobs[i] != rs_held[0])
			continue;
		for (unsigned long k = 0; k < RS_WRITES; k++) {
			int32_t v = -(int32_t)(k % 1000) - 1;

			*st = v;
			for (int d = 0; d < 20; d++)
				rs_relax();
			if (*st != v)
				rs_lost++;
		}
		/* release/acquire: pair with stage 0's loop and its rs_ack;
		 * the last status below comes after its last repeat */
		atomic_store_explicit(&rs_stop, 1, memory_order_release);
		while (!atomic_load_explicit(&rs_ack, memory_order_acquire))
			rs_relax();
		*st = -EIO;
	}
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage rs0_stage = {
	.name = "repeat", .process = rs0_process, .poll = rs0_poll};
static const struct bp_stage rs1_stage = {.name = "write-status",
					  .process = rs1_process};

static void test_repeat_keeps_status(void)
{
	struct bp_pipeline *p;
	struct job two[2];
	struct bp_job *ptrs[2] = {&two[0].hdr, &two[1].hdr};
	int rc;

	if (PT_TSAN) {
		printf("a repeat beside the next stage's status writes: "
		       "skipped under TSAN (a race by design)\n");
		return;
	}
	memset(two, 0, sizeof(two));
	atomic_store(&R.delivered, 0);
	/* each repeat logs its refusal: refusal_log counts them quietly */
	p = open_two("repeat/status", &rs0_stage, 1, &rs1_stage, 1,
		     refusal_log);
	if (!p)
		return;
	if (bp_pipeline_submit(p, ptrs, 2, 0, -1) != 2)
		pt_fail("repeat/status: submit");
	rc = bp_pipeline_drain_timeout(p, 60ll * 1000000000);
	if (rc || atomic_load(&R.delivered) != 2)
		pt_fail("repeat/status: drain %s, %u of 2 delivered",
			bp_strerror(rc), atomic_load(&R.delivered));
	if (rs_lost)
		pt_fail("repeat/status: %lu of %u status writes of stage 1 "
			"overwritten by stage 0's repeats",
			rs_lost, RS_WRITES);
	if (two[0].hdr.status != -EIO) /* as stage 1 left it */
		pt_fail("repeat/status: X delivered with status %d",
			two[0].hdr.status);
	if (!rs_repeats)
		pt_fail("repeat/status: no repeat ran beside the writes");
	printf("a repeat beside the next stage's status writes: %lu repeats "
	       "refused, %lu of %u writes lost\n",
	       rs_repeats, rs_lost, RS_WRITES);
	bp_pipeline_destroy(p);
}

/* ---------------------------------- a job of an earlier stage completed */

/*
 * Stage 0 holds the first job it takes (the bait) and completes the rest
 * at once; stage 1 completes each of its batches with the bait added.
 * The bait is still stage 0's: stage 1 must refuse it and accept the rest
 * of the batch, and stage 0 completes it afterwards, so every job reaches
 * the sink once. Stage 0's mark is a bit-subset of stage 1's
 * (STAGE_MARK), so a check that only ORed the marks would take the bait
 * among jobs of stage 1's own.
 */
static _Atomic(struct bp_job *) bait;
static atomic_uint bait_refused; /* completions of stage 1 that refused it */
static atomic_bool bait_done;	 /* stage 0 completed it */
static bool bait_taken;		 /* stage 0's one worker: its first job */

static void bait_process(void *state, struct bp_worker *w,
			 struct bp_job **jobs, unsigned n)
{
	unsigned from = 0;

	(void)state;
	if (!bait_taken) {
		bait_taken = true;
		atomic_store(&bait, jobs[0]);
		from = 1;
	}
	if (from < n && bp_worker_complete(w, jobs + from, n - from) !=
				(int)(n - from))
		pt_fail("bait: stage 0 refused its own jobs");
}

static void bait_poll(void *state, struct bp_worker *w)
{
	struct bp_job *j = atomic_load(&bait);

	(void)state;
	/* the bait once stage 1 has refused it a few times */
	if (j && atomic_load(&bait_refused) >= 3 && !atomic_load(&bait_done)) {
		atomic_store(&bait_done, true);
		if (bp_worker_complete(w, &j, 1) != 1)
			pt_fail("bait: stage 0's completion of it refused");
	}
}

static void thief_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	struct bp_job *all[64];
	struct bp_job *b = atomic_load(&bait);
	int rc;

	(void)state;
	/* three tries, then none: stage 0 completes the bait only after the
	 * third (this stage has one worker), so it is never stage 1's here */
	if (!b || atomic_load(&bait_refused) >= 3 || n < 2 || n > 64) {
		bp_worker_complete(w, jobs, n);
		return;
	}
	/*
	 * The bait in the place of the last job, in the middle: no more jobs
	 * than the stage holds, so the batch's one-pass check must see it.
	 */
	memcpy(all, jobs, (n - 1) * sizeof(*all));
	all[n - 1] = b;
	if (n / 2 < n - 1) { /* the bait to the middle */
		all[n - 1] = all[n / 2];
		all[n / 2] = b;
	}
	rc = bp_worker_complete(w, all, n);
	if (rc != (int)n - 1)
		pt_fail("bait: stage 1 completed %d of its %u and the bait", rc,
			n - 1);
	else
		atomic_fetch_add(&bait_refused, 1);
	if (bp_worker_complete(w, jobs + n - 1, 1) != 1)
		pt_fail("bait: stage 1's last job refused");
}

static const struct bp_stage bait_stage = {.name = "bait",
					   .process = bait_process,
					   .poll = bait_poll};
static const struct bp_stage thief_stage = {.name = "thief",
					    .process = thief_process};

static void test_earlier_stage(void)
{
	enum { N = 2000 };
	struct bp_pipeline *p;

	reset(N);
	atomic_store(&bait, NULL);
	atomic_store(&bait_refused, 0);
	atomic_store(&bait_done, false);
	bait_taken = false;
	p = open_two("bait", &bait_stage, 1, &thief_stage, 1, NULL);
	if (!p)
		return;
	run_and_drain("bait", p);
	if (atomic_load(&bait_refused) < 3 || !atomic_load(&bait_done))
		pt_fail("bait: refused %u times, completed by stage 0: %d",
			atomic_load(&bait_refused), atomic_load(&bait_done));
	printf("a job of an earlier stage completed by a later one: refused "
	       "%u times, %u delivered\n",
	       atomic_load(&bait_refused), atomic_load(&R.delivered));
	bp_pipeline_destroy(p);
}

/* ------------------------- a job named twice in one call, in a chain */

/*
 * Stage 0 completes each batch of two or more with its first job named
 * again in place of its last, then the last alone: the repeat must be
 * refused and the rest accepted. The repeat's word is stage 1's mark by
 * then, a bit-superset of stage 0's (STAGE_MARK), so a check that only
 * ANDed the marks would hand the job on twice.
 */
static atomic_uint dups_refused;

static void dup_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			unsigned n)
{
	struct bp_job *all[64];

	(void)state;
	if (n < 2 || n > 64) {
		bp_worker_complete(w, jobs, n);
		return;
	}
	memcpy(all, jobs, (n - 1) * sizeof(*all));
	all[n - 1] = jobs[0];
	if (bp_worker_complete(w, all, n) != (int)n - 1)
		pt_fail("dup: the repeat in one call accepted");
	else
		atomic_fetch_add(&dups_refused, 1);
	if (bp_worker_complete(w, jobs + n - 1, 1) != 1)
		pt_fail("dup: the last job refused");
}

static const struct bp_stage dup_stage = {.name = "dup",
					  .process = dup_process};

static void test_dup_in_one_call(void)
{
	enum { N = 2000 };
	struct bp_pipeline *p;

	reset(N);
	atomic_store(&dups_refused, 0);
	p = open_two("dup", &dup_stage, 1, &pass_stage, 1, NULL);
	if (!p)
		return;
	run_and_drain("dup", p);
	if (atomic_load(&dups_refused) == 0)
		pt_fail("dup: no batch of two or more to repeat a job in");
	printf("a job named twice in one call, stage 0 of 2: %u repeats "
	       "refused, %u delivered\n",
	       atomic_load(&dups_refused), atomic_load(&R.delivered));
	bp_pipeline_destroy(p);
}

/* --------------------------------------------- abort during a change */

static void change_then_abort(struct bp_pipeline *p)
{
	pt_sleep_ms(5);
	if (bp_pipeline_set_max_batch_at(p, 1, 2) != 0)
		pt_fail("set_max_batch_at during the run");
	atomic_store(&R.ctx_old[2], atomic_load(&R.ctx[2]));
	atomic_store(&R.ctx[2], 0x7777);
	if (bp_pipeline_set_stage_ctx_at(p, 2, (void *)0x7777) != 0)
		pt_fail("set_stage_ctx_at during the run");
	/* from here on no callback may see the old one */
	atomic_store(&R.ctx_old[2], 0x7777);
	if (bp_pipeline_abort(p) != 0)
		pt_fail("abort");
}

static void test_abort(void)
{
	enum { N = 40000 };
	struct bp_pipeline *p;
	unsigned accepted, got;
	struct bp_pipeline_stats s;

	reset(N);
	R.ordered = true;
	p = open_chain(2, 2, 2, 8);
	if (!p)
		return;
	accepted = run_producers(p, 8, change_then_abort);
	got = atomic_load(&R.delivered);
	bp_pipeline_get_stats(p, &s);
	if (got != accepted || s.submitted != accepted ||
	    s.ok + s.failed + s.cancelled != accepted)
		pt_fail("abort: %u accepted, %u delivered, stats %llu = %llu + "
			"%llu + %llu",
			accepted, got, (unsigned long long)s.submitted,
			(unsigned long long)s.ok, (unsigned long long)s.failed,
			(unsigned long long)s.cancelled);
	for (unsigned i = 0; i < N; i++)
		if (atomic_load(&R.jobs[i].delivered) > 1)
			pt_fail("abort: job %u delivered twice", i);
	if (atomic_load(&R.ctx_wrong))
		pt_fail("abort: a stage saw a context it was not given");
	printf("abort during a live change: %u accepted, %u cancelled\n",
	       accepted, atomic_load(&R.cancelled));
	bp_pipeline_destroy(p);
}

/* ------------------------------------------------ flush and drain race */

/*
 * Every job a producer's submit had returned before the flush began is
 * delivered when it returns (the snapshot of each producer's count is
 * taken before the call: those submits returned before it).
 */
static void flush_meanwhile(struct bp_pipeline *p)
{
	unsigned checked = 0;

	for (int i = 0; i < 20; i++) {
		unsigned snap[PRODUCERS];
		int rc;

		for (unsigned k = 0; k < PRODUCERS; k++)
			snap[k] = atomic_load(&R.prods[k].done);
		rc = bp_pipeline_flush(p, 20ll * 1000000000);
		if (rc != 0)
			pt_fail("flush: %s", bp_strerror(rc));
		for (unsigned k = 0; k < PRODUCERS; k++)
			for (unsigned j = 0; j < snap[k]; j++)
				if (!atomic_load(&R.jobs[R.prods[k].first + j]
							  .delivered))
					pt_fail("flush returned before job %u "
						"(accepted before it) was "
						"delivered",
						R.prods[k].first + j);
		for (unsigned k = 0; k < PRODUCERS; k++)
			checked += snap[k];
		pt_sleep_ms(1);
	}
	if (!checked)
		printf("(the flushes came before any job was accepted)\n");
}

static void test_flush(void)
{
	enum { N = 20000 };
	struct bp_pipeline *p;
	unsigned accepted;
	struct bp_job *h;
	int rc;

	reset(N);
	R.ordered = false;
	p = open_chain(1, 2, 1, 4);
	if (!p)
		return;
	accepted = run_producers(p, 4, flush_meanwhile);
	/* all accepted: one more flush delivers everything */
	rc = bp_pipeline_flush(p, 20ll * 1000000000);
	if (rc || atomic_load(&R.delivered) != accepted)
		pt_fail("flush after the producers: %s, %u of %u delivered",
			bp_strerror(rc), atomic_load(&R.delivered), accepted);
	/* intake still open */
	h = &R.jobs[0].hdr;
	memset(&R.jobs[0], 0, sizeof(R.jobs[0]));
	if (bp_pipeline_submit(p, &h, 1, 0, -1) != 1)
		pt_fail("submit after flush refused");
	if (bp_pipeline_drain(p) != 0 ||
	    atomic_load(&R.delivered) != accepted + 1)
		pt_fail("drain after flush: %u of %u", atomic_load(&R.delivered),
			accepted + 1);
	printf("flush racing with producers: %u jobs\n", accepted);
	bp_pipeline_destroy(p);
}

/*
 * Flushes racing a drain: a thread flushes in a loop while producers
 * submit and main drains as soon as they are done. Every flush returns 0
 * (during the drain it waits for the end of the stream), and every job is
 * delivered once.
 */
static atomic_int drain_done;
static atomic_uint flushes;

static void *flush_loop(void *arg)
{
	struct bp_pipeline *p = arg;

	while (!atomic_load(&drain_done)) {
		int rc = bp_pipeline_flush(p, 20ll * 1000000000);

		if (rc != 0)
			pt_fail("flush racing drain: %s", bp_strerror(rc));
		atomic_fetch_add(&flushes, 1);
	}
	return NULL;
}

static void test_flush_drain(void)
{
	enum { N = 20000 };
	struct bp_pipeline *p;
	pthread_t t;
	unsigned accepted;
	int rc;

	reset(N);
	R.ordered = true;
	atomic_store(&drain_done, 0);
	atomic_store(&flushes, 0);
	p = open_chain(2, 2, 1, 8);
	if (!p)
		return;
	pthread_create(&t, NULL, flush_loop, p);
	accepted = run_producers(p, 8, NULL);
	rc = bp_pipeline_drain(p);
	atomic_store(&drain_done, 1);
	pthread_join(t, NULL);
	if (rc || atomic_load(&R.delivered) != accepted || accepted != N)
		pt_fail("flush racing drain: drain %s, %u of %u delivered",
			bp_strerror(rc), atomic_load(&R.delivered), accepted);
	for (unsigned i = 0; i < N; i++)
		if (atomic_load(&R.jobs[i].delivered) != 1)
			pt_fail("flush racing drain: job %u delivered %d times",
				i, atomic_load(&R.jobs[i].delivered));
	printf("%u flushes racing the producers and a drain: %u jobs\n",
	       atomic_load(&flushes), accepted);
	bp_pipeline_destroy(p);
}

/* ------------------------------------------------------------ misuse */

static int nop_errors;

static void count_log(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	(void)msg;
	if (lvl == BP_LOG_ERROR)
		nop_errors++;
}

static void sink_nop(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	(void)n;
}

static void expect_invalid(const char *what, struct bp_pipeline_config *cfg)
{
	struct bp_pipeline *p = NULL;
	int before = nop_errors, rc = bp_pipeline_create(cfg, &p);

	if (rc != -EINVAL || p)
		pt_fail("%s: create returned %d", what, rc);
	if (nop_errors == before)
		pt_fail("%s: nothing logged", what);
}

static void test_misuse(void)
{
	struct bp_chain_stage cs[2];
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;

#define FRESH()                                                                \
	do {                                                                   \
		memset(cs, 0, sizeof(cs));                                     \
		cs[0] = (struct bp_chain_stage){.stage = &stage0,              \
						.workers = 1};                 \
		cs[1] = (struct bp_chain_stage){.stage = &stage1,              \
						.workers = 1};                 \
		bp_pipeline_config_init(&cfg);                                 \
		cfg.stages = cs;                                               \
		cfg.n_stages = 2;                                              \
		cfg.sink = sink_nop;                                           \
		cfg.log = count_log;                                           \
	} while (0)

	FRESH();
	cfg.n_stages = 0;
	expect_invalid("an empty chain", &cfg);
	FRESH();
	cfg.stages = NULL;
	expect_invalid("no stages with n_stages 2", &cfg);
	FRESH();
	cs[1].workers = 0;
	expect_invalid("a stage with 0 workers", &cfg);
	FRESH();
	cfg.stage = &stage0;
	expect_invalid("stage and stages both", &cfg);
	FRESH();
	cs[1].stage = NULL;
	expect_invalid("a stage without a table", &cfg);
	FRESH();
	cfg.n_stages = BP_MAX_STAGES + 1;
	expect_invalid("too many stages", &cfg);
	FRESH();
	cs[0].capacity = 8;
	expect_invalid("stage 0 with a capacity", &cfg);
	FRESH();
	cs[0].flags = BP_STAGE_TAKES_FAILED;
	expect_invalid("stage 0 taking failed jobs", &cfg);
	FRESH();
	cs[1].flags = 0x80;
	expect_invalid("unknown flags", &cfg);
	FRESH();
	cs[1].flags = BP_STAGE_SERIAL;
	cs[1].workers = 2;
	expect_invalid("a serial stage with two workers", &cfg);
	FRESH();
	cs[1].flags = BP_STAGE_SERIAL;
	cfg.ingress_lanes = 2;
	expect_invalid("a serial stage with ingress lanes", &cfg);
	FRESH();
	cs[1].max_batch = 64;
	cs[1].max_inflight = 32;
	expect_invalid("max_inflight below max_batch", &cfg);
	FRESH();
	cs[1].reserved_[2] = 1;
	expect_invalid("reserved_ not zero", &cfg);
	FRESH();
	cfg.chain_max_inflight = 4; /* below max_batch 32 */
	expect_invalid("chain_max_inflight below max_batch", &cfg);
	FRESH();
	cfg.stages = NULL;
	cfg.n_stages = 0;
	cfg.stage = &stage0;
	cfg.chain_max_inflight = 64;
	expect_invalid("chain_max_inflight on one stage", &cfg);
	FRESH();
	cfg.n_stages = 1;
	cfg.chain_max_inflight = 64;
	expect_invalid("chain_max_inflight on a chain of one", &cfg);
	FRESH();
	cfg.max_inflight = 4; /* the entries' own values make it valid */
	cs[0].max_batch = cs[1].max_batch = 4;
	cs[0].max_inflight = cs[1].max_inflight = 8;
	if (bp_pipeline_create(&cfg, &p) != 0)
		pt_fail("a chain whose entries set their own limits refused");
	bp_pipeline_destroy(p);
	p = NULL;

	/* a valid chain: per-stage calls with a bad index */
	FRESH();
	if (bp_pipeline_create(&cfg, &p) != 0) {
		pt_fail("a valid 2-stage chain refused");
		return;
	}
	int before = nop_errors;

	if (bp_pipeline_set_max_batch_at(p, 2, 4) != -EINVAL ||
	    bp_pipeline_set_stage_ctx_at(p, 5, NULL) != -EINVAL ||
	    bp_pipeline_set_max_batch_at(p, 1, 0) != -EINVAL ||
	    bp_pipeline_set_max_batch_at(NULL, 0, 4) != -EINVAL)
		pt_fail("per-stage calls with a bad stage or value accepted");
	if (nop_errors < before + 3)
		pt_fail("per-stage misuse not logged");
	if (bp_pipeline_set_max_batch_at(p, 1, 4) != 0 ||
	    bp_pipeline_set_stage_ctx_at(p, 0, &cfg) != 0)
		pt_fail("per-stage calls before start refused");
	bp_pipeline_destroy(p);
#undef FRESH
}

int main(void)
{
	unsigned n = PT_TSAN ? 6000 : 60000;

	setvbuf(stdout, NULL, _IONBF, 0);
	pt_watchdog_arm(PT_TSAN ? 600 : 180, "test_pipeline_chain");
	n = n / PRODUCERS * PRODUCERS;
	test_misuse();
	one_mode("unordered", false, false, 0, 0, 32, n);
	one_mode("unordered B=1", false, false, 0, 0, 1, n / 4);
	one_mode("ordered", true, false, 0, 0, 32, n);
	one_mode("ordered B=1", true, false, 0, 0, 1, n / 4);
	one_mode("takes failed", false, true, 0, 0, 8, n);
	one_mode("ordered, takes failed", true, true, 0, 0, 8, n);
	one_mode("ordered, gate 64", true, false, 64, 0, 8, n);
	one_mode("unordered, gate 64", false, false, 64, 0, 8, n);
	one_mode("unordered, 4 lanes", false, false, 0, 4, 32, n);
	one_mode("unordered, 2 lanes B=1", false, false, 0, 2, 1, n / 4);
	one_mode("unordered, 8 lanes, gate 64", false, false, 64, 8, 8, n);
	test_serial(false, 8, n, false, false);
	test_serial(true, 1, n / 4, false, false);
	test_serial(false, 32, n, false, false);
	test_serial(true, 8, n / 2, true, false);
	test_serial(false, 4, n / 2, false, true);
	test_serial(true, 16, n / 2, true, true);
	test_recover();
	test_repeat();
	test_repeat_keeps_status();
	test_earlier_stage();
	test_dup_in_one_call();
	test_abort();
	test_flush();
	test_flush_drain();
	free(R.jobs);
	pt_watchdog_disarm();
	if (pt_failures()) {
		printf("FAIL: %u check(s) failed\n", pt_failures());
		return 1;
	}
	printf("PASS\n");
	return 0;
}
