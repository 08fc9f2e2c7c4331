/* SPDX-License-Identifier: MIT */
/*
 * test_stage_held PROVIDER [spin-sleep|event] - operations held in flight.
 *
 * A child process runs a node (2 rails); SIGSTOP freezes it, so that a
 * DELIVERED write stays in flight (tcp: the data is sent, the ack never
 * comes back until SIGCONT; shm copies without the peer, so tcp only).
 * The stage waits with long steps (sleep_max_ns 500 ms, event_timeout_ns
 * 1 s), so that a wait that ignores a limit shows.
 *
 *   A  a drain with a job in flight: the worker keeps sleeping in its
 *      completion wait as before the drain (less than 150 ms of CPU in
 *      500 ms; a worker that spins takes about 500), and the drain ends
 *      once the peer goes on.
 *   B  bp_rdma_direct_poll(timeout 2 ms) with a job in flight returns
 *      within 100 ms, however long the wait's own steps.
 *   D  after an abort (direct cancel, 20 ms of quiet) closed the rails,
 *      bp_rdma_register opens them again and registers a buffer; jobs
 *      inside it find that registration (no registration-cache miss),
 *      with the stage taken for a provider that wants local descriptors.
 *   C  the same job twice in one bp_rdma_direct_post is refused with
 *      -EBUSY (logged), and then posted once it comes back once.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "st_common.h"

ST_DEFINE_GLOBALS;

#define RLEN (8u << 20)
#define JLEN (64 * 1024)

static enum bp_rdma_cq_wait mode = BP_RDMA_CQ_SPIN_SLEEP;


static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pid_t child;
static uint8_t *src;

struct drainer {
	struct bp_pipeline *p;
	int rc;
	atomic_int done;
};

static void *drain_thread(void *arg)
{
	struct drainer *d = arg;

	d->rc = bp_pipeline_drain(d->p);
	atomic_store(&d->done, 1);
	return NULL;
}

static void test_a(struct st_fix *f)
{
	struct bp_pipeline_config pc;
	static struct st_job jobs[2];
	struct drainer dr = {0};
	pthread_t t;
	int64_t c0, c1, c2;

	st_pipeline_config(f, &pc);
	pc.workers = 1;
	ST_CHECK(bp_pipeline_create(&pc, &f->p) == 0, "A: create");
	ST_CHECK(st_start(f) == 0, "A: start");
	st_jobs_init(jobs, 2);
	bp_rdma_job_set(&jobs[0].rj, BP_RDMA_WRITE, (uint32_t)f->peer, src,
			JLEN, 0);
	jobs[0].rj.flags = BP_RDMA_JOB_DELIVERED;
	ST_CHECK(st_submit(f, jobs, 1) == 1, "A: warm-up submit");
	ST_CHECK(st_wait_delivered(f, 1, 10), "A: warm-up not delivered");
	kill(child, SIGSTOP);
	bpt_sleep_ms(50);
	bp_rdma_job_set(&jobs[1].rj, BP_RDMA_WRITE, (uint32_t)f->peer, src,
			JLEN, JLEN);
	jobs[1].rj.flags = BP_RDMA_JOB_DELIVERED;
	ST_CHECK(st_submit(f, jobs + 1, 1) == 1, "A: submit");
	bpt_sleep_ms(300);
	c0 = cpu_ns();
	bpt_sleep_ms(500);
	c1 = cpu_ns();
	printf("  A: before the drain: %.0f ms CPU in 500 ms\n",
	       (double)(c1 - c0) / 1e6);
	dr.p = f->p;
	pthread_create(&t, NULL, drain_thread, &dr);
	bpt_sleep_ms(100);
	c1 = cpu_ns();
	bpt_sleep_ms(500);
	c2 = cpu_ns();
	printf("  A: during the drain: %.0f ms CPU in 500 ms\n",
	       (double)(c2 - c1) / 1e6);
	ST_CHECK(c2 - c1 < 150000000,
		 "A: the worker burns %.0f ms of CPU in 500 ms while draining "
		 "with a job in flight (the stage no longer sleeps once "
		 "ingress is closed)",
		 (double)(c2 - c1) / 1e6);
	ST_CHECK(!atomic_load(&dr.done), "A: drain returned with a job held");
	kill(child, SIGCONT);
	pthread_join(t, NULL);
	ST_CHECK(dr.rc == 0, "A: drain: %s", bp_strerror(dr.rc));
	ST_CHECK(f->ok == 2, "A: %lu of 2 ok", f->ok);
	bp_pipeline_destroy(f->p);
	f->p = NULL;
}

/* Poll until outstanding is 0 (up to s seconds); returns jobs back. */
static unsigned drain_direct(struct bp_rdma_direct *d, int s)
{
	struct bp_rdma_job *done[8];
	unsigned back = 0;
	int64_t end = bpt_now_ns() + (int64_t)s * 1000000000;

	while (bp_rdma_direct_outstanding(d) && bpt_now_ns() < end) {
		int n = bp_rdma_direct_poll(d, done, 8, 100000000);

		if (n > 0)
			back += (unsigned)n;
	}
	return back;
}

