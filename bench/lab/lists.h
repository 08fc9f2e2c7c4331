/* SPDX-License-Identifier: MIT */
/*
 * lists.h - numbers and lists from the command line. Each returns the count
 * (or 0 for a single value), or -1 on a syntax error or a value outside
 * [lo, hi]; the option parser (opts.h) turns -1 into the usage error.
 */
#ifndef BPBENCH_LISTS_H
#define BPBENCH_LISTS_H

#include <stdint.h>

int bench_parse_uint(const char *s, unsigned *out, unsigned lo, unsigned hi);
int bench_parse_uints(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi);
int bench_parse_pairs(const char *s, unsigned (*out)[2], int max, unsigned lo,
		      unsigned hi);			   /* "1x1,2x2" */
int bench_parse_names(char *s, const char **out, int max); /* splits s */
/* Sizes: digits and an optional K, M or G suffix (x 1024, 1024^2, 1024^3). */
int bench_parse_size(const char *s, uint64_t *out, uint64_t lo, uint64_t hi);
int bench_parse_sizes(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi); /* "64,4K,1M" */

#endif /* BPBENCH_LISTS_H */
