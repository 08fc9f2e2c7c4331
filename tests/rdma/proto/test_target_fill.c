/* SPDX-License-Identifier: MIT */
/*
 * test_target_fill.c - bp-target's two data paths, end to end over
 * tcp;ofi_rxm on loopback:
 *
 *   write: this process's pipeline (the RDMA stage) writes pages into the
 *          daemon's region for us, the last ones with immediate data;
 *          QUERY's digest must equal the digest of what we wrote, and its
 *          immediate-data count and sum must have grown by ours.
 *   fill:  the daemon RDMA-writes generated pages into a region of ours
 *          (exposed through our own bp_rdma_node); every page must equal
 *          bp_rdma_fill_page's, the partial last one included, and the
 *          progress callback must reach the full length.
 *
 * usage: test_target_fill PATH/bp-target. Exit 77 without fi_info's tcp.
 */
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <batchpipe/rdma.h>

#include "src/rdma/proto.h"
#include "tgt_spawn.h"

/* BP_TEST_PROVIDER ("tcp;ofi_rxm") and BP_TEST_RAILS (1) pick the fabric */
static const char *prov = "tcp;ofi_rxm";
static unsigned rails = 1;
static const char *exe;
static struct tgt tgtd;

static void test_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "[client %d] %s\n", (int)level, msg);
}

/* tcp binds the loopback address; shm names its endpoints itself (an
 * address as the name would collide with the daemon's) */
static const char *fabric_node(void)
{
	return strncmp(prov, "shm", 3) == 0 ? NULL : "127.0.0.1";
}

static void conn_cfg(struct bp_rdma_conn_config *c, uint64_t region)
{
	bp_rdma_conn_config_init(c);
	c->port = tgtd.port;
	c->provider = prov;
	c->rails = rails;
	c->region_len = region;
	c->log = test_log;
}

/* ------------------------------------------------------------- write */

struct wjob {
	struct bp_rdma_job rj;
};

static _Atomic unsigned sunk, sunk_failed;

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++)
		if (jobs[i]->status != BP_JOB_OK) {
			fprintf(stderr, "job failed: %d\n", jobs[i]->status);
			/* relaxed: counted, read after drain (joins) */
			atomic_fetch_add_explicit(&sunk_failed, 1,
						  memory_order_relaxed);
		}
	/* relaxed: read after bp_pipeline_drain, which joins the sink */
	atomic_fetch_add_explicit(&sunk, n, memory_order_relaxed);
}

static void test_write_then_query(void **state)
{
	enum { PAGES = 64, PAGE = 4096, IMM = 4 };
	const uint64_t region = (uint64_t)PAGES * PAGE;
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct bp_rdma_target_query q0, q;
	struct bp_rdma_peer_desc d;
	struct bp_rdma_config rc;
	struct bp_pipeline_config pc;
	struct bp_rdma *r;
	struct bp_pipeline *p;
	static struct wjob jobs[PAGES];
	struct bp_job *hdrs[PAGES];
	uint8_t *buf;
	uint64_t imm_sum = 0;
	int peer;

	(void)state;
	conn_cfg(&cc, region);
	assert_int_equal(bp_rdma_connect(&cc, &conn), 0);
	assert_int_equal(bp_rdma_conn_query(conn, 0, region, &q0), 0);
	bp_rdma_conn_peer(conn, &d);
	assert_int_equal(d.len, region);

	bp_rdma_config_init(&rc);
	rc.provider = bp_rdma_conn_provider(conn);
	rc.node = fabric_node();
	rc.rails = rails;
	rc.log = test_log;
	assert_int_equal(bp_rdma_create(&rc, &r), 0);
	peer = bp_rdma_peer_add(r, &d);
	assert_true(peer >= 0);
	buf = aligned_alloc(4096, region);
	assert_non_null(buf);
	for (unsigned i = 0; i < PAGES; i++)
		bp_rdma_fill_page(7, i, buf + (size_t)i * PAGE, PAGE);
	assert_int_equal(bp_rdma_register(r, buf, region, NULL), 0);

	bp_pipeline_config_init(&pc);
	pc.workers = 1;
	pc.stage = bp_rdma_stage(r);
	pc.stage_ctx = r;
	pc.sink = sink;
	assert_int_equal(bp_pipeline_create(&pc, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	for (unsigned i = 0; i < PAGES; i++) {
		bool imm = i >= PAGES - IMM;

		bp_rdma_job_set(&jobs[i].rj,
				imm ? BP_RDMA_WRITEDATA : BP_RDMA_WRITE,
				(uint32_t)peer, buf + (size_t)i * PAGE, PAGE,
				(uint64_t)i * PAGE);
		if (imm) {
			jobs[i].rj.imm = 1000 + i;
			imm_sum += 1000 + i;
		}
		hdrs[i] = &jobs[i].rj.hdr;
	}
	assert_int_equal(bp_pipeline_submit(p, hdrs, PAGES, 0, -1), PAGES);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&sunk), PAGES);
	assert_int_equal(atomic_load(&sunk_failed), 0);

	/* completions need not mean arrival (tcp): the daemon's node polls,
	 * so give the last bytes a moment to land */
	for (int tries = 0;; tries++) {
		assert_int_equal(bp_rdma_conn_query(conn, 0, region, &q), 0);
		if ((q.digest == bp_rdma_digest(buf, region) &&
		     q.imm_count >= q0.imm_count + IMM) ||
		    tries == 100)
			break;
		usleep(20000);
	}
	assert_int_equal(q.digest, bp_rdma_digest(buf, region));
	assert_int_equal(q.imm_count - q0.imm_count, IMM);
	assert_int_equal(q.imm_sum - q0.imm_sum, imm_sum);
	/* a sub-range, too */
	assert_int_equal(bp_rdma_conn_query(conn, PAGE * 3 + 5, 1000, &q), 0);
	assert_int_equal(q.digest, bp_rdma_digest(buf + PAGE * 3 + 5, 1000));

	bp_pipeline_destroy(p);
	bp_rdma_destroy(r);
	free(buf);
	bp_rdma_conn_close(conn);
}

