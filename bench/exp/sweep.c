/* SPDX-License-Identifier: MIT */
/*
 * sweep.c - `bpbench sweep`: batching buys throughput and costs latency; the
 * sweep measures both, per batch size B, by running another bpbench
 * subcommand once per point as a child process.
 *
 * Why child processes: every experiment already verifies its own runs and
 * exits 1 when one fails. Running it as `/proc/self/exe SUB ... --csv` and
 * reading its CSV keeps the sweep independent of the experiments' code, and
 * a failed child stops the sweep: a number from an unverified run is never
 * used. Each child starts from a fresh process (no warm allocator, no
 * leftover threads), which is also what a user running it by hand gets.
 *
 * Interleaving: for each run index, every point (B, and the second
 * parameter when given) runs once, in a freshly shuffled order, so that the
 * VM's drift spreads over all points alike; tables show medians over runs.
 *
 * One child invocation may print several rows (several points, or several
 * variants): its throughput is the median of the rows' throughputs and its
 * p99 the largest of the rows' p99s (a latency bound must hold for every
 * row). The presets choose child options that give one row.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bp_config.h"
#include "bpbench.h"
#include "plot.h"

#define BENCH_CMD "bpbench sweep"

#define SW_MAX_B     32
#define SW_MAX_P2    16
#define SW_MAX_RUNS  1000
#define SW_MAX_ARGS  256
#define SW_MAX_ROWS  4096
#define SW_MAX_COLS  128
#define SW_NAME_LEN  64
#define SW_MAX_BOPTS 2

/*
 * What a preset knows about its subcommand: the options that give one
 * point, which option(s) carry B, and where throughput and p99 are.
 */
struct sw_preset {
	const char *sub;
	const char *param;		 /* B's name in the output */
	const char *bopts[SW_MAX_BOPTS]; /* child options set to B */
	const char *fixed;		 /* child options, space separated */
	const char *tput;		 /* throughput column */
	const char *p99[2];		 /* p99 columns, the first found wins */
	const char *rows;		 /* COL=VALUE row filter, or NULL */
	const char *quick_ms;		 /* the child's own quick --ms */
	const char *p99_note;		 /* what p99 is or why none; NULL */
	int rdma;			 /* depth and provider are chosen */
};

static const struct sw_preset sw_presets[] = {
	{"ring",
	 "batches",
	 {"batches"},
	 "--queues batchpipe --points 2x2 --runs 1 --no-single",
	 "Mitems_per_s",
	 {"p99_ns", "p99_us"},
	 NULL,
	 "20",
	 NULL,
	 0},
	{"pipeline",
	 "batches",
	 {"batches"},
	 "--sweep-only --no-latency --workers 2 --waits spin-sleep --runs 1",
	 "Mjobs_per_s",
	 {"p99_us"},
	 NULL,
	 "20",
	 "p99: bp_pipeline_stats of each run, submit -> sink at full load, "
	 "so mostly\n     queueing in the bounded rings (histogram bucket "
	 "upper bounds, within 25 %)",
	 0},
#if BP_HAVE_RDMA
	{"rdma",
	 "post+reap",
	 {"post", "reap"},
	 "--sizes 4K --workers 1 --rails 1 --runs 1 --no-latency",
	 "Mops",
	 {NULL},
	 "mode=pipeline",
	 "100",
	 "p99: missing, bpbench rdma does not measure it per batch size (its "
	 "--latency\n     is 4 KiB at depth 1, one op at a time)",
	 1},
#endif
};

#define SW_NPRESETS (sizeof(sw_presets) / sizeof(sw_presets[0]))

struct sw_opts {
	const struct sw_preset *preset; /* NULL: the generic form */
	const char *sub;
	char param[SW_NAME_LEN]; /* B's name in the output */
	const char *bopts[SW_MAX_BOPTS];
	int nbopts;
	char bopt_buf[SW_NAME_LEN];
	unsigned b[SW_MAX_B];
	int nb;
	char p2name[SW_NAME_LEN];
	char p2buf[1024];
	const char *p2[SW_MAX_P2];
	int np2; /* 0: no second parameter */
	const char *tput, *p99_user;
	const char *p99[2];
	char rows_col[SW_NAME_LEN];
	const char *rows_val;
	char fixed_buf[512];
	char *fixed[32];
	int nfixed;
	char provider[32]; /* rdma: "--providers" value, "" if extras set it */
	char depth[16];	   /* rdma: "--depth" value, "" if param2 is depth */
	char **extra;
	int nextra;
	struct bench_args a;  /* runs, seed, quick, csv, out, name */
	int b_set, param_set; /* --batches, --param given */
	char name_buf[SW_NAME_LEN + 8];
};

