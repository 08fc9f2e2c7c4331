/* SPDX-License-Identifier: MIT */
/*
 * test_stage_errors PROVIDER - jobs that fail, in one batch with jobs that
 * succeed, and a pipeline that keeps working afterwards.
 *
 *   bad key      a copy of a good peer description (node B) with every
 *                rail's key + 12345. What the providers do with it, found
 *                by experiment (libfabric 1.17):
 *                tcp;ofi_rxm  reads and DELIVERED writes through the bad key
 *                             fail (-ECANCELED, the log has the provider's
 *                             text), but a plain write completes ok: its
 *                             completion only means "sent", and the data is
 *                             dropped at the target. The target also drops
 *                             the connection, so other jobs in flight to
 *                             node B on that rail may fail (-ENOTCONN,
 *                             -ECANCELED); later ones reconnect.
 *                shm          does not check keys at all: the bad key's
 *                             writes land and its reads return data.
 *                Jobs of the same batch to another node (A, the good peer)
 *                always succeed and land.
 *   out of range offset + len past the region (also offsets and lengths
 *                that overflow): -ERANGE, never posted
 *   invalid      len 0, NULL buf, op 0 / 4, an unknown flag, a peer id past
 *                max_peers or never added, a rail >= rails: -EINVAL, never
 *                posted
 *   afterwards   a later batch of good jobs completes and lands
 *   always       exactly once per job, conservation, the stage's failed
 *                and posted counters agree with the statuses
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

#define LEN   1000
#define NGOOD 40
#define NBAD  16

enum expect {
	XP_OK,	     /* must succeed */
	XP_BADKEY,   /* through the bad key: see above */
	XP_SAMENODE, /* node B, real key: may be hit by the bad key's
			disconnect on tcp */
	XP_RANGE,
	XP_INVAL
};

struct ejob {
	struct st_job j; /* first */
	enum expect x;
	const char *what;
};

static unsigned add(struct ejob *e, unsigned *n, enum expect x,
		    const char *what, enum bp_rdma_op op, uint32_t peer,
		    void *buf, size_t len, uint64_t off)
{
	struct ejob *j = &e[*n];

	memset(j, 0, sizeof(*j));
	j->j.idx = *n;
	j->j.status = 1;
	j->x = x;
	j->what = what;
	bp_rdma_job_set(&j->j.rj, op, peer, buf, len, off);
	return (*n)++;
}

static void submit(struct st_fix *f, struct ejob *e, unsigned n)
{
	struct bp_job **ptrs = calloc(n, sizeof(*ptrs));
	unsigned done = 0;

	/* one call: the jobs share batches (max_batch 32) */
	for (unsigned i = 0; i < n; i++)
		ptrs[i] = &e[i].j.rj.hdr;
	while (done < n) {
		int rc = bp_pipeline_submit(f->p, ptrs + done, n - done, 0,
					    10ll * 1000000000);

		if (rc <= 0) {
			bp_test_fail("bp_pipeline_submit: %s", bp_strerror(rc));
			break;
		}
		done += (unsigned)rc;
	}
	free(ptrs);
}

