/* SPDX-License-Identifier: MIT */
/*
 * locks.c - `bpbench locks`: mutex vs spinlock vs lock-free hand-offs, the
 * experiment of "Speeding up a multi-threaded program 150x in three simple
 * steps".
 *
 * N worker threads run `while (job = next_job()) emit(process(job))`; one
 * consumer thread receives the results. The variants (locks/lk_*.c) differ
 * only in how jobs and results move: a mutex, batches of results under the
 * mutex, spinlocks on the job source, lock-free queues at both ends, the
 * same lock-free design written by hand for this one job (an atomic counter
 * and a single-producer ring per worker), and batchpipe's own pipeline. One
 * run, its closed loop and its verification are in locks/lk_run.c; the work per
 * job in locks/lk_calibrate.c; the compute-ceiling run beside every point in
 * locks/lk_ceiling.c; what is printed and written in locks/lk_report.c and
 * locks/lk_plot.c.
 *
 * Throughput = results the consumer received in the window / the window.
 * Interleaving: for each run index, every (variant, threads, B) point once,
 * in a freshly shuffled order; tables and plots show medians.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "locks/lk_experiment.h"
#include "lab/plot.h"

_Static_assert(LK_MAX_BATCH == 4096, "--batches' help says 1..4096");

/* ---- the sweep ---------------------------------------------------------- */

static unsigned lk_pool_for(const struct lk_opts *o, unsigned threads,
			    unsigned B)
{
	unsigned auto_pool = 8 * threads * B;

	if (o->pool)
		return o->pool;
	return auto_pool > 4096 ? auto_pool : 4096;
}

/*
 * One point of one round. With --work-ns, a compute-ceiling run goes right
 * beside it (before it in even rounds, after it in odd ones): the host's
 * speed drifts within seconds, so a % of the ceiling is only meaningful
 * against a ceiling measured at the same moment.
 */
static void lk_run_point(const struct lk_opts *o, const struct lk_variant *var,
			 unsigned threads, unsigned B, struct lk_results *res,
			 int run, size_t cell)
{
	unsigned u = lk_ceiling_cpus(o, threads);
	struct lk_outcome out;

	if (o->work_ns && run % 2 == 0)
		res->ceil[cell] = lk_ceiling_run(o, u);
	lk_run_verified(o, var, threads, B, lk_pool_for(o, threads, B), &out);
	if (o->work_ns && run % 2 == 1)
		res->ceil[cell] = lk_ceiling_run(o, u);
	/* results per microsecond = millions per second */
	res->mps[cell] = (double)out.window_count * 1e3 / (double)out.window_ns;
	res->cpus[cell] = out.cpu_wall_ns > 0
				  ? (double)out.cpu_ns / (double)out.cpu_wall_ns
				  : NAN;
	/* the results of the window, each worth one job's measured time */
	res->jobpct[cell] = out.cpu_ns > 0 ? 100.0 * (double)out.window_count *
						     o->work_ns_measured /
						     (double)out.cpu_ns
					   : NAN;
}

static void lk_sweep(const struct lk_opts *o, struct lk_results *res)
{
	int npts = 0, *order;
	uint64_t rng = o->a.seed;

	for (int v = 0; v < o->nvars; v++)
		npts += o->nthreads * lk_nb(o, o->vars[v]);
	order = bench_zalloc(sizeof(int) * (size_t)npts *
			     4); /* + idx[3][npts] */
	for (int run = 0; run < (int)o->a.runs; run++) {
		int64_t t0 = bench_now_ns();
		int n = 0, *idx = order + npts;

		for (int v = 0; v < o->nvars; v++)
			for (int t = 0; t < o->nthreads; t++)
				for (int b = 0; b < lk_nb(o, o->vars[v]); b++) {
					idx[3 * n] = v;
					idx[3 * n + 1] = t;
					idx[3 * n + 2] = b;
					order[n] = n;
					n++;
				}
		bench_shuffle(order, npts, &rng);
		for (int i = 0; i < npts; i++) {
			const int *pt = idx + 3 * order[i];
			const struct lk_variant *var = o->vars[pt[0]];

			lk_run_point(o, var, o->threads[pt[1]],
				     lk_B(o, var, pt[2]), res, run,
				     lk_index(res, run, pt[0], pt[1], pt[2]));
		}
		fprintf(stderr,
			"bpbench locks: run %d/%u: %d points (%.1f s)\n",
			run + 1, o->a.runs, npts,
			(double)(bench_now_ns() - t0) / 1e9);
	}
	free(order);
}

