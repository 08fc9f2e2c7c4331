/* SPDX-License-Identifier: MIT */
/*
 * test_target_fill_abandon.c - a fill client killed in the middle of its
 * fill costs the next client nothing.
 *
 * The daemon runs with --peer-timeout-ms 60000: pages to a dead client
 * that the daemon was not told of would hold its fill endpoint for a
 * minute. Four times (BP_KILLS): a filler (this program re-run with
 * --filler) connects, exposes a 256 MiB region and asks for a fill of
 * 4 KiB pages; once the first progress report is in, it is killed with
 * SIGKILL. Then this process, a client of its own, fills 1 MiB and checks
 * every page. Asserts, after each kill:
 *   - the daemon is alive and the next fill returns 0 with every page
 *     right within 20 s (a third of the peer timeout: it did not wait for
 *     it; it takes about 0.02 s here);
 *   - the daemon logs the abandoned fill back, failed (not complete);
 * then SIGTERM: exit status 0. A rail wedged by libfabric 1.17's shm (a
 * HELLO refused -EIO, "wedged") is the provider's hang: skipped, said so.
 *
 * usage: test_target_fill_abandon PATH/bp-target; BP_TEST_PROVIDER picks
 * the provider (tcp;ofi_rxm by default). Exit 0 pass, 77 skip, 1 fail.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include <batchpipe/batchpipe.h>
#include <batchpipe/rdma.h>

#include "tgt_spawn.h"

#define BIG	 (256u << 20)
#define SMALL	 (1u << 20)
#define PAGE	 4096u
#define BOUND_MS 20000

static const char *prov = "tcp;ofi_rxm";

static void conn_init(struct bp_rdma_conn_config *cc, unsigned port)
{
	bp_rdma_conn_config_init(cc);
	cc->port = port;
	cc->provider = prov;
	cc->region_len = 4096;
}

/* A node and a region of len for the daemon to fill. */
static int expose(size_t len, struct bp_rdma_node **node,
		  struct bp_rdma_region **reg, uint8_t **mem,
		  struct bp_rdma_peer_desc *d)
{
	struct bp_rdma_node_config nc;

	bp_rdma_node_config_init(&nc);
	nc.provider = prov;
	nc.node = strncmp(prov, "shm", 3) ? "127.0.0.1" : NULL;
	*mem = aligned_alloc(4096, len);
	if (!*mem || bp_rdma_node_create(&nc, node) != 0)
		return -1;
	tgt_rdma_zero(*mem, len);
	if (bp_rdma_node_expose(*node, *mem, len, NULL, reg) != 0)
		return -1;
	bp_rdma_region_describe(*reg, d);
	return 0;
}

/* ------------------------------------------------------------ filler */

static void said_filling(void *ctx, uint64_t done, uint64_t len)
{
	atomic_bool *said = ctx;

	(void)len;
	if (done && !atomic_exchange(said, true))
		(void)!write(1, "f", 1);
}

/* Ask for a fill of BIG; says "f" on stdout once pages arrive. */
static int filler_main(unsigned port)
{
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg;
	struct bp_rdma_peer_desc d;
	atomic_bool said = false;
	uint8_t *mem;

	conn_init(&cc, port);
	if (bp_rdma_connect(&cc, &conn) != 0 ||
	    expose(BIG, &node, &reg, &mem, &d) != 0)
		return 2;
	bp_rdma_conn_fill(conn, &d, BIG, PAGE, 11, said_filling, &said);
	(void)!write(1, "d", 1); /* done before the kill: no test */
	pause();
	return 0;
}

/* ------------------------------------------------------------- test */


/* Pages of [0, len) that are not what the generator makes for seed. */
static unsigned bad_pages(const uint8_t *mem, uint64_t len, uint64_t seed)
{
	static uint8_t tmp[PAGE];
	unsigned bad = 0;

	tgt_rdma_reads_begin();
	for (uint64_t i = 0; i * PAGE < len; i++) {
		bp_rdma_fill_page(seed, i, tmp, PAGE);
		bad += memcmp(mem + i * PAGE, tmp, PAGE) != 0;
	}
	tgt_rdma_reads_end();
	return bad;
}

/* The daemon's log so far (its stdout, non-blocking), appended to log. */
static void read_log(struct tgt *t, char *log, size_t cap, size_t *len)
{
	ssize_t r;

	while (*len + 1 < cap &&
	       (r = read(t->out, log + *len, cap - 1 - *len)) > 0)
		*len += (size_t)r;
	log[*len] = '\0';
}

static unsigned count(const char *s, const char *needle)
{
	unsigned n = 0;

	while ((s = strstr(s, needle)) != NULL) {
		n++;
		s += strlen(needle);
	}
	return n;
}

static char daemon_log[1 << 20];

