/* SPDX-License-Identifier: MIT */
/*
 * test_stage_direct PROVIDER [busy|spin-sleep|event] - run to completion:
 * one thread drives a slot of the stage with bp_rdma_direct_* (no
 * pipeline), against a node in this process.
 *
 *   open       NULL / slot out of range -EINVAL; a slot held twice -EBUSY;
 *              a pipeline whose worker needs a held slot fails to start,
 *              and starts (and writes) once the handle is closed
 *   data       NJOBS writes of sizes 8 B .. 16 KiB on 2 rails, posted in
 *              batches of up to 32 while polling, every one DELIVERED:
 *              each comes back from poll exactly once, ok, and the target
 *              holds every byte; outstanding counts them down to 0
 *   statuses   a job with len 0 comes back -EINVAL, one past the region
 *              -ERANGE, through poll like the others
 *   poll       returns 0 at once with nothing posted, even without a limit;
 *              timeout 0 is one pass
 *   cancel     many jobs posted, then cancel: every one comes back, ok or
 *              BP_JOB_CANCELLED, some cancelled; a post afterwards -EPIPE
 *   close      -EBUSY while jobs are outstanding; 0 after
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

#define NJOBS 3000
#define TLEN  (4u << 20)
#define MAXJ  16384

static const char *prov;
static enum bp_rdma_cq_wait wait_mode = BP_RDMA_CQ_SPIN_SLEEP;

struct djob {
	struct bp_rdma_job rj; /* first */
	unsigned seen;
};

static struct djob jobs[NJOBS];
static uint8_t *src;

static int open_stage(struct st_fix *f)
{
	struct bp_rdma_config c;

	st_rdma_config(f, &c);
	c.cq_wait = wait_mode;
	c.credits = 64;
	if (bp_rdma_create(&c, &f->r))
		return -1;
	f->workers = c.workers;
	f->peer = bp_rdma_peer_add(f->r, &f->desc);
	return f->peer < 0 ? -1 : 0;
}

/* Poll until outstanding is 0; each job seen once. Returns jobs back. */
static unsigned poll_all(struct bp_rdma_direct *d, unsigned *ok,
			 unsigned *cancelled, unsigned *other)
{
	struct bp_rdma_job *done[64];
	unsigned back = 0;
	int64_t end = bpt_now_ns() + 20000000000ll * (BPT_TSAN ? 3 : 1);

	while (bp_rdma_direct_outstanding(d) && bpt_now_ns() < end) {
		int n = bp_rdma_direct_poll(d, done, 64, 100000000);

		ST_CHECK(n >= 0, "poll: %s", bp_strerror(n));
		for (int i = 0; i < n; i++) {
			struct djob *j = (struct djob *)done[i];

			if (j->seen++)
				bp_test_fail("job %ld back twice",
					     (long)(j - jobs));
			back++;
			if (j->rj.hdr.status == BP_JOB_OK)
				++*ok;
			else if (j->rj.hdr.status == BP_JOB_CANCELLED)
				++*cancelled;
			else
				++*other;
		}
	}
	ST_CHECK(!bp_rdma_direct_outstanding(d),
		 "%llu jobs never came back",
		 (unsigned long long)bp_rdma_direct_outstanding(d));
	return back;
}

