/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_stress - conservation and order of the whole pipeline under
 * threads, checked job by job.
 *
 * A table of configurations (plus a few drawn from the seed) varies:
 * producers 1..16 (raw bp_pipeline_submit with random batch sizes and blocking,
 * non-blocking and timed calls, or bp_producer handles, or both), workers
 * 1..16 on a 2-core machine, max_batch 1..256, max_inflight, ring sizes
 * down to 1, wait strategies, ordered output on/off, and the stage:
 *
 *   sync        completes every job inside process (some fail: -EIO,
 *               -ENOSPC, counted as failed); with ordered output,
 *               worker 0 completes one batch in eight of 4 or more in
 *               one call with its second and third swapped (its ends in
 *               place), and one in eight in calls each in order, the
 *               fourth job's before the third's: worker.c's order check
 *               must see both, and the other workers' runs stay on the
 *               sink's path for streams in order
 *   async       keeps jobs in flight and completes a random subset, in
 *               random order, from poll; cancel completes them early
 *
 * and the end: drain after the producers are done, drain while they are
 * still submitting, or abort while they are still submitting (then they get
 * -EPIPE, and only what bp_pipeline_submit accepted counts).
 *
 * Checks, per run:
 *   - every accepted job reaches the sink exactly once (a per-job counter),
 *     no job that was refused does; accepted jobs of one producer are a
 *     prefix of what it offered; the raw producers' return values add up;
 *   - seqs of the accepted jobs are exactly 0 .. submitted-1 (dense);
 *     with ingress lanes, each lane's positions (seq >> lane bits) are
 *     exactly 0 .. its count-1, and a producer's jobs in one lane have
 *     increasing positions;
 *   - bp_pipeline_stats: submitted == ok + failed + cancelled, and each
 *     equals what the sink itself counted; worker_jobs == submitted;
 *   - each job's status is what the stage gave it, or BP_JOB_CANCELLED,
 *     and cancelled only after abort;
 *   - ordered output: seq strictly +1 at the sink and each producer's jobs
 *     in its own order (idx +1); one worker and a synchronous stage: each
 *     producer's jobs in order even unordered;
 *   - no worker holds more than max_inflight jobs; fini finds none.
 *
 * Length: jobs per configuration = 20000 x scale (4x fewer under TSAN);
 * scale = -Dstress_scale or the environment variable BP_STRESS_SCALE;
 * argv[1] sets the jobs per configuration directly. BP_SEED=N replays the
 * random choices (the seed is printed); BP_ONLY=N runs configuration N
 * alone.
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

#include <batchpipe/batchpipe.h>

#include "pt_common.h"

PT_DEFINE_GLOBALS;

#define MAXP	  16
#define SEQ_UNSET UINT64_MAX
#define MAXLANES  BP_MAX_LANES

enum stage_kind { ST_SYNC, ST_SYNC_FAIL, ST_ASYNC, ST_ASYNC_FAIL };
enum end_kind { END_DRAIN, END_DRAIN_EARLY, END_ABORT };
enum prod_kind { PK_RAW, PK_HANDLE, PK_MIXED };

static const char *const stage_name[] = {"sync", "sync-fail", "async",
					 "async-fail"};
static const char *const end_name[] = {"drain", "drain-early", "abort"};
static const char *const pk_name[] = {"raw", "handle", "mixed"};
static const char *const wait_name[] = {"spin-sleep", "busy", "sleep"};

struct scfg {
	unsigned np, nw, batch, inflight, ingress, egress;
	bool ordered;
	enum stage_kind stage;
	enum end_kind end;
	enum prod_kind pk;
	enum bp_wait_strategy wait;
	unsigned lanes; /* ingress_lanes (0: the default, one) */
};

#define SS BP_WAIT_SPIN_SLEEP
#define BZ BP_WAIT_BUSY_POLL
#define SL BP_WAIT_SLEEP

