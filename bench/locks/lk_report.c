/* SPDX-License-Identifier: MIT */
/*
 * lk_report.c - what `bpbench locks` reports (lk_experiment.h): medians
 * over runs, each variant's best B, the tables, the headline, the CSV and
 * the JSON of --out (the showcase's report reads its keys).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "locks/lk_experiment.h"

/* ---- medians and bests -------------------------------------------------- */

static double *lk_cell(const struct lk_results *r, int run, int v, int t, int b)
{
	return &r->mps[lk_index(r, run, v, t, b)];
}

/* The runs of one point in one of the per-run arrays, into x. */
static void lk_runs_of(const struct lk_results *r, const double *a, int v,
		       int t, int b, double *x)
{
	for (int run = 0; run < r->runs; run++)
		x[run] = a[lk_index(r, run, v, t, b)];
}

/* Median over runs of one of the per-run arrays. */
static double lk_median_of(const struct lk_results *r, const double *a, int v,
			   int t, int b)
{
	double x[LK_MAX_RUNS];

	lk_runs_of(r, a, v, t, b, x);
	return bench_median(x, r->runs);
}

double lk_median(const struct lk_results *r, int v, int t, int b, double *min,
		 double *max)
{
	double x[LK_MAX_RUNS];

	lk_runs_of(r, r->mps, v, t, b, x);
	return bench_median_range(x, r->runs, min, max);
}

/*
 * One definition everywhere (tables, headline, JSON, the showcase's report):
 * the median of a point over the ceiling on as many CPUs, itself the median
 * of every ceiling run beside a point with that many (lk_settle_ceilings).
 * A ratio per run against the one 15 ms ceiling run beside it was tried:
 * too noisy, it ranked variants against their own throughput.
 */
double lk_pct_ceiling(const struct lk_opts *o, const struct lk_results *r,
		      int v, int t, int b)
{
	if (v < 0 || b < 0)
		return NAN;
	return 100 * lk_median(r, v, t, b, NULL, NULL) /
	       lk_ceiling(o, o->threads[t]);
}

double lk_best(const struct lk_opts *o, const struct lk_results *r, int v,
	       int t, int *best_b)
{
	double best = NAN;

	*best_b = -1;
	for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
		double m = lk_median(r, v, t, b, NULL, NULL);

		if (!isnan(m) && (isnan(best) || m > best)) {
			best = m;
			*best_b = b;
		}
	}
	return best;
}

static int lk_find_var(const struct lk_opts *o, const struct lk_variant *v)
{
	for (int i = 0; i < o->nvars; i++)
		if (o->vars[i] == v)
			return i;
	return -1;
}

/*
 * One thread count's headline: the best batchpipe variant against mutex and
 * against plain-lockfree (the same design written by hand for this job), and
 * batchpipe-pipeline against batchpipe-ring (what the pipeline costs over
 * the ring it is built on). Each variant at its best B; NaN (B index -1)
 * where it did not run.
 */
struct lk_headline {
	int best_v, best_b; /* -1: no batchpipe variant ran */
	double best, mutex, pipeline, plain, ring;
	int pipeline_b, plain_b, ring_b;
};

/* v's best median at thread index t and its B index, or NaN and -1 */
static double lk_best_of(const struct lk_opts *o, const struct lk_results *r,
			 int v, int t, int *b)
{
	*b = -1;
	return v >= 0 ? lk_best(o, r, v, t, b) : NAN;
}

/* a / b, NaN unless both are measured and b > 0 */
static double lk_ratio(double a, double b)
{
	return isnan(a) || !(b > 0) ? NAN : a / b;
}

