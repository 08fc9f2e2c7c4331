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
 * On x86-64 (user addresses below 2^57): bit 0 of the pointers ORed says
 * "odd"; NULL is the only pointer whose predecessor has the top bit set, so
 * the top bit of the predecessors ORed says "NULL"; four at a time in two
 * SSE2 vectors, about 4 instructions per job where a plain loop took 9
 * (callgrind, B = 32); from BPI_JOBCHECK_WIDE jobs on, eight at a time in
 * AVX2 where the CPU has it (src/jobcheck.c), about 1.5. Elsewhere
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

/* The SSE2 form, for any n (the wide check's fallback and tail). */
static inline bool bpi_bad_job_pointers_sse2(struct bp_job *const *jobs,
					     unsigned n)
{
	bpi_ptr2 ora = {0, 0}, orb = {0, 0}, lowa = {0, 0}, lowb = {0, 0};
	uintptr_t or1 = 0, low1 = 0;
	unsigned i = 0;

	for (; i + 4 <= n; i += 4) {
		bpi_ptr2 a, b;

		memcpy(&a, jobs + i, sizeof(a));
		memcpy(&b, jobs + i + 2, sizeof(b));
		ora |= a;
		orb |= b;
		lowa |= a - 1;
		lowb |= b - 1;
	}
	for (; i < n; i++) {
		or1 |= (uintptr_t)jobs[i];
		low1 |= (uintptr_t)jobs[i] - 1;
	}
	ora |= orb;
	lowa |= lowb;
	or1 |= ora[0] | ora[1];
	low1 |= lowa[0] | lowa[1];
	return ((or1 & 1) | (low1 >> 63)) != 0;
}

static inline bool bpi_bad_job_pointers(struct bp_job *const *jobs, unsigned n)
{
	uintptr_t or1 = 0;

	if (n == 1) /* B=1: no loop either */
		return ((uintptr_t)jobs[0] & 1) | !jobs[0];
	if (n < 4) { /* the one-job batches of small B: no vector set-up */
		for (unsigned i = 0; i < n; i++)
			or1 |= ((uintptr_t)jobs[i] & 1) | !jobs[i];
		return or1 != 0;
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
