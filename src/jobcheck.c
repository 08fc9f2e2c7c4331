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

/* The same test as the SSE2 form, eight pointers per two 32-byte adds
 * that read memory. */
__attribute__((target("avx2"))) static bool
bad_wide_avx2(struct bp_job *const *jobs, unsigned n)
{
	const __m256i bias = _mm256_set1_epi64x((long long)BPI_JOB_BIAS);
	const __m256i ok = _mm256_set1_epi64x((long long)BPI_JOB_OK);
	__m256i and_a = _mm256_set1_epi64x(-1), and_b = and_a;
	size_t i = 0; /* not unsigned: no 32-bit index arithmetic */

	for (; i + 8 <= n; i += 8) {
		__m256i a = _mm256_loadu_si256((const __m256i *)&jobs[i]);
		__m256i b = _mm256_loadu_si256((const __m256i *)&jobs[i + 4]);

		and_a = _mm256_and_si256(and_a, _mm256_add_epi64(a, bias));
		and_b = _mm256_and_si256(and_b, _mm256_add_epi64(b, bias));
	}
	/* per lane: ok's two bits, clear where a pointer failed */
	and_a = _mm256_andnot_si256(_mm256_and_si256(and_a, and_b), ok);
	if (!_mm256_testz_si256(and_a, and_a))
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