/* np nw  B  inflight ingress egress ordered stage end producers wait lanes */
static const struct scfg table[] = {
	{1, 1, 1, 1, 16, 4, false, ST_SYNC, END_DRAIN, PK_RAW, SS, 0},
	{1, 1, 32, 256, 4096, 1024, true, ST_SYNC, END_DRAIN, PK_HANDLE, SS, 0},
	{2, 2, 32, 256, 4096, 1024, false, ST_SYNC_FAIL, END_DRAIN, PK_MIXED,
	 SS, 0},
	{4, 2, 8, 64, 256, 64, true, ST_ASYNC, END_DRAIN, PK_RAW, SS, 0},
	{16, 16, 1, 1, 64, 8, false, ST_SYNC, END_DRAIN, PK_MIXED, SS, 0},
	{16, 16, 256, 1024, 4096, 256, true, ST_ASYNC_FAIL, END_DRAIN, PK_MIXED,
	 SS, 0},
	{8, 4, 256, 256, 1024, 16, false, ST_ASYNC, END_DRAIN, PK_RAW, SL, 0},
	{3, 5, 7, 20, 100, 10, true, ST_SYNC_FAIL, END_DRAIN, PK_HANDLE, SL, 0},
	{2, 1, 64, 128, 128, 32, false, ST_ASYNC, END_ABORT, PK_RAW, SS, 0},
	{4, 4, 16, 64, 4096, 64, true, ST_ASYNC, END_ABORT, PK_MIXED, SS, 0},
	{16, 2, 4, 16, 1024, 16, false, ST_SYNC, END_ABORT, PK_MIXED, SS, 0},
	{1, 8, 128, 512, 8192, 512, true, ST_SYNC_FAIL, END_ABORT, PK_RAW, SS, 0},
	{8, 16, 2, 8, 32, 4, true, ST_ASYNC_FAIL, END_ABORT, PK_HANDLE, SL, 0},
	{2, 2, 1, 4, 8, 2, false, ST_ASYNC, END_DRAIN_EARLY, PK_RAW, SS, 0},
	{6, 3, 48, 96, 512, 64, true, ST_SYNC, END_DRAIN_EARLY, PK_MIXED, SS, 0},
	{12, 12, 256, 256, 4096, 1024, false, ST_ASYNC_FAIL, END_DRAIN_EARLY,
	 PK_HANDLE, SS, 0},
	{1, 1, 256, 256, 256, 256, true, ST_ASYNC, END_ABORT, PK_HANDLE, BZ, 0},
	{2, 2, 16, 32, 64, 16, false, ST_SYNC_FAIL, END_DRAIN, PK_RAW, BZ, 0},
	{2, 3, 32, 64, 256, 8, true, ST_ASYNC, END_DRAIN, PK_MIXED, BZ, 0},
	{16, 1, 64, 64, 4096, 64, true, ST_SYNC, END_DRAIN, PK_HANDLE, SS, 0},
	{16, 1, 1, 1, 2, 1, true, ST_ASYNC_FAIL, END_DRAIN, PK_RAW, SS, 0},
	{5, 7, 100, 300, 1000, 50, false, ST_ASYNC, END_ABORT, PK_MIXED, SL, 0},
	{10, 10, 10, 10, 10, 10, true, ST_SYNC, END_DRAIN, PK_RAW, SS, 0},
	{1, 16, 1, 16, 16, 1, false, ST_SYNC, END_DRAIN, PK_RAW, SS, 0},
	{4, 1, 16, 64, 64, 16, false, ST_SYNC_FAIL, END_ABORT, PK_RAW, SS, 0},
	{8, 8, 32, 32, 128, 32, true, ST_ASYNC, END_DRAIN_EARLY, PK_RAW, SL, 0},
	{3, 2, 200, 400, 4096, 1024, true, ST_ASYNC_FAIL, END_DRAIN, PK_HANDLE,
	 SS, 0},
	{16, 4, 256, 2048, 16384, 2048, false, ST_ASYNC, END_DRAIN, PK_MIXED,
	 SS, 0},
	{2, 16, 3, 9, 27, 3, true, ST_SYNC_FAIL, END_ABORT, PK_MIXED, SL, 0},
	{7, 5, 1, 2, 4, 1, false, ST_ASYNC, END_DRAIN, PK_MIXED, SS, 0},
	{1, 1, 8, 8, 8, 8, false, ST_SYNC, END_DRAIN_EARLY, PK_HANDLE, SS, 0},
	{4, 2, 256, 256, 1 << 16, 4096, false, ST_SYNC, END_ABORT, PK_RAW, SS, 0},
	/* ingress lanes (unordered only: ordered output refuses them) */
	{2, 2, 1, 4, 64, 16, false, ST_SYNC, END_DRAIN, PK_RAW, SS, 2},
	{16, 16, 1, 1, 64, 8, false, ST_SYNC_FAIL, END_DRAIN, PK_MIXED, SS, 16},
	{8, 4, 32, 64, 1024, 64, false, ST_ASYNC, END_ABORT, PK_HANDLE, SS, 4},
	{4, 2, 8, 32, 128, 16, false, ST_ASYNC_FAIL, END_DRAIN_EARLY, PK_MIXED,
	 SL, 8},
	{3, 1, 16, 64, 256, 32, false, ST_SYNC, END_DRAIN, PK_MIXED, BZ, 2},
	{2, 3, 5, 10, 7, 3, false, ST_ASYNC, END_ABORT, PK_RAW, SS, 64},
	{6, 2, 64, 128, 4096, 256, false, ST_SYNC_FAIL, END_DRAIN, PK_HANDLE,
	 SS, 4},
};

