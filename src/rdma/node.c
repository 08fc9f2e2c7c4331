/* SPDX-License-Identifier: MIT */
/*
 * The passive side: memory that remote stages write and read. One
 * endpoint per rail, each with a progress thread of its own that polls its
 * CQ (the receiving side must scale across cores too, and
 * manual-progress providers land a remote write only while the target
 * polls). Regions get their own registration per rail, so every client of
 * a daemon has its own keys.
 *
 * The domains are opened FI_THREAD_SAFE: regions are exposed and
 * withdrawn by control threads while the progress threads poll. None of
 * that is the initiator's hot path.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/thread.h"
#include "src/rdma/rdma_internal.h"

struct node_rail {
	struct bp_rdma_node *n;
	unsigned index;
	struct bpi_fab fab;
	uint8_t addr[BP_RDMA_ADDR_MAX];
	size_t addrlen;
	pthread_t thread;
	bool thread_started;
	/*
	 * Advanced by the polling thread on entering and on leaving each
	 * provider call, odd while inside one: the same odd value read twice,
	 * t apart, is a call that has not returned for t (a shm peer that died
	 * holding the provider's lock). Written by one thread (relaxed
	 * stores), read by anyone (bp_rdma_node_rail_calls).
	 */
	_Atomic uint64_t calls;
};

struct bp_rdma_node {
	struct bp_rdma_node_config cfg; /* provider, node not kept */
	struct bpi_logger log;
	struct fi_info *info;
	char provider[64];
	bool virt_addr;
	_Atomic int stop;
	_Atomic uint64_t data_count;
	struct node_rail rails[BP_RDMA_MAX_RAILS];
	/* open regions, closed by destroy if the caller did not: a lock on
	 * the cold path (expose and close, from any thread) */
	pthread_mutex_t regions_lock;
	struct bp_rdma_region *regions;
};

struct bp_rdma_region {
	struct bp_rdma_node *n;
	struct bp_rdma_region *prev, *next;
	void *addr;
	size_t len;
	struct fid_mr *mr[BP_RDMA_MAX_RAILS];
};

void bp_rdma_node_config_init(struct bp_rdma_node_config *c)
{
	memset(c, 0, sizeof(*c));
	c->rails = 1;
	c->progress_threads = true;
	c->progress_wait = BP_RDMA_CQ_AUTO;
	c->spin_ns = 50000;
	c->sleep_max_ns = 50000;
}

static inline void call_mark(struct node_rail *nr)
{
	/* relaxed: one writer; readers only compare snapshots */
	atomic_store_explicit(
		&nr->calls,
		atomic_load_explicit(&nr->calls, memory_order_relaxed) + 1,
		memory_order_relaxed);
}

/*
 * Reap one rail once; returns entries reaped or a negative errno. Out of
 * line: a stack unwound by frame pointers (ThreadSanitizer's) loses the
 * frame that calls into libfabric, which keeps none; this way that is
 * this one, and rail_main stays visible (tests/rdma/stage/tsan.supp).
 */
static __attribute__((noinline)) int rail_progress(struct node_rail *nr)
{
	struct bp_rdma_node *n = nr->n;
	struct fi_cq_data_entry cqe[16];
	ssize_t got;

	call_mark(nr); /* odd: inside the provider */
	got = fi_cq_read(nr->fab.cq, cqe, 16);
	call_mark(nr);

	if (got == -FI_EAGAIN)
		return 0;
	if (got == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		char pbuf[256];

		if (fi_cq_readerr(nr->fab.cq, &err, 0) == 1)
			bpi_log(&n->log, BP_LOG_WARN,
				"node rail %u: error completion: %s (%s)",
				nr->index, fi_strerror(err.err),
				fi_cq_strerror(nr->fab.cq, err.prov_errno,
					       err.err_data, pbuf,
					       sizeof(pbuf)));
		return 1;
	}
	if (got < 0)
		return bpi_fi_err((int)got);
	for (ssize_t i = 0; i < got; i++) {
		if (!(cqe[i].flags & FI_REMOTE_CQ_DATA))
			continue;
		/* relaxed: a count read for statistics */
		atomic_fetch_add_explicit(&n->data_count, 1,
					  memory_order_relaxed);
		if (n->cfg.on_data)
			n->cfg.on_data(n->cfg.data_ctx, nr->index, cqe[i].data);
	}
	return (int)got;
}

