/* SPDX-License-Identifier: MIT */
/*
 * filler.c - the fill engine. One pipeline, made at start-up, whose stage is
 * the RDMA stage: its workers RDMA-write generated pages into clients'
 * regions. A FILL becomes a fill request and a thread that submits its
 * pages as jobs; the stage's prepare callback generates each page on the
 * worker thread (bp_rdma_fill_page) into the job's staging buffer just
 * before the write is posted; the sink counts completions per request and
 * returns the job, buffer and all, to the free ring.
 *
 * Staging: stage_slots jobs, each with a stage_slot-byte buffer carved from
 * one slab registered with the stage before the pipeline starts (the
 * workers own the domains after that). The free ring of jobs is the fill's
 * backpressure: a fill thread waits for free jobs, so at most stage_slots
 * pages are in flight over all fills, and a slow client slows only the
 * pages that are its own plus its share of the slots.
 *
 * Arrival: a plain write completion on tcp;ofi_rxm says the data left, not
 * that it landed, so every page is written with BP_RDMA_JOB_DELIVERED
 * (FI_DELIVERY_COMPLETE) and FILL_DONE, sent once every page is back, means
 * "in the client's memory". Not just the last page: the pages are spread
 * over the workers' and rails' endpoints, each its own connection, and a
 * delivered write on one says nothing about the others; the stage chooses
 * the worker, so there is no "last page per endpoint" to mark.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <batchpipe/ring.h>

#include "target.h"

/* Pages handed to bp_pipeline_submit at once: one ring reservation for many. */
#define FILL_SUBMIT_BATCH 32
/* How long a fill thread waits for free jobs before it looks at stop. */
#define FILL_WAIT_NS (50ll * 1000000ll)

struct fill_job {
	struct bp_rdma_job rj; /* first: the pipeline's bp_job is at 0 */
	struct fill_req *req;
	uint64_t index;
	void *slot;
};

struct filler {
	struct target *t;
	struct bp_rdma *rdma;
	struct bp_pipeline *pipe;
	struct bp_ring *free; /* struct fill_job *, MP/MC */
	struct fill_job *jobs;
	void *slab;
	size_t slab_len;
	unsigned njobs;
	/* by peer id: the desc given to bp_rdma_peer_add and the clients
	 * holding it (0: the id is free); the main thread's only */
	struct fill_peer *peers;
	unsigned max_peers;
};

struct fill_peer {
	struct bp_rdma_peer_desc desc;
	unsigned refs;
};

struct fill_req {
	struct filler *f;
	pthread_t thread;
	bool thread_started;
	int peer;
	uint64_t len, pages, seed;
	uint32_t page;
	int64_t start_ns;
	/* set by the main thread, read by the fill thread (relaxed: a hint
	 * to stop early; nothing is published with it) */
	_Atomic bool stop;
	/* written by the fill thread only; final once submit_done is set */
	_Atomic uint64_t submitted;
	/* set (release) by the fill thread after its last submitted store;
	 * read (acquire) by the sink and the main thread */
	_Atomic bool submit_done;
	/* first failure (0 until then): CAS by the sink or the fill thread */
	_Atomic int status;
	/* bytes of pages written ok: added by the sink before its completed
	 * increment, which publishes it */
	_Atomic uint64_t done_bytes;
	/* pages back from the stage: incremented (release) by the sink,
	 * read (acquire) by the main thread, which frees the request once
	 * completed == submitted after submit_done */
	_Atomic uint64_t completed;
	/* CLOCK_MONOTONIC when the last page came back (published by the
	 * completed increment like done_bytes) */
	_Atomic int64_t end_ns;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void set_status(struct fill_req *r, int err)
{
	int zero = 0;

	/* relaxed: only the first error is kept; it is published to the main
	 * thread by the completed increment (or submit_done) that follows */
	atomic_compare_exchange_strong_explicit(&r->status, &zero, err,
						memory_order_relaxed,
						memory_order_relaxed);
}

static void wake_main(const struct filler *f)
{
	uint64_t one = 1;

	/* an eventfd counter cannot overflow in practice; a failed write
	 * only delays FILL_DONE to the next 100 ms tick */
	(void)!write(f->t->evfd, &one, sizeof(one));
}

/* On a worker thread, just before the write is posted. */
static int fill_prepare(void *ctx, struct bp_rdma_job *rj)
{
	struct fill_job *j = (struct fill_job *)rj;

	(void)ctx;
	/* a shorter page is a prefix of the full one: generate just len */
	bp_rdma_fill_page(j->req->seed, j->index, j->slot, rj->len);
	return 0;
}

static void fill_sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct filler *f = ctx;
	bool wake = false;

