/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the benchmarks' clock (CLOCK_MONOTONIC), the thread and process
 * CPU clocks and a sleep that survives signals.
 */
#include "lab/clock.h"

#include <errno.h>
#include <time.h>

int64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bench_process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000,
			      .tv_nsec = ns % 1000000000};

	/* restart after signals: the run length must not shrink silently */
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
