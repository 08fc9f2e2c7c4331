/* SPDX-License-Identifier: MIT */
/*
 * test_target_fill_auth.c - a hostile client of bp-target's FILL: the
 * daemon writes only to the endpoints of the client that asks (the
 * process at the other end of its control connection), never to its own,
 * to a third address or to another client's, and a refused FILL leaves
 * every byte where it was. Over tcp;ofi_rxm (the default) or shm
 * (BP_TEST_PROVIDER=shm), on loopback, against the real daemon:
 *
 *   own endpoint      FILL naming the daemon's region (from WELCOME): this
 *                     client's own, and another client's: refused, the
 *                     regions stay zero (QUERY's digest)
 *   third address     tcp: 127.0.0.9 with a listener of ours there: refused,
 *                     the listener sees no connection; shm: a name of pid 1,
 *                     a name not of the library's form: refused
 *   another process   a second process (this program, re-run) exposes a
 *                     region and hands us its description: refused, and that
 *                     process finds its region untouched
 *   a link            shm: a name of ours that is a hard link to the
 *                     daemon's own region file: refused
 *   another user      shm, as root: a process of another uid asks to fill
 *                     its own region: refused
 *   bounds, keys      tcp: a FILL past the region registered, or with a key
 *                     that is not the region's, fails (the provider checks)
 *                     and writes nothing outside it; shm checks neither
 *                     (README: security), so these run on tcp only
 *   own region        a client's own region is filled, every page right
 *   slots             a client holds one fill peer slot whatever it fills,
 *                     and gives it back when it goes (--max-fill-peers 2)
 *
 * usage: test_target_fill_auth PATH/bp-target. Exit 77 without the provider.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>

#include <cmocka.h>

#include <batchpipe/rdma.h>

#include "src/rdma/proto.h"
#include "tgt_spawn.h"

static const char *prov = "tcp;ofi_rxm";
static const char *self_exe;
static const char *daemon_exe;
static struct tgt tgtd;

#define REGION 65536u

static bool is_shm(void)
{
	return strncmp(prov, "shm", 3) == 0;
}

static void test_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "[client %d] %s\n", (int)level, msg);
}

/* ------------------------------------------------------ raw protocol */

struct raw {
	int fd;
	uint8_t buf[BPI_MSG_MAX];
	size_t got;
};

static int raw_send(struct raw *r, const struct bpi_msg *m)
{
	static uint8_t out[BPI_MSG_MAX];
	ssize_t n = bpi_proto_encode(m, out, sizeof(out));

	return n > 0 ? tgt_send(r->fd, out, (size_t)n) : -1;
}

/* The next message, within ms; -1 on timeout, close or garbage. */
static int raw_recv(struct raw *r, struct bpi_msg *m, int ms)
{
	int64_t end = tgt_now_ms() + ms;

	for (;;) {
		ssize_t n = bpi_proto_parse(r->buf, r->got, m);
		struct pollfd pfd = {.fd = r->fd, .events = POLLIN};

		if (n < 0)
			return -1;
		if (n > 0) {
			r->got -= (size_t)n;
			memmove(r->buf, r->buf + n, r->got);
			return 0;
		}
		if (poll(&pfd, 1, (int)(end - tgt_now_ms())) <= 0)
			return -1;
		n = recv(r->fd, r->buf + r->got, sizeof(r->buf) - r->got, 0);
		if (n <= 0)
			return -1;
		r->got += (size_t)n;
	}
}

/* Connect and say HELLO; *welcome: the client's region on the daemon. */
static int raw_open(struct raw *r, struct bp_rdma_peer_desc *welcome)
{
	struct bpi_msg m = {.type = BPI_MSG_HELLO};

	r->got = 0;
	r->fd = tgt_raw(tgtd.port);
	if (r->fd < 0)
		return -1;
	snprintf(m.u.hello.provider, sizeof(m.u.hello.provider), "%s", prov);
	m.u.hello.rails = 1;
	m.u.hello.region_len = REGION;
	if (raw_send(r, &m) < 0 || raw_recv(r, &m, 10000) < 0 ||
	    m.type != BPI_MSG_WELCOME)
		return -1;
	if (welcome)
		*welcome = m.u.welcome.desc;
	return 0;
}

