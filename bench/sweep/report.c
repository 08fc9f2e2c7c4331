/* SPDX-License-Identifier: MIT */
/*
 * sweep/report.c - what `bpbench sweep` prints: the legend and table, the
 * CSV (one row per child run), and with --out the plot and its data.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "lab/plot.h"
#include "sweep/sweep.h"

/* "Mjobs_per_s" -> "Mjobs/s", "p99_us" -> "us": the unit a column holds. */
static void sw_unit(const char *col, char *buf, size_t len)
{
	size_t n = strlen(col);
	static const char *const suffix[] = {"_ns", "_us", "_ms", "_s"};

	if (!n) {
		buf[0] = '\0';
		return;
	}
	if (n > 6 && !strcmp(col + n - 6, "_per_s")) {
		snprintf(buf, len, "%.*s/s", (int)(n - 6), col);
		return;
	}
	if (!strcmp(col, "GBps")) {
		snprintf(buf, len, "GB/s");
		return;
	}
	if (!strcmp(col, "Mops")) {
		snprintf(buf, len, "Mops/s");
		return;
	}
	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		size_t m = strlen(suffix[i]);

		if (n > m && !strcmp(col + n - m, suffix[i])) {
			snprintf(buf, len, "%s", suffix[i] + 1);
			return;
		}
	}
	snprintf(buf, len, "%s", col);
}

static double sw_med(double *a, const struct sw_results *r, int p2, int b,
		     double *lo, double *hi)
{
	double v[SW_MAX_RUNS];

	for (int run = 0; run < r->runs; run++)
		v[run] = *sw_cell(a, r, run, p2, b);
	return bench_median_range(v, r->runs, lo, hi);
}

/* What was run and what the columns are: printed above the table. */
static void sw_print_legend(FILE *f, const struct sw_opts *o,
			    const struct sw_results *r)
{
	char *args[SW_MAX_ARGS + 8], bval[16];
	int has_p99 = r->cols.p99[0] != '\0';
	int preset_note = o->preset && !o->p99_user && o->preset->p99_note;

	sw_args(o, 0, 0, args, bval, sizeof(bval));
	fprintf(f,
		"%s %s: %d run(s) per point, interleaved (seed %" PRIu64
		"), medians over runs\n",
		BENCH_CMD, o->sub, r->runs, o->a.seed);
	fprintf(f, "child, per point: ");
	for (int i = 1; args[i]; i++)
		fprintf(f, "%s%s", i > 1 ? " " : "",
			args[i] == bval			? "<B>"
			: o->np2 && args[i] == o->p2[0] ? "<param2>"
							: args[i]);
	fprintf(f, "\nthroughput: column %s", r->cols.tput);
	if (o->rows_val)
		fprintf(f, " of the rows with %s=%s", o->rows_col, o->rows_val);
	fprintf(f, "; several rows: their median\n");
	if (has_p99) {
		fprintf(f, "p99: column %s; several rows: the largest\n",
			r->cols.p99);
		if (preset_note && o->preset->p99[0])
			fprintf(f, "%s\n", o->preset->p99_note);
	} else if (preset_note && !o->preset->p99[0]) {
		fprintf(f, "%s\n", o->preset->p99_note);
	} else {
		fprintf(f,
			"p99: no column %s%s%s in the child's CSV: latency "
			"missing\n",
			o->p99[0] ? o->p99[0] : "-", o->p99[1] ? " or " : "",
			o->p99[1] ? o->p99[1] : "");
	}
	fprintf(f, "\n");
}

