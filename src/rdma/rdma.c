/* SPDX-License-Identifier: MIT */
/*
 * A struct bp_rdma's life and its tables: config defaults and checks,
 * create (one fabric, domain, endpoint, CQ and AV per worker and rail),
 * the peer table (add, remove, gone), memory registration, destroy. What
 * its workers do with jobs is src/rdma/stage.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <batchpipe/error.h>

#include "src/rdma/rdma_internal.h"

void bp_rdma_config_init(struct bp_rdma_config *c)
{
	memset(c, 0, sizeof(*c));
	c->workers = 1;
	c->rails = 1;
	c->credits = 64;
	c->post_batch = 16;
	c->reap_batch = 16;
	c->max_peers = 64;
	c->cq_wait = BP_RDMA_CQ_SPIN_SLEEP;
	c->spin_ns = 50000;
	c->sleep_max_ns = 200000;
	c->event_timeout_ns = 1000000;
	c->peer_timeout_ns = 5000000000ull;
}

static int invalid(const struct bp_rdma_config *c, const char *what)
{
	struct bpi_logger l = {c->log, c->log_ctx};

	bpi_log(&l, BP_LOG_ERROR, "bp_rdma_create: invalid %s", what);
	return -EINVAL;
}

static int check_config(const struct bp_rdma_config *c)
{
	if (c->workers < 1 || c->workers > BP_MAX_WORKERS)
		return invalid(c, "workers (1..256)");
	if (c->rails < 1 || c->rails > BP_RDMA_MAX_RAILS)
		return invalid(c, "rails (1..8)");
	if (c->credits < 1 || c->credits > 65536)
		return invalid(c, "credits (1..65536)");
	if (c->post_batch < 1 || c->post_batch > 4096)
		return invalid(c, "post_batch (1..4096)");
	if (c->reap_batch < 1 || c->reap_batch > 1024)
		return invalid(c, "reap_batch (1..1024)");
	if (c->max_peers < 1 || c->max_peers > 65536)
		return invalid(c, "max_peers (1..65536)");
	if (c->cq_wait > BP_RDMA_CQ_AUTO)
		return invalid(c, "cq_wait");
	/* EVENT backs off with it too, where the CQ fds do not block */
	if (c->cq_wait != BP_RDMA_CQ_BUSY &&
	    (c->sleep_max_ns < 1000 || c->sleep_max_ns > 1000000000))
		return invalid(c, "sleep_max_ns (1 us .. 1 s)");
	if ((c->cq_wait == BP_RDMA_CQ_EVENT || c->cq_wait == BP_RDMA_CQ_AUTO) &&
	    (c->event_timeout_ns < 1000 || c->event_timeout_ns > 10000000000))
		return invalid(c, "event_timeout_ns (1 us .. 10 s)");
	if (c->peer_timeout_ns < 1000000)
		return invalid(c, "peer_timeout_ns (>= 1 ms)");
	if (c->pin > BP_RDMA_PIN_RAIL_LOCAL)
		return invalid(c, "pin");
	if (c->n_fallback_cpus && !c->fallback_cpus)
		return invalid(c, "fallback_cpus (NULL with n_fallback_cpus)");
	for (unsigned i = 0; i < c->n_fallback_cpus; i++)
		if (c->fallback_cpus[i] < 0 ||
		    c->fallback_cpus[i] >= CPU_SETSIZE)
			return invalid(c, "fallback_cpus entry");
	return 0;
}

