/* SPDX-License-Identifier: MIT */
/*
 * test_mrcache [PROVIDER] - the registration cache.
 *
 * Neither tcp;ofi_rxm nor shm keeps FI_MR_LOCAL (libfabric 1.17: their
 * mr_mode is empty / FI_MR_VIRT_ADDR), so the stage never registers local
 * buffers with them and mr_cache_misses stays 0 whatever the jobs do.
 * That is checked first (if a provider starts to want FI_MR_LOCAL, this
 * says so). Then:
 *
 *   unit   bpi_mrcache_* directly, with stand-in fid_mr objects: find in
 *          an empty cache, exact and inner ranges, one byte past either
 *          end, other slots, 2 MiB granule boundaries, a range over five
 *          granules (found from each, not from the next one), overlapping
 *          registrations (the one that holds the whole range wins, a range
 *          that neither holds is not found), -E2BIG past 128 GiB (the mr
 *          stays the caller's), and destroy closes every mr exactly once
 *   race   threads adding to their own slots while others look up (TSAN:
 *          a published entry is seen whole)
 *   stage  the stage with its registration path forced on (mr_local set
 *          through the internal struct, as a provider with FI_MR_LOCAL
 *          would): jobs inside a range given to bp_rdma_register before
 *          start cost no miss; an unregistered buffer is registered on
 *          first use, once per page range and worker and rail: five
 *          rounds over the same pages miss at most pages x slots times;
 *          the data lands
 */
#include "st_common.h"

ST_DEFINE_GLOBALS;

#define MiB (1ull << 20)
#define G   (2 * MiB)

/* ------------------------------------------------ stand-in fid_mr */

struct fake_mr {
	struct fid_mr mr;
	atomic_int closed;
	int id;
};

static atomic_int fake_closes;

static int fake_close(struct fid *fid)
{
	struct fake_mr *m = (struct fake_mr *)fid;

	if (atomic_fetch_add(&m->closed, 1))
		bp_test_fail("mr %d closed twice", m->id);
	atomic_fetch_add(&fake_closes, 1);
	return 0;
}

static struct fi_ops fake_ops = {
	.size = sizeof(struct fi_ops),
	.close = fake_close,
};

static struct fake_mr *fake_new(int id)
{
	struct fake_mr *m = calloc(1, sizeof(*m));

	m->mr.fid.fclass = FI_CLASS_MR;
	m->mr.fid.ops = &fake_ops;
	m->mr.mem_desc = m; /* the descriptor the cache hands out */
	m->id = id;
	return m;
}

static int found_id(struct bpi_mrcache *c, uint32_t slot, uintptr_t a,
		    size_t len)
{
	const struct bpi_mr_entry *e = bpi_mrcache_find(c, slot, a, len);

	if (!e)
		return -1;
	if (e->desc != e->mr->mem_desc || e->slot != slot || a < e->base ||
	    a + len > e->base + e->len)
		bp_test_fail("entry for [%#lx, +%zu) does not hold it",
			     (unsigned long)a, len);
	return ((struct fake_mr *)e->mr)->id;
}

#define FIND(slot, a, len, want)                                               \
	do {                                                                   \
		int got_ = found_id(c, slot, a, len);                          \
		ST_CHECK(got_ == (want),                                       \
			 "find(slot %u, %#llx, %#llx): mr %d, want %d",        \
			 (unsigned)(slot), (unsigned long long)(a),            \
			 (unsigned long long)(len), got_, (want));             \
	} while (0)

static void add(struct bpi_mrcache *c, uint32_t slot, uintptr_t base,
		size_t len, int id, struct fake_mr **keep)
{
	struct fake_mr *m = fake_new(id);
	const struct bpi_mr_entry *e = NULL;
	int rc = bpi_mrcache_add(c, slot, base, len, &m->mr, &e);

	ST_CHECK(rc == 0 && e && e->base == base && e->len == len &&
			 e->mr == &m->mr && e->desc == m,
		 "add mr %d: %d", id, rc);
	keep[id] = m;
}