#define NTABLE	(sizeof(table) / sizeof(table[0]))
#define NRANDOM 6

struct sjob {
	struct bp_job hdr;
	uint32_t producer, idx;
	int32_t expect; /* status the stage gives it */
	atomic_uint delivered;
};

struct run;

struct prod {
	struct run *r;
	unsigned id;
	unsigned seed;
	bool handle;
	unsigned offered; /* raw: sum of accepted counts; handle: jobs given */
	bool stopped;	  /* got -EPIPE */
	pthread_t thread;
};

struct run {
	const struct scfg *c;
	struct bp_pipeline *p;
	struct sjob *jobs; /* np * per */
	struct bp_job **ptrs;
	unsigned per;
	bool early_end; /* producers may see -EPIPE */
	bool may_cancel;
	bool check_fifo;
	struct prod prods[MAXP];

	/* sink thread only (main reads after drain/abort joined it) */
	uint64_t next_seq;
	int64_t last_idx[MAXP];
	uint64_t s_ok, s_failed, s_cancelled;
	unsigned sink_seed;
	atomic_ulong s_count; /* progress, for main */

	/* stage: worker states, for checks after the run */
	atomic_uint fini_calls, init_calls;
};

static unsigned long jobs_per_run;

static inline void maybe_yield(unsigned *seed, unsigned one_in)
{
	if (rand_r(seed) % one_in == 0)
		sched_yield();
}

static int32_t expected_status(enum stage_kind k, unsigned idx)
{
	if (k != ST_SYNC_FAIL && k != ST_ASYNC_FAIL)
		return BP_JOB_OK;
	if (idx % 11 == 3)
		return -EIO;
	if (idx % 13 == 5)
		return -ENOSPC;
	return BP_JOB_OK;
}

/* ------------------------------------------------------------- stages */

struct wstate {
	struct run *r;
	unsigned id, seed;
	struct bp_job **held; /* async: in flight, max_inflight entries */
	struct bp_job **tmp;
	unsigned n;
	bool cancelling;
};

static void check_job_at_worker(struct run *r, struct bp_worker *w,
				struct bp_job *j)
{
	if (j->seq == SEQ_UNSET)
		pt_fail("worker got a job without seq");
	(void)r;
}

static int st_init(struct bp_worker *w, void **state)
{
	struct run *r = bp_worker_stage_ctx(w);
	struct wstate *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->r = r;
	s->id = bp_worker_id(w);
	s->seed = 0x9e3779b9u * (s->id + 1) ^ r->sink_seed;
	s->held = calloc(r->c->inflight, sizeof(*s->held));
	s->tmp = calloc(r->c->inflight, sizeof(*s->tmp));
	if (!s->held || !s->tmp) {
		free(s->held);
		free(s->tmp);
		free(s);
		return -ENOMEM;
	}
	if (s->id >= r->c->nw)
		pt_fail("worker id %u of %u", s->id, r->c->nw);
	atomic_fetch_add(&r->init_calls, 1);
	*state = s;
	return 0;
}

static void st_fini(void *state, struct bp_worker *w)
{
	struct wstate *s = state;

	if (s->n)
		pt_fail("fini: worker %u still holds %u jobs", s->id, s->n);
	if (bp_worker_stage_ctx(w) != s->r)
		pt_fail("fini: stage ctx changed");
	atomic_fetch_add(&s->r->fini_calls, 1);
	free(s->held);
	free(s->tmp);
	free(s);
}

static void sync_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			 unsigned n)
{
	struct wstate *s = state;
	unsigned half;

	if (n == 0 || n > s->r->c->batch)
		pt_fail("process got %u jobs, max_batch %u", n, s->r->c->batch);
	for (unsigned i = 0; i < n; i++) {
		check_job_at_worker(s->r, w, jobs[i]);
		jobs[i]->status = ((struct sjob *)jobs[i])->expect;
	}
	maybe_yield(&s->seed, 64);
	if (s->r->c->ordered && s->id == 0 && n >= 4) {
		/*
		 * Worker 0 only (the others stay in order, so the sink keeps
		 * finding their runs from a few jobs): now and then out of
		 * order in one call, the first and the last in place; or
		 * each call in order but one behind the call before. The
		 * sink must take neither batch for one run of consecutive
		 * seqs (worker.c's order check, in a call and across calls).
		 */
		struct bp_job *t = jobs[1];

		switch (rand_r(&s->seed) % 8) {
		case 0:
			jobs[1] = jobs[2];
			jobs[2] = t;
			bp_worker_complete(w, jobs, n);
			return;
		case 1:
			bp_worker_complete(w, jobs, 2);
			bp_worker_complete(w, jobs + 3, 1);
			bp_worker_complete(w, jobs + 2, 1);
			if (n > 4)
				bp_worker_complete(w, jobs + 4, n - 4);
			return;
		}
	}
	/* complete in two calls: order across calls is kept */
	half = n / 2;
	if (half)
		bp_worker_complete(w, jobs, half);
	bp_worker_complete(w, jobs + half, n - half);
}