/*
 * After the sweep: the ceiling on u CPUs is the median of every ceiling run
 * beside a point with that many CPUs, and job % is restated with the CPU
 * time a job took in those runs, not the one-thread timing the runs used
 * meanwhile.
 */
static void lk_settle_ceilings(struct lk_opts *o, struct lk_results *res)
{
	size_t per_t =
		(size_t)res->runs * (size_t)res->nvars * (size_t)res->nbatches;
	double *v =
		bench_zalloc(sizeof(double) * per_t * (size_t)res->nthreads);

	for (int u = 0; u <= LK_MAX_THREADS; u++) {
		int n = 0;

		for (int t = 0; o->work_ns && t < o->nthreads; t++) {
			if (lk_ceiling_cpus(o, o->threads[t]) != (unsigned)u)
				continue;
			for (int run = 0; run < res->runs; run++)
				for (int w = 0; w < res->nvars; w++)
					for (int b = 0; b < res->nbatches; b++)
						v[n++] = res->ceil[lk_index(
							res, run, w, t, b)];
		}
		o->ceil_mps[u] = n ? bench_median(v, n) : NAN;
	}
	free(v);
	for (int t = 0; o->work_ns && t < o->nthreads; t++) {
		unsigned u = lk_ceiling_cpus(o, o->threads[t]);
		/* ns of CPU per job with u CPUs computing */
		double job_ns = (double)u * 1e3 / o->ceil_mps[u];

		for (int run = 0; run < res->runs; run++)
			for (int w = 0; w < res->nvars; w++)
				for (int b = 0; b < res->nbatches; b++)
					res->jobpct[lk_index(res, run, w, t,
							     b)] *=
						job_ns / o->work_ns_measured;
	}
}

/* ---- options ------------------------------------------------------------ */

/* The subcommand's own options, and which lists were given. */
struct lk_parse {
	struct lk_opts *o;
	int threads_set, batches_set;
};

static int lk_set_threads(struct bench_args *a, const char *arg)
{
	struct lk_parse *p = a->ctx;

	p->o->nthreads = bench_parse_uints(arg, p->o->threads, LK_MAX_TLIST, 1,
					   LK_MAX_THREADS);
	p->threads_set = 1;
	return p->o->nthreads < 0 ? -1 : 0;
}

static int lk_set_batches(struct bench_args *a, const char *arg)
{
	struct lk_parse *p = a->ctx;

	p->o->nbatches = bench_parse_uints(arg, p->o->batches, LK_MAX_BATCHES,
					   1, LK_MAX_BATCH);
	p->batches_set = 1;
	return p->o->nbatches < 0 ? -1 : 0;
}

static int lk_set_variants(struct bench_args *a, const char *arg)
{
	struct lk_opts *o = ((struct lk_parse *)a->ctx)->o;
	static char var_names[4096];
	const char *names[LK_MAX_VARIANTS];

	if (strlen(arg) >= sizeof(var_names))
		return -1;
	strcpy(var_names, arg);
	o->nvars = bench_parse_names(var_names, names, LK_MAX_VARIANTS);
	if (o->nvars < 0)
		return -1;
	for (int i = 0; i < o->nvars; i++) {
		o->vars[i] = lk_variant_find(names[i]);
		if (!o->vars[i]) {
			fprintf(stderr, "%s: unknown variant '%s'\n", a->prog,
				names[i]);
			return -2;
		}
		for (int j = 0; j < i; j++)
			if (o->vars[j] == o->vars[i]) {
				fprintf(stderr,
					"%s: variant '%s' given twice\n",
					a->prog, names[i]);
				return -2;
			}
	}
	return 0;
}