static int open_worker(struct bp_rdma *r, struct bpi_rdma_worker *ws,
		       unsigned id)
{
	const struct bp_rdma_config *c = &r->cfg;
	bool event = c->cq_wait == BP_RDMA_CQ_EVENT;
	int rc;

	ws->r = r;
	ws->id = id;
	ws->epfd = -1;
	ws->idle_epfd = -1;
	ws->intake_fd = -1;
	bpi_backoff_reset(&ws->backoff);
	ws->done = calloc(BPI_RDMA_DONE_CAP, sizeof(*ws->done));
	ws->batch = calloc(c->post_batch, sizeof(*ws->batch));
	ws->baddr = calloc(c->post_batch, sizeof(*ws->baddr));
	ws->bdesc = calloc(c->post_batch, sizeof(*ws->bdesc));
	if (!ws->done || !ws->batch || !ws->baddr || !ws->bdesc)
		return -ENOMEM;
	if (event || c->cq_wait == BP_RDMA_CQ_SPIN_SLEEP) {
		ws->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (ws->epfd < 0)
			return -errno;
	}
	if (event) {
		ws->idle_epfd = epoll_create1(EPOLL_CLOEXEC);
		if (ws->idle_epfd < 0)
			return -errno;
	}
	for (unsigned k = 0; k < c->rails; k++) {
		struct bpi_rail *rl = &ws->rails[k];

		rl->tail = &rl->pend;
		rl->peer_addr = malloc(c->max_peers * sizeof(fi_addr_t));
		rl->peer_down = calloc(c->max_peers, sizeof(*rl->peer_down));
		rl->peer_gen = calloc(c->max_peers, sizeof(*rl->peer_gen));
		rl->cqe = calloc(c->reap_batch, sizeof(*rl->cqe));
		rl->flight = calloc(c->credits, sizeof(*rl->flight));
		rl->free_slot = malloc(c->credits * sizeof(*rl->free_slot));
		if (!rl->peer_addr || !rl->peer_down || !rl->peer_gen ||
		    !rl->cqe || !rl->flight || !rl->free_slot)
			return -ENOMEM;
		for (unsigned i = 0; i < c->credits; i++)
			rl->free_slot[i] = i;
		for (unsigned i = 0; i < c->max_peers; i++)
			rl->peer_addr[i] = FI_ADDR_NOTAVAIL;
		rc = bpi_fab_open(bpi_fab_rail_info(r->info, k),
				  c->credits + c->reap_batch, c->max_peers,
				  event, &r->log, &rl->fab);
		if (rc && event && (rc == -ENOSYS || rc == -EOPNOTSUPP))
			return -EOPNOTSUPP; /* no wait object */
		if (rc)
			return rc;
		if (event) {
			struct epoll_event ev = {.events = EPOLLIN};

			if (epoll_ctl(ws->epfd, EPOLL_CTL_ADD, rl->fab.cq_fd,
				      &ev))
				return -errno;
		}
	}
	return 0;
}