static void async_complete(struct wstate *s, struct bp_worker *w,
			   struct bp_job **jobs, unsigned k, bool cancel)
{
	for (unsigned i = 0; i < k; i++) {
		/* on cancel: half cancelled, half their real outcome */
		if (cancel && (rand_r(&s->seed) & 1))
			jobs[i]->status = BP_JOB_CANCELLED;
		else
			jobs[i]->status = ((struct sjob *)jobs[i])->expect;
	}
	bp_worker_complete(w, jobs, k);
}

static void async_process(void *state, struct bp_worker *w,
			  struct bp_job **jobs, unsigned n)
{
	struct wstate *s = state;
	unsigned now = 0;

	if (n == 0 || n > s->r->c->batch)
		pt_fail("process got %u jobs, max_batch %u", n, s->r->c->batch);
	if (s->n + n > s->r->c->inflight) {
		pt_fail("worker %u holds %u + %u jobs > max_inflight %u", s->id,
			s->n, n, s->r->c->inflight);
		n = s->r->c->inflight - s->n;
	}
	for (unsigned i = 0; i < n; i++) {
		check_job_at_worker(s->r, w, jobs[i]);
		/* a few complete at once, the rest stay in flight */
		if (rand_r(&s->seed) % 8 == 0)
			s->tmp[now++] = jobs[i];
		else
			s->held[s->n++] = jobs[i];
	}
	if (now)
		async_complete(s, w, s->tmp, now, false);
	maybe_yield(&s->seed, 64);
}

static void async_poll(void *state, struct bp_worker *w)
{
	struct wstate *s = state;
	unsigned k = 0, keep = 0;

	if (s->n == 0)
		return;
	if (s->cancelling) {
		async_complete(s, w, s->held, s->n, true);
		s->n = 0;
		return;
	}
	/* a random subset (sometimes none), completed in random order */
	unsigned mode = rand_r(&s->seed) % 4;

	for (unsigned i = 0; i < s->n; i++) {
		bool pick = mode == 0
				    ? false
				    : (mode == 3 || rand_r(&s->seed) % 3 == 0);

		if (pick)
			s->tmp[k++] = s->held[i];
		else
			s->held[keep++] = s->held[i];
	}
	s->n = keep;
	for (unsigned i = k; i > 1; i--) {
		unsigned x = rand_r(&s->seed) % i;
		struct bp_job *t = s->tmp[i - 1];

		s->tmp[i - 1] = s->tmp[x];
		s->tmp[x] = t;
	}
	if (k)
		async_complete(s, w, s->tmp, k, false);
	maybe_yield(&s->seed, 64);
}

static void async_cancel(void *state, struct bp_worker *w)
{
	struct wstate *s = state;
	unsigned k = s->n / 2;

	if (s->cancelling)
		pt_fail("cancel called twice on worker %u", s->id);
	s->cancelling = true;
	/* some now, the rest from the next poll */
	if (k) {
		async_complete(s, w, s->held + s->n - k, k, true);
		s->n -= k;
	}
}

static const struct bp_stage sync_stage = {
	.name = "stress-sync",
	.init = st_init,
	.process = sync_process,
	.fini = st_fini,
};

static const struct bp_stage async_stage = {
	.name = "stress-async",
	.init = st_init,
	.process = async_process,
	.poll = async_poll,
	.cancel = async_cancel,
	.fini = st_fini,
};

