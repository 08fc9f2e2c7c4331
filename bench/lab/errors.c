/* SPDX-License-Identifier: MIT */
/*
 * errors.c - dying on a broken invariant, and allocations that cannot fail.
 */
#include "lab/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *bench_zalloc(size_t size)
{
	void *p;
	size_t rounded =
		(size + BENCH_CACHELINE - 1) & ~(size_t)(BENCH_CACHELINE - 1);

	if (rounded == 0)
		rounded = BENCH_CACHELINE;
	p = aligned_alloc(BENCH_CACHELINE, rounded);
	if (!p)
		bench_die("bpbench: out of memory (%zu bytes)\n", size);
	memset(p, 0, rounded);
	return p;
}

void bench_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	exit(1);
}
