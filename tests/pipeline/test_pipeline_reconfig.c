/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_reconfig - live reconfiguration under load.
 *
 * While producers keep jobs flowing (two raw bp_pipeline_submit threads and one
 * bp_producer handle), the main thread changes the stage context pointer
 * and max_batch 1000 times each, and now and then the workers' wait policy
 * and the producers' flush deadline; a second thread changes the wait
 * policy and the deadline all along. The stage dereferences
 * bp_worker_stage_ctx(w) in process and poll (a struct with a magic value).
 *
 * What must hold:
 *   - after bp_pipeline_set_stage_ctx returns, no worker uses the old
 *     context: main poisons it and frees it at once (ASAN reports any later
 *     read as use-after-free; without ASAN, freed contexts are kept poisoned
 *     in a quarantine for a while, so a stale read sees the poison);
 *   - the context is stable within one callback, a worker never sees an
 *     older context after a newer one, and the last one set reaches the
 *     workers;
 *   - a dequeue never exceeds the max_batch that can be in force: main
 *     publishes max(old, new) before bp_pipeline_set_max_batch and the new
 *     value after it returns (it returns after a grace period, so no pass
 *     that read the old value is still running);
 *   - nothing is lost or duplicated: jobs are recycled, each use gets a
 *     generation number the sink checks, and after the drain every use was
 *     delivered exactly once; submitted == ok + failed (no cancels);
 *   - in the ordered phase, seq is +1 at the sink and each producer's jobs
 *     arrive in the order it submitted them.
 *
 * Two phases: unordered (4 workers), ordered (3 workers).
 *
 * Before them, live changes must return promptly whatever else runs:
 *   - an application thread registered with liburcu QSBR that stays online
 *     and never announces a quiescent state;
 *   - another pipeline whose stage blocks inside process.
 * Each set_* call runs on a changer thread and must return within 2 s
 * (it blocked until the other party let go, which main does after 5 s),
 * and each change must reach this pipeline's workers. A worker of the
 * pipeline itself blocked in process does hold the change up (no callback
 * may see the old context after it returns): the log gets a warning
 * naming the worker after 1 s, and the call returns once the callback
 * does. A change asked for
 * from the pipeline's own stage callback gets -EDEADLK (its worker could
 * never take it), not a hang.
 * BP_RECONFIG_ITERS overrides the number of changes (default 1000 x
 * stress scale; 1/4 under TSAN).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if BPT_HAVE_URCU_QSBR
#include <urcu/urcu-qsbr.h>
#endif

#include <batchpipe/batchpipe.h>

#include "pt_common.h"

PT_DEFINE_GLOBALS;

#define NPROD	   3
#define JOBS_PER_P 2048
#define MAX_INFL   256
#define MAX_B	   64
#define MAGIC	   0x5ca1ab1e0ddba11ull
#define POISON	   0xdeaddeaddeaddeadull
#define QUARANTINE 64
#define MAXW	   8

struct ctx {
	uint64_t magic_head;
	uint64_t gen;
	char pad[40];
	uint64_t magic; /* past what malloc's free lists overwrite */
};

struct rjob {
	struct bp_job hdr;
	unsigned producer;
	atomic_uint busy;  /* 1 while in the pipeline */
	uint32_t gen;	   /* uses so far, set by the producer at submit */
	uint32_t last_gen; /* sink only: last use delivered */
	uint64_t subno;	   /* producer's submission number of this use */
	uint64_t ctx_gen;  /* stage: ctx generation that processed it */
};

struct wstate {
	unsigned id;
	uint64_t last_gen; /* newest ctx generation seen */
	struct bp_job *held[MAX_INFL];
	unsigned n;
	unsigned seed;
};

struct prod {
	unsigned id;
	bool handle;
	struct rjob jobs[JOBS_PER_P];
	uint64_t accepted; /* uses accepted by the pipeline */
	unsigned seed;
	pthread_t thread;
};

static struct bp_pipeline *pipe_;
static atomic_bool stop;
static _Atomic unsigned batch_bound = MAX_B;
static struct prod prods[NPROD];
static bool ordered;

/* sink thread only */
static uint64_t next_seq, last_subno[NPROD], s_count, s_ok, s_failed;
static atomic_ulong progress;
static atomic_ulong newest_gen_seen; /* stage: newest ctx generation used */

