/* SPDX-License-Identifier: MIT */
/*
 * The ring's slot runs, four slots a step: SSE2, AVX2 where the CPU has it
 * (chosen once, bpi_slots_init), or one atomic access at a time. Out of
 * line: inlined, their registers would burden the one-item path every call
 * takes. src/ring_slots.h says why GCC builtins.
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

__attribute__((target("avx2"), noinline)) static unsigned
store_wide_avx2(uintptr_t *dst, void *const *src, unsigned k, uintptr_t tag)
{
	const __m256i t = _mm256_set1_epi64x((long long)tag);
	unsigned i = 0;

	for (; i + 8 <= k; i += 8) {
		__m256i a = _mm256_loadu_si256((const __m256i *)&src[i]);
		__m256i b = _mm256_loadu_si256((const __m256i *)&src[i + 4]);

		_mm256_storeu_si256((__m256i *)&dst[i], _mm256_or_si256(a, t));
		_mm256_storeu_si256((__m256i *)&dst[i + 4],
				    _mm256_or_si256(b, t));
	}
	for (; i + 4 <= k; i += 4)
		_mm256_storeu_si256(
			(__m256i *)&dst[i],
			_mm256_or_si256(
				_mm256_loadu_si256((const __m256i *)&src[i]),
				t));
	return i;
}

__attribute__((target("avx2"), noinline)) static unsigned
scan_wide_avx2(const uintptr_t *s, void **out, unsigned k, uintptr_t tag)
{
	const __m256i t = _mm256_set1_epi64x((long long)tag);
	unsigned i = 0;

	for (; i + 8 <= k; i += 8) {
		__m256i a = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i]), t);
		__m256i b = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i + 4]), t);
		/* bit 0 of each slot to its sign bit */
		__m256i m = _mm256_slli_epi64(_mm256_or_si256(a, b), 63);

		if (_mm256_movemask_pd(_mm256_castsi256_pd(m)))
			break;
		_mm256_storeu_si256((__m256i *)&out[i], a);
		_mm256_storeu_si256((__m256i *)&out[i + 4], b);
	}
	for (; i + 4 <= k; i += 4) {
		__m256i a = _mm256_xor_si256(
			_mm256_loadu_si256((const __m256i *)&s[i]), t);

		if (_mm256_movemask_pd(
			    _mm256_castsi256_pd(_mm256_slli_epi64(a, 63))))
			break;
		_mm256_storeu_si256((__m256i *)&out[i], a);
	}
	return i;
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
