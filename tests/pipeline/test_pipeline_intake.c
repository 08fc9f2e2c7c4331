/* SPDX-License-Identifier: MIT */
/*
 * test_pipeline_intake - a stage's poll that sleeps while its jobs are in
 * flight wakes for new jobs (bp_worker_intake_fd / _arm / _disarm).
 *
 * The stage holds every job it is given (its jobs are "in flight") until
 * main lets them go. Its poll arms, then sleeps in epoll_wait on the
 * intake fd for LONG_MS (10 s), then disarms. With one job held and the
 * worker asleep in that wait, main submits a second job: the worker must
 * take it well before the sleep would have ended (bound: 2 s, x5 under
 * TSAN; a count of a wake-up, not a timing: without the wake the job would
 * wait the whole 10 s). Then the same with several workers (every one
 * asleep in poll holding a job, the new jobs as many as they have room
 * for), and the calls' answers:
 *
 *   - arm returns 1 when jobs wait already (the stage's first poll after
 *     main submitted two jobs at once with max_batch 1), and 0 with nothing
 *     armed when the worker holds max_inflight jobs (nothing it could
 *     take): a job submitted then does not end the sleep (the wait times
 *     out, SHORT_MS);
 *   - the fd is the same for every worker; NULL gives -EINVAL (arm, fd)
 *     and disarm(NULL) does nothing;
 *   - every job reaches the sink once, ok;
 *   - with ingress lanes, a job that comes in another lane than lane 0
 *     (whose queue the armed sleepers are on) ends the sleep too.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <batchpipe/batchpipe.h>

#include "pt_common.h"

PT_DEFINE_GLOBALS;

#define LONG_MS	 10000
#define SHORT_MS 300
#define MAXW	 4
#define HELD_CAP 64

struct job {
	struct bp_job hdr;
	atomic_int deliveries;
};

/* Per worker: what its stage holds, and what main watches. */
struct ws {
	int epfd;
	struct bp_job *held[HELD_CAP];
	unsigned nheld;
	atomic_uint taken;    /* jobs process got */
	atomic_int asleep;    /* inside epoll_wait, armed */
	atomic_int last_arm;  /* the last arm's answer */
	atomic_uint timeouts; /* sleeps that ended with nothing */
	atomic_uint ready;    /* arms that answered 1 */
	atomic_int fd;
};

static struct ws wstate[MAXW];
static atomic_int release;	/* main: complete what is held */
static atomic_int sleep_ms = LONG_MS;
static atomic_uint delivered;

static int init(struct bp_worker *w, void **state)
{
	struct ws *s = &wstate[bp_worker_id(w)];
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	int fd = bp_worker_intake_fd(w);

	if (fd < 0)
		return fd;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = fd;
	if (s->epfd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev))
		return -errno;
	/* relaxed: main reads it after start returned (init's release) */
	atomic_store_explicit(&s->fd, fd, memory_order_relaxed);
	*state = s;
	return 0;
}

static void fini(void *state, struct bp_worker *w)
{
	struct ws *s = state;

	(void)w;
	close(s->epfd);
}

static void process(void *state, struct bp_worker *w, struct bp_job **jobs,
		    unsigned n)
{
	struct ws *s = state;

	(void)w;
	for (unsigned i = 0; i < n && s->nheld < HELD_CAP; i++)
		s->held[s->nheld++] = jobs[i];
	/* release: main's acquire sees the jobs held */
	atomic_fetch_add_explicit(&s->taken, n, memory_order_release);
}

