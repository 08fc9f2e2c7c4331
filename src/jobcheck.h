/* SPDX-License-Identifier: MIT */
/*
 * The check every job pointer passes where it enters the pipeline
 * (bp_pipeline_submit) and where a stage hands it back
 * (bp_worker_complete): not NULL and even (the rings keep a lap tag in
 * bit 0), for a whole batch at once.
 */
#ifndef BP_SRC_JOBCHECK_H
#define BP_SRC_JOBCHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <batchpipe/job.h>

/*
 * Whether any of n job pointers is NULL or odd, without a branch per job.
 * On x86-64 (user addresses below 2^57): a pointer p below 2^63 is
 * non-NULL and even exactly when p + (2^63 - 1) has both bit 63 and bit 0
 * set (NULL gives 2^63 - 1, an odd p clears bit 0), so the sums ANDed over
 * the batch have both bits set exactly when every pointer passes: an add
 * and an AND a pointer, four at a time in two SSE2 vectors; from
 * BPI_JOBCHECK_WIDE jobs on, eight at a time in AVX2 where the CPU has it
 * (src/jobcheck.c), the add reading memory. From 2 jobs on, a pointer of
 * 2^63 + 1 or more (no user address) is refused too, as ORing the pointers
 * (bit 0) and their predecessors (bit 63) did, which took an OR more per
 * pointer; one job alone is checked for NULL and odd only. Elsewhere
 * (top-byte tags on aarch64, 32-bit address spaces) that argument does
 * not hold: the plain, exact loop.
 */
#if defined(__x86_64__) && defined(__LP64__)
typedef uintptr_t bpi_ptr2 __attribute__((vector_size(2 * sizeof(uintptr_t))));

/* from this many jobs on, the out-of-line check (a call is worth it) */
#define BPI_JOBCHECK_WIDE 16

/* The long batches' check: SSE2, or AVX2 where the CPU has it. */
bool bpi_bad_job_pointers_wide(struct bp_job *const *jobs, unsigned n);

/* Whether the wide check runs its AVX2 form (for tests). */
bool bpi_jobcheck_avx2(void);

/* p + BPI_JOB_BIAS has both bits of BPI_JOB_OK set for a valid pointer */
#define BPI_JOB_BIAS (UINT64_MAX >> 1)
#define BPI_JOB_OK ((UINT64_C(1) << 63) | 1)

/* The SSE2 form, for any n (the wide check's fallback and tail). */
static inline bool bpi_bad_job_pointers_sse2(struct bp_job *const *jobs,
					     unsigned n)
{
	const bpi_ptr2 bias = {BPI_JOB_BIAS, BPI_JOB_BIAS};
	bpi_ptr2 anda = {UINT64_MAX, UINT64_MAX}, andb = anda;
	uintptr_t and1 = UINT64_MAX;
	size_t i = 0; /* not unsigned: no 32-bit index arithmetic */

	for (; i + 4 <= n; i += 4) {
		bpi_ptr2 a, b;

		memcpy(&a, jobs + i, sizeof(a));
		memcpy(&b, jobs + i + 2, sizeof(b));
		anda &= a + bias;
		andb &= b + bias;
	}
	for (; i < n; i++)
		and1 &= (uintptr_t)jobs[i] + BPI_JOB_BIAS;
	anda &= andb;
	and1 &= anda[0] & anda[1];
	return (and1 & BPI_JOB_OK) != BPI_JOB_OK;
}

static inline bool bpi_bad_job_pointers(struct bp_job *const *jobs, unsigned n)
{
	uintptr_t and1 = UINT64_MAX;

	if (n == 1) /* B=1: no loop either */
		return ((uintptr_t)jobs[0] & 1) | !jobs[0];
	if (n < 4) { /* the short batches of small B: no vector set-up */
		for (unsigned i = 0; i < n; i++)
			and1 &= (uintptr_t)jobs[i] + BPI_JOB_BIAS;
		return (and1 & BPI_JOB_OK) != BPI_JOB_OK;
	}
	if (n >= BPI_JOBCHECK_WIDE)
		return bpi_bad_job_pointers_wide(jobs, n);
	return bpi_bad_job_pointers_sse2(jobs, n);
}
#else
static inline bool bpi_bad_job_pointers(struct bp_job *const *jobs, unsigned n)
{
	bool bad = false;

	for (unsigned i = 0; i < n; i++)
		bad |= !jobs[i] || ((uintptr_t)jobs[i] & 1);
	return bad;
}
#endif

#endif
