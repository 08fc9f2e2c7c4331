/* SPDX-License-Identifier: MIT */
/*
 * hist.c - merging log-linear latency histograms and reading percentiles.
 */
#include "lab/hist.h"

#include <math.h>

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *h)
{
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
		into->count[i] += h->count[i];
	into->n += h->n;
}

/* The smallest value of bucket i, and the bucket's width. */
static void bench_hist_range(unsigned i, double *lo, double *width)
{
	unsigned shift;

	if (i < BENCH_HIST_SUB) {
		*lo = i;
		*width = 1;
		return;
	}
	shift = i / BENCH_HIST_SUB - 1;
	*lo = ldexp(BENCH_HIST_SUB + i % BENCH_HIST_SUB, (int)shift);
	*width = ldexp(1, (int)shift);
}

double bench_hist_pct(const struct bench_hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (h->n == 0)
		return NAN;
	rank = (uint64_t)ceil(q * (double)h->n);
	if (rank == 0)
		rank = 1;
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank) {
			double lo, width;

			bench_hist_range(i, &lo, &width);
			/* exact buckets (width 1) hold one value */
			return width > 1 ? lo + width / 2 : lo;
		}
	}
	return NAN; /* not reached: the counts add up to n */
}
