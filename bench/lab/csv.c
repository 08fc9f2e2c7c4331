/* SPDX-License-Identifier: MIT */
/*
 * csv.c - an experiment's output onto stdout, and its CSV into --out DIR.
 */
#include "lab/csv.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "lab/opts.h"
#include "lab/plot.h"

static int bench_csv_file(const struct bench_args *a, bench_print_fn *csv,
			  const void *ctx)
{
	char path[4096];
	FILE *f;
	int bad;

	if (bench_mkdir_p(a->prog, a->out))
		return 1;
	if (snprintf(path, sizeof(path), "%s/%s.csv", a->out, a->name) >=
	    (int)sizeof(path)) {
		fprintf(stderr, "%s: --out path too long\n", a->prog);
		return 1;
	}
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "%s: cannot write %s: %s\n", a->prog, path,
			strerror(errno));
		return 1;
	}
	csv(f, ctx);
	/* a full disk shows up at the flush, not at the printf */
	bad = ferror(f);
	if (fclose(f) || bad) {
		fprintf(stderr, "%s: writing %s failed\n", a->prog, path);
		return 1;
	}
	fprintf(stderr, "%s: wrote %s\n", a->prog, path);
	return 0;
}

int bench_emit(const struct bench_args *a, bench_print_fn *csv,
	       bench_print_fn *table, bench_print_fn *json, const void *ctx)
{
	if (a->csv)
		csv(stdout, ctx);
	else if (a->json && json)
		json(stdout, ctx);
	else
		table(stdout, ctx);
	fflush(stdout);
	return a->out ? bench_csv_file(a, csv, ctx) : 0;
}

void bench_csv_num(FILE *f, double v, int prec)
{
	if (!isnan(v))
		fprintf(f, "%.*f", prec, v);
}