static void lk_headline(const struct lk_opts *o, const struct lk_results *r,
			int t, struct lk_headline *h)
{
	int mv = lk_find_var(o, &lk_mutex),
	    pv = lk_find_var(o, &lk_batchpipe_pipeline), b;

	h->best_v = h->best_b = -1;
	h->best = NAN;
	for (int v = 0; v < o->nvars; v++) {
		double m;

		if (!(o->vars[v]->flags & LK_BATCHPIPE))
			continue;
		m = lk_best(o, r, v, t, &b);
		if (!isnan(m) && (isnan(h->best) || m > h->best)) {
			h->best = m;
			h->best_v = v;
			h->best_b = b;
		}
	}
	h->mutex = lk_best_of(o, r, mv, t, &b);
	h->pipeline = lk_best_of(o, r, pv, t, &h->pipeline_b);
	h->plain = lk_best_of(o, r, lk_find_var(o, &lk_plain_lockfree), t,
			      &h->plain_b);
	h->ring = lk_best_of(o, r, lk_find_var(o, &lk_batchpipe_ring), t,
			     &h->ring_b);
}

static void lk_print_headlines(FILE *f, const struct lk_opts *o,
			       const struct lk_results *r)
{
	for (int t = 0; t < o->nthreads; t++) {
		struct lk_headline h;
		double ceil = lk_ceiling(o, o->threads[t]);
		const char *pn = lk_batchpipe_pipeline.name;

		lk_headline(o, r, t, &h);
		if (h.best_v < 0)
			continue;
		fprintf(f, "%u threads, ", o->threads[t]);
		if (o->work_ns)
			fprintf(f, "%u ns jobs", o->work_ns);
		else
			fprintf(f, "trivial");
		fprintf(f, ": best batchpipe variant = %s (B=%u) %.2f M/s",
			o->vars[h.best_v]->name,
			lk_B(o, o->vars[h.best_v], h.best_b), h.best);
		if (!isnan(h.mutex) && h.mutex > 0)
			fprintf(f, " = %.0fx mutex", h.best / h.mutex);
		if (!isnan(lk_ratio(h.best, h.plain)))
			fprintf(f, " = %.2fx %s (B=%u %.2f M/s)",
				h.best / h.plain, lk_plain_lockfree.name,
				o->batches[h.plain_b], h.plain);
		if (!isnan(ceil))
			fprintf(f, " = %.0f %% of the ceiling (%.2f M/s)",
				lk_pct_ceiling(o, r, h.best_v, t, h.best_b),
				ceil);
		fprintf(f, " [run got %.2f CPUs",
			lk_median_of(r, r->cpus, h.best_v, t, h.best_b));
		if (o->work_ns)
			fprintf(f, ", %.0f %% of them in jobs",
				lk_median_of(r, r->jobpct, h.best_v, t,
					     h.best_b));
		fprintf(f, "]");
		if (!isnan(h.pipeline)) {
			fprintf(f, " (%s: B=%u %.2f M/s", pn,
				o->batches[h.pipeline_b], h.pipeline);
			if (!isnan(h.mutex) && h.mutex > 0)
				fprintf(f, " = %.0fx mutex",
					h.pipeline / h.mutex);
			if (!isnan(ceil))
				fprintf(f, " = %.0f %% of the ceiling",
					100 * h.pipeline / ceil);
			if (!isnan(lk_ratio(h.pipeline, h.ring)))
				fprintf(f, " = %.2fx %s (B=%u)",
					h.pipeline / h.ring,
					lk_batchpipe_ring.name,
					o->batches[h.ring_b]);
			fprintf(f, ")");
		}
		fprintf(f, "\n");
	}
}

/*
 * The targets of the locks experiment, judged on this run at 16 and 32
 * threads (the thread counts it names; n/a where the run had neither):
 * trivial jobs, 16 threads: the best batchpipe variant >= 0.9 of
 * plain-lockfree, batchpipe-pipeline >= 0.6 of batchpipe-ring; jobs with
 * work: the best batchpipe variant >= 90 % of the compute ceiling.
 */