/* The column names found in the child's CSV (the same in every child). */
struct sw_cols {
	char tput[SW_NAME_LEN], p99[SW_NAME_LEN]; /* p99 "": none */
	int known;
};

struct sw_results {
	int runs, nb, np;   /* np: second-parameter values, at least 1 */
	double *tput, *p99; /* [run][p2][b] */
	struct sw_cols cols;
};

static double *sw_cell(double *a, const struct sw_results *r, int run, int p2,
		       int b)
{
	return &a[((size_t)run * (size_t)r->np + (size_t)p2) * (size_t)r->nb +
		  (size_t)b];
}

/* ---- the child ---------------------------------------------------------- */

/* A progress line is open on stderr: end it before any message. */
static int sw_progress_open;

static void sw_end_progress(void)
{
	if (sw_progress_open)
		fprintf(stderr, "\n");
	sw_progress_open = 0;
}

/*
 * Run `/proc/self/exe args...`; its stdout into *out (NUL-terminated, to
 * free), its stderr into errf. Returns the wait status, or -1.
 */
static int sw_spawn(char *const *args, char **out, FILE *errf)
{
	int fds[2], st;
	pid_t pid;
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);

	if (!buf || pipe(fds) != 0) {
		free(buf);
		return -1;
	}
	fflush(NULL); /* the child must not repeat our buffered output */
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		free(buf);
		return -1;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fileno(errf), STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		execv("/proc/self/exe", args);
		fprintf(stderr, "exec /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t n;

		if (cap - len < 4096) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				bench_die("%s: out of memory\n", BENCH_CMD);
			buf = nb;
			cap *= 2;
		}
		n = read(fds[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fds[0]);
	buf[len] = '\0';
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			free(buf);
			return -1;
		}
	*out = buf;
	return st;
}

static void sw_print_cmd(FILE *f, char *const *args)
{
	fprintf(f, "bpbench");
	for (int i = 1; args[i]; i++)
		fprintf(f, " %s", args[i]);
	fprintf(f, "\n");
}

