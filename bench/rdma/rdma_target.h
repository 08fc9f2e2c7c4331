/* SPDX-License-Identifier: MIT */
/*
 * rdma_target.h - what `bpbench rdma`, `rdma-fill` and `rdma-target` need
 * around the target: bp-target as a child process (found next to bpbench,
 * started on an ephemeral port, killed at exit, also when the benchmark
 * dies), bp-plain-target the same way, pausing either, and CPU time of
 * threads the benchmark did not create itself (the pipeline's workers and
 * sink, a node's progress threads) or of another process.
 */
#ifndef BPBENCH_RDMA_TARGET_H
#define BPBENCH_RDMA_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <batchpipe/rdma.h>

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

/* SIGTERM, wait (past its --stop-timeout-ms), then SIGKILL. */
void rt_daemon_stop(struct rt_daemon *d);

/*
 * bp-plain-target (bench/rdma/plain_target.c, built next to bpbench) as a
 * child: its stdin is a pipe from us (commands; its end stops it), its
 * stdout a pipe to us (the ready line, then the answers).
 */
struct rt_plain {
	pid_t pid;
	int cmd_fd, reply_fd;
	struct bp_rdma_peer_desc desc; /* one rail: where to write */
};

/*
 * Start it (provider; node NULL for shm) with a region of len bytes and
 * read its ready line into p->desc. Returns 0, or a negative errno with the
 * reason in err. The child is killed at exit.
 */
int rt_plain_start(const char *provider, const char *node, uint64_t len,
		   struct rt_plain *p, char *err, size_t errlen);

/* The 8 bytes at off in its region (its "peek" command). 0 or -errno. */
int rt_plain_peek(struct rt_plain *p, uint64_t off, uint64_t *word);

/* Close its stdin, SIGTERM, wait, SIGKILL if it must. */
void rt_plain_stop(struct rt_plain *p);

/*
 * Pause a child (SIGSTOP) or let it go on (SIGCONT), and wait until it
 * has: a paused target takes no CPU from the one being measured. 0, or a
 * negative errno (-ECHILD: it exited).
 */
int rt_pause(pid_t pid, bool pause);

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
