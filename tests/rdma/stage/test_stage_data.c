/* SPDX-License-Identifier: MIT */
/*
 * test_stage_data PROVIDER [busy|spin|event|auto] - the RDMA stage moves bytes
 * exactly: a pipeline (2 workers, 2 rails) writes patterned data of many
 * sizes (1 byte, odd sizes, page +- 1, 64 KiB +- 1, 1 MiB and more) into a
 * node's region in this process, reads it back, and writes with immediate
 * data.
 *
 *   write      every job completes ok; the writes flagged DELIVERED are at
 *              the target as soon as their completion is seen (half of the
 *              jobs); every byte arrives within a deadline; the gaps between
 *              the jobs' ranges stay zero (nothing lands off target)
 *   read       the target is rewritten directly with a second pattern, then
 *              read into a zeroed buffer: ranges match the new pattern (the
 *              read fetched the target, not some copy of ours), gaps zero
 *   writedata  one unique immediate per job: the node counts each once
 *              (bp_rdma_node_data_count), on_data sees the whole set (sum
 *              and per-value), on a valid rail; the data lands
 *   reuse      bp_rdma_peer_remove, then bp_rdma_peer_add of another
 *              node's region: the same id, and its writes land there, not
 *              in the old region
 *   always     each job reaches the sink exactly once; pipeline stats
 *              submitted == ok + failed + cancelled == jobs, none failed;
 *              rail stats posted == completed == jobs; jobs naming a rail
 *              and striped ones both work
 *
 * The second argument picks the stage's cq_wait (default spin-then-sleep).
 * Exits 0 pass, 77 skip (the provider is missing), 1 fail.
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

static const size_t sizes[] = {
	1,    2,    3,	   7,	  17,	 255,	   4095,
	4096, 4097, 65535, 65536, 65537, 1u << 20, (1u << 20) + 13,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

#define SEED_WRITE 1
#define SEED_TGT   2
#define SEED_IMM   3

struct layout {
	unsigned n;
	uint64_t *off;
	size_t *len;
	uint64_t end; /* bytes used */
};

/* Jobs back to back with small odd gaps: rounds of every size, then many
 * small jobs (batches of them). */
static void layout_make(struct layout *l, unsigned rounds, unsigned smalls)
{
	uint64_t cur = 5;

	l->n = rounds * (unsigned)NSIZES + smalls;
	l->off = calloc(l->n, sizeof(*l->off));
	l->len = calloc(l->n, sizeof(*l->len));
	for (unsigned i = 0; i < l->n; i++) {
		l->len[i] = i < rounds * NSIZES ? sizes[i % NSIZES]
						: (size_t)(i * 37 % 500) + 1;
		l->off[i] = cur;
		cur += l->len[i] + 3 + i % 7;
	}
	l->end = cur;
}

/* Verify buf (laid out like the target) against seed over the jobs'
 * ranges, and zero in the gaps. Returns the number of bad ranges. */
static unsigned verify(const struct layout *l, const uint8_t *buf,
		       uint64_t seed, const char *what, bool report)
{
	unsigned bad = 0;
	uint64_t prev_end = 0;

	for (unsigned i = 0; i < l->n; i++) {
		long m = st_mismatch(buf + l->off[i], l->off[i], l->len[i],
				     seed);
		long z = st_nonzero(buf + prev_end, l->off[i] - prev_end);

		if (m >= 0) {
			if (report && bad < 5)
				bp_test_fail("%s: job %u (offset %" PRIu64
					     ", %zu bytes): byte %ld differs",
					     what, i, l->off[i], l->len[i], m);
			bad++;
		}
		if (z >= 0) {
			if (report && bad < 5)
				bp_test_fail(
					"%s: gap before job %u: byte %" PRIu64
					" written",
					what, i, prev_end + (uint64_t)z);
			bad++;
		}
		prev_end = l->off[i] + l->len[i];
	}
	return bad;
}

static bool verify_deadline(const struct layout *l, const uint8_t *buf,
			    uint64_t seed, const char *what)
{
	int64_t end = bpt_now_ns() + 10ll * 1000000000 * (BPT_TSAN ? 5 : 1);

	while (verify(l, buf, seed, what, false)) {
		if (bpt_now_ns() > end) {
			verify(l, buf, seed, what, true);
			return false;
		}
		bpt_sleep_ms(2);
	}
	return true;
}

