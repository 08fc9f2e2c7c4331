/* SPDX-License-Identifier: MIT */
/*
 * The RDMA stage: what each worker does with RMA jobs.
 *
 *   process(jobs)  check each job, queue it on a rail (striped, or the one
 *                  it names), then post from every rail's queue
 *   poll()         reap each busy rail's CQ, B entries per fi_cq_read, hand
 *                  the completed jobs to the sink in one batch, post what
 *                  the reaped credits allow; wait as cq_wait says
 *   cancel()       jobs still queued complete as cancelled; posted ones run
 *                  to their completion, or are cancelled once their rail
 *                  has completed nothing for BPI_RDMA_ABORT_QUIET_NS
 *
 * Posting: at most `credits` operations in flight per rail
 * and `post_batch` per pass, with FI_MORE on all but the last of a pass so
 * the provider may ring its doorbell once. -FI_EAGAIN leaves the job at the
 * head of the rail's queue, to be retried after the next reap: never a spin
 * on one operation, never a drop. The queue is linked through the jobs'
 * op_context (free until the job is posted), so it costs no memory.
 *
 * Everything here belongs to one worker thread: its rails' endpoints, CQs,
 * AVs, queues and counters. The only shared reads are the peer table
 * (written once per peer, before its ready flag) and the registration
 * cache (lock-free lookups).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <batchpipe/error.h>

#include "src/rdma/rdma_internal.h"

/*
 * The pending FIFO is linked through op_context[0], which is ours only
 * while the job is queued: a job is taken off the queue before it is
 * posted, since the provider may write the context from then on (psm2
 * does). While queued, stage_word says whether prepare has run.
 */
#define JOB_NEXT(j) ((j)->hdr.op_context[0])
#define PREPARED    0xffffffffu

static void done_add(struct bpi_rdma_worker *ws, struct bp_worker *w,
		     struct bp_rdma_job *j)
{
	if (ws->direct) {
		/* run to completion: onto the caller's FIFO (direct.c) */
		JOB_NEXT(j) = NULL;
		*ws->done_tail = j;
		ws->done_tail = (struct bp_rdma_job **)&JOB_NEXT(j);
		return;
	}
	ws->done[ws->ndone++] = &j->hdr;
	if (ws->ndone == BPI_RDMA_DONE_CAP) {
		bp_worker_complete(w, ws->done, ws->ndone);
		ws->ndone = 0;
	}
}

static void done_flush(struct bpi_rdma_worker *ws, struct bp_worker *w)
{
	if (ws->ndone && !ws->direct) {
		bp_worker_complete(w, ws->done, ws->ndone);
		ws->ndone = 0;
	}
}

static void fail_job(struct bpi_rdma_worker *ws, struct bp_worker *w,
		     struct bpi_rail *rl, struct bp_rdma_job *j, int err)
{
	j->hdr.status = err;
	bpi_stat_add(&rl->st.failed, 1);
	done_add(ws, w, j);
}

/*
 * Around every call out of the stage's own code (provider calls, the
 * prepare callback): calls is odd while the worker is inside, site says
 * which. Three plain stores per call (release stores are plain on x86).
 * The stall watch (stall.c's look) reads calls, then site, then calls
 * again: the same count twice means the site is that call's.
 */
static inline void out_enter(struct bpi_rdma_worker *ws, enum bpi_site site)
{
	/* release: pairs with look()'s acquire of site: a site of the next
	 * call seen there means the count seen after it has moved on */
	atomic_store_explicit(&ws->site, (unsigned)site, memory_order_release);
	/* release: pairs with look()'s acquire of calls: the site is seen */
	atomic_store_explicit(
		&ws->calls,
		atomic_load_explicit(&ws->calls, memory_order_relaxed) + 1,
		memory_order_release);
}

static inline void out_leave(struct bpi_rdma_worker *ws)
{
	bpi_stat_add(&ws->calls, 1); /* even: back in the stage's code */
}

/* Jobs the stage refuses before any provider call. */
static int check_job(const struct bp_rdma *r, const struct bp_rdma_job *j)
{
	const struct bpi_peer *pe;
	int st;

	if (j->op < BP_RDMA_WRITE || j->op > BP_RDMA_WRITEDATA || !j->len ||
	    !j->buf || (j->flags & ~BP_RDMA_JOB_DELIVERED))
		return -EINVAL;
	if (j->rail != BP_RDMA_ANY_RAIL && j->rail >= r->cfg.rails)
		return -EINVAL;
	if (j->peer >= r->cfg.max_peers)
		return -EINVAL;
	pe = &r->peers[j->peer];
	/* acquire: pairs with bp_rdma_peer_add's release; desc, gen whole */
	st = atomic_load_explicit(&pe->state, memory_order_acquire);
	if (st == PEER_GONE)
		return -ECONNABORTED;
	if (st != PEER_READY)
		return -EINVAL;
	if (j->offset > pe->desc.len || j->len > pe->desc.len - j->offset)
		return -ERANGE;
	return 0;
}

static void pend_push(struct bpi_rail *rl, struct bp_rdma_job *j)
{
	JOB_NEXT(j) = NULL;
	j->hdr.stage_word = 0;
	*rl->tail = j;
	rl->tail = (struct bp_rdma_job **)&JOB_NEXT(j);
	rl->npend++;
	bpi_stat_max(&rl->st.pending_high, rl->npend);
}

static struct bp_rdma_job *pend_pop(struct bpi_rail *rl)
{
	struct bp_rdma_job *j = rl->pend;

	rl->pend = JOB_NEXT(j);
	if (!rl->pend)
		rl->tail = &rl->pend;
	rl->npend--;
	return j;
}

/* Put jobs[0..n) back at the head of the queue, in their order. */
static void pend_unpop(struct bpi_rail *rl, struct bp_rdma_job **jobs,
		       unsigned n)
{
	for (unsigned m = n; m-- > 0;) {
		JOB_NEXT(jobs[m]) = rl->pend;
		if (!rl->pend)
			rl->tail = (struct bp_rdma_job **)&JOB_NEXT(jobs[m]);
		rl->pend = jobs[m];
	}
	rl->npend += n;
}

