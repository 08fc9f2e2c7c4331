/* SPDX-License-Identifier: MIT */
/*
 * hist.h - a log-linear histogram of latencies in nanoseconds: 32 buckets
 * per power of two (exact below 32 ns), so a percentile read from it is
 * within about 3 % of the sample's value, whatever the range. Fixed size,
 * no allocation while recording: a thread keeps its own and the owner
 * merges them after the run.
 */
#ifndef BPBENCH_HIST_H
#define BPBENCH_HIST_H

#include <stdint.h>

#define BENCH_HIST_SUB	   32 /* buckets per power of two */
#define BENCH_HIST_BUCKETS (BENCH_HIST_SUB * 60)

struct bench_hist {
	uint64_t n;
	uint64_t count[BENCH_HIST_BUCKETS];
};

static inline unsigned bench_hist_bucket(uint64_t v)
{
	unsigned msb, shift;

	if (v < BENCH_HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - 5; /* keeps the top 6 bits: 32..63 */
	return BENCH_HIST_SUB * (shift + 1) +
	       (unsigned)((v >> shift) - BENCH_HIST_SUB);
}

/* Negative values (a clock that went backwards) count as 0. */
static inline void bench_hist_add(struct bench_hist *h, int64_t ns)
{
	h->count[bench_hist_bucket(ns > 0 ? (uint64_t)ns : 0)]++;
	h->n++;
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *h);

/*
 * The q-quantile (0 < q <= 1), nearest rank: the middle of the bucket
 * that holds it. NaN when the histogram is empty.
 */
double bench_hist_pct(const struct bench_hist *h, double q);

#endif /* BPBENCH_HIST_H */
