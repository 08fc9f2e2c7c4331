/* SPDX-License-Identifier: MIT */
/*
 * lk_ceiling.c - `bpbench locks`' compute ceiling, measured: u pinned
 * threads (u = min(workers, usable CPUs)) do nothing but jobs, each its own
 * sequence numbers 0, 1, ..., for the same window as a run, with no hand-off
 * at all. That is what the hardware gives for this work when every CPU
 * computes, so no variant can beat it; "cores / time of one job on one
 * thread" is the same number on a quiet machine, but on this noisy one a
 * single timing drifts with the host (45 to 58 ns for the same 60 steps was
 * seen), so a ceiling run goes beside every run (locks/locks.c) and a % of
 * the ceiling is the median of each run over the ceiling run beside it.
 *
 * Verified like a run: every thread's sum of results must equal the sum of
 * lk_result over the sequence numbers it counted.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "locks/lk_experiment.h"
#include "locks/lk_work.h"

/* jobs between two looks at the stop flag */
#define LK_CEIL_CHUNK 256

struct lk_ceil_thread {
	pthread_t thread;
	pthread_barrier_t *start;
	const atomic_int *stop;
	uint64_t iters;
	uint64_t n, sum;
} __attribute__((aligned(BENCH_CACHELINE)));

static void *lk_ceil_main(void *arg)
{
	struct lk_ceil_thread *c = arg;
	uint64_t n = 0, sum = 0;

	pthread_barrier_wait(c->start);
	/* relaxed: a time signal; the join publishes n and sum */
	while (!atomic_load_explicit(c->stop, memory_order_relaxed)) {
		for (uint64_t i = 0; i < LK_CEIL_CHUNK; i++)
			sum += lk_result(n + i, c->iters);
		n += LK_CEIL_CHUNK;
	}
	c->n = n;
	c->sum = sum;
	return NULL;
}

double lk_ceiling_run(const struct lk_opts *o, unsigned u)
{
	struct lk_ceil_thread *th = bench_zalloc(sizeof(*th) * u);
	pthread_barrier_t start;
	atomic_int stop;
	uint64_t total = 0;
	int64_t t0, t1;

	atomic_init(&stop, 0);
	pthread_barrier_init(&start, NULL, u + 1);
	for (unsigned i = 0; i < u; i++) {
		th[i].start = &start;
		th[i].stop = &stop;
		th[i].iters = o->iters;
		bench_spawn_pinned(&th[i].thread, lk_ceil_main, &th[i],
				   o->a.cpus[i], "bpbench locks");
	}
	pthread_barrier_wait(&start);
	t0 = bench_now_ns();
	bench_sleep_ns((int64_t)o->a.ms * 1000000);
	/* relaxed: a time signal, as in the runs */
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	t1 = bench_now_ns();
	for (unsigned i = 0; i < u; i++) {
		pthread_join(th[i].thread, NULL);
		if (th[i].sum != lk_expected_sum(th[i].n, o->iters))
			bench_die("bpbench locks: VERIFY FAILED: compute "
				  "ceiling, thread %u: %" PRIu64
				  " results whose sum is wrong\n",
				  i, th[i].n);
		total += th[i].n;
	}
	pthread_barrier_destroy(&start);
	free(th);
	/* the jobs done in the window (a thread's last chunk may end a little
	 * after it: at most u x LK_CEIL_CHUNK jobs, well under 0.1 %) */
	return (double)total * 1e3 / (double)(t1 - t0);
}
