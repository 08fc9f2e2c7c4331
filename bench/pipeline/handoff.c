/* SPDX-License-Identifier: MIT */
/*
 * handoff.c - the cross-core hand-off floor: one cache line ping-ponged
 * between two pinned threads; what any cross-core queue pays at least.
 */
#include "pipeline/experiments.h"

#include <stdlib.h>

struct pb_pingpong {
	_Alignas(BENCH_CACHELINE) atomic_uint_fast64_t word;
	unsigned rounds;
	pthread_barrier_t start;
	int64_t t0, t1;
};

static void pb_pp_wait(atomic_uint_fast64_t *w, uint64_t v)
{
	unsigned spins = 0;

	/* acquire: nothing to publish; relaxed would do, acquire is free */
	while (atomic_load_explicit(w, memory_order_acquire) != v)
		if (++spins % 4096 == 0)
			sched_yield(); /* the other side was preempted */
		else
			bench_cpu_pause();
}

static void *pb_pp_ping(void *arg)
{
	struct pb_pingpong *pp = arg;

	pthread_barrier_wait(&pp->start);
	pp->t0 = bench_now_ns();
	for (uint64_t i = 0; i < pp->rounds; i++) {
		/* release: orders nothing but keeps the store a plain one */
		atomic_store_explicit(&pp->word, 2 * i + 1,
				      memory_order_release);
		pb_pp_wait(&pp->word, 2 * i + 2);
	}
	pp->t1 = bench_now_ns();
	return NULL;
}

static void *pb_pp_pong(void *arg)
{
	struct pb_pingpong *pp = arg;

	pthread_barrier_wait(&pp->start);
	for (uint64_t i = 0; i < pp->rounds; i++) {
		pb_pp_wait(&pp->word, 2 * i + 1);
		atomic_store_explicit(&pp->word, 2 * i + 2,
				      memory_order_release);
	}
	return NULL;
}

/* Cross-core hand-off: one cache line ping-ponged; ns one way. */
double pb_handoff_once(const struct pb_opts *o, unsigned rounds)
{
	struct pb_pingpong *pp = bench_zalloc(sizeof(*pp));
	pthread_t a, b;
	double ns;

	atomic_init(&pp->word, 0);
	pp->rounds = rounds;
	pthread_barrier_init(&pp->start, NULL, 2);
	pb_spawn(&a, pb_pp_ping, pp, o->a.cpus[0]);
	pb_spawn(&b, pb_pp_pong, pp, o->a.cpus[1 % o->a.ncpus]);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_barrier_destroy(&pp->start);
	ns = (double)(pp->t1 - pp->t0) / (2.0 * rounds);
	free(pp);
	return ns;
}
