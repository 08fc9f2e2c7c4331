/* SPDX-License-Identifier: MIT */
/*
 * fill.c - the fill's page generator and the digest: the two pure
 * functions both ends of a bp-target fill agree on.
 *
 * Page generator. Page index i under seed s is a splitmix64 stream: one
 * mix per page picks the stream's start, one add and one mix per 8-byte
 * word give its values, stored little-endian whatever the host (so a
 * digest taken on one machine checks a page written on another):
 *
 *     start   = mix(s ^ mix(i + GOLDEN))
 *     word[j] = mix(start + (j + 1) * GOLDEN)
 *
 * A page that is not a multiple of 8 bytes ends with the first page % 8
 * bytes (little-endian) of one more word, word[page / 8]: a shorter page
 * is always a prefix of a longer one with the same index, which is what
 * lets a fill end with a partial page.
 *
 * Digest: FNV-1a, 64-bit, over the little-endian 8-byte words, then over
 * the remaining bytes one by one. Word steps keep it fast on large
 * regions; it is a check against accidents, not a cryptographic hash.
 */
#include <string.h>

#include <batchpipe/rdma.h>

#define GOLDEN	  0x9e3779b97f4a7c15ull
#define FNV_PRIME 0x100000001b3ull

static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t to_le64(uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return __builtin_bswap64(v);
#else
	return v;
#endif
}

void bp_rdma_fill_page(uint64_t seed, uint64_t index, void *buf, size_t page)
{
	uint8_t *p = buf;
	size_t words = page / 8, j;
	uint64_t start, v;

	if (buf == NULL || page == 0)
		return;
	start = mix64(seed ^ mix64(index + GOLDEN));
	for (j = 0; j < words; j++) {
		v = to_le64(mix64(start + (j + 1) * GOLDEN));
		memcpy(p + 8 * j, &v, 8); /* buf need not be aligned */
	}
	if (page % 8) {
		v = to_le64(mix64(start + (j + 1) * GOLDEN));
		memcpy(p + 8 * j, &v, page % 8);
	}
}

uint64_t bp_rdma_digest(const void *buf, size_t len)
{
	return bp_rdma_digest_more(BP_RDMA_DIGEST_INIT, buf, len);
}

uint64_t bp_rdma_digest_more(uint64_t h, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t w;
	size_t i = 0;

	if (buf == NULL)
		return h; /* nothing more */
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h ^= to_le64(w);
		h *= FNV_PRIME;
	}
	for (; i < len; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}