static void lk_print_targets(FILE *f, const struct lk_opts *o,
			     const struct lk_results *r)
{
	bool any = false;

	fprintf(f, "\nHEADLINE (targets; best B of each variant, medians)\n");
	for (int t = 0; t < o->nthreads; t++) {
		unsigned n = o->threads[t];
		struct lk_headline h;

		if (n != 16 && n != 32)
			continue;
		lk_headline(o, r, t, &h);
		if (h.best_v < 0)
			continue;
		if (o->work_ns) {
			double pct = lk_pct_ceiling(o, r, h.best_v, t,
						    h.best_b);

			any = true;
			if (isnan(pct))
				fprintf(f, "  %u threads: best batchpipe >= "
					   "90 %% of the ceiling: n/a\n", n);
			else
				fprintf(f,
					"  %u threads: best batchpipe >= 90 %% "
					"of the ceiling: %s (%s %.1f %%)\n",
					n, pct >= 90 ? "met" : "MISSED",
					o->vars[h.best_v]->name, pct);
			continue;
		}
		if (n != 16)
			continue;
		any = true;
		if (isnan(lk_ratio(h.best, h.plain)))
			fprintf(f, "  16 threads: best batchpipe >= 0.9 of %s: "
				   "n/a\n", lk_plain_lockfree.name);
		else
			fprintf(f,
				"  16 threads: best batchpipe >= 0.9 of %s: %s "
				"(%s %.3f)\n",
				lk_plain_lockfree.name,
				h.best / h.plain >= 0.9 ? "met" : "MISSED",
				o->vars[h.best_v]->name, h.best / h.plain);
		if (isnan(lk_ratio(h.pipeline, h.ring)))
			fprintf(f, "  16 threads: %s >= 0.6 of %s: n/a\n",
				lk_batchpipe_pipeline.name,
				lk_batchpipe_ring.name);
		else
			fprintf(f, "  16 threads: %s >= 0.6 of %s: %s (%.3f)\n",
				lk_batchpipe_pipeline.name,
				lk_batchpipe_ring.name,
				h.pipeline / h.ring >= 0.6 ? "met" : "MISSED",
				h.pipeline / h.ring);
	}
	if (!any)
		fprintf(f, "  n/a: the targets need a batchpipe variant at 16 "
			   "(and, with --work-ns, 32) threads, which this run did "
			   "not measure\n");
}

static int lk_name_width(const struct lk_opts *o)
{
	int w = 7;

	for (int v = 0; v < o->nvars; v++)
		if ((int)strlen(o->vars[v]->name) > w)
			w = (int)strlen(o->vars[v]->name);
	return w;
}

/* A number with prec decimals and a '%' after it, or "-" for NaN. */
static void lk_table_pct(struct bench_table *t, double v, int prec)
{
	if (isnan(v))
		bench_table_str(t, "-");
	else
		bench_table_fmt(t, "%.*f%%", prec, v);
}

/* What the numbers are: printed above the tables. */
static void lk_print_legend(FILE *f, const struct lk_opts *o)
{
	char cpus[256];

	bench_cpus_format(o->a.cpus, o->a.ncpus, cpus, sizeof(cpus));
	fprintf(f,
		"bpbench locks: %u runs x %u ms per point, CPUs %s (%d "
		"usable), seed %" PRIu64 ", pool %s\n",
		o->a.runs, o->a.ms, cpus, o->a.ncpus, o->a.seed,
		o->pool ? "fixed" : "max(4096, 8 x threads x B)");
	if (o->work_ns)
		fprintf(f,
			"jobs: --work-ns %u -> %" PRIu64
			" LCG steps, measured %.2f ns (thread CPU time) per "
			"job on one thread;\n"
			"(jobs back to back: the CPU overlaps consecutive "
			"jobs' arithmetic, as in every variant's batches)\n"
			"compute ceiling = min(threads, %d CPUs) pinned "
			"threads doing only jobs, no hand-offs,\nbeside every "
			"run, median: %.2f M results/s on %u CPUs; %% ceil = "
			"a median / the ceiling\n",
			o->work_ns, o->iters, o->work_ns_measured, o->a.ncpus,
			lk_ceiling(o, lk_ceiling_top(o)), lk_ceiling_top(o));
	else
		fprintf(f,
			"jobs: trivial (one multiply, measured %.2f ns per job "
			"on one thread): hand-offs are everything\n",
			o->work_ns_measured);
	fprintf(f,
		"median M results/s at each variant's best B; x mutex = over "
		"mutex at the same threads%s\n",
		o->work_ns
			? "; % ceil = of the compute ceiling at those threads"
			: "");
	fprintf(f,
		"CPUs = CPU time the process got in the window / the window "
		"(on a shared machine\nless than the usable CPUs)%s\n",
		o->work_ns
			? "; job % = results x a job's CPU time in the "
			  "ceiling runs / that CPU\ntime: the share of the "
			  "CPU the run got that went into the jobs themselves"
			: "");
	fprintf(f, "(mutex does not batch: it runs at B = 1 only)\n\n");
}

