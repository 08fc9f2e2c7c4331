/* SPDX-License-Identifier: MIT */
/*
 * The eventcount (src/waitq.h): a futex word and a sleeper count, and the
 * process-wide barrier (membarrier) its sleepers pay with. The wait loop
 * and the policies over it are src/wait.c.
 *
 * The lost-wake-up problem is a Dekker pattern:
 *   waker:   publish state;        read sleepers
 *   sleeper: sleepers++;           re-check state
 * Both must not read the old value. A full fence on each side solves it, but
 * the waker runs on every enqueue/dequeue while the sleeper runs only when a
 * thread is about to sleep. So the sleeper issues membarrier(PRIVATE_EXPEDITED)
 * between its increment and its re-check: every running thread of the process
 * executes a full barrier at that point (a descheduled one got one when it was
 * switched out), which is what the waker's fence would have given. The waker
 * then needs only a compiler barrier. This is the asymmetric-fence scheme
 * liburcu's memb flavour uses for its readers.
 *
 * That is the default. A queue whose threads sleep often pays the other
 * way (bpi_waitq_set_waker_fences, and every wake-one queue): both sides
 * issue a full fence, the plain Dekker solution, so each wake check costs
 * the waker a fence and a sleep costs no membarrier, which would interrupt
 * every CPU running this process. So does every queue where membarrier is
 * not available (bpi_waitq_need_fence): bpi_waitq_init sets waker_fences
 * there, so the wakers read one word of the queue. docs/wakeup.md says
 * which queue pays which way.
 *
 * The futex word is `seq`. A sleeper arms it (sets bit 0) and reads its key
 * in one atomic step, then re-checks, then sleeps only while the word still
 * equals the key. A waker that finds it armed disarms it and adds 2 in one
 * compare-and-swap, then wakes everybody: the word changed under every
 * sleeper, so none can sleep through it. A waker that finds it disarmed
 * knows all sleepers were woken since they armed (and will re-check), and
 * skips the system call: while woken threads are on their way, later
 * publications cost no syscall each.
 *
 * A wake-one queue (a pool of workers) disarms and bumps the word the same
 * way but wakes one sleeper: sleepers on their way see the change and
 * re-check; those already asleep stay asleep, since one thread can take
 * what was published. Nothing is lost: every sleeper still asleep
 * re-checked after arming, and a disarmed word means a woken thread is on
 * its way to re-check (and to arm again if it finds nothing). For
 * parallelism the woken thread, once it has taken its work, arms the word
 * again for the sleepers left and, if it leaves work behind, wakes one of
 * them (bpi_waitq_pass_on). A condition for all sleepers (a closed stream)
 * must reach all: the thread that finds it wakes them all, since the last
 * publication before it may have woken that thread alone.
 *
 * Why a sleeper that arms after a waker's check cannot be lost: the waker's
 * load of seq did not see the arming, so the membarrier's barrier point in
 * the waker lies after that load, hence after the waker's publication,
 * which the sleeper's re-check (after the membarrier) therefore sees.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/base/clock.h"
#include "src/waitq.h"

int bpi_waitq_need_fence = 1;

static pthread_once_t membarrier_once = PTHREAD_ONCE_INIT;
static int membarrier_ok;

static void membarrier_setup(void)
{
	long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		return;
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
		    0, 0) != 0)
		return;
	membarrier_ok = 1;
	/*
	 * Wakers read this flag without synchronisation; a waker that still
	 * sees 1 only issues a fence it no longer needs. Relaxed: the flag
	 * only goes from 1 to 0 and both values are safe.
	 */
	__atomic_store_n(&bpi_waitq_need_fence, 0, __ATOMIC_RELAXED);
}

void bpi_wait_global_init(void)
{
	pthread_once(&membarrier_once, membarrier_setup);
}

void bpi_barrier_all(void)
{
	/*
	 * Without membarrier the other side fences itself (it reads
	 * bpi_waitq_need_fence): then this fence is the only one needed here.
	 */
	if (membarrier_ok &&
	    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) ==
		    0)
		return;
	bpi_full_fence();
}

