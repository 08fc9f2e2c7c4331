/* SPDX-License-Identifier: MIT */
/*
 * test_node_progress PROVIDER - a node's EVENT progress thread gives its
 * core back when a stream of writes ends.
 *
 * While writes stream in, the rail polls on after each wake-up for a
 * window that grows (up to 2 ms) as long as wake-ups come soon, and is set
 * back by a long block (src/rdma/node.c, event_wait). The test streams
 * 64 KiB writes from a pipeline into a node in this process (tcp;ofi_rxm,
 * EVENT), then measures the rail thread's own CPU clock:
 *
 *   stream  every job ok and delivered once; the rail's clock moved (it
 *           is the thread that landed them)
 *   idle    half a second with nothing: under 5 % of it (a wait that
 *           stops blocking spins at about 100 %)
 *   sparse  one 4 KiB write every 10 ms for half a second, the pipeline's
 *           threads asleep between them: under 3 % (set back after each
 *           block, the window is 50 us, under 1 % here; a window that
 *           stays grown polls up to 2 ms after each: 7 % measured);
 *           under TSAN each write costs the rail about ten times as
 *           much, so there the limit is 20 %
 *
 * shm has no wait object for EVENT (bp_rdma_node_create refuses it,
 * test_stage_api): skipped there. Exits 0 pass, 77 skip, 1 fail.
 */
#include <time.h>

#include "st_common.h"

ST_DEFINE_GLOBALS;

#define JOB_BYTES (64u * 1024)
#define JOBS	  256u /* a 16 MiB target, written JOB_BYTES at a time */
#define ROUNDS	  8u

/* the rail thread's CPU clock, taken by its thread_start hook */
static clockid_t rail_clock;
static atomic_bool rail_clock_set;

static void hook_start(void *ctx, enum bp_thread_role role, unsigned index)
{
	(void)ctx;
	if (role != BP_THREAD_RDMA_PROGRESS || index != 0)
		return;
	if (pthread_getcpuclockid(pthread_self(), &rail_clock) == 0)
		/* release: main reads rail_clock after its acquire */
		atomic_store_explicit(&rail_clock_set, true,
				      memory_order_release);
}

static int64_t rail_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(rail_clock, &ts))
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int node_open_event(struct st_fix *f, const char *prov)
{
	struct bp_rdma_node_config nc;

	bp_rdma_node_config_init(&nc);
	nc.progress_wait = BP_RDMA_CQ_EVENT;
	nc.thread_start = hook_start;
	return st_node_open_config(f, prov, 1, (size_t)JOBS * JOB_BYTES, &nc);
}

/* One stream: every job written once, all back ok. */
static void stream(struct st_fix *f, struct st_job *jobs, uint8_t *src,
		   unsigned round)
{
	/* acquire: pairs with st_sink's release */
	unsigned long before =
		atomic_load_explicit(&f->delivered, memory_order_acquire);

	st_jobs_init(jobs, JOBS);
	for (unsigned i = 0; i < JOBS; i++)
		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)f->peer,
				src + (size_t)i * JOB_BYTES, JOB_BYTES,
				(uint64_t)i * JOB_BYTES);
	ST_CHECK(st_submit(f, jobs, JOBS) == JOBS, "round %u: submit", round);
	ST_CHECK(st_wait_delivered(f, before + JOBS, 30),
		 "round %u: not all delivered", round);
	for (unsigned i = 0; i < JOBS; i++) {
		/* relaxed: ordered by st_wait_delivered's acquire */
		unsigned d = atomic_load_explicit(&jobs[i].deliveries,
						  memory_order_relaxed);

		ST_CHECK(jobs[i].status == BP_JOB_OK && d == 1,
			 "round %u: job %u status %d, delivered %u", round, i,
			 jobs[i].status, d);
	}
}

/* One write of 4 KiB every 10 ms for about ms milliseconds. */
static void sparse(struct st_fix *f, struct st_job *job, uint8_t *src,
		   unsigned ms)
{
	for (unsigned k = 0; k < ms / 10; k++) {
		/* acquire: pairs with st_sink's release */
		unsigned long before = atomic_load_explicit(
			&f->delivered, memory_order_acquire);

		st_jobs_init(job, 1);
		bp_rdma_job_set(&job->rj, BP_RDMA_WRITE, (uint32_t)f->peer, src,
				4096, 0);
		ST_CHECK(st_submit(f, job, 1) == 1, "sparse write %u", k);
		ST_CHECK(st_wait_delivered(f, before + 1, 30) &&
				 job->status == BP_JOB_OK,
			 "sparse write %u: status %d", k, job->status);
		bpt_sleep_ms(10);
	}
}