int main(int argc, char **argv)
{
	const char *args[] = {"--port",		   "0",	    "--provider",
			      prov,		   "--peer-timeout-ms", "60000",
			      NULL};
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct bp_rdma_node *node;
	struct bp_rdma_region *reg;
	struct bp_rdma_peer_desc d;
	unsigned kills = 4, tested = 0;
	size_t loglen = 0;
	uint8_t *mem;
	struct tgt t;
	int st, rc;

	rc = tgt_loop_start(argc, argv, "--filler", &prov, &kills);
	if (rc > 0)
		return filler_main((unsigned)rc);
	if (rc < 0)
		return -rc;
	args[3] = prov;
	if (tgt_start_logged(&t, argv[1], args, &st) != 0) {
		fprintf(stderr, "bp-target did not start\n");
		return 1;
	}
	fcntl(t.out, F_SETFL, fcntl(t.out, F_GETFL) | O_NONBLOCK);
	conn_init(&cc, t.port);
	rc = bp_rdma_connect(&cc, &conn);
	TGT_CHECK(rc == 0, "bp_rdma_connect: %s", bp_strerror(rc));
	if (rc || expose(SMALL, &node, &reg, &mem, &d) != 0) {
		tgt_stop(&t);
		return 1;
	}
	for (unsigned i = 0; i < kills && !tgt_fails; i++) {
		char port[16], c = 0, text[BPI_TEXT_MAX + 1];
		int out[2];
		int64_t t0, ms;
		pid_t f;

		snprintf(port, sizeof(port), "%u", t.port);
		if (pipe(out) != 0)
			break;
		f = fork();
		if (f == 0) {
			dup2(out[1], 1);
			execl(argv[0], argv[0], "--filler", port, (char *)NULL);
			_exit(127);
		}
		close(out[1]);
		{
			struct pollfd pfd = {.fd = out[0], .events = POLLIN};

			if (poll(&pfd, 1, 30000) == 1)
				(void)!read(out[0], &c, 1);
		}
		kill(f, SIGKILL);
		waitpid(f, NULL, 0);
		close(out[0]);
		bp_rdma_shm_sweep(); /* what the filler left */
		if (c != 'f') {
			printf("kill %u: the filler said '%c' (done before the "
			       "kill, or no fill): not counted\n",
			       i, c ? c : '-');
			continue;
		}
		TGT_CHECK(waitpid(t.pid, &st, WNOHANG) == 0,
		      "kill %u: the daemon died (status %#x)", i, st);
		rc = tgt_hello(t.port, prov, text, sizeof(text));
		if (rc == -EIO && strstr(text, "wedged")) {
			printf("SKIP: kill %u: the daemon reports: %s (the "
			       "provider's hang, not this test's case)\n",
			       i, text);
			tgt_stop(&t);
			return 77;
		}
		t0 = tgt_now_ms();
		tgt_rdma_zero(mem, SMALL);
		rc = bp_rdma_conn_fill(conn, &d, SMALL, PAGE, 100 + i, NULL,
				       NULL);
		ms = tgt_now_ms() - t0;
		TGT_CHECK(rc == 0, "kill %u: the next fill: %s", i,
		      bp_strerror(rc));
		TGT_CHECK(ms <= BOUND_MS,
		      "kill %u: the next fill took %lld ms: it waited for the "
		      "dead client's pages",
		      i, (long long)ms);
		TGT_CHECK(!rc && bad_pages(mem, SMALL, 100 + i) == 0,
		      "kill %u: pages of the next fill differ", i);
		printf("kill %u: the next 1 MiB fill took %lld ms\n", i,
		       (long long)ms);
		tested++;
	}
	bp_rdma_conn_close(conn);
	bp_rdma_region_close(reg);
	bp_rdma_node_destroy(node);
	free(mem);
	/* the abandoned fills came back failed, each said so */
	for (int w = 0; w < 50; w++) {
		read_log(&t, daemon_log, sizeof(daemon_log), &loglen);
		if (count(daemon_log, "went away is back") >= tested)
			break;
		usleep(100000);
	}
	TGT_CHECK(tested > 0, "no kill came in the middle of a fill");
	TGT_CHECK(count(daemon_log, "went away is back") >= tested,
	      "%u of %u abandoned fills logged back",
	      count(daemon_log, "went away is back"), tested);
	TGT_CHECK(count(daemon_log, "none completed for") == 0,
	      "the peer timeout ended an abandoned fill:\n%s", daemon_log);
	rc = tgt_stop(&t);
	TGT_CHECK(rc == 0, "bp-target exited %d on SIGTERM", rc);
	fputs(daemon_log, stdout);
	printf("%s target_fill_abandon %s: %u kills mid-fill\n",
	       tgt_fails ? "FAIL" : "PASS", prov, tested);
	return tgt_fails ? 1 : 0;
}