static void poll_stage(void *state, struct bp_worker *w)
{
	struct ws *s = state;
	struct epoll_event ev;
	int a;

	/* acquire: pairs with main's release of release */
	if (atomic_load_explicit(&release, memory_order_acquire)) {
		for (unsigned i = 0; i < s->nheld; i++)
			s->held[i]->status = BP_JOB_OK;
		bp_worker_complete(w, s->held, s->nheld);
		s->nheld = 0;
		return;
	}
	a = bp_worker_intake_arm(w);
	/* relaxed: flags main polls; the jobs are published by taken */
	atomic_store_explicit(&s->last_arm, a, memory_order_relaxed);
	if (a == 1) {
		atomic_fetch_add_explicit(&s->ready, 1, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&s->asleep, 1, memory_order_release);
	if (epoll_wait(s->epfd, &ev, 1,
		       atomic_load_explicit(&sleep_ms, memory_order_relaxed)) ==
	    0)
		atomic_fetch_add_explicit(&s->timeouts, 1,
					  memory_order_relaxed);
	atomic_store_explicit(&s->asleep, 0, memory_order_release);
	bp_worker_intake_disarm(w);
}

static const struct bp_stage stage = {.name = "intake",
				      .init = init,
				      .process = process,
				      .poll = poll_stage,
				      .fini = fini};

static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	(void)ctx;
	for (unsigned i = 0; i < n; i++) {
		struct job *j = (struct job *)jobs[i];

		if (atomic_fetch_add(&j->deliveries, 1))
			pt_fail("a job delivered twice");
		if (jobs[i]->status != BP_JOB_OK)
			pt_fail("a job delivered with status %d",
				jobs[i]->status);
	}
	atomic_fetch_add_explicit(&delivered, n, memory_order_release);
}

/* Wait until *v >= want, up to ms; false on time-out. */
static bool wait_uint(atomic_uint *v, unsigned want, int64_t ms)
{
	int64_t end = pt_now_ns() + ms * 1000000 * (PT_TSAN ? 5 : 1);

	/* acquire: pairs with the stage's release */
	while (atomic_load_explicit(v, memory_order_acquire) < want)
		if (pt_now_ns() > end)
			return false;
		else
			pt_sleep_ms(1);
	return true;
}

static bool wait_asleep(struct ws *s, int64_t ms)
{
	int64_t end = pt_now_ns() + ms * 1000000 * (PT_TSAN ? 5 : 1);

	/* acquire: pairs with poll_stage's release */
	while (!atomic_load_explicit(&s->asleep, memory_order_acquire))
		if (pt_now_ns() > end)
			return false;
		else
			pt_sleep_ms(1);
	pt_sleep_ms(20); /* into epoll_wait itself */
	return true;
}

/* ingress_lanes of the next open_pipeline (0: one ring) */
static unsigned open_lanes;

static struct bp_pipeline *open_pipeline(unsigned workers, unsigned inflight)
{
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;
	int rc;

	memset(wstate, 0, sizeof(wstate));
	atomic_store(&release, 0);
	atomic_store(&delivered, 0);
	atomic_store(&sleep_ms, LONG_MS);
	bp_pipeline_config_init(&cfg);
	cfg.stage = &stage;
	cfg.sink = sink;
	cfg.workers = workers;
	cfg.max_batch = 1;
	cfg.max_inflight = inflight;
	cfg.ingress_lanes = open_lanes;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		pt_fail("pipeline: %s", bp_strerror(rc));
		bp_pipeline_destroy(p);
		return NULL;
	}
	return p;
}

static void submit(struct bp_pipeline *p, struct job *j)
{
	struct bp_job *h = &j->hdr;
	int rc = bp_pipeline_submit(p, &h, 1, 0, -1);

	if (rc != 1)
		pt_fail("submit: %s", bp_strerror(rc));
}

/* Let the held jobs go (a job wakes the sleepers), drain, count. */
static void finish(struct bp_pipeline *p, struct job *jobs, unsigned n,
		   unsigned submitted)
{
	int rc;

	atomic_store_explicit(&sleep_ms, 1, memory_order_relaxed);
	/* release: pairs with poll_stage's acquire */
	atomic_store_explicit(&release, 1, memory_order_release);
	submit(p, &jobs[submitted++]); /* ends the sleeps */
	rc = bp_pipeline_drain_timeout(p, 20ll * 1000000000);
	if (rc)
		pt_fail("drain: %s", bp_strerror(rc));
	if (atomic_load(&delivered) != submitted)
		pt_fail("%u of %u jobs delivered", atomic_load(&delivered),
			submitted);
	for (unsigned i = 0; i < n; i++)
		if (atomic_load(&jobs[i].deliveries) != (i < submitted))
			pt_fail("job %u delivered %d times", i,
				atomic_load(&jobs[i].deliveries));
	bp_pipeline_destroy(p);
}

