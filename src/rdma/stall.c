/* SPDX-License-Identifier: MIT */
/*
 * The stall watch: is a worker stuck inside the provider? A provider call
 * that never returns cannot be interrupted, and a drain waits for it
 * without end. libfabric 1.17's shm does that: its posts spin on a
 * spinlock in the peer's shared region, and a peer killed while holding
 * it (its progress holds it often) leaves them spinning for ever. All the
 * library can do is say so: each worker counts its entries into and exits
 * from the callbacks that call the provider (odd while inside, stage.c),
 * and the stall report a stopper logs says which worker has been inside
 * one call, and for how long.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "rdma_internal.h"
#include "src/json_put.h"

/* Between the two looks of one report: a longer call is not a post. */
#define LOOK_NS INT64_C(20000000)

int bp_rdma_worker_calls(const struct bp_rdma *r, unsigned worker,
			 uint64_t *calls)
{
	if (!r || !calls || worker >= r->cfg.workers)
		return -EINVAL;
	/* relaxed (stat_get): a sight of the worker's progress; nothing is
	 * published through it */
	*calls = stat_get(&r->workers[worker].calls);
	return 0;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
			      .tv_nsec = (long)(ns % 1000000000)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int bpi_rdma_stall_report(void *ctx, char *buf, size_t size)
{
	struct bp_rdma *r = ctx;
	uint64_t first[BP_MAX_WORKERS];
	unsigned stuck = 0;
	size_t len = 0;
	int64_t now;

	if (size)
		buf[0] = '\0';
	for (unsigned i = 0; i < r->cfg.workers; i++)
		first[i] = stat_get(&r->workers[i].calls);
	sleep_ns(LOOK_NS);
	now = bpi_now_ns();
	for (unsigned i = 0; i < r->cfg.workers; i++) {
		struct bpi_worker *ws = &r->workers[i];
		uint64_t c = stat_get(&ws->calls);
		/* relaxed: the reporter's own notes from its last report (one
		 * stopper at a time; atomic so that two stay defined) */
		uint64_t seen = atomic_load_explicit(&ws->seen_calls,
						     memory_order_relaxed);
		int64_t since = atomic_load_explicit(&ws->seen_ns,
						     memory_order_relaxed);

		if (!(c & 1) || c != first[i])
			continue; /* outside, or in and out again */
		/* a call the last report did not see: first sight now */
		if (seen != c) {
			since = now - LOOK_NS;
			atomic_store_explicit(&ws->seen_calls, c,
					      memory_order_relaxed);
			atomic_store_explicit(&ws->seen_ns, since,
					      memory_order_relaxed);
		}
		BP_JSON_PUT("%sworker %u has been inside one provider call for "
			    "at least %.2f s",
			    stuck ? "; " : "", i, (double)(now - since) / 1e9);
		stuck++;
	}
	if (stuck)
		BP_JSON_PUT(" (a provider call that does not return cannot be "
			    "interrupted; libfabric 1.17's shm spins for ever "
			    "on the lock of a peer killed while holding it)");
	return (int)len;
}
