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

uint64_t bpi_backoff_next(struct bpi_backoff *b, uint64_t spin_ns,
			  uint64_t sleep_max_ns)
{
	int64_t t = bpi_now_ns();
	uint64_t ns;

	if (!b->idle_since) {
		b->idle_since = t;
		return 0;
	}
	if ((uint64_t)(t - b->idle_since) < spin_ns)
		return 0;
	ns = b->sleep_ns < sleep_max_ns ? b->sleep_ns : sleep_max_ns;
	b->sleep_ns *= 2;
	if (b->sleep_ns > sleep_max_ns)
		b->sleep_ns = sleep_max_ns;
	return ns;
}

void bpi_backoff_wait(struct bpi_backoff *b, uint64_t spin_ns,
		      uint64_t sleep_max_ns)
{
	uint64_t ns = bpi_backoff_next(b, spin_ns, sleep_max_ns);
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
			      .tv_nsec = (long)(ns % 1000000000)};

	if (ns)
		nanosleep(&ts, NULL);
}
