/* SPDX-License-Identifier: MIT */
/*
 * rdma_target.h - what `bpbench rdma` and `bpbench rdma-fill` need around
 * the target: bp-target as a child process (found next to bpbench, started
 * on an ephemeral port, killed at exit, also when the benchmark dies), and
 * CPU time of threads the benchmark did not create itself (the pipeline's
 * workers and sink, a node's progress threads) or of another process.
 */
#ifndef BPBENCH_RDMA_TARGET_H
#define BPBENCH_RDMA_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rt_daemon {
	pid_t pid;
	char host[64];
	unsigned port;
	char provider[64];
	unsigned rails;
};

/*
 * The bp-target binary of this build: ../target/bp-target relative to the
 * directory of /proc/self/exe. Returns 0, or -ENOENT when it is not there.
 */
int rt_daemon_path(char *buf, size_t len);

/*
 * Start bp-target (provider, rails; fabric_node NULL: the daemon's default;
 * progress_wait NULL: the daemon's default, else its --progress-wait word)
 * on an ephemeral port and read its first stdout line, "bp-target:
 * listening on ADDR:PORT provider=P rails=R". Returns 0 and *d, or a
 * negative errno with the reason in err. The child is killed at exit.
 */
int rt_daemon_start(const char *provider, const char *fabric_node,
		    const char *progress_wait, unsigned rails,
		    uint64_t max_region, struct rt_daemon *d, char *err,
		    size_t errlen);

/* SIGTERM, wait (up to 2 s), then SIGKILL. */
void rt_daemon_stop(struct rt_daemon *d);

/* User + system CPU time of a process, from /proc/PID/stat (clock ticks:
 * 10 ms resolution), in ns; -1 on failure. */
int64_t rt_proc_cpu_ns(pid_t pid);

/* This process's threads (/proc/self/task). Returns the count, or -1. */
int rt_tasks(pid_t *out, int max);

/* The threads in now[] that are not in before[]; returns their count. */
int rt_tasks_new(const pid_t *before, int nb, const pid_t *now, int nn,
		 pid_t *out, int max);

/* CPU time of one thread of this process, in ns (its CPU clock); -1 when
 * the thread is gone. */
int64_t rt_tid_cpu_ns(pid_t tid);

/* The sum over tids. */
int64_t rt_tids_cpu_ns(const pid_t *tids, int n);

#endif /* BPBENCH_RDMA_TARGET_H */
