/* SPDX-License-Identifier: MIT */
/*
 * sweep/run.c - the points of `bpbench sweep` and their interleaving: one
 * point is one child run (its arguments, its numbers, what is shown when it
 * fails); for each run index every point runs once, in a fresh shuffled
 * order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sweep/sweep.h"

/* A progress line is open on stderr: end it before any message. */
static int sw_progress_open;

/* After bad usage found in a child's run: where the usage is. */
static void sw_usage_hint(void)
{
	fprintf(stderr, "%s: see bpbench sweep --help (and the subcommand's)\n",
		BENCH_CMD);
}

void sw_end_progress(void)
{
	if (sw_progress_open)
		fprintf(stderr, "\n");
	sw_progress_open = 0;
}

/* The child's argv: SUB, fixed options, extras, then the point's options. */
void sw_args(const struct sw_opts *o, unsigned b, int p2, char **args,
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
 * `quiet_empty` is set; else -1 (SW_USAGE for bad usage: the child exited
 * 2, or a column the options name is missing) after the child's command
 * and output were shown (it failed, or its CSV is unusable). `more`:
 * options appended for this run only (NULL-terminated, may be NULL).
 */
static int sw_point(const struct sw_opts *o, unsigned b, int p2,
		    struct sw_cols *cols, double *tput, double *p99,
		    int quiet_empty, const char *const *more)
{
	char *args[SW_MAX_ARGS + 8], bval[16], *out = NULL;
	FILE *errf = tmpfile();
	int st, rc = -1, n = 0, usage = 0;

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
	st = sw_spawn(args, &out, errf, o->child_timeout);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		sw_end_progress();
	if (st == SW_SPAWN_TIMEOUT) {
		fprintf(stderr,
			"%s: the child ran past its deadline (%u s, "
			"--child-timeout) and was killed: ",
			BENCH_CMD, o->child_timeout);
		sw_print_cmd(stderr, args);
	} else if (st == -1) {
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
		if (WIFEXITED(st) && WEXITSTATUS(st) == BENCH_EXIT_USAGE)
			usage = 1;
	} else {
		char *copy = strdup(out);

		if (!copy)
			bench_die("%s: out of memory\n", BENCH_CMD);
		rc = sw_parse_csv(o, copy, cols, tput, p99);
		free(copy);
		usage = rc == SW_BAD_COLUMN;
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
	return rc < 0 && usage ? SW_USAGE : rc;
}

/*
 * rdma: shm is the fastest provider here; when it does not open, the child
 * says so and prints a header without rows, and tcp;ofi_rxm is next.
 */
int sw_rdma_provider(struct sw_opts *o)
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
		if (rc == SW_USAGE)
			sw_usage_hint();
		if (rc <= 0)
			return rc; /* works, or failed: not a provider issue */
	}
	fprintf(stderr, "%s: neither shm nor tcp;ofi_rxm gave a result\n",
		BENCH_CMD);
	return -1;
}

/* ---- the sweep ---------------------------------------------------------- */

int sw_sweep(const struct sw_opts *o, struct sw_results *r)
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
			int rc = sw_point(o, o->b[b], p2, &r->cols,
					  sw_cell(r->tput, r, run, p2, b),
					  sw_cell(r->p99, r, run, p2, b), 0,
					  NULL);

			if (rc == SW_USAGE) {
				sw_usage_hint();
				return SW_USAGE;
			}
			if (rc) {
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