/* ----------------------------------------------------------- stage */

static struct ctx *use_ctx(struct bp_worker *w, struct wstate *s)
{
	struct ctx *c = bp_worker_stage_ctx(w);

	if (!c) {
		pt_fail("worker %u: NULL stage ctx", s->id);
		return NULL;
	}
	if (c->magic != MAGIC || c->magic_head != MAGIC) {
		pt_fail("worker %u: stage ctx %p is stale (magic %#" PRIx64
			"): used after set_stage_ctx returned",
			s->id, (void *)c, c->magic);
		return NULL;
	}
	if (c->gen < s->last_gen)
		pt_fail("worker %u: ctx generation %" PRIu64 " after %" PRIu64,
			s->id, c->gen, s->last_gen);
	if (c->gen > s->last_gen) {
		unsigned long seen = atomic_load(&newest_gen_seen);

		while (seen < c->gen &&
		       !atomic_compare_exchange_weak(&newest_gen_seen, &seen,
						     c->gen))
			;
	}
	s->last_gen = c->gen;
	return c;
}

static int rs_init(struct bp_worker *w, void **state)
{
	struct wstate *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->id = bp_worker_id(w);
	s->seed = 77 + s->id;
	*state = s;
	return 0;
}

static void rs_fini(void *state, struct bp_worker *w)
{
	struct wstate *s = state;

	(void)w;
	if (s->n)
		pt_fail("fini with %u jobs held", s->n);
	free(s);
}

static void complete(struct bp_worker *w, struct ctx *c, struct bp_job **jobs,
		     unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct rjob *j = (struct rjob *)jobs[i];

		j->ctx_gen = c ? c->gen : 0;
		/* one in 16 uses fails, by the producer's submission number */
		j->hdr.status = j->subno % 16 == 7 ? -EIO : BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

static void rs_process(void *state, struct bp_worker *w, struct bp_job **jobs,
		       unsigned n)
{
	struct wstate *s = state;
	struct ctx *c = use_ctx(w, s);
	unsigned bound = atomic_load(&batch_bound), now;

	if (n > bound)
		pt_fail("worker %u dequeued %u jobs, max_batch in force <= %u",
			s->id, n, bound);
	if (s->n + n > MAX_INFL) {
		pt_fail("worker %u holds %u + %u > max_inflight", s->id, s->n,
			n);
		n = MAX_INFL - s->n;
	}
	/* complete some now, keep the rest for poll */
	now = n ? rand_r(&s->seed) % (n + 1) : 0;
	complete(w, c, jobs, now);
	memcpy(&s->held[s->n], jobs + now, (n - now) * sizeof(*jobs));
	s->n += n - now;
	if (rand_r(&s->seed) % 32 == 0)
		sched_yield();
	if (bp_worker_stage_ctx(w) != c)
		pt_fail("stage ctx changed within one callback");
}

static void rs_poll(void *state, struct bp_worker *w)
{
	struct wstate *s = state;
	struct ctx *c = use_ctx(w, s);
	unsigned k;

	if (!s->n)
		return;
	/* the newest half (or all), newest first: out of order */
	k = rand_r(&s->seed) % 2 ? s->n : (s->n + 1) / 2;
	for (unsigned i = 0; i < k / 2; i++) {
		struct bp_job *t = s->held[s->n - k + i];

		s->held[s->n - k + i] = s->held[s->n - 1 - i];
		s->held[s->n - 1 - i] = t;
	}
	complete(w, c, &s->held[s->n - k], k);
	s->n -= k;
	if (bp_worker_stage_ctx(w) != c)
		pt_fail("stage ctx changed within one callback");
}

static const struct bp_stage stage = {
	.name = "reconfig",
	.init = rs_init,
	.process = rs_process,
	.poll = rs_poll,
	.fini = rs_fini,
};

/* ------------------------------------------------------------ sink */

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++) {
		struct rjob *j = (struct rjob *)jobs[i];

		if (j->gen != j->last_gen + 1)
			pt_fail("producer %u job %td: use %u delivered after "
				"use %u (duplicate or lost)",
				j->producer, j - prods[j->producer].jobs,
				j->gen, j->last_gen);
		j->last_gen = j->gen;
		if (ordered) {
			if (j->hdr.seq != next_seq)
				pt_fail("ordered: seq %" PRIu64
					", expected %" PRIu64,
					j->hdr.seq, next_seq);
			next_seq = j->hdr.seq + 1;
			if (j->subno != last_subno[j->producer] + 1)
				pt_fail("ordered: producer %u submission "
					"%" PRIu64 " after %" PRIu64,
					j->producer, j->subno,
					last_subno[j->producer]);
			last_subno[j->producer] = j->subno;
		}
		if (j->hdr.status == BP_JOB_OK)
			s_ok++;
		else if (j->hdr.status == -EIO)
			s_failed++;
		else
			pt_fail("status %d", j->hdr.status);
		s_count++;
		/* release: the producer may reuse the job after seeing 0 */
		if (atomic_exchange_explicit(&j->busy, 0,
					     memory_order_acq_rel) != 1)
			pt_fail("sink got a job that was not in the pipeline");
	}
	atomic_fetch_add_explicit(&progress, n, memory_order_relaxed);
}

