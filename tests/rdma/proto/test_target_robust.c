/* SPDX-License-Identifier: MIT */
/*
 * test_target_robust.c - the real bp-target against bad clients.
 *
 * One daemon (tcp;ofi_rxm over loopback, --stall-ms 300) is fed, on
 * connections of their own and all at once: garbage, a wrong magic, a wrong
 * version, an unknown type, an oversized header, a truncated message, a
 * message stalled in the header and one stalled in the body, a malformed
 * body, a request before HELLO, and a connection that never speaks. Each
 * must be closed; meanwhile a well-behaved client on another connection
 * gets its WELCOME and its QUERY answers, before, during and after. Then
 * SIGTERM must end the daemon with status 0, clients still connected.
 *
 * Separately: a non-loopback --listen without a token file is refused
 * (exit 2); with a token file a wrong or missing token is -EACCES through
 * bp_rdma_connect and the right one works; a provider or rail count the
 * daemon does not have is -EINVAL, a region over --max-region -ENOMEM, a
 * closed port -ECONNREFUSED.
 *
 * usage: test_target_robust PATH/bp-target. Exit 77 when fi_info has no
 * tcp provider.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <batchpipe/rdma.h>

#include "src/rdma/proto.h"
#include "tgt_spawn.h"

#define PROV   "tcp;ofi_rxm"
#define REGION (64u << 10)

static const char *exe;

static void test_log(void *ctx, enum bp_log_level level, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "[client %d] %s\n", (int)level, msg);
}

static void conn_cfg(struct bp_rdma_conn_config *c, unsigned port)
{
	bp_rdma_conn_config_init(c);
	c->port = port;
	c->provider = PROV;
	c->region_len = REGION;
	c->timeout_ns = 5000000000ll;
	c->log = test_log;
}

static uint64_t zero_digest(size_t len)
{
	void *z = calloc(1, len);
	uint64_t d = bp_rdma_digest(z, len);

	free(z);
	return d;
}

/* A QUERY of the whole region of a fresh client: all zeroes. */
static void check_query(struct bp_rdma_conn *c)
{
	struct bp_rdma_target_query q;

	assert_int_equal(bp_rdma_conn_query(c, 0, REGION, &q), 0);
	assert_int_equal(q.digest, zero_digest(REGION));
	assert_int_equal(bp_rdma_conn_query(c, 100, 28, &q), 0);
	assert_int_equal(q.digest, zero_digest(28));
}

static size_t encode(const struct bpi_msg *m, uint8_t *buf)
{
	ssize_t n = bpi_proto_encode(m, buf, BPI_MSG_MAX);

	assert_true(n > 0);
	return (size_t)n;
}

static size_t hello_bytes(uint8_t *buf, const char *token)
{
	struct bpi_msg m = {.type = BPI_MSG_HELLO};

	snprintf(m.u.hello.token, sizeof(m.u.hello.token), "%s", token);
	strcpy(m.u.hello.provider, PROV);
	m.u.hello.rails = 1;
	m.u.hello.region_len = REGION;
	return encode(&m, buf);
}

/* Read one whole message from a blocking socket, 5 s at most. */
static int read_msg(int fd, struct bpi_msg *m)
{
	static uint8_t buf[BPI_MSG_MAX];
	size_t got = 0;
	int64_t end = tgt_now_ms() + 5000;

	for (;;) {
		ssize_t r = bpi_proto_parse(buf, got, m);
		struct pollfd pfd = {.fd = fd, .events = POLLIN};

		if (r != 0)
			return r > 0 ? 0 : (int)r;
		if (poll(&pfd, 1, (int)(end - tgt_now_ms())) <= 0)
			return -ETIMEDOUT;
		r = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (r <= 0)
			return -ECONNRESET;
		got += (size_t)r;
	}
}

/*
 * One client's QUERY of a 1 GiB region (0.49 s of digest when it was done
 * in one go on the daemon's main thread) while a second client says
 * HELLO: the second one's WELCOME comes before the first one's reply, and
 * the reply is right (the digest is taken 1 MiB per pass of the loop). The
 * first one half-closes after its QUERY: it still gets the reply, then the
 * daemon closes.
 */