/* Submit jobs[0] and wait until worker 0 holds it asleep in poll. */
static bool first_job_asleep(struct bp_pipeline *p, struct job *jobs)
{
	memset(jobs, 0, 4 * sizeof(*jobs));
	submit(p, &jobs[0]);
	if (!wait_uint(&wstate[0].taken, 1, 5000) ||
	    !wait_asleep(&wstate[0], 5000)) {
		pt_fail("the stage did not take its first job and sleep");
		return false;
	}
	return true;
}

/* One worker asleep in poll with a job held: a new job ends the sleep. */
static void test_wakes_one(void)
{
	static struct job jobs[4];
	struct bp_pipeline *p = open_pipeline(1, 8);
	int64_t t0, dt;

	if (!p || !first_job_asleep(p, jobs))
		return;
	t0 = pt_now_ns();
	submit(p, &jobs[1]);
	if (!wait_uint(&wstate[0].taken, 2, 2000))
		pt_fail("a job submitted while the stage slept in poll was "
			"not taken within 2 s (the sleep is %d s)",
			LONG_MS / 1000);
	dt = pt_now_ns() - t0;
	printf("one worker: the job was taken %.1f us after the submit\n",
	       (double)dt / 1e3);
	if (atomic_load(&wstate[0].timeouts))
		pt_fail("the sleep timed out instead of being woken");
	finish(p, jobs, 4, 2);
}

/* After a failed check: let the held jobs go and end p, so that its
 * worker, asleep for up to LONG_MS, does not outlive the test. */
static void give_up(struct bp_pipeline *p, struct bp_producer *h)
{
	atomic_store_explicit(&sleep_ms, 1, memory_order_relaxed);
	/* release: pairs with poll_stage's acquire */
	atomic_store_explicit(&release, 1, memory_order_release);
	if (h)
		bp_producer_destroy(h);
	bp_pipeline_abort(p);
	bp_pipeline_destroy(p);
}

/*
 * With ingress lanes the armed sleepers sleep on lane 0's queue, and a job
 * that comes in another lane must end their sleep: main's submit is dealt
 * the pipeline's first lane, the handle made after it the second, whose
 * job (submitted by bp_producer_flush) must be taken at once. Main checks
 * which lane each job came in by its seq.
 */
static void test_wakes_one_lanes(void)
{
	static struct job jobs[4];
	struct bp_pipeline *p;
	struct bp_producer *h = NULL;
	int rc;

	open_lanes = 4;
	p = open_pipeline(1, 8);
	open_lanes = 0;
	if (!p)
		return;
	if (!first_job_asleep(p, jobs)) {
		give_up(p, NULL);
		return;
	}
	if ((rc = bp_producer_create(p, &h)) != 0 ||
	    (rc = bp_producer_submit(h, &jobs[1].hdr)) != 0 ||
	    (rc = bp_producer_flush(h)) != 0) {
		pt_fail("lanes: the handle: %s", bp_strerror(rc));
		give_up(p, h);
		return;
	}
	if ((jobs[0].hdr.seq & 3) == (jobs[1].hdr.seq & 3))
		pt_fail("lanes: the thread and the handle share lane %llu",
			(unsigned long long)(jobs[0].hdr.seq & 3));
	if (!wait_uint(&wstate[0].taken, 2, 2000))
		pt_fail("lanes: a job in lane %llu, submitted while the stage "
			"slept in poll, was not taken within 2 s",
			(unsigned long long)(jobs[1].hdr.seq & 3));
	else if (atomic_load(&wstate[0].timeouts))
		pt_fail("lanes: the sleep timed out instead of being woken");
	else
		printf("lanes: a job in lane %llu woke the sleeper armed on "
		       "lane 0's queue\n",
		       (unsigned long long)(jobs[1].hdr.seq & 3));
	if (bp_producer_destroy(h) != 0)
		pt_fail("lanes: bp_producer_destroy");
	finish(p, jobs, 4, 2);
}

