/* SPDX-License-Identifier: MIT */
/*
 * sweep.c - `bpbench sweep`: throughput and p99 latency per batch size B
 * (at full load the p99 is queueing, which larger batches drain faster),
 * by running another bpbench subcommand once per point as a child process.
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
 *
 * This file is the subcommand and its options; sweep.h names the other parts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bp_config.h"
#include "lab/plot.h"
#include "sweep/sweep.h"

/* ---- options
   ------------------------------------------------------------ */

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

static int sw_set_child_timeout(struct bench_args *a, const char *arg)
{
	return bench_parse_uint(arg, &((struct sw_opts *)a->ctx)->child_timeout,
				1, SW_MAX_CHILD_TIMEOUT);
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
	{"child-timeout", "S", sw_set_child_timeout,
	 "a child still running after S seconds is killed (with\n"
	 "what it started) and stops the sweep (default 600)"},
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
		"A\nchild that exits non-zero stops the sweep (exit 1; exit 2 "
		"when the child\nexited 2, bad usage, or its CSV lacks the "
		"--tput, --p99 or --rows column)\nwith its stderr shown.\nOnly "
		"the first CSV block of the child is read; "
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
		"Progress goes to stderr. Exit status: 0 ok, 1 a child failed, "
		"ran past\n--child-timeout or its CSV was unusable (or no "
		"gnuplot with --out), 2 bad\nusage. SIGTERM or SIGINT kills "
		"the running child before the sweep dies.\n",
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
	o->child_timeout = SW_CHILD_TIMEOUT;
	bench_args_init(&o->a, &sw_cmd, o);
	/* `sweep PRESET ...`: the preset name comes first */
	if (argc > 1 && argv[1][0] != '-') {
		o->preset = sw_preset_find(argv[1]);
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
				&o->a,
				o->b_set ? "without a preset, give "
					   "--param NAME=LIST, not "
					   "--batches"
					 : "name a preset (ring, "
					   "pipeline, rdma) or give --param "
					   "NAME=LIST, --tput COL and "
					   "-- SUB");
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
	return bench_opts_ready(&o->a);
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
	if (o.preset && o.preset->rdma && (rc = sw_rdma_provider(&o)) != 0)
		return rc == SW_USAGE ? BENCH_EXIT_USAGE : 1;

	r.runs = (int)o.a.runs;
	r.nb = o.nb;
	r.np = o.np2 ? o.np2 : 1;
	ncell = (size_t)r.runs * (size_t)r.np * (size_t)r.nb;
	r.tput = bench_zalloc(sizeof(double) * ncell);
	r.p99 = bench_zalloc(sizeof(double) * ncell);
	for (size_t i = 0; i < ncell; i++)
		r.tput[i] = r.p99[i] = NAN;

	rc = sw_sweep(&o, &r);
	if (rc) {
		rc = rc == SW_USAGE ? BENCH_EXIT_USAGE : 1;
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
