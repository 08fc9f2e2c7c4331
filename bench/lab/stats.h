/* SPDX-License-Identifier: MIT */
/*
 * stats.h - statistics over runs. NaN marks "not measured" and is skipped,
 * so a point that did not run in some runs still has a median.
 */
#ifndef BPBENCH_STATS_H
#define BPBENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

/* bench_median() sorts v in place. All return NaN when nothing is left. */
double bench_median(double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);
/* The median of v (sorted in place), and its min and max where not NULL. */
double bench_median_range(double *v, int n, double *min, double *max);

/* Latency samples: sort them, then read nearest-rank percentiles off. */
void bench_sort_i64(int64_t *v, size_t n);
/* The q-quantile (0 < q <= 1) of sorted v[0..n), nearest rank; NaN if n 0 */
double bench_pct_i64(const int64_t *v, size_t n, double q);

#endif /* BPBENCH_STATS_H */