/* FILL d with len bytes; the FILL_DONE status, or 1 when none came. */
static int raw_fill(struct raw *r, const struct bp_rdma_peer_desc *d,
		    uint64_t len, uint32_t page, uint64_t seed)
{
	struct bpi_msg m = {.type = BPI_MSG_FILL};

	m.u.fill.desc = *d;
	m.u.fill.len = len;
	m.u.fill.page = page;
	m.u.fill.seed = seed;
	if (raw_send(r, &m) < 0)
		return 1;
	for (;;) {
		if (raw_recv(r, &m, 30000) < 0)
			return 1;
		if (m.type == BPI_MSG_FILL_DONE)
			return m.u.done.status;
		if (m.type != BPI_MSG_FILL_PROGRESS)
			return 1;
	}
}

/* QUERY's digest of [0, REGION) of this client's region on the daemon. */
static uint64_t raw_digest(struct raw *r)
{
	struct bpi_msg m = {.type = BPI_MSG_QUERY};

	m.u.query.offset = 0;
	m.u.query.len = REGION;
	if (raw_send(r, &m) < 0 || raw_recv(r, &m, 10000) < 0 ||
	    m.type != BPI_MSG_QUERY_REPLY || m.u.reply.status != 0)
		return 0;
	return m.u.reply.digest;
}

static uint64_t zero_digest(void)
{
	static uint8_t z[REGION];

	return bp_rdma_digest(z, sizeof(z));
}

static bool all_zero(const uint8_t *p, size_t n)
{
	bool zero = true;

	tgt_rdma_reads_begin();
	for (size_t i = 0; i < n && zero; i++)
		zero = p[i] == 0;
	tgt_rdma_reads_end();
	return zero;
}

/* ------------------------------------------------- a region of ours */

struct mine {
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg;
	uint8_t *mem; /* 2 * REGION: only the first half is exposed */
	struct bp_rdma_peer_desc d;
};

static int mine_open(struct mine *m)
{
	struct bp_rdma_node_config nc;

	bp_rdma_node_config_init(&nc);
	nc.provider = prov;
	nc.node = is_shm() ? NULL : "127.0.0.1";
	nc.rails = 1;
	nc.log = test_log;
	if (bp_rdma_node_create(&nc, &m->node) != 0)
		return -1;
	m->mem = aligned_alloc(4096, 2 * REGION);
	if (!m->mem)
		return -1;
	tgt_rdma_zero(m->mem, 2 * REGION);
	if (bp_rdma_node_expose(m->node, m->mem, REGION, NULL, &m->reg) != 0)
		return -1;
	bp_rdma_region_describe(m->reg, &m->d);
	return 0;
}

static void mine_close(struct mine *m)
{
	bp_rdma_region_close(m->reg);
	bp_rdma_node_destroy(m->node);
	free(m->mem);
}

/* ------------------------------------------------------------ tests */

/* The daemon's region for us, and for another client: never a target. */
static void test_own_endpoint_refused(void **state)
{
	struct bp_rdma_peer_desc wa, wb;
	struct raw a, b;

	(void)state;
	assert_int_equal(raw_open(&a, &wa), 0);
	assert_int_equal(raw_open(&b, &wb), 0);
	assert_int_equal(raw_fill(&a, &wa, REGION, 4096, 1), -EACCES);
	assert_int_equal(raw_fill(&a, &wb, REGION, 4096, 2), -EACCES);
	/* a writable segment of the daemon's, anywhere: refused the same */
	wb.rail[0].base = (uint64_t)(uintptr_t)&tgtd;
	assert_int_equal(raw_fill(&a, &wb, 4096, 4096, 3), -EACCES);
	usleep(100000); /* what an accepted fill would have written by now */
	assert_int_equal(raw_digest(&a), zero_digest());
	assert_int_equal(raw_digest(&b), zero_digest());
	close(a.fd);
	close(b.fd);
}

