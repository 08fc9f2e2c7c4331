/* SPDX-License-Identifier: MIT */
/*
 * lk_plot.c - the plots of `bpbench locks --out` (lk_experiment.h): the
 * data file gnuplot reads, NAME-threads.png (one panel per variant, one
 * line per B, the figure of the write-up) and NAME-best.png (each variant
 * at its best B).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "locks/lk_experiment.h"
#include "lab/plot.h"

/*
 * The data file gnuplot reads: one block (index) per (variant, B) that has a
 * positive median, then one per variant for its best B. Columns: threads,
 * median, min, max (best blocks: threads, median, B). blocks[] records each
 * block's index, -1 for none.
 */
static int lk_write_dat(FILE *f, const struct lk_opts *o,
			const struct lk_results *r,
			int (*vb_index)[LK_MAX_BATCHES], int *best_index,
			double *ymin, double *ymax)
{
	int idx = 0;

	*ymin = INFINITY;
	*ymax = 0;
	for (int v = 0; v < o->nvars; v++)
		for (int b = 0; b < LK_MAX_BATCHES; b++) {
			int any = 0;

			vb_index[v][b] = -1;
			if (b >= lk_nb(o, o->vars[v]))
				continue;
			for (int t = 0; t < o->nthreads; t++) {
				double lo, hi,
					m = lk_median(r, v, t, b, &lo, &hi);

				if (!(m > 0))
					continue;
				if (!any)
					fprintf(f, "# %s B=%u\n",
						o->vars[v]->name,
						lk_B(o, o->vars[v], b));
				any = 1;
				fprintf(f, "%u %.6g %.6g %.6g\n", o->threads[t],
					m, lo, hi);
				if (m < *ymin)
					*ymin = m;
				if (m > *ymax)
					*ymax = m;
			}
			if (any) {
				fprintf(f, "\n\n");
				vb_index[v][b] = idx++;
			}
		}
	for (int v = 0; v < o->nvars; v++) {
		int any = 0;

		for (int t = 0; t < o->nthreads; t++) {
			int b;
			double m = lk_best(o, r, v, t, &b);

			if (!(m > 0))
				continue;
			if (!any)
				fprintf(f, "# %s best B\n", o->vars[v]->name);
			any = 1;
			fprintf(f, "%u %.6g %u\n", o->threads[t], m,
				lk_B(o, o->vars[v], b));
		}
		if (any)
			fprintf(f, "\n\n");
		best_index[v] = any ? idx++ : -1;
	}
	return idx;
}

/* gnuplot script text built piece by piece. */
struct lk_script {
	char buf[65536];
	size_t len;
};

static void lk_sprintf(struct lk_script *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void lk_sprintf(struct lk_script *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s->buf + s->len, sizeof(s->buf) - s->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(s->buf) - s->len)
		bench_die("bpbench locks: plot script too long\n");
	s->len += (size_t)n;
}

/* one colour per variant in the best-B plot (gnuplot's default repeats) */
#define LK_NCOLOURS 11
static const char *const lk_colours[LK_NCOLOURS] = {
	"#000000", "#7f7f7f", "#d62728", "#ff7f0e", "#bcbd22", "#8c564b",
	"#9467bd", "#17becf", "#1f77b4", "#e377c2", "#2ca02c",
};

static void lk_axes(struct lk_script *s, const struct lk_opts *o, double ymin,
		    double ymax)
{
	unsigned tmin = o->threads[0], tmax = o->threads[0];

	for (int t = 1; t < o->nthreads; t++) {
		if (o->threads[t] < tmin)
			tmin = o->threads[t];
		if (o->threads[t] > tmax)
			tmax = o->threads[t];
	}
	lk_sprintf(s,
		   "set termoption noenhanced\nset samples 400\n"
		   "set logscale xy\nset grid\nset key bottom left font ',8'\n"
		   "set xrange [%g:%g]\nset yrange [%g:%g]\n"
		   "set xlabel 'worker threads'\n"
		   "set ylabel 'M results/s'\nset xtics (",
		   tmin / 1.4, tmax * 1.4, ymin / 2, ymax * 2);
	for (int t = 0; t < o->nthreads; t++)
		lk_sprintf(s, "%s'%u' %u", t ? ", " : "", o->threads[t],
			   o->threads[t]);
	lk_sprintf(s, ")\n");
	if (o->work_ns)
		/* per CPU: the ceiling on the most CPUs measured */
		lk_sprintf(s, "cap(x) = (x < %u ? x : %u) * %g\n",
			   lk_ceiling_cpus(o, (unsigned)o->a.ncpus),
			   lk_ceiling_cpus(o, (unsigned)o->a.ncpus),
			   lk_ceiling(o, lk_ceiling_top(o)) /
				   lk_ceiling_top(o));
}

