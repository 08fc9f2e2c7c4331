/* SPDX-License-Identifier: MIT */
/* Aligned allocation through jemalloc's mallocx (or libc when built without).
 */
#include <stdlib.h>
#include <string.h>

#include "bp_config.h"
#include "src/base/alloc.h"

#ifdef BP_USE_JEMALLOC
#include <jemalloc/jemalloc.h>

void *bpi_alloc_aligned(size_t size, size_t align)
{
	if (size == 0)
		size = 1;
	return mallocx(size, MALLOCX_ALIGN(align) | MALLOCX_ZERO);
}

void bpi_free_aligned(void *p, size_t size, size_t align)
{
	/* sized free skips jemalloc's size lookup */
	if (p)
		sdallocx(p, size ? size : 1, MALLOCX_ALIGN(align));
}
#else
void *bpi_alloc_aligned(size_t size, size_t align)
{
	void *p = NULL;

	if (size == 0)
		size = 1;
	if (posix_memalign(&p, align, size) != 0)
		return NULL;
	memset(p, 0, size);
	return p;
}

void bpi_free_aligned(void *p, size_t size, size_t align)
{
	(void)size;
	(void)align;
	free(p);
}
#endif
