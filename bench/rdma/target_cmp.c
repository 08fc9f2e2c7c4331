/* SPDX-License-Identifier: MIT */
/*
 * rdma/target_cmp.c - `bpbench rdma-target`: is bp-target ever the
 * bottleneck? The raw libfabric write loop of `bpbench rdma` (rdma_raw.c,
 * through rdma_variant_raw.c: one thread, post 16, reap 16, depth 16 by
 * default, the same source buffers) writes into bp-target, started as
 * `bpbench rdma` starts it with its default progress wait (and, with
 * --target-waits, once more per wait named), and into bp-plain-target
 * (rdma/plain_target.c): the target a user writes with libfabric alone,
 * one endpoint, one region, one thread calling fi_cq_read all the time.
 * Every target is its own process, started once per provider.
 *
 * Interleaving. Per provider and write size, each target gets unmeasured
 * runs until writes flow (connections, page faults), then --runs measured
 * runs each, the targets in turn, the first one rotating from run to run
 * (A B, B A, ... with two). While one target is measured the others are
 * paused (SIGSTOP, SIGCONT after): on two CPUs a busy-polling target that
 * waits for its turn would take a core from the run, and from the other
 * target. (A bp-target paused longer than its --wedge-ms, 3 s, as with
 * --ms 3000, says on resuming that its rail thread was wedged and is back:
 * its clock ran while it was stopped.)
 *
 * A run: the loop writes for --ms, stops posting, ends when its last
 * completion is in; GB/s = bytes / (first post .. last completion), 1 GB =
 * 1e9 bytes. Then what landed is checked, as in `bpbench rdma`: every
 * write carries (run, lane, op) in its first and last 8 bytes, and both
 * words of up to 8 slots of the lane must be the tag of one of the last
 * writes of this run to that slot (bp-target answers bp_rdma_conn_query,
 * bp-plain-target its "peek" command). Any failure exits 1.
 *
 * Also per run, the target process's CPU over the run (from /proc: 10 ms
 * ticks), and per target, its CPU while idle: --idle-ms with no writes,
 * after its runs, so that the cost of the default progress wait when there
 * is nothing to do shows beside its speed.
 *
 * The claim (HEADLINE): bp-target with its default progress wait is never
 * the bottleneck, the raw loop into it >= 0.90 of the same loop into the
 * plain target (median of per-run ratios), at every size and provider.
 */
#include "rdma/rdma_harness.h"

#define TC_CMD	       "bpbench rdma-target"
#define TC_MAX_SIZES   8
#define TC_MAX_WAITS   4
#define TC_MAX_TARGETS (TC_MAX_WAITS + 2) /* default, waits, plain */
#define TC_TARGET      0.90
#define TC_SETTLE_NS   INT64_C(50000000) /* before the idle window */
/* warm-up runs go on until one moves more than this many credits' worth
 * of writes, or this many runs */
#define TC_WARM_OPS   4
#define TC_WARM_TRIES 50

struct tc_opts {
	struct bench_args a; /* runs, ms, output */
	const char *prov[RB_MAX_PROV];
	int nprov;
	char prov_buf[256];
	unsigned sizes[TC_MAX_SIZES];
	int nsizes;
	int waits[TC_MAX_WAITS]; /* enum bp_rdma_cq_wait, beyond the default */
	int nwaits;
	unsigned depth, post, reap, slots, idle_ms;
	const char *node;
};

/* One target's runs at one size. */
struct tc_cell {
	double gbps[RB_MAX_RUNS], mops[RB_MAX_RUNS], cpu_pct[RB_MAX_RUNS];
};

struct tc_prov {
	bool skipped;
	char note[300];
	bool ok[TC_MAX_TARGETS]; /* started */
	char tnote[TC_MAX_TARGETS][300];
	double idle_pct[TC_MAX_TARGETS];
	struct tc_cell cell[TC_MAX_TARGETS][TC_MAX_SIZES];
};

struct tc_report {
	const struct tc_opts *o;
	const struct tc_prov *pr; /* [nprov] */
};

/* Targets: 0 bp-target (its default), 1..nwaits bp-target --progress-wait,
 * then the plain one. */
