/* SPDX-License-Identifier: MIT */
/*
 * csv.h - where an experiment's output goes. Every experiment has a CSV
 * printer and a human one (a table); --csv puts the CSV on stdout instead
 * of the table (--json, where offered, the JSON), and --out DIR writes the
 * same CSV to DIR/NAME.csv as well, so that one run gives both.
 *
 * A CSV block is a header line then rows with as many fields; a subcommand
 * may print several blocks one after another, each with its own header
 * (bench/README.md lists them). A value that was not measured is an empty
 * field, never "nan".
 */
#ifndef BPBENCH_CSV_H
#define BPBENCH_CSV_H

#include <stdio.h>

struct bench_args;

/* A printer of one experiment's results onto f; ctx is the experiment's. */
typedef void bench_print_fn(FILE *f, const void *ctx);

/*
 * The output step of a subcommand: csv (with --csv) or json (with --json)
 * or table onto stdout, then, with --out, csv into DIR/NAME.csv. json may
 * be NULL where there is no --json. Returns 0, or 1 when the file could
 * not be written (with a message), which the subcommand returns.
 */
int bench_emit(const struct bench_args *a, bench_print_fn *csv,
	       bench_print_fn *table, bench_print_fn *json, const void *ctx);

/* One number with prec decimals, or nothing for NaN (an empty field). */
void bench_csv_num(FILE *f, double v, int prec);

#endif /* BPBENCH_CSV_H */
