/* SPDX-License-Identifier: MIT */
/*
 * pipeline/plain_wait.h - how the plain variant's threads wait (plain.c):
 * a futex word per sleeper and the three strategies of the pipeline's wait
 * column, written plainly and tuned as the library's are (spin_ns and
 * yields: --spin-ns, --yields).
 *
 * A sleeper sets its word to 1 (parked), fences, re-checks its condition
 * and only then sleeps while the word is 1. A waker publishes, fences,
 * and only when it sees the word at 1 takes it back to 0 with an exchange
 * and makes the system call: the exchange lets one waker, and only one,
 * pay for a sleep, however many publish before the sleeper gets a CPU.
 * The two seq_cst fences are the Dekker pair: either the re-check sees
 * the publication or the waker sees the 1. Busy-poll never sleeps, so
 * under it the wakers skip the check and its fence.
 *
 * Idle workers share a count of those parked, so that a producer looks
 * for one to wake only when there is one (plain.c: one wake-up in flight
 * at a time, passed on by the worker it woke).
 */
#ifndef BPBENCH_PIPELINE_PLAIN_WAIT_H
#define BPBENCH_PIPELINE_PLAIN_WAIT_H

#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lab/backoff.h"
#include "lab/clock.h"

/* two lines: x86 fetches adjacent line pairs (as queues/q_spsc.c) */
#define PL_LINE 128

/* One sleeper's futex word: 1 while it is parked or about to be. */
struct pl_parker {
	_Alignas(PL_LINE) _Atomic uint32_t parked;
};

enum pl_how { PL_BUSY_POLL, PL_SPIN_SLEEP, PL_SLEEP };

struct pl_wait {
	enum pl_how how;
	int64_t spin_ns;
	unsigned yields;
};

/*
 * Wake p's sleeper, if it sleeps; true if this call woke it. The caller
 * has published with a seq_cst read-modify-write (a worker's CAS), or
 * published and then called pl_fence: either way the seq_cst load below
 * is ordered against the sleeper's fence in pl_wait_until (C11's rules for
 * seq_cst fences: if the publication precedes that fence in the single
 * order S, the sleeper's re-check sees it; if not, the fence precedes our
 * load in S and the load sees the 1).
 */
static inline bool pl_try_unpark(struct pl_parker *p)
{
	/* seq_cst: pairs with pl_wait_until's fence (see above); a plain
	 * load on x86. release exchange: it decides which waker makes the
	 * system call, and what the waker did before (plain.c's `waking`)
	 * happens before what the sleeper does after its acquire */
	if (!atomic_load_explicit(&p->parked, memory_order_seq_cst) ||
	    !atomic_exchange_explicit(&p->parked, 0, memory_order_release))
		return false;
	syscall(SYS_futex, &p->parked, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	return true;
}

/* Between a publication by a plain (release) store and pl_try_unpark. */
static inline void pl_fence(void)
{
	/* seq_cst: pairs with pl_wait_until's fence (Dekker): the caller's
	 * publication before it, its look at the sleepers after it */
	atomic_thread_fence(memory_order_seq_cst);
}

/* After a publication by a plain store: wake p's sleeper, if it sleeps. */
static inline void pl_unpark(struct pl_parker *p)
{
	pl_fence();
	pl_try_unpark(p);
}

/*
 * Wait until ready(arg) is true or a waker claims this sleeper; true in
 * the second case (the waker spent its wake-up on us, whatever we find).
 * Callers look again either way. Both spinning strategies yield every 16
 * tries, as the library's do: with more threads than cores the thread we
 * wait for may need this CPU. Spin-sleep spins for spin_ns, yields
 * `yields` times, then sleeps; sleep sleeps at once; busy-poll never
 * sleeps. idle (or NULL): the count of parked sleepers p belongs to.
 */
static inline bool pl_wait_until(const struct pl_wait *w, struct pl_parker *p,
				 atomic_uint *idle, bool (*ready)(void *),
				 void *arg)
{
	bool claimed;

	if (w->how != PL_SLEEP) {
		int64_t spin_end = bench_now_ns() + w->spin_ns;

		for (unsigned i = 1;; i++) {
			if (ready(arg))
				return false;
			bench_cpu_pause();
			if (i % 16)
				continue;
			if (w->how == PL_SPIN_SLEEP &&
			    bench_now_ns() >= spin_end)
				break;
			sched_yield();
		}
		for (unsigned y = 0; y < w->yields; y++) {
			sched_yield();
			if (ready(arg))
				return false;
		}
	}
	if (idle)
		/* relaxed: a count for wakers to skip looking; the fence
		 * below orders it before the re-check */
		atomic_fetch_add_explicit(idle, 1, memory_order_relaxed);
	/* relaxed: ordered by the fence below */
	atomic_store_explicit(&p->parked, 1, memory_order_relaxed);
	/* seq_cst: pairs with the waker's fence or seq_cst load: the 1
	 * before it, the re-check after it */
	atomic_thread_fence(memory_order_seq_cst);
	/* relaxed: only whether a waker took the 1 back */
	while (!ready(arg) &&
	       atomic_load_explicit(&p->parked, memory_order_relaxed))
		syscall(SYS_futex, &p->parked, FUTEX_WAIT_PRIVATE, 1, NULL,
			NULL, 0);
	/* acquire: pairs with pl_try_unpark's release; 0 means a waker
	 * took the 1 (and makes a system call, perhaps finding nobody) */
	claimed =
		!atomic_exchange_explicit(&p->parked, 0, memory_order_acquire);
	if (idle)
		/* relaxed: as the increment */
		atomic_fetch_sub_explicit(idle, 1, memory_order_relaxed);
	return claimed;
}

#endif /* BPBENCH_PIPELINE_PLAIN_WAIT_H */