static void test_unit(void)
{
	struct bpi_mrcache *c;
	struct fake_mr *keep[16] = {0};
	const uintptr_t B = 0x7f0000000000ull; /* granule aligned */
	int rc;

	atomic_store(&fake_closes, 0);
	ST_CHECK(bpi_mrcache_create(&c) == 0, "create");
	FIND(0, B, 1, -1);

	/* 1: inside one granule */
	add(c, 0, B + 100, 1000, 1, keep);
	FIND(0, B + 100, 1000, 1);
	FIND(0, B + 100, 1, 1);
	FIND(0, B + 1099, 1, 1);
	FIND(0, B + 500, 100, 1);
	FIND(0, B + 99, 1, -1);	    /* one byte before */
	FIND(0, B + 1100, 1, -1);   /* one byte after */
	FIND(0, B + 99, 1001, -1);  /* starts before */
	FIND(0, B + 100, 1001, -1); /* ends after */
	FIND(1, B + 100, 1000, -1); /* another slot */
	FIND(7, B + 500, 1, -1);

	/* 2: across one granule boundary */
	add(c, 0, B + 3 * G - 4096, 8192, 2, keep);
	FIND(0, B + 3 * G - 4096, 8192, 2);
	FIND(0, B + 3 * G - 10, 20, 2);	 /* straddles the boundary */
	FIND(0, B + 3 * G + 10, 100, 2); /* in the second granule only */
	FIND(0, B + 3 * G - 4096, 8193, -1);

	/* 3: five granules, from the middle of the first to the last */
	add(c, 2, B + 10 * G + G / 2, 4 * G, 3, keep);
	for (unsigned g = 0; g < 5; g++) {
		uintptr_t a = B + (10 + g) * G + (g ? 0 : G / 2);

		FIND(2, a, 64, 3);
	}
	FIND(2, B + 10 * G + G / 2, 4 * G, 3);
	FIND(2, B + 10 * G + G / 2 + 1, 4 * G - 2, 3);
	FIND(2, B + 14 * G + G / 2, 1, -1); /* just past the end */
	FIND(2, B + 10 * G + G / 2 - 1, 1, -1);
	FIND(2, B + 15 * G, 1, -1); /* the next granule */
	FIND(0, B + 11 * G, 1, -1); /* slot 0 has nothing there */

	/* 4, 5: overlapping, same slot */
	add(c, 3, B + 20 * G, MiB, 4, keep);
	add(c, 3, B + 20 * G + MiB / 2, MiB, 5, keep);
	FIND(3, B + 20 * G, 100, 4);			     /* only 4 */
	FIND(3, B + 20 * G + MiB + 100, 100, 5);	     /* only 5 */
	rc = found_id(c, 3, B + 20 * G + MiB / 2 + 10, 100); /* both */
	ST_CHECK(rc == 4 || rc == 5, "overlap: mr %d", rc);
	FIND(3, B + 20 * G + MiB / 4, MiB, -1); /* neither holds it */
	/* 6: a bigger one around both; found for the range neither held */
	add(c, 3, B + 20 * G - 4096, 2 * MiB, 6, keep);
	FIND(3, B + 20 * G + MiB / 4, MiB, 6);

	/* 7: the same range in another slot is its own entry */
	add(c, 4, B + 100, 1000, 7, keep);
	FIND(4, B + 100, 1000, 7);
	FIND(0, B + 100, 1000, 1);

	/* too big: refused, the mr stays ours */
	{
		struct fake_mr *m = fake_new(99);

		rc = bpi_mrcache_add(c, 0, B, (size_t)129 << 30, &m->mr, NULL);
		ST_CHECK(rc == -E2BIG, "add 129 GiB: %d", rc);
		ST_CHECK(atomic_load(&m->closed) == 0,
			 "refused mr was closed by the cache");
		free(m);
	}
	bpi_mrcache_destroy(c);
	ST_CHECK(atomic_load(&fake_closes) == 7, "destroy closed %d of 7 mrs",
		 atomic_load(&fake_closes));
	for (int i = 1; i <= 7; i++) {
		ST_CHECK(keep[i] && atomic_load(&keep[i]->closed) == 1,
			 "mr %d closed %d times", i,
			 keep[i] ? atomic_load(&keep[i]->closed) : -1);
		free(keep[i]);
	}
	bpi_mrcache_destroy(NULL);
}

