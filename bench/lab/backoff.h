/* SPDX-License-Identifier: MIT */
/*
 * backoff.h - the retry policy every queue gets when it is full or empty:
 * a few rounds of pauses, then sched_yield() on each further failure. The
 * yield is not optional on this machine: with more threads than cores, a
 * thread that only spins keeps the one it waits for off the CPU and
 * everything collapses. Identical for all competitors, so it cannot favour
 * one of them.
 */
#ifndef BPBENCH_BACKOFF_H
#define BPBENCH_BACKOFF_H

#include <sched.h>

/* One CPU pause hint. */
static inline void bench_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#define BENCH_SPIN_ROUNDS      8
#define BENCH_PAUSES_PER_ROUND 16

struct bench_backoff {
	unsigned failures;
};

static inline void bench_backoff_reset(struct bench_backoff *b)
{
	b->failures = 0;
}

static inline void bench_backoff_wait(struct bench_backoff *b)
{
	if (b->failures < BENCH_SPIN_ROUNDS) {
		b->failures++;
		for (int i = 0; i < BENCH_PAUSES_PER_ROUND; i++)
			bench_cpu_pause();
	} else {
		sched_yield();
	}
}

#endif /* BPBENCH_BACKOFF_H */
