/* SPDX-License-Identifier: MIT */
/*
 * wakefloor.c - the wake-up floor without the library: two futex wake-ups
 * in a row after an idle gap.
 */
#include "pipeline/experiments.h"

#include <math.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * The wake-up floor, without the library: after the same idle gap as the
 * wake-up test, wake a thread blocked in FUTEX_WAIT, which wakes a second
 * one, which reads the clock: the two wake-ups in a row that a job pays
 * when both a worker and the sink are asleep. The measuring thread sleeps
 * through the gap and waits for the end in the kernel too, as the
 * wake-up test's producer does.
 */
struct pb_wf {
	_Alignas(BENCH_CACHELINE) _Atomic uint32_t w[3]; /* futex words */
	_Alignas(BENCH_CACHELINE) _Atomic int64_t t_end;
	atomic_int stop;
};

static void pb_fx_wait(_Atomic uint32_t *w, uint32_t v)
{
	/* acquire: pairs with pb_fx_wake's release (t_end, stop) */
	while (atomic_load_explicit(w, memory_order_acquire) == v)
		syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void pb_fx_wake(_Atomic uint32_t *w)
{
	/* release: what the waker wrote before is seen by the woken */
	atomic_fetch_add_explicit(w, 1, memory_order_release);
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Stage 1 (the "worker") wakes stage 2 (the "sink"), which reads the clock
 * and wakes the measuring thread. */
static void *pb_wf_main(void *arg, int stage)
{
	struct pb_wf *f = arg;

	for (uint32_t v = 0;; v++) {
		pb_fx_wait(&f->w[stage - 1], v);
		/* relaxed: ordered by the futex word's release/acquire */
		if (atomic_load_explicit(&f->stop, memory_order_relaxed))
			return NULL;
		if (stage == 2)
			atomic_store_explicit(&f->t_end, bench_now_ns(),
					      memory_order_relaxed);
		pb_fx_wake(&f->w[stage]);
	}
}

static void *pb_wf_first(void *arg)
{
	return pb_wf_main(arg, 1);
}

static void *pb_wf_second(void *arg)
{
	return pb_wf_main(arg, 2);
}

struct pb_lat_result pb_wakefloor_once(const struct pb_opts *o, int64_t *v,
				       unsigned n)
{
	struct pb_wf *f = bench_zalloc(sizeof(*f));
	struct pb_lat_result res = {NAN, NAN, NAN, NAN, n};
	pthread_t a, b;

	pb_spawn(&a, pb_wf_first, f, -1);
	pb_spawn(&b, pb_wf_second, f, -1);
	for (unsigned i = 0; i < n; i++) {
		int64_t t0;

		bench_sleep_ns((int64_t)o->wake_gap_us * 1000);
		/* relaxed here and below: the futex words order them */
		atomic_store_explicit(&f->t_end, 0, memory_order_relaxed);
		t0 = bench_now_ns();
		pb_fx_wake(&f->w[0]);
		pb_fx_wait(&f->w[2], i);
		v[i] = atomic_load_explicit(&f->t_end, memory_order_relaxed) -
		       t0;
		if (v[i] <= 0)
			bench_die("bpbench pipeline: wake floor: the second "
				  "thread did not read the clock\n");
	}
	atomic_store_explicit(&f->stop, 1, memory_order_relaxed);
	pb_fx_wake(&f->w[0]);
	pb_fx_wake(&f->w[1]);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	free(f);
	bench_sort_i64(v, n);
	res.p50_us = bench_pct_i64(v, n, 0.50) / 1e3;
	res.p99_us = bench_pct_i64(v, n, 0.99) / 1e3;
	return res;
}
