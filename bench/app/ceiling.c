/* SPDX-License-Identifier: MIT */
/*
 * ceiling.c - variant (c) of `bpbench app`: the compute ceiling. The same
 * jobs with the same work, and no hand-off at all: u = min(workers, usable
 * CPUs) threads, pinned one per CPU, each takes an equal share of every
 * producer's jobs and does all of a job's work itself: fills its payload
 * (the producer's part), computes its CRC32C (the worker's) and checks it
 * against the expected value (the sink's). Nothing moves between threads,
 * so no variant can beat it on those CPUs; it runs beside every run of the
 * others, because this machine's speed drifts within seconds.
 *
 * Verified like the others: every job's CRC, and the count of jobs done.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "app/app.h"

struct app_ceil_thread {
	struct app_run *run;
	uint64_t first, end; /* the share: jobs [first, end) of all */
	uint64_t done;
	struct app_job job; /* the one job it reuses */
	pthread_t thread;
} __attribute__((aligned(BENCH_CACHELINE)));

static void *app_ceil_main(void *arg)
{
	struct app_ceil_thread *t = arg;
	const struct app_opts *o = t->run->o;

	app_run_wait_start(t->run);
	for (uint64_t i = t->first; i < t->end; i++) {
		uint32_t p = (uint32_t)(i / o->jobs);
		uint64_t k = i % o->jobs;

		app_fill(&t->job, p, k);
		app_compute(&t->job);
		if (t->job.crc != o->expected[i])
			bench_die("bpbench app: VERIFY FAILED: ceiling: "
				  "producer %" PRIu32 " job %" PRIu64
				  ": crc %08" PRIx32 ", expected %08" PRIx32
				  "\n",
				  p, k, t->job.crc, o->expected[i]);
		t->done++;
	}
	return NULL;
}

void app_run_ceiling(struct app_run *r)
{
	const struct app_opts *o = r->o;
	unsigned u = o->ceiling_threads;
	uint64_t total = (uint64_t)o->producers * o->jobs, done = 0;
	struct app_ceil_thread *th = bench_zalloc(sizeof(*th) * u);

	pthread_barrier_init(&r->start, NULL, u + 1);
	for (unsigned i = 0; i < u; i++) {
		th[i].run = r;
		th[i].first = total * i / u;
		th[i].end = total * (i + 1) / u;
		bench_spawn_pinned(&th[i].thread, app_ceil_main, &th[i],
				   o->a.cpus[i], "bpbench app");
	}
	app_run_begin(r);
	for (unsigned i = 0; i < u; i++) {
		pthread_join(th[i].thread, NULL);
		done += th[i].done;
	}
	app_run_end(r);
	pthread_barrier_destroy(&r->start);
	if (done != total)
		bench_die("bpbench app: VERIFY FAILED: ceiling: %" PRIu64
			  " of %" PRIu64 " jobs done\n",
			  done, total);
	free(th);
}