	for (unsigned i = 0; i < n; i++) {
		struct fill_job *j = (struct fill_job *)jobs[i];
		struct fill_req *r = j->req;
		bool sd;
		uint64_t sub, c;

		if (j->rj.hdr.status != BP_JOB_OK)
			set_status(r, j->rj.hdr.status);
		else
			/* relaxed: published by the release add below */
			atomic_fetch_add_explicit(&r->done_bytes, j->rj.len,
						  memory_order_relaxed);
		atomic_store_explicit(&r->end_ns, now_ns(),
				      memory_order_relaxed);
		/*
		 * Read what "finished" needs before the increment: once
		 * completed reaches submitted the main thread may free r.
		 * acquire: pairs with the fill thread's release of
		 * submit_done, which makes the final submitted visible.
		 */
		sd = atomic_load_explicit(&r->submit_done,
					  memory_order_acquire);
		sub = atomic_load_explicit(&r->submitted, memory_order_relaxed);
		j->req = NULL;
		/* release: publishes done_bytes, status and end_ns to the main
		 * thread's acquire load of completed (fill_req_poll) */
		c = atomic_fetch_add_explicit(&r->completed, 1,
					      memory_order_release) +
		    1;
		if (sd && c == sub)
			wake = true;
	}
	/* the free ring holds every job, so there is always room */
	(void)bp_ring_enqueue_burst(f->free, (void *const *)jobs, n, NULL);
	if (wake)
		wake_main(f);
}

static void *fill_thread(void *arg)
{
	struct fill_req *r = arg;
	struct filler *f = r->f;
	uint64_t next = 0, sub = 0;

	while (next < r->pages) {
		void *got[FILL_SUBMIT_BATCH];
		struct bp_job *hdrs[FILL_SUBMIT_BATCH];
		unsigned want, k;
		int n, rc;

		/* relaxed: stop is a hint; status is only ever read here to
		 * give up early after a failure */
		if (atomic_load_explicit(&r->stop, memory_order_relaxed) ||
		    atomic_load_explicit(&r->status, memory_order_relaxed))
			break;
		want = r->pages - next < FILL_SUBMIT_BATCH
			       ? (unsigned)(r->pages - next)
			       : FILL_SUBMIT_BATCH;
		n = bp_ring_dequeue_burst_wait(f->free, got, want,
					       FILL_WAIT_NS);
		if (n == -ETIMEDOUT || n == -EINTR)
			continue;
		if (n < 0) {
			set_status(r, n);
			break;
		}
		for (k = 0; k < (unsigned)n; k++) {
			struct fill_job *j = got[k];
			uint64_t off = (next + k) * r->page;
			uint64_t len =
				r->len - off < r->page ? r->len - off : r->page;

			j->req = r;
			j->index = next + k;
			bp_rdma_job_set(&j->rj, BP_RDMA_WRITE,
					(uint32_t)r->peer, j->slot, (size_t)len,
					off);
			/* see "Arrival" at the top */
			j->rj.flags = BP_RDMA_JOB_DELIVERED;
			hdrs[k] = &j->rj.hdr;
		}
		/* counted before the submit: the sink may see a page back
		 * before bp_pipeline_submit returns */
		sub += (unsigned)n;
		atomic_store_explicit(&r->submitted, sub, memory_order_relaxed);
		rc = bp_pipeline_submit(f->pipe, hdrs, (unsigned)n, 0, -1);
		if (rc < 0 || rc < n) {
			unsigned taken = rc < 0 ? 0 : (unsigned)rc;

			/* the pipeline is stopping: give back what it did not
			 * take and count only what it did */
			for (k = taken; k < (unsigned)n; k++)
				((struct fill_job *)got[k])->req = NULL;
			(void)bp_ring_enqueue_burst(f->free, &got[taken],
						    (unsigned)n - taken, NULL);
			sub -= (unsigned)n - taken;
			atomic_store_explicit(&r->submitted, sub,
					      memory_order_relaxed);
			set_status(r, rc < 0 ? rc : -ECANCELED);
			break;
		}
		next += (unsigned)n;
	}
	if (next < r->pages)
		set_status(r, -ECANCELED); /* stopped early: not a full fill */
	/* release: pairs with the acquire loads in the sink and in
	 * fill_req_poll: the final submitted and status are visible to
	 * whoever sees submit_done */
	atomic_store_explicit(&r->submit_done, true, memory_order_release);
	wake_main(f);
	return NULL;
}