static int tc_ntargets(const struct tc_opts *o)
{
	return o->nwaits + 2;
}

static bool tc_is_plain(const struct tc_opts *o, int k)
{
	return k == tc_ntargets(o) - 1;
}

static const char *tc_target_name(const struct tc_opts *o, int k, char *buf,
				  size_t len)
{
	if (k == 0)
		snprintf(buf, len, "bp-target");
	else if (tc_is_plain(o, k))
		snprintf(buf, len, "plain");
	else
		snprintf(buf, len, "bp-target:%s",
			 rb_cq_wait_word[o->waits[k - 1]]);
	return buf;
}

static void tc_pause(struct rb_target *t, bool pause)
{
	int rc = rt_pause(rb_target_pid(t), pause);

	if (rc)
		bench_die("%s: %s: the target process (pid %d): %s\n", TC_CMD,
			  pause ? "SIGSTOP" : "SIGCONT", (int)rb_target_pid(t),
			  strerror(-rc));
}

/* The raw loop's settings at one size: bpbench rdma's base point. */
static void tc_cfg(const struct tc_opts *o, unsigned size,
		   struct rb_pipe_cfg *c)
{
	struct rb_point p = {.size = size,
			     .post = o->post,
			     .reap = o->reap,
			     .depth = o->depth,
			     .workers = 1,
			     .rails = 1};

	memset(c, 0, sizeof(*c));
	c->workers = 1;
	c->rails = 1;
	c->depth = o->depth;
	c->post = o->post;
	c->reap = o->reap;
	c->P = 1;
	c->size = size;
	c->slots = o->slots;
	/* the raw loop's source buffers: as in bpbench rdma (--raw-buffers) */
	c->njobs = rb_pool_jobs(&p, 1);
	c->mode = RB_SINK_LOOP;
}

/* One measured run of the raw loop into target t; cell gets run r. */
static void tc_run(struct rb_raw *rw, struct rb_target *t, unsigned ms,
		   uint64_t outstanding, const char *what, struct tc_cell *cell,
		   int r)
{
	int64_t c0, c1, w0, w1;
	struct rb_result res;

	tc_pause(t, false);
	c0 = rb_target_cpu_ns(t);
	w0 = bench_now_ns();
	res = rb_raw_run(rw, t, ms, outstanding, what);
	w1 = bench_now_ns();
	c1 = rb_target_cpu_ns(t);
	tc_pause(t, true);
	if (cell) {
		cell->gbps[r] = res.gbps;
		cell->mops[r] = res.mops;
		cell->cpu_pct[r] =
			c0 >= 0 && c1 >= 0
				? (double)(c1 - c0) / (double)(w1 - w0) * 100
				: NAN;
	}
}

/* Every started target, at one size: warm-up, then the interleaved runs. */
static void tc_size(const struct tc_opts *o, struct rb_target *t,
		    struct tc_prov *pr, int pv, int si)
{
	unsigned size = o->sizes[si];
	int n = tc_ntargets(o), order[TC_MAX_TARGETS], m = 0;
	struct rb_raw rw[TC_MAX_TARGETS];
	struct rb_pipe_cfg c;
	char what[200], name[40], why[256], sz[16];
	unsigned warm = o->a.ms / 4 < 20 ? 20 : o->a.ms / 4;
	/* one thread, one rail: only its own credits can be in flight */
	uint64_t outstanding = o->depth;