static void test_b_d(struct st_fix *f)
{
	struct bp_rdma_direct *d;
	static struct bp_rdma_job jb[2], jd[64];
	struct bp_rdma_job *pj, *done[8], *all[64];
	struct bp_rdma_rail_stats rs0, rs1;
	uint8_t *buf;
	int64_t worst = 0;
	int rc;

	ST_CHECK(bp_rdma_direct_open(f->r, 0, &d) == 0, "B: open");
	bp_rdma_job_set(&jb[0], BP_RDMA_WRITE, (uint32_t)f->peer, src, JLEN, 0);
	jb[0].flags = BP_RDMA_JOB_DELIVERED;
	pj = &jb[0];
	bp_rdma_direct_post(d, &pj, 1);
	ST_CHECK(drain_direct(d, 10) == 1, "B: warm-up");
	kill(child, SIGSTOP);
	bpt_sleep_ms(50);
	bp_rdma_job_set(&jb[1], BP_RDMA_WRITE, (uint32_t)f->peer, src, JLEN,
			JLEN);
	jb[1].flags = BP_RDMA_JOB_DELIVERED;
	pj = &jb[1];
	bp_rdma_direct_post(d, &pj, 1);
	for (int i = 0; i < 12; i++) {
		int64_t t0 = bpt_now_ns(), dt;

		rc = bp_rdma_direct_poll(d, done, 8, 2000000);
		dt = bpt_now_ns() - t0;
		if (dt > worst)
			worst = dt;
		if (rc != 0)
			break;
	}
	printf("  B: bp_rdma_direct_poll(timeout 2 ms), job in flight: the "
	       "longest call took %.1f ms\n",
	       (double)worst / 1e6);
	ST_CHECK(worst < 100000000,
		 "B: a poll with a 2 ms time-out took %.1f ms",
		 (double)worst / 1e6);

	/* D: a real abort closes the rails; register reopens them */
	st_log_clear();
	bp_rdma_direct_cancel(d);
	drain_direct(d, 10);
	ST_CHECK(st_log_find(NULL, 0, "endpoint closed", (char *)NULL),
		 "D: the cancel did not close the rail (no log line)");
	printf("  D: rails closed by the abort: %d %d\n",
	       f->r->workers[0].rails[0].closed,
	       f->r->workers[0].rails[1].closed);
	ST_CHECK(bp_rdma_direct_close(d) == 0, "D: close");
	kill(child, SIGCONT);
	buf = st_alloc(1u << 20);
	rc = bp_rdma_register(f->r, buf, 1u << 20, NULL);
	ST_CHECK(rc == 0, "D: register: %s", bp_strerror(rc));
	printf("  D: after register: rail gens %u %u, closed %d %d\n",
	       f->r->workers[0].rails[0].gen, f->r->workers[0].rails[1].gen,
	       f->r->workers[0].rails[0].closed,
	       f->r->workers[0].rails[1].closed);
	st_rail_sum(f->r, f->workers, f->rails, &rs0, NULL);
	ST_CHECK(bp_rdma_direct_open(f->r, 0, &d) == 0, "D: open");
	for (unsigned i = 0; i < 64; i++) {
		bp_rdma_job_set(&jd[i], BP_RDMA_WRITE, (uint32_t)f->peer,
				buf + i * 4096, 4096, (uint64_t)i * 4096);
		all[i] = &jd[i];
	}
	bp_rdma_direct_post(d, all, 64);
	ST_CHECK(drain_direct(d, 20) == 64, "D: jobs back");
	for (unsigned i = 0; i < 64; i++)
		if (jd[i].hdr.status) {
			bp_test_fail("D: job %u: %s", i,
				     bp_strerror(jd[i].hdr.status));
			break;
		}
	st_rail_sum(f->r, f->workers, f->rails, &rs1, NULL);
	printf("  D: registration misses for 64 jobs inside the range "
	       "registered after the abort: %" PRIu64 "\n",
	       rs1.mr_cache_misses - rs0.mr_cache_misses);
	ST_CHECK(rs1.mr_cache_misses == rs0.mr_cache_misses,
		 "D: %" PRIu64 " misses inside a range bp_rdma_register "
		 "registered (filed under the wrong slot)",
		 rs1.mr_cache_misses - rs0.mr_cache_misses);
	ST_CHECK(bp_rdma_direct_close(d) == 0, "D: close 2");
}