/* ---------------------------------------------- adders and readers */

#define RT  4	/* threads, one slot each */
#define PER 200 /* registrations per thread */

struct race {
	struct bpi_mrcache *c;
	unsigned id;
	struct fake_mr *mrs[PER];
	atomic_uint *published; /* per thread: entries added so far */
};

static void *race_main(void *arg)
{
	struct race *r = arg;
	const uintptr_t B = 0x600000000000ull;

	for (unsigned i = 0; i < PER; i++) {
		/* entry i of thread t: granules t*PER+i .. (two granules) */
		uintptr_t base =
			B + ((uintptr_t)(r->id * PER + i) * 2) * G + G - 8192;

		r->mrs[i] = fake_new((int)(r->id * PER + i));
		if (bpi_mrcache_add(r->c, r->id, base, 16384, &r->mrs[i]->mr,
				    NULL))
			bp_test_fail("race add");
		/* read our own write back at once */
		if (found_id(r->c, r->id, base + G / 4 * 0 + 8192, 64) !=
		    r->mrs[i]->id)
			bp_test_fail("thread %u: own entry %u not found", r->id,
				     i);
		/* release: the readers below see the entry whole */
		atomic_store_explicit(&r->published[r->id], i + 1,
				      memory_order_release);
		/* look at another thread's published entries */
		unsigned o = (r->id + 1) % RT;
		unsigned np = atomic_load_explicit(&r->published[o],
						   memory_order_acquire);

		for (unsigned k = np > 8 ? np - 8 : 0; k < np; k++) {
			uintptr_t ob = B + ((uintptr_t)(o * PER + k) * 2) * G +
				       G - 8192;

			if (found_id(r->c, o, ob, 16384) != (int)(o * PER + k))
				bp_test_fail("thread %u: entry %u of slot %u "
					     "published but not found",
					     r->id, k, o);
		}
	}
	return NULL;
}

static void test_race(void)
{
	struct bpi_mrcache *c;
	struct race r[RT];
	pthread_t t[RT];
	atomic_uint published[RT];

	atomic_store(&fake_closes, 0);
	ST_CHECK(bpi_mrcache_create(&c) == 0, "create");
	for (unsigned i = 0; i < RT; i++) {
		atomic_init(&published[i], 0);
		r[i].c = c;
		r[i].id = i;
		r[i].published = published;
	}
	for (unsigned i = 0; i < RT; i++)
		pthread_create(&t[i], NULL, race_main, &r[i]);
	for (unsigned i = 0; i < RT; i++)
		pthread_join(t[i], NULL);
	bpi_mrcache_destroy(c);
	ST_CHECK(atomic_load(&fake_closes) == RT * PER, "closed %d of %d",
		 atomic_load(&fake_closes), RT * PER);
	for (unsigned i = 0; i < RT; i++)
		for (unsigned k = 0; k < PER; k++)
			free(r[i].mrs[k]);
}

/* ------------------------------------------ the stage, forced on */