static void sw_dump_stderr(FILE *errf)
{
	char buf[4096];
	size_t n;

	fflush(errf);
	rewind(errf);
	fprintf(stderr, "---- the child's stderr ----\n");
	while ((n = fread(buf, 1, sizeof(buf), errf)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of the child's stderr ----\n");
}

/* ---- the child's CSV ---------------------------------------------------- */

/*
 * Read the first CSV block of `text` (the header, then rows up to a blank
 * line or a line with another field count: pipeline appends tagged blocks
 * after its rows). Rows that pass the filter give the throughput (median)
 * and p99 (largest; NaN when the column is missing or empty everywhere).
 * Returns 0, -2 when no row passed (no message), or -1 after a message.
 */
static int sw_parse_csv(const struct sw_opts *o, char *text,
			struct sw_cols *cols, double *tput, double *p99)
{
	char *h[SW_MAX_COLS], *f[SW_MAX_COLS], *line, *p = text;
	static double tv[SW_MAX_ROWS], pv[SW_MAX_ROWS];
	int nh, ti, pi = -1, fi = -1, nrows = 0, lineno = 1;

	line = bench_csv_line(&p);
	if (!line || !*line) {
		fprintf(stderr, "%s: the child printed no CSV\n", BENCH_CMD);
		return -1;
	}
	nh = bench_csv_split(line, h, SW_MAX_COLS);
	if (nh < 0) {
		fprintf(stderr, "%s: the child's CSV has over %d columns\n",
			BENCH_CMD, SW_MAX_COLS);
		return -1;
	}
	ti = bench_csv_col(h, nh, o->tput);
	if (ti < 0) {
		fprintf(stderr,
			"%s: no column '%s' in the child's CSV header\n",
			BENCH_CMD, o->tput);
		return -1;
	}
	for (int i = 0; i < 2 && pi < 0; i++)
		pi = bench_csv_col(h, nh, o->p99[i]);
	if (pi < 0 && o->p99_user) {
		fprintf(stderr,
			"%s: no column '%s' in the child's CSV header\n",
			BENCH_CMD, o->p99_user);
		return -1;
	}
	if (o->rows_val) {
		fi = bench_csv_col(h, nh, o->rows_col);
		if (fi < 0) {
			fprintf(stderr,
				"%s: no column '%s' (--rows) in the child's "
				"CSV header\n",
				BENCH_CMD, o->rows_col);
			return -1;
		}
	}
	if (!cols->known) {
		snprintf(cols->tput, sizeof(cols->tput), "%s", h[ti]);
		snprintf(cols->p99, sizeof(cols->p99), "%s",
			 pi >= 0 ? h[pi] : "");
		cols->known = 1;
	} else if (strcmp(cols->p99, pi >= 0 ? h[pi] : "")) {
		fprintf(stderr,
			"%s: the child's p99 column changed between runs\n",
			BENCH_CMD);
		return -1;
	}
	while ((line = bench_csv_line(&p)) != NULL && *line) {
		int n = bench_csv_split(line, f, SW_MAX_COLS);

		lineno++;
		if (n != nh)
			break;
		if (fi >= 0 && strcmp(f[fi], o->rows_val))
			continue;
		if (nrows >= SW_MAX_ROWS) {
			fprintf(stderr, "%s: over %d CSV rows from one child\n",
				BENCH_CMD, SW_MAX_ROWS);
			return -1;
		}
		if (bench_csv_number(f[ti], &tv[nrows])) {
			fprintf(stderr,
				"%s: CSV line %d: throughput '%s' is not a "
				"number\n",
				BENCH_CMD, lineno, f[ti]);
			return -1;
		}
		pv[nrows] = NAN;
		if (pi >= 0 && *f[pi] && bench_csv_number(f[pi], &pv[nrows])) {
			fprintf(stderr,
				"%s: CSV line %d: p99 '%s' is not a number\n",
				BENCH_CMD, lineno, f[pi]);
			return -1;
		}
		nrows++;
	}
	if (nrows == 0)
		return -2;
	*p99 = bench_max(pv, nrows);
	*tput = bench_median(tv, nrows);
	return 0;
}

/* ---- one point ---------------------------------------------------------- */

/* The child's argv: SUB, fixed options, extras, then the point's options. */
static void sw_args(const struct sw_opts *o, unsigned b, int p2, char **args,
		    char *bval, size_t bval_len)
{
	static char opt_names[SW_MAX_BOPTS + 3][SW_NAME_LEN + 2];
	int n = 0;

	snprintf(bval, bval_len, "%u", b);
	args[n++] = "bpbench";
	args[n++] = (char *)o->sub;
	for (int i = 0; i < o->nfixed; i++)
		args[n++] = o->fixed[i];
	if (o->provider[0]) {
		args[n++] = "--providers";
		args[n++] = (char *)o->provider;
	}
	if (o->depth[0]) {
		args[n++] = "--depth";
		args[n++] = (char *)o->depth;
	}
	for (int i = 0; i < o->nextra; i++)
		args[n++] = o->extra[i];
	for (int i = 0; i < o->nbopts; i++) {
		snprintf(opt_names[i], sizeof(opt_names[i]), "--%s",
			 o->bopts[i]);
		args[n++] = opt_names[i];
		args[n++] = bval;
	}
	if (o->np2) {
		snprintf(opt_names[SW_MAX_BOPTS], sizeof(opt_names[0]), "--%s",
			 o->p2name);
		args[n++] = opt_names[SW_MAX_BOPTS];
		args[n++] = (char *)o->p2[p2];
	}
	args[n++] = "--csv";
	args[n] = NULL;
}

/*
 * One child run: 0 with its numbers; 1 when it ran but gave no rows and
 * `quiet_empty` is set; else -1 after the child's command and output were
 * shown (it failed, or its CSV is unusable). `more`: options appended for
 * this run only (NULL-terminated, may be NULL).
 */
static int sw_point(const struct sw_opts *o, unsigned b, int p2,
		    struct sw_cols *cols, double *tput, double *p99,
		    int quiet_empty, const char *const *more)
{
	char *args[SW_MAX_ARGS + 8], bval[16], *out = NULL;
	FILE *errf = tmpfile();
	int st, rc = -1, n = 0;

	if (!errf)
		bench_die("%s: tmpfile: %s\n", BENCH_CMD, strerror(errno));
	sw_args(o, b, p2, args, bval, sizeof(bval));
	while (args[n])
		n++;
	n--; /* --csv stays last */
	for (int i = 0; more && more[i]; i++)
		args[n++] = (char *)more[i];
	args[n++] = "--csv";
	args[n] = NULL;
	st = sw_spawn(args, &out, errf);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		sw_end_progress();
	if (st == -1) {
		fprintf(stderr, "%s: cannot run a child: %s\n", BENCH_CMD,
			strerror(errno));
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (WIFEXITED(st))
			fprintf(stderr, "%s: the child exited %d: ", BENCH_CMD,
				WEXITSTATUS(st));
		else
			fprintf(stderr,
				"%s: the child died of signal %d: ", BENCH_CMD,
				WTERMSIG(st));
		sw_print_cmd(stderr, args);
	} else {
		char *copy = strdup(out);

		if (!copy)
			bench_die("%s: out of memory\n", BENCH_CMD);
		rc = sw_parse_csv(o, copy, cols, tput, p99);
		free(copy);
		if (rc == -2 && quiet_empty) {
			rc = 1;
		} else if (rc) {
			sw_end_progress();
			if (rc == -2)
				fprintf(stderr,
					"%s: the child's CSV has no data "
					"rows%s\n",
					BENCH_CMD,
					o->rows_val ? " that pass the --rows "
						      "filter"
						    : "");
			rc = -1;
			fprintf(stderr, "%s: from: ", BENCH_CMD);
			sw_print_cmd(stderr, args);
			fprintf(stderr,
				"---- the child's stdout (up to 4 KiB) ----\n"
				"%.4096s\n",
				out);
		}
	}
	if (rc < 0)
		sw_dump_stderr(errf);
	free(out);
	fclose(errf);
	return rc;
}

/*
 * rdma: shm is the fastest provider here; when it does not open, the child
 * says so and prints a header without rows, and tcp;ofi_rxm is next.
 */
static int sw_rdma_provider(struct sw_opts *o)
{
	static const char *const probe[] = {"--ms", "1", NULL};
	static const char *const provs[] = {"shm", "tcp;ofi_rxm"};
	struct sw_cols cols = {0};
	double t, p;
	int rc;

	if (!o->provider[0])
		return 0; /* the extras name the provider */
	for (int i = 0; i < 2; i++) {
		snprintf(o->provider, sizeof(o->provider), "%s", provs[i]);
		fprintf(stderr, "%s: trying provider %s\n", BENCH_CMD,
			o->provider);
		rc = sw_point(o, o->b[0], 0, &cols, &t, &p, 1, probe);
		if (rc <= 0)
			return rc; /* works, or failed: not a provider issue */
	}
	fprintf(stderr, "%s: neither shm nor tcp;ofi_rxm gave a result\n",
		BENCH_CMD);
	return -1;
}

/* ---- the sweep ---------------------------------------------------------- */

static int sw_sweep(const struct sw_opts *o, struct sw_results *r)
{
	int npts = r->nb * r->np;
	int order[SW_MAX_B * SW_MAX_P2];
	uint64_t rng = o->a.seed;
	int64_t t0 = bench_now_ns();

	for (int run = 0; run < r->runs; run++) {
		for (int i = 0; i < npts; i++)
			order[i] = i;
		bench_shuffle(order, npts, &rng);
		fprintf(stderr, "%s: run %d/%d:", BENCH_CMD, run + 1, r->runs);
		sw_progress_open = 1;
		for (int i = 0; i < npts; i++) {
			int b = order[i] % r->nb, p2 = order[i] / r->nb;

			fprintf(stderr, " %s=%u%s%s%s%s",
				o->preset ? "B" : o->param, o->b[b],
				o->np2 ? "/" : "", o->np2 ? o->p2name : "",
				o->np2 ? "=" : "", o->np2 ? o->p2[p2] : "");
			if (sw_point(o, o->b[b], p2, &r->cols,
				     sw_cell(r->tput, r, run, p2, b),
				     sw_cell(r->p99, r, run, p2, b), 0, NULL)) {
				fprintf(stderr,
					"%s: stopped: no numbers are printed "
					"from a sweep with a failed child\n",
					BENCH_CMD);
				return -1;
			}
		}
		fprintf(stderr, "  (%.1f s)\n",
			(double)(bench_now_ns() - t0) / 1e9);
		sw_progress_open = 0;
	}
	return 0;
}

/* ---- reports ------------------------------------------------------------ */

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

/* What the printers get (bench_emit's ctx). */
struct sw_report {
	const struct sw_opts *o;
	const struct sw_results *r;
};

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

static void sw_print_table(FILE *f, const void *report)
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

static void sw_print_csv(FILE *f, const void *report)
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
static int sw_write_out(const struct sw_opts *o, const struct sw_results *r)
{
	if (sw_plot(o, r))
		return -1;
	fprintf(stderr, "%s: wrote %s/%s.png, %s-plot.dat\n", BENCH_CMD,
		o->a.out, o->a.name, o->a.name);
	return 0;
}

/* ---- options ------------------------------------------------------------ */

static int sw_good_name(const char *s)
{
	if (!*s || *s == '-')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return 0;
	return 1;
}

/* "NAME=REST": NAME into name (checked), returns REST or NULL. */
static const char *sw_split_eq(const char *s, char *name, size_t len)
{
	const char *eq = strchr(s, '=');

	if (!eq || (size_t)(eq - s) >= len)
		return NULL;
	memcpy(name, s, (size_t)(eq - s));
	name[eq - s] = '\0';
	return sw_good_name(name) ? eq + 1 : NULL;
}

static int sw_cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return (x > y) - (x < y);
}

/* Whether word sets child option --name (as "--name" or "--name=..."). */
static int sw_sets(const char *word, const char *name)
{
	size_t n = strlen(name);

	return word[0] == '-' && word[1] == '-' &&
	       !strncmp(word + 2, name, n) &&
	       (word[2 + n] == '\0' || word[2 + n] == '=');
}

/* The preset's fixed options, less any the second parameter sets. */
static void sw_fixed(struct sw_opts *o)
{
	char *save = NULL;
	int skip_value = 0;

	snprintf(o->fixed_buf, sizeof(o->fixed_buf), "%s", o->preset->fixed);
	o->nfixed = 0;
	for (char *t = strtok_r(o->fixed_buf, " ", &save); t;
	     t = strtok_r(NULL, " ", &save)) {
		if (o->np2 && sw_sets(t, o->p2name)) {
			skip_value = 1;
			continue;
		}
		if (skip_value && t[0] != '-') {
			skip_value = 0;
			continue;
		}
		skip_value = 0;
		o->fixed[o->nfixed++] = t;
	}
}

static int sw_set_batches(struct bench_args *a, const char *arg)
{
	struct sw_opts *o = a->ctx;

	o->nb = bench_parse_uints(arg, o->b, SW_MAX_B, 1, 1u << 20);
	o->b_set = 1;
	return o->nb < 0 ? -1 : 0;
}

static int sw_set_param(struct bench_args *a, const char *arg)
{
	struct sw_opts *o = a->ctx;
	const char *rest = sw_split_eq(arg, o->bopt_buf, sizeof(o->bopt_buf));

	if (!rest)
		return -1;
	o->nb = bench_parse_uints(rest, o->b, SW_MAX_B, 1, UINT32_MAX);
	o->param_set = 1;
	return o->nb < 0 ? -1 : 0;
}

static int sw_set_param2(struct bench_args *a, const char *arg)
{
	struct sw_opts *o = a->ctx;
	const char *rest = sw_split_eq(arg, o->p2name, sizeof(o->p2name));

	if (!rest || strlen(rest) >= sizeof(o->p2buf) ||
	    strpbrk(rest, " \t\"'\\"))
		return -1;
	strcpy(o->p2buf, rest);
	o->np2 = bench_parse_names(o->p2buf, o->p2, SW_MAX_P2);
	if (o->np2 < 0 || rest[0] == ',' || rest[strlen(rest) - 1] == ',' ||
	    strstr(rest, ",,"))
		return -1;
	return 0;
}

/* a column name: not empty, no comma */
static int sw_column(const char *arg, const char **to)
{
	if (!*arg || strchr(arg, ','))
		return -1;
	*to = arg;
	return 0;
}

static int sw_set_tput(struct bench_args *a, const char *arg)
{
	return sw_column(arg, &((struct sw_opts *)a->ctx)->tput);
}

static int sw_set_p99(struct bench_args *a, const char *arg)
{
	return sw_column(arg, &((struct sw_opts *)a->ctx)->p99_user);
}

static int sw_set_rows(struct bench_args *a, const char *arg)
{
	struct sw_opts *o = a->ctx;
	const char *eq = strchr(arg, '=');

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(o->rows_col) ||
	    strchr(eq, ','))
		return -1;
	memcpy(o->rows_col, arg, (size_t)(eq - arg));
	o->rows_col[eq - arg] = '\0';
	o->rows_val = eq + 1;
	return 0;
}