/*
 * A peer given up on this rail (peer_timeout_ns) stays down for as long
 * again, so its jobs fail fast; after that it is tried anew. The clock is
 * read only for peers that are down.
 */
static bool peer_is_down_slow(const struct bp_rdma *r, struct bpi_rail *rl,
			      uint32_t peer)
{
	int64_t t0 = rl->peer_down[peer];

	if (!t0)
		return false;
	/*
	 * The down-state of an id taken again since (bp_rdma_peer_remove,
	 * then add) is the old peer's: not this one's. relaxed: as in
	 * peer_sync, which drops it when a job of the new peer is posted.
	 */
	if (rl->peer_gen[peer] !=
	    atomic_load_explicit(&r->peers[peer].gen, memory_order_relaxed))
		return false;
	if (rl->broken ||
	    (uint64_t)(bpi_now_ns() - t0) < r->cfg.peer_timeout_ns)
		return true;
	rl->peer_down[peer] = 0;
	return false;
}

/* The common case inline: a peer never given up on this rail. */
static inline bool peer_is_down(const struct bp_rdma *r, struct bpi_rail *rl,
				uint32_t peer)
{
	return rl->peer_down[peer] && peer_is_down_slow(r, rl, peer);
}

/*
 * A peer id taken again since this rail last used it (bp_rdma_peer_remove,
 * then bp_rdma_peer_add): drop the old peer's address and down-state.
 * One compare per job otherwise.
 */
static void peer_sync(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		      struct bpi_rail *rl, uint32_t peer)
{
	/* relaxed: ordered by check_job's acquire of the peer's state */
	uint32_t g =
		atomic_load_explicit(&r->peers[peer].gen, memory_order_relaxed);

	if (__builtin_expect(rl->peer_gen[peer] == g, 1))
		return;
	if (rl->peer_addr[peer] != FI_ADDR_NOTAVAIL) {
		out_enter(ws, SITE_AV_INSERT);
		fi_av_remove(rl->fab.av, &rl->peer_addr[peer], 1, 0);
		out_leave(ws);
	}
	rl->peer_addr[peer] = FI_ADDR_NOTAVAIL;
	rl->peer_down[peer] = 0;
	rl->peer_gen[peer] = g;
}

/* The peer's address in this rail's AV, inserted on first use. */
static int peer_addr_insert(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			    unsigned k, uint32_t peer, fi_addr_t *out)
{
	struct bpi_rail *rl = &ws->rails[k];
	const struct bp_rdma_peer_desc *d = &r->peers[peer].desc;
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int rc;

	out_enter(ws, SITE_AV_INSERT);
	rc = fi_av_insert(rl->fab.av, d->rail[k].addr, 1, &a, 0, NULL);
	out_leave(ws);
	if (rc != 1) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"rail %u: fi_av_insert of peer %u: %s", k, peer,
			fi_strerror(rc < 0 ? -rc : FI_EINVAL));
		return -EHOSTUNREACH;
	}
	rl->peer_addr[peer] = a;
	*out = a;
	return 0;
}

static inline int peer_addr(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			    unsigned k, uint32_t peer, fi_addr_t *out)
{
	fi_addr_t a = ws->rails[k].peer_addr[peer];

	if (__builtin_expect(a == FI_ADDR_NOTAVAIL, 0))
		return peer_addr_insert(r, ws, k, peer, out);
	*out = a;
	return 0;
}

/* The local descriptor for buf, registering it on first use. */
static int local_desc(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		      struct bpi_rail *rl, unsigned k,
		      const struct bp_rdma_job *j, void **desc)
{
	uintptr_t a = (uintptr_t)j->buf;
	const struct bpi_mr_entry *e = rl->last_mr;
	/* a reopened endpoint starts a new slot space (see reset_rail) */
	uint32_t slot = bpi_mr_slot(r, ws->id, k, rl->gen);

	if (!e || a < e->base || a + j->len > e->base + e->len) {
		e = bpi_mrcache_find(r->mrs, slot, a, j->len);
		if (!e) {
			long pg = sysconf(_SC_PAGESIZE);
			uintptr_t base = a & ~(uintptr_t)(pg - 1);
			uintptr_t end = (a + j->len + (uintptr_t)pg - 1) &
					~(uintptr_t)(pg - 1);
			struct fid_mr *mr;
			int rc;

			out_enter(ws, SITE_MR_REG);
			rc = bpi_fab_mr_reg(&rl->fab, (void *)base, end - base,
					    FI_READ | FI_WRITE, NULL, &r->log,
					    &mr);
			out_leave(ws);
			if (rc)
				return -EFAULT;
			rc = bpi_mrcache_add(r->mrs, slot, base, end - base, mr,
					     &e);
			if (rc) {
				out_enter(ws, SITE_CLOSE);
				fi_close(&mr->fid);
				out_leave(ws);
				return rc;
			}
			bpi_stat_add(&rl->st.mr_misses, 1);
		}
		rl->last_mr = e;
	}
	*desc = e->desc;
	return 0;
}

static void flight_add(const struct bp_rdma *r, struct bpi_rail *rl,
		       struct bp_rdma_job *j)
{
	uint32_t slot = rl->free_slot[r->cfg.credits - rl->inflight - 1];

	rl->flight[slot] = j;
	j->hdr.stage_word = slot;
	rl->inflight++;
}

static void flight_del(const struct bp_rdma *r, struct bpi_rail *rl,
		       struct bp_rdma_job *j)
{
	rl->flight[j->hdr.stage_word] = NULL;
	rl->inflight--;
	rl->free_slot[r->cfg.credits - rl->inflight - 1] = j->hdr.stage_word;
}

/*
 * Told gone by bp_rdma_peer_gone. relaxed: gone_look's acquire of the
 * epoch orders it; a job naming the id is of its present holder (the
 * caller removes an id only once it has had all its jobs back).
 */
static bool peer_gone(const struct bp_rdma *r, struct bpi_rail *rl,
		      uint32_t peer)
{
	(void)rl;
	return atomic_load_explicit(&r->peers[peer].state,
				    memory_order_relaxed) == PEER_GONE;
}