/* --------------------------------------------------------- producers */

/* The producer's next job, once the sink has given it back. */
static struct rjob *next_job(struct prod *pp, uint64_t uses)
{
	struct rjob *j = &pp->jobs[uses % JOBS_PER_P];

	/* acquire: pairs with the sink's release of busy */
	while (atomic_load_explicit(&j->busy, memory_order_acquire)) {
		if (atomic_load_explicit(&stop, memory_order_relaxed))
			return NULL;
		sched_yield();
	}
	j->gen++;
	j->subno = uses + 1;
	atomic_store_explicit(&j->busy, 1, memory_order_relaxed);
	return j;
}

static void *producer_main(void *arg)
{
	struct prod *pp = arg;
	struct bp_producer *pr = NULL;
	struct bp_job *batch[64];
	uint64_t uses = 0;

	if (pp->handle && bp_producer_create(pipe_, &pr) != 0) {
		pt_fail("bp_producer_create");
		return NULL;
	}
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned k = 1 + rand_r(&pp->seed) % 64, got = 0;

		for (; got < k; got++) {
			struct rjob *j = next_job(pp, uses + got);

			if (!j)
				break;
			batch[got] = &j->hdr;
		}
		if (pr) {
			for (unsigned i = 0; i < got; i++) {
				int rc = bp_producer_submit(pr, batch[i]);

				if (rc)
					pt_fail("bp_producer_submit: %d", rc);
			}
		} else if (got) {
			int rc = bp_pipeline_submit(pipe_, batch, got, 0, -1);

			if (rc != (int)got)
				pt_fail("bp_pipeline_submit of %u: %d", got,
					rc);
		}
		uses += got;
		if (rand_r(&pp->seed) % 4 == 0)
			sched_yield();
	}
	if (pr) {
		if (bp_producer_flush(pr) != 0)
			pt_fail("flush");
		bp_producer_destroy(pr);
	}
	pp->accepted = uses;
	return NULL;
}

/*
 * A second thread reconfigures too (the calls may come from any thread):
 * wait policy and flush deadline. Changes are serialised by the library;
 * were they not, one copy-and-publish could undo another's max_batch, which
 * the batch bound check would see.
 */
static void *meddler_main(void *arg)
{
	unsigned seed = *(unsigned *)arg;
	unsigned long n = 0;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct bp_wait_policy wp;
		int rc;

		bp_wait_policy_init(&wp);
		wp.strategy = (enum bp_wait_strategy)(rand_r(&seed) % 3);
		if ((rc = bp_pipeline_set_worker_wait(pipe_, &wp)))
			pt_fail("meddler: set_worker_wait: %d", rc);
		if ((rc = bp_pipeline_set_flush_deadline(
			     pipe_, 1000 + (uint64_t)(rand_r(&seed) % 200000))))
			pt_fail("meddler: set_flush_deadline: %d", rc);
		if (++n % 8 == 0)
			pt_sleep_ns(100000);
		else
			sched_yield();
	}
	return NULL;
}

/* ------------------------------------------------------------- main */

static struct ctx *new_ctx(uint64_t gen)
{
	struct ctx *c = malloc(sizeof(*c));

	if (!c) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	c->magic_head = MAGIC;
	c->magic = MAGIC;
	c->gen = gen;
	return c;
}

