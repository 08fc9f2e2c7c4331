/* SPDX-License-Identifier: MIT */
/*
 * Spin, then sleep: how a thread polling a completion queue waits when it
 * finds nothing (the stage's SPIN_SLEEP mode and the node's progress
 * threads). Polling stays a busy loop for spin_ns after the last event, so
 * a steady stream pays no sleep; past that, sleeps grow from 2 us to the
 * cap, so an idle poller costs next to no CPU.
 */
#include <time.h>

#include "src/rdma/rdma_internal.h"

#define SLEEP_START_NS 2000

void bpi_backoff_reset(struct bpi_backoff *b)
{
	b->idle_since = 0;
	b->sleep_ns = SLEEP_START_NS;
}

void bpi_backoff_wait(struct bpi_backoff *b, uint64_t spin_ns,
		      uint64_t sleep_max_ns)
{
	int64_t t = bpi_now_ns();
	struct timespec ts = {0};

	if (!b->idle_since) {
		b->idle_since = t;
		return;
	}
	if ((uint64_t)(t - b->idle_since) < spin_ns)
		return;
	ts.tv_nsec =
		(long)(b->sleep_ns < sleep_max_ns ? b->sleep_ns : sleep_max_ns);
	nanosleep(&ts, NULL);
	b->sleep_ns *= 2;
	if (b->sleep_ns > sleep_max_ns)
		b->sleep_ns = sleep_max_ns;
}