static int lk_set_work_ns(struct bench_args *a, const char *arg)
{
	struct lk_opts *o = ((struct lk_parse *)a->ctx)->o;

	return bench_parse_uint(arg, &o->work_ns, 0, LK_MAX_WORK_NS) ? -1 : 0;
}

static int lk_set_pool(struct bench_args *a, const char *arg)
{
	struct lk_opts *o = ((struct lk_parse *)a->ctx)->o;

	return bench_parse_uint(arg, &o->pool, 1, LK_MAX_POOL) ? -1 : 0;
}

/* --variants lists the variants there are: filled in at start */
static char lk_variants_help[2048];

static const struct bench_opt lk_options[] = {
	{"threads", "LIST", lk_set_threads,
	 "worker threads (default 1,2,4,8,16,32; --quick: 1,4,16)"},
	{"batches", "LIST", lk_set_batches,
	 "batch sizes B, 1..4096 (default 1,4,16,32,128; --quick: "
	 "1,32,128)"},
	{"variants", "LIST", lk_set_variants, lk_variants_help},
	{"work-ns", "N", lk_set_work_ns,
	 "CPU work per job in ns, 0 = trivial (default 0)"},
	BENCH_OPT_RUNS("runs per point (default 5; --quick: 3)"),
	BENCH_OPT_MS("measuring window per run, ms (default 100; --quick: 15)"),
	{"pool", "N", lk_set_pool,
	 "jobs circulating (default: max(4096, 8 x threads x B)\n"
	 "per point; at least the largest B)"},
	BENCH_OPT_CPUS("CPUs to pin on, e.g. \"0,1\" or \"0-3\": the consumer "
		       "on the\nfirst, workers round-robin after it (default: "
		       "every CPU\nthis process may use)"),
	BENCH_OPT_SEED("seed of the run-order shuffle (default 1)"),
	BENCH_OPT_QUICK("the short sweep above, well under 30 s at --work-ns 0 "
			"on 2 CPUs"),
	BENCH_OPT_CSV("CSV on stdout instead of the tables: "
		      "variant,threads,B,run,Mitems_per_s"),
	BENCH_OPT_OUT_HELP("also write DIR/NAME.csv, NAME.json, "
			   "NAME-threads.png,\nNAME-best.png and NAME-plot.dat "
			   "(needs gnuplot)"),
	BENCH_OPT_NAME_HELP("file name stem for --out (default locks)"),
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd lk_cmd = {
	.name = "locks",
	.about = "N workers run `while (job = next_job()) emit(process(job))`, "
		 "one consumer\ntakes the results and issues fresh jobs "
		 "(closed loop); the variants differ\nin how jobs and results "
		 "move. Interleaved runs, medians, every run verified.\n",
	.opts = lk_options,
	.epilog = "Progress goes to stderr. Exit status: 0 ok, 1 a run failed "
		  "its verification\n(or --out could not be written), 2 bad "
		  "usage.\n",
	.max_runs = LK_MAX_RUNS,
};

static void lk_fill_variants_help(void)
{
	size_t off = (size_t)snprintf(
		lk_variants_help, sizeof(lk_variants_help),
		"variants to run (default: all of them; mutex does not "
		"batch\nand runs at B = 1 only):");

	for (int i = 0; lk_variants[i] && off < sizeof(lk_variants_help); i++)
		off += (size_t)snprintf(lk_variants_help + off,
					sizeof(lk_variants_help) - off,
					"\n  %-19s %s", lk_variants[i]->name,
					lk_variants[i]->summary);
}

/* A value given twice in a list: its index, or -1. */
static int lk_find_twice(const unsigned *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = 0; j < i; j++)
			if (v[j] == v[i])
				return i;
	return -1;
}