static void retire_ctx(struct ctx *c, struct ctx **quarantine, unsigned *qn)
{
	c->magic = POISON;
	c->magic_head = POISON;
	if (PT_ASAN) {
		free(c); /* ASAN's own quarantine catches a later read */
		return;
	}
	free(quarantine[*qn % QUARANTINE]);
	quarantine[*qn % QUARANTINE] = c;
	++*qn;
}

static int phase(bool ord, unsigned workers, unsigned iters, unsigned seed)
{
	struct bp_pipeline_config cfg;
	struct bp_pipeline_stats st;
	struct ctx *cur, *quarantine[QUARANTINE] = {0};
	unsigned qn = 0, fails0 = pt_failures(), cur_b = 16;
	unsigned meddler_seed = seed * 7 + 1;
	pthread_t meddler;
	uint64_t accepted = 0, delivered_uses = 0;
	int64_t t0 = pt_now_ns();
	int rc;

	pt_watchdog_arm(PT_TSAN ? 500 : 150, "reconfig phase %s",
			ord ? "ordered" : "unordered");
	ordered = ord;
	next_seq = 0;
	s_count = s_ok = s_failed = 0;
	memset(last_subno, 0, sizeof(last_subno));
	atomic_store(&stop, false);
	atomic_store(&batch_bound, cur_b);
	atomic_store(&progress, 0);
	atomic_store(&newest_gen_seen, 0);
	for (unsigned p = 0; p < NPROD; p++) {
		struct prod *pp = &prods[p];

		memset(pp, 0, sizeof(*pp));
		pp->id = p;
		pp->handle = p == NPROD - 1;
		pp->seed = seed + p;
		for (unsigned i = 0; i < JOBS_PER_P; i++) {
			pp->jobs[i].producer = p;
			atomic_init(&pp->jobs[i].busy, 0);
		}
	}

	cur = new_ctx(1);
	bp_pipeline_config_init(&cfg);
	cfg.workers = workers;
	cfg.ordered = ord;
	cfg.ingress_capacity = 1024;
	cfg.max_batch = cur_b;
	cfg.max_inflight = MAX_INFL;
	cfg.stage = &stage;
	cfg.stage_ctx = cur;
	cfg.sink = sink;
	if ((rc = bp_pipeline_create(&cfg, &pipe_)) ||
	    (rc = bp_pipeline_start(pipe_))) {
		fprintf(stderr, "FAIL: pipeline: %s\n", bp_strerror(rc));
		return 1;
	}
	for (unsigned p = 0; p < NPROD; p++)
		if (pthread_create(&prods[p].thread, NULL, producer_main,
				   &prods[p])) {
			fprintf(stderr, "FAIL: pthread_create\n");
			return 1;
		}
	if (pthread_create(&meddler, NULL, meddler_main, &meddler_seed)) {
		fprintf(stderr, "FAIL: pthread_create\n");
		return 1;
	}

	for (unsigned i = 0; i < iters; i++) {
		unsigned b = 1 + (unsigned)rand_r(&seed) % MAX_B;
		struct ctx *old = cur;

		cur = new_ctx(i + 2);
		rc = bp_pipeline_set_stage_ctx(pipe_, cur);
		if (rc)
			pt_fail("set_stage_ctx: %d", rc);
		retire_ctx(old, quarantine, &qn);

		/* while the change is in progress, either value may apply */
		atomic_store(&batch_bound, b > cur_b ? b : cur_b);
		rc = bp_pipeline_set_max_batch(pipe_, b);
		if (rc)
			pt_fail("set_max_batch(%u): %d", b, rc);
		atomic_store(&batch_bound, b);
		cur_b = b;

		if (i % 10 == 3) {
			struct bp_wait_policy wp;

			bp_wait_policy_init(&wp);
			wp.strategy =
				(enum bp_wait_strategy)(rand_r(&seed) % 3);
			wp.spin_ns = (uint32_t)(rand_r(&seed) % 40000);
			wp.yields = (uint32_t)(rand_r(&seed) % 16);
			if ((rc = bp_pipeline_set_worker_wait(pipe_, &wp)))
				pt_fail("set_worker_wait: %d", rc);
		}
		if (i % 7 == 5 &&
		    (rc = bp_pipeline_set_flush_deadline(
			     pipe_,
			     1000 + (uint64_t)(rand_r(&seed) % 1000000))))
			pt_fail("set_flush_deadline: %d", rc);
		if (rand_r(&seed) % 4 == 0)
			sched_yield();
		if (pt_failures() != fails0)
			break;
	}

	/* the last change reaches the workers while jobs still flow */
	{
		int64_t end = pt_now_ns() + 20 * (int64_t)1000000000;

		while (atomic_load(&newest_gen_seen) < cur->gen &&
		       pt_now_ns() < end)
			pt_sleep_ms(1);
		if (atomic_load(&newest_gen_seen) != cur->gen)
			pt_fail("newest ctx seen by a worker: %lu, set: "
				"%" PRIu64,
				atomic_load(&newest_gen_seen), cur->gen);
	}
	atomic_store(&stop, true);
	pthread_join(meddler, NULL);
	for (unsigned p = 0; p < NPROD; p++) {
		pthread_join(prods[p].thread, NULL);
		accepted += prods[p].accepted;
	}
	if ((rc = bp_pipeline_drain(pipe_)))
		pt_fail("drain: %d", rc);
	/* a stopped pipeline refuses live changes; the context stays */
	if ((rc = bp_pipeline_set_stage_ctx(pipe_, NULL)) != -EPIPE)
		pt_fail("set_stage_ctx after drain: %d, not -EPIPE", rc);

	if (bp_pipeline_get_stats(pipe_, &st))
		pt_fail("stats");
	if (st.submitted != accepted || s_count != accepted)
		pt_fail("accepted %" PRIu64 ", submitted %" PRIu64
			", delivered %" PRIu64,
			accepted, st.submitted, s_count);
	if (st.submitted != st.ok + st.failed + st.cancelled ||
	    st.cancelled != 0 || st.ok != s_ok || st.failed != s_failed)
		pt_fail("conservation: submitted %" PRIu64 " ok %" PRIu64
			" failed %" PRIu64 " cancelled %" PRIu64
			" (sink: ok %" PRIu64 " failed %" PRIu64 ")",
			st.submitted, st.ok, st.failed, st.cancelled, s_ok,
			s_failed);
	for (unsigned p = 0; p < NPROD; p++) {
		uint64_t uses = 0;

		for (unsigned i = 0; i < JOBS_PER_P; i++) {
			struct rjob *j = &prods[p].jobs[i];

			if (atomic_load(&j->busy))
				pt_fail("producer %u job %u never came back", p,
					i);
			if (j->last_gen != j->gen)
				pt_fail("producer %u job %u: %u uses, %u "
					"delivered",
					p, i, j->gen, j->last_gen);
			uses += j->last_gen;
			delivered_uses += j->last_gen;
		}
		if (uses != prods[p].accepted)
			pt_fail("producer %u: %" PRIu64 " accepted, %" PRIu64
				" delivered",
				p, prods[p].accepted, uses);
	}
	bp_pipeline_destroy(pipe_);
	pipe_ = NULL;
	free(cur);
	for (unsigned i = 0; i < QUARANTINE; i++)
		free(quarantine[i]);
	printf("%s: %u workers, %u reconfigurations, %" PRIu64
	       " jobs (ok %" PRIu64 ", failed %" PRIu64 "), %.0f ms%s\n",
	       ord ? "ordered" : "unordered", workers, iters, st.submitted,
	       st.ok, st.failed, (pt_now_ns() - t0) / 1e6,
	       pt_failures() != fails0 ? "  FAILED" : "");
	fflush(stdout);
	return pt_failures() != fails0;
}

