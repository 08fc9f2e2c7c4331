/* SPDX-License-Identifier: MIT */
/*
 * test_stage_prepare PROVIDER - the stage's prepare callback generates
 * each write's data just before its post (as bp-target's fill does), and a
 * job whose prepare fails fails alone.
 *
 * The stage prepares one job ahead of its posts (src/rdma/stage.c, post):
 * job i goes out with FI_MORE only once job i + 1 is ready, so a prepare
 * that fails must neither take its neighbours with it nor leave the job
 * before it waiting for an op that never follows. Here prepare fills the
 * job's buffer with its pattern and fails (-EIO) every sixteenth job,
 * every seventh and the very last one, submitted in batches of 1, 5, 16,
 * 33 and 64 in turn (which job ends a rail's post batch depends on how
 * the workers and rails share them; the -FI_EAGAIN of a full send queue
 * puts a prepared look-ahead job back on the queue now and then).
 *
 *   good jobs    ok, their bytes at the target (the pattern prepare wrote)
 *                within a deadline: a completion comes once the write is
 *                sent, and the target's rail places it after
 *   failed jobs  -EIO, nothing of theirs at the target, never posted (the
 *                rails' posted and failed counters)
 *   always       every job delivered exactly once, conservation; prepare
 *                called once per job
 *
 * Exits 0 pass, 77 skip (the provider is missing), 1 fail.
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

#define JOBS	  300u
#define LEN	  3000u
#define STRIDE	  4096u /* target bytes per job: LEN, then zeros */
#define SEED	  7
#define POST_EACH 16u

struct pjob {
	struct st_job j; /* first: the pipeline gets &j.rj.hdr */
	uint8_t *src;
	atomic_uint prepared;
};

static bool fails(unsigned idx)
{
	return idx % POST_EACH == POST_EACH - 1 || idx % 7 == 3 ||
	       idx == JOBS - 1;
}

static int prepare(void *ctx, struct bp_rdma_job *job)
{
	struct pjob *p = (struct pjob *)job;

	(void)ctx;
	/* relaxed: a count, read by main after the drain's join */
	if (atomic_fetch_add_explicit(&p->prepared, 1, memory_order_relaxed))
		bp_test_fail("job %u prepared twice", p->j.idx);
	if (fails(p->j.idx))
		return -EIO;
	st_fill(p->src, (uint64_t)p->j.idx * STRIDE, LEN, SEED);
	return 0;
}

/* Submit every job; returns how many were accepted. */
static unsigned run(struct st_fix *f, struct pjob *jobs, uint8_t *src)
{
	struct bp_job *ptrs[64];
	unsigned done = 0, round = 0;

	for (unsigned i = 0; i < JOBS; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].j.idx = i;
		jobs[i].src = src + (size_t)i * LEN;
		bp_rdma_job_set(&jobs[i].j.rj, BP_RDMA_WRITE, (uint32_t)f->peer,
				jobs[i].src, LEN, (uint64_t)i * STRIDE);
	}
	/* submits of 1, 5, 16, 33 and 64 jobs, in turn */
	while (done < JOBS) {
		static const unsigned each[] = {1, 5, 16, 33, 64};
		unsigned k = each[round++ % 5];
		int rc;

		if (k > JOBS - done)
			k = JOBS - done;
		for (unsigned i = 0; i < k; i++)
			ptrs[i] = &jobs[done + i].j.rj.hdr;
		rc = bp_pipeline_submit(f->p, ptrs, k, 0, 10 * 1000000000ll);
		if (rc <= 0) {
			bp_test_fail("submit: %s", bp_strerror(rc));
			return done;
		}
		done += (unsigned)rc;
	}
	ST_CHECK(st_wait_delivered(f, JOBS, 30), "not all delivered");
	return done;
}

/* Whether every job that should land has its bytes at the target. */
static bool all_landed(const struct st_fix *f)
{
	for (unsigned i = 0; i < JOBS; i++)
		if (!fails(i) && st_mismatch(f->tgt + (size_t)i * STRIDE,
					     (uint64_t)i * STRIDE, LEN,
					     SEED) >= 0)
			return false;
	return true;
}