/*
 * shm: a name of our own pid that is a hard link to the daemon's region
 * file (shm would write where that file's header says: the daemon):
 * refused, and the daemon's region stays zero.
 */
static void test_shm_link_refused(void **state)
{
	struct bp_rdma_peer_desc w, d;
	struct raw a;
	char from[300], name[64], to[100];

	(void)state;
	if (!is_shm()) {
		fprintf(stderr, "(shm links: shm only; skipped)\n");
		return;
	}
	assert_int_equal(raw_open(&a, &w), 0);
	/* the daemon's endpoint name, as WELCOME gave it: fi_shm://NAME */
	snprintf(from, sizeof(from), "/dev/shm/%.*s",
		 (int)w.rail[0].addrlen - 10, (const char *)w.rail[0].addr + 9);
	snprintf(name, sizeof(name), "bp-%ld-00000000linked00:0:0",
		 (long)getpid());
	snprintf(to, sizeof(to), "/dev/shm/%s", name);
	assert_int_equal(link(from, to), 0);
	d = w;
	d.rail[0].addrlen =
		(uint32_t)snprintf((char *)d.rail[0].addr, BP_RDMA_ADDR_MAX,
				   "fi_shm://%s", name) +
		1;
	assert_int_equal(raw_fill(&a, &d, 4096, 4096, 1), -EACCES);
	unlink(to);
	usleep(100000);
	assert_int_equal(raw_digest(&a), zero_digest());
	close(a.fd);
}

/* Addresses that are nobody's, or somebody else's. */
static void test_third_address_refused(void **state)
{
	struct bp_rdma_peer_desc d;
	struct raw a;

	(void)state;
	assert_int_equal(raw_open(&a, &d), 0);
	if (is_shm()) {
		static const char *const names[] = {
			"fi_shm://bp-1-00000000deadbeef:0:0",
			"fi_shm://somebody-else",
			"1234:0:0",
		};

		for (unsigned i = 0; i < 3; i++) {
			d.rail[0].addrlen = (uint32_t)strlen(names[i]) + 1;
			memcpy(d.rail[0].addr, names[i], d.rail[0].addrlen);
			assert_int_equal(raw_fill(&a, &d, 4096, 4096, 1),
					 -EACCES);
		}
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t sl = sizeof(sa);
		int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		struct pollfd pfd;

		assert_true(lfd >= 0);
		inet_pton(AF_INET, "127.0.0.9", &sa.sin_addr);
		assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)),
				 0);
		assert_int_equal(listen(lfd, 4), 0);
		assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl),
				 0);
		d.rail[0].addrlen = sizeof(sa);
		memcpy(d.rail[0].addr, &sa, sizeof(sa));
		assert_int_equal(raw_fill(&a, &d, 4096, 4096, 1), -EACCES);
		/* and the daemon did not even connect there */
		pfd = (struct pollfd){.fd = lfd, .events = POLLIN};
		assert_int_equal(poll(&pfd, 1, 500), 0);
		close(lfd);
		/* an address form the daemon cannot attribute */
		d.rail[0].addrlen = 7;
		assert_int_equal(raw_fill(&a, &d, 4096, 4096, 1), -EACCES);
	}
	/* the connection goes on: a refusal is an answer, not an end */
	assert_int_equal(raw_digest(&a), zero_digest());
	close(a.fd);
}

/*
 * Another process's region: this program, re-run with --hold, exposes one
 * and prints its description; after our FILL it checks the region and
 * exits 0 if untouched.
 */
