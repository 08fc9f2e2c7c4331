/* SPDX-License-Identifier: MIT */
/*
 * rand.h - a small seeded generator, for the shuffles that interleave
 * competitors: the same --seed gives the same order, so a run can be
 * repeated exactly.
 */
#ifndef BPBENCH_RAND_H
#define BPBENCH_RAND_H

#include <stdint.h>

uint64_t bench_rand(uint64_t *state);

/* Fisher-Yates shuffle of v[0..n-1]. */
void bench_shuffle(int *v, int n, uint64_t *state);

/* v[i] = i, then shuffled: the order in which one run visits n points. */
void bench_order(int *v, int n, uint64_t *state);

#endif /* BPBENCH_RAND_H */
