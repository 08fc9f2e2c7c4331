/* SPDX-License-Identifier: MIT */
/*
 * test_sink_window - the ordered sink's reorder window (src/sink.c), white
 * box: a model of the workers hands deliver_ordered the batches the sink
 * thread would dequeue from their egress rings, and the test checks what
 * comes out.
 *
 * It includes src/sink.c to reach the window's static functions
 * (window_free, file_job, file_run, take_runs, deliver_ordered). Through
 * the public API the sink's own refusal of a repeat (a job completed
 * twice) is unreachable: bp_worker_complete refuses repeats first, by the
 * job's pipeline_word, so none ever reaches the sink. Here nothing stands
 * in front of the window: a fake pipeline holds only what the ordered sink
 * reads, and no thread runs.
 *
 * Each seed (1..SW_NSEEDS, a fixed list; BP_SEED=N reruns seed N alone)
 * draws a window of 1..1024 slots, 1..4 workers and next_seq from 0 or
 * just below 2^63 (seqs wrap at SEQ_MASK). Workers take consecutive seqs
 * from ingress, never more than the window holds in flight, and hand
 * batches of them in order, shuffled, or with their first job held back
 * (the jobs behind it pile up, and come out in SINK_BATCH pieces that
 * split runs in take_runs); batches cross the window's end. Three seeds
 * in four mix repeats into the batches: of a job in the same batch, of
 * one delivered, runs of them straddling next_seq or the window's end,
 * and a fresh job followed by repeats of the seqs after it. Checked:
 *
 *   - the sink callback sees strictly consecutive seqs, each job exactly
 *     once, in batches of 1..SINK_BATCH;
 *   - every repeat is refused: st_repeats equals the repeats handed;
 *   - each worker is credited (delivered plus sink_credit) exactly what
 *     it handed, repeats included (refuse_repeat credits them);
 *   - at the end the window, its BPI_SINK_AHEAD spare entries included,
 *     is all NULL.
 *
 * The model keeps each worker's `unsorted` flag as the sink may rely on
 * it: clear while every job the worker handed came after the one before
 * (worker.c's order check is stricter), set for good from the first that
 * did not (a shuffle, a held job, a repeat). So the sink finds the runs
 * from their ends (sorted_run_end) for the seeds whose workers hand in
 * order without repeats, and for each worker until its first job out of
 * order in the others.
 *
 * Three fixed cases: a run that crosses the window's end is filed in two
 * pieces and delivered in order; a fresh job in the window's last slot
 * followed by repeats of the jobs in its first slots is filed job by job;
 * SINK_BATCH consecutive jobs held behind one missing seq come out as one
 * full callback once it arrives, then the rest.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pt_common.h"
#include "src/sink.c" /* the static window functions: see above */

PT_DEFINE_GLOBALS;

/* 200 take about 0.3 s in a plain build, 60 under TSAN about 0.7 s */
#define SW_NSEEDS      ((PT_TSAN || PT_ASAN) ? 60 : 200)
#define SW_MAX_WORKERS 4
/* of a batch's SINK_BATCH entries, how many the repeats may take */
#define SW_REPEAT_ROOM 56
/* sink callbacks whose sizes are kept for the fixed cases */
#define SW_SIZES 8
/* a hang fails by then (meson's timeout is 60 s) */
#define SW_WATCHDOG_S 20

/* the seed under way: one that crashed is named at the end */
static uint64_t sw_seed_running;

/* ------------------------------------------------------- random numbers */