/* Fail the rail's queued jobs whose peer is_out says is out. */
static unsigned fail_queued(const struct bp_rdma *r, struct bpi_rdma_worker *ws,
			    struct bp_worker *w, struct bpi_rail *rl,
			    bool (*is_out)(const struct bp_rdma *,
					   struct bpi_rail *, uint32_t),
			    int err)
{
	struct bp_rdma_job **pp = &rl->pend;
	unsigned failed = 0;

	while (*pp) {
		struct bp_rdma_job *j = *pp;

		if (!is_out(r, rl, j->peer)) {
			pp = (struct bp_rdma_job **)&JOB_NEXT(j);
			continue;
		}
		*pp = JOB_NEXT(j);
		rl->npend--;
		fail_job(ws, w, rl, j, err);
		failed++;
	}
	rl->tail = pp;
	return failed;
}

/* Fail the rail's queued jobs whose peer is given up on this rail. */
static unsigned fail_queued_down(const struct bp_rdma *r,
				 struct bpi_rdma_worker *ws,
				 struct bp_worker *w, struct bpi_rail *rl,
				 int err)
{
	return fail_queued(r, ws, w, rl, peer_is_down_slow, err);
}

/* READY -> GONE, once; the workers look at their next pass (gone_look). */
bool bpi_rdma_mark_gone(struct bp_rdma *r, uint32_t peer)
{
	int st = PEER_READY;

	/* relaxed: published by the epoch's release increment below */
	if (!atomic_compare_exchange_strong_explicit(
		    &r->peers[peer].state, &st, PEER_GONE, memory_order_relaxed,
		    memory_order_relaxed))
		return false;
	/* release: pairs with gone_look's acquire: a worker that sees the
	 * new epoch sees the GONE state */
	atomic_fetch_add_explicit(&r->gone_epoch, 1, memory_order_release);
	return true;
}

/*
 * Has the process of a watched shm peer exited? One poll of its pidfd
 * (readable once it has exited, reaped or not); then the peer is given up
 * as if by bp_rdma_peer_gone. Asked only where a dead peer leads: a post
 * refused (stalled, with its clock) and operations that complete nothing
 * (check_quiet), never per post (a poll costs microseconds here).
 */
static bool peer_exited(struct bp_rdma *r, uint32_t peer)
{
	const struct bpi_peer *pe = &r->peers[peer];
	struct pollfd p = {.fd = pe->pidfd, .events = POLLIN};

	if (pe->pidfd < 0 || poll(&p, 1, 0) != 1)
		return false;
	if (bpi_rdma_mark_gone(r, peer))
		bpi_log(&r->log, BP_LOG_WARN,
			"peer %u: its process (pid %ld) has exited: given up "
			"at once, as if told by bp_rdma_peer_gone",
			peer, pe->pid);
	return true;
}

/*
 * The provider has refused the rail's head job with -FI_EAGAIN. Until
 * peer_timeout_ns that is back-pressure (or a connection being set up:
 * tens of ms on tcp); past it, the peer is taken for gone, since a dead
 * peer gets -FI_EAGAIN forever on tcp and shm and never an error. Its
 * queued jobs on this rail fail, and later ones fail fast.
 */
static void stalled(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		    struct bpi_rail *rl, unsigned k, struct bp_rdma_job *head,
		    struct bp_worker *w)
{
	int64_t t;
	unsigned failed;

	if (rl->eagain_since && (++rl->eagain_count & 63))
		return; /* the clock every 64th refusal */
	t = bpi_now_ns();
	if (peer_exited(r, head->peer))
		return; /* its jobs fail at the next pass (gone_look) */
	if (!rl->eagain_since) {
		rl->eagain_since = t;
		return;
	}
	if ((uint64_t)(t - rl->eagain_since) < r->cfg.peer_timeout_ns)
		return;
	rl->eagain_since = 0;
	rl->peer_down[head->peer] = t;
	failed = fail_queued_down(r, ws, w, rl, -ETIMEDOUT);
	bpi_log(&r->log, BP_LOG_ERROR,
		"worker %u rail %u: peer %u took nothing for %llu ms "
		"(-FI_EAGAIN): given up for as long again, %u queued jobs "
		"failed",
		ws->id, k, head->peer,
		(unsigned long long)(r->cfg.peer_timeout_ns / 1000000), failed);
}

/*
 * Take the next job off the rail's queue that is ready to post (prepared,
 * addressed, described) into ws->batch[n] and its address and descriptor
 * slots; a job that fails on the way is failed, and the next one tried.
 * False when the queue has nothing more.
 */
static bool gather_one(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		       struct bp_worker *w, unsigned k, unsigned n)
{
	struct bpi_rail *rl = &ws->rails[k];

	while (rl->pend) {
		struct bp_rdma_job *j = pend_pop(rl);
		int rc = 0;

		peer_sync(r, ws, rl, j->peer);
		if (rl->broken || rl->closed || peer_is_down(r, rl, j->peer))
			rc = -EHOSTUNREACH;
		else if (j->hdr.stage_word != PREPARED && r->cfg.prepare) {
			out_enter(ws, SITE_PREPARE);
			rc = r->cfg.prepare(r->cfg.prepare_ctx, j);
			out_leave(ws);
		}
		if (!rc)
			rc = peer_addr(r, ws, k, j->peer, &ws->baddr[n]);
		ws->bdesc[n] = NULL;
		if (!rc && r->mr_local)
			rc = local_desc(r, ws, rl, k, j, &ws->bdesc[n]);
		if (rc) {
			fail_job(ws, w, rl, j, rc);
			continue;
		}
		j->hdr.stage_word = PREPARED;
		ws->batch[n] = j;
		return true;
	}
	return false;
}

/*
 * Post from the rail's queue as far as credits and post_batch allow.
 *
 * One job ahead: before job i is posted, gather_one tries to ready job
 * i + 1, and job i carries FI_MORE exactly when it did, so no op is left
 * behind carrying FI_MORE because a later job failed before its post. A
 * prepare callback that generates the data (bp-target's fill) then
 * overlaps the transfer of the jobs before it, on a provider that starts
 * an op when it is posted (tcp does); one that starts a chain only at its
 * op without FI_MORE gains nothing. Before, the whole batch was prepared
 * first: bp-target's fill over tcp, 64 KiB pages, moved 1.75 GB/s, and
 * 2.2-3.1 GB/s one job ahead.
 */