/* ------------------------------------------------------- promptness */

#define PROMPT_NS  (2 * (int64_t)1000000000) /* it was 3 s to forever */
#define RELEASE_NS (5 * (int64_t)1000000000) /* main lets the blocker go */

/* The probe pipeline's stage: records what its workers see. */
static atomic_ulong probe_max_n;  /* largest dequeue since reset */
static _Atomic(void *) probe_ctx; /* the context the last pass used */
static atomic_ulong probe_done;	  /* jobs delivered */

static void probe_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	unsigned long m = atomic_load(&probe_max_n);

	(void)state;
	while (m < n && !atomic_compare_exchange_weak(&probe_max_n, &m, n))
		;
	atomic_store(&probe_ctx, bp_worker_stage_ctx(w));
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage probe_stage = {
	.name = "probe",
	.process = probe_process,
};

static void probe_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	atomic_fetch_add(&probe_done, n);
}

/* Submit k jobs to the probe and wait (bounded) until they are back. */
static void probe_run(struct bp_pipeline *p, struct bp_job *jobs, unsigned k)
{
	struct bp_job *ptrs[64];
	unsigned long want = atomic_load(&probe_done) + k;
	int64_t end = pt_now_ns() + 20 * (int64_t)1000000000;

	for (unsigned i = 0; i < k; i++)
		ptrs[i] = &jobs[i];
	if (bp_pipeline_submit(p, ptrs, k, 0, -1) != (int)k)
		pt_fail("probe: submit");
	while (atomic_load(&probe_done) < want && pt_now_ns() < end)
		pt_sleep_ms(1);
	if (atomic_load(&probe_done) < want)
		pt_fail("probe: jobs not back");
}

