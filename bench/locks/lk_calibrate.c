/* SPDX-License-Identifier: MIT */
/*
 * lk_calibrate.c - `bpbench locks`' work per job: how many LCG steps make
 * --work-ns, and what one job then costs on one thread (lk_experiment.h;
 * the compute ceiling is measured in lk_ceiling.c).
 */
#include <math.h>

#include "locks/lk_experiment.h"
#include "locks/lk_work.h"

/*
 * Nanoseconds per job of lk_result(., iters), one thread: median of 5. In
 * the thread's CPU time, not wall time: on a shared machine the wall clock
 * also counts the time other processes had the CPU.
 */
static double lk_time_work(uint64_t iters)
{
	double t[5];
	uint64_t sink = 0;

	for (int r = 0; r < 5; r++) {
		uint64_t n = 0;
		int64_t t0 = bench_thread_cpu_ns(), t1;

		do {
			for (int i = 0; i < 4096; i++)
				sink += lk_result(n + (uint64_t)i, iters);
			n += 4096;
			t1 = bench_thread_cpu_ns();
		} while (t1 - t0 < 20000000);
		t[r] = (double)(t1 - t0) / (double)n;
	}
	/* keep the loop: its result is used */
	__asm__ volatile("" : : "r"(sink));
	return bench_median(t, 5);
}

/*
 * Pick iters so that a job takes about work_ns, then measure what it takes.
 * The first guess comes from the cost of one step in a long chain; short
 * chains of consecutive jobs overlap in the CPU, so the guess is corrected
 * from the measured time per job a few times.
 */
void lk_calibrate(struct lk_opts *o)
{
	double t = lk_time_work(0);

	o->iters = 0;
	if (o->work_ns > 0) {
		double per_iter = (lk_time_work(1000) - t) / 1000;
		double want = (double)o->work_ns - t;

		o->iters = per_iter > 0 && want > 0
				   ? (uint64_t)llround(want / per_iter)
				   : 1;
		for (int round = 0; round < 6; round++) {
			double next;

			if (o->iters == 0)
				o->iters = 1;
			t = lk_time_work(o->iters);
			if (fabs(t - o->work_ns) < 0.02 * o->work_ns)
				break;
			next = (double)o->iters * o->work_ns / t;
			o->iters = (uint64_t)llround(next);
		}
	}
	o->work_ns_measured = lk_time_work(o->iters);
}

unsigned lk_ceiling_cpus(const struct lk_opts *o, unsigned threads)
{
	unsigned u =
		threads < (unsigned)o->a.ncpus ? threads : (unsigned)o->a.ncpus;

	return u < LK_MAX_THREADS ? u : LK_MAX_THREADS;
}

unsigned lk_ceiling_top(const struct lk_opts *o)
{
	for (unsigned u = LK_MAX_THREADS; u > 0; u--)
		if (!isnan(o->ceil_mps[u]))
			return u;
	return 0;
}

double lk_ceiling(const struct lk_opts *o, unsigned threads)
{
	if (o->work_ns == 0)
		return NAN;
	return o->ceil_mps[lk_ceiling_cpus(o, threads)];
}