static unsigned post(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		     struct bp_worker *w, unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];
	unsigned room = r->cfg.credits - rl->inflight;
	unsigned budget = room < r->cfg.post_batch ? room : r->cfg.post_batch;
	unsigned n = 0, posted = 0;

	if (rl->gone_inflight)
		return 0; /* the endpoint is to be reopened: see gone_settle */
	if (budget && gather_one(r, ws, w, k, 0))
		n = 1;

	for (unsigned i = 0; i < n; i++) {
		struct bp_rdma_job *j = ws->batch[i];
		const struct bp_rdma_peer_desc *d = &r->peers[j->peer].desc;
		struct iovec iov = {.iov_base = j->buf, .iov_len = j->len};
		struct fi_rma_iov rma = {
			.addr = d->rail[k].base + j->offset,
			.len = j->len,
			.key = d->rail[k].key,
		};
		struct fi_msg_rma msg = {
			.msg_iov = &iov,
			.desc = &ws->bdesc[i],
			.iov_count = 1,
			.addr = ws->baddr[i],
			.rma_iov = &rma,
			.rma_iov_count = 1,
			.context = j->hdr.op_context,
			.data = j->imm,
		};
		uint64_t flags = FI_COMPLETION;
		ssize_t rc;

		/* the next job first: FI_MORE says it follows at once */
		if (n == i + 1 && n < budget && gather_one(r, ws, w, k, n))
			n++;
		if (i + 1 < n)
			flags |= FI_MORE;
		if (j->op == BP_RDMA_WRITEDATA)
			flags |= FI_REMOTE_CQ_DATA;
		if ((j->flags & BP_RDMA_JOB_DELIVERED) &&
		    !r->completes_delivered)
			flags |= FI_DELIVERY_COMPLETE;
		if (j->op == BP_RDMA_READ) {
			out_enter(ws, SITE_READ);
			rc = fi_readmsg(rl->fab.ep, &msg, flags);
		} else {
			out_enter(ws, SITE_WRITE);
			rc = fi_writemsg(rl->fab.ep, &msg, flags);
		}
		out_leave(ws);
		if (rc == -FI_EAGAIN) {
			/* the rest goes back, in order, for the next pass:
			 * that pass posts again, so ops posted with FI_MORE
			 * are not left waiting */
			bpi_stat_add(&rl->st.eagain, 1);
			pend_unpop(rl, &ws->batch[i], n - i);
			stalled(r, ws, rl, k, j, w);
			break;
		}
		rl->eagain_since = 0;
		if (rc) {
			bpi_log(&r->log, BP_LOG_ERROR,
				"worker %u rail %u: post: %s", ws->id, k,
				fi_strerror((int)-rc));
			fail_job(ws, w, rl, j, bpi_fi_err((int)rc));
			continue;
		}
		flight_add(r, rl, j);
		posted++;
	}
	if (posted)
		bpi_stat_add(&rl->st.posted, posted);
	return posted;
}

static unsigned reap_bucket(ssize_t n)
{
	unsigned b = 0;

	while (n > 0 && b < BP_RDMA_REAP_BUCKETS - 1) {
		b++;
		n >>= 1;
	}
	return b; /* 0, 1, 2-3, 4-7, .. */
}

static struct bp_rdma_job *ctx_job(void *op_context)
{
	return (struct bp_rdma_job *)((char *)op_context -
				      offsetof(struct bp_rdma_job,
					       hdr.op_context));
}

/*
 * Read one error completion: that job fails, its text goes to the log.
 * Returns false when there was none after all.
 */
static bool reap_error(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		       struct bp_worker *w, unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];
	struct fi_cq_err_entry err = {0};
	char pbuf[256];
	const char *ptext;
	struct bp_rdma_job *j;
	int rc;

	out_enter(ws, SITE_CQ_READERR);
	rc = (int)fi_cq_readerr(rl->fab.cq, &err, 0);
	out_leave(ws);
	if (rc != 1 || !err.op_context)
		return false;
	j = ctx_job(err.op_context);
	out_enter(ws, SITE_CQ_READERR);
	ptext = fi_cq_strerror(rl->fab.cq, err.prov_errno, err.err_data, pbuf,
			       sizeof(pbuf));
	out_leave(ws);
	bpi_log(&r->log, BP_LOG_ERROR,
		"worker %u rail %u: %s of %zu bytes to peer %u failed: %s "
		"(%s)",
		ws->id, k,
		j->op == BP_RDMA_READ	 ? "read"
		: j->op == BP_RDMA_WRITE ? "write"
					 : "writedata",
		j->len, j->peer, fi_strerror(err.err), ptext);
	flight_del(r, rl, j);
	rc = err.err ? bpi_fi_err(abs(err.err)) : -EIO;
	/* the provider's "canceled" (a connection it dropped) is not the
	 * pipeline's abort: BP_JOB_CANCELLED means that alone */
	fail_job(ws, w, rl, j, rc == BP_JOB_CANCELLED ? -ECONNABORTED : rc);
	return true;
}

/*
 * A rail's endpoint, CQ and AV opened anew in the same domain (after
 * reset_rail closed them, or to replace them): a new slot space for the
 * registrations bound to it, no peer addresses yet. A rail that cannot be
 * opened is broken: its jobs fail fast (-EHOSTUNREACH).
 */
int bpi_rdma_rail_reopen(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			 unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];
	bool event = r->cfg.cq_wait == BP_RDMA_CQ_EVENT;
	int rc;

	if (event && !rl->closed)
		epoll_ctl(ws->epfd, EPOLL_CTL_DEL, rl->fab.cq_fd, NULL);
	out_enter(ws, SITE_REOPEN);
	rc = bpi_fab_reopen_ep(bpi_fab_rail_info(r->info, k),
			       r->cfg.credits + r->cfg.reap_batch,
			       r->cfg.max_peers, event, &r->log, &rl->fab);
	out_leave(ws);
	if (!rc && event) {
		struct epoll_event ev = {.events = EPOLLIN};

		if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, rl->fab.cq_fd, &ev))
			rc = -errno;
	}
	for (unsigned i = 0; i < r->cfg.max_peers; i++)
		rl->peer_addr[i] = FI_ADDR_NOTAVAIL;
	rl->broken = rc != 0; /* no endpoint: nothing goes any more */
	rl->closed = false;
	rl->last_mr = NULL;
	rl->gen++;
	rl->quiet_since = rl->eagain_since = 0;
	/* what the application registered, in the new slot space; a rail
	 * that cannot have it takes no jobs (they would miss it) */
	for (unsigned i = 0; !rc && i < r->nregs; i++)
		rc = bpi_rdma_rail_register(r, ws->id, k, &r->regs[i]);
	if (rc)
		rl->broken = true;
	return rc;
}

