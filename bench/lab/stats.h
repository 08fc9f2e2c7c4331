/* SPDX-License-Identifier: MIT */
/*
 * stats.h - statistics over runs. NaN marks "not measured" and is skipped,
 * so a point that did not run in some runs still has a median.
 */
#ifndef BPBENCH_STATS_H
#define BPBENCH_STATS_H

#include <stdint.h>

/* bench_median() sorts v in place. All return NaN when nothing is left. */
double bench_median(double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);

/*
 * The q-quantile (0 <= q <= 1) of n samples, nearest rank; sorts v in
 * place. NaN when n is 0.
 */
double bench_quantile_i64(int64_t *v, unsigned n, double q);

#endif /* BPBENCH_STATS_H */
