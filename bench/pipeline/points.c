/* SPDX-License-Identifier: MIT */
/*
 * points.c - the points of `bpbench pipeline` and medians over its runs.
 */
#include "pipeline/points.h"

#include <math.h>

int pb_find(const struct pb_results *r, enum pb_kind kind, unsigned W,
	    unsigned B, int wait, bool ordered)
{
	for (int i = 0; i < r->npoints; i++) {
		const struct pb_point *p = &r->pt[i];

		if (p->kind == kind && p->B == B &&
		    (kind == PB_RING || kind == PB_ALONE ||
		     (p->W == W && p->wait == wait && p->ordered == ordered)))
			return i;
	}
	return -1;
}

void pb_add(struct pb_results *r, enum pb_kind kind, unsigned W, unsigned B,
	    int wait, bool ordered)
{
	if (pb_find(r, kind, W, B, wait, ordered) >= 0)
		return;
	if (r->npoints >= PB_MAX_POINTS)
		bench_die("bpbench pipeline: too many points\n");
	r->pt[r->npoints++] = (struct pb_point){kind, W, B, wait, ordered};
}

void pb_build_points(const struct pb_opts *o, struct pb_results *r)
{
	for (int w = 0; w < o->nworkers; w++)
		for (int b = 0; b < o->nbatches; b++)
			for (int i = 0; i < o->nwaits; i++)
				pb_add(r, PB_PIPE, o->workers[w], o->batches[b],
				       o->waits[i], o->sweep_ordered);
	if (o->sweep_only)
		return;
	for (int b = 0; b < o->nbatches; b++) {
		pb_add(r, PB_PIPE, PB_HEAD_W, o->batches[b], PB_HEAD_WAIT,
		       true);
		pb_add(r, PB_RING, 1, o->batches[b], 0, false);
		pb_add(r, PB_ALONE, 1, o->batches[b], 0, false);
	}
	/* the headline points, whatever the lists say */
	pb_add(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT, false);
	pb_add(r, PB_PIPE, PB_HEAD_W, PB_HEAD_B, PB_HEAD_WAIT, true);
	pb_add(r, PB_PIPE, PB_HEAD_W_MANY, PB_HEAD_B, PB_HEAD_WAIT, false);
	pb_add(r, PB_RING, 1, PB_HEAD_B, 0, false);
	pb_add(r, PB_ALONE, 1, PB_HEAD_B, 0, false);
	if (o->work_ns)
		for (int w = 0; w < o->nworkers; w++)
			pb_add(r, PB_WORK, o->workers[w], PB_HEAD_B,
			       PB_HEAD_WAIT, false);
	/* the plain twin of every unordered trivial point, headline too;
	 * the lanes twin of the small-batch ones (not with --lanes, which
	 * gives every point lanes, nor with one producer) */
	for (int i = 0, n = r->npoints; o->plain && i < n; i++) {
		const struct pb_point p = r->pt[i];

		if (p.kind != PB_PIPE || p.ordered)
			continue;
		pb_add(r, PB_PLAIN, p.W, p.B, p.wait, false);
		if (!o->lanes && o->producers > 1 && p.wait == PB_HEAD_WAIT &&
		    p.B <= PB_LANES_MAX_B)
			pb_add(r, PB_LANES, p.W, p.B, p.wait, false);
	}
}

unsigned pb_lanes_of(unsigned producers)
{
	unsigned n = 1;

	while (n < producers && n < BP_MAX_LANES)
		n *= 2;
	return n;
}

double *pb_cell(const struct pb_results *r, double *a, int run, int i)
{
	return &a[run * r->npoints + i];
}

double *pb_wcell(double *a, int run, int wait)
{
	return &a[run * PB_NWAITS + wait];
}

/* Median over runs of a[run][i] (stride: points, or waits). */
double pb_med(const double *a, int runs, int stride, int i, double *lo,
	      double *hi)
{
	double v[PB_MAX_RUNS];

	for (int run = 0; run < runs; run++)
		v[run] = a[run * stride + i];
	if (lo)
		*lo = bench_min(v, runs);
	if (hi)
		*hi = bench_max(v, runs);
	return bench_median(v, runs);
}

double pb_med_pt(const struct pb_results *r, const double *a, int i, double *lo,
		 double *hi)
{
	if (i < 0) {
		if (lo)
			*lo = NAN;
		if (hi)
			*hi = NAN;
		return NAN;
	}
	return pb_med(a, r->runs, r->npoints, i, lo, hi);
}

/* Median over runs of a[run][i] / a[run][j]. */
double pb_med_ratio_of(const struct pb_results *r, double *a, int i, int j)
{
	double v[PB_MAX_RUNS];

	if (i < 0 || j < 0)
		return NAN;
	for (int run = 0; run < r->runs; run++) {
		double den = *pb_cell(r, a, run, j);

		v[run] = den > 0 ? *pb_cell(r, a, run, i) / den : NAN;
	}
	return bench_median(v, r->runs);
}

double pb_med_ratio(const struct pb_results *r, int i, int j)
{
	return pb_med_ratio_of(r, r->mj, i, j);
}

double *pb_nan_array(size_t n)
{
	double *a = bench_zalloc(sizeof(double) * n);

	for (size_t i = 0; i < n; i++)
		a[i] = NAN;
	return a;
}