/*
 * Every worker asleep in poll with jobs held: each new job a worker has
 * room for is taken. Which worker takes a job is the pipeline's choice (a
 * job wakes the armed sleepers in poll and an idle worker alike, and any
 * of them may take it), so the workers take at most SEVERAL_CAP jobs each
 * (max_inflight): jobs go in one at a time, and once a worker is full the
 * next must go to another, until every worker holds one. Then as many jobs
 * go in at once as the workers have room for, and every one is taken.
 */
#define SEVERAL_CAP 3

static unsigned taken_all(unsigned W)
{
	unsigned t = 0;

	for (unsigned k = 0; k < W; k++)
		t += atomic_load(&wstate[k].taken);
	return t;
}

static void test_wakes_several(void)
{
	enum { W = MAXW, N = W * SEVERAL_CAP + 2 };
	static struct job jobs[N];
	struct bp_pipeline *p = open_pipeline(W, SEVERAL_CAP);
	unsigned n = 0, holding = 0, base, room = 0;
	int fd0;

	if (!p)
		return;
	memset(jobs, 0, sizeof(jobs));
	while (holding < W && n < W * SEVERAL_CAP) {
		int64_t end = pt_now_ns() + 5000000000ll * (PT_TSAN ? 5 : 1);

		submit(p, &jobs[n++]);
		while (taken_all(W) < n) {
			if (pt_now_ns() > end) {
				pt_fail("job %u was not taken", n - 1);
				finish(p, jobs, N, n);
				return;
			}
			pt_sleep_ms(1);
		}
		holding = 0;
		for (unsigned k = 0; k < W; k++)
			holding += atomic_load(&wstate[k].taken) > 0;
	}
	if (holding < W) {
		pt_fail("%u jobs in, only %u of %u workers hold one", n,
			holding, W);
		finish(p, jobs, N, n);
		return;
	}
	for (unsigned k = 0; k < W; k++) {
		unsigned t = atomic_load(&wstate[k].taken);

		if (t > SEVERAL_CAP)
			pt_fail("worker %u took %u jobs, max_inflight %u", k,
				t, SEVERAL_CAP);
		else
			room += SEVERAL_CAP - t;
		if (!wait_asleep(&wstate[k], 5000))
			pt_fail("worker %u does not sleep in poll", k);
	}
	fd0 = atomic_load(&wstate[0].fd);
	for (unsigned k = 1; k < W; k++)
		if (atomic_load(&wstate[k].fd) != fd0)
			pt_fail("worker %u has another intake fd", k);
	/* the last job went to a worker that held none: it has room for
	 * SEVERAL_CAP - 1 more, so at least two new jobs wake sleepers */
	if (room < SEVERAL_CAP - 1 || n + room >= N) {
		pt_fail("room for %u jobs after %u", room, n);
		finish(p, jobs, N, n);
		return;
	}
	base = taken_all(W);
	for (unsigned i = 0; i < room; i++)
		submit(p, &jobs[n++]);
	for (int64_t end = pt_now_ns() + 2000000000ll * (PT_TSAN ? 5 : 1);
	     taken_all(W) < base + room && pt_now_ns() < end;)
		pt_sleep_ms(1);
	if (taken_all(W) != base + room)
		pt_fail("%u of %u jobs taken with every worker asleep in poll",
			taken_all(W) - base, room);
	printf("%u workers asleep in poll: %u new jobs taken (room for %u)\n",
	       W, taken_all(W) - base, room);
	finish(p, jobs, N, n);
}

