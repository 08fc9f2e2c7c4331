/* SPDX-License-Identifier: MIT */
/*
 * clock.h - time for the benchmarks: one clock (CLOCK_MONOTONIC, the same
 * for every CPU, so a stamp taken on one CPU and read on another is a
 * latency), the CPU time of the calling thread or of the whole process, and
 * a sleep that does not shrink when a signal arrives.
 */
#ifndef BPBENCH_CLOCK_H
#define BPBENCH_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);

/* CLOCK_THREAD_CPUTIME_ID in nanoseconds: the CPU time the calling thread
 * has used (a cost, where wall time would count waits and preemption). */
int64_t bench_thread_cpu_ns(void);

/* CLOCK_PROCESS_CPUTIME_ID in nanoseconds: the CPU time of every thread of
 * this process (spinning while idle shows here, sleeping does not). */
int64_t bench_process_cpu_ns(void);

/* Sleep ns nanoseconds, restarting after signals. */
void bench_sleep_ns(int64_t ns);

#endif /* BPBENCH_CLOCK_H */
