/* SPDX-License-Identifier: MIT */
/*
 * The eventcount every blocking call of the library sleeps on: a futex word
 * and a sleeper count. Private: neither the struct nor the functions are
 * part of the API or exported from the shared library. The fast paths
 * (has_sleepers, wake) are inline: the ring calls them on every operation.
 * The protocol that uses them is docs/wakeup.md; the proof is at the top of
 * src/waitq.c.
 */
#ifndef BP_SRC_WAITQ_H
#define BP_SRC_WAITQ_H

#include <stdint.h>

#include <batchpipe/wait.h> /* BP_TSAN */

/*
 * An eventcount is shared only after bpi_waitq_init(), which settles its
 * fence mode (waker_fences). seq and sleepers are only ever accessed
 * atomically.
 */
struct bpi_waitq {
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
	 * wakers only a compiler barrier. 1: wakers issue a full fence, and
	 * sleepers a fence too, for queues whose threads sleep and wake often
	 * (bpi_waitq_set_waker_fences()), and for every queue of a process
	 * without membarrier (bpi_waitq_init() sets it then): the wakers'
	 * check reads this one word.
	 */
	uint32_t waker_fences;
	/*
	 * 0 (default): bpi_waitq_wake() wakes every sleeper. 1: at most one,
	 * for sleepers that are interchangeable (a pool of workers, where
	 * waking them all is a herd); bpi_waitq_set_wake_one().
	 */
	uint32_t wake_one;
	/*
	 * Sleepers on a file descriptor instead of the futex (a stage that
	 * sleeps in epoll on its completion queues as well): counted in
	 * sleepers too, and here. A wake that finds any writes efd1 - 1, an
	 * eventfd made on first use (0: none yet), after the futex wake.
	 */
	uint32_t fd_sleepers;
	int efd1;
	/* efd1 is another queue's (bpi_waitq_borrow_fd): not closed here */
	uint32_t efd_borrowed;
};

/* Registers membarrier once per process; idempotent and thread-safe. */
void bpi_wait_global_init(void);

/*
 * A full barrier on every thread of the process that is running now
 * (membarrier PRIVATE_EXPEDITED), so that a thread on the cold side of a
 * Dekker pair may pair with a hot side that only stops the compiler (a
 * signal fence). Where membarrier is missing, a full fence: the hot side
 * then fences itself (bpi_waitq_need_fence). Cold path: a system call
 * that interrupts every CPU running this process.
 */
void bpi_barrier_all(void);

void bpi_waitq_init(struct bpi_waitq *q);

/*
 * The queue's eventfd for sleepers on a descriptor, made on the first call
 * (thread-safe); -errno if it cannot be. Every wake while such a sleeper
 * is announced writes it: register it with EPOLLIN | EPOLLET, so that each
 * write is an event for every epoll set that holds it; it is never read
 * (its count would take centuries to fill). Closed by bpi_waitq_destroy.
 */
int bpi_waitq_fd(struct bpi_waitq *q);
void bpi_waitq_destroy(struct bpi_waitq *q);

/*
 * Make q's descriptor sleepers use another queue's eventfd, fd (from
 * bpi_waitq_fd of that queue): a sleeper armed on either queue sleeps on
 * the one descriptor, and a wake of either writes it. Once, before any
 * descriptor sleeper of q; a second call (another thread) finds it set
 * and does nothing. bpi_waitq_destroy leaves it to its owner.
 */
void bpi_waitq_borrow_fd(struct bpi_waitq *q, int fd);

/*
 * As prepare and cancel, for a sleeper on the descriptor: announce, arm,
 * re-check the condition (and do not sleep if it holds), sleep in epoll,
 * cancel. The eventfd must exist (bpi_waitq_fd) before the first one.
 */
void bpi_waitq_prepare_fd(struct bpi_waitq *q);
void bpi_waitq_cancel_fd(struct bpi_waitq *q);

/*
 * Make wakers of q pay for the ordering (a full fence per wake check)
 * instead of its sleepers (a membarrier(2) system call, which interrupts
 * every CPU running this process). Worth it where threads go to sleep
 * often, e.g. more workers than cores. Call before q is used.
 */
void bpi_waitq_set_waker_fences(struct bpi_waitq *q);

/*
 * Make bpi_waitq_wake() wake at most one sleeper of q: for sleepers that
 * wait for the same thing and any one of them can take it. The one woken
 * calls bpi_waitq_pass_on() once it has taken work; a woken sleeper that
 * finds a condition meant for all of them (the end of a stream) must wake
 * them all itself (bpi_waitq_wake_all_slow), since the wake it got may have
 * been the only one. Implies waker fences: pass_on arms the word without a
 * membarrier. Call before q is used.
 */
void bpi_waitq_set_wake_one(struct bpi_waitq *q);

/*
 * Sleeper side, in this order:
 *   key = bpi_waitq_prepare(q);     announce, then order against wakers
 *   if (condition now true) { bpi_waitq_cancel(q); ... }
 *   else rc = bpi_waitq_sleep(q, key, deadline_ns);  then bpi_waitq_cancel(q)
 * bpi_waitq_sleep returns 0 when woken (or the key was stale: re-check the
 * condition), -ETIMEDOUT when the CLOCK_MONOTONIC deadline passed (deadline
 * < 0: no deadline), -EINTR on a signal. bpi_wait_loop() does all of this.
 */
