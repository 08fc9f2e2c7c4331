/* SPDX-License-Identifier: MIT */
/*
 * netns_client - the client half of test_netns.sh, on the public API only:
 *
 *   netns_client --target ADDR:PORT --fabric-node ADDR [--token-file F]
 *                [--provider P] [--rails R] [--len BYTES]
 *
 * 1. bp_rdma_connect to bp-target, get a region of its memory; a pipeline
 *    (2 workers, R rails) writes patterned bytes into it (the last write of
 *    each rail DELIVERED); bp_rdma_conn_query's digest of the region must
 *    equal bp_rdma_digest of what was sent, and the immediate count of a
 *    few WRITEDATA jobs must arrive.
 * 2. The other direction: a node here exposes a region; bp_rdma_conn_fill
 *    makes the daemon write the page generator's output into it; every
 *    page must equal bp_rdma_fill_page.
 * Exits 0 when both hold, 1 otherwise (with a line saying what differed).
 */
#include <getopt.h>

#include "st_common.h"

ST_DEFINE_GLOBALS;

#define PAGE (64 * 1024)

static int fail(const char *what, int rc)
{
	fprintf(stderr, "netns_client: %s: %s\n", what, bp_strerror(rc));
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"target", required_argument, NULL, 't'},
		{"fabric-node", required_argument, NULL, 'n'},
		{"token-file", required_argument, NULL, 'k'},
		{"provider", required_argument, NULL, 'p'},
		{"rails", required_argument, NULL, 'r'},
		{"len", required_argument, NULL, 'l'},
		{NULL, 0, NULL, 0},
	};
	const char *target = NULL, *fnode = NULL, *tokfile = NULL;
	const char *prov = "tcp;ofi_rxm";
	unsigned rails = 1, port;
	uint64_t len = 4u << 20;
	char host[64], token[256] = "";
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct st_fix f;
	struct bp_rdma_config c;
	struct bp_rdma_target_query q;
	struct st_job *jobs;
	unsigned n, nimm = 16;
	uint8_t *src;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 't':
			target = optarg;
			break;
		case 'n':
			fnode = optarg;
			break;
		case 'k':
			tokfile = optarg;
			break;
		case 'p':
			prov = optarg;
			break;
		case 'r':
			rails = (unsigned)atoi(optarg);
			break;
		case 'l':
			len = strtoull(optarg, NULL, 0);
			break;
		default:
			return 2;
		}
	}
	if (!target || !fnode || !strchr(target, ':') || len % PAGE ||
	    len < PAGE) {
		fprintf(stderr, "usage: netns_client --target ADDR:PORT "
				"--fabric-node ADDR [--token-file F] "
				"[--provider P] [--rails R] [--len BYTES]\n");
		return 2;
	}
	snprintf(host, sizeof(host), "%.*s",
		 (int)(strrchr(target, ':') - target), target);
	port = (unsigned)atoi(strrchr(target, ':') + 1);
	if (tokfile) {
		FILE *tf = fopen(tokfile, "r");

		if (!tf || !fgets(token, sizeof(token), tf))
			return fail("token file", -errno);
		fclose(tf);
		token[strcspn(token, "\r\n")] = '\0';
	}
	pthread_mutex_init(&st_log_.lock, NULL);

	/* 1. our writes into the daemon's region */
	bp_rdma_conn_config_init(&cc);
	cc.host = host;
	cc.port = port;
	cc.token = tokfile ? token : NULL;
	cc.provider = prov;
	cc.rails = rails;
	cc.region_len = len;
	cc.log = st_log_fn;
	st_watchdog(30, "netns_client: bp_rdma_connect");
	rc = bp_rdma_connect(&cc, &conn);
	if (rc)
		return fail("bp_rdma_connect", rc);
	memset(&f, 0, sizeof(f));
	f.prov = prov;
	f.rails = rails;
	bp_rdma_conn_peer(conn, &f.desc);
	bp_rdma_config_init(&c);
	c.provider = prov;
	c.node = fnode;
	c.workers = 2;
	c.rails = rails;
	c.log = st_log_fn;
	st_watchdog(30, "netns_client: stage set-up");
	rc = st_stage_open(&f, &c, NULL);
	if (!rc)
		rc = st_start(&f);
	if (rc)
		return fail("stage", rc);
	n = (unsigned)(len / PAGE);
	src = st_alloc(len);
	jobs = calloc(n + nimm, sizeof(*jobs));
	st_fill(src, 0, len, 77);
	st_jobs_init(jobs, n + nimm);
	for (unsigned i = 0; i < n; i++) {
		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)f.peer,
				src + (uint64_t)i * PAGE, PAGE,
				(uint64_t)i * PAGE);
		jobs[i].rj.rail = (uint8_t)(i % rails);
		if (i + rails >= n)
			jobs[i].rj.flags = BP_RDMA_JOB_DELIVERED;
	}
	for (unsigned i = 0; i < nimm; i++) {
		/* rewrite the first bytes with the same data, plus imm */
		bp_rdma_job_set(&jobs[n + i].rj, BP_RDMA_WRITEDATA,
				(uint32_t)f.peer, src + i * 8, 8, i * 8);
		jobs[n + i].rj.imm = 1000 + i;
		jobs[n + i].rj.flags = BP_RDMA_JOB_DELIVERED;
	}
	st_watchdog(60, "netns_client: writes into the daemon's region");
	if (st_submit(&f, jobs, n + nimm) != n + nimm ||
	    !st_wait_delivered(&f, n + nimm, 30)) {
		struct bp_rdma_rail_stats rs;

		st_rail_sum(f.r, f.workers, f.rails, &rs, NULL);
		fprintf(stderr,
			"netns_client: %lu of %u writes done; rails posted "
			"%" PRIu64 " completed %" PRIu64 " failed %" PRIu64
			" eagain %" PRIu64 "\n",
			atomic_load(&f.delivered), n + nimm, rs.posted,
			rs.completed, rs.failed, rs.eagain);
		return 1;
	}
	bp_pipeline_drain(f.p);
	for (unsigned i = 0; i < n + nimm; i++)
		if (jobs[i].status)
			return fail("a write failed", jobs[i].status);
	{
		uint64_t want = bp_rdma_digest(src, len);
		int64_t end = bpt_now_ns() + 10ll * 1000000000;

		do {
			rc = bp_rdma_conn_query(conn, 0, len, &q);
			if (rc)
				return fail("bp_rdma_conn_query", rc);
			if (q.digest == want && q.imm_count >= nimm)
				break;
			bpt_sleep_ms(20);
		} while (bpt_now_ns() < end);
		if (q.digest != want) {
			fprintf(stderr,
				"netns_client: the daemon's region digest "
				"%016" PRIx64 " != sent %016" PRIx64 "\n",
				q.digest, want);
			return 1;
		}
		if (q.imm_count < nimm) {
			fprintf(stderr,
				"netns_client: %" PRIu64 " of %u immediates "
				"arrived\n",
				q.imm_count, nimm);
			return 1;
		}
	}
	printf("netns_client: wrote %" PRIu64 " bytes into the daemon's "
	       "region over %s, digest matches, %u immediates arrived\n",
	       len, prov, nimm);
	bp_pipeline_destroy(f.p);
	bp_rdma_destroy(f.r);

	/* 2. the daemon fills a region of ours */
	{
		struct bp_rdma_node_config nc;
		struct bp_rdma_node *node;
		struct bp_rdma_region *reg;
		struct bp_rdma_peer_desc d;
		uint8_t *buf = st_alloc(len), *page = st_alloc(PAGE);
		uint64_t seed = 0x5eed;

		bp_rdma_node_config_init(&nc);
		nc.provider = prov;
		nc.node = fnode;
		nc.rails = rails;
		nc.log = st_log_fn;
		rc = bp_rdma_node_create(&nc, &node);
		if (!rc)
			rc = bp_rdma_node_expose(node, buf, len, NULL, &reg);
		if (rc)
			return fail("node", rc);
		bp_rdma_region_describe(reg, &d);
		st_watchdog(60, "netns_client: the daemon's fill of ours");
		rc = bp_rdma_conn_fill(conn, &d, len, PAGE, seed, NULL, NULL);
		if (rc)
			return fail("bp_rdma_conn_fill", rc);
		/* the daemon says done once its writes completed; poll a
		 * little in case the last ones are still landing here */
		for (int64_t end = bpt_now_ns() + 10ll * 1000000000;;) {
			uint64_t bad = len / PAGE;
			long m = -1;

			for (uint64_t i = 0; i < len / PAGE; i++) {
				bp_rdma_fill_page(seed, i, page, PAGE);
				m = st_differ(buf + i * PAGE, page, PAGE);
				if (m >= 0) {
					bad = i;
					break;
				}
			}
			if (m < 0)
				break;
			if (bpt_now_ns() > end) {
				fprintf(stderr,
					"netns_client: filled page %" PRIu64
					" differs at byte %ld\n",
					bad, m);
				return 1;
			}
			bpt_sleep_ms(20);
		}
		printf("netns_client: the daemon filled %" PRIu64
		       " bytes of ours, every page verified\n",
		       len);
		bp_rdma_region_close(reg);
		bp_rdma_node_destroy(node);
		free(buf);
		free(page);
	}
	bp_rdma_conn_close(conn);
	st_watchdog_off();
	free(src);
	free(jobs);
	return 0;
}
