/* SPDX-License-Identifier: MIT */
/* queues.c - the registry of queues bpbench knows, by name. */
#include "queues/queues.h"

#include <string.h>

const struct bench_queue_ops *const bench_queues[] = {
	&bench_q_batchpipe,
	&bench_q_batchpipe_sp_sc,
	&bench_q_batchpipe_mp_sc,
	&bench_q_batchpipe_sp_mc,
	&bench_q_mutex,
	&bench_q_spinlock,
	&bench_q_ckring,
	&bench_q_wfcq,
	NULL,
};

const struct bench_queue_ops *bench_queue_find(const char *name)
{
	for (int i = 0; bench_queues[i]; i++)
		if (!strcmp(bench_queues[i]->name, name))
			return bench_queues[i];
	return NULL;
}

int bench_queue_fits(const struct bench_queue_ops *ops, unsigned producers,
		     unsigned consumers)
{
	return (!ops->max_producers || producers <= ops->max_producers) &&
	       (!ops->max_consumers || consumers <= ops->max_consumers);
}

int bench_queue_is_batchpipe(const struct bench_queue_ops *ops)
{
	return !strncmp(ops->name, "batchpipe", 9);
}