/* One registration of the application's on one rail, in its slot space. */
int bpi_rdma_rail_register(struct bp_rdma *r, unsigned id, unsigned k,
			   const struct bpi_user_reg *u)
{
	struct bpi_rail *rl = &r->workers[id].rails[k];
	struct fid_mr *mr;
	int rc = bpi_fab_mr_reg(&rl->fab, u->addr, u->len, FI_READ | FI_WRITE,
				u->has_mem ? &u->mem : NULL, &r->log, &mr);

	if (!rc)
		rc = bpi_mrcache_add(r->mrs, bpi_mr_slot(r, id, k, rl->gen),
				     (uintptr_t)u->addr, u->len, mr, NULL);
	return rc;
}

/* Why reset_rail gives up a rail's operations in flight. */
enum reset_why {
	RESET_QUIET, /* nothing completed for peer_timeout_ns */
	RESET_GONE,  /* only operations to peers told gone are left */
	RESET_ABORT, /* the pipeline aborts; nothing completed for a while */
};

/*
 * Operations in flight on a rail that complete nothing (for
 * peer_timeout_ns, or for BPI_RDMA_ABORT_QUIET_NS once the pipeline
 * aborts) will never complete: posted to a dead peer, shm keeps them
 * forever. Fail them (cancelled, in an abort: whether the bytes landed is
 * unknown), give up their peers on this rail unless it is an abort (and
 * the jobs queued for those), and close the rail's endpoint, CQ and AV, so
 * that no late completion can name a job already handed back. The
 * endpoint is opened again at once, except in an abort, which must not
 * wait for that (tens of ms on shm, which maps a new region): there the
 * next pipeline's worker opens it (rdma_init).
 */
static void reset_rail(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		       struct bp_worker *w, unsigned k, enum reset_why why)
{
	struct bpi_rail *rl = &ws->rails[k];
	unsigned stuck = rl->inflight, queued;
	int err = why == RESET_GONE    ? -ECONNABORTED
		  : why == RESET_ABORT ? BP_JOB_CANCELLED
				       : -ETIMEDOUT;
	int rc = 0;

	/*
	 * The endpoint goes first: until it is closed the provider owns the
	 * operations' contexts (hdr.op_context, FI_CONTEXT2), which the
	 * jobs' next owner may write (done_add's FIFO link, a sink that
	 * resubmits); after it, no completion can name them.
	 */
	if (why == RESET_ABORT) {
		if (r->cfg.cq_wait == BP_RDMA_CQ_EVENT)
			epoll_ctl(ws->epfd, EPOLL_CTL_DEL, rl->fab.cq_fd, NULL);
		out_enter(ws, SITE_CLOSE);
		bpi_fab_close_ep(&rl->fab);
		out_leave(ws);
		rl->closed = true;
		rl->quiet_since = rl->eagain_since = 0;
	} else {
		rc = bpi_rdma_rail_reopen(r, ws, k);
	}
	for (unsigned i = 0; i < r->cfg.credits; i++) {
		struct bp_rdma_job *j = rl->flight[i];

		if (!j)
			continue;
		rl->flight[i] = NULL;
		/* an abort says nothing of the peer: a later pipeline on
		 * this bp_rdma may write to it at once */
		if (why != RESET_ABORT)
			rl->peer_down[j->peer] = bpi_now_ns();
		fail_job(ws, w, rl, j, err);
	}
	rl->inflight = 0;
	rl->gone_inflight = 0;
	for (unsigned i = 0; i < r->cfg.credits; i++)
		rl->free_slot[i] = i;
	queued = fail_queued_down(r, ws, w, rl, -EHOSTUNREACH);
	if (why == RESET_ABORT)
		bpi_log(&r->log, BP_LOG_WARN,
			"worker %u rail %u: abort: %u operations in flight "
			"completed nothing for %u ms: cancelled (whether "
			"their bytes landed is unknown), endpoint closed",
			ws->id, k, stuck, BPI_RDMA_ABORT_QUIET_NS / 1000000);
	else if (why == RESET_GONE)
		bpi_log(&r->log, BP_LOG_WARN,
			"worker %u rail %u: %u operations in flight to peers "
			"told gone (bp_rdma_peer_gone), nothing else: failed, "
			"endpoint reopened%s%s",
			ws->id, k, stuck,
			rc ? " - FAILED, the rail takes no more jobs: " : "",
			rc ? bp_strerror(rc) : "");
	else
		bpi_log(&r->log, BP_LOG_ERROR,
			"worker %u rail %u: %u operations in flight, none "
			"completed for %llu ms: failed, their peers given up "
			"on this rail (%u queued jobs failed), endpoint "
			"reopened%s%s",
			ws->id, k, stuck,
			(unsigned long long)(r->cfg.peer_timeout_ns / 1000000),
			queued,
			rc ? " - FAILED, the rail takes no more jobs: " : "",
			rc ? bp_strerror(rc) : "");
	if (rc)
		fail_queued_down(r, ws, w, rl, -EHOSTUNREACH);
}

/*
 * Aborting, a rail with operations in flight that this pass reaped nothing
 * from: quiet since the abort (or since its last completion, whichever is
 * later) for BPI_RDMA_ABORT_QUIET_NS, its operations are cancelled. A
 * clock read per empty pass, in an abort only.
 */
static void abort_quiet(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			struct bp_worker *w, unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];
	int64_t t = bpi_now_ns(), since;

	if (!rl->quiet_since)
		rl->quiet_since = t;
	since = rl->quiet_since > ws->cancel_ns ? rl->quiet_since
						: ws->cancel_ns;
	if (t - since >= BPI_RDMA_ABORT_QUIET_NS)
		reset_rail(r, ws, w, k, RESET_ABORT);
}