/* Every variant at its best B, per thread count. */
static void lk_print_best(FILE *f, const struct lk_opts *o,
			  const struct lk_results *r)
{
	int mv = lk_find_var(o, &lk_mutex);
	struct bench_table t;

	bench_table_init(&t, f);
	bench_table_col(&t, "threads", 7, BENCH_RIGHT);
	bench_table_col(&t, "variant", lk_name_width(o), BENCH_LEFT);
	bench_table_col(&t, "best B", 6, BENCH_RIGHT);
	bench_table_col(&t, "M/s", 10, BENCH_RIGHT);
	bench_table_col(&t, "x mutex", 8, BENCH_RIGHT);
	if (o->work_ns)
		bench_table_col(&t, "% ceil", 6, BENCH_RIGHT);
	bench_table_col(&t, "CPUs", 5, BENCH_RIGHT);
	if (o->work_ns)
		bench_table_col(&t, "job %", 6, BENCH_RIGHT);
	bench_table_head(&t);
	for (int th = 0; th < o->nthreads; th++) {
		int b;
		double mutex = mv >= 0 ? lk_best(o, r, mv, th, &b) : NAN;

		for (int v = 0; v < o->nvars; v++) {
			double m = lk_best(o, r, v, th, &b);

			if (v == 0)
				bench_table_fmt(&t, "%u", o->threads[th]);
			else
				bench_table_str(&t, "");
			bench_table_str(&t, o->vars[v]->name);
			if (b >= 0)
				bench_table_fmt(&t, "%u",
						lk_B(o, o->vars[v], b));
			else
				bench_table_str(&t, "-");
			bench_table_num(&t, m, 3);
			bench_table_num(&t, mutex > 0 ? m / mutex : NAN, 1);
			if (o->work_ns)
				lk_table_pct(&t, lk_pct_ceiling(o, r, v, th, b),
					     1);
			bench_table_num(
				&t,
				b >= 0 ? lk_median_of(r, r->cpus, v, th, b)
				       : NAN,
				2);
			if (o->work_ns)
				lk_table_pct(&t,
					     b >= 0 ? lk_median_of(r, r->jobpct,
								   v, th, b)
						    : NAN,
					     1);
		}
	}
}

/* Every (variant, B): the median at each thread count. */
static void lk_print_all(FILE *f, const struct lk_opts *o,
			 const struct lk_results *r)
{
	static char heads[LK_MAX_TLIST][16];
	struct bench_table t;

	fprintf(f, "\nevery (variant, B): median M results/s by worker "
		   "threads (every run: --csv)\n");
	bench_table_init(&t, f);
	bench_table_col(&t, "variant", lk_name_width(o), BENCH_LEFT);
	bench_table_col(&t, "B", 4, BENCH_RIGHT);
	for (int th = 0; th < o->nthreads; th++) {
		snprintf(heads[th], sizeof(heads[th]), "%u", o->threads[th]);
		bench_table_col(&t, heads[th], 8, BENCH_RIGHT);
	}
	bench_table_head(&t);
	for (int v = 0; v < o->nvars; v++)
		for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
			bench_table_str(&t, o->vars[v]->name);
			bench_table_fmt(&t, "%u", lk_B(o, o->vars[v], b));
			for (int th = 0; th < o->nthreads; th++)
				bench_table_num(
					&t, lk_median(r, v, th, b, NULL, NULL),
					3);
		}
}