/* splitmix64: every seed, 0 included, gives a full-period stream */
static uint64_t sw_rand(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static unsigned sw_below(uint64_t *s, uint64_t n)
{
	return (unsigned)(sw_rand(s) % n);
}

/* ------------------------------------------------------------ the sink */

/*
 * The sink callback's check: job i of jobs[] has seq first_seq + i, and
 * the callback must see jobs[next] next, in batches of 1..SINK_BATCH.
 */
struct sw_sink {
	struct bp_job *jobs;
	uint64_t njobs;
	uint64_t next;
	uint64_t calls;
	unsigned sizes[SW_SIZES]; /* n of the first calls */
};

static void sw_sink_cb(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct sw_sink *s = ctx;

	if (s->calls < SW_SIZES)
		s->sizes[s->calls] = n;
	s->calls++;
	if (n == 0 || n > SINK_BATCH)
		pt_fail("a sink callback with %u jobs", n);
	for (unsigned i = 0; i < n; i++, s->next++) {
		if (s->next >= s->njobs) {
			pt_fail("seq %" PRIu64 " delivered past the last job",
				jobs[i]->seq);
			return;
		}
		if (jobs[i] != &s->jobs[s->next]) {
			pt_fail("seq %" PRIu64 " delivered, want %" PRIu64,
				jobs[i]->seq, s->jobs[s->next].seq);
			return;
		}
	}
}

/* n jobs with consecutive seqs from first_seq, wrapping at SEQ_MASK */
static void sw_sink_init(struct sw_sink *s, uint64_t first_seq, uint64_t n)
{
	memset(s, 0, sizeof(*s));
	s->jobs = calloc(n, sizeof(*s->jobs));
	assert_non_null(s->jobs);
	s->njobs = n;
	for (uint64_t i = 0; i < n; i++)
		s->jobs[i].seq = (first_seq + i) & SEQ_MASK;
}

/* ------------------------------------------------------- fake pipeline */

/*
 * A pipeline as the ordered sink sees it: one stage whose workers are
 * credited by delivery, `size` window slots (a power of two) with the
 * spare entries chain.c's create_window gives it, next_seq at first_seq,
 * and the sink callback checking against s. No rings, no threads.
 */
static struct bp_pipeline *sw_fake_create(uint64_t size, unsigned nworkers,
					  uint64_t first_seq, struct sw_sink *s)
{
	struct bp_pipeline *p = bpi_alloc_aligned(sizeof(*p), BP_FALSE_SHARING);

	assert_non_null(p);
	p->cfg.ordered = true;
	p->cfg.sink = sw_sink_cb;
	p->cfg.sink_ctx = s;
	p->stages = calloc(1, sizeof(*p->stages));
	p->nstages = 1;
	p->workers = bpi_alloc_aligned(nworkers * sizeof(*p->workers),
				       BP_FALSE_SHARING);
	p->nworkers = nworkers;
	p->sink_credit = calloc(nworkers, sizeof(*p->sink_credit));
	p->window = calloc(size + BPI_SINK_AHEAD, sizeof(*p->window));
	p->window_run = calloc(size, sizeof(*p->window_run));
	assert_true(p->stages && p->workers && p->sink_credit && p->window &&
		    p->window_run);
	p->stages[0].nworkers = nworkers;
	p->stages[0].by_delivery = true;
	/* deliver_ordered wakes each worker it credits */
	for (unsigned w = 0; w < nworkers; w++)
		bpi_waitq_init(&p->workers[w].progress);
	p->window_mask = size - 1;
	p->next_seq = first_seq;
	return p;
}

static void sw_fake_destroy(struct bp_pipeline *p)
{
	/* closes nothing here (no eventfd was asked for): init's pair */
	for (unsigned w = 0; w < p->nworkers; w++)
		bpi_waitq_destroy(&p->workers[w].progress);
	free(p->window);
	free(p->window_run);
	free(p->sink_credit);
	free(p->stages);
	bpi_free_aligned(p->workers, p->nworkers * sizeof(*p->workers),
			 BP_FALSE_SHARING);
	bpi_free_aligned(p, sizeof(*p), BP_FALSE_SHARING);
}

/* What worker w has been credited: published, and not yet published. */
static uint64_t sw_credited(const struct bp_pipeline *p, unsigned w)
{
	return atomic_load_explicit(&p->workers[w].delivered,
				    memory_order_relaxed) +
	       p->sink_credit[w];
}

/* The jobs deliver() counted in the latency buckets. */
static uint64_t sw_lat_total(const struct bp_pipeline *p)
{
	uint64_t n = 0;

	for (unsigned b = 0; b < BP_LAT_BUCKETS; b++)
		n += bpi_stat_get(&p->st_lat[b]);
	return n;
}

/* Whether the window and its spare entries are all NULL. */
static bool sw_window_empty(const struct bp_pipeline *p)
{
	for (uint64_t i = 0; i <= p->window_mask + BPI_SINK_AHEAD; i++)
		if (p->window[i])
			return false;
	return true;
}

/* Hand s's jobs [from, from + n) to the sink as one batch of `worker`. */
static void sw_hand_range(struct bp_pipeline *p, struct sw_sink *s,
			  unsigned from, unsigned n, unsigned worker)
{
	/* zeroed: deliver_ordered reads SINK_AHEAD entries past n */
	struct bp_job *batch[SINK_BATCH + SINK_AHEAD] = {0};

	assert_true(n <= SINK_BATCH && from + n <= s->njobs);
	for (unsigned i = 0; i < n; i++)
		batch[i] = &s->jobs[from + i];
	deliver_ordered(p, batch, n, worker, p->sink_credit);
}

/* ------------------------------------------------- the model of workers */

enum sw_order {
	SW_IN_ORDER,   /* a worker hands its jobs as it took them */
	SW_SHUFFLED,   /* a few swapped before each hand */
	SW_FIRST_HELD, /* its oldest job sent to the back, half the time */
	SW_NORDERS
};

static const char *const sw_order_name[SW_NORDERS] = {"in order", "shuffled",
						      "first held"};

struct sw_config {
	uint64_t seed;
	uint64_t size; /* window slots */
	unsigned nworkers;
	uint64_t first_seq;
	uint64_t njobs;
	enum sw_order order;
	bool repeats;
};

static struct sw_config sw_config_of(uint64_t seed, uint64_t *rng)
{
	struct sw_config c = {.seed = seed};

	c.size = UINT64_C(1) << sw_below(rng, 11); /* 1..1024 */
	c.nworkers = 1 + sw_below(rng, SW_MAX_WORKERS);
	/* half of them cross the wrap of the seq space */
	c.first_seq = sw_rand(rng) & 1 ? 0 : SEQ_MASK - sw_below(rng, 3000);
	c.njobs = 3000 + sw_below(rng, 5000);
	/* every pair of order and repeats once per 12 seeds */
	c.order = (enum sw_order)(seed % SW_NORDERS);
	c.repeats = seed % 4 != 0;
	return c;
}

/*
 * The workers: each takes runs of consecutive jobs from ingress (indexes
 * into sink.jobs, in ingress order) and hands some of what it holds as a
 * batch, with repeats of jobs handed before where the config says.
 */
struct sw_model {
	struct sw_config c;
	struct bp_pipeline *p;
	struct sw_sink sink;
	uint64_t rng;
	uint64_t taken;	   /* jobs taken from ingress */
	uint64_t injected; /* repeats handed */
	bool *was_handed;  /* per job: a repeat of it is one */
	/* per worker: taken, not yet handed, in the order it will hand */
	uint64_t *pending[SW_MAX_WORKERS];
	unsigned npending[SW_MAX_WORKERS];
	uint64_t handed[SW_MAX_WORKERS]; /* repeats included */
	/* the least seq worker w's next job may have to stay in order */
	uint64_t seq_next[SW_MAX_WORKERS];
	/* the batch being built; spare entries as in sw_hand_range */
	struct bp_job *batch[SINK_BATCH + SINK_AHEAD];
	unsigned nbatch, nrepeats;
};

static void sw_model_init(struct sw_model *m, const struct sw_config *c,
			  uint64_t rng)
{
	memset(m, 0, sizeof(*m));
	m->c = *c;
	m->rng = rng;
	sw_sink_init(&m->sink, c->first_seq, c->njobs);
	m->p = sw_fake_create(c->size, c->nworkers, c->first_seq, &m->sink);
	m->was_handed = calloc(c->njobs, sizeof(*m->was_handed));
	assert_non_null(m->was_handed);
	/* a worker holds at most what is in flight: the window's size */
	for (unsigned w = 0; w < c->nworkers; w++) {
		m->seq_next[w] = c->first_seq;
		m->pending[w] = malloc(c->size * sizeof(*m->pending[w]));
		assert_non_null(m->pending[w]);
	}
}

static void sw_model_free(struct sw_model *m)
{
	for (unsigned w = 0; w < m->c.nworkers; w++)
		free(m->pending[w]);
	free(m->was_handed);
	sw_fake_destroy(m->p);
	free(m->sink.jobs);
}

/*
 * Worker w takes up to 300 consecutive jobs, no more than keeps every job
 * in flight (taken, not delivered) in the window: what a one-stage
 * pipeline's max_inflight guarantees (sink.c's header).
 */
static void sw_take(struct sw_model *m, unsigned w)
{
	uint64_t room = m->c.size - (m->taken - m->sink.next);
	uint64_t n = 1 + sw_below(&m->rng, 300);

	if (n > room)
		n = room;
	if (n > m->c.njobs - m->taken)
		n = m->c.njobs - m->taken;
	while (n--)
		m->pending[w][m->npending[w]++] = m->taken++;
}

/* Put w's pending jobs in the order its next hand takes them. */
static void sw_reorder(struct sw_model *m, unsigned w)
{
	uint64_t *q = m->pending[w], t;
	unsigned n = m->npending[w];

	if (n < 2)
		return;
	if (m->c.order == SW_SHUFFLED) {
		for (unsigned s = 0; s < 3; s++) {
			unsigned a = sw_below(&m->rng, n);
			unsigned b = sw_below(&m->rng, n);

			t = q[a];
			q[a] = q[b];
			q[b] = t;
		}
	} else if (m->c.order == SW_FIRST_HELD && sw_rand(&m->rng) & 1) {
		t = q[0];
		memmove(q, q + 1, (n - 1) * sizeof(*q));
		q[n - 1] = t;
	}
}

/* ------------------------------------------------------ the repeats */

/* Add job j to the batch as a repeat, while the repeats have room. */
static bool sw_repeat(struct sw_model *m, uint64_t j)
{
	if (m->nrepeats == SW_REPEAT_ROOM)
		return false;
	m->batch[m->nbatch++] = &m->sink.jobs[j];
	m->nrepeats++;
	m->injected++;
	return true;
}

/*
 * After fresh job j, repeats of the handed jobs right after it: one run
 * of consecutive seqs, a fresh head and a tail of repeats, that file_run
 * must file job by job.
 */
static void sw_repeat_tail(struct sw_model *m, uint64_t j)
{
	uint64_t end = j + 1 + 1 + sw_below(&m->rng, 6);

	for (uint64_t q = j + 1; q < end && q < m->c.njobs; q++)
		if (!m->was_handed[q] || !sw_repeat(m, q))
			return;
}

/* A repeat of fresh job j itself (in the window by the time it is filed),
 * or of a job already delivered (behind next_seq). */
static void sw_repeat_one(struct sw_model *m, uint64_t j)
{
	uint64_t o = j;

	if (sw_rand(&m->rng) & 1)
		o = j - sw_below(&m->rng, j + 1);
	if (o == j || o < m->sink.next)
		(void)sw_repeat(m, o);
}

/*
 * A run of 1..8 repeats: from just behind next_seq (straddling it),
 * anywhere in the window, or across the window's end (from its last
 * slot on, or from behind next_seq too). Only runs of jobs all handed.
 */
static void sw_repeat_run(struct sw_model *m)
{
	const uint64_t size = m->c.size, next = m->sink.next;
	uint64_t len = 1 + sw_below(&m->rng, 8), from;

	from = next > 3 ? next - 3 : 0;
	if (sw_rand(&m->rng) & 1)
		from = next + sw_below(&m->rng, size + 1);
	if (size > 1 && sw_rand(&m->rng) & 1) {
		/* job next + to_end is in the window's last slot */
		uint64_t to_end =
			size - 1 - ((m->c.first_seq + next) & (size - 1));
		uint64_t back = sw_below(&m->rng, len);

		/* from there or a little before; from before next_seq only
		 * one time in four */
		from = back > next + to_end ? 0 : next + to_end - back;
		if (from < next && sw_below(&m->rng, 4))
			from = next + to_end;
	}
	for (uint64_t q = from; q < from + len; q++)
		if (q >= m->c.njobs || !m->was_handed[q])
			return;
	for (uint64_t q = from; q < from + len; q++)
		if (!sw_repeat(m, q))
			return;
}

/*
 * What worker w's order check would say of the batch: set its unsorted
 * flag (for good) unless each job comes after the one before.
 */
static void sw_note_order(struct sw_model *m, unsigned w)
{
	for (unsigned k = 0; k < m->nbatch; k++) {
		uint64_t s = m->batch[k]->seq;

		/* relaxed: one thread plays worker and sink here */
		if ((s - m->seq_next[w]) & SEQ_BACK)
			atomic_store_explicit(&m->p->workers[w].unsorted, 1,
					      memory_order_relaxed);
		m->seq_next[w] = (s + 1) & SEQ_MASK;
	}
}

/*
 * Worker w hands 1..SINK_BATCH of its pending jobs as one batch, as the
 * sink thread would dequeue it, repeats mixed in (SW_REPEAT_ROOM of the
 * entries kept for them).
 */
static void sw_hand(struct sw_model *m, unsigned w)
{
	unsigned max = m->c.repeats ? SINK_BATCH - SW_REPEAT_ROOM : SINK_BATCH;
	unsigned n;

	if (m->npending[w] == 0)
		return;
	sw_reorder(m, w);
	n = 1 + sw_below(&m->rng, m->npending[w] < max ? m->npending[w] : max);
	m->nbatch = m->nrepeats = 0;
	for (unsigned k = 0; k < n; k++) {
		uint64_t j = m->pending[w][k];

		m->batch[m->nbatch++] = &m->sink.jobs[j];
		m->was_handed[j] = true;
		if (!m->c.repeats)
			continue;
		if (sw_below(&m->rng, 8) == 0)
			sw_repeat_tail(m, j);
		if (sw_below(&m->rng, 50) == 0)
			sw_repeat_one(m, j);
		if (sw_below(&m->rng, 50) == 0)
			sw_repeat_run(m);
	}
	m->npending[w] -= n;
	memmove(m->pending[w], m->pending[w] + n,
		m->npending[w] * sizeof(*m->pending[w]));
	m->handed[w] += m->nbatch;
	sw_note_order(m, w);
	deliver_ordered(m->p, m->batch, m->nbatch, w, m->p->sink_credit);
}

/* Every job taken and handed, some not delivered: lost in the window */
static bool sw_stuck(const struct sw_model *m)
{
	if (m->taken < m->c.njobs)
		return false;
	for (unsigned w = 0; w < m->c.nworkers; w++)
		if (m->npending[w])
			return false;
	return true;
}

/* The checks once the run is over (the callback checked the order). */
static void sw_check_end(const struct sw_model *m)
{
	const struct bp_pipeline *p = m->p;
	uint64_t refused = bpi_stat_get(&p->st_repeats);

	if (m->sink.next != m->c.njobs)
		pt_fail("%" PRIu64 " of %" PRIu64 " jobs delivered",
			m->sink.next, m->c.njobs);
	if (refused != m->injected)
		pt_fail("%" PRIu64 " repeats refused, %" PRIu64 " handed",
			refused, m->injected);
	for (unsigned w = 0; w < m->c.nworkers; w++)
		if (sw_credited(p, w) != m->handed[w])
			pt_fail("worker %u credited %" PRIu64
				", handed %" PRIu64,
				w, sw_credited(p, w), m->handed[w]);
	if (!sw_window_empty(p))
		pt_fail("the window is not empty at the end");
	if (sw_lat_total(p) != m->sink.next)
		pt_fail("latency counted for %" PRIu64 " jobs, %" PRIu64
			" delivered",
			sw_lat_total(p), m->sink.next);
}

/*
 * One seed: its config, workers taking and handing until all is
 * delivered. Returns whether every check held.
 */
static bool sw_run_seed(uint64_t seed)
{
	uint64_t rng = seed, steps = 0;
	struct sw_config c = sw_config_of(seed, &rng);
	unsigned before = pt_failures();
	struct sw_model m;

	/* a window that loses a job can make take_runs spin */
	pt_watchdog_arm(SW_WATCHDOG_S, "seed %" PRIu64, seed);
	sw_seed_running = seed;
	sw_model_init(&m, &c, rng);
	while (m.sink.next < c.njobs && pt_failures() == before) {
		unsigned w = sw_below(&m.rng, c.nworkers);

		if (sw_stuck(&m) || ++steps > 100 * c.njobs) {
			pt_fail("stuck at %" PRIu64 " of %" PRIu64 " jobs",
				m.sink.next, c.njobs);
			break;
		}
		if (sw_rand(&m.rng) & 1)
			sw_take(&m, w);
		else
			sw_hand(&m, w);
	}
	sw_check_end(&m);
	if (pt_failures() != before)
		fprintf(stderr,
			"seed %" PRIu64 " (BP_SEED=%" PRIu64 " reruns it): "
			"window %" PRIu64 ", %u workers, next_seq %#" PRIx64
			", %" PRIu64 " jobs, %s, %s\n",
			seed, seed, c.size, c.nworkers, c.first_seq, c.njobs,
			sw_order_name[c.order],
			c.repeats ? "repeats" : "no repeats");
	sw_model_free(&m);
	sw_seed_running = 0;
	return pt_failures() == before;
}

/* ------------------------------------------------------------- the tests */

static void test_random_models(void **state)
{
	unsigned long only = pt_env_ulong("BP_SEED", 0);

	(void)state;
	if (only) {
		sw_run_seed(only);
	} else {
		/* the first seed that fails is enough to go on */
		for (uint64_t seed = 1; seed <= SW_NSEEDS; seed++)
			if (!sw_run_seed(seed))
				break;
	}
	assert_int_equal(pt_failures(), 0);
}

/*
 * Window of 8, next_seq in slot 3: worker 1's jobs 1..6 after it (slots
 * 4..7 and 0..1) are filed as two runs of worker 1, split at the window's
 * end (or, from just below 2^63, at the seq space's wrap, which is the
 * same place). Job 0 from worker 0 then lets both out in order: up to the
 * window's end, then the rest.
 */
static void test_run_across_window_end(void **state)
{
	const uint64_t firsts[] = {3, SEQ_MASK - 4};

	(void)state;
	for (unsigned f = 0; f < 2; f++) {
		struct sw_sink s;
		struct bp_pipeline *p;

		sw_sink_init(&s, firsts[f], 7);
		p = sw_fake_create(8, 2, firsts[f], &s);
		assert_int_equal(firsts[f] & p->window_mask, 3);
		sw_hand_range(p, &s, 1, 6, 1);
		assert_int_equal(s.calls, 0);
		assert_int_equal(p->window_run[4].len, 4);
		assert_int_equal(p->window_run[4].worker, 1);
		assert_int_equal(p->window_run[0].len, 2);
		assert_int_equal(p->window_run[0].worker, 1);
		for (unsigned i = 1; i <= 6; i++)
			assert_ptr_equal(p->window[(3 + i) & 7], &s.jobs[i]);
		assert_null(p->window[3]);

		sw_hand_range(p, &s, 0, 1, 0);
		assert_int_equal(s.next, 7);
		assert_int_equal(s.calls, 2);
		assert_int_equal(s.sizes[0], 5);
		assert_int_equal(s.sizes[1], 2);
		assert_int_equal(sw_credited(p, 0), 1);
		assert_int_equal(sw_credited(p, 1), 6);
		assert_int_equal(bpi_stat_get(&p->st_repeats), 0);
		assert_true(sw_window_empty(p));
		assert_int_equal(pt_failures(), 0);
		sw_fake_destroy(p);
		free(s.jobs);
	}
}

/*
 * Window of 8, next_seq in slot 3, jobs 5..6 filed in slots 0..1 by
 * worker 0. Worker 1 hands jobs 4..6: a run whose first piece (slot 7) is
 * free and whose second is taken. file_run must file it job by job,
 * refusing 5 and 6 as repeats (credited to worker 1), and leave worker
 * 0's run in slot 0 as it was.
 */
static void test_repeats_across_window_end(void **state)
{
	struct sw_sink s;
	struct bp_pipeline *p;

	(void)state;
	sw_sink_init(&s, 3, 7);
	p = sw_fake_create(8, 2, 3, &s);
	sw_hand_range(p, &s, 5, 2, 0);
	sw_hand_range(p, &s, 4, 3, 1);
	assert_int_equal(bpi_stat_get(&p->st_repeats), 2);
	assert_int_equal(p->window_run[7].len, 1);
	assert_int_equal(p->window_run[7].worker, 1);
	assert_int_equal(p->window_run[0].len, 2);
	assert_int_equal(p->window_run[0].worker, 0);
	assert_int_equal(s.calls, 0);

	sw_hand_range(p, &s, 0, 4, 0);
	assert_int_equal(s.next, 7);
	assert_int_equal(s.calls, 2);
	assert_int_equal(s.sizes[0], 5);
	assert_int_equal(s.sizes[1], 2);
	assert_int_equal(sw_credited(p, 0), 6);
	assert_int_equal(sw_credited(p, 1), 3);
	assert_true(sw_window_empty(p));
	assert_int_equal(pt_failures(), 0);
	sw_fake_destroy(p);
	free(s.jobs);
}

/*
 * SINK_BATCH jobs (seqs 1..256, one run of worker 0) wait behind seq 0,
 * with a run of worker 1 (257..300) behind them. When worker 2 hands seq
 * 0, the first callback has SINK_BATCH jobs (0..255: take_runs splits
 * worker 0's run), the second the rest (256..300).
 */
static void test_full_batch_behind_gap(void **state)
{
	struct sw_sink s;
	struct bp_pipeline *p;

	(void)state;
	sw_sink_init(&s, 0, 301);
	p = sw_fake_create(512, 3, 0, &s);
	sw_hand_range(p, &s, 1, SINK_BATCH, 0);
	assert_int_equal(p->window_run[1].len, SINK_BATCH);
	assert_int_equal(p->window_run[1].worker, 0);
	sw_hand_range(p, &s, SINK_BATCH + 1, 44, 1);
	assert_int_equal(s.calls, 0);

	sw_hand_range(p, &s, 0, 1, 2);
	assert_int_equal(s.next, 301);
	assert_int_equal(s.calls, 2);
	assert_int_equal(s.sizes[0], SINK_BATCH);
	assert_int_equal(s.sizes[1], 45);
	assert_int_equal(sw_credited(p, 0), SINK_BATCH);
	assert_int_equal(sw_credited(p, 1), 44);
	assert_int_equal(sw_credited(p, 2), 1);
	assert_int_equal(bpi_stat_get(&p->st_repeats), 0);
	assert_true(sw_window_empty(p));
	assert_int_equal(pt_failures(), 0);
	sw_fake_destroy(p);
	free(s.jobs);
}

/*
 * sorted_run_end against a look at every job: batches of 1..40 jobs with
 * increasing seqs (gaps of 1..3 drawn per job, from 0 or just below the
 * seq space's wrap), from every start, with every hint from 0 to past the
 * batch's end. It must give the end of the run of consecutive seqs
 * exactly (a run ended too late would deliver out of order; too early
 * only costs another run), and leave a hint that ends its run.
 */
static void test_sorted_run_end(void **state)
{
	struct bp_job jobs[40];
	struct bp_job *ptrs[40 + SINK_AHEAD] = {0};
	struct bp_pipeline p;
	uint64_t rng = 7, cases = 0;

	(void)state;
	memset(&p, 0, sizeof(p));
	for (unsigned round = 0; round < 300; round++) {
		unsigned n = 1 + sw_below(&rng, 40);
		uint64_t seq = round & 1 ? 0 : SEQ_MASK - sw_below(&rng, 50);

		for (unsigned k = 0; k < n; k++) {
			/* mostly consecutive: runs of a few to many */
			seq += k == 0 ? 0 : (sw_below(&rng, 6) ? 1 : 2);
			jobs[k].seq = seq & SEQ_MASK;
			ptrs[k] = &jobs[k];
		}
		for (unsigned i = 0; i < n; i++) {
			unsigned want = i + 1;

			while (want < n &&
			       jobs[want].seq == ((jobs[i].seq + (want - i)) &
						  SEQ_MASK))
				want++;
			for (unsigned h = 0; h <= n + 2; h++) {
				unsigned got;

				p.run_hint = h;
				got = sorted_run_end(&p, ptrs, i, n,
						     jobs[i].seq);
				cases++;
				if (got != want) {
					pt_fail("n %u, from %u, hint %u: run "
						"ends at %u, want %u",
						n, i, h, got, want);
					return;
				}
				if (p.run_hint != h && p.run_hint != want - i)
					pt_fail("hint %u left at %u, run of "
						"%u",
						h, p.run_hint, want - i);
			}
		}
	}
	assert_true(cases > 10000);
	assert_int_equal(pt_failures(), 0);
}

/*
 * deliver() counts each job's latency once, by runs of equal submit
 * times: batches of 1..SINK_BATCH jobs whose submit times are all equal,
 * all different, the first or the last apart, or drawn from three values;
 * the callback frees nothing here but must see every job. Jobs submitted
 * "in the future" (a clock read after deliver's) go to bucket 0.
 */
static void sw_count_cb(void *ctx, struct bp_job **jobs, unsigned n)
{
	uint64_t *seen = ctx;

	(void)jobs;
	*seen += n;
}

static void test_deliver_latency_counts(void **state)
{
	static struct bp_job jobs[SINK_BATCH];
	struct bp_job *ptrs[SINK_BATCH + SINK_AHEAD] = {0};
	struct bp_pipeline *p = bpi_alloc_aligned(sizeof(*p), BP_FALSE_SHARING);
	uint64_t rng = 11, seen = 0, want = 0;
	int64_t t0 = bpi_now_ns();

	(void)state;
	assert_non_null(p);
	p->cfg.sink = sw_count_cb;
	p->cfg.sink_ctx = &seen;
	for (unsigned round = 0; round < 2000; round++) {
		unsigned n = 1 + sw_below(&rng, SINK_BATCH), shape = round % 5;
		uint64_t before = sw_lat_total(p), zero;

		zero = bpi_stat_get(&p->st_lat[0]);
		for (unsigned i = 0; i < n; i++) {
			int64_t sub = t0 - 1000;

			if (shape == 1)
				sub -= i;
			else if (shape == 2 && i == 0)
				sub -= 5;
			else if (shape == 3 && i == n - 1)
				sub -= 5;
			else if (shape == 4)
				sub -= sw_below(&rng, 3);
			jobs[i].submit_ns = sub;
			ptrs[i] = &jobs[i];
		}
		/* one batch from the future: every job in bucket 0 */
		if (round % 97 == 0)
			for (unsigned i = 0; i < n; i++)
				jobs[i].submit_ns = t0 + (INT64_C(1) << 40);
		deliver(p, ptrs, n);
		want += n;
		if (sw_lat_total(p) - before != n)
			pt_fail("round %u (shape %u): %" PRIu64
				" latencies counted for %u jobs",
				round, shape, sw_lat_total(p) - before, n);
		if (round % 97 == 0 && bpi_stat_get(&p->st_lat[0]) - zero != n)
			pt_fail("round %u: a batch from the future is not all "
				"in bucket 0",
				round);
	}
	assert_int_equal(seen, want);
	assert_int_equal(bpi_stat_get(&p->st_ok), want);
	assert_int_equal(pt_failures(), 0);
	bpi_free_aligned(p, sizeof(*p), BP_FALSE_SHARING);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_across_window_end),
		cmocka_unit_test(test_repeats_across_window_end),
		cmocka_unit_test(test_full_batch_behind_gap),
		cmocka_unit_test(test_sorted_run_end),
		cmocka_unit_test(test_deliver_latency_counts),
		cmocka_unit_test(test_random_models),
	};
	int rc;

	/* a window that loses a job can make take_runs spin: fail, not hang
	 * (the random seeds re-arm it each) */
	pt_watchdog_arm(SW_WATCHDOG_S, "test_sink_window");
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (sw_seed_running) /* cmocka caught a crash in it */
		fprintf(stderr,
			"seed %" PRIu64 " crashed (BP_SEED=%" PRIu64
			" reruns it)\n",
			sw_seed_running, sw_seed_running);
	return rc;
}
