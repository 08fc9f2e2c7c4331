/* SPDX-License-Identifier: MIT */
/*
 * The library's one clock (CLOCK_MONOTONIC, in ns) and its one deadline
 * rule. Inline: the producer reads it once per job.
 */
#ifndef BP_SRC_BASE_CLOCK_H
#define BP_SRC_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t bpi_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * now + timeout_ns, saturated at INT64_MAX (a deadline that never comes);
 * -1 (no deadline) for a negative timeout.
 */
static inline int64_t bpi_deadline(int64_t now, int64_t timeout_ns)
{
	if (timeout_ns < 0)
		return -1;
	return timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
}

#endif