	tc_cfg(o, size, &c);
	rb_size_str(size, sz, sizeof(sz));
	fprintf(stderr, "%s: %s size %s\n", TC_CMD, o->prov[pv], sz);
	for (int k = 0; k < n; k++) {
		if (!pr->ok[k])
			continue;
		order[m++] = k;
		if (rb_raw_open(&rw[k], &t[k], &c, false, why, sizeof(why)))
			bench_die("%s: %s: the raw loop into %s: %s\n", TC_CMD,
				  o->prov[pv],
				  tc_target_name(o, k, name, sizeof(name)),
				  why);
	}
	/*
	 * Unmeasured runs until writes flow: the provider connects on the
	 * first write (tcp;ofi_rxm: 50-150 ms here), and a run that spends
	 * its time connecting says nothing about the target.
	 */
	for (int j = 0; j < m; j++) {
		int k = order[j], tries = 0;

		snprintf(what, sizeof(what), "%s %s %s warm-up", o->prov[pv],
			 sz, tc_target_name(o, k, name, sizeof(name)));
		do
			tc_run(&rw[k], &t[k], warm, outstanding, what, NULL, 0);
		while (rw[k].lanes[0].posted <= TC_WARM_OPS * o->depth &&
		       ++tries < TC_WARM_TRIES);
	}
	for (int r = 0; r < (int)o->a.runs; r++)
		for (int j = 0; j < m; j++) {
			int k = order[(r + j) % m];

			snprintf(what, sizeof(what), "%s %s %s run %d",
				 o->prov[pv], sz,
				 tc_target_name(o, k, name, sizeof(name)), r);
			tc_run(&rw[k], &t[k], o->a.ms, outstanding, what,
			       &pr->cell[k][si], r);
		}
	/* the endpoints close with every target running, as they opened */
	for (int j = 0; j < m; j++)
		tc_pause(&t[order[j]], false);
	for (int j = 0; j < m; j++)
		rb_raw_close(&rw[order[j]]);
	for (int j = 0; j < m; j++)
		tc_pause(&t[order[j]], true);
}

/* Each target alone, running with nothing to do: its CPU, % of a core. */
static void tc_idle(const struct tc_opts *o, struct rb_target *t,
		    struct tc_prov *pr)
{
	for (int k = 0; k < tc_ntargets(o); k++) {
		int64_t c0, c1, w0, w1;

		if (!pr->ok[k])
			continue;
		tc_pause(&t[k], false);
		bench_sleep_ns(TC_SETTLE_NS);
		c0 = rb_target_cpu_ns(&t[k]);
		w0 = bench_now_ns();
		bench_sleep_ns((int64_t)o->idle_ms * 1000000);
		c1 = rb_target_cpu_ns(&t[k]);
		w1 = bench_now_ns();
		tc_pause(&t[k], true);
		pr->idle_pct[k] =
			c0 >= 0 && c1 >= 0
				? (double)(c1 - c0) / (double)(w1 - w0) * 100
				: NAN;
	}
}

/* Start every target of one provider, each paused once it is up. */
static void tc_start_targets(const struct tc_opts *o, int pv, const char *node,
			     uint64_t len, struct rb_target *t,
			     struct tc_prov *pr)
{
	char name[40];

	for (int k = 0; k < tc_ntargets(o); k++) {
		bool plain = tc_is_plain(o, k);
		int rc;

		rb_target_wait = k == 0 || plain ? -1 : o->waits[k - 1];
		rc = rb_target_start(&t[k], o->prov[pv], node, 1, len,
				     plain ? RB_TARGET_PLAIN : RB_TARGET_DAEMON,
				     pr->tnote[k], sizeof(pr->tnote[k]));
		tc_target_name(o, k, name, sizeof(name));
		if (rc) {
			fprintf(stderr, "%s: %s: %s: not measured: %s\n",
				TC_CMD, o->prov[pv], name, pr->tnote[k]);
			continue;
		}
		pr->ok[k] = true;
		fprintf(stderr, "%s: %s: %s is pid %d\n", TC_CMD, o->prov[pv],
			name, (int)rb_target_pid(&t[k]));
		tc_pause(&t[k], true);
	}
	rb_target_wait = -1;
}