struct changer {
	struct bp_pipeline *p;
	const char *against;
	int64_t worst_ns;
	const char *worst;
	atomic_bool done;
};

static void timed(struct changer *ch, const char *what, int rc, int64_t t0)
{
	int64_t d = pt_now_ns() - t0;

	if (rc)
		pt_fail("%s: %s: %d", ch->against, what, rc);
	if (d > ch->worst_ns) {
		ch->worst_ns = d;
		ch->worst = what;
	}
}

/* Every live change once, timed, each checked to reach the workers. */
static void *changer_main(void *arg)
{
	struct changer *ch = arg;
	static struct bp_job jobs[64];
	static int ctx_a, ctx_b;
	struct bp_wait_policy wp;
	int64_t t0;

	probe_run(ch->p, jobs, 64); /* the workers are up and passing */
	t0 = pt_now_ns();
	timed(ch, "set_stage_ctx", bp_pipeline_set_stage_ctx(ch->p, &ctx_a),
	      t0);
	t0 = pt_now_ns();
	timed(ch, "set_max_batch", bp_pipeline_set_max_batch(ch->p, 1), t0);
	atomic_store(&probe_max_n, 0);
	probe_run(ch->p, jobs, 64);
	if (atomic_load(&probe_max_n) != 1)
		pt_fail("%s: max_batch 1 set, a dequeue took %lu", ch->against,
			atomic_load(&probe_max_n));
	if (atomic_load(&probe_ctx) != &ctx_a)
		pt_fail("%s: the new stage ctx did not reach the workers",
			ch->against);
	bp_wait_policy_init(&wp);
	wp.strategy = BP_WAIT_SLEEP;
	t0 = pt_now_ns();
	timed(ch, "set_worker_wait", bp_pipeline_set_worker_wait(ch->p, &wp),
	      t0);
	t0 = pt_now_ns();
	timed(ch, "set_flush_deadline",
	      bp_pipeline_set_flush_deadline(ch->p, 123456), t0);
	t0 = pt_now_ns();
	timed(ch, "set_stage_ctx", bp_pipeline_set_stage_ctx(ch->p, &ctx_b),
	      t0);
	t0 = pt_now_ns();
	timed(ch, "set_max_batch", bp_pipeline_set_max_batch(ch->p, 64), t0);
	probe_run(ch->p, jobs, 64);
	if (atomic_load(&probe_ctx) != &ctx_b)
		pt_fail("%s: the second stage ctx did not reach the workers",
			ch->against);
	atomic_store(&ch->done, true);
	return NULL;
}

/*
 * Run the changes on a probe pipeline while something else holds on;
 * release() lets it go once the changes are done, or after RELEASE_NS
 * (so that a change that waits for it fails the bound instead of hanging).
 */
static void prompt_changes(const char *against, void (*release)(void))
{
	struct bp_pipeline_config cfg;
	struct changer ch = {.against = against};
	pthread_t t;
	int64_t end;
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.workers = 3;
	cfg.max_batch = 64;
	cfg.stage = &probe_stage;
	cfg.sink = probe_sink;
	if ((rc = bp_pipeline_create(&cfg, &ch.p)) ||
	    (rc = bp_pipeline_start(ch.p))) {
		pt_fail("probe pipeline: %s", bp_strerror(rc));
		release();
		return;
	}
	atomic_init(&ch.done, false);
	if (pthread_create(&t, NULL, changer_main, &ch)) {
		pt_fail("pthread_create");
		release();
		bp_pipeline_destroy(ch.p);
		return;
	}
	end = pt_now_ns() + RELEASE_NS;
	while (!atomic_load(&ch.done) && pt_now_ns() < end)
		pt_sleep_ms(1);
	release();
	pthread_join(t, NULL);
	if (ch.worst_ns > PROMPT_NS)
		pt_fail("%s: %s took %.0f ms (bound %.0f ms)", against,
			ch.worst, ch.worst_ns / 1e6, PROMPT_NS / 1e6);
	printf("%s: slowest live change %s, %.1f ms\n", against,
	       ch.worst ? ch.worst : "-", ch.worst_ns / 1e6);
	fflush(stdout);
	bp_pipeline_destroy(ch.p);
}

