/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/wait.h - how an idle thread waits.
 *
 * A thread that finds nothing to do (an empty ring for a consumer, a full one
 * for a producer) chooses one of three strategies:
 *
 *   BP_WAIT_BUSY_POLL   spin with a CPU pause, yielding the CPU now and then;
 *                       never sleeps. Lowest latency, one core per waiter.
 *   BP_WAIT_SPIN_SLEEP  spin for a short while, yield a few times, then sleep
 *                       on a futex until woken (the default). Idle costs ~0 %.
 *   BP_WAIT_SLEEP       sleep on the futex at once.
 *
 * Sleeping threads wait on an eventcount inside the library: a thread that
 * makes progress possible reads one counter and makes a system call only
 * when somebody sleeps. Who pays for the ordering between the two sides
 * (the sleeper with a membarrier(2), or the waker with a fence) is chosen
 * per wait queue; docs/wakeup.md lists them.
 */
#ifndef BATCHPIPE_WAIT_H
#define BATCHPIPE_WAIT_H

#include <stdint.h>

/*
 * 1 when built with ThreadSanitizer, which does not model standalone fences
 * (the inline code of ring.h orders through its accesses instead).
 */
#ifndef BP_TSAN
#if defined(__SANITIZE_THREAD__)
#define BP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BP_TSAN 1
#endif
#endif
#endif
#ifndef BP_TSAN
#define BP_TSAN 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

enum bp_wait_strategy {
	BP_WAIT_SPIN_SLEEP = 0, /* default: spin, yield, then futex sleep */
	BP_WAIT_BUSY_POLL = 1,	/* spin and yield, never sleep */
	BP_WAIT_SLEEP = 2,	/* futex sleep at once */
};

/* Tuning of a wait; bp_wait_policy_init() fills the defaults. */
struct bp_wait_policy {
	enum bp_wait_strategy strategy;
	uint32_t spin_ns; /* SPIN_SLEEP: how long to spin (yielding every 16
			     tries) (default 20000) */
	uint32_t yields;  /* SPIN_SLEEP: sched_yield() calls before sleeping
			     (default 8) */
};

/* Fill *p (not NULL) with the default policy (spin-then-sleep). Any
 * thread. */
void bp_wait_policy_init(struct bp_wait_policy *p);

/*
 * Check a policy before handing it to the library. Returns 0, or -EINVAL
 * (p NULL, or an unknown strategy). Any thread.
 */
int bp_wait_policy_check(const struct bp_wait_policy *p);

/*
 * CLOCK_MONOTONIC now, in nanoseconds: the clock of bp_job's submit_ns and
 * of every deadline in the library. Any thread.
 */
int64_t bp_now_ns(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_WAIT_H */