static bool desc_equal(const struct bp_rdma_peer_desc *a,
		       const struct bp_rdma_peer_desc *b)
{
	if (a->rails != b->rails || a->len != b->len)
		return false;
	for (unsigned i = 0; i < a->rails; i++)
		if (a->rail[i].addrlen != b->rail[i].addrlen ||
		    a->rail[i].base != b->rail[i].base ||
		    a->rail[i].key != b->rail[i].key ||
		    memcmp(a->rail[i].addr, b->rail[i].addr,
			   a->rail[i].addrlen) != 0)
			return false;
	return true;
}

/*
 * The stage's peer id for d, with a reference the caller gives back with
 * filler_peer_put once nothing of its fills is in flight. A client holds
 * one at a time (clients.c), so --max-fill-peers bounds the clients with a
 * region to fill, not the FILLs over the daemon's life; the same region
 * asked for again (by the same client or another connection of its
 * process) shares its id. A linear search: FILL is rare and the table
 * small.
 */
int filler_peer_get(struct filler *f, const struct bp_rdma_peer_desc *d)
{
	int id;

	for (unsigned i = 0; i < f->max_peers; i++)
		if (f->peers[i].refs && desc_equal(&f->peers[i].desc, d)) {
			f->peers[i].refs++;
			return (int)i;
		}
	id = bp_rdma_peer_add(f->rdma, d);
	if (id < 0)
		return id;
	if ((unsigned)id >= f->max_peers || f->peers[id].refs) {
		/* not this stage's way of handing out ids: a bug of ours */
		tlog(f->t, 0, NULL, "fill stage: peer id %d unexpected", id);
		bp_rdma_peer_remove(f->rdma, id);
		return -EPROTO;
	}
	f->peers[id].desc = *d;
	f->peers[id].refs = 1;
	return id;
}

bool filler_peer_is(const struct filler *f, int id,
		    const struct bp_rdma_peer_desc *d)
{
	return id >= 0 && (unsigned)id < f->max_peers && f->peers[id].refs &&
	       desc_equal(&f->peers[id].desc, d);
}

void filler_peer_put(struct filler *f, int id)
{
	if (id < 0 || (unsigned)id >= f->max_peers || !f->peers[id].refs)
		return;
	if (--f->peers[id].refs == 0)
		bp_rdma_peer_remove(f->rdma, id);
}

void filler_peer_abandon(struct filler *f, int id)
{
	if (id < 0 || (unsigned)id >= f->max_peers || f->peers[id].refs != 1)
		return;
	bp_rdma_peer_gone(f->rdma, id);
}

int filler_start(struct filler *f, const struct bpi_msg *m, int peer,
		 struct fill_req **out)
{
	const struct target *t = f->t;
	struct fill_req *r;
	sigset_t all, old;
	int rc;

	if (m->u.fill.page > t->o.stage_slot || m->u.fill.len == 0 ||
	    m->u.fill.len > m->u.fill.desc.len ||
	    m->u.fill.desc.rails != t->o.rails ||
	    !filler_peer_is(f, peer, &m->u.fill.desc))
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	r->f = f;
	r->len = m->u.fill.len;
	r->page = m->u.fill.page;
	r->seed = m->u.fill.seed;
	r->pages = (r->len + r->page - 1) / r->page;
	r->start_ns = now_ns();
	r->peer = peer;
	/* the fill thread takes no signals: the main loop's signalfd does */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&r->thread, NULL, fill_thread, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0) {
		free(r);
		return rc == -EAGAIN ? -EAGAIN : rc;
	}
	r->thread_started = true;
	*out = r;
	return 0;
}

const struct bp_rdma *filler_rdma(const struct filler *f)
{
	return f->rdma;
}

void fill_req_stop(struct fill_req *r)
{
	/* relaxed: see the field */
	atomic_store_explicit(&r->stop, true, memory_order_relaxed);
}

bool fill_req_poll(struct fill_req *r, uint64_t *done, int *status,
		   uint64_t *ns)
{
	/* acquire: pairs with the fill thread's release; then submitted is
	 * final */
	bool sd = atomic_load_explicit(&r->submit_done, memory_order_acquire);
	uint64_t sub =
		atomic_load_explicit(&r->submitted, memory_order_relaxed);
	/* acquire: pairs with the sink's release increments; done_bytes,
	 * status and end_ns are at least as new as this count */
	uint64_t c = atomic_load_explicit(&r->completed, memory_order_acquire);

	*done = atomic_load_explicit(&r->done_bytes, memory_order_relaxed);
	if (!sd || c != sub)
		return false;
	*status = atomic_load_explicit(&r->status, memory_order_relaxed);
	*ns = (uint64_t)(atomic_load_explicit(&r->end_ns,
					      memory_order_relaxed) -
			 r->start_ns);
	if (c == 0)
		*ns = (uint64_t)(now_ns() - r->start_ns);
	return true;
}