/*
 * EVENT progress: one-sided writes land without a completion here, so an
 * empty read says nothing of the traffic. After a wake-up the rail polls
 * on for a window, so that a stream of writes is served as by a busy
 * target, not one wake-up (and its system calls) per burst; idle, it
 * blocks on the CQ's fd.
 *
 * The window is spin_ns (within 1 us..1 ms) and doubles, up to
 * WINDOW_MAX_NS, each time a block ends sooner than spin_ns: the traffic
 * came back before polling on would have cost more than sleeping, which is
 * a stream with short gaps (a 1 MiB write stream over tcp drains the
 * socket between its chunks). A block that times out or lasts longer than
 * spin_ns sets the window back to spin_ns. A block costs the stream more
 * than its system calls (the wake-up's latency stalls the writer): tcp
 * 1 MiB writes into bp-target reached 0.77-0.80 of a plain busy-polling
 * target with the window fixed at 50 us, 0.95-1.07 with it growing
 * (bpbench rdma-target, medians of per-run ratios, 3 rounds).
 *
 * While the window is longer than spin_ns, an empty pass yields the CPU
 * (sched_yield), so that a client on the same host keeps its share (with
 * a busy-polling pipeline at one write in flight and no yield, its p99.9
 * went from 0.1 to 2-3 ms). A yield that took longer than YIELD_TAKEN_NS
 * means a thread on this CPU wanted it: the window ends there and is set
 * back to spin_ns, and the rail blocks (under such a pipeline the target
 * took 43-73 % of a core instead of 97 %).
 */
#define WINDOW_MAX_NS  INT64_C(2000000)
#define YIELD_TAKEN_NS INT64_C(20000)
/* spin_ns is clamped to 1 ms: the window can always grow from it */
_Static_assert(WINDOW_MAX_NS >= 1000000, "the window's cap below spin_ns");

struct event_wait {
	int64_t base;	    /* spin_ns, within [1 us, 1 ms] */
	int64_t window;	    /* base .. WINDOW_MAX_NS */
	int64_t poll_until; /* 0: not polling on after a wake-up */
};

static void event_wait_init(struct event_wait *e, uint64_t spin_ns)
{
	e->base = spin_ns < 1000      ? 1000
		  : spin_ns > 1000000 ? 1000000
				      : (int64_t)spin_ns;
	e->window = e->base;
	e->poll_until = 0;
}

/* After an empty pass: poll on, or block until the CQ's fd is ready. */
static void event_wait(struct node_rail *nr, struct event_wait *e)
{
	struct fid *fid = &nr->fab.cq->fid;
	struct pollfd pfd = {.fd = nr->fab.cq_fd, .events = POLLIN};
	int64_t t0, t1;

	if (e->poll_until) {
		t0 = bpi_now_ns();
		if (t0 < e->poll_until) {
			if (e->window > e->base) {
				sched_yield();
				/* another thread ran: the CPU is wanted */
				if (bpi_now_ns() - t0 > YIELD_TAKEN_NS) {
					e->window = e->base;
					e->poll_until = 0;
				}
			}
			return;
		}
		e->poll_until = 0;
	}
	if (fi_trywait(nr->fab.fabric, &fid, 1) != FI_SUCCESS)
		return;
	t0 = bpi_now_ns();
	/* bounded, so that destroy's stop is seen */
	if (poll(&pfd, 1, 50) != 1) {
		e->window = e->base;
		return;
	}
	t1 = bpi_now_ns();
	if (t1 - t0 < e->base)
		e->window = e->window * 2 > WINDOW_MAX_NS ? WINDOW_MAX_NS
							  : e->window * 2;
	else
		e->window = e->base;
	e->poll_until = t1 + e->window;
}

static void *rail_main(void *arg)
{
	struct node_rail *nr = arg;
	struct bp_rdma_node *n = nr->n;
	struct bpi_backoff b;
	struct event_wait e;

	bpi_backoff_reset(&b);
	event_wait_init(&e, n->cfg.spin_ns);
	/* acquire: pairs with destroy's release; nothing else is ordered */
	while (!atomic_load_explicit(&n->stop, memory_order_acquire)) {
		if (rail_progress(nr) != 0) {
			bpi_backoff_reset(&b);
			continue;
		}
		if (n->cfg.progress_wait == BP_RDMA_CQ_SPIN_SLEEP)
			bpi_backoff_wait(&b, n->cfg.spin_ns,
					 n->cfg.sleep_max_ns);
		else if (n->cfg.progress_wait == BP_RDMA_CQ_EVENT)
			event_wait(nr, &e);
	}
	return NULL;
}

