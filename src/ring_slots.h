/* SPDX-License-Identifier: MIT */
/*
 * The ring's slots: how runs of items are stored into them with a lap tag
 * and scanned out of them (src/ring.c says what the tag and the fences
 * mean, (1)). The slots are plain uintptr_t, not _Atomic: the zero-copy
 * calls of the public batchpipe/ring.h touch them inline, and that header
 * compiles as C++ too. So every access to them is a GCC __atomic builtin,
 * here and in ring.h; the ring's own words (heads, flags) are C11 atomics
 * in ring.c.
 */
#ifndef BP_SRC_RING_SLOTS_H
#define BP_SRC_RING_SLOTS_H

#include <stdint.h>

#include <batchpipe/wait.h> /* BP_TSAN */

#define BP_ALWAYS_INLINE inline __attribute__((always_inline))

/*
 * Slot accesses are relaxed and one fence per batch orders them (ring.c,
 * (1)). Under TSAN, which ignores fences, every slot access carries the
 * ordering.
 */
#if BP_TSAN
#define SLOT_STORE __ATOMIC_RELEASE
#define SLOT_LOAD  __ATOMIC_ACQUIRE
#else
#define SLOT_STORE __ATOMIC_RELAXED
#define SLOT_LOAD  __ATOMIC_RELAXED
#endif

/*
 * On x86-64 the runs move two slots per 16-byte SSE2 access (four per
 * AVX2 access in the wide runs). Each slot is an aligned quadword, and the
 * ring relies on x86 CPUs reading and writing each aligned quadword of a
 * wider access whole, so that a consumer sees either the old or the new
 * value of every slot. That is what x86 CPUs do, but the manuals promise
 * it only for 8-byte accesses (and for aligned MOVDQA-type 16-byte ones
 * on AVX CPUs), not for the unaligned-form accesses used here, some of
 * which cross a cache line. The per-batch fences of (1) order them as
 * before. Elsewhere, and under TSAN, slots are moved one atomic access at
 * a time.
 */
#if defined(__SSE2__) && defined(__x86_64__) && !BP_TSAN
#include <emmintrin.h>
#define RING_SIMD 1
#else
#define RING_SIMD 0
#endif

#if RING_SIMD
/*
 * Four slots a step, two per SSE2 access: the inline leaf runs below and
 * the out-of-line SSE2 wide runs (ring_slots.c) share them. Each returns
 * how many slots it handled, a multiple of four; scan4 stops before the
 * first group with a slot not ready (the XOR with the tag strips it and
 * leaves bit 0 set in a slot not ready).
 */
static inline __attribute__((always_inline)) unsigned
store4_sse2(uintptr_t *dst, void *const *src, unsigned k, uintptr_t tag)
{
	const __m128i t = _mm_set1_epi64x((long long)tag);
	unsigned i = 0;

	for (; i + 4 <= k; i += 4) {
		__m128i a = _mm_loadu_si128((const __m128i *)&src[i]);
		__m128i b = _mm_loadu_si128((const __m128i *)&src[i + 2]);

		_mm_storeu_si128((__m128i *)&dst[i], _mm_or_si128(a, t));
		_mm_storeu_si128((__m128i *)&dst[i + 2], _mm_or_si128(b, t));
	}
	return i;
}

static inline __attribute__((always_inline)) unsigned
scan4_sse2(const uintptr_t *s, void **out, unsigned k, uintptr_t tag)
{
	const __m128i t = _mm_set1_epi64x((long long)tag);
	unsigned i = 0;

	for (; i + 4 <= k; i += 4) {
		__m128i a = _mm_xor_si128(
			_mm_loadu_si128((const __m128i *)&s[i]), t);
		__m128i b = _mm_xor_si128(
			_mm_loadu_si128((const __m128i *)&s[i + 2]), t);

		/* bit 0 of each slot to its sign bit: set = not ready */
		if (_mm_movemask_pd(_mm_castsi128_pd(
			    _mm_slli_epi64(_mm_or_si128(a, b), 63))))
			break;
		_mm_storeu_si128((__m128i *)&out[i], a);
		_mm_storeu_si128((__m128i *)&out[i + 2], b);
	}
	return i;
}
#endif

/*
 * The wide parts of a run (four slots a step): each returns how many slots
 * it handled, a multiple of four. scan stops before the first group with a
 * slot not ready.
 */
unsigned bpi_store_wide_base(uintptr_t *dst, void *const *src, unsigned k,
			     uintptr_t tag);
unsigned bpi_scan_wide_base(const uintptr_t *s, void **out, unsigned k,
			    uintptr_t tag);
#if RING_SIMD
extern unsigned (*bpi_store_wide)(uintptr_t *, void *const *, unsigned,
				  uintptr_t);
extern unsigned (*bpi_scan_wide)(const uintptr_t *, void **, unsigned,
				 uintptr_t);
#else
#define bpi_store_wide bpi_store_wide_base
#define bpi_scan_wide  bpi_scan_wide_base
#endif

/* Pick the wide versions for this CPU; once, before any ring is used. */
void bpi_slots_init(void);

/* Store a run of k items with one lap tag, relaxed (see (1)). */
static BP_ALWAYS_INLINE void store_run(uintptr_t *dst, void *const *src,
				       unsigned k, uintptr_t tag)
{
	unsigned i = k >= 4 ? bpi_store_wide(dst, src, k, tag) : 0;

	for (; i < k; i++)
		__atomic_store_n(&dst[i], (uintptr_t)src[i] | tag, SLOT_STORE);
}