uint32_t bpi_waitq_prepare(struct bpi_waitq *q);
int bpi_waitq_sleep(struct bpi_waitq *q, uint32_t key, int64_t deadline_ns);
void bpi_waitq_cancel(struct bpi_waitq *q);

/*
 * Wake every sleeper that prepared since the last wake (close uses it); on
 * a wake-one queue, every sleeper there is. Always pays the waker's fence.
 */
void bpi_waitq_wake_all_slow(struct bpi_waitq *q);

/*
 * Wake one sleeper of an armed queue and disarm it, as
 * bpi_waitq_wake_all_slow does for all. Sleepers that prepared and are not
 * yet asleep see the word change and re-check.
 */
void bpi_waitq_wake_one_slow(struct bpi_waitq *q);

/*
 * On a wake-one queue, from a thread back from a wait once it has taken
 * work: arm the queue again for the sleepers left (the wake it got
 * disarmed it), then if more(arg) says work is left behind, wake one of
 * them. Once per wait, not per item: the wake is a system call.
 */
void bpi_waitq_pass_on(struct bpi_waitq *q, int (*more)(void *), void *arg);

/*
 * Non-zero when every waker must issue a full fence itself (no membarrier
 * in this process). Goes from 1 to 0 once, in bpi_wait_global_init().
 */
extern int bpi_waitq_need_fence;

/* bpi_waitq_need_fence now (relaxed: both values are safe, see above). */
static inline int bpi_waitq_fence_needed(void)
{
	return __atomic_load_n(&bpi_waitq_need_fence, __ATOMIC_RELAXED);
}

/*
 * A full fence. ThreadSanitizer ignores (and warns about) standalone fences,
 * so under it a seq_cst read-modify-write stands in: a full barrier on the
 * CPUs batchpipe runs on.
 */
static inline void bpi_full_fence(void)
{
#if BP_TSAN
	static int fence_word;

	__atomic_fetch_add(&fence_word, 0, __ATOMIC_SEQ_CST);
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/*
 * Waker side: call after publishing the state change (for a ring: after the
 * slot stores). On a waker-fences queue (or without membarrier) this is a
 * full fence, the Dekker partner of the one in bpi_waitq_prepare(). On a
 * default queue it is only a compiler barrier that keeps the sleeper load
 * below the publication: the CPU-level ordering comes from the sleeper's
 * membarrier in bpi_waitq_prepare().
 */
static inline int bpi_waitq_has_sleepers(struct bpi_waitq *q)
{
	/* waker_fences is plain, settled before q is shared (init) */
	if (q->waker_fences)
		bpi_full_fence(); /* Dekker with prepare() */
	/* compiler only (after a fence, redundant: one path, no jump) */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* relaxed: ordered by the fence or by the sleeper's membarrier */
	return __atomic_load_n(&q->sleepers, __ATOMIC_RELAXED) != 0;
}

/* Wake every sleeper if there is one (on any queue, wake-one or not). */
static inline void bpi_waitq_wake_all(struct bpi_waitq *q)
{
	/* relaxed: the slow path re-reads seq with a compare-and-swap */
	if (bpi_waitq_has_sleepers(q) &&
	    ((__atomic_load_n(&q->seq, __ATOMIC_RELAXED) & 1) || q->wake_one))
		bpi_waitq_wake_all_slow(q);
}

/*
 * Wake as the queue says: every sleeper, or on a wake-one queue one of
 * them. Either way, once woken a queue makes no more system calls until a
 * sleeper arms it again. The usual call after publishing.
 */
static inline void bpi_waitq_wake(struct bpi_waitq *q)
{
	/* relaxed: the slow path re-reads seq with a compare-and-swap */
	if (bpi_waitq_has_sleepers(q) &&
	    (__atomic_load_n(&q->seq, __ATOMIC_RELAXED) & 1)) {
		if (q->wake_one)
			bpi_waitq_wake_one_slow(q);
		else
			bpi_waitq_wake_all_slow(q);
	}
}

/*
 * bpi_waitq_wake() for a waker that published with a seq_cst
 * read-modify-write (a multi-consumer ring's claim CAS): that RMW is the
 * waker's side of the Dekker pair, in place of the fence. If the seq_cst
 * load of sleepers below misses a sleeper's increment, it precedes that
 * increment in the single order S, and so does the RMW; the sleeper's
 * seq_cst fence (bpi_waitq_prepare) follows the increment, so its
 * re-check sees the RMW's value or a later one (C11's rule for reads
 * after a seq_cst fence). A default queue's sleeper pays with membarrier,
 * which orders the RMW just as well. On x86 both the RMW and the load are
 * what a release CAS and a plain load would be: the wake check is free.
 */
static inline void bpi_waitq_wake_after_rmw(struct bpi_waitq *q)
{
	/* seq_cst, both: pair with prepare()'s fence, see above (a relaxed
	 * seq could be read from before the sleeper armed it, in the C11
	 * model); on x86 plain loads */
	if (__atomic_load_n(&q->sleepers, __ATOMIC_SEQ_CST) != 0 &&
	    (__atomic_load_n(&q->seq, __ATOMIC_SEQ_CST) & 1)) {
		if (q->wake_one)
			bpi_waitq_wake_one_slow(q);
		else
			bpi_waitq_wake_all_slow(q);
	}
}

/* One CPU relax hint (pause on x86, yield on arm64), for spin loops. */
static inline void bpi_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

#endif