int bp_rdma_create(const struct bp_rdma_config *c, struct bp_rdma **out)
{
	struct bpi_fab_want want = {0};
	struct bp_rdma *r;
	size_t tx;
	int rc;

	if (!c || !out)
		return -EINVAL;
	rc = check_config(c);
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->magic = BPI_RDMA_MAGIC;
	r->cfg = *c;
	r->log = (struct bpi_logger){c->log, c->log_ctx};
	r->cfg.provider = NULL; /* not kept: the caller's strings */
	r->cfg.node = NULL;
	r->cfg.fallback_cpus = NULL; /* our copy below, if any */
	if (c->n_fallback_cpus) {
		int *cpus = malloc(c->n_fallback_cpus * sizeof(int));

		if (!cpus) {
			free(r);
			return -ENOMEM;
		}
		memcpy(cpus, c->fallback_cpus,
		       c->n_fallback_cpus * sizeof(int));
		r->cfg.fallback_cpus = cpus;
	}
	pthread_mutex_init(&r->stall_lock, NULL); /* bp_rdma_destroy's */
	want.provider = c->provider;
	want.node = c->node;
	want.hmem = c->hmem;
	rc = bpi_fab_getinfo(&want, &r->log, &r->info);
	if (rc)
		goto fail;
	snprintf(r->provider, sizeof(r->provider), "%s",
		 r->info->fabric_attr->prov_name);
	r->mr_local = r->info->domain_attr->mr_mode & FI_MR_LOCAL;
	r->cfg.cq_wait = bpi_fab_resolve_wait(c->cq_wait, r->info, &r->log);
	/* shm copies the data into the target before it completes a write;
	 * FI_DELIVERY_COMPLETE there adds nothing, and a write it fails
	 * (a bad key) then never completes and blocks the endpoint */
	r->completes_delivered = !strcmp(r->provider, "shm");
	r->watch_pids = !strcmp(r->provider, "shm");
	tx = r->info->tx_attr->size;
	if (tx && r->cfg.credits > tx) {
		bpi_log(&r->log, BP_LOG_INFO,
			"%s: credits %u cut to the transmit queue size %zu",
			r->provider, r->cfg.credits, tx);
		r->cfg.credits = (unsigned)tx;
	}
	r->peers = calloc(c->max_peers, sizeof(*r->peers));
	r->workers = aligned_alloc(BP_FALSE_SHARING,
				   c->workers * sizeof(*r->workers));
	rc = -ENOMEM;
	if (!r->peers || !r->workers)
		goto fail;
	memset(r->workers, 0, c->workers * sizeof(*r->workers));
	for (unsigned i = 0; i < c->workers; i++)
		r->workers[i].epfd = r->workers[i].idle_epfd = -1;
	rc = bpi_mrcache_create(&r->mrs);
	if (rc)
		goto fail;
	for (unsigned i = 0; i < c->workers; i++) {
		rc = open_worker(r, &r->workers[i], i);
		if (rc == -EOPNOTSUPP)
			bpi_log(&r->log, BP_LOG_ERROR,
				"bp_rdma_create: provider %s has no completion "
				"wait object (FI_WAIT_FD): cq_wait EVENT is "
				"not possible, use SPIN_SLEEP or BUSY",
				r->provider);
		if (rc)
			goto fail;
	}
	r->stage = bpi_rdma_stage_ops;
	r->stage.ctx = r; /* a pipeline config without stage_ctx gets r */
	*out = r;
	return 0;
fail:
	bp_rdma_destroy(r);
	return rc;
}

const struct bp_stage *bp_rdma_stage(const struct bp_rdma *r)
{
	return r ? &r->stage : NULL;
}

const char *bp_rdma_provider(const struct bp_rdma *r)
{
	return r ? r->provider : NULL;
}

unsigned bp_rdma_rails(const struct bp_rdma *r)
{
	return r ? r->cfg.rails : 0;
}

/* Take a free peer slot for writing its desc. */
static bool claim_peer(struct bpi_peer *pe)
{
	int fr = PEER_FREE;

	/* acquire: the removal (and the workers' last use) come before */
	return atomic_compare_exchange_strong_explicit(
		&pe->state, &fr, PEER_CLAIMD, memory_order_acquire,
		memory_order_relaxed);
}

int bp_rdma_peer_add(struct bp_rdma *r, const struct bp_rdma_peer_desc *d)
{
	unsigned n;

	if (!r || !d || d->rails != r->cfg.rails || !d->len)
		return -EINVAL;
	for (unsigned k = 0; k < d->rails; k++)
		if (!d->rail[k].addrlen ||
		    d->rail[k].addrlen > BP_RDMA_ADDR_MAX)
			return -EINVAL;
	/* a removed slot first: the ids stay below max_peers */
	for (;;) {
		/* relaxed: a slot is owned through its state's CAS below */
		unsigned top =
			atomic_load_explicit(&r->npeers, memory_order_relaxed);

		n = 0;
		while (n < top && !claim_peer(&r->peers[n]))
			n++;
		if (n < top)
			break;
		if (top >= r->cfg.max_peers)
			return -ENOSPC;
		/* a fresh slot; another add may take it first (above) */
		if (atomic_compare_exchange_weak_explicit(
			    &r->npeers, &top, top + 1, memory_order_relaxed,
			    memory_order_relaxed) &&
		    claim_peer(&r->peers[top])) {
			n = top;
			break;
		}
	}
	r->peers[n].desc = *d;
	r->peers[n].pid = r->watch_pids ? bpi_shm_addr_pid(d->rail[0].addr,
							   d->rail[0].addrlen)
					: -1;
	r->peers[n].pidfd = -1;
#ifdef SYS_pidfd_open
	if (r->peers[n].pid > 0 && r->peers[n].pid != (long)getpid())
		r->peers[n].pidfd =
			(int)syscall(SYS_pidfd_open, (pid_t)r->peers[n].pid, 0);
#endif
	/* relaxed: published by the release below */
	atomic_store_explicit(
		&r->peers[n].gen,
		atomic_load_explicit(&r->peers[n].gen, memory_order_relaxed) +
			1,
		memory_order_relaxed);
	/* release: pairs with check_job's acquire; the worker sees desc */
	atomic_store_explicit(&r->peers[n].state, PEER_READY,
			      memory_order_release);
	return (int)n;
}