static int node_invalid(const struct bp_rdma_node_config *c, const char *what)
{
	struct bpi_logger l = {c->log, c->log_ctx};

	bpi_log(&l, BP_LOG_ERROR, "bp_rdma_node_create: invalid %s", what);
	return -EINVAL;
}

int bp_rdma_node_create(const struct bp_rdma_node_config *c,
			struct bp_rdma_node **out)
{
	struct bpi_fab_want want = {0};
	bool event;
	struct bp_rdma_node *n;
	int rc;

	if (!c || !out)
		return -EINVAL;
	if (c->rails < 1 || c->rails > BP_RDMA_MAX_RAILS)
		return node_invalid(c, "rails (1..8)");
	if (c->progress_wait > BP_RDMA_CQ_AUTO)
		return node_invalid(c, "progress_wait");
	if ((c->progress_wait == BP_RDMA_CQ_SPIN_SLEEP ||
	     c->progress_wait == BP_RDMA_CQ_AUTO) &&
	    (c->sleep_max_ns < 1000 || c->sleep_max_ns > 1000000000))
		return node_invalid(c, "sleep_max_ns (1 us .. 1 s)");
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->cfg = *c;
	n->cfg.provider = n->cfg.node = NULL;
	pthread_mutex_init(&n->regions_lock, NULL);
	n->log = (struct bpi_logger){c->log, c->log_ctx};
	want.provider = c->provider;
	want.node = c->node;
	want.passive = true;
	want.thread_safe = true;
	want.hmem = c->hmem;
	rc = bpi_fab_getinfo(&want, &n->log, &n->info);
	if (rc) {
		free(n);
		return rc;
	}
	snprintf(n->provider, sizeof(n->provider), "%s",
		 n->info->fabric_attr->prov_name);
	n->virt_addr = n->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	n->cfg.progress_wait =
		bpi_fab_resolve_wait(c->progress_wait, n->info, &n->log);
	event = n->cfg.progress_wait == BP_RDMA_CQ_EVENT;
	for (unsigned k = 0; k < c->rails; k++) {
		struct node_rail *nr = &n->rails[k];

		nr->n = n;
		nr->index = k;
		rc = bpi_fab_open(bpi_fab_rail_info(n->info, k), 1024, 16,
				  event, &n->log, &nr->fab);
		if (rc) {
			if (event)
				bpi_log(&n->log, BP_LOG_ERROR,
					"bp_rdma_node_create: %s has no "
					"completion wait object for EVENT "
					"progress",
					n->provider);
			goto fail;
		}
		nr->addrlen = sizeof(nr->addr);
		rc = fi_getname(&nr->fab.ep->fid, nr->addr, &nr->addrlen);
		if (rc) {
			bpi_log(&n->log, BP_LOG_ERROR, "fi_getname: %s",
				fi_strerror(-rc));
			rc = bpi_fi_err(rc);
			goto fail;
		}
	}
	if (c->progress_threads) {
		for (unsigned k = 0; k < c->rails; k++) {
			char name[24]; /* bpi_thread_start keeps 15 */

			snprintf(name, sizeof(name), "bp-rail-%u", k);
			rc = bpi_thread_start(
				&n->rails[k].thread,
				&(struct bpi_thread_spec){
					.fn = rail_main,
					.arg = &n->rails[k],
					.name = name,
					.cpu = -1,
					.role = BP_THREAD_RDMA_PROGRESS,
					.index = k,
					.on_start = c->thread_start,
					.on_stop = c->thread_stop,
					.hook_ctx = c->thread_ctx,
				});
			if (rc)
				goto fail;
			n->rails[k].thread_started = true;
		}
	}
	*out = n;
	return 0;
fail:
	bp_rdma_node_destroy(n);
	return event && (rc == -ENOSYS || rc == -EOPNOTSUPP) ? -EOPNOTSUPP : rc;
}

int bp_rdma_node_progress(struct bp_rdma_node *n)
{
	int total = 0;

	if (!n || n->cfg.progress_threads)
		return -EINVAL;
	for (unsigned k = 0; k < n->cfg.rails; k++) {
		int rc = rail_progress(&n->rails[k]);

		if (rc < 0)
			return rc;
		total += rc;
	}
	return total;
}

