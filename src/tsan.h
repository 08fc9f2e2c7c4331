/* SPDX-License-Identifier: MIT */
/*
 * ThreadSanitizer support. TSAN does not model standalone fences nor
 * liburcu's inline-assembly barriers, so under TSAN the ring publishes each
 * slot with release/acquire instead of one fence per batch (same ordering,
 * visible to TSAN), and the RCU hand-offs are annotated. Without TSAN all of
 * this compiles away.
 */
#ifndef BP_SRC_TSAN_H
#define BP_SRC_TSAN_H

#include <batchpipe/ring.h> /* BP_TSAN */

#if BP_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define bp_tsan_acquire(a) __tsan_acquire((void *)(a))
#define bp_tsan_release(a) __tsan_release((void *)(a))
#else
#define bp_tsan_acquire(a) ((void)(a))
#define bp_tsan_release(a) ((void)(a))
#endif

#endif