/* --------------------------------------------------------------- sink */

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct run *r = ctx;

	if (n == 0)
		pt_fail("sink called with 0 jobs");
	for (unsigned i = 0; i < n; i++) {
		struct sjob *j = (struct sjob *)jobs[i];
		int32_t st = j->hdr.status;

		if (j->hdr.seq == SEQ_UNSET)
			pt_fail("sink got a job that was never accepted");
		if (atomic_fetch_add_explicit(&j->delivered, 1,
					      memory_order_relaxed) != 0)
			pt_fail("job p%u/%u seq %" PRIu64 " delivered twice",
				j->producer, j->idx, j->hdr.seq);
		if (st == BP_JOB_CANCELLED) {
			if (!r->may_cancel)
				pt_fail("job p%u/%u cancelled without abort",
					j->producer, j->idx);
			r->s_cancelled++;
		} else if (st != j->expect) {
			pt_fail("job p%u/%u status %d, stage gave %d",
				j->producer, j->idx, st, j->expect);
		} else if (st == BP_JOB_OK) {
			r->s_ok++;
		} else {
			r->s_failed++;
		}
		if (r->c->ordered) {
			if (j->hdr.seq != r->next_seq)
				pt_fail("ordered sink: seq %" PRIu64
					" after %" PRIu64,
					j->hdr.seq, r->next_seq - 1);
			r->next_seq = j->hdr.seq + 1;
		}
		if (r->check_fifo) {
			int64_t last = r->last_idx[j->producer];

			if ((int64_t)j->idx <= last ||
			    (r->c->ordered && (int64_t)j->idx != last + 1))
				pt_fail("producer %u: job %u after %lld",
					j->producer, j->idx, (long long)last);
			r->last_idx[j->producer] = j->idx;
		}
	}
	maybe_yield(&r->sink_seed, 32);
	/* release: main only uses it as progress */
	atomic_fetch_add_explicit(&r->s_count, n, memory_order_release);
}

/* ----------------------------------------------------------- producers */

static void producer_raw(struct prod *pp)
{
	struct run *r = pp->r;
	struct bp_job **mine = r->ptrs + (size_t)pp->id * r->per;
	unsigned i = 0, cap = r->c->batch * 2 < 512 ? r->c->batch * 2 : 512;

	while (i < r->per) {
		unsigned left = r->per - i, k, mode;
		unsigned flags = 0;
		int64_t timeout = -1;
		int rc;

		switch (rand_r(&pp->seed) % 4) {
		case 0:
			k = 1;
			break;
		case 1:
			k = r->c->batch;
			break;
		default:
			k = 1 + rand_r(&pp->seed) % cap;
			break;
		}
		if (k > left)
			k = left;
		mode = rand_r(&pp->seed) % 8;
		if (mode == 5)
			flags = BP_SUBMIT_NONBLOCK;
		else if (mode == 6)
			timeout = 0;
		else if (mode == 7)
			timeout = 200000;
		rc = bp_pipeline_submit(r->p, mine + i, k, flags, timeout);
		if (rc > 0) {
			if ((unsigned)rc > k) {
				pt_fail("submit of %u returned %d", k, rc);
				break;
			}
			if (timeout < 0 && !flags && (unsigned)rc != k &&
			    !r->early_end)
				pt_fail("blocking submit of %u returned %d", k,
					rc);
			i += (unsigned)rc;
		} else if (rc == -EAGAIN && flags) {
			sched_yield();
		} else if (rc == -ETIMEDOUT && timeout >= 0) {
			sched_yield();
		} else if (rc == -EPIPE) {
			if (!r->early_end)
				pt_fail("producer %u: -EPIPE before drain",
					pp->id);
			pp->stopped = true;
			break;
		} else {
			pt_fail("producer %u: submit of %u returned %d (%s)",
				pp->id, k, rc, bp_strerror(rc));
			break;
		}
		maybe_yield(&pp->seed, 8);
	}
	pp->offered = i;
}

static void producer_handle(struct prod *pp)
{
	struct run *r = pp->r;
	struct bp_job **mine = r->ptrs + (size_t)pp->id * r->per;
	struct bp_producer *pr = NULL;
	unsigned i;
	int rc = bp_producer_create(r->p, &pr);

	if (rc) {
		pt_fail("bp_producer_create: %d", rc);
		return;
	}
	for (i = 0; i < r->per; i++) {
		rc = bp_producer_submit(pr, mine[i]);
		if (rc == 0) {
			maybe_yield(&pp->seed, 16);
			continue;
		}
		if (rc != -EPIPE || !r->early_end)
			pt_fail("producer %u: bp_producer_submit: %d (%s)",
				pp->id, rc, bp_strerror(rc));
		pp->stopped = true;
		i++; /* this one may be staged: an upper bound */
		break;
	}
	if (!pp->stopped) {
		rc = bp_producer_flush(pr);
		if (rc == -EPIPE && r->early_end)
			pp->stopped = true;
		else if (rc != 0)
			pt_fail("producer %u: flush: %d", pp->id, rc);
		else if (bp_producer_staged(pr) != 0)
			pt_fail("producer %u: staged after flush", pp->id);
	}
	pp->offered = i;
	bp_producer_destroy(pr);
}

static void *producer_main(void *arg)
{
	struct prod *pp = arg;

	if (pp->handle)
		producer_handle(pp);
	else
		producer_raw(pp);
	return NULL;
}