static void test_stage(const char *prov)
{
	struct st_fix f;
	struct bp_rdma_config c;
	struct bp_rdma_rail_stats rs;
	struct st_job *jobs;
	uint8_t *reg, *other;
	const unsigned per = 200, rounds = 5, n = per * (1 + rounds);
	const size_t len = 2048;
	const unsigned pages = per * len / 4096;
	int64_t end;
	bool ok = false;

	if (st_node_open(&f, prov, 2, 2 * MiB))
		exit(1);
	st_rdma_config(&f, &c);
	if (st_stage_open(&f, &c, NULL))
		exit(1);
	ST_CHECK(!f.r->mr_local,
		 "%s keeps FI_MR_LOCAL now: the stage registers for real; "
		 "update this test's header",
		 prov);
	/* without FI_MR_LOCAL, register is accepted and does nothing */
	reg = st_alloc(MiB);
	other = st_alloc(MiB);
	ST_CHECK(bp_rdma_register(f.r, reg, MiB, NULL) == 0, "register");
	/* now as a provider with FI_MR_LOCAL would have it */
	f.r->mr_local = true;
	ST_CHECK(bp_rdma_register(f.r, reg, MiB, NULL) == 0,
		 "register (mr_local)");
	if (st_start(&f))
		exit(1);
	st_fill(reg, 0, MiB, 21);
	st_fill(other, MiB, MiB, 21);
	jobs = calloc(n, sizeof(*jobs));
	st_jobs_init(jobs, n);
	/* round 0: inside the registered range */
	for (unsigned i = 0; i < per; i++)
		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)f.peer,
				reg + i * len, len, i * len);
	ST_CHECK(st_submit(&f, jobs, per) == per, "submit");
	ST_CHECK(st_wait_delivered(&f, per, 30), "registered jobs lost");
	st_rail_sum(f.r, f.workers, f.rails, &rs, NULL);
	ST_CHECK(rs.mr_cache_misses == 0,
		 "%" PRIu64 " misses for jobs inside a registered range",
		 rs.mr_cache_misses);
	/*
	 * rounds 1..5: the same 100 pages of an unregistered buffer, again
	 * and again. Each worker and rail registers a page the first time
	 * one of its jobs meets it, and finds it after: at most pages x
	 * slots misses, however many rounds (a cache that did not work would
	 * miss on every job: 5 x 200 > 100 x 4).
	 */
	for (unsigned i = per; i < n; i++) {
		size_t o = (i % per) * len;

		bp_rdma_job_set(&jobs[i].rj, BP_RDMA_WRITE, (uint32_t)f.peer,
				other + o, len, MiB + o);
	}
	ST_CHECK(st_submit(&f, jobs + per, n - per) == n - per, "submit");
	ST_CHECK(st_wait_delivered(&f, n, 30), "unregistered jobs lost");
	ST_CHECK(bp_pipeline_drain(f.p) == 0, "drain");
	st_check_conservation(&f, jobs, n, n);
	ST_CHECK(f.ok == n, "%lu of %u ok", f.ok, n);
	for (unsigned i = 0, bad = 0; i < n; i++)
		if (jobs[i].status && bad++ < 3)
			bp_test_fail("job %u: %s", i,
				     bp_strerror(jobs[i].status));
	st_rail_sum(f.r, f.workers, f.rails, &rs, NULL);
	ST_CHECK(rs.mr_cache_misses >= 1 &&
			 rs.mr_cache_misses <= pages * f.workers * f.rails,
		 "%" PRIu64 " misses for %u jobs over %u pages (at most %u: "
		 "one per page and slot)",
		 rs.mr_cache_misses, rounds * per, pages,
		 pages * f.workers * f.rails);
	printf("  %s, forced FI_MR_LOCAL: %" PRIu64
	       " misses for %u jobs over %u pages\n",
	       prov, rs.mr_cache_misses, rounds * per, pages);
	end = bpt_now_ns() + 10ll * 1000000000;
	while (!ok && bpt_now_ns() < end) {
		ok = st_mismatch(f.tgt, 0, per * len, 21) < 0 &&
		     st_mismatch(f.tgt + MiB, MiB, per * len, 21) < 0;
		if (!ok)
			bpt_sleep_ms(2);
	}
	ST_CHECK(ok, "data did not land");
	st_close(&f);
	free(jobs);
	free(reg);
	free(other);
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : NULL;
	char name[96];

	st_env();
	snprintf(name, sizeof(name), "mrcache%s%s", prov ? " " : "",
		 prov ? prov : "");
	st_watchdog(60, "%s", name);
	test_unit();
	test_race();
	if (prov) {
		if (!st_provider_ok(prov))
			return ST_SKIP;
		test_stage(prov);
	}
	st_watchdog_off();
	return st_result(name);
}
