/* SPDX-License-Identifier: MIT */
/*
 * test_stage_pending PROVIDER - the pending path: batches far larger than
 * the credits (credits 4, post_batch 2, 10000 jobs of 64 bytes .. 4 KiB,
 * 2 workers, 2 rails; 2000 jobs under TSAN). The jobs wait on the rails'
 * queues and are posted as completions return credits.
 *
 * Asserts: every job completes ok and reaches the sink exactly once;
 * pending_high on some rail exceeds the credits (the queue was used);
 * summed over rails posted == completed == jobs, failed == 0; conservation
 * in the pipeline's stats; every byte lands (deadline poll of the target).
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

#define SLOT 4096

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	unsigned n = ST_SCALE(10000);
	struct st_fix f;
	struct bp_rdma_config c;
	struct bp_rdma_rail_stats rs;
	uint64_t ph;
	struct st_job *jobs;
	uint8_t *src;
	char name[96];
	bool landed = false;
	int64_t end;

	st_env();
	snprintf(name, sizeof(name), "stage_pending %s", prov);
	if (!st_provider_ok(prov))
		return ST_SKIP;
	st_watchdog(120, "%s", name);
	/* 2500 slots of 4 KiB reused round-robin: 10 MiB of target */
	if (st_node_open(&f, prov, 2, 2500 * SLOT))
		return 1;
	st_rdma_config(&f, &c);
	c.credits = 4;
	c.post_batch = 2;
	c.reap_batch = 4;
	if (st_stage_open(&f, &c, NULL) || st_start(&f))
		return 1;
	jobs = calloc(n, sizeof(*jobs));
	src = st_alloc(2500 * SLOT);
	if (!jobs || !src)
		return 1;
	st_fill(src, 0, 2500 * SLOT, 7);
	st_jobs_init(jobs, n);
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = (uint64_t)(i % 2500) * SLOT;

		/* sizes 64 .. 4096: the last round over a slot writes it all */
		size_t len = i + 2500 >= n ? SLOT : 64 + (i * 61) % (SLOT - 64);

		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)f.peer,
				src + off, len, off);
	}
	ST_CHECK(st_submit(&f, jobs, n) == n, "not all jobs accepted");
	ST_CHECK(st_wait_delivered(&f, n, 60), "%lu of %u jobs delivered",
		 atomic_load(&f.delivered), n);
	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");
	st_check_conservation(&f, jobs, n, n);
	ST_CHECK(f.ok == n, "%lu of %u jobs ok (failed %lu, cancelled %lu)",
		 f.ok, n, f.failed, f.cancelled);
	for (unsigned i = 0, bad = 0; i < n; i++)
		if (jobs[i].status != BP_JOB_OK && bad++ < 3)
			bp_test_fail("job %u: %s", i,
				     bp_strerror(jobs[i].status));
	st_rail_sum(f.r, f.workers, f.rails, &rs, &ph);
	ST_CHECK(ph > c.credits,
		 "pending_high %" PRIu64 " <= credits %u: the pending queue "
		 "was never used",
		 ph, c.credits);
	ST_CHECK(rs.posted == n && rs.completed == n && rs.failed == 0,
		 "posted %" PRIu64 " completed %" PRIu64 " failed %" PRIu64
		 " of %u",
		 rs.posted, rs.completed, rs.failed, n);
	/* the stats JSON says the same */
	{
		char js[8192];
		int len = bp_rdma_stats_json(f.r, js, sizeof(js));

		ST_CHECK(len > 0 && (size_t)len < sizeof(js),
			 "stats json length %d", len);
		ST_CHECK(strstr(js, "\"credits\":4") != NULL,
			 "stats json lacks credits 4: %s", js);
	}
	end = bpt_now_ns() + 10ll * 1000000000 * (BPT_TSAN ? 5 : 1);
	while (!landed && bpt_now_ns() < end) {
		landed =
			st_differ(f.tgt, src, (n < 2500 ? n : 2500) * SLOT) < 0;
		if (!landed)
			bpt_sleep_ms(2);
	}
	ST_CHECK(landed, "the target does not hold the data 10 s after drain");
	st_watchdog_off();
	st_close(&f);
	free(jobs);
	free(src);
	return st_result(name);
}