void fill_req_join(struct fill_req *r)
{
	if (r->thread_started) {
		pthread_join(r->thread, NULL);
		r->thread_started = false;
	}
}

void fill_req_free(struct fill_req *r)
{
	if (r == NULL)
		return;
	fill_req_join(r);
	free(r);
}

int filler_create(struct target *t, struct filler **out)
{
	struct bp_rdma_config rc;
	struct bp_pipeline_config pc;
	struct filler *f;
	size_t slot;
	int err;

	f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -ENOMEM;
	f->t = t;
	f->njobs = t->o.stage_slots;
	/* slots on 64-byte boundaries: no two buffers share a cache line */
	slot = ((size_t)t->o.stage_slot + 63) & ~(size_t)63;
	f->slab_len = slot * f->njobs;
	f->slab = mmap(NULL, f->slab_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f->slab == MAP_FAILED) {
		f->slab = NULL;
		err = -ENOMEM;
		goto fail;
	}
	f->max_peers = t->o.max_fill_peers;
	f->peers = calloc(f->max_peers, sizeof(*f->peers));
	if (f->peers == NULL) {
		err = -ENOMEM;
		goto fail;
	}
	f->jobs = calloc(f->njobs, sizeof(*f->jobs));
	err = f->jobs ? bp_ring_create(f->njobs, 0, &f->free) : -ENOMEM;
	if (err)
		goto fail;
	for (unsigned i = 0; i < f->njobs; i++) {
		void *p = &f->jobs[i];

		f->jobs[i].slot = (char *)f->slab + (size_t)i * slot;
		if (bp_ring_enqueue_burst(f->free, &p, 1, NULL) != 1) {
			err = -ENOMEM;
			goto fail;
		}
	}

	bp_rdma_config_init(&rc);
	rc.provider = t->o.provider;
	rc.node = t->o.fabric_node;
	rc.workers = t->o.fill_workers;
	rc.rails = t->o.rails;
	rc.max_peers = t->o.max_fill_peers; /* see filler_peer_get */
	rc.peer_timeout_ns = (uint64_t)t->o.peer_timeout_ms * 1000000u;
	rc.prepare = fill_prepare;
	rc.prepare_ctx = f;
	rc.log = tlog_lib;
	rc.log_ctx = t;
	err = bp_rdma_create(&rc, &f->rdma);
	if (err) {
		tlog(t, 0, NULL, "fill stage: bp_rdma_create: %s",
		     strerror(-err));
		goto fail;
	}
	err = bp_rdma_register(f->rdma, f->slab, f->slab_len, NULL);
	if (err) {
		tlog(t, 0, NULL,
		     "fill stage: registering %zu staging bytes: %s",
		     f->slab_len, strerror(-err));
		goto fail;
	}
	bp_pipeline_config_init(&pc);
	pc.workers = t->o.fill_workers;
	pc.stage = bp_rdma_stage(f->rdma);
	pc.stage_ctx = f->rdma;
	pc.sink = fill_sink;
	pc.sink_ctx = f;
	pc.log = tlog_lib;
	pc.log_ctx = t;
	/* never more jobs than staging buffers: ingress never fills */
	if (pc.ingress_capacity < f->njobs)
		pc.ingress_capacity = f->njobs;
	err = bp_pipeline_create(&pc, &f->pipe);
	if (!err)
		err = bp_pipeline_start(f->pipe);
	if (err) {
		tlog(t, 0, NULL, "fill pipeline: %s", strerror(-err));
		goto fail;
	}
	*out = f;
	return 0;
fail:
	filler_destroy(f);
	return err;
}

void filler_destroy(struct filler *f)
{
	if (f == NULL)
		return;
	/* Cancel what is queued: the daemon is going away, fills in
	 * progress end with -ECANCELED (their clients are closed first). */
	if (f->pipe != NULL) {
		bp_pipeline_abort(f->pipe);
		bp_pipeline_destroy(f->pipe);
	}
	if (f->rdma != NULL)
		bp_rdma_destroy(f->rdma);
	bp_ring_destroy(f->free);
	free(f->jobs);
	free(f->peers);
	if (f->slab != NULL)
		munmap(f->slab, f->slab_len);
	free(f);
}