/*
 * An empty read with operations in flight (every 256th): how long has it
 * been quiet? Has a watched peer of theirs exited (each distinct peer in
 * a run of the flight table, one poll each)?
 */
static void check_quiet(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			struct bp_worker *w, unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];
	int64_t t = bpi_now_ns();

	if (!rl->quiet_since) {
		rl->quiet_since = t;
		return;
	}
	if (r->watch_pids) {
		uint32_t last = UINT32_MAX;
		unsigned seen = 0;

		for (unsigned i = 0; i < r->cfg.credits && seen < rl->inflight;
		     i++) {
			const struct bp_rdma_job *j = rl->flight[i];

			if (!j)
				continue;
			seen++;
			if (j->peer != last)
				peer_exited(r, j->peer);
			last = j->peer;
		}
	}
	if ((uint64_t)(t - rl->quiet_since) >= r->cfg.peer_timeout_ns)
		reset_rail(r, ws, w, k, RESET_QUIET);
}

/* Of the rail's operations in flight, those to peers told gone. */
static unsigned count_gone(const struct bp_rdma *r, struct bpi_rail *rl)
{
	unsigned seen = 0, gone = 0;

	for (unsigned i = 0; i < r->cfg.credits && seen < rl->inflight; i++) {
		const struct bp_rdma_job *j = rl->flight[i];

		if (!j)
			continue;
		seen++;
		gone += peer_gone(r, rl, j->peer);
	}
	return gone;
}

/*
 * One load per pass: has bp_rdma_peer_gone told of a peer since the last
 * look? Then fail each rail's queued jobs for peers gone and count what is
 * in flight to them; such a rail posts nothing more (post) until
 * gone_settle finds them the only operations left.
 */
static void gone_look(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		      struct bp_worker *w)
{
	/* acquire: pairs with bp_rdma_peer_gone's release increment; the
	 * GONE states stored before it are seen */
	unsigned e = atomic_load_explicit(&r->gone_epoch, memory_order_acquire);

	if (__builtin_expect(e == ws->gone_seen, 1))
		return;
	ws->gone_seen = e;
	for (unsigned k = 0; k < r->cfg.rails; k++) {
		struct bpi_rail *rl = &ws->rails[k];

		fail_queued(r, ws, w, rl, peer_gone, -ECONNABORTED);
		rl->gone_inflight = count_gone(r, rl);
	}
}

/*
 * A rail holding operations to peers gone, after a reap: once they are all
 * that is in flight (the others completed; they may complete too, if the
 * peer was alive after all), nothing will come back for them: reopen the
 * endpoint at once instead of after peer_timeout_ns.
 */
static void gone_settle(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			struct bp_worker *w, unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];

	rl->gone_inflight = count_gone(r, rl);
	if (rl->gone_inflight && rl->gone_inflight == rl->inflight)
		reset_rail(r, ws, w, k, RESET_GONE);
}

/*
 * Reap one rail's CQ until it is empty or nothing is in flight. Not until
 * a read comes back short of B: providers cap a read below B (rxm at 32).
 * Returns jobs reaped.
 */
static unsigned reap(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		     struct bp_worker *w, unsigned k)
{
	struct bpi_rail *rl = &ws->rails[k];
	unsigned got = 0, B = r->cfg.reap_batch;

	/* bounded: a rail never has more than credits to reap */
	for (unsigned pass = 0; pass <= r->cfg.credits; pass++) {
		ssize_t n;

		out_enter(ws, SITE_CQ_READ);
		n = fi_cq_read(rl->fab.cq, rl->cqe, B);
		out_leave(ws);
		bpi_stat_add(&rl->st.cq_reads, 1);
		if (n == -FI_EAGAIN) {
			bpi_stat_add(&rl->st.cq_empty, 1);
			bpi_stat_add(&rl->st.reap_hist[0], 1);
			if (rl->inflight && !got && !(++rl->empty_reads & 255))
				check_quiet(r, ws, w, k);
			break;
		}
		if (n == -FI_EAVAIL) {
			if (!reap_error(r, ws, w, k))
				break;
			got++;
			continue;
		}
		if (n < 0) {
			bpi_log(&r->log, BP_LOG_ERROR,
				"worker %u rail %u: fi_cq_read: %s", ws->id, k,
				fi_strerror((int)-n));
			break;
		}
		bpi_stat_add(&rl->st.reap_hist[reap_bucket(n)], 1);
		for (ssize_t i = 0; i < n; i++) {
			struct bp_rdma_job *j = ctx_job(rl->cqe[i].op_context);

			flight_del(r, rl, j);
			j->hdr.status = BP_JOB_OK;
			done_add(ws, w, j);
		}
		bpi_stat_add(&rl->st.completed, (uint64_t)n);
		got += (unsigned)n;
		if (!rl->inflight)
			break;
	}
	if (got)
		rl->quiet_since = 0;
	return got;
}

/*
 * One sleep of at most ns in epoll: epoll_pwait2 (ns resolution), or,
 * where the kernel lacks it (before 5.11), epoll_wait with the time
 * rounded up to whole milliseconds.
 */
static int epoll_sleep(int epfd, struct epoll_event *ev, int max, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
			      .tv_nsec = (long)(ns % 1000000000)};
	int n = epoll_pwait2(epfd, ev, max, &ts, NULL);

	/* ENOSYS: an old kernel; EPERM: a seccomp filter that lacks it */
	if (n >= 0 || (errno != ENOSYS && errno != EPERM))
		return n;
	return epoll_wait(epfd, ev, max, (int)((ns + 999999) / 1000000));
}

/* How long one wait may last: cq_wait's step, cut to the caller's limit
 * (cap_ns, 0: none) and, aborting, to a quarter of the abort's quiet. */
static uint64_t wait_cap(const struct bpi_rdma_worker *ws, uint64_t ns,
			 uint64_t cap_ns)
{
	if (cap_ns && ns > cap_ns)
		ns = cap_ns;
	/* aborting: look at the clock often enough for abort_quiet */
	if (ws->cancel_ns && ns > BPI_RDMA_ABORT_QUIET_NS / 4)
		ns = BPI_RDMA_ABORT_QUIET_NS / 4;
	return ns;
}

