/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/pool.h - a pool of fixed-size objects.
 *
 * For applications that want their jobs (or any fixed-size objects) from
 * the library: one cache-line aligned block, its free objects kept in a
 * batchpipe ring. Any thread allocates, any thread frees, in batches and
 * without a lock, so a cross-thread free is cheap (the sink frees what
 * producers allocated). A pool does not grow.
 */
#ifndef BATCHPIPE_POOL_H
#define BATCHPIPE_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

struct bp_pool;

/*
 * Create a pool of `count` objects of `obj_size` bytes each, every object
 * cache-line aligned (obj_size is rounded up to a cache line). Returns 0
 * and sets *out, or -EINVAL (out NULL, obj_size or count 0, count above
 * 2^30, or the block too large), -ENOMEM. Any thread.
 */
int bp_pool_create(size_t obj_size, unsigned count, struct bp_pool **out);

/*
 * Take up to n objects into objs. Returns the count taken, 0 when the pool
 * is empty (or pool or objs is NULL). Any thread, concurrently.
 */
unsigned bp_pool_alloc(struct bp_pool *pool, void **objs, unsigned n);

/*
 * Give n objects back. Returns 0, or -EINVAL (pool NULL, objs NULL with
 * n > 0, a pointer that is not an object of this pool, or an object that is
 * not out: a double free); on -EINVAL none of the n is freed. Any thread,
 * concurrently, whichever thread allocated them.
 */
int bp_pool_free(struct bp_pool *pool, void *const *objs, unsigned n);

/*
 * Objects free in the pool now (0 for NULL). Exact when no other thread is
 * allocating or freeing; otherwise a snapshot that may already be stale
 * when it returns. Any thread.
 */
unsigned bp_pool_available(const struct bp_pool *pool);

/*
 * Free the pool and its objects. All objects must have been freed back
 * (not checked: one still out dangles); no other thread may be using the
 * pool. NULL is accepted.
 */
void bp_pool_destroy(struct bp_pool *pool);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_POOL_H */
