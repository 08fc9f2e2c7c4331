/* SPDX-License-Identifier: MIT */
/*
 * test_target_kill_loop.c - bp-target outlives clients killed while they
 * write into it, says when it is wedged, always stops when told, and
 * leaves no files behind.
 *
 * Ten times (BP_KILLS): a writer (this program re-run with --writer)
 * connects, writes 64 KiB pages into its region with the RDMA stage
 * without pause and is killed with SIGKILL in the middle. After each kill
 * the daemon must be alive and answer a HELLO: WELCOME, or, once a rail is
 * wedged (libfabric 1.17's shm can spin for ever on a lock the killed peer
 * held), ERROR -EIO naming the rail. Then SIGTERM: the daemon must exit
 * within --stop-timeout-ms (2 s) plus slack, with status 0 (a clean stop)
 * or 3 (a thread stuck inside the provider, left behind), and none of its
 * /dev/shm files may remain; bp_rdma_shm_sweep here then removes what the
 * killed writers left.
 *
 * usage: test_target_kill_loop PATH/bp-target; BP_TEST_PROVIDER picks the
 * provider (shm by default). Exit 0 pass, 77 skip, 1 fail.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include <batchpipe/batchpipe.h>
#include <batchpipe/rdma.h>

#include "src/rdma/proto.h"
#include "tgt_spawn.h"

#define PAGE   (64u << 10)
#define REGION (8u << 20)

static const char *prov = "shm";

/* ------------------------------------------------------------ writer */

static atomic_ulong written;

static void writer_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	(void)jobs;
	/* relaxed: a count the writer's main thread polls */
	atomic_fetch_add_explicit(&written, n, memory_order_relaxed);
}

/* Connect, then write until killed; says "w" on stdout once writing. */
static int writer_main(unsigned port)
{
	static struct bp_rdma_job jobs[64];
	struct bp_rdma_conn_config cc;
	struct bp_rdma_conn *conn;
	struct bp_rdma_peer_desc d;
	struct bp_rdma_config rc;
	struct bp_rdma *r;
	struct bp_pipeline_config pc;
	struct bp_pipeline *p;
	uint8_t *buf = aligned_alloc(4096, PAGE);
	bool said = false;
	int peer;

	bp_rdma_conn_config_init(&cc);
	cc.port = port;
	cc.provider = prov;
	cc.region_len = REGION;
	if (!buf || bp_rdma_connect(&cc, &conn) != 0)
		return 2;
	memset(buf, 0x5a, PAGE);
	bp_rdma_conn_peer(conn, &d);
	bp_rdma_config_init(&rc);
	rc.provider = prov;
	rc.node = strcmp(prov, "shm") ? "127.0.0.1" : NULL;
	rc.workers = 1;
	if (bp_rdma_create(&rc, &r) != 0 ||
	    (peer = bp_rdma_peer_add(r, &d)) < 0)
		return 2;
	bp_pipeline_config_init(&pc);
	pc.workers = 1;
	pc.stage = bp_rdma_stage(r);
	pc.stage_ctx = r;
	pc.sink = writer_sink;
	if (bp_pipeline_create(&pc, &p) != 0 || bp_pipeline_start(p) != 0)
		return 2;
	for (uint64_t n = 0;; n++) {
		struct bp_rdma_job *j = &jobs[n % 64];
		struct bp_job *jp = &j->hdr;

		/* a job is reused once the sink has had it back */
		while (n >= 64 &&
		       atomic_load_explicit(&written, memory_order_relaxed) <
			       n - 63)
			usleep(50);
		bp_rdma_job_set(j, BP_RDMA_WRITE, (uint32_t)peer, buf, PAGE,
				(n % (REGION / PAGE)) * PAGE);
		if (bp_pipeline_submit(p, &jp, 1, 0, -1) != 1)
			return 2;
		if (!said && atomic_load_explicit(&written,
						  memory_order_relaxed) >= 32) {
			said = write(1, "w", 1) == 1;
		}
	}
}

/* ------------------------------------------------------------- test */


