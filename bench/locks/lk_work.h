/* SPDX-License-Identifier: MIT */
/*
 * lk_work.h - what a worker computes for one job, and how the experiment
 * recomputes it afterwards to check the consumer's checksum.
 *
 * A job is its sequence number s (the value moved is s << 1); its result is
 * lk_result(s, iters) with bit 0 cleared. iters == 0 is the trivial job: one
 * multiply, so that hand-offs are everything. Otherwise the lab's LCG
 * (lcg.h) is stepped `iters` times, calibrated by the experiment to take
 * --work-ns.
 */
#ifndef BPBENCH_LK_WORK_H
#define BPBENCH_LK_WORK_H

#include <stdint.h>

#include "lab/lcg.h"

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
	return bench_lcg_spin(lk_mix(seq), iters) & ~UINT64_C(1);
}

static inline void *lk_result_value(uint64_t seq, uint64_t iters)
{
	return (void *)(uintptr_t)lk_result(seq, iters);
}

/* lk_result in O(log iters) (LCG jump-ahead): for the check after a run. */
static inline uint64_t lk_result_fast(uint64_t seq, uint64_t iters)
{
	return bench_lcg_jump(lk_mix(seq), iters) & ~UINT64_C(1);
}

#endif /* BPBENCH_LK_WORK_H */