#if BPT_HAVE_URCU_QSBR
/* (a) an application thread online in urcu-qsbr, never quiescent */
static atomic_bool app_online, app_let_go;

static void *app_rcu_main(void *arg)
{
	(void)arg;
	urcu_qsbr_register_thread(); /* online from here on */
	atomic_store(&app_online, true);
	while (!atomic_load(&app_let_go))
		pt_sleep_ms(1); /* online, no quiescent state announced */
	urcu_qsbr_unregister_thread();
	return NULL;
}

static void app_release(void)
{
	atomic_store(&app_let_go, true);
}
#endif

/* (b) another pipeline, its worker blocked inside process */
static atomic_bool blocker_in, blocker_let_go;

static void blocker_process(void *state, struct bp_worker *w,
			    struct bp_job **jobs, unsigned n)
{
	(void)state;
	atomic_store(&blocker_in, true);
	while (!atomic_load(&blocker_let_go))
		pt_sleep_ms(1);
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage blocker_stage = {
	.name = "blocker",
	.process = blocker_process,
};

static void blocker_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	(void)n;
}

static void blocker_release(void)
{
	atomic_store(&blocker_let_go, true);
}

/* A live change from the pipeline's own stage callback: -EDEADLK. */
static struct bp_pipeline *selfish;
static _Atomic int selfish_rc = 1;