/*
 * Clients are kept apart by their keys alone (tcp addresses regions by
 * offset): a client that tries the keys next to its own must not reach
 * another client's region, and the two keys must not be neighbours.
 */
static void test_clients_isolated(void **state)
{
	enum { LEN = 4096 };
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *a, *b;
	struct bp_rdma_target_query q0, q;
	struct bp_rdma_peer_desc da, db;
	struct bp_rdma_config rc;
	struct bp_pipeline_config pc;
	struct bp_rdma *r;
	struct bp_pipeline *p;
	static struct wjob jobs[4];
	struct bp_job *hdrs[4];
	static uint8_t buf[LEN];
	const int64_t step[4] = {1, -1, 2, -2};

	(void)state;
	conn_cfg(&cc, LEN);
	assert_int_equal(bp_rdma_connect(&cc, &a), 0);
	assert_int_equal(bp_rdma_connect(&cc, &b), 0);
	bp_rdma_conn_peer(a, &da);
	bp_rdma_conn_peer(b, &db);
	for (unsigned k = 0; k < rails; k++) {
		assert_true(da.rail[k].key != db.rail[k].key);
		assert_true(da.rail[k].key + 1 != db.rail[k].key);
		assert_true(db.rail[k].key + 1 != da.rail[k].key);
	}
	assert_int_equal(bp_rdma_conn_query(b, 0, LEN, &q0), 0);

	bp_rdma_config_init(&rc);
	rc.provider = bp_rdma_conn_provider(a);
	rc.node = fabric_node();
	rc.rails = rails;
	rc.max_peers = 8;
	rc.log = test_log;
	assert_int_equal(bp_rdma_create(&rc, &r), 0);
	bp_pipeline_config_init(&pc);
	pc.workers = 1;
	pc.stage = bp_rdma_stage(r);
	pc.stage_ctx = r;
	pc.sink = sink;
	assert_int_equal(bp_pipeline_create(&pc, &p), 0);
	assert_int_equal(bp_pipeline_start(p), 0);
	memset(buf, 0x41, sizeof(buf));
	atomic_store(&sunk, 0);
	for (unsigned i = 0; i < 4; i++) {
		struct bp_rdma_peer_desc guess = da;
		int peer;

		for (unsigned k = 0; k < rails; k++)
			guess.rail[k].key = da.rail[k].key + (uint64_t)step[i];
		peer = bp_rdma_peer_add(r, &guess);
		assert_true(peer >= 0);
		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)peer, buf,
				LEN, 0);
		jobs[i].rj.rail = 0;
		jobs[i].rj.flags = BP_RDMA_JOB_DELIVERED;
		hdrs[i] = &jobs[i].rj.hdr;
	}
	assert_int_equal(bp_pipeline_submit(p, hdrs, 4, 0, -1), 4);
	assert_int_equal(bp_pipeline_drain(p), 0);
	assert_int_equal(atomic_load(&sunk), 4);
	usleep(100000); /* anything that was going to land has landed */
	assert_int_equal(bp_rdma_conn_query(b, 0, LEN, &q), 0);
	assert_int_equal(q.digest, q0.digest);
	assert_true(q.digest != bp_rdma_digest(buf, LEN));
	bp_pipeline_destroy(p);
	bp_rdma_destroy(r);
	bp_rdma_conn_close(a);
	bp_rdma_conn_close(b);
}

