/* SPDX-License-Identifier: MIT */
/*
 * bpbench.h - what every bpbench subcommand shares: the subcommand entry
 * points, the clock, CPU pinning, statistics, list parsing and the retry
 * policy used when a queue is full or empty.
 *
 * The helpers live in bpbench.c so that each subcommand file holds only its
 * own experiment.
 */
#ifndef BPBENCH_H
#define BPBENCH_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>

/* Subcommands: argv[0] is the subcommand name; return the exit status. */
int bench_ring_main(int argc, char **argv);
int bench_pipeline_main(int argc, char **argv);
int bench_locks_main(int argc, char **argv);
/* Built only with the RDMA stage (BP_HAVE_RDMA in bp_config.h). */
int bench_rdma_main(int argc, char **argv);
int bench_rdma_fill_main(int argc, char **argv);

/* Exit status for bad command-line usage (after printing usage on stderr). */
#define BENCH_EXIT_USAGE 2

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);
void bench_sleep_ns(int64_t ns);

/*
 * CPUs. bench_cpus_available() lists the CPUs this process may run on
 * (sched_getaffinity); bench_cpus_parse() reads "0,1" or "0-3,6" and
 * refuses CPUs outside that set. Both return the count, or -1.
 */
#define BENCH_MAX_CPUS 1024
int bench_cpus_available(int *cpus, int max);
int bench_cpus_parse(const char *s, int *cpus, int max);
void bench_cpus_format(const int *cpus, int n, char *buf, size_t len);

/* Pin threads created with *attr to one CPU. Returns 0 or an errno. */
int bench_attr_pin(pthread_attr_t *attr, int cpu);

/* Statistics. bench_median() sorts v in place; NaN entries are skipped. */
double bench_median(double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);

/* Lists from the command line. Return the count, or -1 on a syntax error. */
int bench_parse_uints(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi);
int bench_parse_pairs(const char *s, unsigned (*out)[2], int max, unsigned lo,
		      unsigned hi);			   /* "1x1,2x2" */
int bench_parse_names(char *s, const char **out, int max); /* splits s */
int bench_parse_uint(const char *s, unsigned *out, unsigned lo, unsigned hi);

/*
 * getopt_long error reports for subcommand `cmd` ("bpbench ring"):
 * an unknown option or one missing its value (optopt, or the argv word),
 * and a bad value for option `opt`.
 */
struct option;
void bench_bad_option(const char *cmd, const struct option *longopts,
		      int optopt_, const char *word);
void bench_bad_value(const char *cmd, const struct option *longopts, int opt,
		     const char *value);

/* A small seeded generator, for the shuffles that interleave competitors. */
uint64_t bench_rand(uint64_t *state);
void bench_shuffle(int *v, int n, uint64_t *state);

/* Allocate cache-line aligned, zeroed memory; exits on failure (bench only). */
void *bench_zalloc(size_t size);

/* Print to stderr and exit(1): for broken invariants in a benchmark. */
void bench_die(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));

#define BENCH_CACHELINE 64

/* One CPU pause hint. */
static inline void bench_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * The retry policy every queue gets when it is full or empty: a few rounds of
 * pauses, then sched_yield() on each further failure. The yield is not
 * optional on this machine: with more threads than cores, a thread that only
 * spins keeps the one it waits for off the CPU and everything collapses.
 * Identical for all competitors, so it cannot favour one of them.
 */
#define BENCH_SPIN_ROUNDS      8
#define BENCH_PAUSES_PER_ROUND 16

struct bench_backoff {
	unsigned failures;
};

static inline void bench_backoff_reset(struct bench_backoff *b)
{
	b->failures = 0;
}

static inline void bench_backoff_wait(struct bench_backoff *b)
{
	if (b->failures < BENCH_SPIN_ROUNDS) {
		b->failures++;
		for (int i = 0; i < BENCH_PAUSES_PER_ROUND; i++)
			bench_cpu_pause();
	} else {
		sched_yield();
	}
}

#endif /* BPBENCH_H */