static void test_open(struct st_fix *f)
{
	struct bp_rdma_direct *d = NULL, *d2 = NULL;
	struct bp_pipeline_config pc;
	struct bp_pipeline *p = NULL;
	int rc;

	ST_CHECK(bp_rdma_direct_open(NULL, 0, &d) == -EINVAL, "open NULL");
	ST_CHECK(bp_rdma_direct_open(f->r, 0, NULL) == -EINVAL, "open out NULL");
	ST_CHECK(bp_rdma_direct_open(f->r, f->workers, &d) == -EINVAL,
		 "open slot out of range");
	ST_CHECK(bp_rdma_direct_open(f->r, 1, &d) == 0, "open slot 1");
	ST_CHECK(bp_rdma_direct_open(f->r, 1, &d2) == -EBUSY,
		 "open a held slot: not -EBUSY");
	ST_CHECK(st_log_find(NULL, 0, "slot 1 is in use", (char *)NULL),
		 "no log line for the held slot");
	/* a pipeline needs slots 0 and 1: its worker 1 cannot start */
	st_pipeline_config(f, &pc);
	rc = bp_pipeline_create(&pc, &p);
	ST_CHECK(rc == 0, "pipeline create: %s", bp_strerror(rc));
	rc = bp_pipeline_start(p);
	ST_CHECK(rc < 0, "a pipeline started on a slot a handle holds");
	bp_pipeline_destroy(p);
	ST_CHECK(bp_rdma_direct_poll(d, NULL, 0, 0) == 0, "poll max 0");
	{
		struct bp_rdma_job *out[4];
		int64_t t0 = bpt_now_ns();

		ST_CHECK(bp_rdma_direct_poll(d, out, 4, -1) == 0,
			 "poll without a limit, nothing posted: not 0");
		ST_CHECK(bpt_now_ns() - t0 < 2000000000ll,
			 "poll with nothing posted waited");
	}
	ST_CHECK(bp_rdma_direct_close(d) == 0, "close");
	ST_CHECK(bp_rdma_direct_close(NULL) == -EINVAL, "close NULL");
	ST_CHECK(bp_rdma_direct_post(NULL, NULL, 0) == -EINVAL, "post NULL");
	ST_CHECK(bp_rdma_direct_poll(NULL, NULL, 0, 0) == -EINVAL,
		 "poll NULL");
	/* the slot is free again: a pipeline starts and writes */
	rc = bp_pipeline_create(&pc, &p);
	ST_CHECK(rc == 0 && bp_pipeline_start(p) == 0,
		 "the pipeline does not start after close");
	if (rc == 0) {
		struct st_job sj[8];

		st_jobs_init(sj, 8);
		for (unsigned i = 0; i < 8; i++) {
			bp_rdma_job_set(&sj[i].rj, BP_RDMA_WRITE,
					(uint32_t)f->peer, src + i * 64, 64,
					(uint64_t)i * 64);
			/* landed before its completion (tcp completes a
			 * plain write once sent): no late write over the
			 * bytes checked below */
			sj[i].rj.flags = BP_RDMA_JOB_DELIVERED;
		}
		f->p = p;
		ST_CHECK(st_submit(f, sj, 8) == 8, "submit after close");
		ST_CHECK(bp_pipeline_drain(p) == 0, "drain");
		ST_CHECK(f->ok == 8, "%lu of 8 pipeline writes ok", f->ok);
		bp_pipeline_destroy(p);
		f->p = NULL;
	}
}

