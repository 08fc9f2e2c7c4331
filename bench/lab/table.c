/* SPDX-License-Identifier: MIT */
/*
 * table.c - aligned text tables (table.h).
 */
#include "lab/table.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "lab/errors.h"

void bench_table_init(struct bench_table *t, FILE *f)
{
	memset(t, 0, sizeof(*t));
	t->f = f;
}

void bench_table_col(struct bench_table *t, const char *head, int width,
		     enum bench_align align)
{
	int hw = (int)strlen(head);

	if (t->ncols == BENCH_TABLE_MAX_COLS)
		bench_die("bpbench: a table of more than %d columns\n",
			  BENCH_TABLE_MAX_COLS);
	t->col[t->ncols].head = head;
	t->col[t->ncols].width = width > hw ? width : hw;
	t->col[t->ncols].align = align;
	t->ncols++;
}

/* One cell in column t->next, then the separator or the end of the row. */
static void bench_table_cell(struct bench_table *t, const char *s)
{
	int c = t->next, w = t->col[c].width;

	if (c > 0)
		fputs("  ", t->f);
	if (t->col[c].align == BENCH_LEFT && c + 1 < t->ncols)
		fprintf(t->f, "%-*s", w, s);
	else if (t->col[c].align == BENCH_LEFT)
		fputs(s, t->f); /* no trailing blanks at the end of a line */
	else
		fprintf(t->f, "%*s", w, s);
	if (++t->next == t->ncols) {
		fputc('\n', t->f);
		t->next = 0;
	}
}

void bench_table_head(struct bench_table *t)
{
	t->next = 0;
	for (int c = 0; c < t->ncols; c++)
		bench_table_cell(t, t->col[c].head);
}

void bench_table_str(struct bench_table *t, const char *s)
{
	bench_table_cell(t, s);
}

void bench_table_num(struct bench_table *t, double v, int prec)
{
	char buf[64];

	if (isnan(v))
		bench_table_cell(t, "-");
	else {
		snprintf(buf, sizeof(buf), "%.*f", prec, v);
		bench_table_cell(t, buf);
	}
}

void bench_table_fmt(struct bench_table *t, const char *fmt, ...)
{
	char buf[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	bench_table_cell(t, buf);
}