static int lk_parse(int argc, char **argv, struct lk_opts *o)
{
	struct lk_parse p = {.o = o};
	unsigned maxb = 0;
	int rc, i;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &lk_cmd, &p);
	for (i = 0; lk_variants[i]; i++)
		o->vars[o->nvars++] = lk_variants[i];
	lk_fill_variants_help();

	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	o->a.ctx = o;
	/* the ceiling counts CPUs: each one once */
	for (i = 1; i < o->a.ncpus; i++)
		for (int j = 0; j < i; j++)
			if (o->a.cpus[j] == o->a.cpus[i])
				return bench_usage_error(
					&o->a, "bad --cpus: CPU %d given twice",
					o->a.cpus[i]);
	/* the paths go into gnuplot's quoted strings (--out: opts.c) */
	if (strchr(o->a.name, '\'') || strlen(o->a.name) > 200)
		return bench_usage_error(&o->a, "bad value '%s' for --name",
					 o->a.name);
	if (!p.threads_set)
		o->nthreads = bench_parse_uints(
			o->a.quick ? "1,4,16" : "1,2,4,8,16,32", o->threads,
			LK_MAX_TLIST, 1, LK_MAX_THREADS);
	if (!p.batches_set)
		o->nbatches = bench_parse_uints(
			o->a.quick ? "1,32,128" : "1,4,16,32,128", o->batches,
			LK_MAX_BATCHES, 1, LK_MAX_BATCH);
	i = lk_find_twice(o->batches, o->nbatches);
	if (i >= 0)
		return bench_usage_error(&o->a, "B=%u given twice",
					 o->batches[i]);
	i = lk_find_twice(o->threads, o->nthreads);
	if (i >= 0)
		return bench_usage_error(&o->a, "%u threads given twice",
					 o->threads[i]);
	for (int b = 0; b < o->nbatches; b++)
		if (o->batches[b] > maxb)
			maxb = o->batches[b];
	if (o->pool && o->pool < maxb)
		/* the pipeline's producer gathers a whole batch of jobs */
		return bench_usage_error(&o->a, "--pool %u is less than B=%u",
					 o->pool, maxb);
	if (o->a.quick) {
		if (!o->a.runs_set)
			o->a.runs = 3;
		if (!o->a.ms_set)
			o->a.ms = 15;
	}
	return bench_opts_ready(&o->a);
}

int bench_locks_main(int argc, char **argv)
{
	struct lk_opts o;
	struct lk_results res;
	struct lk_report rep = {&o, &res};
	size_t ncell;
	int64_t t0;
	int rc;

	rc = lk_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	if (o.a.out && !bench_gnuplot_available()) {
		fprintf(stderr,
			"%s: --out needs gnuplot for its plots, and it "
			"is not on PATH (apt-get install "
			"gnuplot-nox)\n",
			o.a.prog);
		return 1;
	}

	t0 = bench_now_ns();
	lk_calibrate(&o);
	fprintf(stderr, "%s: %s, %.2f ns per job measured on one thread\n",
		o.a.prog, o.work_ns ? "calibrated" : "trivial jobs",
		o.work_ns_measured);

	res.runs = (int)o.a.runs;
	res.nthreads = o.nthreads;
	res.nbatches = o.nbatches;
	res.nvars = o.nvars;
	ncell = (size_t)o.a.runs * (size_t)o.nvars * (size_t)o.nthreads *
		(size_t)o.nbatches;
	res.mps = bench_zalloc(sizeof(double) * ncell);
	res.cpus = bench_zalloc(sizeof(double) * ncell);
	res.jobpct = bench_zalloc(sizeof(double) * ncell);
	for (size_t i = 0; i < ncell; i++)
		res.mps[i] = res.cpus[i] = res.jobpct[i] = NAN;
	res.ceil = bench_zalloc(sizeof(double) * ncell);
	for (size_t i = 0; i < ncell; i++)
		res.ceil[i] = NAN;

	lk_sweep(&o, &res);
	lk_settle_ceilings(&o, &res);
	fprintf(stderr,
		"%s: done in %.1f s, every run verified (%" PRIu64
		" results checked)\n",
		o.a.prog, (double)(bench_now_ns() - t0) / 1e9,
		lk_results_verified());

	rc = bench_emit(&o.a, lk_print_csv, lk_print_table, NULL, &rep);
	if (!rc && o.a.out && lk_write_out(&rep))
		rc = 1;
	free(res.mps);
	free(res.cpus);
	free(res.jobpct);
	free(res.ceil);
	lk_run_cleanup();
	return rc;
}