void lk_print_table(FILE *f, const void *report)
{
	const struct lk_report *rep = report;

	lk_print_legend(f, rep->o);
	lk_print_best(f, rep->o, rep->r);
	lk_print_all(f, rep->o, rep->r);
	fprintf(f, "\n");
	lk_print_headlines(f, rep->o, rep->r);
	lk_print_targets(f, rep->o, rep->r);
}

void lk_print_csv(FILE *f, const void *report)
{
	const struct lk_report *rep = report;
	const struct lk_opts *o = rep->o;
	const struct lk_results *r = rep->r;

	fprintf(f, "variant,threads,B,run,Mitems_per_s\n");
	for (int v = 0; v < o->nvars; v++)
		for (int t = 0; t < o->nthreads; t++)
			for (int b = 0; b < lk_nb(o, o->vars[v]); b++)
				for (int run = 0; run < r->runs; run++) {
					double x = *lk_cell(r, run, v, t, b);

					if (!isnan(x))
						fprintf(f, "%s,%u,%u,%d,%.4f\n",
							o->vars[v]->name,
							o->threads[t],
							lk_B(o, o->vars[v], b),
							run, x);
				}
}

/*
 * A JSON number, or null for NaN / infinity. Ten significant digits, not
 * four decimals: a run that delivered little (a 5 ms window on a loaded
 * machine) has rates near 0, whose ratios a reader must be able to
 * recompute.
 */
static void lk_json_num(FILE *f, double x)
{
	if (isfinite(x))
		fprintf(f, "%.10g", x);
	else
		fprintf(f, "null");
}

/* ,"key":B of a batched variant's B index, or null for -1 */
static void lk_json_b(FILE *f, const struct lk_opts *o, const char *key, int b)
{
	if (b >= 0)
		fprintf(f, ",\"%s\":%u", key, o->batches[b]);
	else
		fprintf(f, ",\"%s\":null", key);
}