static void set_jobs(struct st_fix *f, struct st_job *jobs,
		     const struct layout *l, enum bp_rdma_op op, uint8_t *buf)
{
	st_jobs_init(jobs, l->n);
	for (unsigned i = 0; i < l->n; i++) {
		struct bp_rdma_job *j = &jobs[i].rj;

		bp_rdma_job_set(j, op, (uint32_t)f->peer, buf + l->off[i],
				l->len[i], l->off[i]);
		/* every fifth job names its rail; the rest are striped */
		if (i % 5 == 0)
			j->rail = (uint8_t)(i / 5 % f->rails);
	}
}

static void check_all_ok(struct st_job *jobs, unsigned n, const char *what)
{
	unsigned bad = 0;

	for (unsigned i = 0; i < n; i++)
		if (jobs[i].status != BP_JOB_OK && bad++ < 5)
			bp_test_fail("%s: job %u status %d (%s)", what, i,
				     jobs[i].status,
				     bp_strerror(jobs[i].status));
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	const char *wait = argc > 2 ? argv[2] : "spin";
	struct st_fix f;
	struct bp_rdma_config c;
	struct layout l;
	struct st_job *wj, *rj, *dj;
	uint8_t *src, *dst;
	atomic_uchar *seen;
	unsigned nd = ST_SCALE(500), total;
	uint64_t data0, imm_sum = 0;
	struct bp_rdma_rail_stats rs;
	char name[96];

	st_env();
	snprintf(name, sizeof(name), "stage_data %s cq_wait=%s", prov, wait);
	if (!st_provider_ok(prov))
		return ST_SKIP;
	st_watchdog(120, "%s", name);
	layout_make(&l, BPT_TSAN ? 1 : 3, ST_SCALE(600));
	/* the writedata jobs go past the layout */
	if (st_node_open(&f, prov, 2, l.end + nd * 64 + 4096))
		return 1;
	st_rdma_config(&f, &c);
	if (!strcmp(wait, "busy"))
		c.cq_wait = BP_RDMA_CQ_BUSY;
	else if (!strcmp(wait, "event"))
		c.cq_wait = BP_RDMA_CQ_EVENT;
	else if (!strcmp(wait, "auto"))
		c.cq_wait = BP_RDMA_CQ_AUTO;
	else if (strcmp(wait, "spin")) {
		fprintf(stderr, "usage: %s PROVIDER [busy|spin|event|auto]\n",
			argv[0]);
		return 2;
	}
	if (st_stage_open(&f, &c, NULL) || st_start(&f))
		return 1;

	src = st_alloc(l.end);
	dst = st_alloc(l.end);
	wj = calloc(l.n, sizeof(*wj));
	rj = calloc(l.n, sizeof(*rj));
	dj = calloc(nd, sizeof(*dj));
	seen = st_track_imm(&f, nd);
	if (!src || !dst || !wj || !rj || !dj || !seen)
		return 1;
	st_fill(src, 0, l.end, SEED_WRITE);

	/* --- write: half the jobs ask for delivery completion */
	set_jobs(&f, wj, &l, BP_RDMA_WRITE, src);
	for (unsigned i = 1; i < l.n; i += 2)
		wj[i].rj.flags = BP_RDMA_JOB_DELIVERED;
	st_watchdog(120, "%s: writes", name);
	ST_CHECK(st_submit(&f, wj, l.n) == l.n, "writes not all accepted");
	ST_CHECK(st_wait_delivered(&f, l.n, 30),
		 "writes: %lu of %u delivered to the sink in 30 s",
		 atomic_load(&f.delivered), l.n);
	check_all_ok(wj, l.n, "write");
	for (unsigned i = 1; i < l.n; i += 2) {
		long m = st_mismatch(f.tgt + l.off[i], l.off[i], l.len[i],
				     SEED_WRITE);

		ST_CHECK(m < 0,
			 "DELIVERED write %u (%zu bytes at %" PRIu64
			 ") completed but byte %ld is not at the target",
			 i, l.len[i], l.off[i], m);
	}
	ST_CHECK(verify_deadline(&l, f.tgt, SEED_WRITE, "write"),
		 "writes did not all land within the deadline");

	/* --- read: the target changes under us first */
	st_fill(f.tgt, 0, l.end, SEED_TGT);
	for (unsigned i = 0; i < l.n; i++) /* gaps zero again */
		st_zero(f.tgt + (i ? l.off[i - 1] + l.len[i - 1] : 0),
			l.off[i] - (i ? l.off[i - 1] + l.len[i - 1] : 0));
	set_jobs(&f, rj, &l, BP_RDMA_READ, dst);
	st_watchdog(120, "%s: reads", name);
	ST_CHECK(st_submit(&f, rj, l.n) == l.n, "reads not all accepted");
	ST_CHECK(st_wait_delivered(&f, 2ul * l.n, 30),
		 "reads: %lu of %u delivered in 30 s",
		 atomic_load(&f.delivered) - l.n, l.n);
	check_all_ok(rj, l.n, "read");
	/* a read's completion means the bytes are here: no deadline */
	ST_CHECK(verify(&l, dst, SEED_TGT, "read", true) == 0,
		 "read back data differs");

	/* --- writedata: imm = index, sizes 1..64 past the layout */
	data0 = bp_rdma_node_data_count(f.node);
	st_fill(src, 0, l.end, SEED_IMM);
	st_jobs_init(dj, nd);
	for (unsigned i = 0; i < nd; i++) {
		bp_rdma_job_set(&dj[i].rj, BP_RDMA_WRITEDATA, (uint32_t)f.peer,
				src + i * 64, i % 64 + 1, l.end + i * 64);
		dj[i].rj.imm = i;
		imm_sum += i;
		if (i % 3 == 0)
			dj[i].rj.flags = BP_RDMA_JOB_DELIVERED;
	}
	st_watchdog(60, "%s: writedata", name);
	ST_CHECK(st_submit(&f, dj, nd) == nd, "writedata not all accepted");
	ST_CHECK(st_wait_delivered(&f, 2ul * l.n + nd, 30),
		 "writedata: %lu of %u delivered",
		 atomic_load(&f.delivered) - 2ul * l.n, nd);
	check_all_ok(dj, nd, "writedata");
	{
		int64_t end = bpt_now_ns() + 10ll * 1000000000;

		while (bp_rdma_node_data_count(f.node) - data0 < nd &&
		       bpt_now_ns() < end)
			bpt_sleep_ms(1);
	}
	ST_CHECK(bp_rdma_node_data_count(f.node) - data0 == nd,
		 "node counted %" PRIu64 " immediates, %u sent",
		 bp_rdma_node_data_count(f.node) - data0, nd);
	ST_CHECK(atomic_load(&f.imm_count) == nd,
		 "on_data called %lu times, %u sent", atomic_load(&f.imm_count),
		 nd);
	ST_CHECK(atomic_load(&f.imm_sum) == imm_sum,
		 "on_data sum %lu, expected %" PRIu64, atomic_load(&f.imm_sum),
		 imm_sum);
	for (unsigned i = 0; i < nd; i++)
		if (!atomic_load(&seen[i])) {
			bp_test_fail("immediate %u never arrived", i);
			break;
		}
	ST_CHECK(atomic_load(&f.imm_bad_rail) == 0,
		 "on_data got a rail index >= rails");
	for (unsigned i = 0; i < nd; i++) {
		long m = st_mismatch(f.tgt + l.end + i * 64, i * 64, i % 64 + 1,
				     SEED_IMM);

		if (m >= 0) {
			bp_test_fail("writedata %u: byte %ld differs", i, m);
			break;
		}
	}

	/* --- a peer id given back and taken again: the new peer's region */
	st_watchdog(60, "%s: peer id reused", name);
	{
		enum { PJ = 8, PLEN = 8192 };
		struct bp_rdma_node_config nc;
		struct bp_rdma_node *n2 = NULL;
		struct bp_rdma_region *r2 = NULL;
		struct bp_rdma_peer_desc d2;
		uint8_t *t2 = st_alloc(PJ * PLEN), *s2 = st_alloc(PJ * PLEN);
		/* a copy, not bp_rdma_digest: the library is instrumented,
		 * and the region is remote-written (ST_REMOTE_MEM) */
		uint8_t *before = st_alloc(f.tlen);
		struct st_job pj[PJ];
		int id;

		ST_CHECK(before != NULL, "reuse: no memory for a copy");
		if (before)
			st_copy(before, f.tgt, f.tlen);
		bp_rdma_node_config_init(&nc);
		nc.provider = prov;
		nc.node = st_node_addr(prov);
		nc.rails = 2;
		nc.log = st_log_fn;
		ST_CHECK(t2 && s2 && bp_rdma_node_create(&nc, &n2) == 0 &&
				 bp_rdma_node_expose(n2, t2, PJ * PLEN, NULL,
						     &r2) == 0,
			 "a second node");
		bp_rdma_region_describe(r2, &d2);
		ST_CHECK(bp_rdma_peer_remove(f.r, f.peer) == 0, "peer_remove");
		ST_CHECK(bp_rdma_peer_remove(f.r, f.peer) == -EINVAL,
			 "peer_remove twice");
		id = bp_rdma_peer_add(f.r, &d2);
		ST_CHECK(id == f.peer, "the id given back is reused: %d", id);
		st_fill(s2, 0, PJ * PLEN, SEED_IMM + 1);
		st_jobs_init(pj, PJ);
		for (unsigned i = 0; i < PJ; i++) {
			bp_rdma_job_set(&pj[i].rj, BP_RDMA_WRITE, (uint32_t)id,
					s2 + i * PLEN, PLEN, i * PLEN);
			pj[i].rj.flags = BP_RDMA_JOB_DELIVERED;
		}
		ST_CHECK(st_submit(&f, pj, PJ) == PJ, "reuse: not accepted");
		ST_CHECK(st_wait_delivered(&f, 2ul * l.n + nd + PJ, 30),
			 "reuse: not delivered");
		check_all_ok(pj, PJ, "write to a reused peer id");
		ST_CHECK(st_mismatch(t2, 0, PJ * PLEN, SEED_IMM + 1) < 0,
			 "reuse: the new peer's region lacks the writes");
		ST_CHECK(before && st_differ(f.tgt, before, f.tlen) < 0,
			 "reuse: the old peer's region changed");
		/* the old region back under the same id, for what follows */
		ST_CHECK(bp_rdma_peer_remove(f.r, id) == 0 &&
				 bp_rdma_peer_add(f.r, &f.desc) == f.peer,
			 "the first peer again");
		bp_rdma_region_close(r2);
		bp_rdma_node_destroy(n2);
		free(t2);
		free(s2);
		free(before);
	}

	/* --- drain, conservation, the stage's own counters */
	st_watchdog(30, "%s: drain", name);
	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");
	total = 2 * l.n + nd + 8;
	ST_CHECK(f.ok == total && f.failed == 0 && f.cancelled == 0,
		 "sink: ok %lu failed %lu cancelled %lu of %u", f.ok, f.failed,
		 f.cancelled, total);
	{
		struct st_job *all[] = {wj, rj, dj};
		unsigned ns[] = {l.n, l.n, nd};

		/* per array: exactly once each; totals once */
		for (unsigned a = 0; a < 3; a++)
			for (unsigned i = 0; i < ns[a]; i++)
				if (atomic_load(&all[a][i].deliveries) != 1) {
					bp_test_fail(
						"job %u of set %u "
						"delivered %u times",
						i, a,
						atomic_load(
							&all[a][i].deliveries));
					break;
				}
		st_check_conservation(&f, wj, 0, total);
	}
	st_rail_sum(f.r, f.workers, f.rails, &rs, NULL);
	ST_CHECK(rs.posted == total && rs.completed == total && rs.failed == 0,
		 "rail stats: posted %" PRIu64 " completed %" PRIu64
		 " failed %" PRIu64 ", %u jobs",
		 rs.posted, rs.completed, rs.failed, total);
	ST_CHECK(rs.cq_reads >= rs.cq_empty, "cq_empty > cq_reads");
	st_watchdog_off();
	st_close(&f);
	free(src);
	free(dst);
	free(wj);
	free(rj);
	free(dj);
	free(seen);
	free(l.off);
	free(l.len);
	return st_result(name);
}
