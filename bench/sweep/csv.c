/* SPDX-License-Identifier: MIT */
/*
 * sweep/csv.c - reading a child's CSV: the first block, the rows that pass
 * the --rows filter, their throughput and p99.
 */
#include <math.h>
#include <string.h>

#include "sweep/sweep.h"

/*
 * Read the first CSV block of `text` (the header, then rows up to a blank
 * line or a line with another field count: pipeline appends tagged blocks
 * after its rows). Rows that pass the filter give the throughput (median)
 * and p99 (largest; NaN when the column is missing or empty everywhere).
 * Returns 0, -2 when no row passed (no message), SW_BAD_COLUMN after a
 * message when a column the options name is not in the header (bad usage),
 * or -1 after a message. Messages begin on a line of their own.
 */
int sw_parse_csv(const struct sw_opts *o, char *text, struct sw_cols *cols,
		 double *tput, double *p99)
{
	char *h[SW_MAX_COLS], *f[SW_MAX_COLS], *line, *p = text;
	static double tv[SW_MAX_ROWS], pv[SW_MAX_ROWS];
	int nh, ti, pi = -1, fi = -1, nrows = 0, lineno = 1;

	line = bench_csv_line(&p);
	if (!line || !*line) {
		sw_end_progress();
		fprintf(stderr, "%s: the child printed no CSV\n", BENCH_CMD);
		return -1;
	}
	nh = bench_csv_split(line, h, SW_MAX_COLS);
	if (nh < 0) {
		sw_end_progress();
		fprintf(stderr, "%s: the child's CSV has over %d columns\n",
			BENCH_CMD, SW_MAX_COLS);
		return -1;
	}
	ti = bench_csv_col(h, nh, o->tput);
	if (ti < 0) {
		sw_end_progress();
		fprintf(stderr,
			"%s: bad value '%s' for --tput: no such column in the "
			"child's CSV header\n",
			BENCH_CMD, o->tput);
		return SW_BAD_COLUMN;
	}
	for (int i = 0; i < 2 && pi < 0; i++)
		pi = bench_csv_col(h, nh, o->p99[i]);
	if (pi < 0 && o->p99_user) {
		sw_end_progress();
		fprintf(stderr,
			"%s: bad value '%s' for --p99: no such column in the "
			"child's CSV header\n",
			BENCH_CMD, o->p99_user);
		return SW_BAD_COLUMN;
	}
	if (o->rows_val) {
		fi = bench_csv_col(h, nh, o->rows_col);
		if (fi < 0) {
			sw_end_progress();
			fprintf(stderr,
				"%s: bad value for --rows: no column '%s' in "
				"the child's CSV header\n",
				BENCH_CMD, o->rows_col);
			return SW_BAD_COLUMN;
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
