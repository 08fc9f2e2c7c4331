/* SPDX-License-Identifier: MIT */
/*
 * cpus.h - CPUs: which ones this process may run on, CPU lists from the
 * command line, and pinning threads to one of them.
 */
#ifndef BPBENCH_CPUS_H
#define BPBENCH_CPUS_H

#include <pthread.h>
#include <sched.h>
#include <stddef.h>

#define BENCH_MAX_CPUS 1024

/*
 * bench_cpus_available() lists the CPUs this process may run on
 * (sched_getaffinity); bench_cpus_parse() reads "0,1" or "0-3,6" and
 * refuses CPUs outside that set. Both return the count, or -1.
 */
int bench_cpus_available(int *cpus, int max);
int bench_cpus_parse(const char *s, int *cpus, int max);

/* "0,1,2" into buf (truncated to len). */
void bench_cpus_format(const int *cpus, int n, char *buf, size_t len);

/* Pin threads created with *attr to one CPU. Returns 0 or an errno. */
int bench_attr_pin(pthread_attr_t *attr, int cpu);

/*
 * Start fn(arg) in a thread pinned to cpu; on a failure bench_die with
 * `who` ("bpbench locks") in the message.
 */
void bench_spawn_pinned(pthread_t *t, void *(*fn)(void *), void *arg, int cpu,
			const char *who);

#endif /* BPBENCH_CPUS_H */
