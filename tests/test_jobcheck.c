/* SPDX-License-Identifier: MIT */
/*
 * test_jobcheck - the job-pointer check at the pipeline's doors
 * (src/jobcheck.h: bp_pipeline_submit and bp_worker_complete refuse a batch
 * with a NULL or odd pointer): every batch size 0..80, which takes the
 * scalar form, the inline SSE2 form and the out-of-line wide form (AVX2
 * where the CPU has it) with every tail length; a NULL and an odd pointer
 * at every position, and several at once; pointers near both ends of the
 * user address space. Each form is also called directly; the wide one runs
 * AVX2 exactly where the CPU has it (checked; on a CPU without AVX2 the
 * wide form is the SSE2 one, and the test says so). Every batch is a heap
 * array of exactly n pointers, so ASAN sees a read past its end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "src/jobcheck.h"

#define MAXN 80

/* Aligned, even addresses that are never dereferenced. */
static struct bp_job *fake(uintptr_t addr)
{
	return (struct bp_job *)addr;
}

static void fill_good(struct bp_job **jobs, unsigned n, unsigned salt)
{
	for (unsigned i = 0; i < n; i++) {
		/* low, middle and high user addresses, all even */
		uintptr_t base = (i + salt) % 3 == 0   ? 0x1000
				 : (i + salt) % 3 == 1 ? 0x7f0000000000ull
						       : 0x00fffffffffff000ull;

		jobs[i] = fake(base + 64u * i);
	}
}

/*
 * Every form agrees on jobs[0..n): the dispatcher and each form direct, on
 * a heap copy of exactly n pointers.
 */
static bool check_all(struct bp_job **jobs, unsigned n)
{
	struct bp_job **copy = malloc((n ? n : 1) * sizeof(*copy));
	bool want;

	assert_non_null(copy);
	memcpy(copy, jobs, n * sizeof(*copy));
	want = bpi_bad_job_pointers(copy, n);
#if defined(__x86_64__) && defined(__LP64__)
	assert_int_equal(bpi_bad_job_pointers_sse2(copy, n), want);
	if (n >= BPI_JOBCHECK_WIDE)
		assert_int_equal(bpi_bad_job_pointers_wide(copy, n), want);
#endif
	free(copy);
	return want;
}

#if defined(__x86_64__) && defined(__LP64__)
/* The wide form is AVX2 exactly where the CPU has it. */
static void test_wide_form(void **state)
{
	bool cpu;

	(void)state;
	__builtin_cpu_init();
	cpu = __builtin_cpu_supports("avx2");
	assert_int_equal(bpi_jobcheck_avx2(), cpu);
	if (!cpu)
		printf("test_jobcheck: no AVX2 here: the wide form is the "
		       "SSE2 one, tested twice\n");
}
#endif

static void test_good_batches(void **state)
{
	struct bp_job *jobs[MAXN];

	(void)state;
	for (unsigned n = 0; n <= MAXN; n++)
		for (unsigned salt = 0; salt < 3; salt++) {
			fill_good(jobs, n, salt);
			assert_false(check_all(jobs, n));
		}
}

static void test_one_bad(void **state)
{
	struct bp_job *jobs[MAXN];

	(void)state;
	for (unsigned n = 1; n <= MAXN; n++)
		for (unsigned at = 0; at < n; at++) {
			fill_good(jobs, n, at);
			jobs[at] = NULL;
			assert_true(check_all(jobs, n));
			fill_good(jobs, n, at);
			jobs[at] = fake((uintptr_t)jobs[at] | 1);
			assert_true(check_all(jobs, n));
			/* odd, just above NULL (its predecessor is NULL's
			 * successor: only the odd test sees it) */
			jobs[at] = fake(1);
			assert_true(check_all(jobs, n));
		}
}

/* The check reads only jobs[0..n): a bad pointer just past is not seen. */
static void test_bad_past_the_end(void **state)
{
	struct bp_job *jobs[MAXN + 1];

	(void)state;
	for (unsigned n = 0; n < MAXN; n++) {
		fill_good(jobs, n + 1, n);
		jobs[n] = NULL;
		assert_false(check_all(jobs, n));
		assert_true(check_all(jobs, n + 1));
	}
}

static void test_many_bad(void **state)
{
	struct bp_job *jobs[MAXN];

	(void)state;
	for (unsigned n = 2; n <= MAXN; n++) {
		fill_good(jobs, n, 1);
		jobs[0] = NULL;
		jobs[n - 1] = fake(0x2001);
		assert_true(check_all(jobs, n));
		for (unsigned i = 0; i < n; i++)
			jobs[i] = NULL;
		assert_true(check_all(jobs, n));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#if defined(__x86_64__) && defined(__LP64__)
		cmocka_unit_test(test_wide_form),
#endif
		cmocka_unit_test(test_good_batches),
		cmocka_unit_test(test_one_bad),
		cmocka_unit_test(test_bad_past_the_end),
		cmocka_unit_test(test_many_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
