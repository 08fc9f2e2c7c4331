/* SPDX-License-Identifier: MIT */
/*
 * bpi_bad_job_pointers for long batches (src/jobcheck.h says how the check
 * works): eight pointers a step in AVX2 where the CPU has it, else the
 * inline SSE2 form. Out of line: the call costs less than the AVX2 form
 * saves from BPI_JOBCHECK_WIDE jobs on. Which form is a flag set once when
 * the library is loaded (a branch, not a writable function pointer); until
 * then, SSE2.
 */
#include "src/jobcheck.h"

#if defined(__x86_64__) && defined(__LP64__)
#include <immintrin.h>

/* set once by jobcheck_init, before main; read-only after */
static bool have_avx2;

/* The same two facts as the SSE2 form: bit 0 ORed (odd), and the top bit
 * of the predecessors ORed (NULL), eight pointers per two 32-byte loads. */
__attribute__((target("avx2"))) static bool
bad_wide_avx2(struct bp_job *const *jobs, unsigned n)
{
	const __m256i one = _mm256_set1_epi64x(1);
	__m256i or_a = _mm256_setzero_si256(), or_b = or_a;
	__m256i low_a = or_a, low_b = or_a;
	unsigned i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256i a = _mm256_loadu_si256((const __m256i *)&jobs[i]);
		__m256i b = _mm256_loadu_si256((const __m256i *)&jobs[i + 4]);

		or_a = _mm256_or_si256(or_a, a);
		or_b = _mm256_or_si256(or_b, b);
		low_a = _mm256_or_si256(low_a, _mm256_sub_epi64(a, one));
		low_b = _mm256_or_si256(low_b, _mm256_sub_epi64(b, one));
	}
	/* per lane: bit 0 of the pointers ORed (odd), and bit 63 of their
	 * predecessors ORed moved down to bit 0 (NULL) */
	or_a = _mm256_and_si256(_mm256_or_si256(or_a, or_b), one);
	low_a = _mm256_srli_epi64(_mm256_or_si256(low_a, low_b), 63);
	or_a = _mm256_or_si256(or_a, low_a);
	if (!_mm256_testz_si256(or_a, or_a))
		return true;
	return i < n && bpi_bad_job_pointers_sse2(jobs + i, n - i);
}

bool bpi_bad_job_pointers_wide(struct bp_job *const *jobs, unsigned n)
{
	return have_avx2 ? bad_wide_avx2(jobs, n)
			 : bpi_bad_job_pointers_sse2(jobs, n);
}

bool bpi_jobcheck_avx2(void)
{
	return have_avx2;
}

/* At load time (GCC's CPU model set up first): a caller in an earlier
 * constructor of a static program gets the SSE2 form, as correct. */
__attribute__((constructor)) static void jobcheck_init(void)
{
	__builtin_cpu_init();
	have_avx2 = __builtin_cpu_supports("avx2");
}
#endif
