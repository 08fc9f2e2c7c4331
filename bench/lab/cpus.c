/* SPDX-License-Identifier: MIT */
/*
 * cpus.c - which CPUs this process may use, CPU lists, pinning.
 */
#include "lab/cpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/errors.h"

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

void bench_spawn_pinned(pthread_t *t, void *(*fn)(void *), void *arg, int cpu,
			const char *who)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	rc = bench_attr_pin(&attr, cpu);
	if (rc)
		bench_die("%s: cannot pin to CPU %d: %s\n", who, cpu,
			  strerror(rc));
	rc = pthread_create(t, &attr, fn, arg);
	if (rc)
		bench_die("%s: pthread_create: %s\n", who, strerror(rc));
	pthread_attr_destroy(&attr);
}
