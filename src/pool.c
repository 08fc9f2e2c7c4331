/* SPDX-License-Identifier: MIT */
/*
 * A pool of fixed-size objects: one cache-line aligned block, its free
 * objects kept in a batchpipe ring. Allocation is a burst dequeue and free
 * an enqueue, so any thread may free what another allocated, in batches,
 * without a lock. A byte per object says whether it is out: freeing one
 * that is not (a double free) is refused instead of corrupting the pool.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include <batchpipe/pool.h>
#include <batchpipe/ring.h>

#include "src/base/alloc.h"

struct bp_pool {
	struct bp_ring *free;
	char *base;
	size_t obj_size; /* rounded up to a cache line */
	unsigned count;
	size_t bytes;
	_Atomic uint8_t *out; /* per object: 1 while allocated */
};

int bp_pool_create(size_t obj_size, unsigned count, struct bp_pool **out)
{
	struct bp_pool *pool;
	int rc;

	if (!out || obj_size == 0 || count == 0 ||
	    count > BP_RING_MAX_CAPACITY || obj_size > (SIZE_MAX / 2) / count)
		return -EINVAL;
	pool = bpi_alloc_aligned(sizeof(*pool), BP_CACHE_LINE);
	if (!pool)
		return -ENOMEM;
	pool->obj_size =
		(obj_size + BP_CACHE_LINE - 1) & ~(size_t)(BP_CACHE_LINE - 1);
	pool->count = count;
	pool->bytes = pool->obj_size * count;
	pool->base = bpi_alloc_aligned(pool->bytes, BP_CACHE_LINE);
	pool->out = calloc(count, sizeof(*pool->out));
	rc = bp_ring_create(count, 0, &pool->free);
	if (!pool->base || !pool->out || rc) {
		bp_ring_destroy(pool->free);
		free(pool->out);
		bpi_free_aligned(pool->base, pool->bytes, BP_CACHE_LINE);
		bpi_free_aligned(pool, sizeof(*pool), BP_CACHE_LINE);
		return rc ? rc : -ENOMEM;
	}
	for (unsigned i = 0; i < count; i++) {
		void *obj = pool->base + (size_t)i * pool->obj_size;

		bp_ring_enqueue_bulk(pool->free, &obj, 1, NULL);
	}
	*out = pool;
	return 0;
}

static size_t obj_index(const struct bp_pool *pool, const void *obj)
{
	return (size_t)((const char *)obj - pool->base) / pool->obj_size;
}

unsigned bp_pool_alloc(struct bp_pool *pool, void **objs, unsigned n)
{
	int k;

	if (!pool || !objs)
		return 0;
	k = bp_ring_dequeue_burst(pool->free, objs, n, NULL);
	for (int i = 0; i < k; i++)
		/* relaxed: whoever frees it got the pointer through a hand-off
		 */
		atomic_store_explicit(&pool->out[obj_index(pool, objs[i])], 1,
				      memory_order_relaxed);
	return k > 0 ? (unsigned)k : 0;
}

int bp_pool_free(struct bp_pool *pool, void *const *objs, unsigned n)
{
	unsigned off = 0;

	if (!pool || (!objs && n))
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		const char *o = objs[i];

		if (o < pool->base || o >= pool->base + pool->bytes ||
		    (size_t)(o - pool->base) % pool->obj_size)
			return -EINVAL;
	}
	for (unsigned i = 0; i < n; i++) {
		/* relaxed: the flag only guards against a second free */
		if (atomic_exchange_explicit(
			    &pool->out[obj_index(pool, objs[i])], 0,
			    memory_order_relaxed) == 0) {
			/* double free: undo this batch, free nothing */
			while (i-- > 0)
				atomic_store_explicit(
					&pool->out[obj_index(pool, objs[i])], 1,
					memory_order_relaxed);
			return -EINVAL;
		}
	}
	/* every object has its slot in the ring: this always fits */
	while (off < n) {
		int k = bp_ring_enqueue_burst(pool->free, objs + off, n - off,
					      NULL);

		if (k <= 0)
			return -EINVAL;
		off += (unsigned)k;
	}
	return 0;
}

unsigned bp_pool_available(const struct bp_pool *pool)
{
	return pool ? bp_ring_count(pool->free) : 0;
}

int bp_pool_destroy(struct bp_pool *pool)
{
	if (!pool)
		return 0;
	/* exact: no other thread uses the pool now */
	if (bp_ring_count(pool->free) != pool->count)
		return -EBUSY; /* freeing would pull memory from under users */
	bp_ring_destroy(pool->free);
	free(pool->out);
	bpi_free_aligned(pool->base, pool->bytes, BP_CACHE_LINE);
	bpi_free_aligned(pool, sizeof(*pool), BP_CACHE_LINE);
	return 0;
}