static void test_query_shares_the_loop(void **state)
{
	const uint64_t big = 1ull << 30;
	uint8_t buf[256];
	struct bpi_msg m = {.type = BPI_MSG_HELLO};
	struct pollfd pfd;
	uint64_t want = BP_RDMA_DIGEST_INIT;
	void *zero = calloc(1, 1u << 20);
	const char *args[] = {"--port", "0", "--provider", PROV, NULL};
	struct tgt t;
	int a, b, st;

	(void)state;
	assert_int_equal(tgt_start(&t, exe, args, &st), 0);
	a = tgt_raw(t.port);
	assert_true(a >= 0);
	strcpy(m.u.hello.provider, PROV);
	m.u.hello.rails = 1;
	m.u.hello.region_len = big;
	assert_int_equal(tgt_send(a, buf, encode(&m, buf)), 0);
	assert_int_equal(read_msg(a, &m), 0);
	assert_int_equal(m.type, BPI_MSG_WELCOME);
	m = (struct bpi_msg){.type = BPI_MSG_QUERY};
	m.u.query.offset = 0;
	m.u.query.len = big;
	assert_int_equal(tgt_send(a, buf, encode(&m, buf)), 0);
	/* and A says no more: its reply must still come, then the close */
	assert_int_equal(shutdown(a, SHUT_WR), 0);
	usleep(20000); /* the daemon is into it */
	b = tgt_raw(t.port);
	assert_true(b >= 0);
	assert_int_equal(tgt_send(b, buf, hello_bytes(buf, "")), 0);
	assert_int_equal(read_msg(b, &m), 0);
	assert_int_equal(m.type, BPI_MSG_WELCOME);
	pfd = (struct pollfd){.fd = a, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 0), 0); /* A's reply still to come */
	assert_int_equal(poll(&pfd, 1, 60000), 1);
	assert_int_equal(read_msg(a, &m), 0);
	assert_int_equal(m.type, BPI_MSG_QUERY_REPLY);
	assert_int_equal(m.u.reply.status, 0);
	for (unsigned i = 0; i < 1024; i++)
		want = bp_rdma_digest_more(want, zero, 1u << 20);
	assert_int_equal(m.u.reply.digest, want);
	assert_int_equal(recv(a, buf, sizeof(buf), 0), 0); /* then closed */
	free(zero);
	close(a);
	close(b);
	assert_int_equal(tgt_stop(&t), 0);
}

struct bad {
	const char *what;
	int fd;
	uint8_t bytes[64];
	size_t n;
	bool shut_wr;	 /* then half-close: a truncated message */
	bool want_error; /* an ERROR before the close */
};

