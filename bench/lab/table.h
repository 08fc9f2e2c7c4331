/* SPDX-License-Identifier: MIT */
/*
 * table.h - aligned text tables for the human output: columns with a
 * header and a width, text left-aligned, numbers right-aligned, "-" for a
 * number that was not measured (NaN). Cells are given row by row, left to
 * right; the row ends by itself after its last column.
 *
 *	struct bench_table t;
 *	bench_table_init(&t, stdout);
 *	bench_table_col(&t, "PxC", 5, BENCH_LEFT);
 *	bench_table_col(&t, "Mitems/s", 0, BENCH_RIGHT); // width of header
 *	bench_table_head(&t);
 *	bench_table_str(&t, "1x1");
 *	bench_table_num(&t, 12.5, 2);
 */
#ifndef BPBENCH_TABLE_H
#define BPBENCH_TABLE_H

#include <stdio.h>

#define BENCH_TABLE_MAX_COLS 32

enum bench_align { BENCH_LEFT, BENCH_RIGHT };

struct bench_table {
	FILE *f;
	int ncols, next; /* next: the column the next cell goes into */
	struct {
		const char *head;
		int width;
		enum bench_align align;
	} col[BENCH_TABLE_MAX_COLS];
};

void bench_table_init(struct bench_table *t, FILE *f);

/* Add a column; width 0 (or less than the header's): the header's. */
void bench_table_col(struct bench_table *t, const char *head, int width,
		     enum bench_align align);

/* The header line. */
void bench_table_head(struct bench_table *t);

/* The next cell: text, a number with prec decimals, printf-formatted. */
void bench_table_str(struct bench_table *t, const char *s);
void bench_table_num(struct bench_table *t, double v, int prec);
void bench_table_fmt(struct bench_table *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* BPBENCH_TABLE_H */