static void tc_provider(const struct tc_opts *o, int pv, struct tc_prov *pr)
{
	const char *node = strcmp(o->prov[pv], "shm") ? o->node : NULL;
	struct rb_target t[TC_MAX_TARGETS];
	unsigned largest = 0;
	int plain = tc_ntargets(o) - 1, rc;

	for (int k = 0; k < TC_MAX_TARGETS; k++)
		for (int s = 0; s < TC_MAX_SIZES; s++)
			for (int r = 0; r < RB_MAX_RUNS; r++)
				pr->cell[k][s].gbps[r] =
					pr->cell[k][s].mops[r] =
						pr->cell[k][s].cpu_pct[r] = NAN;
	for (int k = 0; k < TC_MAX_TARGETS; k++)
		pr->idle_pct[k] = NAN;
	rc = rr_provider_probe(o->prov[pv], node);
	if (rc) {
		pr->skipped = true;
		snprintf(pr->note, sizeof(pr->note),
			 "the provider does not open here (fi_getinfo: %s)",
			 fi_strerror(-rc));
		fprintf(stderr, "%s: %s: skipped, %s\n", TC_CMD, o->prov[pv],
			pr->note);
		return;
	}
	for (int s = 0; s < o->nsizes; s++)
		if (o->sizes[s] > largest)
			largest = o->sizes[s];
	tc_start_targets(o, pv, node, (uint64_t)o->slots * largest, t, pr);
	if (!pr->ok[0] || !pr->ok[plain]) {
		pr->skipped = true;
		snprintf(pr->note, sizeof(pr->note), "%s",
			 pr->tnote[pr->ok[0] ? plain : 0]);
		fprintf(stderr, "%s: %s: skipped, %s\n", TC_CMD, o->prov[pv],
			pr->note);
	} else {
		for (int s = 0; s < o->nsizes; s++)
			tc_size(o, t, pr, pv, s);
		tc_idle(o, t, pr);
	}
	for (int k = 0; k < tc_ntargets(o); k++)
		if (pr->ok[k])
			rb_target_close(&t[k]); /* lets a paused one go on */
}

/* ---- output -------------------------------------------------------------- */

static void tc_print_csv(FILE *f, const void *ctx)
{
	const struct tc_report *rep = ctx;
	const struct tc_opts *o = rep->o;
	char name[40];

	fprintf(f, "provider,size,target,run,GBps,Mops,target_cpu_pct\n");
	for (int pv = 0; pv < o->nprov; pv++) {
		const struct tc_prov *pr = &rep->pr[pv];

		for (int s = 0; s < o->nsizes && !pr->skipped; s++)
			for (int r = 0; r < (int)o->a.runs; r++)
				for (int k = 0; k < tc_ntargets(o); k++) {
					const struct tc_cell *c =
						&pr->cell[k][s];

					if (!pr->ok[k])
						continue;
					fprintf(f, "%s,%u,%s,%d,%.4f,%.4f,",
						o->prov[pv], o->sizes[s],
						tc_target_name(o, k, name,
							       sizeof(name)),
						r, c->gbps[r], c->mops[r]);
					bench_csv_num(f, c->cpu_pct[r], 1);
					fputc('\n', f);
				}
	}
	fprintf(f, "\nprovider,target,idle_cpu_pct\n");
	for (int pv = 0; pv < o->nprov; pv++)
		for (int k = 0; k < tc_ntargets(o); k++) {
			if (rep->pr[pv].skipped || !rep->pr[pv].ok[k])
				continue;
			fprintf(f, "%s,%s,", o->prov[pv],
				tc_target_name(o, k, name, sizeof(name)));
			bench_csv_num(f, rep->pr[pv].idle_pct[k], 1);
			fputc('\n', f);
		}
}

/* The default bp-target over the plain one at size s: median of per-run
 * ratios (the verdict's), and the ratio of the medians. */
static double tc_ratio(const struct tc_opts *o, const struct tc_prov *pr, int k,
		       int s, double *of_medians)
{
	const struct tc_cell *a = &pr->cell[k][s];
	const struct tc_cell *b = &pr->cell[tc_ntargets(o) - 1][s];
	int runs = (int)o->a.runs;

	*of_medians = rb_med(a->gbps, runs) / rb_med(b->gbps, runs);
	return rb_med_ratio(a->gbps, b->gbps, runs);
}