static void test_bad_clients(void **state)
{
	static uint8_t buf[BPI_MSG_MAX];
	struct bad bad[12];
	unsigned nbad = 0;
	struct bp_rdma_conn_config cfg;
	struct bp_rdma_conn *good;
	struct bpi_msg m;
	struct tgt t;
	const char *args[] = {"--port",	    "0",   "--provider", PROV,
			      "--stall-ms", "300", "-v",	 NULL};
	int raw, st;
	size_t n;

	(void)state;
	assert_int_equal(tgt_start(&t, exe, args, &st), 0);
	conn_cfg(&cfg, t.port);
	assert_int_equal(bp_rdma_connect(&cfg, &good), 0);
	assert_string_equal(bp_rdma_conn_provider(good), PROV);
	check_query(good);

	/* the bad ones */
#define BAD(w) (bad[nbad] = (struct bad){.what = (w)}, &bad[nbad++])
	{
		struct bad *b = BAD("garbage");
		memcpy(b->bytes, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
		b->n = 27;
	}
	n = hello_bytes(buf, "");
	{
		struct bad *b = BAD("wrong magic");
		memcpy(b->bytes, buf, 12);
		b->bytes[0] = 'X';
		b->n = 12;
		b = BAD("wrong version");
		memcpy(b->bytes, buf, 12);
		b->bytes[4] = 9;
		b->n = 12;
		b = BAD("unknown type");
		memcpy(b->bytes, buf, 12);
		b->bytes[6] = 0x42;
		b->n = 12;
		b = BAD("oversized");
		memcpy(b->bytes, buf, 12);
		b->bytes[10] = 0x10; /* + 1 MiB, body never sent */
		b->n = 12;
		b = BAD("truncated");
		memcpy(b->bytes, buf, 20);
		b->n = 20;
		b->shut_wr = true;
		b = BAD("stalled in the header");
		memcpy(b->bytes, buf, 7);
		b->n = 7;
		b = BAD("stalled in the body");
		memcpy(b->bytes, buf, 30);
		b->n = 30;
		b = BAD("malformed body");
		memcpy(b->bytes, buf, n);
		b->bytes[n - 12] = 0; /* rails (u32 before region_len) = 0 */
		b->n = n;
		b = BAD("silent");
		b->n = 0;
	}
	{
		struct bad *b = BAD("QUERY before HELLO");
		struct bpi_msg q = {.type = BPI_MSG_QUERY};

		q.u.query.len = 8;
		b->n = encode(&q, b->bytes);
		b->want_error = true;
	}
#undef BAD
	for (unsigned i = 0; i < nbad; i++) {
		bad[i].fd = tgt_raw(t.port);
		assert_true(bad[i].fd >= 0);
		if (bad[i].n)
			assert_int_equal(
				tgt_send(bad[i].fd, bad[i].bytes, bad[i].n), 0);
		if (bad[i].shut_wr)
			shutdown(bad[i].fd, SHUT_WR);
	}

	/* while they are pending: a raw good client and the library one */
	raw = tgt_raw(t.port);
	assert_true(raw >= 0);
	n = hello_bytes(buf, "");
	assert_int_equal(tgt_send(raw, buf, n), 0);
	assert_int_equal(read_msg(raw, &m), 0);
	assert_int_equal(m.type, BPI_MSG_WELCOME);
	assert_int_equal(m.u.welcome.desc.rails, 1);
	assert_int_equal(m.u.welcome.desc.len, REGION);
	check_query(good);

	for (unsigned i = 0; i < nbad; i++) {
		uint8_t got[512];
		ssize_t r = tgt_wait_closed(bad[i].fd, got, sizeof(got), 5000);

		fprintf(stderr, "bad client \"%s\": %s (%zd bytes back)\n",
			bad[i].what, r < 0 ? "NOT closed" : "closed", r);
		assert_true(r >= 0);
		if (bad[i].want_error) {
			assert_true(bpi_proto_parse(got, (size_t)r, &m) > 0);
			assert_int_equal(m.type, BPI_MSG_ERROR);
			assert_int_equal(m.u.error.code, -EPROTO);
		}
		close(bad[i].fd);
	}

	/* the good ones are still served */
	check_query(good);
	{
		struct bpi_msg q = {.type = BPI_MSG_QUERY};

		q.u.query.offset = 8;
		q.u.query.len = 16;
		n = encode(&q, buf);
		assert_int_equal(tgt_send(raw, buf, n), 0);
		assert_int_equal(read_msg(raw, &m), 0);
		assert_int_equal(m.type, BPI_MSG_QUERY_REPLY);
		assert_int_equal(m.u.reply.status, 0);
		assert_int_equal(m.u.reply.digest, zero_digest(16));
	}
	{
		struct bp_rdma_target_query q;

		assert_int_equal(bp_rdma_conn_query(good, REGION, 1, &q),
				 -ERANGE);
		assert_int_equal(bp_rdma_conn_query(good, 1, REGION, &q),
				 -ERANGE);
		assert_int_equal(bp_rdma_conn_query(good, UINT64_MAX, 2, &q),
				 -ERANGE);
		assert_int_equal(bp_rdma_conn_query(good, REGION, 0, &q), 0);
		check_query(good); /* an error answer keeps the connection */
	}
	/* a second HELLO on a welcomed connection is out of turn */
	n = hello_bytes(buf, "");
	assert_int_equal(tgt_send(raw, buf, n), 0);
	assert_int_equal(read_msg(raw, &m), 0);
	assert_int_equal(m.type, BPI_MSG_ERROR);
	assert_int_equal(m.u.error.code, -EPROTO);
	assert_true(tgt_wait_closed(raw, NULL, 0, 5000) >= 0);
	close(raw);
	check_query(good);

	/* SIGTERM with a client connected: a clean exit */
	assert_int_equal(tgt_stop(&t), 0);
	bp_rdma_conn_close(good);
}

static void test_non_loopback_refused(void **state)
{
	const char *args[] = {"--listen",   "0.0.0.0", "--port", "0",
			      "--provider", PROV,      NULL};
	struct tgt t;
	int st = 0;

	(void)state;
	assert_int_equal(tgt_start(&t, exe, args, &st), -1);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2);
}

static void test_token(void **state)
{
	char path[] = "/tmp/bp-target-token-XXXXXX";
	const char *args[] = {"--port",	      "0",  "--provider", PROV,
			      "--token-file", path, NULL};
	struct bp_rdma_conn_config cfg;
	struct bp_rdma_conn *c = NULL;
	struct tgt t;
	int fd = mkstemp(path), st;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret-token\n", 13), 13);
	close(fd);
	assert_int_equal(tgt_start(&t, exe, args, &st), 0);
	conn_cfg(&cfg, t.port);
	cfg.token = "s3cret-tokex";
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EACCES);
	cfg.token = "s3cret-token-and-more";
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EACCES);
	cfg.token = NULL;
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EACCES);
	cfg.token = "s3cret-token";
	assert_int_equal(bp_rdma_connect(&cfg, &c), 0);
	check_query(c);
	bp_rdma_conn_close(c);
	assert_int_equal(tgt_stop(&t), 0);
	unlink(path);
}

