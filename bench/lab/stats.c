/* SPDX-License-Identifier: MIT */
/*
 * stats.c - medians, minima and maxima over runs; NaN marks a run that was not
 * measured.
 */
#include "lab/stats.h"

#include <math.h>
#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	int m = 0;

	/* NaN marks "not measured": compact them away before sorting */
	for (int i = 0; i < n; i++)
		if (!isnan(v[i]))
			v[m++] = v[i];
	if (m == 0)
		return NAN;
	qsort(v, (size_t)m, sizeof(*v), bench_cmp_double);
	return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

double bench_min(const double *v, int n)
{
	double r = NAN;

	for (int i = 0; i < n; i++)
		if (!isnan(v[i]) && (isnan(r) || v[i] < r))
			r = v[i];
	return r;
}

double bench_max(const double *v, int n)
{
	double r = NAN;

	for (int i = 0; i < n; i++)
		if (!isnan(v[i]) && (isnan(r) || v[i] > r))
			r = v[i];
	return r;
}

double bench_median_range(double *v, int n, double *min, double *max)
{
	if (min)
		*min = bench_min(v, n);
	if (max)
		*max = bench_max(v, n);
	return bench_median(v, n);
}

static int bench_cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

void bench_sort_i64(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), bench_cmp_i64);
}

double bench_pct_i64(const int64_t *v, size_t n, double q)
{
	size_t i;

	if (n == 0)
		return NAN;
	i = (size_t)ceil(q * (double)n);
	i = i ? i - 1 : 0;
	return (double)v[i < n ? i : n - 1];
}
