/* SPDX-License-Identifier: MIT */
/*
 * rand.c - a small seeded generator and the shuffle that interleaves
 * competitors.
 */
#include "lab/rand.h"

uint64_t bench_rand(uint64_t *state)
{
	/* splitmix64: good enough to shuffle, and reproducible from a seed */
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void bench_shuffle(int *v, int n, uint64_t *state)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(bench_rand(state) % (uint64_t)(i + 1));
		int t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
}

void bench_order(int *v, int n, uint64_t *state)
{
	for (int i = 0; i < n; i++)
		v[i] = i;
	bench_shuffle(v, n, state);
}
