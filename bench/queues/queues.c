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
#if BENCH_HAVE_DPDK
	&bench_q_rte_ring,
	&bench_q_rte_ring_hts,
	&bench_q_rte_ring_rts,
#endif
#if BENCH_HAVE_MOODYCAMEL
	&bench_q_moodycamel,
#endif
	&bench_q_spsc,
	NULL,
};

const char *bench_queues_missing(void)
{
	return ""
#if !BENCH_HAVE_DPDK
	       "DPDK's rte_ring (MP/MC, HTS, RTS) not built in: apt-get "
	       "install "
	       "libdpdk-dev, then reconfigure (meson setup --reconfigure)\n"
#endif
#if !BENCH_HAVE_MOODYCAMEL
	       "moodycamel::ConcurrentQueue not built in: apt-get install "
	       "libconcurrentqueue-dev (and a C++ compiler), then reconfigure\n"
#endif
		;
}

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