/* -------------------------------------------------------------- fill */

struct prog {
	uint64_t last, calls;
	int monotonic;
};

static void on_progress(void *ctx, uint64_t done, uint64_t len)
{
	struct prog *p = ctx;

	if (done < p->last || done > len)
		p->monotonic = 0;
	p->last = done;
	p->calls++;
}

/* Pages that do not (yet) hold what the generator says. */
static unsigned bad_pages(const uint8_t *mem, uint64_t len, uint32_t page,
			  uint64_t seed, uint8_t *tmp)
{
	unsigned bad = 0;

	tgt_rdma_reads_begin();
	for (uint64_t i = 0; i * page < len; i++) {
		uint64_t n = len - i * page < page ? len - i * page : page;

		bp_rdma_fill_page(seed, i, tmp, (size_t)n);
		bad += memcmp(mem + i * page, tmp, (size_t)n) != 0;
	}
	tgt_rdma_reads_end();
	return bad;
}

static void fill_once(struct bp_rdma_conn *conn,
		      const struct bp_rdma_peer_desc *d, uint8_t *mem,
		      uint64_t len, uint32_t page, uint64_t seed)
{
	struct prog pr = {.monotonic = 1};
	uint8_t *tmp = malloc(page);
	unsigned bad;

	assert_non_null(tmp);
	assert_int_equal(
		bp_rdma_conn_fill(conn, d, len, page, seed, on_progress, &pr),
		0);
	assert_true(pr.monotonic);
	assert_int_equal(pr.last, len);
	/* the daemon writes every page delivery-complete (filler.c):
	 * FILL_DONE means the data is here, no waiting */
	bad = bad_pages(mem, len, page, seed, tmp);
	assert_int_equal(bad, 0);
	/* nothing written past len */
	if (len < d->len) {
		uint8_t after;

		tgt_rdma_reads_begin();
		after = mem[len];
		tgt_rdma_reads_end();
		assert_int_equal(after, 0);
	}
	free(tmp);
}

/* HELLO, WELCOME and FILL over a raw socket; returns it, fill running. */
static int raw_fill_start(const struct bp_rdma_peer_desc *d, uint64_t len,
			  uint32_t page, uint64_t seed)
{
	static uint8_t buf[BPI_MSG_MAX];
	struct bpi_msg m = {.type = BPI_MSG_HELLO};
	size_t got = 0;
	ssize_t n;
	int fd = tgt_raw(tgtd.port);

	assert_true(fd >= 0);
	strcpy(m.u.hello.provider, prov);
	m.u.hello.rails = rails;
	m.u.hello.region_len = 4096;
	n = bpi_proto_encode(&m, buf, sizeof(buf));
	assert_int_equal(tgt_send(fd, buf, (size_t)n), 0);
	while ((n = bpi_proto_parse(buf, got, &m)) == 0) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);

		assert_true(r > 0);
		got += (size_t)r;
	}
	assert_true(n > 0);
	assert_int_equal(m.type, BPI_MSG_WELCOME);
	m = (struct bpi_msg){.type = BPI_MSG_FILL};
	m.u.fill.desc = *d;
	m.u.fill.len = len;
	m.u.fill.page = page;
	m.u.fill.seed = seed;
	n = bpi_proto_encode(&m, buf, sizeof(buf));
	assert_int_equal(tgt_send(fd, buf, (size_t)n), 0);
	return fd;
}