static const struct bench_opt sw_options[] = {
	{"batches", "LIST", sw_set_batches,
	 "B values, presets (default 1,2,4,8,16,32,64,128,256;\n"
	 "--quick: 1,4,16,64,256)"},
	{"param", "NAME=LIST", sw_set_param,
	 "generic form: child option --NAME, values LIST\n"
	 "(positive integers, for a log axis)"},
	{"param2", "NAME=LIST", sw_set_param2,
	 "second parameter: child option --NAME, values LIST\n"
	 "(any words without spaces; default: none)"},
	{"tput", "COL", sw_set_tput,
	 "throughput column (generic: required; presets: theirs)"},
	{"p99", "COL", sw_set_p99,
	 "p99 column (default: presets' own; generic: none,\n"
	 "latency missing)"},
	{"rows", "COL=VALUE", sw_set_rows,
	 "use only the child's rows whose COL is VALUE (default:\n"
	 "none; rdma: mode=pipeline)"},
	BENCH_OPT_RUNS("runs per point (default 5; --quick: 3)"),
	BENCH_OPT_SEED("seed of the point-order shuffle (default 1)"),
	BENCH_OPT_QUICK("3 runs; presets also: the child's quick window (ring "
			"and\npipeline --ms 20, rdma --ms 100) and fewer B"),
	BENCH_OPT_CSV("CSV on stdout instead of the table: subcommand,param,\n"
		      "value,param2,value2,run,throughput,throughput_unit,p99,"
		      "\np99_unit (one row per child run; empty: missing)"),
	BENCH_OPT_OUT_HELP("also write DIR/NAME.csv, DIR/NAME.png (throughput "
			   "and\np99 against B; needs gnuplot) and "
			   "DIR/NAME-plot.dat"),
	BENCH_OPT_NAME_HELP("file name stem for --out (default "
			    "sweep-SUBCOMMAND)"),
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd sw_cmd = {
	.name = "sweep",
	.synopsis = "PRESET [options] [-- extra child options]\n"
		    "       bpbench sweep --param NAME=LIST --tput COL [--p99 "
		    "COL] [options]\n"
		    "                     -- SUBCOMMAND [child options]",
	.about =
		"Runs another bpbench subcommand once per batch size B (and "
		"per "
		"value of an\noptional second parameter) as a child process "
		"with --csv, interleaved:\nfor each run every point once, in a "
		"fresh shuffled order; medians over runs.\nPer point: "
		"throughput, p99 latency, both relative to the smallest B. "
		"A\nchild that exits non-zero stops the sweep (exit 1) with "
		"its "
		"stderr shown.\nOnly the first CSV block of the child is read; "
		"when it has several rows,\nthe point's throughput is their "
		"median and its p99 the largest of theirs.\n"
		"presets:\n"
		"  ring      bpbench ring --queues batchpipe --points 2x2 "
		"--runs "
		"1 --no-single\n"
		"            --batches B; Mitems_per_s; p99 from p99_ns or "
		"p99_us if the\n"
		"            CSV has one, else missing\n"
		"  pipeline  bpbench pipeline --sweep-only --no-latency "
		"--workers 2\n"
		"            --waits spin-sleep --runs 1 --batches B; "
		"Mjobs_per_s, p99_us\n"
		"            (bp_pipeline_stats of the run, at full load);\n"
		"            e.g. --param2 workers=1,4\n"
#if BP_HAVE_RDMA
		"  rdma      bpbench rdma --sizes 4K --workers 1 --rails 1 "
		"--runs 1\n"
		"            --no-latency --providers shm (tcp;ofi_rxm if shm "
		"does not\n"
		"            open) --depth max(16, largest B) --post B --reap "
		"B; Mops of\n"
		"            the rows with mode=pipeline (--rows mode=raw: the "
		"raw loop).\n"
		"            No p99: bpbench rdma measures latency only at "
		"depth "
		"1, one op\n"
		"            at a time, not per batch size. FI_TCP_IFACE=lo "
		"unless set.\n"
#endif
		"Extra child options (after --) come after the preset's and "
		"override them;\nthey may not set B or the second parameter.\n"
		"options:\n",
	.opts = sw_options,
	.epilog =
		"Progress goes to stderr. Exit status: 0 ok, 1 a child failed "
		"or its CSV\nwas unusable (or no gnuplot with --out), 2 bad "
		"usage.\n",
	.max_runs = SW_MAX_RUNS,
};

/*
 * `sweep [PRESET] [options] [-- child options]`: the preset, then the
 * shared parser up to "--", then the checks of one option against another.
 */
static int sw_parse(int argc, char **argv, struct sw_opts *o)
{
	int nopt, rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &sw_cmd, o);
	/* `sweep PRESET ...`: the preset name comes first */
	if (argc > 1 && argv[1][0] != '-') {
		for (size_t i = 0; i < SW_NPRESETS; i++)
			if (!strcmp(argv[1], sw_presets[i].sub))
				o->preset = &sw_presets[i];
		if (!o->preset)
			return bench_usage_error(&o->a, "unknown preset '%s'",
						 argv[1]);
		argc--;
		argv++;
	}
	/* everything after "--" belongs to the child */
	nopt = argc;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			nopt = i;
			o->extra = argv + i + 1;
			o->nextra = argc - i - 1;
			break;
		}
	if (o->nextra > SW_MAX_ARGS - 64)
		return bench_usage_error(&o->a, "too many child options");
	rc = bench_opts_parse(&o->a, nopt, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	/* the gnuplot script quotes paths with ' */
	if (o->a.out && (strlen(o->a.out) >= 4096 || strchr(o->a.out, '\'')))
		return bench_usage_error(&o->a, "bad value '%s' for --out",
					 o->a.out);
	if (o->a.name != sw_cmd.name &&
	    (!sw_good_name(o->a.name) || strlen(o->a.name) >= SW_NAME_LEN))
		return bench_usage_error(&o->a, "bad value '%s' for --name",
					 o->a.name);

	if (o->preset) {
		if (o->param_set)
			return bench_usage_error(
				&o->a, "--param is for the generic form; a "
				       "preset sweeps B (--batches)");
		o->sub = o->preset->sub;
		snprintf(o->param, sizeof(o->param), "%s", o->preset->param);
		for (int i = 0; i < SW_MAX_BOPTS && o->preset->bopts[i]; i++)
			o->bopts[o->nbopts++] = o->preset->bopts[i];
		if (!o->tput)
			o->tput = o->preset->tput;
		if (!o->b_set)
			o->nb = bench_parse_uints(o->a.quick ? "1,4,16,64,256"
							     : "1,2,4,8,16,32,"
							       "64,128,256",
						  o->b, SW_MAX_B, 1, 1u << 20);
	} else {
		if (!o->param_set || o->b_set)
			return bench_usage_error(
				&o->a, "without a preset, give --param "
				       "NAME=LIST (not --batches)");
		if (!o->tput)
			return bench_usage_error(
				&o->a, "the generic form needs --tput COL");
		if (o->nextra < 1 || o->extra[0][0] == '-')
			return bench_usage_error(
				&o->a, "name the subcommand after --: -- "
				       "SUBCOMMAND [options]");
		if (!strcmp(o->extra[0], "sweep"))
			return bench_usage_error(
				&o->a, "a sweep of a sweep is not supported");
		o->sub = o->extra[0];
		o->extra++;
		o->nextra--;
		snprintf(o->param, sizeof(o->param), "%s", o->bopt_buf);
		o->bopts[o->nbopts++] = o->bopt_buf;
	}
	if (o->p99_user) {
		o->p99[0] = o->p99_user;
	} else if (o->preset) {
		o->p99[0] = o->preset->p99[0];
		o->p99[1] = o->preset->p99[1];
	}
	if (!o->rows_val && o->preset && o->preset->rows) {
		const char *eq = strchr(o->preset->rows, '=');

		snprintf(o->rows_col, sizeof(o->rows_col), "%.*s",
			 (int)(eq - o->preset->rows), o->preset->rows);
		o->rows_val = eq + 1;
	}

	/* B in order, once each: the ratios are to the smallest */
	qsort(o->b, (size_t)o->nb, sizeof(o->b[0]), sw_cmp_uint);
	for (int i = 1; i < o->nb; i++)
		if (o->b[i] == o->b[i - 1])
			return bench_usage_error(
				&o->a, "B value %u given twice", o->b[i]);
	for (int i = 0; i < o->np2; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(o->p2[i], o->p2[j]))
				return bench_usage_error(
					&o->a,
					"--param2 value '%s' given twice",
					o->p2[i]);
	for (int i = 0; i < o->nbopts; i++)
		if (o->np2 && !strcmp(o->bopts[i], o->p2name))
			return bench_usage_error(
				&o->a, "--param2 %s is the swept parameter",
				o->p2name);
	for (int i = 0; i < o->nextra; i++) {
		int bad = !strcmp(o->extra[i], "--json") ||
			  (o->np2 && sw_sets(o->extra[i], o->p2name));

		for (int k = 0; k < o->nbopts; k++)
			bad |= sw_sets(o->extra[i], o->bopts[k]);
		if (bad)
			return bench_usage_error(
				&o->a,
				"the child option '%s' is the sweep's to set",
				o->extra[i]);
	}

	if (o->preset) {
		sw_fixed(o);
		if (o->a.quick && !(o->np2 && !strcmp(o->p2name, "ms"))) {
			o->fixed[o->nfixed++] = "--ms";
			o->fixed[o->nfixed++] = (char *)o->preset->quick_ms;
		}
		if (o->preset->rdma) {
			int extra_prov = 0, extra_depth = 0;

			for (int i = 0; i < o->nextra; i++) {
				extra_prov |= sw_sets(o->extra[i], "providers");
				extra_depth |= sw_sets(o->extra[i], "depth");
			}
			/* a post batch larger than the credits is never
			 * filled: the depth is at least the largest B */
			if (!extra_depth &&
			    !(o->np2 && !strcmp(o->p2name, "depth")))
				snprintf(o->depth, sizeof(o->depth), "%u",
					 o->b[o->nb - 1] > 16 ? o->b[o->nb - 1]
							      : 16);
			if (!extra_prov &&
			    !(o->np2 && !strcmp(o->p2name, "providers")))
				snprintf(o->provider, sizeof(o->provider),
					 "shm");
		}
	}
	if (o->a.quick && !o->a.runs_set)
		o->a.runs = 3;
	if (o->a.name == sw_cmd.name) {
		snprintf(o->name_buf, sizeof(o->name_buf), "sweep-%s", o->sub);
		if (!sw_good_name(o->name_buf))
			return bench_usage_error(
				&o->a, "give --name for subcommand '%s'",
				o->sub);
		o->a.name = o->name_buf;
	}
	return BENCH_OPTS_RUN;
}