static void tc_print_rows(FILE *f, const struct tc_opts *o,
			  const struct tc_prov *pr, int pv)
{
	int runs = (int)o->a.runs;
	char name[40], sz[16];
	struct bench_table tb;

	bench_table_init(&tb, f);
	bench_table_col(&tb, "provider", 12, BENCH_LEFT);
	bench_table_col(&tb, "size", 5, BENCH_RIGHT);
	bench_table_col(&tb, "target", 20, BENCH_LEFT);
	bench_table_col(&tb, "GB/s median [min-max]", 24, BENCH_RIGHT);
	bench_table_col(&tb, "cpu %", 6, BENCH_RIGHT);
	bench_table_col(&tb, "/plain", 7, BENCH_RIGHT);
	bench_table_col(&tb, "per run", 7, BENCH_RIGHT);
	bench_table_head(&tb);
	for (int s = 0; s < o->nsizes; s++)
		for (int k = 0; k < tc_ntargets(o); k++) {
			const struct tc_cell *c = &pr->cell[k][s];
			double tmp[RB_MAX_RUNS], lo, hi, m, om, rr;

			if (!pr->ok[k])
				continue;
			memcpy(tmp, c->gbps, sizeof(double) * (size_t)runs);
			m = bench_median_range(tmp, runs, &lo, &hi);
			bench_table_str(&tb, o->prov[pv]);
			bench_table_str(
				&tb, rb_size_str(o->sizes[s], sz, sizeof(sz)));
			bench_table_str(
				&tb, tc_target_name(o, k, name, sizeof(name)));
			bench_table_fmt(&tb, "%.3f [%.3f-%.3f]", m, lo, hi);
			bench_table_num(&tb, rb_med(c->cpu_pct, runs), 0);
			if (tc_is_plain(o, k)) {
				bench_table_str(&tb, "");
				bench_table_str(&tb, "");
				continue;
			}
			rr = tc_ratio(o, pr, k, s, &om);
			bench_table_num(&tb, om, 3);
			bench_table_num(&tb, rr, 3);
		}
}

static void tc_print_idle(FILE *f, const struct tc_opts *o,
			  const struct tc_report *rep)
{
	char name[40];

	fprintf(f,
		"\nidle CPU: %% of one core, each target alone for %u ms with "
		"nothing to do,\nafter its runs\n",
		o->idle_ms);
	for (int pv = 0; pv < o->nprov; pv++) {
		const struct tc_prov *pr = &rep->pr[pv];

		if (pr->skipped)
			continue;
		fprintf(f, "  %-12s", o->prov[pv]);
		for (int k = 0; k < tc_ntargets(o); k++)
			if (pr->ok[k])
				fprintf(f, "  %s %.1f",
					tc_target_name(o, k, name,
						       sizeof(name)),
					pr->idle_pct[k]);
		fprintf(f, "\n");
	}
}

static void tc_headline(FILE *f, const struct tc_opts *o,
			const struct tc_report *rep)
{
	int runs = (int)o->a.runs, plain = tc_ntargets(o) - 1;

	fprintf(f,
		"\nHEADLINE (target: the raw loop into bp-target, its default "
		"progress wait,\n>= %.2f of the same loop into "
		"bp-plain-target; "
		"medians of per-run ratios)\n",
		TC_TARGET);
	for (int pv = 0; pv < o->nprov; pv++) {
		const struct tc_prov *pr = &rep->pr[pv];

		for (int s = 0; s < o->nsizes; s++) {
			char sz[16];
			double om, rr;

			rb_size_str(o->sizes[s], sz, sizeof(sz));
			fprintf(f, "  %s %s: ", o->prov[pv], sz);
			if (pr->skipped) {
				fprintf(f, "not measured (%s)\n", pr->note);
				continue;
			}
			rr = tc_ratio(o, pr, 0, s, &om);
			/* three digits: a ratio never rounds to the bar
			 * beside the opposite verdict */
			fprintf(f,
				"%s (%.3f; bp-target %.3f GB/s, plain %.3f "
				"GB/s; idle CPU %.1f %% vs %.1f %%)\n",
				isnan(rr)	  ? "n/a"
				: rr >= TC_TARGET ? "met"
						  : "MISSED",
				rr, rb_med(pr->cell[0][s].gbps, runs),
				rb_med(pr->cell[plain][s].gbps, runs),
				pr->idle_pct[0], pr->idle_pct[plain]);
		}
	}
}