/* The rail's CPU over one phase, checked against limit (a fraction). */
static void phase(const char *what, int64_t cpu0, int64_t cpu1, int64_t t0,
		  int64_t t1, double limit)
{
	double cpu_ms = (double)(cpu1 - cpu0) / 1e6;
	double wall_ms = (double)(t1 - t0) / 1e6;

	printf("%s: rail CPU %.2f ms over %.1f ms\n", what, cpu_ms, wall_ms);
	ST_CHECK(cpu0 >= 0 && cpu1 >= 0, "%s: the rail's CPU clock", what);
	if (limit > 0)
		ST_CHECK(cpu_ms < limit * wall_ms,
			 "%s: the rail took %.1f ms of CPU in %.1f ms (>= %.0f "
			 "%%): it did not block",
			 what, cpu_ms, wall_ms, limit * 100);
	else
		ST_CHECK(cpu1 > cpu0, "%s: the rail's clock did not move",
			 what);
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	struct bp_rdma_config c;
	struct bp_pipeline_config pc;
	struct st_fix f;
	struct st_job *jobs;
	uint8_t *src;
	int64_t cpu0, cpu1, t0;

	st_env();
	if (!strcmp(prov, "shm")) {
		printf("SKIP: shm has no wait object for EVENT progress\n");
		return ST_SKIP;
	}
	if (!st_provider_ok(prov))
		return ST_SKIP;
	st_watchdog(120, "test_node_progress %s", prov);
	if (node_open_event(&f, prov))
		return 1;
	st_rdma_config(&f, &c);
	/*
	 * The pipeline's threads sleep at once when idle, so that between
	 * the sparse writes nothing else wants the rail's CPU: its yields
	 * return at once, and only the window's own set-back ends it.
	 */
	st_pipeline_config(&f, &pc);
	pc.workers = c.workers;
	pc.worker_wait.strategy = BP_WAIT_SLEEP;
	pc.sink_wait.strategy = BP_WAIT_SLEEP;
	if (st_stage_open(&f, &c, &pc) || st_start(&f))
		return 1;
	jobs = calloc(JOBS, sizeof(*jobs));
	src = st_alloc((size_t)JOBS * JOB_BYTES);
	if (!jobs || !src)
		return 1;
	memset(src, 0x5a, (size_t)JOBS * JOB_BYTES);
	/* the hook runs on the rail thread, which may not have run yet */
	for (int64_t end = bpt_now_ns() + (BPT_TSAN ? 25 : 5) * 1000000000ll;
	     /* acquire: pairs with hook_start's release (rail_clock) */
	     !atomic_load_explicit(&rail_clock_set, memory_order_acquire) &&
	     bpt_now_ns() < end;)
		bpt_sleep_ms(1);
	ST_CHECK(atomic_load_explicit(&rail_clock_set, memory_order_acquire),
		 "no thread_start call for rail 0");
	if (bp_test_failures())
		return st_result("test_node_progress");

	t0 = bpt_now_ns();
	cpu0 = rail_cpu_ns();
	for (unsigned r = 0; r < ROUNDS; r++)
		stream(&f, jobs, src, r);
	cpu1 = rail_cpu_ns();
	phase("stream", cpu0, cpu1, t0, bpt_now_ns(), 0);

	bpt_sleep_ms(50); /* longer than the longest window, 2 ms */
	t0 = bpt_now_ns();
	cpu0 = rail_cpu_ns();
	bpt_sleep_ms(500);
	cpu1 = rail_cpu_ns();
	phase("idle", cpu0, cpu1, t0, bpt_now_ns(), 0.05);

	for (unsigned r = 0; r < 2; r++) /* grow the window again */
		stream(&f, jobs, src, ROUNDS + r);
	t0 = bpt_now_ns();
	cpu0 = rail_cpu_ns();
	sparse(&f, jobs, src, 500);
	cpu1 = rail_cpu_ns();
	phase("sparse", cpu0, cpu1, t0, bpt_now_ns(), BPT_TSAN ? 0.20 : 0.03);

	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");
	st_close(&f);
	free(jobs);
	free(src);
	st_watchdog_off();
	return st_result("test_node_progress");
}
