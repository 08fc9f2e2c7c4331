/* SPDX-License-Identifier: MIT */
/* The wait loop shared by the ring's blocking calls and the pipeline
 * (src/wait.c). */
#ifndef BP_SRC_WAIT_INTERNAL_H
#define BP_SRC_WAIT_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include <batchpipe/wait.h>

#include "src/base/clock.h"
#include "src/waitq.h"

/*
 * Retry `try_fn(arg)` until it returns non-zero (its result is returned),
 * waiting between tries as `pol` says and sleeping on `q` when the policy
 * sleeps. Whoever makes try_fn succeed must wake q after publishing
 * (bpi_waitq_wake or bpi_waitq_wake_all; docs/wakeup.md).
 * timeout_ns < 0: no limit. Returns try_fn's result, -ETIMEDOUT or -EINTR.
 */
int bpi_wait_loop(const struct bp_wait_policy *pol, struct bpi_waitq *q,
		  int (*try_fn)(void *), void *arg, int64_t timeout_ns);

#endif
