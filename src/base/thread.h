/* SPDX-License-Identifier: MIT */
/*
 * Every thread the library creates starts here: the pipeline's workers and
 * sink, the producers' flusher, the RDMA node's progress threads.
 */
#ifndef BP_SRC_BASE_THREAD_H
#define BP_SRC_BASE_THREAD_H

#include <pthread.h>

#include <batchpipe/pipeline.h> /* enum bp_thread_role, bp_thread_hook */

struct bpi_thread_spec {
	void *(*fn)(void *); /* the thread's body */
	void *arg;
	const char *name; /* shown by top -H, perf, gdb; cut to 15 chars */
	int cpu;	  /* -1: not pinned */
	enum bp_thread_role role;
	unsigned index;
	/* the application's hooks, NULL if none (struct bp_pipeline_config) */
	bp_thread_hook *on_start;
	bp_thread_hook *on_stop;
	void *hook_ctx;
};

/*
 * Create a thread that runs s->fn(s->arg) with every asynchronous signal
 * blocked, named and pinned as *s says, calling s->on_start first and
 * s->on_stop last on that thread. *s may go away when this returns.
 * Returns 0 and *t (join it with pthread_join), -ENOMEM, or
 * pthread_create's error as a negative errno (-EAGAIN, -EINVAL for a CPU
 * the process may not use, -EPERM). Cold path; any thread.
 */
int bpi_thread_start(pthread_t *t, const struct bpi_thread_spec *s);

#endif
