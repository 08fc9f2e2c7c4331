/* SPDX-License-Identifier: MIT */
/*
 * lcg.h - the benchmarks' synthetic CPU work: a 64-bit LCG stepped `iters`
 * times, each step depending on the last (no closed form the compiler could
 * find, no vectorising), and its result computed in O(log iters) by jumping
 * ahead, for the checks after a run.
 */
#ifndef BPBENCH_LCG_H
#define BPBENCH_LCG_H

#include <stdint.h>

#define BENCH_LCG_A UINT64_C(6364136223846793005)
#define BENCH_LCG_C UINT64_C(1442695040888963407)

/* x after `iters` LCG steps, each really done. */
static inline uint64_t bench_lcg_spin(uint64_t x, uint64_t iters)
{
	for (uint64_t i = 0; i < iters; i++) {
		x = x * BENCH_LCG_A + BENCH_LCG_C;
		/* opaque to the compiler: no closed form, no skipped work */
		__asm__("" : "+r"(x));
	}
	return x;
}

/*
 * bench_lcg_spin(x, iters) in O(log iters): `iters` steps compose into one
 * affine map x -> acc_mult * x + acc_plus, built from the maps of 2^k steps
 * (squared each round) for the bits set in iters.
 */
static inline uint64_t bench_lcg_jump(uint64_t x, uint64_t iters)
{
	uint64_t acc_mult = 1, acc_plus = 0, mult = BENCH_LCG_A,
		 plus = BENCH_LCG_C;

	while (iters) {
		if (iters & 1) {
			acc_mult *= mult;
			acc_plus = acc_plus * mult + plus;
		}
		plus = (mult + 1) * plus;
		mult *= mult;
		iters >>= 1;
	}
	return acc_mult * x + acc_plus;
}

#endif /* BPBENCH_LCG_H */
