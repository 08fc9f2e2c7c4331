/* SPDX-License-Identifier: MIT */
/*
 * The pipeline's own threads, seen from the pipeline: start one (named
 * after its role, pinned, with the config's hooks, through
 * src/base/thread.c), say that one has exited, join the workers.
 */
#include <stdio.h>

#include "src/base/thread.h"
#include "src/pipeline_internal.h"

int bpi_pipeline_thread_start(struct bp_pipeline *p, pthread_t *t,
			      enum bp_thread_role role, unsigned index, int cpu,
			      void *(*fn)(void *), void *arg)
{
	char name[24];

	switch (role) {
	case BP_THREAD_WORKER:
		snprintf(name, sizeof(name), "bp-worker-%u", index);
		break;
	case BP_THREAD_SINK:
		snprintf(name, sizeof(name), "bp-sink");
		break;
	case BP_THREAD_FLUSHER:
		snprintf(name, sizeof(name), "bp-flush-%u", index);
		break;
	default:
		snprintf(name, sizeof(name), "bp-%u", index);
		break;
	}
	return bpi_thread_start(t, &(struct bpi_thread_spec){
					   .fn = fn,
					   .arg = arg,
					   .name = name,
					   .cpu = cpu,
					   .role = role,
					   .index = index,
					   .on_start = p->cfg.thread_start,
					   .on_stop = p->cfg.thread_stop,
					   .hook_ctx = p->cfg.thread_ctx,
				   });
}

void bpi_thread_exited(struct bp_pipeline *p, _Atomic int *exited)
{
	/* release: the stopper that sees it (acquire) joins, then may free */
	atomic_store_explicit(exited, 1, memory_order_release);
	bpi_waitq_wake_all_slow(&p->stop_wq);
}

void bpi_join_workers(struct bp_pipeline *p)
{
	for (unsigned i = 0; i < p->nworkers; i++) {
		if (p->workers[i].thread_started) {
			pthread_join(p->workers[i].thread, NULL);
			p->workers[i].thread_started = false;
		}
	}
}