/* --------------------------------------------------------------- a run */

static void describe(const struct scfg *c, char *buf, size_t n)
{
	snprintf(buf, n,
		 "np=%u nw=%u B=%u inflight=%u ingress=%u egress=%u %s %s %s "
		 "%s %s lanes=%u",
		 c->np, c->nw, c->batch, c->inflight, c->ingress, c->egress,
		 c->ordered ? "ordered" : "unordered", stage_name[c->stage],
		 end_name[c->end], pk_name[c->pk], wait_name[c->wait],
		 c->lanes ? c->lanes : 1);
}

static int run_one(const struct scfg *c, unsigned seed, unsigned num)
{
	struct run *r = calloc(1, sizeof(*r));
	struct bp_pipeline_config cfg;
	struct bp_pipeline_stats st;
	struct bp_wait_policy wp;
	unsigned fails0 = pt_failures();
	uint64_t total_accepted = 0;
	char *seen;
	const unsigned nlanes = c->lanes ? c->lanes : 1;
	const unsigned lane_bits = (unsigned)__builtin_ctz(nlanes);
	char desc[256];
	int64_t t0 = pt_now_ns();
	int rc;

	describe(c, desc, sizeof(desc));
	pt_watchdog_arm(PT_TSAN ? 400 : 120, "config %u: %s (seed %u)", num,
			desc, seed);
	if (!r)
		return 1;
	r->c = c;
	/* tiny rings make every job a sleep and a wake-up: fewer jobs there */
	r->per = (unsigned)(jobs_per_run / (c->ingress < 8 ? 4 : 1) / c->np);
	if (r->per == 0)
		r->per = 1;
	r->early_end = c->end != END_DRAIN;
	r->may_cancel = c->end == END_ABORT;
	r->check_fifo = c->ordered ||
			(c->nw == 1 &&
			 (c->stage == ST_SYNC || c->stage == ST_SYNC_FAIL));
	r->sink_seed = seed ^ 0x5bd1e995u;
	atomic_init(&r->s_count, 0);
	atomic_init(&r->fini_calls, 0);
	atomic_init(&r->init_calls, 0);
	for (unsigned i = 0; i < MAXP; i++)
		r->last_idx[i] = -1;
	r->jobs = calloc((size_t)c->np * r->per, sizeof(*r->jobs));
	r->ptrs = calloc((size_t)c->np * r->per, sizeof(*r->ptrs));
	if (!r->jobs || !r->ptrs) {
		pt_fail("out of memory");
		return 1;
	}
	for (unsigned p = 0; p < c->np; p++) {
		for (unsigned i = 0; i < r->per; i++) {
			size_t x = (size_t)p * r->per + i;
			struct sjob *j = &r->jobs[x];

			j->producer = p;
			j->idx = i;
			j->expect = expected_status(c->stage, i);
			j->hdr.seq = SEQ_UNSET;
			atomic_init(&j->delivered, 0);
			r->ptrs[x] = &j->hdr;
		}
	}

	bp_pipeline_config_init(&cfg);
	cfg.workers = c->nw;
	cfg.ingress_capacity = c->ingress;
	cfg.egress_capacity = c->egress;
	cfg.max_batch = c->batch;
	cfg.max_inflight = c->inflight;
	cfg.ordered = c->ordered;
	cfg.ingress_lanes = c->lanes;
	bp_wait_policy_init(&wp);
	wp.strategy = c->wait;
	cfg.worker_wait = wp;
	cfg.sink_wait = wp;
	cfg.producer_wait = wp;
	cfg.stage = c->stage == ST_SYNC || c->stage == ST_SYNC_FAIL
			    ? &sync_stage
			    : &async_stage;
	cfg.stage_ctx = r;
	cfg.sink = sink;
	cfg.sink_ctx = r;
	rc = bp_pipeline_create(&cfg, &r->p);
	if (rc == 0)
		rc = bp_pipeline_start(r->p);
	if (rc) {
		pt_fail("config %u: create/start: %s", num, bp_strerror(rc));
		return 1;
	}

	for (unsigned p = 0; p < c->np; p++) {
		struct prod *pp = &r->prods[p];

		pp->r = r;
		pp->id = p;
		pp->seed = seed * 31u + p;
		pp->handle =
			c->pk == PK_HANDLE || (c->pk == PK_MIXED && (p & 1));
		if (pthread_create(&pp->thread, NULL, producer_main, pp)) {
			pt_fail("pthread_create");
			return 1;
		}
	}

	if (c->end == END_DRAIN) {
		for (unsigned p = 0; p < c->np; p++)
			pthread_join(r->prods[p].thread, NULL);
		rc = bp_pipeline_drain(r->p);
	} else {
		/* stop at a random moment while the producers still run */
		unsigned rs = seed ^ 0xabcdefu;
		uint64_t target =
			rand_r(&rs) % 4 == 0
				? 0
				: rand_r(&rs) %
					  ((uint64_t)c->np * r->per / 2 + 1);
		int64_t end = pt_now_ns() + 2 * (int64_t)1000000000;

		while (atomic_load_explicit(&r->s_count, memory_order_acquire) <
			       target &&
		       pt_now_ns() < end)
			sched_yield();
		if (rand_r(&rs) & 1)
			pt_sleep_ns(rand_r(&rs) % 300000);
		rc = c->end == END_ABORT ? bp_pipeline_abort(r->p)
					 : bp_pipeline_drain(r->p);
		for (unsigned p = 0; p < c->np; p++)
			pthread_join(r->prods[p].thread, NULL);
	}
	if (rc)
		pt_fail("drain/abort returned %d", rc);

	/* ---- checks (every thread of the run is joined) */
	if (bp_pipeline_get_stats(r->p, &st) != 0)
		pt_fail("stats failed");
	/* per lane: seen[lane * (submitted + 1) + position] */
	seen = calloc((size_t)nlanes * (st.submitted + 1), sizeof(*seen));
	for (unsigned p = 0; p < c->np; p++) {
		struct prod *pp = &r->prods[p];
		uint64_t last[MAXLANES];
		unsigned a = 0;

		for (unsigned l = 0; l < nlanes; l++)
			last[l] = UINT64_MAX;

		for (unsigned i = 0; i < r->per; i++) {
			struct sjob *j = &r->jobs[(size_t)p * r->per + i];
			bool acc = j->hdr.seq != SEQ_UNSET;
			unsigned d = atomic_load(&j->delivered);

			if (acc && i != a) {
				pt_fail("producer %u: job %u accepted after a "
					"refused one (%u)",
					p, i, a);
				break;
			}
			if (acc) {
				uint64_t lane = j->hdr.seq & (nlanes - 1);
				uint64_t pos = j->hdr.seq >> lane_bits;

				a++;
				if (pos >= st.submitted)
					pt_fail("seq %" PRIu64
						" >= submitted %" PRIu64
						" (lane %" PRIu64 ")",
						pos, st.submitted, lane);
				else if (seen &&
					 seen[lane * (st.submitted + 1) +
					      pos]++)
					pt_fail("seq %" PRIu64 " given twice",
						j->hdr.seq);
				if (last[lane] != UINT64_MAX &&
				    pos <= last[lane])
					pt_fail("producer %u: job %u at lane %"
						PRIu64 " position %" PRIu64
						" after %" PRIu64,
						p, i, lane, pos, last[lane]);
				last[lane] = pos;
			}
			if (d != (acc ? 1u : 0u)) {
				pt_fail("producer %u job %u (%s) delivered %u "
					"times",
					p, i, acc ? "accepted" : "refused", d);
				break;
			}
		}
		if (!pp->handle && a != pp->offered)
			pt_fail("producer %u: bp_pipeline_submit accepted %u, "
				"%u jobs "
				"carry a seq",
				p, pp->offered, a);
		if (pp->handle && a > pp->offered)
			pt_fail("producer %u: %u accepted of %u given", p, a,
				pp->offered);
		if (c->end == END_DRAIN && a != r->per)
			pt_fail("producer %u: %u of %u accepted before drain",
				p, a, r->per);
		total_accepted += a;
	}
	/* each lane's positions are dense: seen up to its count, not past */
	for (uint64_t l = 0; seen && l < nlanes; l++) {
		const char *row = seen + l * (st.submitted + 1);
		uint64_t k = 0;

		while (k < st.submitted && row[k])
			k++;
		for (uint64_t q = k; q < st.submitted; q++)
			if (row[q]) {
				pt_fail("lane %" PRIu64 ": position %" PRIu64
					" given, %" PRIu64 " not",
					l, q, k);
				break;
			}
	}
	free(seen);
	if (st.submitted != total_accepted)
		pt_fail("stats submitted %" PRIu64 ", jobs accepted %" PRIu64,
			st.submitted, total_accepted);
	if (st.submitted != st.ok + st.failed + st.cancelled)
		pt_fail("conservation: submitted %" PRIu64 " != ok %" PRIu64
			" + failed %" PRIu64 " + cancelled %" PRIu64,
			st.submitted, st.ok, st.failed, st.cancelled);
	if (st.ok != r->s_ok || st.failed != r->s_failed ||
	    st.cancelled != r->s_cancelled)
		pt_fail("stats ok/failed/cancelled %" PRIu64 "/%" PRIu64
			"/%" PRIu64 ", sink saw %" PRIu64 "/%" PRIu64
			"/%" PRIu64,
			st.ok, st.failed, st.cancelled, r->s_ok, r->s_failed,
			r->s_cancelled);
	if (st.worker_jobs != st.submitted)
		pt_fail("workers took %" PRIu64 " of %" PRIu64, st.worker_jobs,
			st.submitted);
	if (c->ordered && r->next_seq != st.submitted)
		pt_fail("ordered sink ended at seq %" PRIu64 " of %" PRIu64,
			r->next_seq, st.submitted);
	if (atomic_load(&r->init_calls) != c->nw ||
	    atomic_load(&r->fini_calls) != c->nw)
		pt_fail("init %u, fini %u, workers %u",
			atomic_load(&r->init_calls),
			atomic_load(&r->fini_calls), c->nw);

	printf("%2u %-82s %7" PRIu64 " jobs ok %" PRIu64 " failed %" PRIu64
	       " cancelled %" PRIu64 "  %.0f ms%s\n",
	       num, desc, st.submitted, st.ok, st.failed, st.cancelled,
	       (pt_now_ns() - t0) / 1e6,
	       pt_failures() != fails0 ? "  FAILED" : "");
	fflush(stdout);
	bp_pipeline_destroy(r->p);
	free(r->jobs);
	free(r->ptrs);
	free(r);
	return pt_failures() != fails0;
}

