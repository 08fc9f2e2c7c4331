/* SPDX-License-Identifier: MIT */
/*
 * A flag lock that yields while it waits: for cold paths only (a registry
 * change, one reconfiguration at a time), never on a path that runs per
 * job or per batch. Zero is unlocked.
 */
#ifndef BP_SRC_BASE_SPIN_H
#define BP_SRC_BASE_SPIN_H

#include <sched.h>
#include <stdatomic.h>

static inline void bpi_spin_lock(_Atomic int *l)
{
	int expect = 0;

	/* acquire: the previous holder's changes are visible */
	while (!atomic_compare_exchange_weak_explicit(
		l, &expect, 1, memory_order_acquire, memory_order_relaxed)) {
		expect = 0;
		sched_yield();
	}
}

static inline void bpi_spin_unlock(_Atomic int *l)
{
	/* release: pairs with the acquire in bpi_spin_lock */
	atomic_store_explicit(l, 0, memory_order_release);
}

#endif