static void selfish_process(void *state, struct bp_worker *w,
			    struct bp_job **jobs, unsigned n)
{
	(void)state;
	atomic_store(&selfish_rc, bp_pipeline_set_max_batch(selfish, 2));
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage selfish_stage = {
	.name = "selfish",
	.process = selfish_process,
};

static void from_own_callback(void)
{
	struct bp_pipeline_config cfg;
	static struct bp_job job;
	struct bp_job *ptr = &job;
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.stage = &selfish_stage;
	cfg.sink = blocker_sink;
	if ((rc = bp_pipeline_create(&cfg, &selfish)) ||
	    (rc = bp_pipeline_start(selfish))) {
		pt_fail("selfish pipeline: %s", bp_strerror(rc));
		return;
	}
	if (bp_pipeline_submit(selfish, &ptr, 1, 0, -1) != 1)
		pt_fail("selfish: submit");
	if ((rc = bp_pipeline_drain(selfish)))
		pt_fail("selfish: drain: %d", rc);
	if (atomic_load(&selfish_rc) != -EDEADLK)
		pt_fail("set_max_batch from the stage: %d, want -EDEADLK",
			atomic_load(&selfish_rc));
	bp_pipeline_destroy(selfish);
}

/* The pipeline's own worker blocked in process: waited for, with a warning */
static char own_log[256];
static atomic_bool own_warned, own_released, own_released_at_return;
static _Atomic int own_rc = 1;

static void own_logger(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	if (lvl == BP_LOG_WARN && !atomic_load(&own_warned)) {
		snprintf(own_log, sizeof(own_log), "%s", msg);
		atomic_store(&own_warned, true);
	}
}

static void *own_changer_main(void *arg)
{
	int rc = bp_pipeline_set_max_batch(arg, 2);

	atomic_store(&own_released_at_return, atomic_load(&own_released));
	atomic_store(&own_rc, rc);
	return NULL;
}

static void own_worker_blocked(void)
{
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p;
	static struct bp_job job;
	struct bp_job *ptr = &job;
	pthread_t t;
	int64_t end;
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.workers = 2;
	cfg.stage = &blocker_stage;
	cfg.sink = blocker_sink;
	cfg.log = own_logger;
	atomic_store(&blocker_in, false);
	atomic_store(&blocker_let_go, false);
	if ((rc = bp_pipeline_create(&cfg, &p)) ||
	    (rc = bp_pipeline_start(p))) {
		pt_fail("own pipeline: %s", bp_strerror(rc));
		return;
	}
	if (bp_pipeline_submit(p, &ptr, 1, 0, -1) != 1)
		pt_fail("own: submit");
	while (!atomic_load(&blocker_in))
		pt_sleep_ms(1);
	if (pthread_create(&t, NULL, own_changer_main, p)) {
		pt_fail("pthread_create");
		blocker_release();
		bp_pipeline_destroy(p);
		return;
	}
	end = pt_now_ns() + 20 * (int64_t)1000000000;
	while (!atomic_load(&own_warned) && pt_now_ns() < end)
		pt_sleep_ms(1);
	if (!atomic_load(&own_warned))
		pt_fail("own worker blocked: no warning in the log after 20 s");
	else if (!strstr(own_log, "set_max_batch") ||
		 !strstr(own_log, "worker"))
		pt_fail("own worker blocked: warning says \"%s\"", own_log);
	atomic_store(&own_released, true);
	blocker_release();
	pthread_join(t, NULL);
	if (atomic_load(&own_rc) != 0)
		pt_fail("own worker blocked: set_max_batch: %d",
			atomic_load(&own_rc));
	if (!atomic_load(&own_released_at_return))
		pt_fail("own worker blocked: set_max_batch returned while a "
			"worker was still inside the callback");
	printf("own worker blocked: warned \"%s\"\n", own_log);
	if ((rc = bp_pipeline_drain(p)))
		pt_fail("own: drain: %d", rc);
	bp_pipeline_destroy(p);
}

static int promptness(void)
{
	unsigned fails0 = pt_failures();

	pt_watchdog_arm(120, "live changes next to liburcu and a blocked "
			     "pipeline");
	/* (a) */
#if BPT_HAVE_URCU_QSBR
	pthread_t app;

	atomic_store(&app_online, false);
	atomic_store(&app_let_go, false);
	if (pthread_create(&app, NULL, app_rcu_main, NULL)) {
		pt_fail("pthread_create");
		return 1;
	}
	while (!atomic_load(&app_online))
		pt_sleep_ms(1);
	prompt_changes("next to an online urcu-qsbr thread", app_release);
	pthread_join(app, NULL);
#else
	printf("next to an online urcu-qsbr thread: skipped (built without "
	       "liburcu-qsbr)\n");
#endif

	/* (b) */
	{
		struct bp_pipeline_config cfg;
		struct bp_pipeline *blocked;
		static struct bp_job job;
		struct bp_job *ptr = &job;
		int rc;

		bp_pipeline_config_init(&cfg);
		cfg.workers = 1;
		cfg.stage = &blocker_stage;
		cfg.sink = blocker_sink;
		atomic_store(&blocker_in, false);
		atomic_store(&blocker_let_go, false);
		if ((rc = bp_pipeline_create(&cfg, &blocked)) ||
		    (rc = bp_pipeline_start(blocked))) {
			pt_fail("blocker pipeline: %s", bp_strerror(rc));
			return 1;
		}
		if (bp_pipeline_submit(blocked, &ptr, 1, 0, -1) != 1)
			pt_fail("blocker: submit");
		while (!atomic_load(&blocker_in))
			pt_sleep_ms(1);
		prompt_changes("next to a pipeline blocked in process",
			       blocker_release);
		if ((rc = bp_pipeline_drain(blocked)))
			pt_fail("blocker: drain: %d", rc);
		bp_pipeline_destroy(blocked);
	}
	from_own_callback();
	own_worker_blocked();
	return pt_failures() != fails0;
}

int main(void)
{
	unsigned long scale = pt_env_ulong("BP_STRESS_SCALE", PT_STRESS_SCALE);
	unsigned iters = (unsigned)pt_env_ulong("BP_RECONFIG_ITERS",
						(PT_TSAN ? 250 : 1000) * scale);
	unsigned seed = (unsigned)pt_env_ulong(
		"BP_SEED", (unsigned long)(pt_now_ns() % 1000000007) + 1);
	int bad = 0;

	printf("seed %u (BP_SEED=%u replays)\n", seed, seed);
	bad |= promptness();
	bad |= phase(false, 4, iters, seed);
	bad |= phase(true, 3, iters, seed + 1);
	pt_watchdog_disarm();
	return bad || pt_failures() ? 1 : 0;
}