/*
 * A write's completion comes once the provider has sent it (tcp: handed
 * it to the socket), not once the target holds it: the target's rail
 * places it after. Wait for the bytes, with a deadline (under TSAN the
 * target's rail lags by far more), before check() looks; a failed job's
 * range must still be zero once all the others are in.
 */
static void wait_landed(const struct st_fix *f)
{
	int64_t end = bpt_now_ns() + 10ll * 1000000000 * (BPT_TSAN ? 5 : 1);

	while (!all_landed(f) && bpt_now_ns() < end)
		bpt_sleep_ms(2);
}

static void check(struct st_fix *f, struct pjob *jobs)
{
	struct bp_rdma_rail_stats rs;
	unsigned nfail = 0;

	for (unsigned i = 0; i < JOBS; i++) {
		struct pjob *p = &jobs[i];
		const uint8_t *t = f->tgt + (size_t)i * STRIDE;
		/* relaxed: the sink's count, ordered by the drain's join */
		unsigned d = atomic_load_explicit(&p->j.deliveries,
						  memory_order_relaxed);

		/* relaxed: prepare's count, ordered by the drain's join */
		ST_CHECK(atomic_load_explicit(&p->prepared,
					      memory_order_relaxed) == 1,
			 "job %u prepared %u times", i,
			 atomic_load_explicit(&p->prepared,
					      memory_order_relaxed));
		ST_CHECK(d == 1, "job %u delivered %u times", i, d);
		if (fails(i)) {
			nfail++;
			ST_CHECK(p->j.status == -EIO,
				 "job %u: status %d, not prepare's -EIO", i,
				 p->j.status);
			ST_CHECK(st_nonzero(t, STRIDE) < 0,
				 "job %u failed in prepare but wrote", i);
		} else {
			ST_CHECK(p->j.status == BP_JOB_OK, "job %u: status %d",
				 i, p->j.status);
			ST_CHECK(st_mismatch(t, (uint64_t)i * STRIDE, LEN,
					     SEED) < 0 &&
					 st_nonzero(t + LEN, STRIDE - LEN) < 0,
				 "job %u: the target does not hold its bytes",
				 i);
		}
	}
	st_rail_sum(f->r, f->workers, f->rails, &rs, NULL);
	ST_CHECK(rs.posted == JOBS - nfail && rs.completed == JOBS - nfail &&
			 rs.failed == nfail,
		 "rails posted %" PRIu64 ", completed %" PRIu64
		 ", failed %" PRIu64 "; want %u, %u, %u",
		 rs.posted, rs.completed, rs.failed, JOBS - nfail, JOBS - nfail,
		 nfail);
	ST_CHECK(f->failed == nfail && f->ok == JOBS - nfail,
		 "sink: %lu ok, %lu failed; want %u, %u", f->ok, f->failed,
		 JOBS - nfail, nfail);
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	struct bp_rdma_config c;
	struct st_fix f;
	struct pjob *jobs = calloc(JOBS, sizeof(*jobs));
	uint8_t *src = st_alloc((size_t)JOBS * LEN);
	unsigned accepted;

	st_env();
	if (!st_provider_ok(prov))
		return ST_SKIP;
	if (!jobs || !src)
		return 1;
	st_watchdog(120, "test_stage_prepare %s", prov);
	if (st_node_open(&f, prov, 2, (size_t)JOBS * STRIDE))
		return 1;
	st_rdma_config(&f, &c);
	c.post_batch = POST_EACH;
	c.prepare = prepare;
	if (st_stage_open(&f, &c, NULL) || st_start(&f))
		return 1;
	accepted = run(&f, jobs, src);
	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");
	wait_landed(&f);
	check(&f, jobs);
	st_check_conservation(&f, &jobs[0].j, 0, accepted);
	st_close(&f);
	free(jobs);
	free(src);
	st_watchdog_off();
	return st_result("test_stage_prepare");
}