static void test_other_process_refused(void **state)
{
	struct bp_rdma_peer_desc d;
	struct raw a;
	int in[2], out[2], st;
	pid_t pid;
	ssize_t got = 0;

	(void)state;
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(self_exe, self_exe, "--hold", prov, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	while (got < (ssize_t)sizeof(d)) {
		ssize_t n =
			read(out[0], (char *)&d + got, sizeof(d) - (size_t)got);

		if (n <= 0)
			break;
		got += n;
	}
	assert_int_equal(got, (ssize_t)sizeof(d));
	assert_int_equal(raw_open(&a, NULL), 0);
	assert_int_equal(raw_fill(&a, &d, REGION, 4096, 9), -EACCES);
	usleep(100000);
	assert_int_equal(write(in[1], "c", 1), 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0); /* its region untouched */
	close(in[1]);
	close(out[0]);
	close(a.fd);
}

/* --hold: expose a region, print its description, check it on a byte. */
static int hold_main(void)
{
	struct mine m;
	char c;

	if (mine_open(&m) != 0)
		return 2;
	if (write(1, &m.d, sizeof(m.d)) != (ssize_t)sizeof(m.d))
		return 2;
	if (read(0, &c, 1) != 1)
		return 2;
	c = all_zero(m.mem, 2 * REGION) ? 0 : 3;
	mine_close(&m);
	return c;
}

/* --as-nobody: as uid 65534, fill a region of our own over shm. */
static int nobody_main(void)
{
	struct mine m;
	struct raw a;
	int rc;

	if (setgid(65534) != 0 || setuid(65534) != 0)
		return 2;
	if (mine_open(&m) != 0 || raw_open(&a, NULL) != 0)
		return 2;
	rc = raw_fill(&a, &m.d, REGION, 4096, 4);
	fprintf(stderr, "as nobody: FILL_DONE %d\n", rc);
	rc = rc == -EACCES && all_zero(m.mem, 2 * REGION) ? 0 : 3;
	close(a.fd);
	mine_close(&m);
	return rc;
}

static void test_other_user_refused(void **state)
{
	char port[16];
	pid_t pid;
	int st;

	(void)state;
	if (!is_shm() || geteuid() != 0) {
		fprintf(stderr, "(other user: shm as root only; skipped)\n");
		return;
	}
	snprintf(port, sizeof(port), "%u", tgtd.port);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(self_exe, self_exe, "--as-nobody", prov, port,
		      (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/*
 * Past the registered range, or with a key that is not the region's: the
 * provider refuses (tcp closes that connection, so each case gets an
 * endpoint of its own) and nothing lands.
 */
static void test_bounds_and_keys(void **state)
{
	struct bp_rdma_peer_desc d;
	struct mine m1, m2;
	struct raw a;

	(void)state;
	if (is_shm()) {
		fprintf(stderr,
			"(bounds, keys: shm checks neither; skipped)\n");
		return;
	}
	assert_int_equal(mine_open(&m1), 0);
	assert_int_equal(mine_open(&m2), 0);
	assert_int_equal(raw_open(&a, NULL), 0);
	d = m1.d;
	d.len = 2 * REGION;
	assert_true(raw_fill(&a, &d, 2 * REGION, 4096, 5) < 0);
	assert_true(all_zero(m1.mem + REGION, REGION));
	d = m2.d;
	d.rail[0].key ^= 0x5a5a5a5a5a5a5a5aull;
	assert_true(raw_fill(&a, &d, REGION, 4096, 6) < 0);
	assert_true(all_zero(m2.mem, 2 * REGION));
	close(a.fd);
	mine_close(&m1);
	mine_close(&m2);
}

/* Our own region: filled, every page right, nothing past it. */
static void test_own_region(void **state)
{
	struct mine m;
	struct raw a;
	uint8_t page[4096];

	(void)state;
	assert_int_equal(mine_open(&m), 0);
	assert_int_equal(raw_open(&a, NULL), 0);
	assert_int_equal(raw_fill(&a, &m.d, REGION, 4096, 7), 0);
	for (unsigned i = 0; i < REGION / 4096; i++) {
		bp_rdma_fill_page(7, i, page, sizeof(page));
		tgt_rdma_reads_begin();
		assert_memory_equal(m.mem + (size_t)i * 4096, page, 4096);
		tgt_rdma_reads_end();
	}
	assert_true(all_zero(m.mem + REGION, REGION));
	/* again on the same connection: the approval is kept */
	assert_int_equal(raw_fill(&a, &m.d, 4096, 4096, 8), 0);
	close(a.fd);
	mine_close(&m);
}

/*
 * Fill peer slots: a client holds one at a time, whatever it fills, and
 * gives it back when its connection ends. A daemon with --max-fill-peers 2:
 * a client filling ten different regions holds one slot; two clients hold
 * both, a third is refused -ENOSPC until one of them goes. (Slots used to
 * be held for the daemon's life: one client with 256 one-page FILLs of
 * different lengths made every later fill fail.)
 */
static void test_fill_slots(void **state)
{
	const char *args[] = {
		"--port", "0",	     "--provider", prov, "--max-fill-peers",
		"2",	  "--rails", "1",	   NULL};
	struct tgt saved = tgtd, two;
	struct mine ma, mb, mc;
	struct raw a, b, c;
	int st, rc = -1;

	(void)state;
	assert_int_equal(tgt_start(&two, daemon_exe, args, &st), 0);
	tgtd = two; /* raw_open talks to tgtd */
	assert_int_equal(mine_open(&ma), 0);
	assert_int_equal(mine_open(&mb), 0);
	assert_int_equal(mine_open(&mc), 0);
	assert_int_equal(raw_open(&a, NULL), 0);
	for (unsigned i = 0; i < 10; i++) {
		struct bp_rdma_peer_desc d = ma.d;

		d.len = REGION - i * 4096; /* a different region each time */
		assert_int_equal(raw_fill(&a, &d, 4096, 4096, i), 0);
	}
	assert_int_equal(raw_open(&b, NULL), 0);
	assert_int_equal(raw_fill(&b, &mb.d, 4096, 4096, 20), 0);
	assert_int_equal(raw_open(&c, NULL), 0);
	assert_int_equal(raw_fill(&c, &mc.d, 4096, 4096, 21), -ENOSPC);
	close(a.fd); /* its slot comes back once the daemon sees it gone */
	for (int64_t end = tgt_now_ms() + 5000; tgt_now_ms() < end;) {
		rc = raw_fill(&c, &mc.d, 4096, 4096, 22);
		if (rc != -ENOSPC)
			break;
		usleep(20000);
	}
	assert_int_equal(rc, 0);
	close(b.fd);
	close(c.fd);
	assert_int_equal(tgt_stop(&tgtd), 0);
	tgtd = saved;
	mine_close(&ma);
	mine_close(&mb);
	mine_close(&mc);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_endpoint_refused),
		cmocka_unit_test(test_third_address_refused),
		cmocka_unit_test(test_shm_link_refused),
		cmocka_unit_test(test_other_process_refused),
		cmocka_unit_test(test_other_user_refused),
		cmocka_unit_test(test_own_region),
		cmocka_unit_test(test_bounds_and_keys),
		cmocka_unit_test(test_fill_slots),
	};
	const char *args[] = {"--port",	 "0", "--provider", prov,
			      "--rails", "1", "-v",	    NULL};
	int st, rc;

	self_exe = argv[0];
	/* bounded, whatever a daemon that writes where it should not does */
	alarm(argc >= 3 && argv[1][0] == '-' ? 60 : 300);
	setenv("FI_TCP_IFACE", "lo", 1);
	signal(SIGPIPE, SIG_IGN);
	if (argc == 3 && strcmp(argv[1], "--hold") == 0) {
		prov = argv[2];
		return hold_main();
	}
	if (argc == 4 && strcmp(argv[1], "--as-nobody") == 0) {
		prov = argv[2];
		tgtd.port = (unsigned)atoi(argv[3]);
		return nobody_main();
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH/bp-target\n", argv[0]);
		return 2;
	}
	daemon_exe = argv[1];
	if (getenv("BP_TEST_PROVIDER"))
		prov = getenv("BP_TEST_PROVIDER");
	args[3] = prov;
	if (tgt_have_provider(is_shm() ? "shm" : "tcp") != 0) {
		fprintf(stderr, "SKIP: fi_info finds no provider for %s\n",
			prov);
		return 77;
	}
	if (tgt_start(&tgtd, argv[1], args, &st) != 0) {
		fprintf(stderr, "bp-target did not start\n");
		return 1;
	}
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (tgt_stop(&tgtd) != 0) {
		fprintf(stderr, "bp-target did not exit 0 on SIGTERM\n");
		rc = 1;
	}
	return rc;
}