static void tc_print_table(FILE *f, const void *ctx)
{
	const struct tc_report *rep = ctx;
	const struct tc_opts *o = rep->o;

	fprintf(f,
		"rdma-target: the raw loop (1 thread, post %u, reap %u, depth "
		"%u) into each target,\n%u interleaved runs of %u ms, the "
		"other targets paused. cpu %%: the target\nprocess's CPU over "
		"a run, %% of one core (median). /plain: median over\nplain's "
		"median; per run: median of per-run ratios.\n\n",
		o->post, o->reap, o->depth, o->a.runs, o->a.ms);
	for (int pv = 0; pv < o->nprov; pv++) {
		if (rep->pr[pv].skipped)
			fprintf(f, "%-12s skipped: %s\n", o->prov[pv],
				rep->pr[pv].note);
		else
			tc_print_rows(f, o, &rep->pr[pv], pv);
	}
	tc_print_idle(f, o, rep);
	tc_headline(f, o, rep);
}

/* ---- options ------------------------------------------------------------- */

static int tc_set_providers(struct bench_args *a, const char *arg)
{
	struct tc_opts *o = a->ctx;

	return rb_copy_providers(o->prov_buf, sizeof(o->prov_buf), arg);
}

static int tc_set_sizes(struct bench_args *a, const char *arg)
{
	struct tc_opts *o = a->ctx;

	o->nsizes = rb_parse_sizes(arg, o->sizes, TC_MAX_SIZES);
	return o->nsizes < 0 ? -1 : 0;
}

static int tc_set_waits(struct bench_args *a, const char *arg)
{
	struct tc_opts *o = a->ctx;
	char buf[128];
	const char *names[TC_MAX_WAITS + 1];
	int n;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	n = bench_parse_names(buf, names, TC_MAX_WAITS + 1);
	if (n < 1 || n > TC_MAX_WAITS)
		return -1;
	o->nwaits = 0;
	for (int i = 0; i < n; i++) {
		int w = rb_cq_wait_parse(names[i]);

		if (w < 0)
			return -1;
		for (int j = 0; j < o->nwaits; j++)
			if (o->waits[j] == w)
				return -1; /* twice */
		o->waits[o->nwaits++] = w;
	}
	return 0;
}

static int tc_set_node(struct bench_args *a, const char *arg)
{
	((struct tc_opts *)a->ctx)->node = arg;
	return 0;
}

#define TC_UINT_OPT(fn, field, lo, hi)                                         \
	static int fn(struct bench_args *a, const char *arg)                   \
	{                                                                      \
		return bench_parse_uint(                                       \
			arg, &((struct tc_opts *)a->ctx)->field, lo, hi);      \
	}

TC_UINT_OPT(tc_set_depth, depth, 1, 4096)

TC_UINT_OPT(tc_set_post, post, 1, 4096)

TC_UINT_OPT(tc_set_reap, reap, 1, 1024)

TC_UINT_OPT(tc_set_slots, slots, 1, RB_MAX_SLOTS)

TC_UINT_OPT(tc_set_idle_ms, idle_ms, 10, 600000)

static const struct bench_opt tc_options[] = {
	{"providers", "LIST", tc_set_providers,
	 "libfabric providers (default shm,tcp;ofi_rxm; quote the ';';\n"
	 "one that does not open is skipped with a note)"},
	{"sizes", "LIST", tc_set_sizes,
	 "write sizes, K/M suffixes, multiples of 8 (default 64K,1M)"},
	{"target-waits", "LIST", tc_set_waits,
	 "bp-target's progress waits to measure besides its default:\n"
	 "busy, spin-sleep, event, auto (a bp-target each; default\n"
	 "none; one a provider cannot do is skipped with a note)"},
	BENCH_OPT_RUNS("measured runs per target and size (default 9; "
		       "--quick 3)"),
	BENCH_OPT_MS("writing time per run (default 200; --quick 100)"),
	{"idle-ms", "N", tc_set_idle_ms,
	 "each target's idle CPU window (default 500)"},
	{"depth", "N", tc_set_depth,
	 "writes in flight (default 16, as bpbench rdma's base point)"},
	{"post", "N", tc_set_post, "writes per FI_MORE chain (default 16)"},
	{"reap", "N", tc_set_reap, "completions per fi_cq_read (default 16)"},
	{"slots", "N", tc_set_slots,
	 "target slots, each one write (default 16; region = slots x\n"
	 "the largest size)"},
	{"node", "ADDR", tc_set_node,
	 "address to bind for non-shm providers (127.0.0.1)"},
	{"verbose", NULL, rb_opt_verbose,
	 "per run (warm-ups too), the raw thread's writes, EAGAINs\n"
	 "and empty completion reads (stderr)"},
	BENCH_OPT_QUICK("3 runs of 100 ms (about 15 s)"),
	BENCH_OPT_CSV("CSV on stdout: provider,size,target,run,GBps,Mops,\n"
		      "target_cpu_pct; after an empty line provider,target,\n"
		      "idle_cpu_pct"),
	BENCH_OPT_OUT,
	BENCH_OPT_NAME,
	BENCH_OPT_HELP,
	BENCH_OPT_END,
};