/* A random configuration from the seed (the same for the same seed). */
static struct scfg random_cfg(unsigned *seed)
{
	static const unsigned batches[] = {1, 2, 5, 16, 33, 64, 128, 256};
	struct scfg c;

	c.np = 1 + rand_r(seed) % MAXP;
	c.nw = 1 + rand_r(seed) % 16;
	c.batch = batches[rand_r(seed) % 8];
	c.inflight = c.batch * (1 + rand_r(seed) % 4);
	c.ingress = 1 + rand_r(seed) % 4096;
	c.egress = 1 + rand_r(seed) % 512;
	c.ordered = rand_r(seed) & 1;
	c.stage = (enum stage_kind)(rand_r(seed) % 4);
	c.end = (enum end_kind)(rand_r(seed) % 3);
	c.pk = (enum prod_kind)(rand_r(seed) % 3);
	/* busy-poll only where it cannot starve 2 cores for long */
	c.wait = c.nw <= 2 && rand_r(seed) % 3 == 0 ? BP_WAIT_BUSY_POLL
		 : rand_r(seed) % 3 == 0	    ? BP_WAIT_SLEEP
						    : BP_WAIT_SPIN_SLEEP;
	/* ingress lanes, 1..16, for half of the unordered ones */
	c.lanes = !c.ordered && rand_r(seed) % 2 ? 1u << rand_r(seed) % 5 : 0;
	return c;
}

