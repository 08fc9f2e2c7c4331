/* SPDX-License-Identifier: MIT */
/*
 * lists.h - numbers and lists from the command line. Each returns the count
 * (or 0 for a single value), or -1 on a syntax error or a value outside
 * [lo, hi]; the option parser (opts.h) turns -1 into the usage error.
 */
#ifndef BPBENCH_LISTS_H
#define BPBENCH_LISTS_H

int bench_parse_uint(const char *s, unsigned *out, unsigned lo, unsigned hi);
int bench_parse_uints(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi);
int bench_parse_pairs(const char *s, unsigned (*out)[2], int max, unsigned lo,
		      unsigned hi);			   /* "1x1,2x2" */
int bench_parse_names(char *s, const char **out, int max); /* splits s */

#endif /* BPBENCH_LISTS_H */
