/* SPDX-License-Identifier: MIT */
/*
 * errors.h - how a benchmark fails: a broken invariant (a lost item, a
 * failed verification, a resource it cannot get) is fatal, with a message,
 * exit status 1; bad command-line usage is exit status 2 (opts.h).
 */
#ifndef BPBENCH_ERRORS_H
#define BPBENCH_ERRORS_H

#include <stddef.h>

/* Exit status for bad command-line usage (after printing usage on stderr). */
#define BENCH_EXIT_USAGE 2

#define BENCH_CACHELINE 64

/* Print to stderr and exit(1). */
void bench_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

/* Cache-line aligned, zeroed memory; dies on failure. */
void *bench_zalloc(size_t size);

#endif /* BPBENCH_ERRORS_H */