int bp_rdma_peer_remove(struct bp_rdma *r, int id)
{
	int st = PEER_READY, fd;

	if (!r || id < 0 || (unsigned)id >= r->cfg.max_peers)
		return -EINVAL;
	/* read before the slot can be taken again; closed once it is ours
	 * to give back (no job of the peer is left to poll it) */
	fd = r->peers[id].pidfd;
	/*
	 * release: pairs with claim_peer's acquire, so a later add writes
	 * desc after whatever this thread saw of the peer's last jobs (the
	 * caller knows none is left: it has had them all back). A peer told
	 * gone is removed the same way.
	 */
	if (!atomic_compare_exchange_strong_explicit(
		    &r->peers[id].state, &st, PEER_FREE, memory_order_release,
		    memory_order_relaxed) &&
	    (st != PEER_GONE ||
	     !atomic_compare_exchange_strong_explicit(
		     &r->peers[id].state, &st, PEER_FREE, memory_order_release,
		     memory_order_relaxed)))
		return -EINVAL;
	if (fd >= 0)
		close(fd);
	return 0;
}

int bp_rdma_peer_gone(struct bp_rdma *r, int id)
{
	int st;

	if (!r || id < 0 || (unsigned)id >= r->cfg.max_peers)
		return -EINVAL;
	if (bpi_rdma_mark_gone(r, (uint32_t)id))
		return 0;
	/* relaxed: whether it is in use at all */
	st = atomic_load_explicit(&r->peers[id].state, memory_order_relaxed);
	return st == PEER_GONE ? 0 : -EINVAL;
}

/* Give back the slots [0, n) bp_rdma_register took. */
static void register_release(struct bp_rdma *r, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		/* release: the next owner's acquire sees what was done */
		atomic_store_explicit(&r->workers[i].owner, BPI_OWNER_NONE,
				      memory_order_release);
}

