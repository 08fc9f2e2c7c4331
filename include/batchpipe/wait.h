/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/wait.h - how an idle thread waits, and an eventcount to sleep on.
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
 * The eventcount (struct bp_waitq) makes the wake side cheap: a waker reads
 * one counter and makes a system call only when somebody sleeps. The sleeper
 * pays for the ordering instead (a process-wide membarrier(2) before it
 * sleeps), so a waker needs no fence on its fast path. Where membarrier is
 * unavailable the waker falls back to a full fence.
 */
#ifndef BATCHPIPE_WAIT_H
#define BATCHPIPE_WAIT_H

#include <stdint.h>

/* 1 when built with ThreadSanitizer, which does not model standalone fences */
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

/* Fill *p with the default policy (spin-then-sleep). */
void bp_wait_policy_init(struct bp_wait_policy *p);

/* Returns 0, or -EINVAL for an unknown strategy. */
int bp_wait_policy_check(const struct bp_wait_policy *p);

/*
 * Eventcount over a futex. Zero-initialised memory is a valid, empty one.
 * seq and sleepers are only ever accessed atomically, through the __atomic
 * builtins (not <stdatomic.h>, so that this header compiles as C++ too).
 */
struct bp_waitq {
	/*
	 * The futex word. Bit 0, "armed", is set by every sleeper as it
	 * prepares; a wake clears it and adds 2, so it changes the word under
	 * every sleeper (whose futex wait then fails or is woken). A waker
	 * that finds the bit clear knows every sleeper was woken since it
	 * prepared (on a wake-one queue: that a woken sleeper is on its way),
	 * and makes no system call.
	 */
	uint32_t seq;
	uint32_t sleepers; /* threads between prepare and cancel */
	/*
	 * 0 (default): sleepers pay for the ordering with membarrier(2),
	 * wakers pay nothing. 1: wakers issue a full fence, sleepers only a
	 * fence too; for queues whose threads sleep and wake often (set
	 * before use with bp_waitq_set_waker_fences()).
	 */
	uint32_t waker_fences;
	/*
	 * 0 (default): bp_waitq_wake() wakes every sleeper. 1: at most one,
	 * for sleepers that are interchangeable (a pool of workers, where
	 * waking them all is a herd); set with bp_waitq_set_wake_one().
	 */
	uint32_t wake_one;
};

void bp_waitq_init(struct bp_waitq *q);

/*
 * Make wakers of q pay for the ordering (a full fence per wake check)
 * instead of its sleepers (a membarrier(2) system call, which interrupts
 * every CPU running this process). Worth it where threads go to sleep
 * often, e.g. more workers than cores. Call before q is used.
 */
void bp_waitq_set_waker_fences(struct bp_waitq *q);

/*
 * Make bp_waitq_wake() wake at most one sleeper of q: for sleepers that
 * wait for the same thing and any one of them can take it. The one woken
 * calls bp_waitq_pass_on() once it has taken work; a woken sleeper that
 * finds a condition meant for all of them (the end of a stream) must wake
 * them all itself (bp_waitq_wake_all_slow), since the wake it got may have
 * been the only one. Implies waker fences (bp_waitq_set_waker_fences):
 * pass_on arms the word without a membarrier. Call before q is used.
 */
void bp_waitq_set_wake_one(struct bp_waitq *q);

/*
 * Sleeper side, in this order:
 *   key = bp_waitq_prepare(q);      announce, then order against wakers
 *   if (condition now true) { bp_waitq_cancel(q); ... }
 *   else rc = bp_waitq_sleep(q, key, deadline_ns);   then bp_waitq_cancel(q)
 * bp_waitq_sleep returns 0 when woken (or the key was stale: re-check the
 * condition), -ETIMEDOUT when the CLOCK_MONOTONIC deadline passed (deadline
 * < 0: no deadline), -EINTR on a signal.
 */
uint32_t bp_waitq_prepare(struct bp_waitq *q);
int bp_waitq_sleep(struct bp_waitq *q, uint32_t key, int64_t deadline_ns);
void bp_waitq_cancel(struct bp_waitq *q);

/*
 * Wake every sleeper that prepared since the last wake (close uses it); on
 * a wake-one queue, every sleeper there is.
 */
void bp_waitq_wake_all_slow(struct bp_waitq *q);

/*
 * Wake one sleeper of an armed queue and disarm it, as
 * bp_waitq_wake_all_slow does for all. Sleepers that prepared and are not
 * yet asleep see the word change and re-check.
 */
void bp_waitq_wake_one_slow(struct bp_waitq *q);

/*
 * On a wake-one queue, from a thread back from a wait once it has taken
 * work: arm the queue again for the sleepers left (the wake it got
 * disarmed it), then if more(arg) says work is left behind, wake one of
 * them. Once per wait, not per item: the wake is a system call.
 */
void bp_waitq_pass_on(struct bp_waitq *q, int (*more)(void *), void *arg);

/* Non-zero when the waker must issue a full fence itself (no membarrier). */
extern int bp_waitq_need_fence_;

/*
 * A full fence. ThreadSanitizer ignores (and warns about) standalone fences,
 * so under it a seq_cst read-modify-write stands in: a full barrier on the
 * CPUs batchpipe runs on.
 */
static inline void bp_full_fence_(void)
{
#if BP_TSAN
	static int bp_fence_word_;

	__atomic_fetch_add(&bp_fence_word_, 0, __ATOMIC_SEQ_CST);
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/*
 * Waker side: call after publishing the state change (for a ring: after the
 * slot stores). The signal fence only stops the compiler from moving the
 * sleeper load above the publication; the CPU-level ordering comes from the
 * sleeper's membarrier in bp_waitq_prepare().
 */
static inline int bp_waitq_has_sleepers(struct bp_waitq *q)
{
	if (bp_waitq_need_fence_ || q->waker_fences)
		bp_full_fence_(); /* Dekker with prepare() */
	else
		__atomic_signal_fence(__ATOMIC_SEQ_CST); /* compiler only */
	/* relaxed: ordered by the fence or by the sleeper's membarrier */
	return __atomic_load_n(&q->sleepers, __ATOMIC_RELAXED) != 0;
}

/* Wake every sleeper if there is one (on any queue, wake-one or not). */
static inline void bp_waitq_wake_all(struct bp_waitq *q)
{
	/* relaxed: the slow path re-reads seq with a compare-and-swap */
	if (bp_waitq_has_sleepers(q) &&
	    ((__atomic_load_n(&q->seq, __ATOMIC_RELAXED) & 1) || q->wake_one))
		bp_waitq_wake_all_slow(q);
}

/*
 * Wake as the queue says: every sleeper, or on a wake-one queue one of
 * them. Either way, once woken a queue makes no more system calls until a
 * sleeper arms it again. The usual call after publishing.
 */
static inline void bp_waitq_wake(struct bp_waitq *q)
{
	/* relaxed: the slow path re-reads seq with a compare-and-swap */
	if (bp_waitq_has_sleepers(q) &&
	    (__atomic_load_n(&q->seq, __ATOMIC_RELAXED) & 1)) {
		if (q->wake_one)
			bp_waitq_wake_one_slow(q);
		else
			bp_waitq_wake_all_slow(q);
	}
}

/* CLOCK_MONOTONIC now, in nanoseconds. */
int64_t bp_now_ns(void);

/* One CPU relax hint (pause on x86, yield on arm64). */
static inline void bp_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_WAIT_H */