/*
 * Count the ready slots of a run with one lap tag, up to k, copying them to
 * out if out is not NULL. Relaxed loads: the caller issues the acquire
 * fence of (1).
 */
static BP_ALWAYS_INLINE unsigned scan_run(const uintptr_t *s, void **out,
					  unsigned k, uintptr_t tag)
{
	unsigned i = out && k >= 4 ? bpi_scan_wide(s, out, k, tag) : 0;

	for (; i < k; i++) {
		uintptr_t x = __atomic_load_n(&s[i], SLOT_LOAD) ^ tag;

		if (x & 1)
			return i;
		if (out)
			out[i] = (void *)x;
	}
	return k;
}

/*
 * The leaf runs of the fast paths (at most LEAF_MAX slots, ring.c): inline,
 * one item in a straight line, more four, then two slots per SSE2 access
 * where RING_SIMD, one at a time otherwise.
 *
 * leaf_odd: bit 0 of the n items ORed (an item with it set is refused).
 * Eight bytes at a time: it runs before the claim, when the caller has
 * usually just written items[] with 8-byte stores that may still be in
 * the store buffer, and a 16-byte load of two of them cannot be forwarded
 * from it: it waits for both to reach the cache (in `bpbench ring`'s
 * single-thread loop at B=2..8, 12-25 % slower than this loop). The
 * stores after the claim load items[] 16 bytes at a time: on a
 * multi-producer ring the claim's locked instruction has drained the
 * store buffer by then. A single producer claims with a plain store and
 * drains nothing, but there too the wide stores measured faster (SP/SC,
 * B=8: 2.5-2.7 -> 2.0-2.1 ns per item).
 */
static BP_ALWAYS_INLINE uintptr_t leaf_odd(void *const *items, unsigned n)
{
	uintptr_t a = 0, b = 0;

	/*
	 * Unrolled for n up to 8 (the leaf runs, the wide check's tail): one
	 * jump, then a load and an OR per item, where the loop by two spent
	 * five instructions a pair (bp_ring_enqueue_burst at B=8: 152 -> 115
	 * instructions a call). Longer runs (no RING_SIMD) loop first.
	 */
	switch (n) {
	default:
		for (unsigned i = 8; i < n; i++)
			a |= (uintptr_t)items[i];
		/* fall through */
	case 8:
		b |= (uintptr_t)items[7];
		/* fall through */
	case 7:
		a |= (uintptr_t)items[6];
		/* fall through */
	case 6:
		b |= (uintptr_t)items[5];
		/* fall through */
	case 5:
		a |= (uintptr_t)items[4];
		/* fall through */
	case 4:
		b |= (uintptr_t)items[3];
		/* fall through */
	case 3:
		a |= (uintptr_t)items[2];
		/* fall through */
	case 2:
		b |= (uintptr_t)items[1];
		/* fall through */
	case 1:
		a |= (uintptr_t)items[0];
		/* fall through */
	case 0:
		break;
	}
	return (a | b) & 1;
}

/* Store n items with lap tag `tag` (relaxed, see (1) in ring.c). */
static BP_ALWAYS_INLINE void leaf_store(uintptr_t *dst, void *const *src,
					unsigned n, uintptr_t tag)
{
	unsigned i = 0;

	if (n == 1) {
		__atomic_store_n(dst, (uintptr_t)src[0] | tag, SLOT_STORE);
		return;
	}
#if RING_SIMD
	i = store4_sse2(dst, src, n, tag);
	if (i + 2 <= n) {
		_mm_storeu_si128(
			(__m128i *)&dst[i],
			_mm_or_si128(_mm_loadu_si128((const __m128i *)&src[i]),
				     _mm_set1_epi64x((long long)tag)));
		i += 2;
	}
#endif
	for (; i < n; i++)
		__atomic_store_n(&dst[i], (uintptr_t)src[i] | tag, SLOT_STORE);
}

/*
 * Copy the ready slots of a run of n (tag `tag`) into out, stopping at the
 * first one not ready; returns how many were copied. Nothing past them is
 * written. Relaxed loads: the caller's acquire fence after its claim
 * orders them ((1) and (3) in ring.c).
 */
static BP_ALWAYS_INLINE unsigned leaf_scan(const uintptr_t *s, void **out,
					   unsigned n, uintptr_t tag)
{
	unsigned i = 0;

	if (n == 1) {
		uintptr_t x = __atomic_load_n(s, SLOT_LOAD) ^ tag;

		if (x & 1)
			return 0;
		out[0] = (void *)x;
		return 1;
	}
#if RING_SIMD
	const __m128i t = _mm_set1_epi64x((long long)tag);

	/* four at a time while all four are ready, then by two */
	i = scan4_sse2(s, out, n, tag);
	for (; i + 2 <= n; i += 2) {
		__m128i a = _mm_xor_si128(
			_mm_loadu_si128((const __m128i *)&s[i]), t);
		/* bit 0 of each slot to its sign bit: set = not ready */
		int m = _mm_movemask_pd(
			_mm_castsi128_pd(_mm_slli_epi64(a, 63)));

		if (m) {
			if (m & 1)
				return i;
			_mm_storel_epi64((__m128i *)&out[i], a);
			return i + 1;
		}
		_mm_storeu_si128((__m128i *)&out[i], a);
	}
#endif
	for (; i < n; i++) {
		uintptr_t x = __atomic_load_n(&s[i], SLOT_LOAD) ^ tag;

		if (x & 1)
			break;
		out[i] = (void *)x;
	}
	return i;
}

#endif