int bp_rdma_register(struct bp_rdma *r, void *addr, size_t len,
		     const struct bp_rdma_mem *mem)
{
	struct bpi_user_reg u = {.addr = addr, .len = len};
	int rc = 0;

	if (!r || !addr || !len ||
	    (mem && mem->iface != BP_RDMA_MEM_SYSTEM &&
	     mem->iface != BP_RDMA_MEM_CUDA))
		return -EINVAL;
	if (mem && mem->iface == BP_RDMA_MEM_CUDA && !r->cfg.hmem) {
		bpi_log(&r->log, BP_LOG_ERROR,
			"bp_rdma_register: device memory needs a stage "
			"created with hmem (FI_HMEM)");
		return -EOPNOTSUPP;
	}
	/*
	 * Every slot, for the call: a pipeline's worker or a direct handle
	 * taking one meanwhile gets -EBUSY instead of sharing its rails.
	 */
	for (unsigned i = 0; i < r->cfg.workers; i++) {
		int free_slot = BPI_OWNER_NONE;

		/* acq_rel: the slot's state is its last owner's, whole */
		if (!atomic_compare_exchange_strong_explicit(
			    &r->workers[i].owner, &free_slot,
			    BPI_OWNER_REGISTER, memory_order_acq_rel,
			    memory_order_acquire)) {
			register_release(r, i);
			bpi_log(&r->log, BP_LOG_ERROR,
				"bp_rdma_register: worker slot %u is in use "
				"(%s owns its domains): register before "
				"bp_pipeline_start or bp_rdma_direct_open, or "
				"pass buffers as they are (the registration "
				"cache takes them)",
				i,
				free_slot == BPI_OWNER_DIRECT
					? "a bp_rdma_direct handle"
				: free_slot == BPI_OWNER_WORKER
					? "a running pipeline's worker"
					: "another bp_rdma_register");
			return -EBUSY;
		}
	}
	if (!r->mr_local && (!mem || mem->iface == BP_RDMA_MEM_SYSTEM)) {
		register_release(r, r->cfg.workers);
		return 0; /* the provider wants no local descriptors */
	}
	if (mem) {
		u.has_mem = true;
		u.mem = *mem;
	}
	if (r->nregs == r->regs_cap) {
		unsigned cap = r->regs_cap ? 2 * r->regs_cap : 8;
		struct bpi_user_reg *n = realloc(r->regs, cap * sizeof(*n));

		if (!n) {
			register_release(r, r->cfg.workers);
			return -ENOMEM;
		}
		r->regs = n;
		r->regs_cap = cap;
	}
	for (unsigned i = 0; !rc && i < r->cfg.workers; i++)
		for (unsigned k = 0; !rc && k < r->cfg.rails; k++) {
			struct bpi_rail *rl = &r->workers[i].rails[k];

			/* closed by an abort, or lost: opening it registers
			 * what came before; this one follows */
			if (rl->closed || rl->broken)
				rc = bpi_rdma_rail_reopen(r, &r->workers[i], k);
			if (!rc)
				rc = bpi_rdma_rail_register(r, i, k, &u);
		}
	if (!rc)
		r->regs[r->nregs++] = u; /* a rail opened anew registers it */
	register_release(r, r->cfg.workers);
	return rc;
}

void bp_rdma_destroy(struct bp_rdma *r)
{
	if (!r)
		return;
	for (unsigned i = 0; r->workers && i < r->cfg.workers; i++)
		/* acquire: pairs with the owners' release at their end */
		if (atomic_load_explicit(&r->workers[i].owner,
					 memory_order_acquire) !=
		    BPI_OWNER_NONE)
			bpi_log(&r->log, BP_LOG_ERROR,
				"bp_rdma_destroy: worker slot %u is still "
				"owned (a running pipeline's worker or an "
				"open bp_rdma_direct handle): destroy the "
				"pipeline, close the handle first; freeing "
				"anyway",
				i);
	/* registrations first: they belong to the domains closed below */
	bpi_mrcache_destroy(r->mrs);
	if (r->workers) {
		for (unsigned i = 0; i < r->cfg.workers; i++) {
			struct bpi_rdma_worker *ws = &r->workers[i];

			for (unsigned k = 0; k < r->cfg.rails; k++) {
				bpi_fab_close(&ws->rails[k].fab);
				free(ws->rails[k].peer_addr);
				free(ws->rails[k].peer_down);
				free(ws->rails[k].peer_gen);
				free(ws->rails[k].flight);
				free(ws->rails[k].free_slot);
				free(ws->rails[k].cqe);
			}
			if (ws->epfd >= 0)
				close(ws->epfd);
			if (ws->idle_epfd >= 0)
				close(ws->idle_epfd);
			free(ws->done);
			free(ws->batch);
			free(ws->baddr);
			free(ws->bdesc);
		}
		free(r->workers);
	}
	/* relaxed: the workers are gone; only this thread is left */
	for (unsigned i = 0;
	     r->peers &&
	     i < atomic_load_explicit(&r->npeers, memory_order_relaxed);
	     i++)
		if (atomic_load_explicit(&r->peers[i].state,
					 memory_order_relaxed) != PEER_FREE &&
		    r->peers[i].pidfd >= 0)
			close(r->peers[i].pidfd); /* removed ones are closed */
	free(r->peers);
	if (r->info)
		fi_freeinfo(r->info);
	free((void *)r->cfg.fallback_cpus);
	free(r->regs);
	pthread_mutex_destroy(&r->stall_lock);
	free(r);
}