int main(int argc, char **argv)
{
	unsigned long scale = pt_env_ulong("BP_STRESS_SCALE", PT_STRESS_SCALE);
	unsigned seed = (unsigned)pt_env_ulong(
		"BP_SEED", (unsigned long)(pt_now_ns() % 1000000007) + 1);
	unsigned rseed = seed, bad = 0, num = 0;
	int64_t t0 = pt_now_ns();
	/* BP_ONLY=N runs configuration N alone (as numbered in the output) */
	long only = getenv("BP_ONLY") ? atol(getenv("BP_ONLY")) : -1;

	jobs_per_run = 20000 * scale / (PT_TSAN ? 4 : 1);
	if (argc > 1) {
		char *end;
		unsigned long v = strtoul(argv[1], &end, 0);

		if (*end || v == 0) {
			fprintf(stderr, "usage: %s [jobs per configuration]\n",
				argv[0]);
			return 2;
		}
		jobs_per_run = v;
	}
	printf("seed %u (BP_SEED=%u replays), %lu jobs per configuration\n",
	       seed, seed, jobs_per_run);
	for (unsigned i = 0; i < NTABLE; i++, num++)
		if (only < 0 || (long)num == only)
			bad += (unsigned)run_one(&table[i], seed + i, num);
	for (unsigned i = 0; i < NRANDOM; i++, num++) {
		struct scfg c = random_cfg(&rseed);

		if (only < 0 || (long)num == only)
			bad += (unsigned)run_one(&c, seed + 1000 + i, num);
	}
	pt_watchdog_disarm();
	printf("%u configurations, %u failed, %.1f s (seed %u)\n", num, bad,
	       (pt_now_ns() - t0) / 1e9, seed);
	return bad || pt_failures() ? 1 : 0;
}