int bench_sweep_main(int argc, char **argv)
{
	struct sw_opts o;
	struct sw_results r = {0};
	struct sw_report rep = {&o, &r};
	size_t ncell;
	int rc;

	rc = sw_parse(argc, argv, &o);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	if (o.a.out && !bench_gnuplot_available()) {
		fprintf(stderr,
			"%s: --out draws its plot with gnuplot, which is not "
			"installed (apt-get install gnuplot-nox)\n",
			BENCH_CMD);
		return 1;
	}
	/* the RDMA children talk over loopback only */
	setenv("FI_TCP_IFACE", "lo", 0);
	if (o.preset && o.preset->rdma && sw_rdma_provider(&o))
		return 1;

	r.runs = (int)o.a.runs;
	r.nb = o.nb;
	r.np = o.np2 ? o.np2 : 1;
	ncell = (size_t)r.runs * (size_t)r.np * (size_t)r.nb;
	r.tput = bench_zalloc(sizeof(double) * ncell);
	r.p99 = bench_zalloc(sizeof(double) * ncell);
	for (size_t i = 0; i < ncell; i++)
		r.tput[i] = r.p99[i] = NAN;

	if (sw_sweep(&o, &r)) {
		rc = 1;
		goto done;
	}
	rc = bench_emit(&o.a, sw_print_csv, sw_print_table, NULL, &rep);
	if (!rc && o.a.out && sw_write_out(&o, &r))
		rc = 1;
done:
	free(r.tput);
	free(r.p99);
	return rc;
}
