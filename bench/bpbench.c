/* SPDX-License-Identifier: MIT */
/*
 * bpbench - batchpipe's benchmark driver: picks a subcommand, and provides
 * the helpers the subcommands share (see bpbench.h).
 */
#include "bpbench.h"

#include "bp_config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct bench_subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
};

static const struct bench_subcommand bench_subcommands[] = {
	{"ring", bench_ring_main,
	 "bp_ring against mutex, spinlock, ck_ring and urcu wfcqueue"},
	{"pipeline", bench_pipeline_main,
	 "bp_pipeline end to end: throughput, latency, idle CPU, wake-up"},
	{"locks", bench_locks_main,
	 "mutex vs spinlock vs lock-free job hand-offs (the 150x write-up)"},
#if BP_HAVE_RDMA
	{"rdma", bench_rdma_main,
	 "RDMA stage against raw libfabric: throughput, CPU/op, latency"},
	{"rdma-fill", bench_rdma_fill_main,
	 "seed 000's random fill by bp-target, every byte verified"},
#endif
};

#define BENCH_NSUB (sizeof(bench_subcommands) / sizeof(bench_subcommands[0]))

static void bench_usage(FILE *f)
{
	fprintf(f, "usage: bpbench <subcommand> [options]   (bpbench "
		   "<subcommand> --help)\n"
		   "subcommands:\n");
	for (size_t i = 0; i < BENCH_NSUB; i++)
		fprintf(f, "  %-10s %s\n", bench_subcommands[i].name,
			bench_subcommands[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		bench_usage(stderr);
		return BENCH_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		bench_usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < BENCH_NSUB; i++)
		if (!strcmp(argv[1], bench_subcommands[i].name))
			return bench_subcommands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "bpbench: unknown subcommand '%s'\n", argv[1]);
	bench_usage(stderr);
	return BENCH_EXIT_USAGE;
}

/* ---- clock ------------------------------------------------------------ */

int64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000,
			      .tv_nsec = ns % 1000000000};

	/* restart after signals: the run length must not shrink silently */
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- CPUs ------------------------------------------------------------- */

int bench_cpus_available(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

int bench_cpus_parse(const char *s, int *cpus, int max)
{
	int avail[BENCH_MAX_CPUS];
	int navail = bench_cpus_available(avail, BENCH_MAX_CPUS);
	int n = 0;
	const char *p = s;

	if (navail <= 0)
		return -1;
	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10), hi;

		if (end == p || lo < 0)
			return -1;
		hi = lo;
		p = end;
		if (*p == '-') {
			p++;
			hi = strtol(p, &end, 10);
			if (end == p || hi < lo)
				return -1;
			p = end;
		}
		for (long c = lo; c <= hi; c++) {
			int ok = 0;

			for (int i = 0; i < navail; i++)
				ok |= avail[i] == c;
			if (!ok || n >= max)
				return -1;
			cpus[n++] = (int)c;
		}
		if (*p == ',')
			p++;
		else if (*p)
			return -1;
	}
	return n > 0 ? n : -1;
}

void bench_cpus_format(const int *cpus, int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && off < len; i++) {
		int w = snprintf(buf + off, len - off, "%s%d", i ? "," : "",
				 cpus[i]);

		if (w < 0)
			break;
		off += (size_t)w;
	}
}

int bench_attr_pin(pthread_attr_t *attr, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_attr_setaffinity_np(attr, sizeof(set), &set);
}

/* ---- statistics --------------------------------------------------------- */

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	int m = 0;

	/* NaN marks "not measured": compact them away before sorting */
	for (int i = 0; i < n; i++)
		if (!isnan(v[i]))
			v[m++] = v[i];
	if (m == 0)
		return NAN;
	qsort(v, (size_t)m, sizeof(*v), bench_cmp_double);
	return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

double bench_min(const double *v, int n)
{
	double r = NAN;

	for (int i = 0; i < n; i++)
		if (!isnan(v[i]) && (isnan(r) || v[i] < r))
			r = v[i];
	return r;
}

double bench_max(const double *v, int n)
{
	double r = NAN;

	for (int i = 0; i < n; i++)
		if (!isnan(v[i]) && (isnan(r) || v[i] > r))
			r = v[i];
	return r;
}

/* ---- command-line lists ------------------------------------------------- */

int bench_parse_uint(const char *s, unsigned *out, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int bench_parse_uints(const char *s, unsigned *out, int max, unsigned lo,
		      unsigned hi)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long v;

		if (*s < '0' || *s > '9' || n >= max)
			return -1;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || v < lo || v > hi)
			return -1;
		out[n++] = (unsigned)v;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n > 0 ? n : -1;
}

int bench_parse_pairs(const char *s, unsigned (*out)[2], int max, unsigned lo,
		      unsigned hi)
{
	int n = 0;

	while (*s) {
		char *end;
		unsigned long a, b;

		if (*s < '0' || *s > '9' || n >= max)
			return -1;
		a = strtoul(s, &end, 10);
		if (*end != 'x' && *end != 'X')
			return -1;
		s = end + 1;
		if (*s < '0' || *s > '9')
			return -1;
		b = strtoul(s, &end, 10);
		if (a < lo || a > hi || b < lo || b > hi)
			return -1;
		out[n][0] = (unsigned)a;
		out[n][1] = (unsigned)b;
		n++;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return n > 0 ? n : -1;
}

int bench_parse_names(char *s, const char **out, int max)
{
	int n = 0;
	char *save = NULL;

	for (char *t = strtok_r(s, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (n >= max)
			return -1;
		out[n++] = t;
	}
	return n > 0 ? n : -1;
}

/* ---- randomness, memory, errors ----------------------------------------- */

uint64_t bench_rand(uint64_t *state)
{
	/* splitmix64: good enough to shuffle, and reproducible from a seed */
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void bench_shuffle(int *v, int n, uint64_t *state)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(bench_rand(state) % (uint64_t)(i + 1));
		int t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
}

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

void bench_bad_option(const char *cmd, const struct option *longopts,
		      int optopt_, const char *word)
{
	const char *name = NULL;

	if (!optopt_) {
		fprintf(stderr, "%s: bad option '%s'\n", cmd, word);
		return;
	}
	for (const struct option *lo = longopts; lo->name; lo++)
		if (lo->val == optopt_)
			name = lo->name;
	if (name)
		fprintf(stderr, "%s: --%s needs a value\n", cmd, name);
	else
		fprintf(stderr, "%s: bad option '-%c'\n", cmd, optopt_);
}

void bench_bad_value(const char *cmd, const struct option *longopts, int opt,
		     const char *value)
{
	for (const struct option *lo = longopts; lo->name; lo++)
		if (lo->val == opt)
			fprintf(stderr, "%s: bad value '%s' for --%s\n", cmd,
				value, lo->name);
}
