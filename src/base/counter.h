/* SPDX-License-Identifier: MIT */
/* Statistics counters of the pipeline and the RDMA stage. */
#ifndef BP_SRC_BASE_COUNTER_H
#define BP_SRC_BASE_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * A statistics counter: written by one thread only, read by anyone. The
 * add is a load and a store, not an atomic read-modify-write (no lock
 * prefix, no contention); relaxed atomics keep concurrent readers defined.
 */
typedef _Atomic uint64_t bpi_counter;

static inline void bpi_stat_add(bpi_counter *c, uint64_t v)
{
	/* relaxed: single writer; readers want a snapshot, nothing ordered */
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* Raise a high-water mark (single writer, as bpi_stat_add). */
static inline void bpi_stat_max(bpi_counter *c, uint64_t v)
{
	/* relaxed: as bpi_stat_add */
	if (v > atomic_load_explicit(c, memory_order_relaxed))
		atomic_store_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t bpi_stat_get(const bpi_counter *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

#endif