int bp_rdma_node_rail_calls(const struct bp_rdma_node *n, unsigned rail,
			    uint64_t *calls)
{
	if (!n || !calls || rail >= n->cfg.rails)
		return -EINVAL;
	/* relaxed: a snapshot, compared with a later one */
	*calls = atomic_load_explicit(&n->rails[rail].calls,
				      memory_order_relaxed);
	return 0;
}

uint64_t bp_rdma_node_data_count(const struct bp_rdma_node *n)
{
	/* relaxed: a statistic */
	return n ? atomic_load_explicit(&n->data_count, memory_order_relaxed)
		 : 0;
}

const char *bp_rdma_node_provider(const struct bp_rdma_node *n)
{
	return n ? n->provider : NULL;
}

int bp_rdma_node_expose(struct bp_rdma_node *n, void *addr, size_t len,
			const struct bp_rdma_mem *mem,
			struct bp_rdma_region **out)
{
	struct bp_rdma_region *reg;

	if (!n || !addr || !len || !out ||
	    (mem && mem->iface != BP_RDMA_MEM_SYSTEM &&
	     mem->iface != BP_RDMA_MEM_CUDA))
		return -EINVAL;
	if (mem && mem->iface == BP_RDMA_MEM_CUDA && !n->cfg.hmem) {
		bpi_log(&n->log, BP_LOG_ERROR,
			"bp_rdma_node_expose: device memory needs a node "
			"created with hmem (FI_HMEM)");
		return -EOPNOTSUPP;
	}
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->n = n;
	reg->addr = addr;
	reg->len = len;
	for (unsigned k = 0; k < n->cfg.rails; k++) {
		int rc = bpi_fab_mr_reg(&n->rails[k].fab, addr, len,
					FI_REMOTE_READ | FI_REMOTE_WRITE, mem,
					&n->log, &reg->mr[k]);

		if (rc) {
			bp_rdma_region_close(reg);
			return rc;
		}
	}
	pthread_mutex_lock(&n->regions_lock);
	reg->next = n->regions;
	if (n->regions)
		n->regions->prev = reg;
	n->regions = reg;
	pthread_mutex_unlock(&n->regions_lock);
	*out = reg;
	return 0;
}

void bp_rdma_region_describe(const struct bp_rdma_region *reg,
			     struct bp_rdma_peer_desc *d)
{
	const struct bp_rdma_node *n = reg->n;

	memset(d, 0, sizeof(*d));
	d->rails = n->cfg.rails;
	d->len = reg->len;
	for (unsigned k = 0; k < n->cfg.rails; k++) {
		memcpy(d->rail[k].addr, n->rails[k].addr, n->rails[k].addrlen);
		d->rail[k].addrlen = (uint32_t)n->rails[k].addrlen;
		d->rail[k].base =
			n->virt_addr ? (uint64_t)(uintptr_t)reg->addr : 0;
		d->rail[k].key = fi_mr_key(reg->mr[k]);
	}
}

void bp_rdma_region_close(struct bp_rdma_region *reg)
{
	struct bp_rdma_node *n;

	if (!reg)
		return;
	n = reg->n;
	pthread_mutex_lock(&n->regions_lock);
	if (reg->prev)
		reg->prev->next = reg->next;
	else if (n->regions == reg)
		n->regions = reg->next;
	if (reg->next)
		reg->next->prev = reg->prev;
	pthread_mutex_unlock(&n->regions_lock);
	for (unsigned k = 0; k < BP_RDMA_MAX_RAILS; k++)
		if (reg->mr[k])
			fi_close(&reg->mr[k]->fid);
	free(reg);
}

void bp_rdma_node_destroy(struct bp_rdma_node *n)
{
	if (!n)
		return;
	/* release: pairs with rail_main's acquire */
	atomic_store_explicit(&n->stop, 1, memory_order_release);
	for (unsigned k = 0; k < BP_RDMA_MAX_RAILS; k++)
		if (n->rails[k].thread_started)
			pthread_join(n->rails[k].thread, NULL);
	/* their registrations belong to the domains closed below */
	while (n->regions)
		bp_rdma_region_close(n->regions);
	pthread_mutex_destroy(&n->regions_lock);
	for (unsigned k = 0; k < BP_RDMA_MAX_RAILS; k++)
		bpi_fab_close(&n->rails[k].fab);
	fi_freeinfo(n->info);
	free(n);
}
