/* SPDX-License-Identifier: MIT */
/*
 * clock.h - time for the benchmarks: one clock (CLOCK_MONOTONIC, the same
 * for every CPU, so a stamp taken on one CPU and read on another is a
 * latency) and a sleep that does not shrink when a signal arrives.
 */
#ifndef BPBENCH_CLOCK_H
#define BPBENCH_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);

/* Sleep ns nanoseconds, restarting after signals. */
void bench_sleep_ns(int64_t ns);

#endif /* BPBENCH_CLOCK_H */