/*
 * SPIN_SLEEP, past the spin (and EVENT, when the CQ fds do not block): one
 * sleep of the back-off, cut short by a job submitted meanwhile (the
 * intake fd, alone in set epfd).
 */
static void wait_backoff(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			 struct bp_worker *w, int epfd, uint64_t cap_ns)
{
	uint64_t ns = bpi_backoff_next(&ws->backoff, r->cfg.spin_ns,
				       r->cfg.sleep_max_ns);
	struct epoll_event ev;

	if (!ns)
		return;
	ns = wait_cap(ws, ns, cap_ns);
	if (ws->intake_fd < 0 || epfd < 0) {
		struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
				      .tv_nsec = (long)(ns % 1000000000)};

		nanosleep(&ts, NULL);
		return;
	}
	if (bp_worker_intake_arm(w))
		return; /* jobs to take: no sleep */
	epoll_sleep(epfd, &ev, 1, ns);
	bp_worker_intake_disarm(w);
}

/*
 * EVENT: sleep on the CQs' wait fds, if every busy rail agrees to, and on
 * the pipeline's intake fd: a job submitted meanwhile wakes the worker to
 * post it, instead of waiting for a completion or event_timeout_ns.
 */
static void wait_event(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		       struct bp_worker *w, uint64_t cap_ns)
{
	struct epoll_event ev[BP_RDMA_MAX_RAILS + 1];
	uint64_t ns = wait_cap(ws, r->cfg.event_timeout_ns, cap_ns);
	int n;

	if (ws->empty_waits > 2) {
		/* the CQ fds did not block: back off, intake still wakes */
		wait_backoff(r, ws, w, ws->idle_epfd,
			     cap_ns && cap_ns < r->cfg.event_timeout_ns
				     ? cap_ns
				     : r->cfg.event_timeout_ns);
		return;
	}
	if (ws->intake_fd >= 0 && bp_worker_intake_arm(w))
		return; /* jobs to take: no sleep */
	for (unsigned k = 0; k < r->cfg.rails; k++) {
		struct bpi_rail *rl = &ws->rails[k];
		struct fid *fid = &rl->fab.cq->fid;
		int rc;

		if (!rl->inflight)
			continue;
		out_enter(ws, SITE_TRYWAIT);
		rc = fi_trywait(rl->fab.fabric, &fid, 1);
		out_leave(ws);
		/* not FI_SUCCESS: completions are there, or the provider must
		 * make progress first: poll again instead of sleeping (if the
		 * pass after it moves nothing, that was a wait that did not
		 * block) */
		if (rc != FI_SUCCESS) {
			ws->empty_waits++;
			bp_worker_intake_disarm(w);
			return;
		}
	}
	n = epoll_sleep(ws->epfd, ev, BP_RDMA_MAX_RAILS + 1, ns);
	/* a CQ fd said ready (its events carry data 0, the intake fd's its
	 * number): if the next pass reaps nothing, the fd did not block */
	for (int i = 0; i < n; i++)
		if (ev[i].data.fd != ws->intake_fd) {
			ws->empty_waits++;
			break;
		}
	bp_worker_intake_disarm(w);
}

/* ------------------------------------------------------ stage callbacks */

/*
 * The pipeline's intake fd into the worker's epoll set (SPIN_SLEEP and
 * EVENT), so that its sleeps end for new jobs too. Without it (no fd,
 * logged) the worker sleeps as before: intake then waits for the sleep.
 */
static void intake_add(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		       struct bp_worker *w)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	int fd;

	ws->intake_fd = -1;
	if (ws->epfd < 0)
		return;
	fd = bp_worker_intake_fd(w);
	ev.data.fd = fd;
	if (fd < 0 || epoll_ctl(ws->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		bpi_log(&r->log, BP_LOG_WARN,
			"worker %u: no intake fd (%s): new jobs wait for the "
			"end of each completion wait",
			ws->id, bp_strerror(fd < 0 ? fd : -errno));
		return;
	}
	if (ws->idle_epfd >= 0 &&
	    epoll_ctl(ws->idle_epfd, EPOLL_CTL_ADD, fd, &ev)) {
		epoll_ctl(ws->epfd, EPOLL_CTL_DEL, fd, NULL);
		bpi_log(&r->log, BP_LOG_WARN,
			"worker %u: no intake fd (%s): new jobs wait for the "
			"end of each completion wait",
			ws->id, bp_strerror(-errno));
		return;
	}
	ws->intake_fd = fd;
}

/*
 * A slot taken by a worker or a direct handle: no abort pending, and the
 * endpoints an abort before closed (or that could not be reopened) are
 * opened again.
 */
void bpi_rdma_slot_start(struct bp_rdma *r, struct bpi_rdma_worker *ws)
{
	ws->cancel_ns = 0;
	for (unsigned k = 0; k < r->cfg.rails; k++)
		if ((ws->rails[k].closed || ws->rails[k].broken) &&
		    bpi_rdma_rail_reopen(r, ws, k))
			bpi_log(&r->log, BP_LOG_ERROR,
				"worker %u rail %u: the endpoint closed by an "
				"abort, or lost, could not be opened again: "
				"the rail takes no jobs",
				ws->id, k);
}

static int rdma_init(struct bp_worker *w, void **state)
{
	struct bp_rdma *r = bp_worker_stage_ctx(w);
	unsigned id = bp_worker_id(w);
	int free_slot = BPI_OWNER_NONE;

	if (!r || r->magic != BPI_RDMA_MAGIC)
		return -EINVAL; /* stage_ctx must be the struct bp_rdma */
	if (id >= r->cfg.workers) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"worker %u: the pipeline has more workers than "
			"bp_rdma_config.workers (%u)",
			id, r->cfg.workers);
		return -EINVAL;
	}
	/* acq_rel: the slot's state is the last owner's, whole */
	if (!atomic_compare_exchange_strong_explicit(
		    &r->workers[id].owner, &free_slot, BPI_OWNER_WORKER,
		    memory_order_acq_rel, memory_order_acquire)) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"worker %u: its slot of the stage is in use (%s)", id,
			free_slot == BPI_OWNER_DIRECT
				? "a bp_rdma_direct handle"
				: "another pipeline's worker");
		return -EBUSY;
	}
	if (r->cfg.pin == BP_RDMA_PIN_RAIL_LOCAL)
		bpi_pin_rail_local(bpi_fab_rail_info(r->info, 0), id,
				   r->cfg.fallback_cpus, r->cfg.n_fallback_cpus,
				   &r->log);
	bpi_rdma_slot_start(r, &r->workers[id]);
	intake_add(r, &r->workers[id], w);
	*state = &r->workers[id];
	return 0;
}