static bool landed(const uint8_t *buf, uint64_t off, size_t len, uint64_t seed)
{
	int64_t end = bpt_now_ns() + 10ll * 1000000000;

	while (st_mismatch(buf + off, off, len, seed) >= 0) {
		if (bpt_now_ns() > end)
			return false;
		bpt_sleep_ms(2);
	}
	return true;
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	bool shm = !strcmp(prov, "shm");
	struct st_fix f, fb;
	struct bp_rdma_config c;
	struct bp_rdma_peer_desc bad;
	struct bp_rdma_rail_stats rs;
	struct ejob *e;
	uint8_t *src, *dst;
	unsigned n = 0, n1, nlocal = 0, nprov = 0, nneg = 0;
	int bpeer, badpeer;
	char name[96], line[256] = "";

	st_env();
	snprintf(name, sizeof(name), "stage_errors %s", prov);
	if (!st_provider_ok(prov))
		return ST_SKIP;
	st_watchdog(60, "%s", name);
	/* A: the good peer; B: reached with its real key and a bad one */
	if (st_node_open(&fb, prov, 2, 1 << 20) ||
	    st_node_open(&f, prov, 2, 1 << 20))
		return 1;
	st_rdma_config(&f, &c);
	c.max_peers = 8;
	if (st_stage_open(&f, &c, NULL))
		return 1;
	bad = fb.desc;
	for (unsigned k = 0; k < bad.rails; k++)
		bad.rail[k].key += 12345;
	bpeer = bp_rdma_peer_add(f.r, &fb.desc);
	badpeer = bp_rdma_peer_add(f.r, &bad);
	ST_CHECK(f.peer == 0 && bpeer == 1 && badpeer == 2, "peer ids %d %d %d",
		 f.peer, bpeer, badpeer);
	if (st_start(&f))
		return 1;
	e = calloc(256, sizeof(*e));
	src = st_alloc(1 << 20);
	dst = st_alloc(1 << 20);
	st_fill(src, 0, 1 << 20, 11);

	/* batch 1: good and bad jobs interleaved */
	for (unsigned i = 0; i < NGOOD; i++) {
		uint64_t off = (uint64_t)i * 2 * LEN;

		add(e, &n, XP_OK, "good write", BP_RDMA_WRITE, (uint32_t)f.peer,
		    src + off, LEN, off);
		if (i >= NBAD / 2)
			continue;
		/* B's odd slots: only the bad key aims there */
		add(e, &n, XP_BADKEY, "bad-key write", BP_RDMA_WRITE,
		    (uint32_t)badpeer, src + off + LEN, LEN, off + LEN);
		add(e, &n, XP_BADKEY, "bad-key read", BP_RDMA_READ,
		    (uint32_t)badpeer, dst + off + LEN, LEN, off + LEN);
		/* B's even slots, real key, delivery complete */
		e[add(e, &n, XP_SAMENODE, "node B write", BP_RDMA_WRITE,
		      (uint32_t)bpeer, src + off, LEN, off)]
			.j.rj.flags = BP_RDMA_JOB_DELIVERED;
	}
	/* a bad-key write asking for delivery completion: must not hang */
	e[add(e, &n, XP_BADKEY, "bad-key DELIVERED write", BP_RDMA_WRITE,
	      (uint32_t)badpeer, src + 2 * NGOOD * LEN + LEN, 8,
	      2 * NGOOD * LEN + LEN)]
		.j.rj.flags = BP_RDMA_JOB_DELIVERED;
	add(e, &n, XP_RANGE, "offset+len past the end", BP_RDMA_WRITE,
	    (uint32_t)f.peer, src, 20, f.desc.len - 10);
	add(e, &n, XP_RANGE, "offset == len", BP_RDMA_READ, (uint32_t)f.peer,
	    dst, 1, f.desc.len);
	add(e, &n, XP_RANGE, "offset UINT64_MAX", BP_RDMA_WRITE,
	    (uint32_t)f.peer, src, 2, UINT64_MAX);
	add(e, &n, XP_RANGE, "len SIZE_MAX", BP_RDMA_WRITE, (uint32_t)f.peer,
	    src, SIZE_MAX, 0);
	add(e, &n, XP_RANGE, "len region + 1", BP_RDMA_WRITEDATA,
	    (uint32_t)f.peer, src, f.desc.len + 1, 0);
	add(e, &n, XP_INVAL, "len 0", BP_RDMA_WRITE, (uint32_t)f.peer, src, 0,
	    0);
	add(e, &n, XP_INVAL, "NULL buf", BP_RDMA_WRITE, (uint32_t)f.peer, NULL,
	    8, 0);
	add(e, &n, XP_INVAL, "op 0", 0, (uint32_t)f.peer, src, 8, 0);
	add(e, &n, XP_INVAL, "op 4", 4, (uint32_t)f.peer, src, 8, 0);
	e[add(e, &n, XP_INVAL, "flag 0x2", BP_RDMA_WRITE, (uint32_t)f.peer, src,
	      8, 0)]
		.j.rj.flags = 0x2;
	add(e, &n, XP_INVAL, "peer past max_peers", BP_RDMA_WRITE, 8, src, 8,
	    0);
	add(e, &n, XP_INVAL, "peer never added", BP_RDMA_WRITE, 5, src, 8, 0);
	add(e, &n, XP_INVAL, "peer UINT32_MAX", BP_RDMA_READ, UINT32_MAX, dst,
	    8, 0);
	e[add(e, &n, XP_INVAL, "rail == rails", BP_RDMA_WRITE, (uint32_t)f.peer,
	      src, 8, 0)]
		.j.rj.rail = 2;
	e[add(e, &n, XP_INVAL, "rail 7", BP_RDMA_WRITE, (uint32_t)f.peer, src,
	      8, 0)]
		.j.rj.rail = 7;
	n1 = n;
	st_watchdog(60, "%s: the mixed batch", name);
	submit(&f, e, n1);
	ST_CHECK(st_wait_delivered(&f, n1, 30),
		 "mixed batch: %lu of %u delivered in 30 s (a failing job "
		 "that never completes?)",
		 atomic_load(&f.delivered), n1);

	for (unsigned i = 0; i < n1; i++) {
		const struct bp_rdma_job *j = &e[i].j.rj;
		int s = e[i].j.status;
		/* what a provider's error completion may look like: negative,
		 * and none of the stage's own refusals */
		bool perr = s < 0 && s != -EINVAL && s != -ERANGE;

		if (getenv("ST_VERBOSE") && e[i].x != XP_OK)
			fprintf(stderr, "  %s: %d (%s)\n", e[i].what, s,
				bp_strerror(s));
		nneg += s < 0;
		switch (e[i].x) {
		case XP_OK:
			ST_CHECK(s == BP_JOB_OK, "job %u (%s): status %d (%s)",
				 i, e[i].what, s, bp_strerror(s));
			ST_CHECK(landed(f.tgt, j->offset, j->len, 11),
				 "job %u (%s) did not land", i, e[i].what);
			break;
		case XP_BADKEY:
			if (shm)
				/* shm (1.17) never looks at the key */
				ST_CHECK(s == BP_JOB_OK,
					 "job %u (%s): status %d (%s): shm "
					 "checks keys now? update the test",
					 i, e[i].what, s, bp_strerror(s));
			else if (j->op == BP_RDMA_WRITE &&
				 !(j->flags & BP_RDMA_JOB_DELIVERED))
				/* tcp: sent is all a plain write says */
				ST_CHECK(s == BP_JOB_OK || perr,
					 "job %u (%s): status %d (%s)", i,
					 e[i].what, s, bp_strerror(s));
			else
				ST_CHECK(perr,
					 "job %u (%s): status %d (%s), want "
					 "the provider's error",
					 i, e[i].what, s, bp_strerror(s));
			nprov += s < 0;
			break;
		case XP_SAMENODE:
			if (shm)
				ST_CHECK(s == BP_JOB_OK,
					 "job %u (%s): status %d (%s)", i,
					 e[i].what, s, bp_strerror(s));
			else
				ST_CHECK(s == BP_JOB_OK || perr,
					 "job %u (%s): status %d (%s)", i,
					 e[i].what, s, bp_strerror(s));
			/* delivery complete: ok means it is there */
			if (s == BP_JOB_OK)
				ST_CHECK(st_mismatch(fb.tgt + j->offset,
						     j->offset, j->len, 11) < 0,
					 "job %u (%s) completed DELIVERED but "
					 "is not at the target",
					 i, e[i].what);
			nprov += s < 0;
			break;
		case XP_RANGE:
			ST_CHECK(s == -ERANGE,
				 "job %u (%s): status %d (%s), want -ERANGE", i,
				 e[i].what, s, bp_strerror(s));
			nlocal++;
			break;
		case XP_INVAL:
			ST_CHECK(s == -EINVAL,
				 "job %u (%s): status %d (%s), want -EINVAL", i,
				 e[i].what, s, bp_strerror(s));
			nlocal++;
			break;
		}
	}
	/* what reached B through the bad key */
	for (unsigned i = 0; i < NBAD / 2; i++) {
		uint64_t off = (uint64_t)i * 2 * LEN + LEN;

		if (shm)
			ST_CHECK(landed(fb.tgt, off, LEN, 11),
				 "shm: bad-key write %u did not land", i);
		else
			ST_CHECK(st_nonzero(fb.tgt + off, LEN) < 0,
				 "tcp: slot %u written through the bad key", i);
	}
	if (!shm) {
		ST_CHECK(st_nonzero(dst, 1 << 20) < 0,
			 "tcp: a failed bad-key read wrote the local buffer");
		ST_CHECK(st_log_find(line, sizeof(line), "failed", "to peer 2",
				     NULL),
			 "no log line with the provider's error for the bad "
			 "key");
		if (getenv("ST_VERBOSE"))
			fprintf(stderr, "  bad key log: %s\n", line);
	}

	/*
	 * batch 2: the pipeline still works. Towards A always; towards B on
	 * tcp only once the bad key's disconnect is over (it is torn down
	 * asynchronously: under TSAN later jobs still meet it), so B's jobs
	 * here may fail like the same-node ones above, and a write to B is
	 * retried until it gets through.
	 */
	for (unsigned i = 0; i < 32; i++) {
		uint64_t off = (1 << 19) + (uint64_t)i * LEN;
		bool to_b = i % 2;

		e[add(e, &n, to_b ? XP_SAMENODE : XP_OK, "later write",
		      BP_RDMA_WRITE, (uint32_t)(to_b ? bpeer : f.peer),
		      src + off, LEN, off)]
			.j.rj.flags = to_b ? BP_RDMA_JOB_DELIVERED : 0;
	}
	st_watchdog(60, "%s: the batch after the errors", name);
	submit(&f, e + n1, n - n1);
	ST_CHECK(st_wait_delivered(&f, n, 30), "later batch: %lu of %u",
		 atomic_load(&f.delivered) - n1, n - n1);
	for (unsigned i = n1; i < n; i++) {
		const struct bp_rdma_job *j = &e[i].j.rj;
		int s = e[i].j.status;

		nneg += s < 0;
		if (e[i].x == XP_OK || shm) {
			ST_CHECK(s == BP_JOB_OK, "later job %u: %s", i,
				 bp_strerror(s));
		} else {
			ST_CHECK(s == BP_JOB_OK || (s < 0 && s != -EINVAL &&
						    s != -ERANGE),
				 "later job %u to B: %s", i, bp_strerror(s));
			nprov += s < 0;
		}
		if (s == BP_JOB_OK)
			ST_CHECK(landed(j->peer == (uint32_t)bpeer ? fb.tgt
								   : f.tgt,
					j->offset, j->len, 11),
				 "later write %u did not land", i);
	}
	/* B is reachable again (tcp reconnects): retry for up to 10 s */
	for (unsigned t = 0; t < 100; t++) {
		unsigned i = add(e, &n, XP_SAMENODE, "write to B again",
				 BP_RDMA_WRITE, (uint32_t)bpeer, src + 2 * LEN,
				 LEN, 2 * LEN);
		int s;

		e[i].j.rj.flags = BP_RDMA_JOB_DELIVERED;
		submit(&f, e + i, 1);
		ST_CHECK(st_wait_delivered(&f, n, 30), "retry to B: lost");
		s = e[i].j.status;
		nneg += s < 0;
		nprov += s < 0;
		if (s == BP_JOB_OK)
			break;
		ST_CHECK(!shm && s < 0 && s != -EINVAL && s != -ERANGE,
			 "retry to B: %s", bp_strerror(s));
		ST_CHECK(t < 99, "node B unreachable 10 s after the bad key");
		bpt_sleep_ms(100);
	}
	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");

	/* conservation; counters agree with the statuses */
	st_check_conservation(&f, &e[0].j, 0, n);
	for (unsigned i = 0; i < n; i++)
		ST_CHECK(atomic_load(&e[i].j.deliveries) == 1,
			 "job %u delivered %u times", i,
			 atomic_load(&e[i].j.deliveries));
	/* nothing was aborted: a provider's error must not read as
	 * BP_JOB_CANCELLED (tcp reports a dropped connection as
	 * FI_ECANCELED) */
	ST_CHECK(f.cancelled == 0,
		 "%lu jobs delivered as BP_JOB_CANCELLED without an abort "
		 "(a provider error completion FI_ECANCELED passed on as "
		 "-ECANCELED)",
		 f.cancelled);
	st_rail_sum(f.r, f.workers, f.rails, &rs, NULL);
	ST_CHECK(rs.posted == n - nlocal,
		 "posted %" PRIu64 ", want %u (refused jobs are never posted)",
		 rs.posted, n - nlocal);
	ST_CHECK(rs.failed == nneg && rs.completed == n - nlocal - nprov,
		 "rail stats: completed %" PRIu64 " failed %" PRIu64
		 ", want %u and %u",
		 rs.completed, rs.failed, n - nlocal - nprov, nneg);
	st_watchdog_off();
	st_close(&f);
	st_close(&fb);
	free(e);
	free(src);
	free(dst);
	return st_result(name);
}
