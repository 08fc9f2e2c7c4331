/* SPDX-License-Identifier: MIT */
/* Pipeline-owned memory: cache-line aligned, from jemalloc or libc. */
#ifndef BP_SRC_BASE_ALLOC_H
#define BP_SRC_BASE_ALLOC_H

#include <stddef.h>

#define BP_CACHE_LINE 64
/* Two lines: adjacent-line prefetch pulls pairs of lines on x86. */
#define BP_FALSE_SHARING 128

/* Zeroed, `align`-aligned (power of two, >= sizeof(void *)) memory or NULL. */
void *bpi_alloc_aligned(size_t size, size_t align);
/* Free memory from bpi_alloc_aligned; size must be the size allocated. */
void bpi_free_aligned(void *p, size_t size, size_t align);

#endif
