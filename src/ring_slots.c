/* SPDX-License-Identifier: MIT */
/*
 * The ring's slot runs, four slots a step: SSE2, AVX2 where the CPU has it
 * (sixteen a step, then four; chosen once, bpi_slots_init), or one atomic
 * access at a time. Out of line: inlined, their registers would burden the
 * one-item path every call takes. src/ring_slots.h says why GCC builtins.
 */
#include <stdint.h>

#include "src/ring_slots.h"

/*
 * The wide parts of a run (four slots a step) live out of line: inlined,
 * their registers would burden the one-item path every call takes.
 * Each returns how many slots it handled, a multiple of four.
 */
__attribute__((noinline)) unsigned
bpi_store_wide_base(uintptr_t *dst, void *const *src, unsigned k, uintptr_t tag)
{
	unsigned i = 0;
#if RING_SIMD
	i = store4_sse2(dst, src, k, tag);
#else
	for (; i + 4 <= k; i += 4) {
		__atomic_store_n(&dst[i], (uintptr_t)src[i] | tag, SLOT_STORE);
		__atomic_store_n(&dst[i + 1], (uintptr_t)src[i + 1] | tag,
				 SLOT_STORE);
		__atomic_store_n(&dst[i + 2], (uintptr_t)src[i + 2] | tag,
				 SLOT_STORE);
		__atomic_store_n(&dst[i + 3], (uintptr_t)src[i + 3] | tag,
				 SLOT_STORE);
	}
#endif
	return i;
}

/*
 * Copy ready slots of a run four at a time, stopping before the first group
 * that holds a slot not ready. XOR with the tag strips it and leaves bit 0
 * set in any slot that is not ready.
 */
__attribute__((noinline)) unsigned
bpi_scan_wide_base(const uintptr_t *s, void **out, unsigned k, uintptr_t tag)
{
	unsigned i = 0;
#if RING_SIMD
	i = scan4_sse2(s, out, k, tag);
#else
	for (; i + 4 <= k; i += 4) {
		uintptr_t x0 = __atomic_load_n(&s[i], SLOT_LOAD) ^ tag;
		uintptr_t x1 = __atomic_load_n(&s[i + 1], SLOT_LOAD) ^ tag;
		uintptr_t x2 = __atomic_load_n(&s[i + 2], SLOT_LOAD) ^ tag;
		uintptr_t x3 = __atomic_load_n(&s[i + 3], SLOT_LOAD) ^ tag;

		if ((x0 | x1 | x2 | x3) & 1)
			break;
		out[i] = (void *)x0;
		out[i + 1] = (void *)x1;
		out[i + 2] = (void *)x2;
		out[i + 3] = (void *)x3;
	}
#endif
	return i;
}

#if RING_SIMD
/*
 * AVX2 versions, four slots per access, chosen once at run time where the
 * CPU has AVX2 (the same per-quadword argument as for SSE2 holds).
 */
#include <immintrin.h>

/* four slots: the items with the tag ORed in */
__attribute__((target("avx2"))) static inline void
store4_avx2(uintptr_t *dst, void *const *src, __m256i t)
{
	_mm256_storeu_si256(
		(__m256i *)dst,
		_mm256_or_si256(_mm256_loadu_si256((const __m256i *)src), t));
}

/*
 * Sixteen slots a step, then four: with a size_t index each step is its
 * loads, stores and one add and compare. With an unsigned index GCC spent
 * two moves and two lea a step, and eight slots a step took twice the
 * loop's rounds: a scan and a store cost 82 and 70 instructions a call
 * in `bpbench pipeline --stages 2` at B=32 under callgrind, 52 and 54
 * now.
 */
__attribute__((target("avx2"), noinline)) static unsigned
store_wide_avx2(uintptr_t *dst, void *const *src, unsigned k, uintptr_t tag)
{
	const __m256i t = _mm256_set1_epi64x((long long)tag);
	const size_t n = k & ~3u; /* whole groups of four */
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		store4_avx2(dst + i, src + i, t);
		store4_avx2(dst + i + 4, src + i + 4, t);
		store4_avx2(dst + i + 8, src + i + 8, t);
		store4_avx2(dst + i + 12, src + i + 12, t);
	}
	for (; i < n; i += 4)
		store4_avx2(dst + i, src + i, t);
	return (unsigned)n;
}

/* bit 0 of each slot (not ready once the tag is off) to its sign bit */
__attribute__((target("avx2"))) static inline int not_ready(__m256i x)
{
	return _mm256_movemask_pd(
		_mm256_castsi256_pd(_mm256_slli_epi64(x, 63)));
}

__attribute__((target("avx2"), noinline)) static unsigned
scan_wide_avx2(const uintptr_t *s, void **out, unsigned k, uintptr_t tag)
{
	const __m256i t = _mm256_set1_epi64x((long long)tag);
	size_t i = 0;

	for (; i + 16 <= k; i += 16) {
		__m256i a = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i]), t);
		__m256i b = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i + 4]), t);
		__m256i c = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i + 8]), t);
		__m256i d = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i + 12]), t);

		if (not_ready(_mm256_or_si256(_mm256_or_si256(a, b),
					      _mm256_or_si256(c, d))))
			break; /* the groups of four find where */
		_mm256_storeu_si256((__m256i *)&out[i], a);
		_mm256_storeu_si256((__m256i *)&out[i + 4], b);
		_mm256_storeu_si256((__m256i *)&out[i + 8], c);
		_mm256_storeu_si256((__m256i *)&out[i + 12], d);
	}
	for (; i + 4 <= k; i += 4) {
		__m256i a = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i]), t);

		if (not_ready(a))
			break;
		_mm256_storeu_si256((__m256i *)&out[i], a);
	}
	return (unsigned)i;
}

unsigned (*bpi_store_wide)(uintptr_t *, void *const *, unsigned,
			   uintptr_t) = bpi_store_wide_base;
unsigned (*bpi_scan_wide)(const uintptr_t *, void **, unsigned,
			  uintptr_t) = bpi_scan_wide_base;

void bpi_slots_init(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2")) {
		bpi_store_wide = store_wide_avx2;
		bpi_scan_wide = scan_wide_avx2;
	}
}
#else
void bpi_slots_init(void)
{
}
#endif