int lk_plots(const struct lk_opts *o, const struct lk_results *r)
{
	static int vb_index[LK_MAX_VARIANTS][LK_MAX_BATCHES];
	int best_index[LK_MAX_VARIANTS];
	char dat[4096], png_t[4096], png_b[4096];
	const char *outs[2] = {NULL, NULL};
	double ymin, ymax;
	struct lk_script *s = bench_zalloc(sizeof(*s));
	int cols = o->nvars < 3 ? o->nvars : 3;
	int rows = (o->nvars + cols - 1) / cols, rc = 0;
	FILE *f = lk_open(o, "-plot.dat", dat, sizeof(dat));

	if (!f) {
		free(s);
		return -1;
	}
	lk_write_dat(f, o, r, vb_index, best_index, &ymin, &ymax);
	fclose(f);
	if (o->work_ns) {
		double c = lk_ceiling(o, lk_ceiling_top(o));

		if (c > ymax)
			ymax = c;
	}
	if (!(ymax > 0)) {
		fprintf(stderr, "bpbench locks: nothing positive to plot\n");
		free(s);
		return -1;
	}
	if (!isfinite(ymin))
		ymin = ymax;
	snprintf(png_t, sizeof(png_t), "%s/%s-threads.png", o->a.out,
		 o->a.name);
	snprintf(png_b, sizeof(png_b), "%s/%s-best.png", o->a.out, o->a.name);

	/* the write-up's figure: one panel per variant, one line per B */
	lk_sprintf(s, BENCH_PLOT_TERM, 420 * cols, 330 * rows);
	lk_sprintf(s, "set output '%s'\n", png_t);
	lk_axes(s, o, ymin, ymax);
	lk_sprintf(s,
		   "set multiplot layout %d,%d title 'throughput vs worker "
		   "threads, one line per batch size B (%s)'\n",
		   rows, cols,
		   o->work_ns ? "jobs of --work-ns, dashed: compute ceiling"
			      : "trivial jobs");
	for (int v = 0; v < o->nvars; v++) {
		const char *sep = "";

		lk_sprintf(s, "set title '%s'\nplot ", o->vars[v]->name);
		for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
			if (vb_index[v][b] < 0)
				continue;
			lk_sprintf(s,
				   "%s'%s' index %d using 1:2 with linespoints "
				   "lw 2 title 'B=%u'",
				   sep, dat, vb_index[v][b],
				   lk_B(o, o->vars[v], b));
			sep = ", ";
		}
		if (o->work_ns) {
			lk_sprintf(s,
				   "%scap(x) with lines dt 2 lc 'black' "
				   "title 'ceiling'",
				   sep);
			sep = ", ";
		}
		if (!*sep) /* nothing measured above zero: an empty panel */
			lk_sprintf(s, "%g with lines notitle", ymin / 4);
		lk_sprintf(s, "\n");
	}
	lk_sprintf(s, "unset multiplot\n");
	outs[0] = png_t;
	if (bench_gnuplot("bpbench locks: threads plot", outs, "%s", s->buf))
		rc = -1;

	/* each variant at its best B */
	s->len = 0;
	lk_sprintf(s, BENCH_PLOT_TERM, 900, 620);
	lk_sprintf(s, "set output '%s'\n", png_b);
	lk_axes(s, o, ymin, ymax);
	lk_sprintf(s,
		   "set key outside right\n"
		   "set title 'each variant at its best B (medians)'\nplot ");
	{
		const char *sep = "";

		for (int v = 0; v < o->nvars; v++) {
			if (best_index[v] < 0)
				continue;
			lk_sprintf(s,
				   "%s'%s' index %d using 1:2 with linespoints "
				   "lw 2 lc rgb '%s' pt %d title '%s'",
				   sep, dat, best_index[v],
				   lk_colours[v % LK_NCOLOURS], v + 1,
				   o->vars[v]->name);
			sep = ", ";
		}
		if (o->work_ns) {
			lk_sprintf(s,
				   "%scap(x) with lines dt 2 lc 'black' "
				   "title 'compute ceiling'",
				   sep);
			sep = ", ";
		}
		if (!*sep)
			lk_sprintf(s, "%g with lines notitle", ymin / 4);
	}
	lk_sprintf(s, "\n");
	outs[0] = png_b;
	if (bench_gnuplot("bpbench locks: best-B plot", outs, "%s", s->buf))
		rc = -1;
	free(s);
	return rc;
}
