/* SPDX-License-Identifier: MIT */
/*
 * csvread.h - reading a CSV that another bpbench subcommand printed (the
 * format csv.h writes: a header line, rows with as many fields, no quoting,
 * an empty field for a value that was not measured). The text is split in
 * place: every returned string points into it.
 */
#ifndef BPBENCH_CSVREAD_H
#define BPBENCH_CSVREAD_H

/*
 * The next line of *p, NUL-terminated in place with a trailing '\r'
 * dropped; *p moves past it. NULL at the end of the text.
 */
char *bench_csv_line(char **p);

/* Split line s at commas in place into f[]; the field count, or -1 when
 * there are more than max. */
int bench_csv_split(char *s, char **f, int max);

/* The index of column `name` in header h[0..n), or -1 (also for NULL). */
int bench_csv_col(char *const *h, int n, const char *name);

/* A field as a finite number: 0, or -1 for an empty or malformed one. */
int bench_csv_number(const char *s, double *v);

#endif /* BPBENCH_CSVREAD_H */