void bpi_waitq_set_waker_fences(struct bpi_waitq *q)
{
	q->waker_fences = 1;
}

void bpi_waitq_set_wake_one(struct bpi_waitq *q)
{
	q->wake_one = 1;
	q->waker_fences = 1; /* pass_on's arming has no membarrier */
}

void bpi_waitq_init(struct bpi_waitq *q)
{
	__atomic_store_n(&q->seq, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&q->sleepers, 0, __ATOMIC_RELAXED);
	q->wake_one = 0;
	__atomic_store_n(&q->fd_sleepers, 0, __ATOMIC_RELAXED);
	q->efd1 = 0;
	q->efd_borrowed = 0;
	/*
	 * Settle the fence mode first: without membarrier every queue is a
	 * waker-fences queue, so the wakers' check reads q alone. Final once
	 * the pthread_once in bpi_wait_global_init returned.
	 */
	bpi_wait_global_init();
	q->waker_fences = (uint32_t)bpi_waitq_fence_needed();
}

int bpi_waitq_fd(struct bpi_waitq *q)
{
	/* acquire: pairs with the release below; the fd is whole */
	int e = __atomic_load_n(&q->efd1, __ATOMIC_ACQUIRE), fd, want = 0;

	if (e)
		return e - 1;
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* release: pairs with the acquire above and the wakers' loads */
	if (__atomic_compare_exchange_n(&q->efd1, &want, fd + 1, false,
					__ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		return fd;
	close(fd); /* another thread made it first */
	return want - 1;
}

void bpi_waitq_borrow_fd(struct bpi_waitq *q, int fd)
{
	int want = 0;

	/* release: as bpi_waitq_fd's; a second caller finds it set */
	if (__atomic_compare_exchange_n(&q->efd1, &want, fd + 1, false,
					__ATOMIC_RELEASE, __ATOMIC_RELAXED))
		/* relaxed: read by destroy only, after the threads */
		__atomic_store_n(&q->efd_borrowed, 1, __ATOMIC_RELAXED);
}

void bpi_waitq_destroy(struct bpi_waitq *q)
{
	if (q->efd1 && !q->efd_borrowed)
		close(q->efd1 - 1);
	q->efd1 = 0;
}

/* An announced descriptor sleeper's wake: one write of the eventfd. */
static void wake_fd(struct bpi_waitq *q)
{
	uint64_t one = 1;
	/* acquire: pairs with bpi_waitq_fd's release */
	int e = __atomic_load_n(&q->efd1, __ATOMIC_ACQUIRE);

	/* relaxed: ordered after the caller's disarm or arm (see wake) */
	if (e && __atomic_load_n(&q->fd_sleepers, __ATOMIC_RELAXED))
		(void)!write(e - 1, &one, sizeof(one));
}

void bpi_waitq_prepare_fd(struct bpi_waitq *q)
{
	/* relaxed: prepare's seq_cst arming below publishes it to a waker
	 * whose compare-and-swap of the word reads the armed bit */
	__atomic_fetch_add(&q->fd_sleepers, 1, __ATOMIC_RELAXED);
	(void)bpi_waitq_prepare(q);
}

void bpi_waitq_cancel_fd(struct bpi_waitq *q)
{
	/* relaxed: a hint, as in cancel; a stale count costs one write */
	__atomic_fetch_sub(&q->fd_sleepers, 1, __ATOMIC_RELAXED);
	bpi_waitq_cancel(q);
}

uint32_t bpi_waitq_prepare(struct bpi_waitq *q)
{
	uint32_t key;

	/* the fence mode must be settled before any thread sleeps */
	bpi_wait_global_init();
	/* seq_cst: the announcement precedes the barrier below */
	__atomic_fetch_add(&q->sleepers, 1, __ATOMIC_SEQ_CST);
	/*
	 * Arm and read the key in one step: any wake from here on changes
	 * the word, so sleeping on this key cannot miss it. seq_cst: a full
	 * barrier on its own where membarrier is missing.
	 */
	key = __atomic_fetch_or(&q->seq, 1, __ATOMIC_SEQ_CST) | 1;
	if (membarrier_ok && !q->waker_fences)
		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
			0);
	else
		bpi_full_fence(); /* pairs with the waker's fence or RMW */
	return key;
}

void bpi_waitq_cancel(struct bpi_waitq *q)
{
	/* relaxed: only a hint for wakers; a stale non-zero costs one wake call
	 */
	__atomic_fetch_sub(&q->sleepers, 1, __ATOMIC_RELAXED);
}

int bpi_waitq_sleep(struct bpi_waitq *q, uint32_t key, int64_t deadline_ns)
{
	struct timespec ts, *tsp = NULL;
	long rc;

	if (deadline_ns >= 0) {
		if (bpi_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		ts.tv_sec = deadline_ns / 1000000000;
		ts.tv_nsec = deadline_ns % 1000000000;
		tsp = &ts;
	}
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline */
	rc = syscall(SYS_futex, &q->seq, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
		     key, tsp, NULL, FUTEX_BITSET_MATCH_ANY);
	if (rc == 0 || errno == EAGAIN)
		return 0;
	if (errno == ETIMEDOUT)
		return -ETIMEDOUT;
	if (errno == EINTR)
		return -EINTR;
	return 0; /* spurious: the caller re-checks */
}

/*
 * Disarm and bump the word in one step, then wake up to n sleepers. A
 * sleeper that arms after this sees the publication that preceded the call
 * (membarrier argument at the top) or is seen by the next waker. A word
 * found disarmed means nobody needs waking: every sleeper was woken since
 * it armed, or on a wake-one queue a woken one is on its way; `always`
 * wakes anyway (a wake of all on a wake-one queue, whose sleepers may
 * still be asleep under a disarmed word).
 */
static void wake(struct bpi_waitq *q, int n, bool always)
{
	uint32_t s;

	/* order the caller's publication before the load, as the fast path
	 * (bpi_waitq_has_sleepers) */
	if (q->waker_fences)
		bpi_full_fence();
	else
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* relaxed: the compare-and-swap below decides */
	s = __atomic_load_n(&q->seq, __ATOMIC_RELAXED);
	/* release: a sleeper that reads the new word sees the publication;
	 * acquire: a descriptor sleeper whose arming this reads is counted
	 * in fd_sleepers (wake_fd) */
	do {
		if (!(s & 1) && !always)
			return;
	} while (!__atomic_compare_exchange_n(&q->seq, &s, (s + 2) & ~1u, true,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	syscall(SYS_futex, &q->seq, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, NULL,
		NULL, 0);
	wake_fd(q);
}

void bpi_waitq_wake_all_slow(struct bpi_waitq *q)
{
	wake(q, INT_MAX, q->wake_one);
}

/*
 * Later publications make no system call until a sleeper arms again, which
 * the woken one does if it finds nothing; the sleepers left asleep are
 * reached through bpi_waitq_pass_on() from the woken one.
 */
void bpi_waitq_wake_one_slow(struct bpi_waitq *q)
{
	wake(q, 1, false);
}

void bpi_waitq_pass_on(struct bpi_waitq *q, int (*more)(void *), void *arg)
{
	/* relaxed: a hint; nothing is lost if it is stale (see the top) */
	if (!__atomic_load_n(&q->sleepers, __ATOMIC_RELAXED))
		return;
	/*
	 * Re-arm for the sleepers left: the wake that disarmed the word was
	 * for this thread, which has now taken its work, so the next
	 * publication must wake another. As in prepare, the arming comes
	 * before the look at the work (more), with a full fence between that
	 * pairs with the wakers' fence: a publication either sees the word
	 * armed or is seen by more().
	 */
	__atomic_fetch_or(&q->seq, 1, __ATOMIC_SEQ_CST);
	bpi_full_fence(); /* as prepare: pairs with the wakers' fence */
	if (more(arg)) {
		syscall(SYS_futex, &q->seq, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1,
			NULL, NULL, 0);
		/* a descriptor sleeper's count: its arming comes before its
		 * look at the work, so it is counted here or saw the work */
		wake_fd(q);
	}
}
