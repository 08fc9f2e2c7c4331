/* SPDX-License-Identifier: MIT */
/*
 * test_node_progress PROVIDER - a node's EVENT progress thread gives its
 * core back when a stream of writes ends.
 *
 * While writes stream in, the rail polls on after each wake-up for a
 * window that grows (up to 2 ms) as long as wake-ups come soon
 * (src/rdma/node.c). The test streams 64 KiB writes from a pipeline into
 * a node in this process (tcp;ofi_rxm, EVENT), then measures the rail
 * thread's own CPU clock over an idle half second: it must have blocked,
 * so it gets less than 5 % of the time (a window that never shrinks back,
 * or a wait that stops blocking, spins at about 100 %). Each stream is
 * checked: every job ok, delivered once, and the rail thread busy while
 * it lasted (it polled on through the stream).
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
	for (unsigned i = 0; i < JOBS; i++)
		ST_CHECK(jobs[i].status == BP_JOB_OK &&
				 atomic_load(&jobs[i].deliveries) == 1,
			 "round %u: job %u status %d, delivered %u", round, i,
			 jobs[i].status, atomic_load(&jobs[i].deliveries));
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "tcp;ofi_rxm";
	struct bp_rdma_config c;
	struct st_fix f;
	struct st_job *jobs;
	uint8_t *src;
	int64_t busy0, busy1, idle0, idle1, t0, t1;

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
	if (st_stage_open(&f, &c, NULL) || st_start(&f))
		return 1;
	jobs = calloc(JOBS, sizeof(*jobs));
	src = st_alloc((size_t)JOBS * JOB_BYTES);
	if (!jobs || !src)
		return 1;
	memset(src, 0x5a, (size_t)JOBS * JOB_BYTES);
	/* acquire: pairs with hook_start's release (rail_clock) */
	ST_CHECK(atomic_load_explicit(&rail_clock_set, memory_order_acquire),
		 "no thread_start call for rail 0 before create returned");
	if (bp_test_failures())
		return st_result("test_node_progress");

	t0 = bpt_now_ns();
	busy0 = rail_cpu_ns();
	for (unsigned r = 0; r < ROUNDS; r++)
		stream(&f, jobs, src, r);
	busy1 = rail_cpu_ns();
	t1 = bpt_now_ns();
	printf("stream: %u x %u KiB in %.1f ms, rail CPU %.1f ms\n",
	       ROUNDS * JOBS, JOB_BYTES / 1024, (double)(t1 - t0) / 1e6,
	       (double)(busy1 - busy0) / 1e6);
	/* the rail worked through the stream (at least 5 % of it) */
	ST_CHECK(busy1 - busy0 >= (t1 - t0) / 20,
		 "rail CPU %.1f ms over a %.1f ms stream",
		 (double)(busy1 - busy0) / 1e6, (double)(t1 - t0) / 1e6);

	bpt_sleep_ms(50); /* longer than the longest window, 2 ms */
	t0 = bpt_now_ns();
	idle0 = rail_cpu_ns();
	bpt_sleep_ms(500);
	idle1 = rail_cpu_ns();
	t1 = bpt_now_ns();
	printf("idle: rail CPU %.2f ms over %.1f ms\n",
	       (double)(idle1 - idle0) / 1e6, (double)(t1 - t0) / 1e6);
	ST_CHECK(idle0 >= 0 && idle1 >= 0, "the rail's CPU clock");
	ST_CHECK(idle1 - idle0 < (t1 - t0) / 20,
		 "idle rail took %.1f ms of CPU in %.1f ms (>= 5 %%): it did "
		 "not block after the stream",
		 (double)(idle1 - idle0) / 1e6, (double)(t1 - t0) / 1e6);

	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");
	st_close(&f);
	free(jobs);
	free(src);
	st_watchdog_off();
	return st_result("test_node_progress");
}