/* Files in /dev/shm named bp-PID-... */
static unsigned shm_files_of(long pid)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	char prefix[32];
	unsigned n = 0;

	if (!d)
		return 0;
	snprintf(prefix, sizeof(prefix), "bp-%ld-", pid);
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	const char *args[] = {
		"--port", "0",		"--provider", prov, "--stop-timeout-ms",
		"2000",	  "--wedge-ms", "1000",	      NULL};
	unsigned kills = 10, wedged = 0;
	long writers[64];
	struct tgt t;
	int st, rc;
	int64_t t0;

	rc = tgt_loop_start(argc, argv, "--writer", &prov, &kills);
	if (rc > 0)
		return writer_main((unsigned)rc);
	if (rc < 0)
		return -rc;
	if (kills > 64)
		kills = 64;
	args[3] = prov;
	if (tgt_start(&t, argv[1], args, &st) != 0) {
		fprintf(stderr, "bp-target did not start\n");
		return 1;
	}
	for (unsigned i = 0; i < kills; i++) {
		char port[16], c, text[BPI_TEXT_MAX + 1];
		int out[2];
		pid_t w;

		snprintf(port, sizeof(port), "%u", t.port);
		if (pipe(out) != 0)
			break;
		w = fork();
		if (w == 0) {
			dup2(out[1], 1);
			execl(argv[0], argv[0], "--writer", port, (char *)NULL);
			_exit(127);
		}
		close(out[1]);
		writers[i] = w;
		{
			struct pollfd pfd = {.fd = out[0], .events = POLLIN};

			/* writing (or gone: refused by a wedged daemon) */
			if (poll(&pfd, 1, 20000) == 1)
				(void)!read(out[0], &c, 1);
		}
		usleep(1000u * (10 + 37 * i % 90)); /* mid-transfer */
		kill(w, SIGKILL);
		waitpid(w, NULL, 0);
		close(out[0]);
		TGT_CHECK(waitpid(t.pid, &st, WNOHANG) == 0,
		      "kill %u: the daemon died (status %#x)", i, st);
		rc = tgt_hello(t.port, prov, text, sizeof(text));
		if (rc == -EIO) {
			wedged++;
			printf("kill %u: daemon reports: %s\n", i, text);
			TGT_CHECK(strstr(text, "wedged") != NULL,
			      "kill %u: -EIO without saying wedged: %s", i,
			      text);
			kills = i + 1; /* nothing more to learn */
			break;
		}
		TGT_CHECK(rc == 0, "kill %u: HELLO got %d (%s)", i, rc, text);
	}
	/* the stop: bounded, whatever the kills did to the provider */
	t0 = tgt_now_ms();
	kill(t.pid, SIGTERM);
	st = -1;
	while (tgt_now_ms() - t0 < 2000 + 8000 &&
	       waitpid(t.pid, &st, WNOHANG) != t.pid)
		usleep(20000);
	TGT_CHECK(st != -1, "bp-target did not exit within 10 s of SIGTERM");
	if (st == -1) {
		kill(t.pid, SIGKILL);
		waitpid(t.pid, &st, 0);
	}
	TGT_CHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3),
	      "bp-target's exit status %#x (want 0, or 3 when a thread was "
	      "stuck in the provider)",
	      st);
	printf("%u kills, %u wedged; the daemon exited %d after %lld ms\n",
	       kills, wedged, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
	       (long long)(tgt_now_ms() - t0));
	if (wedged)
		TGT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3,
		      "wedged, yet the stop said it finished (status %#x)", st);
	TGT_CHECK(shm_files_of(t.pid) == 0, "the daemon left %u shm files",
	      shm_files_of(t.pid));
	TGT_CHECK(bp_rdma_shm_sweep() >= 0, "bp_rdma_shm_sweep");
	for (unsigned i = 0; i < kills; i++)
		TGT_CHECK(shm_files_of(writers[i]) == 0,
		      "writer %ld's shm files survived the sweep", writers[i]);
	close(t.out);
	if (tgt_fails)
		return 1;
	printf("PASS\n");
	return 0;
}