static const struct bench_cmd tc_cmd = {
	.name = "rdma-target",
	.about = "The raw libfabric write loop of bpbench rdma into "
		 "bp-target (its default\nprogress wait, and --target-waits) "
		 "and into bp-plain-target, a plain busy-\npolling target "
		 "written with libfabric alone; interleaved runs, the "
		 "others\npaused; GB/s, the target's CPU in the runs and "
		 "idle, and the verdict:\nbp-target >= 0.90 of the plain "
		 "target at every size and provider.\n",
	.opts = tc_options,
	.epilog = "Every run is verified (completions, the data in the "
		  "target); exit 1 if one\nfails or nothing was measured, 2 "
		  "bad usage; a MISSED verdict is a result,\nnot a failure. "
		  "Sets FI_TCP_IFACE=lo unless set.\n",
	.max_runs = RB_MAX_RUNS,
};

static int tc_parse(int argc, char **argv, struct tc_opts *o)
{
	int rc;

	memset(o, 0, sizeof(*o));
	bench_args_init(&o->a, &tc_cmd, o);
	o->a.runs = 9;
	o->a.ms = 200;
	o->depth = RB_BASE_DEPTH;
	o->post = RB_BASE_POST;
	o->reap = RB_BASE_REAP;
	o->slots = RB_DEF_SLOTS;
	o->idle_ms = 500;
	o->node = "127.0.0.1";
	strcpy(o->prov_buf, "shm,tcp;ofi_rxm");
	o->nsizes = 2, o->sizes[0] = 65536, o->sizes[1] = 1u << 20;
	rc = bench_opts_parse(&o->a, argc, argv);
	if (rc != BENCH_OPTS_RUN)
		return rc;
	o->nprov = bench_parse_names(o->prov_buf, o->prov, RB_MAX_PROV);
	if (o->nprov < 1)
		return bench_usage_error(&o->a, "bad --providers");
	if (o->a.quick) {
		if (!o->a.runs_set)
			o->a.runs = 3;
		if (!o->a.ms_set)
			o->a.ms = 100;
	}
	return bench_opts_ready(&o->a);
}

int bench_rdma_target_main(int argc, char **argv)
{
	struct tc_opts o;
	struct tc_prov *pr;
	struct tc_report rep;
	int64_t t0;
	int status, measured = 0;

	status = tc_parse(argc, argv, &o);
	if (status != BENCH_OPTS_RUN)
		return status;
	rb_cmd_name = TC_CMD; /* the harness's messages */
	/* loopback only: libfabric's tcp would otherwise pick eth0 */
	setenv("FI_TCP_IFACE", "lo", 0);
	t0 = bench_now_ns();
	pr = bench_zalloc(sizeof(*pr) * (size_t)o.nprov);
	for (int pv = 0; pv < o.nprov; pv++) {
		tc_provider(&o, pv, &pr[pv]);
		measured += !pr[pv].skipped;
	}
	rb_print_done(t0, measured, o.nprov);
	rep = (struct tc_report){&o, pr};
	status = bench_emit(&o.a, tc_print_csv, tc_print_table, NULL, &rep);
	if (!measured && status == 0)
		status = 1;
	free(pr);
	return status;
}