static void test_fill(void **state)
{
	const uint64_t mlen = (8u << 20) + 4096;
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct bp_rdma_node_config nc;
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg, *reg2;
	struct bp_rdma_peer_desc d, d2;
	uint8_t *mem, *mem2;

	(void)state;
	conn_cfg(&cc, 4096);
	assert_int_equal(bp_rdma_connect(&cc, &conn), 0);
	bp_rdma_node_config_init(&nc);
	nc.provider = bp_rdma_conn_provider(conn);
	nc.node = fabric_node();
	nc.rails = rails;
	nc.log = test_log;
	assert_int_equal(bp_rdma_node_create(&nc, &node), 0);
	mem = aligned_alloc(4096, mlen);
	assert_non_null(mem);
	tgt_rdma_zero(mem, mlen);
	assert_int_equal(bp_rdma_node_expose(node, mem, mlen, NULL, &reg), 0);
	bp_rdma_region_describe(reg, &d);
	assert_int_equal(d.len, mlen);

	/* whole pages; then a partial last page (len not a multiple); then
	 * a page that is not a multiple of 8 */
	fill_once(conn, &d, mem, 8u << 20, 64u << 10, 1);
	tgt_rdma_zero(mem, mlen);
	fill_once(conn, &d, mem, (1u << 20) + 1000, 4096, 2);
	tgt_rdma_zero(mem, mlen);
	fill_once(conn, &d, mem, 100003, 1001, 3);

	/* refused: by us (beyond the region, page 0) and by the daemon
	 * (page larger than its staging buffers, 1 MiB by default) */
	assert_int_equal(
		bp_rdma_conn_fill(conn, &d, mlen + 1, 4096, 1, NULL, NULL),
		-EINVAL);
	assert_int_equal(bp_rdma_conn_fill(conn, &d, 4096, 0, 1, NULL, NULL),
			 -EINVAL);
	assert_int_equal(
		bp_rdma_conn_fill(conn, &d, 4u << 20, 2u << 20, 1, NULL, NULL),
		-EINVAL);
	/* and the connection still works */
	tgt_rdma_zero(mem, mlen);
	fill_once(conn, &d, mem, 65536, 65536, 4);

	/* a client that asks for a fill and goes away at once: the daemon
	 * stops the fill, keeps the request until its pages are back, and
	 * serves the next client. Into a region of its own: the abandoned
	 * fill's last pages may still land while the next one is checked */
	mem2 = aligned_alloc(4096, mlen);
	assert_non_null(mem2);
	assert_int_equal(bp_rdma_node_expose(node, mem2, mlen, NULL, &reg2), 0);
	bp_rdma_region_describe(reg2, &d2);
	{
		/* gone once the fill runs (closed before the daemon looked at
		 * the FILL, it is refused: nobody holds its socket any more) */
		int fd = raw_fill_start(&d2, mlen, 4096, 5);

		usleep(30000);
		close(fd);
	}
	tgt_rdma_zero(mem, mlen);
	fill_once(conn, &d, mem, 1u << 20, 4096, 6);
	/* SIGTERM with a fill in flight: still a clean exit (and, in the
	 * sanitizer builds, no leak and no use after free) */
	{
		int fd = raw_fill_start(&d2, mlen, 4096, 7);

		usleep(2000);
		assert_int_equal(tgt_stop(&tgtd), 0);
		close(fd);
	}

	bp_rdma_conn_close(conn);
	bp_rdma_region_close(reg2);
	free(mem2);
	bp_rdma_region_close(reg);
	bp_rdma_node_destroy(node);
	free(mem);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_then_query),
		cmocka_unit_test(test_clients_isolated),
		cmocka_unit_test(test_fill),
	};
	char rails_arg[16];
	const char *args[] = {"--port",	 "0",	    "--provider", prov,
			      "--rails", rails_arg, "-v",	  NULL};
	int st, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH/bp-target\n", argv[0]);
		return 2;
	}
	exe = argv[1];
	if (getenv("BP_TEST_PROVIDER"))
		prov = getenv("BP_TEST_PROVIDER");
	if (getenv("BP_TEST_RAILS"))
		rails = (unsigned)atoi(getenv("BP_TEST_RAILS"));
	snprintf(rails_arg, sizeof(rails_arg), "%u", rails);
	args[3] = prov;
	if (tgt_have_provider(strncmp(prov, "shm", 3) ? "tcp" : "shm") != 0) {
		fprintf(stderr, "SKIP: fi_info finds no provider for %s\n",
			prov);
		return 77;
	}
	setenv("FI_TCP_IFACE", "lo", 1);
	signal(SIGPIPE, SIG_IGN);
	if (tgt_start(&tgtd, exe, args, &st) != 0) {
		fprintf(stderr, "bp-target did not start\n");
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	/* test_fill stops it (during a fill); if it failed before that: */
	if (tgtd.pid > 0 && tgt_stop(&tgtd) != 0) {
		fprintf(stderr, "bp-target did not exit 0 on SIGTERM\n");
		rc = 1;
	}
	return rc;
}