static void test_c(struct st_fix *f)
{
	struct bp_rdma_direct *d;
	static struct bp_rdma_job j;
	struct bp_rdma_job *two[2] = {&j, &j}, *done[8];
	unsigned back = 0;
	int rc;

	ST_CHECK(bp_rdma_direct_open(f->r, 1, &d) == 0, "C: open");
	bp_rdma_job_set(&j, BP_RDMA_WRITE, (uint32_t)f->peer, src, 4096, 0);
	rc = bp_rdma_direct_post(d, two, 2);
	printf("  C: the same job twice in one post: %d\n", rc);
	ST_CHECK(rc == -EBUSY, "C: the same job twice in one post: %d, not "
			       "-EBUSY",
		 rc);
	ST_CHECK(st_log_find(NULL, 0, "posted already", (char *)NULL),
		 "C: no log line for the job posted twice");
	ST_CHECK(bp_rdma_direct_outstanding(d) == 0,
		 "C: a refused post left %llu jobs out",
		 (unsigned long long)bp_rdma_direct_outstanding(d));
	rc = bp_rdma_direct_post(d, two, 1);
	ST_CHECK(rc == 1, "C: the job alone: %d", rc);
	ST_CHECK(bp_rdma_direct_post(d, two, 1) == -EBUSY,
		 "C: the job again while out: not -EBUSY");
	for (int i = 0; i < 50; i++) {
		int n = bp_rdma_direct_poll(d, done, 8, 10000000);

		if (n > 0)
			back += (unsigned)n;
		if (!bp_rdma_direct_outstanding(d) || back > 2)
			break;
	}
	printf("  C: the job came back %u times, outstanding %llu\n", back,
	       (unsigned long long)bp_rdma_direct_outstanding(d));
	ST_CHECK(back == 1, "C: a job posted once came back %u times (and "
			    "outstanding is %llu)",
		 back, (unsigned long long)bp_rdma_direct_outstanding(d));
	ST_CHECK(bp_rdma_direct_close(d) == 0, "C: close");
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	struct bp_rdma_config c;
	struct st_fix f;
	char name[96];
	int p[2], rc;

	if (argc > 2 && !strcmp(argv[2], "event"))
		mode = BP_RDMA_CQ_EVENT;
	st_env();
	snprintf(name, sizeof(name), "stage_held %s %s", prov,
		 mode == BP_RDMA_CQ_EVENT ? "event" : "spin-sleep");
	if (pipe(p))
		return 1;
	child = fork(); /* before any libfabric call here */
	if (child == 0) {
		close(p[0]);
		st_child_node(prov, p[1], RLEN);
	}
	close(p[1]);
	if (!st_provider_ok(prov)) {
		kill(child, SIGKILL);
		return ST_SKIP;
	}
	st_watchdog(120, "%s", name);
	memset(&f, 0, sizeof(f));
	f.prov = prov;
	f.rails = 2;
	if (read(p[0], &rc, sizeof(rc)) != sizeof(rc) || rc ||
	    read(p[0], &f.desc, sizeof(f.desc)) != sizeof(f.desc)) {
		fprintf(stderr, "child node failed\n");
		kill(child, SIGKILL);
		return 1;
	}
	src = st_alloc(RLEN);
	st_rdma_config(&f, &c);
	c.cq_wait = mode;
	c.spin_ns = 1000;
	c.sleep_max_ns = 500000000;
	c.event_timeout_ns = 1000000000;
	c.peer_timeout_ns = 60000000000ull;
	rc = bp_rdma_create(&c, &f.r);
	if (rc) {
		fprintf(stderr, "create: %s\n", bp_strerror(rc));
		kill(child, SIGKILL);
		return 1;
	}
	f.workers = c.workers;
	f.peer = bp_rdma_peer_add(f.r, &f.desc);
	f.r->mr_local = true; /* as a provider with FI_MR_LOCAL */
	test_a(&f);
	test_b_d(&f);
	test_c(&f);
	bp_rdma_destroy(f.r);
	free(src);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	bpt_shm_cleanup(child);
	st_watchdog_off();
	return st_result(name);
}
