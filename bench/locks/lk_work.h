/* SPDX-License-Identifier: MIT */
/*
 * lk_work.h - what a worker computes for one job, and how the experiment
 * recomputes it afterwards to check the consumer's checksum.
 *
 * A job is its sequence number s (the value moved is s << 1); its result is
 * lk_result(s, iters) with bit 0 cleared. iters == 0 is the trivial job: one
 * multiply, so that hand-offs are everything. Otherwise an LCG is stepped
 * `iters` times, each step depending on the last (no closed form the
 * compiler could find, no vectorising), calibrated by the experiment to take
 * --work-ns.
 */
#ifndef BPBENCH_LK_WORK_H
#define BPBENCH_LK_WORK_H

#include <stdint.h>

#define LK_LCG_A UINT64_C(6364136223846793005)
#define LK_LCG_C UINT64_C(1442695040888963407)

static inline void *lk_job(uint64_t seq)
{
	return (void *)(uintptr_t)(seq << 1);
}

static inline uint64_t lk_job_seq(const void *job)
{
	return (uint64_t)(uintptr_t)job >> 1;
}

/* A bijection of s, so that a result computed from the wrong job differs. */
static inline uint64_t lk_mix(uint64_t s)
{
	return (s ^ (s >> 29)) * UINT64_C(0x9e3779b97f4a7c15);
}

static inline uint64_t lk_result(uint64_t seq, uint64_t iters)
{
	uint64_t x = lk_mix(seq);

	for (uint64_t i = 0; i < iters; i++) {
		x = x * LK_LCG_A + LK_LCG_C;
		/* opaque to the compiler: the work is really done */
		__asm__("" : "+r"(x));
	}
	return x & ~UINT64_C(1);
}

static inline void *lk_result_value(uint64_t seq, uint64_t iters)
{
	return (void *)(uintptr_t)lk_result(seq, iters);
}

/* lk_result in O(log iters) (LCG jump-ahead): for the check after a run. */
static inline uint64_t lk_result_fast(uint64_t seq, uint64_t iters)
{
	uint64_t acc_mult = 1, acc_plus = 0, mult = LK_LCG_A, plus = LK_LCG_C;

	while (iters) {
		if (iters & 1) {
			acc_mult *= mult;
			acc_plus = acc_plus * mult + plus;
		}
		plus = (mult + 1) * plus;
		mult *= mult;
		iters >>= 1;
	}
	return (acc_mult * lk_mix(seq) + acc_plus) & ~UINT64_C(1);
}

#endif /* BPBENCH_LK_WORK_H */