/*
 * max_inflight 1: the worker holds its one job, so arm answers 0 without
 * arming, and a new job does not end its (short) sleep. Then arm answers
 * 1: with max_batch 1 the stage's first poll after taking one of two jobs
 * submitted at once finds the other waiting.
 */
static void test_arm_answers(void)
{
	static struct job jobs[4];
	struct bp_pipeline *p;
	unsigned before;

	if (bp_worker_intake_arm(NULL) != -EINVAL ||
	    bp_worker_intake_fd(NULL) != -EINVAL)
		pt_fail("NULL worker: not -EINVAL");
	bp_worker_intake_disarm(NULL);

	p = open_pipeline(1, 1);
	if (!p)
		return;
	atomic_store(&sleep_ms, SHORT_MS);
	memset(jobs, 0, sizeof(jobs));
	submit(p, &jobs[0]);
	if (!wait_uint(&wstate[0].taken, 1, 5000) ||
	    !wait_asleep(&wstate[0], 5000)) {
		pt_fail("the stage did not take its job and sleep");
		return;
	}
	before = atomic_load(&wstate[0].timeouts);
	submit(p, &jobs[1]);
	/* the sleep after it ends by its time-out, not by the job */
	if (!wait_uint(&wstate[0].timeouts, before + 1, 5000))
		pt_fail("no sleep timed out with max_inflight held");
	if (atomic_load(&wstate[0].last_arm) != 0)
		pt_fail("arm with max_inflight held answered %d",
			atomic_load(&wstate[0].last_arm));
	if (atomic_load(&wstate[0].taken) != 1)
		pt_fail("a job was taken beyond max_inflight");
	finish(p, jobs, 4, 2);

	/* two jobs at once, max_batch 1: the first poll finds one waiting */
	p = open_pipeline(1, 8);
	if (!p)
		return;
	memset(jobs, 0, sizeof(jobs));
	{
		struct bp_job *h[2] = {&jobs[0].hdr, &jobs[1].hdr};
		int rc = bp_pipeline_submit(p, h, 2, 0, -1);

		if (rc != 2)
			pt_fail("submit of 2: %d", rc);
	}
	if (!wait_uint(&wstate[0].taken, 2, 5000))
		pt_fail("two jobs submitted at once were not both taken");
	if (atomic_load(&wstate[0].ready) < 1)
		pt_fail("arm never answered 1 with a job waiting in ingress");
	finish(p, jobs, 4, 2);
}

static struct job gjobs[8];

static struct job *gjobs_first(void)
{
	return &gjobs[0];
}

/*
 * Stage 0 of a gated chain (chain_max_inflight 4), asleep in poll with a
 * job held and the gate closed: the sink's deliveries that open the gate
 * end the sleep (the gate's queue borrows the intake descriptor), and the
 * job waiting in ingress is taken well before the 10 s sleep would end.
 * Stage 1 holds the gate closed until main lets its jobs go.
 */
static atomic_int open1, hold0_released;

static void g1_process(void *state, struct bp_worker *w, struct bp_job **jobs,
		       unsigned n)
{
	(void)state;
	/* acquire: pairs with main's release of open1 */
	while (!atomic_load_explicit(&open1, memory_order_acquire))
		pt_sleep_ms(1);
	for (unsigned i = 0; i < n; i++)
		jobs[i]->status = BP_JOB_OK;
	bp_worker_complete(w, jobs, n);
}

/* stage 0: the first job is held until main releases it, the others are
 * completed at the next poll; poll sleeps armed as poll_stage does */
static void g0_poll(void *state, struct bp_worker *w)
{
	struct ws *s = state;
	unsigned keep = 0;

	for (unsigned i = 0; i < s->nheld; i++) {
		if (s->held[i] == &gjobs_first()->hdr &&
		    !atomic_load(&hold0_released)) {
			s->held[keep++] = s->held[i];
			continue;
		}
		s->held[i]->status = BP_JOB_OK;
		bp_worker_complete(w, &s->held[i], 1);
	}
	s->nheld = keep;
	if (!s->nheld)
		return;
	poll_stage(state, w);
}

