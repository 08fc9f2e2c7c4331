/* SPDX-License-Identifier: MIT */
/*
 * jobs.c - the jobs of `bpbench app` and their check: payloads made from
 * the job's numbers, the expected CRC of every job (computed once, with
 * the reference CRC), the sink's verdict on a bad job, the slot credits
 * it gives back, and the faults that show the check can fail.
 */
#include "app/app.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64's finaliser: every output bit depends on every input bit */
static inline uint64_t app_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void app_fill(struct app_job *j, uint32_t p, uint64_t k)
{
	/* a counter per (producer, job, word), never the same twice */
	uint64_t base = (((uint64_t)p << 48) ^ k) * (APP_PAYLOAD / 8);

	for (unsigned i = 0; i < APP_PAYLOAD / 8; i++) {
		uint64_t w = app_mix64((base + i + 1) *
				       UINT64_C(0x9e3779b97f4a7c15));

		memcpy(j->payload + 8 * i, &w, sizeof(w));
	}
	j->producer = p;
	j->k = k;
	j->crc = 0;
}

void app_expected_build(struct app_opts *o)
{
	size_t n = (size_t)o->producers * o->jobs;
	uint32_t *e = bench_zalloc(sizeof(*e) * n);
	struct app_job *j = bench_zalloc(sizeof(*j));

	for (uint32_t p = 0; p < o->producers; p++)
		for (uint64_t k = 0; k < o->jobs; k++) {
			app_fill(j, p, k);
			e[(size_t)p * o->jobs + k] =
				app_crc32c_ref(j->payload, APP_PAYLOAD);
		}
	free(j);
	o->expected = e;
}

/* ---- faults, for the test of the check ---------------------------------- */

/*
 * The check must be able to fail; tests/lab/test_app.sh shows it does, by
 * setting BPBENCH_APP_FAULT (it exists for that test only), once per run,
 * halfway:
 *  drop        the sink skips one job (lost)
 *  dup         the sink gets one job twice (duplicated)
 *  reorder     the sink gets one job after the next one (reordered)
 *  miscompute  a worker returns a wrong CRC for producer 0's middle job
 * Unset or empty: no fault; the sink and the workers pay one compare per
 * job against a value that never matches.
 */
enum app_fault {
	APP_FAULT_NONE,
	APP_FAULT_DROP,
	APP_FAULT_DUP,
	APP_FAULT_REORDER,
	APP_FAULT_MISCOMPUTE
};

static enum app_fault app_fault = APP_FAULT_NONE;
uint64_t app_fault_miscompute_k = UINT64_MAX;

void app_fault_read(void)
{
	static const char *const names[] = {"", "drop", "dup", "reorder",
					    "miscompute"};
	const char *f = getenv("BPBENCH_APP_FAULT");

	if (!f || !*f)
		return;
	for (int i = 1; i < 5; i++)
		if (!strcmp(f, names[i]))
			app_fault = (enum app_fault)i;
	if (app_fault == APP_FAULT_NONE) {
		fprintf(stderr,
			"bpbench app: BPBENCH_APP_FAULT=%s: not drop, dup, "
			"reorder or miscompute\n",
			f);
		exit(BENCH_EXIT_USAGE);
	}
}

/* Where this run's fault strikes: the sink's halfway job, or none. */
static void app_fault_arm(struct app_check *c)
{
	uint64_t half = (uint64_t)c->o->producers * c->o->jobs / 2;

	c->fault_at = UINT64_MAX;
	if (app_fault == APP_FAULT_MISCOMPUTE)
		app_fault_miscompute_k = c->o->jobs / 2;
	else if (app_fault != APP_FAULT_NONE)
		c->fault_at = half;
}

void app_check_fault(struct app_check *c, struct app_job *j, uint64_t gseq)
{
	struct app_job *held = c->held;

	c->fault_at = UINT64_MAX; /* once */
	switch (app_fault) {
	case APP_FAULT_DROP:
		return;
	case APP_FAULT_DUP:
		app_check_job(c, j, gseq);
		app_check_job(c, j, gseq);
		return;
	case APP_FAULT_REORDER:
		if (!held) {
			/* hold it until its successor arrives (here again) */
			c->held = j;
			c->held_gseq = gseq;
			c->fault_at = c->next_gseq;
			return;
		}
		c->held = NULL;
		app_check_job(c, j, gseq);
		app_check_job(c, held, c->held_gseq);
		return;
	default:
		return;
	}
}

/* ---- the check ---------------------------------------------------------- */

void app_check_init(struct app_check *c, const struct app_opts *o,
		    struct app_pool *pools, const char *variant, unsigned B)
{
	memset(c, 0, sizeof(*c));
	c->o = o;
	c->pools = pools;
	c->variant = variant;
	c->B = B;
	c->next_k = bench_zalloc(sizeof(uint64_t) * o->producers);
	c->published = bench_zalloc(sizeof(uint64_t) * o->producers);
	app_fault_arm(c);
}

void app_check_failed(const struct app_check *c, const struct app_job *j,
		      uint64_t gseq)
{
	const struct app_opts *o = c->o;
	uint32_t p = j->producer;
	const char *what;

	if (gseq < c->next_gseq)
		what = "duplicated (delivered again)";
	else if (gseq > c->next_gseq)
		what = "lost or reordered (a job before it is missing)";
	else if (p >= o->producers || j->k >= o->jobs)
		what = "not a job of this run";
	else if (j->k != c->next_k[p])
		what = "out of its producer's order";
	else
		what = "miscomputed (wrong CRC32C)";
	bench_die("bpbench app: VERIFY FAILED: %s B=%u: delivered as job "
		  "#%" PRIu64 " where #%" PRIu64 " was due: producer %" PRIu32
		  "'s job %" PRIu64 " (crc %08" PRIx32 "): %s\n",
		  c->variant, c->B, gseq, c->next_gseq, p, j->k, j->crc, what);
}

void app_check_release(struct app_check *c)
{
	for (unsigned p = 0; p < c->o->producers; p++)
		if (c->next_k[p] != c->published[p]) {
			c->published[p] = c->next_k[p];
			/* release: the sink's reads of these jobs come before
			 * the producer's rewrite of their slots (pairs with
			 * the acquire in app_job_take) */
			atomic_store_explicit(&c->pools[p].released,
					      c->next_k[p],
					      memory_order_release);
		}
}

void app_check_fini(struct app_check *c)
{
	free(c->next_k);
	free(c->published);
}