void sw_print_table(FILE *f, const void *report)
{
	const struct sw_report *rep = report;
	const struct sw_opts *o = rep->o;
	const struct sw_results *r = rep->r;
	char tu[SW_NAME_LEN], pu[SW_NAME_LEN], ph[SW_NAME_LEN + 8];
	struct bench_table t;

	sw_print_legend(f, o, r);
	sw_unit(r->cols.tput, tu, sizeof(tu));
	sw_unit(r->cols.p99, pu, sizeof(pu));
	snprintf(ph, sizeof(ph), "p99 %s", pu);
	bench_table_init(&t, f);
	if (o->np2)
		bench_table_col(&t, o->p2name, 11, BENCH_RIGHT);
	bench_table_col(&t, o->preset ? "B" : o->param, 7, BENCH_RIGHT);
	bench_table_col(&t, tu, 11, BENCH_RIGHT);
	bench_table_col(&t, "min-max", 16, BENCH_RIGHT);
	bench_table_col(&t, ph, 11, BENCH_RIGHT);
	bench_table_col(&t, "tput/B0", 9, BENCH_RIGHT);
	bench_table_col(&t, "p99/B0", 9, BENCH_RIGHT);
	bench_table_head(&t);
	for (int p2 = 0; p2 < r->np; p2++) {
		double t0 = sw_med(r->tput, r, p2, 0, NULL, NULL);
		double p0 = sw_med(r->p99, r, p2, 0, NULL, NULL);

		for (int b = 0; b < r->nb; b++) {
			double lo, hi, tp = sw_med(r->tput, r, p2, b, &lo, &hi);
			double p = sw_med(r->p99, r, p2, b, NULL, NULL);

			if (o->np2)
				bench_table_str(&t, o->p2[p2]);
			bench_table_fmt(&t, "%u", o->b[b]);
			bench_table_num(&t, tp, 3);
			bench_table_fmt(&t, "%.3g-%.3g", lo, hi);
			bench_table_num(&t, p, 3);
			bench_table_num(&t, t0 > 0 ? tp / t0 : NAN, 2);
			bench_table_num(&t, p0 > 0 ? p / p0 : NAN, 2);
		}
	}
	fprintf(f,
		"\nB0: the smallest %s (%u), same %s; min-max: throughput "
		"over runs\n",
		o->preset ? "B" : o->param, o->b[0],
		o->np2 ? o->p2name : "child options");
}

void sw_print_csv(FILE *f, const void *report)
{
	const struct sw_report *rep = report;
	const struct sw_opts *o = rep->o;
	const struct sw_results *r = rep->r;
	char tu[SW_NAME_LEN], pu[SW_NAME_LEN];

	sw_unit(r->cols.tput, tu, sizeof(tu));
	sw_unit(r->cols.p99, pu, sizeof(pu));
	fprintf(f, "subcommand,param,value,param2,value2,run,throughput,"
		   "throughput_unit,p99,p99_unit\n");
	for (int p2 = 0; p2 < r->np; p2++)
		for (int b = 0; b < r->nb; b++)
			for (int run = 0; run < r->runs; run++) {
				double t = *sw_cell(r->tput, r, run, p2, b);
				double p = *sw_cell(r->p99, r, run, p2, b);

				fprintf(f, "%s,%s,%u,%s,%s,%d,%.6g,%s,", o->sub,
					o->param, o->b[b],
					o->np2 ? o->p2name : "",
					o->np2 ? o->p2[p2] : "", run, t, tu);
				if (isnan(p))
					fprintf(f, ",\n");
				else
					fprintf(f, "%.6g,%s\n", p, pu);
			}
}

/*
 * The PNG: throughput and p99 against B, one line per second-parameter
 * value, from a whitespace-separated data file (one gnuplot index per
 * value) because gnuplot's CSV reading trips over empty fields.
 */