static void rdma_fini(void *state, struct bp_worker *w)
{
	struct bpi_rdma_worker *ws = state;

	/* the fd is the pipeline's, the set outlives it */
	if (ws->intake_fd >= 0) {
		epoll_ctl(ws->epfd, EPOLL_CTL_DEL, ws->intake_fd, NULL);
		if (ws->idle_epfd >= 0)
			epoll_ctl(ws->idle_epfd, EPOLL_CTL_DEL, ws->intake_fd,
				  NULL);
	}
	ws->intake_fd = -1;
	/* release: the next owner's acquire sees the slot as left here */
	atomic_store_explicit(&ws->owner, BPI_OWNER_NONE, memory_order_release);
}

/*
 * Jobs in: each checked, queued on its rail (or failed), then every rail
 * with a queue posts. The completed and failed jobs go to done_add.
 */
void bpi_rdma_take(struct bpi_rdma_worker *ws, struct bp_worker *w,
		   struct bp_rdma_job *const *jobs, unsigned n)
{
	struct bp_rdma *r = ws->r;
	unsigned rails = r->cfg.rails;

	gone_look(r, ws, w);
	for (unsigned i = 0; i < n; i++) {
		struct bp_rdma_job *j = jobs[i];
		int rc = check_job(r, j);
		unsigned k;

		if (j->rail != BP_RDMA_ANY_RAIL && j->rail < rails) {
			k = j->rail;
		} else {
			k = ws->next_rail;
			ws->next_rail = k + 1 == rails ? 0 : k + 1;
		}
		if (rc)
			fail_job(ws, w, &ws->rails[k], j, rc);
		else
			pend_push(&ws->rails[k], j);
	}
	for (unsigned k = 0; k < rails; k++)
		if (ws->rails[k].pend)
			post(r, ws, w, k);
}

static void rdma_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			 unsigned n)
{
	struct bpi_rdma_worker *ws = state;

	/* a bp_rdma_job begins with its bp_job (hdr is its first member) */
	bpi_rdma_take(ws, w, (struct bp_rdma_job *const *)jobs, n);
	done_flush(ws, w);
}

/*
 * One pass over the busy rails: reap, settle, post. Returns the jobs that
 * moved (reaped or posted); *busy: rails with work left before the pass.
 */
unsigned bpi_rdma_pass(struct bpi_rdma_worker *ws, struct bp_worker *w,
		       unsigned *busy_out)
{
	struct bp_rdma *r = ws->r;
	unsigned got = 0, busy = 0, reaped;

	gone_look(r, ws, w);
	for (unsigned k = 0; k < r->cfg.rails; k++) {
		struct bpi_rail *rl = &ws->rails[k];

		if (!rl->inflight && !rl->pend)
			continue;
		busy++;
		/* a rail with only queued jobs still reads: the provider
		 * makes its progress (and frees room) inside fi_cq_read */
		reaped = reap(r, ws, w, k);
		got += reaped;
		if (rl->gone_inflight)
			gone_settle(r, ws, w, k);
		if (ws->cancel_ns && rl->inflight && !reaped)
			abort_quiet(r, ws, w, k);
		if (rl->pend)
			got += post(r, ws, w, k);
	}
	*busy_out = busy;
	return got;
}

/* A pass moved jobs: the waits start over (spin first, the CQ fds). */
void bpi_rdma_moved(struct bpi_rdma_worker *ws)
{
	bpi_backoff_reset(&ws->backoff);
	ws->empty_waits = 0;
}

/*
 * After a pass that moved nothing with work left: wait as cq_wait says,
 * one wait of at most cap_ns (0: no limit but cq_wait's own).
 */
void bpi_rdma_wait(struct bpi_rdma_worker *ws, struct bp_worker *w,
		   uint64_t cap_ns)
{
	struct bp_rdma *r = ws->r;

	if (r->cfg.cq_wait == BP_RDMA_CQ_SPIN_SLEEP)
		wait_backoff(r, ws, w, ws->epfd, cap_ns);
	else if (r->cfg.cq_wait == BP_RDMA_CQ_EVENT)
		wait_event(r, ws, w, cap_ns);
}

static void rdma_poll(void *state, struct bp_worker *w)
{
	struct bpi_rdma_worker *ws = state;
	unsigned busy, got = bpi_rdma_pass(ws, w, &busy);

	done_flush(ws, w);
	if (got || !busy) {
		bpi_rdma_moved(ws);
		return;
	}
	bpi_rdma_wait(ws, w, 0);
}

/*
 * Queued jobs complete as cancelled; posted ones get
 * BPI_RDMA_ABORT_QUIET_NS of quiet before they are (bpi_rdma_pass).
 */
void bpi_rdma_cancel(struct bpi_rdma_worker *ws, struct bp_worker *w)
{
	for (unsigned k = 0; k < ws->r->cfg.rails; k++) {
		struct bpi_rail *rl = &ws->rails[k];

		while (rl->pend) {
			struct bp_rdma_job *j = pend_pop(rl);

			j->hdr.status = BP_JOB_CANCELLED;
			done_add(ws, w, j);
		}
	}
	ws->cancel_ns = bpi_now_ns();
}

static void rdma_cancel(void *state, struct bp_worker *w)
{
	bpi_rdma_cancel(state, w);
	done_flush(state, w);
}

static int rdma_stats_json(void *ctx, char *buf, size_t size)
{
	return bp_rdma_stats_json(ctx, buf, size);
}

/* The stage table bp_rdma_create copies (its ctx set to the struct bp_rdma). */
const struct bp_stage bpi_rdma_stage_ops = {
	.name = "rdma",
	.init = rdma_init,
	.process = rdma_process,
	.poll = rdma_poll,
	.cancel = rdma_cancel,
	.fini = rdma_fini,
	.stats_json = rdma_stats_json,
	.stall_report = bpi_rdma_stall_report,
};