static void test_connect_errors(void **state)
{
	const char *args[] = {"--port",	      "0",  "--provider", PROV,
			      "--max-region", "1M", NULL};
	struct bp_rdma_conn_config cfg;
	struct bp_rdma_conn *c = NULL;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	struct tgt t;
	int st, fd;

	(void)state;
	assert_int_equal(tgt_start(&t, exe, args, &st), 0);
	conn_cfg(&cfg, t.port);
	cfg.provider = "shm";
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EINVAL);
	cfg.provider = PROV;
	cfg.rails = 2;
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EINVAL);
	cfg.rails = 1;
	cfg.region_len = (1u << 20) + 1;
	assert_int_equal(bp_rdma_connect(&cfg, &c), -ENOMEM);
	cfg.region_len = 1u << 20;
	cfg.provider = NULL; /* the daemon's own */
	assert_int_equal(bp_rdma_connect(&cfg, &c), 0);
	assert_string_equal(bp_rdma_conn_provider(c), PROV);
	bp_rdma_conn_close(c);
	/* bad arguments never reach the daemon */
	conn_cfg(&cfg, t.port);
	cfg.rails = 0;
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EINVAL);
	conn_cfg(&cfg, t.port);
	cfg.region_len = 0;
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EINVAL);
	conn_cfg(&cfg, 0);
	assert_int_equal(bp_rdma_connect(&cfg, &c), -EINVAL);
	assert_int_equal(bp_rdma_connect(NULL, &c), -EINVAL);
	assert_int_equal(bp_rdma_connect(&cfg, NULL), -EINVAL);
	assert_int_equal(tgt_stop(&t), 0);

	/* a port nobody listens on: bind one, close it, connect */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	close(fd);
	conn_cfg(&cfg, ntohs(a.sin_port));
	assert_int_equal(bp_rdma_connect(&cfg, &c), -ECONNREFUSED);
}

/* --max-clients: one more is refused with -EBUSY, the first is served. */
static void test_max_clients(void **state)
{
	const char *args[] = {"--port",	       "0", "--provider", PROV,
			      "--max-clients", "1", NULL};
	struct bp_rdma_conn_config cfg;
	struct bp_rdma_conn *a = NULL, *b = NULL;
	struct tgt t;
	int st;

	(void)state;
	assert_int_equal(tgt_start(&t, exe, args, &st), 0);
	conn_cfg(&cfg, t.port);
	assert_int_equal(bp_rdma_connect(&cfg, &a), 0);
	assert_int_equal(bp_rdma_connect(&cfg, &b), -EBUSY);
	check_query(a);
	bp_rdma_conn_close(a);
	/* the slot is free again once the daemon has seen the BYE */
	for (int i = 0; i < 50; i++) {
		int rc = bp_rdma_connect(&cfg, &b);

		if (rc == 0)
			break;
		assert_int_equal(rc, -EBUSY);
		usleep(20000);
	}
	assert_non_null(b);
	check_query(b);
	bp_rdma_conn_close(b);
	assert_int_equal(tgt_stop(&t), 0);
}

/* A listener that accepts and never answers: the HELLO times out. */
static void test_connect_timeout(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	struct bp_rdma_conn_config cfg;
	struct bp_rdma_conn *c = NULL;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int64_t t0;

	(void)state;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	conn_cfg(&cfg, ntohs(a.sin_port));
	cfg.timeout_ns = 200000000ll;
	t0 = tgt_now_ms();
	assert_int_equal(bp_rdma_connect(&cfg, &c), -ETIMEDOUT);
	assert_true(tgt_now_ms() - t0 >= 150);
	assert_true(tgt_now_ms() - t0 < 3000);
	close(fd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_clients),
		cmocka_unit_test(test_non_loopback_refused),
		cmocka_unit_test(test_token),
		cmocka_unit_test(test_connect_errors),
		cmocka_unit_test(test_connect_timeout),
		cmocka_unit_test(test_max_clients),
		cmocka_unit_test(test_query_shares_the_loop),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: %s PATH/bp-target\n", argv[0]);
		return 2;
	}
	exe = argv[1];
	if (access(exe, X_OK) != 0) {
		fprintf(stderr, "%s: %s\n", exe, strerror(errno));
		return 1;
	}
	if (tgt_have_provider("tcp") != 0) {
		fprintf(stderr, "SKIP: fi_info -p tcp finds no tcp provider\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