static int sw_plot(const struct sw_opts *o, const struct sw_results *r)
{
	char dat[4200], png[4200], tu[SW_NAME_LEN], pu[SW_NAME_LEN];
	char lines_t[4096], lines_p[4096];
	const char *outputs[] = {png, NULL};
	size_t lt = 0, lp = 0;
	int any_p99 = 0, pos_p99 = 1;
	FILE *f;

	snprintf(dat, sizeof(dat), "%s/%s-plot.dat", o->a.out, o->a.name);
	snprintf(png, sizeof(png), "%s/%s.png", o->a.out, o->a.name);
	sw_unit(r->cols.tput, tu, sizeof(tu));
	sw_unit(r->cols.p99, pu, sizeof(pu));
	f = fopen(dat, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", BENCH_CMD, dat,
			strerror(errno));
		return -1;
	}
	fprintf(f, "# %s tput_median p99_median (NaN: missing)\n",
		o->preset ? "B" : o->param);
	for (int p2 = 0; p2 < r->np; p2++) {
		fprintf(f, "%s# %s=%s\n", p2 ? "\n\n" : "",
			o->np2 ? o->p2name : "-", o->np2 ? o->p2[p2] : "-");
		for (int b = 0; b < r->nb; b++) {
			double t = sw_med(r->tput, r, p2, b, NULL, NULL);
			double p = sw_med(r->p99, r, p2, b, NULL, NULL);

			if (!isnan(p)) {
				any_p99 = 1;
				pos_p99 &= p > 0;
			}
			fprintf(f, "%u %.6g %.6g\n", o->b[b], t, p);
		}
	}
	if (fclose(f) != 0) {
		fprintf(stderr, "%s: cannot write %s\n", BENCH_CMD, dat);
		return -1;
	}
	lines_t[0] = lines_p[0] = '\0';
	for (int p2 = 0; p2 < r->np; p2++) {
		char title[128];

		if (o->np2)
			snprintf(title, sizeof(title), "title \"%s=%s\"",
				 o->p2name, o->p2[p2]);
		else
			snprintf(title, sizeof(title), "notitle");
		lt += (size_t)snprintf(lines_t + lt, sizeof(lines_t) - lt,
				       "%s'%s' index %d using 1:2 with "
				       "linespoints lw 2 %s",
				       p2 ? ", " : "", dat, p2, title);
		lp += (size_t)snprintf(lines_p + lp, sizeof(lines_p) - lp,
				       "%s'%s' index %d using 1:3 with "
				       "linespoints lw 2 %s",
				       p2 ? ", " : "", dat, p2, title);
		if (lt >= sizeof(lines_t) || lp >= sizeof(lines_p)) {
			fprintf(stderr, "%s: plot command too long\n",
				BENCH_CMD);
			return -1;
		}
	}
	if (any_p99)
		return bench_gnuplot(
			BENCH_CMD, outputs,
			BENCH_PLOT_TERM "set output '%s'\n"
					"set multiplot layout 1,2 title "
					"\"bpbench sweep %s (medians, %d "
					"run(s) per point)\"\n"
					"set grid\nset key top left\n"
					"set logscale x 2\n"
					"set xlabel '%s'\n"
					"set ylabel 'throughput, %s'\n"
					"set yrange [0:*]\n"
					"plot %s\n"
					"set yrange [*:*]\n%s"
					"set ylabel 'p99 latency, %s'\n"
					"plot %s\n"
					"unset multiplot\n",
			1200, 500, png, o->sub, r->runs,
			o->preset ? "B" : o->param, tu, lines_t,
			pos_p99 ? "set logscale y\n" : "", pu, lines_p);
	return bench_gnuplot(BENCH_CMD, outputs,
			     BENCH_PLOT_TERM
			     "set output '%s'\n"
			     "set multiplot layout 1,2 title \"bpbench "
			     "sweep %s (medians, %d run(s) per point)\"\n"
			     "set grid\nset key top left\n"
			     "set logscale x 2\n"
			     "set xlabel '%s'\n"
			     "set ylabel 'throughput, %s'\n"
			     "set yrange [0:*]\n"
			     "plot %s\n"
			     "unset grid\nunset border\nunset tics\n"
			     "unset xlabel\nunset ylabel\nunset logscale\n"
			     "set label 1 'p99 latency: not measured by "
			     "this subcommand' at graph 0.5,0.5 center\n"
			     "plot [0:1][0:1] NaN notitle\n"
			     "unset multiplot\n",
			     1200, 500, png, o->sub, r->runs,
			     o->preset ? "B" : o->param, tu, lines_t);
}

/* --out: the plot and its data next to NAME.csv; 0 or -1 (said why) */
int sw_write_out(const struct sw_opts *o, const struct sw_results *r)
{
	if (sw_plot(o, r))
		return -1;
	fprintf(stderr, "%s: wrote %s/%s.png, %s-plot.dat\n", BENCH_CMD,
		o->a.out, o->a.name, o->a.name);
	return 0;
}