static const struct bp_stage g0_stage = {.name = "gate0",
					 .init = init,
					 .process = process,
					 .poll = g0_poll,
					 .fini = fini};
static const struct bp_stage g1_stage = {.name = "gate1",
					 .process = g1_process};

static void test_gate_wakes(void)
{
	struct bp_chain_stage cs[2];
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p = NULL;
	int64_t t0, dt;
	int rc;

	memset(wstate, 0, sizeof(wstate));
	memset(gjobs, 0, sizeof(gjobs));
	atomic_store(&release, 0);
	atomic_store(&delivered, 0);
	atomic_store(&sleep_ms, LONG_MS);
	atomic_store(&open1, 0);
	atomic_store(&hold0_released, 0);
	memset(cs, 0, sizeof(cs));
	cs[0] = (struct bp_chain_stage){.stage = &g0_stage, .workers = 1};
	cs[1] = (struct bp_chain_stage){.stage = &g1_stage, .workers = 1};
	bp_pipeline_config_init(&cfg);
	cfg.stages = cs;
	cfg.n_stages = 2;
	cfg.sink = sink;
	cfg.max_batch = 1;
	cfg.max_inflight = 8;
	cfg.chain_max_inflight = 4;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		pt_fail("gated chain: %s", bp_strerror(rc));
		bp_pipeline_destroy(p);
		return;
	}
	/* the held job, then three that fill the gate behind stage 1 */
	for (int i = 0; i < 4; i++)
		submit(p, &gjobs[i]);
	if (!wait_uint(&wstate[0].taken, 4, 5000) ||
	    !wait_asleep(&wstate[0], 5000)) {
		pt_fail("gated chain: stage 0 did not take 4 jobs and sleep");
		goto out;
	}
	/* the gate is closed: this one waits in ingress */
	submit(p, &gjobs[4]);
	pt_sleep_ms(50);
	if (atomic_load(&wstate[0].taken) != 4)
		pt_fail("gated chain: a job taken past the gate");
	if (!wait_asleep(&wstate[0], 5000))
		pt_fail("gated chain: stage 0 is not asleep in poll");
	t0 = pt_now_ns();
	/* release: stage 1 completes, the sink delivers, the gate opens */
	atomic_store_explicit(&open1, 1, memory_order_release);
	if (!wait_uint(&wstate[0].taken, 5, 2000))
		pt_fail("gated chain: the job behind the gate was not taken "
			"within 2 s of the gate opening (the sleep is %d s)",
			LONG_MS / 1000);
	dt = pt_now_ns() - t0;
	printf("gated chain: the job behind the gate was taken %.1f us after "
	       "stage 1 let go\n",
	       (double)dt / 1e3);
	if (atomic_load(&wstate[0].timeouts))
		pt_fail("gated chain: the sleep timed out instead of being "
			"woken");
out:
	atomic_store(&hold0_released, 1);
	atomic_store_explicit(&open1, 1, memory_order_release);
	atomic_store_explicit(&sleep_ms, 1, memory_order_relaxed);
	submit(p, &gjobs[5]); /* ends the sleep */
	rc = bp_pipeline_drain_timeout(p, 20ll * 1000000000);
	if (rc)
		pt_fail("gated chain: drain: %s", bp_strerror(rc));
	if (atomic_load(&delivered) != 6)
		pt_fail("gated chain: %u of 6 jobs delivered",
			atomic_load(&delivered));
	bp_pipeline_destroy(p);
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	pt_watchdog_arm(120, "test_pipeline_intake");
	test_wakes_one();
	test_wakes_one_lanes();
	test_wakes_several();
	test_arm_answers();
	test_gate_wakes();
	pt_watchdog_disarm();
	if (pt_failures()) {
		printf("FAIL: %u check(s) failed\n", pt_failures());
		return 1;
	}
	printf("PASS\n");
	return 0;
}