static void lk_write_json(FILE *f, const struct lk_opts *o,
			  const struct lk_results *r)
{
	fprintf(f,
		"{\"benchmark\":\"locks\",\"work_ns\":%u,\"work_iters\":"
		"%" PRIu64 ",\"work_ns_measured\":",
		o->work_ns, o->iters);
	lk_json_num(f, o->work_ns_measured);
	fprintf(f, ",\"usable_cpus\":%d,\"ceiling_mps\":", o->a.ncpus);
	lk_json_num(f, lk_ceiling(o, lk_ceiling_top(o)));
	fprintf(f, ",\"ceiling_cpus\":%u", lk_ceiling_top(o));
	fprintf(f, ",\"runs\":%u,\"ms\":%u,\"seed\":%" PRIu64 ",\"threads\":[",
		o->a.runs, o->a.ms, o->a.seed);
	for (int t = 0; t < o->nthreads; t++)
		fprintf(f, "%s%u", t ? "," : "", o->threads[t]);
	fprintf(f, "],\"batches\":[");
	for (int b = 0; b < o->nbatches; b++)
		fprintf(f, "%s%u", b ? "," : "", o->batches[b]);
	fprintf(f, "],\"variants\":[");
	for (int v = 0; v < o->nvars; v++)
		fprintf(f, "%s\"%s\"", v ? "," : "", o->vars[v]->name);
	fprintf(f, "],\n\"headline\":[");
	for (int t = 0; t < o->nthreads; t++) {
		struct lk_headline h;

		lk_headline(o, r, t, &h);
		fprintf(f, "%s\n {\"threads\":%u,\"best_batchpipe\":",
			t ? "," : "", o->threads[t]);
		if (h.best_v >= 0)
			fprintf(f, "\"%s\",\"best_B\":%u",
				o->vars[h.best_v]->name,
				lk_B(o, o->vars[h.best_v], h.best_b));
		else
			fprintf(f, "null,\"best_B\":null");
		fprintf(f, ",\"best_mps\":");
		lk_json_num(f, h.best);
		fprintf(f, ",\"mutex_mps\":");
		lk_json_num(f, h.mutex);
		fprintf(f, ",\"ratio\":");
		lk_json_num(f, h.mutex > 0 ? h.best / h.mutex : NAN);
		fprintf(f, ",\"pipeline_mps\":");
		lk_json_num(f, h.pipeline);
		lk_json_b(f, o, "pipeline_B", h.pipeline_b);
		fprintf(f, ",\"ceiling_mps\":");
		lk_json_num(f, lk_ceiling(o, o->threads[t]));
		fprintf(f, ",\"best_pct_of_ceiling\":");
		lk_json_num(f, h.best_v >= 0 ? lk_pct_ceiling(o, r, h.best_v, t,
							      h.best_b)
					     : NAN);
		fprintf(f, ",\"pipeline_pct_of_ceiling\":");
		lk_json_num(f, 100 * h.pipeline / lk_ceiling(o, o->threads[t]));
		fprintf(f, ",\"best_cpus\":");
		lk_json_num(f, h.best_v >= 0
				       ? lk_median_of(r, r->cpus, h.best_v, t,
						      h.best_b)
				       : NAN);
		fprintf(f, ",\"best_job_cpu_pct\":");
		lk_json_num(f, h.best_v >= 0 && o->work_ns
				       ? lk_median_of(r, r->jobpct, h.best_v, t,
						      h.best_b)
				       : NAN);
		fprintf(f, ",\"plain_mps\":");
		lk_json_num(f, h.plain);
		lk_json_b(f, o, "plain_B", h.plain_b);
		fprintf(f, ",\"best_over_plain\":");
		lk_json_num(f, lk_ratio(h.best, h.plain));
		fprintf(f, ",\"ring_mps\":");
		lk_json_num(f, h.ring);
		lk_json_b(f, o, "ring_B", h.ring_b);
		fprintf(f, ",\"pipeline_over_ring\":");
		lk_json_num(f, lk_ratio(h.pipeline, h.ring));
		fprintf(f, "}");
	}
	fprintf(f, "],\n\"medians\":[");
	for (int v = 0, sep = 0; v < o->nvars; v++)
		for (int t = 0; t < o->nthreads; t++)
			for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
				fprintf(f,
					"%s\n "
					"{\"variant\":\"%s\",\"threads\":%u,"
					"\"B\":%u,\"mps\":",
					sep++ ? "," : "", o->vars[v]->name,
					o->threads[t], lk_B(o, o->vars[v], b));
				lk_json_num(f,
					    lk_median(r, v, t, b, NULL, NULL));
				fprintf(f, "}");
			}
	fprintf(f, "]}\n");
}

/* ---- --out -------------------------------------------------------------- */

FILE *lk_open(const struct lk_opts *o, const char *suffix, char *path,
	      size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s%s", o->a.out, o->a.name, suffix);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "bpbench locks: cannot write %s: %s\n", path,
			strerror(errno));
	return f;
}

int lk_write_out(const struct lk_report *rep)
{
	char path[4096];
	FILE *f = lk_open(rep->o, ".json", path, sizeof(path));

	if (!f)
		return -1;
	lk_write_json(f, rep->o, rep->r);
	if (fclose(f))
		return -1;
	return lk_plots(rep->o, rep->r);
}