static void test_data(struct st_fix *f)
{
	struct bp_rdma_direct *d;
	unsigned posted = 0, ok = 0, canc = 0, other = 0, back = 0;
	uint64_t off = 0;
	struct bp_rdma_job *batch[32], *done[64];

	ST_CHECK(bp_rdma_direct_open(f->r, 0, &d) == 0, "open slot 0");
	memset(jobs, 0, sizeof(jobs));
	st_fill(src, 0, TLEN, 3);
	while (posted < NJOBS) {
		unsigned k = 0;

		while (k < 32 && posted + k < NJOBS) {
			struct djob *j = &jobs[posted + k];
			size_t len = (size_t)8 << ((posted + k) % 12);

			if (off + len > TLEN)
				off = 0;
			bp_rdma_job_set(&j->rj, BP_RDMA_WRITE,
					(uint32_t)f->peer, src + off, len, off);
			j->rj.flags = BP_RDMA_JOB_DELIVERED;
			batch[k++] = &j->rj;
			off += len;
		}
		ST_CHECK(bp_rdma_direct_post(d, batch, k) == (int)k, "post");
		posted += k;
		/* keep going: take what is done without waiting */
		int n = bp_rdma_direct_poll(d, done, 64, 0);

		for (int i = 0; i < n; i++) {
			struct djob *j = (struct djob *)done[i];

			if (j->seen++)
				bp_test_fail("job back twice");
			back++;
			ok += j->rj.hdr.status == BP_JOB_OK;
			other += j->rj.hdr.status != BP_JOB_OK;
		}
	}
	back += poll_all(d, &ok, &canc, &other);
	ST_CHECK(back == NJOBS && ok == NJOBS,
		 "%u of %u jobs back, %u ok, %u cancelled, %u other", back,
		 NJOBS, ok, canc, other);
	ST_CHECK(st_differ(src, f->tgt, off) < 0,
		 "the target differs at byte %ld", st_differ(src, f->tgt, off));
	printf("  direct: %u writes, every one back once and ok, bytes "
	       "verified\n",
	       NJOBS);

	/* refused jobs come back through poll with their status */
	{
		struct djob *a = &jobs[0], *b = &jobs[1];

		memset(a, 0, 2 * sizeof(*a));
		bp_rdma_job_set(&a->rj, BP_RDMA_WRITE, (uint32_t)f->peer, src,
				0, 0);
		bp_rdma_job_set(&b->rj, BP_RDMA_WRITE, (uint32_t)f->peer, src,
				64, TLEN);
		batch[0] = &a->rj;
		batch[1] = &b->rj;
		ST_CHECK(bp_rdma_direct_post(d, batch, 2) == 2, "post bad");
		ok = canc = other = 0;
		ST_CHECK(poll_all(d, &ok, &canc, &other) == 2, "bad jobs back");
		ST_CHECK(a->rj.hdr.status == -EINVAL &&
				 b->rj.hdr.status == -ERANGE,
			 "statuses %d %d, want -EINVAL -ERANGE",
			 a->rj.hdr.status, b->rj.hdr.status);
	}
	ST_CHECK(bp_rdma_direct_close(d) == 0, "close after data");
}

static void test_cancel(struct st_fix *f)
{
	struct bp_rdma_direct *d;
	unsigned ok = 0, canc = 0, other = 0, n = 2000;
	struct bp_rdma_job **all = calloc(n, sizeof(*all));
	int rc;

	ST_CHECK(bp_rdma_direct_open(f->r, 0, &d) == 0, "open for cancel");
	memset(jobs, 0, sizeof(jobs));
	for (unsigned i = 0; i < n; i++) {
		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)f->peer,
				src, 4096, (uint64_t)(i % 512) * 4096);
		all[i] = &jobs[i].rj;
	}
	ST_CHECK(bp_rdma_direct_post(d, all, n) == (int)n, "post many");
	rc = bp_rdma_direct_close(d);
	ST_CHECK(rc == -EBUSY, "close with jobs out: %d", rc);
	ST_CHECK(bp_rdma_direct_cancel(d) == 0, "cancel");
	ST_CHECK(bp_rdma_direct_post(d, all, 1) == -EPIPE,
		 "post after cancel: not -EPIPE");
	ST_CHECK(poll_all(d, &ok, &canc, &other) == n,
		 "not every job came back after cancel");
	ST_CHECK(other == 0 && canc > 0,
		 "after cancel: %u ok, %u cancelled, %u other", ok, canc,
		 other);
	printf("  cancel: %u jobs, %u ok, %u cancelled\n", n, ok, canc);
	ST_CHECK(bp_rdma_direct_close(d) == 0, "close after cancel");
	free(all);
}

int main(int argc, char **argv)
{
	struct st_fix f;
	char name[96];

	prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	if (argc > 2)
		wait_mode = !strcmp(argv[2], "busy")	? BP_RDMA_CQ_BUSY
			    : !strcmp(argv[2], "event") ? BP_RDMA_CQ_EVENT
							: BP_RDMA_CQ_SPIN_SLEEP;
	st_env();
	snprintf(name, sizeof(name), "stage_direct %s %s", prov,
		 argc > 2 ? argv[2] : "spin-sleep");
	if (!st_provider_ok(prov))
		return ST_SKIP;
	st_watchdog(120, "%s", name);
	src = st_alloc(TLEN + 4096);
	if (st_node_open(&f, prov, 2, TLEN) || open_stage(&f))
		return 1;
	test_open(&f);
	test_data(&f);
	test_cancel(&f);
	st_close(&f);
	free(src);
	st_watchdog_off();
	return st_result(name);
}
