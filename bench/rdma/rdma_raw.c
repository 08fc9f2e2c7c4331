/* SPDX-License-Identifier: MIT */
/*
 * rdma_raw.c - the raw-libfabric writer of rdma_raw.h. Setup asks for the
 * same things the RDMA stage asks for (RDM endpoint, FI_RMA, manual
 * progress, FI_THREAD_DOMAIN, the mr_mode bits both can honour), so the two
 * differ only in what happens per operation.
 */
#include "rdma/rdma_raw.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "lab/bpbench.h"

#define RR_FI_VERSION FI_VERSION(1, 9)
#define RR_MR_MODES                                                            \
	(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |    \
	 FI_MR_ENDPOINT)
/* the event-wait latency loop sleeps at most this long per wait, like the
 * stage's default event_timeout_ns: a lost wake-up costs 1 ms, not a hang */
#define RR_EVENT_TIMEOUT_MS 1

__attribute__((format(printf, 3, 4))) static int
rr_fail(struct rr_lane *l, int rc, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(l->errmsg, sizeof(l->errmsg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(l->errmsg))
		snprintf(l->errmsg + n, sizeof(l->errmsg) - (size_t)n, ": %s",
			 fi_strerror(rc < 0 ? -rc : rc));
	return rc < 0 ? rc : -rc;
}

static int rr_getinfo(const struct rr_config *c, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	int rc;

	if (!hints)
		return -FI_ENOMEM;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE;
	hints->mode = FI_CONTEXT | FI_CONTEXT2; /* struct rr_op has room */
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = RR_MR_MODES;
	hints->domain_attr->threading =
		FI_THREAD_DOMAIN; /* one thread owns it */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(c->provider);
	rc = fi_getinfo(RR_FI_VERSION, c->node, NULL, c->node ? FI_SOURCE : 0,
			hints, out);
	fi_freeinfo(hints);
	return rc;
}

int rr_provider_probe(const char *provider, const char *node)
{
	struct rr_config c = {.provider = provider, .node = node};
	struct fi_info *list = NULL;
	int rc = rr_getinfo(&c, &list);

	fi_freeinfo(list);
	return rc < 0 ? rc : -rc;
}

/* The (r mod n)-th distinct domain of the list: one NIC per rail. */
static struct fi_info *rr_rail_info(struct fi_info *list, unsigned r)
{
	struct fi_info *distinct[BP_RDMA_MAX_RAILS];
	unsigned n = 0;

	for (struct fi_info *i = list; i && n < BP_RDMA_MAX_RAILS;
	     i = i->next) {
		bool seen = strcmp(i->fabric_attr->prov_name,
				   list->fabric_attr->prov_name) != 0;

		for (unsigned k = 0; k < n && !seen; k++)
			seen = !strcmp(distinct[k]->domain_attr->name,
				       i->domain_attr->name);
		if (!seen)
			distinct[n++] = i;
	}
	return distinct[r % n];
}

static void rr_rail_close(struct rr_rail *rl)
{
	if (rl->mr)
		fi_close(&rl->mr->fid);
	if (rl->ep)
		fi_close(&rl->ep->fid);
	if (rl->av)
		fi_close(&rl->av->fid);
	if (rl->cq)
		fi_close(&rl->cq->fid);
	if (rl->domain)
		fi_close(&rl->domain->fid);
	if (rl->fabric)
		fi_close(&rl->fabric->fid);
	if (rl->info)
		fi_freeinfo(rl->info);
	free(rl->ops);
	free(rl->cqe);
	memset(rl, 0, sizeof(*rl));
	rl->cq_fd = -1;
}

/*
 * shm backs an endpoint with a /dev/shm file named after the process
 * ("PID:0:N") and removes it when the endpoint closes; a bpbench killed
 * mid-run leaves it. Named as the library names its own ("bp-PID-..."),
 * the file is one the library's sweep removes once PID is gone (the next
 * run that opens a shm endpoint, or bp-target's periodic sweep). Only the
 * name differs from what libfabric picks: nothing per operation.
 */
static int rr_shm_name(struct fi_info *info, unsigned k)
{
	static unsigned seq;
	char name[64];

	if (strcmp(info->fabric_attr->prov_name, "shm") ||
	    info->addr_format != FI_ADDR_STR)
		return 0;
	snprintf(name, sizeof(name), "fi_shm://bp-%ld-raw%u-%u",
		 (long)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED),
		 k);
	free(info->src_addr);
	info->src_addr = strdup(name);
	info->src_addrlen = info->src_addr ? strlen(name) + 1 : 0;
	return info->src_addr ? 0 : -FI_ENOMEM;
}

static int rr_rail_open(struct rr_lane *l, unsigned k,
			const struct bp_rdma_peer_desc *peer)
{
	const struct rr_config *c = &l->cfg;
	struct rr_rail *rl = &l->rail[k];
	struct fi_info *list = NULL, *info;
	struct fi_cq_attr cq_attr = {
		.size = c->depth + c->reap_batch,
		.format = FI_CQ_FORMAT_CONTEXT,
		.wait_obj = c->wait_fd ? FI_WAIT_FD : FI_WAIT_NONE,
	};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 1};
	uint8_t *bufs = l->bufs + (size_t)k * l->nbuf * l->size;
	int rc;

	rl->cq_fd = -1;
	rc = rr_getinfo(c, &list);
	if (rc)
		return rr_fail(l, rc, "fi_getinfo(%s)", c->provider);
	info = fi_dupinfo(rr_rail_info(list, k));
	fi_freeinfo(list);
	if (!info)
		return rr_fail(l, -FI_ENOMEM, "fi_dupinfo");
	rl->info = info;
	rc = rr_shm_name(info, k);
	if (rc)
		return rr_fail(l, rc, "the shm endpoint's name");
	rc = fi_fabric(info->fabric_attr, &rl->fabric, NULL);
	if (rc)
		return rr_fail(l, rc, "fi_fabric");
	rc = fi_domain(rl->fabric, info, &rl->domain, NULL);
	if (rc)
		return rr_fail(l, rc, "fi_domain");
	rc = fi_cq_open(rl->domain, &cq_attr, &rl->cq, NULL);
	if (rc)
		return rr_fail(l, rc, "fi_cq_open");
	if (c->wait_fd) {
		rc = fi_control(&rl->cq->fid, FI_GETWAIT, &rl->cq_fd);
		if (rc)
			return rr_fail(l, rc, "fi_control(FI_GETWAIT)");
	}
	rc = fi_av_open(rl->domain, &av_attr, &rl->av, NULL);
	if (rc)
		return rr_fail(l, rc, "fi_av_open");
	rc = fi_endpoint(rl->domain, info, &rl->ep, NULL);
	if (rc)
		return rr_fail(l, rc, "fi_endpoint");
	rc = fi_ep_bind(rl->ep, &rl->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!rc)
		rc = fi_ep_bind(rl->ep, &rl->av->fid, 0);
	if (rc)
		return rr_fail(l, rc, "fi_ep_bind");
	rc = fi_enable(rl->ep);
	if (rc)
		return rr_fail(l, rc, "fi_enable");
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		rc = fi_mr_reg(rl->domain, bufs, (size_t)l->nbuf * l->size,
			       FI_WRITE | FI_READ, 0, 1, 0, &rl->mr, NULL);
		if (rc)
			return rr_fail(l, rc, "fi_mr_reg");
		if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
			rc = fi_mr_bind(rl->mr, &rl->ep->fid, 0);
			if (!rc)
				rc = fi_mr_enable(rl->mr);
			if (rc)
				return rr_fail(l, rc, "fi_mr_bind");
		}
		rl->desc = fi_mr_desc(rl->mr);
	}
	rc = fi_av_insert(rl->av, peer->rail[k].addr, 1, &rl->peer, 0, NULL);
	if (rc != 1)
		return rr_fail(l, rc < 0 ? rc : -FI_EINVAL, "fi_av_insert");
	rl->base = peer->rail[k].base;
	rl->key = peer->rail[k].key;
	rl->ops = calloc(l->nbuf, sizeof(*rl->ops));
	rl->cqe = calloc(c->reap_batch, sizeof(*rl->cqe));
	if (!rl->ops || !rl->cqe)
		return rr_fail(l, -FI_ENOMEM, "calloc");
	for (unsigned i = 0; i < l->nbuf; i++) {
		rl->ops[i].buf = bufs + (size_t)i * l->size;
		rl->ops[i].next_free = i + 1 < l->nbuf ? &rl->ops[i + 1] : NULL;
	}
	rl->free = &rl->ops[0];
	rl->free_tail = &rl->ops[l->nbuf - 1].next_free;
	return 0;
}

int rr_lane_open(struct rr_lane *l, const struct rr_config *c, unsigned nrails,
		 const struct bp_rdma_peer_desc *peer, size_t size)
{
	const char *prov;
	int rc = 0;

	l->cfg = *c;
	l->nrails = nrails;
	l->size = size;
	/* touched here: page faults belong to setup, not to the run */
	l->nbuf = c->buffers > c->depth ? c->buffers : c->depth;
	l->bufs = bench_zalloc((size_t)nrails * l->nbuf * size);
	for (unsigned k = 0; k < nrails; k++)
		l->rail[k].cq_fd = -1;
	for (unsigned k = 0; k < nrails && !rc; k++)
		rc = rr_rail_open(l, k, peer);
	if (rc) {
		rr_lane_close(l);
		return rc;
	}
	/* as the stage decides it (rdma.c): shm completes delivered */
	prov = l->rail[0].info->fabric_attr->prov_name;
	l->wflags =
		c->delivered && strcmp(prov, "shm") ? FI_DELIVERY_COMPLETE : 0;
	return 0;
}

void rr_lane_close(struct rr_lane *l)
{
	for (unsigned k = 0; k < l->nrails; k++)
		rr_rail_close(&l->rail[k]);
	free(l->bufs);
	l->bufs = NULL;
}

/* Post what depth and post_batch allow on one rail. */
static void rr_post(struct rr_lane *l, struct rr_rail *rl)
{
	unsigned room = l->cfg.depth - rl->inflight;
	unsigned n = room < l->cfg.post_batch ? room : l->cfg.post_batch;

	if (l->max_ops && n > l->max_ops - l->posted)
		n = (unsigned)(l->max_ops - l->posted);
	for (unsigned j = 0; j < n; j++) {
		struct rr_op *op = rl->free;
		uint64_t i = l->posted;
		size_t len = l->size;
		struct iovec iov = {.iov_base = op->buf};
		struct fi_rma_iov rma = {
			.addr = rl->base +
				rr_offset(l->lane, i, l->slots, l->size),
			.key = rl->key,
		};
		struct fi_msg_rma msg = {
			.msg_iov = &iov,
			.desc = &rl->desc,
			.iov_count = 1,
			.addr = rl->peer,
			.rma_iov = &rma,
			.rma_iov_count = 1,
			.context = &op->ctx,
		};
		ssize_t rc;

		if (!l->make) {
			rr_stamp(op->buf, l->size, RR_TAG(l->run, l->lane, i));
		} else {
			if (op->made != i + 1) { /* once, -FI_EAGAIN or not */
				op->len = l->make(l->make_ctx, i, op->buf,
						  l->size);
				op->made = i + 1;
			}
			len = op->len;
		}
		iov.iov_len = rma.len = len;
		/* FI_MORE: more of this batch follow (as the stage does) */
		rc = fi_writemsg(rl->ep, &msg,
				 FI_COMPLETION | l->wflags |
					 (j + 1 < n ? FI_MORE : 0));
		if (rc == -FI_EAGAIN) {
			l->eagain++;
			return; /* the next reap makes room */
		}
		if (rc) {
			l->err = rr_fail(l, (int)rc, "fi_writemsg");
			return;
		}
		rl->free = op->next_free;
		if (!rl->free)
			rl->free_tail = &rl->free;
		rl->inflight++;
		l->posted++;
	}
}

/* One fi_cq_read of up to reap_batch entries; their buffers are free. */
static void rr_reap(struct rr_lane *l, struct rr_rail *rl)
{
	ssize_t n = fi_cq_read(rl->cq, rl->cqe, l->cfg.reap_batch);

	if (n > 0) {
		for (ssize_t i = 0; i < n; i++) {
			struct rr_op *op = rl->cqe[i].op_context;

			op->next_free = NULL;
			*rl->free_tail = op;
			rl->free_tail = &op->next_free;
		}
		rl->inflight -= (unsigned)n;
		l->completed += (uint64_t)n;
	} else if (n == -FI_EAGAIN) {
		l->cq_empty++;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry e = {0};
		char pbuf[256];

		fi_cq_readerr(rl->cq, &e, 0);
		snprintf(l->errmsg, sizeof(l->errmsg),
			 "error completion: %s (%s)", fi_strerror(e.err),
			 fi_cq_strerror(rl->cq, e.prov_errno, e.err_data, pbuf,
					sizeof(pbuf)));
		l->err = e.err ? -e.err : -EIO;
	} else {
		l->err = rr_fail(l, (int)n, "fi_cq_read");
	}
}

void *rr_lane_throughput(void *arg)
{
	struct rr_lane *l = arg;
	struct bench_backoff bo;

	l->posted = l->completed = l->eagain = l->cq_empty = 0;
	l->err = 0;
	for (unsigned k = 0; k < l->nrails; k++)
		for (unsigned b = 0; b < l->nbuf; b++)
			l->rail[k].ops[b].made = 0; /* a new run: new data */
	bench_backoff_reset(&bo);
	l->cpu_ns = bench_thread_cpu_ns();
	l->t_start = bench_now_ns();
	for (;;) {
		/* relaxed: a flag to stop; the results travel by join */
		bool stopping =
			atomic_load_explicit(l->stop, memory_order_relaxed) ||
			(l->max_ops && l->posted >= l->max_ops);
		uint64_t before = l->posted + l->completed;
		unsigned busy = 0;

		for (unsigned k = 0; k < l->nrails && !l->err; k++) {
			struct rr_rail *rl = &l->rail[k];

			if (!stopping && rl->free)
				rr_post(l, rl);
			if (rl->inflight) {
				rr_reap(l, rl);
				busy++;
			}
		}
		if (l->err || (stopping && !busy))
			break;
		/*
		 * A pass that moved nothing: bpbench's retry policy for every
		 * competitor (pauses, then sched_yield). With more polling
		 * threads than cores (4 workers here) a loop that never
		 * yields starves the threads it waits for, the target's
		 * progress thread among them, and collapses; the pipeline's
		 * busy-poll waits yield too.
		 */
		if (l->posted + l->completed == before)
			bench_backoff_wait(&bo);
		else
			bench_backoff_reset(&bo);
	}
	l->t_end = bench_now_ns();
	l->cpu_ns = bench_thread_cpu_ns() - l->cpu_ns;
	return NULL;
}

/* Event wait: sleep on the CQ's fd once the provider agrees (fi_trywait). */
static void rr_wait_event(struct rr_rail *rl, int epfd)
{
	struct fid *fid = &rl->cq->fid;
	struct epoll_event ev;

	if (fi_trywait(rl->fabric, &fid, 1) == FI_SUCCESS)
		epoll_wait(epfd, &ev, 1, RR_EVENT_TIMEOUT_MS);
}

void *rr_lane_latency(void *arg)
{
	struct rr_lat *t = arg;
	struct rr_lane *l = t->l;
	struct rr_rail *rl = &l->rail[0];
	int epfd = -1;

	l->posted = l->completed = l->eagain = l->cq_empty = 0;
	l->err = 0;
	t->n = 0;
	t->ops = 0;
	if (t->event) {
		struct epoll_event ev = {.events = EPOLLIN};

		epfd = epoll_create1(EPOLL_CLOEXEC);
		if (epfd < 0 ||
		    epoll_ctl(epfd, EPOLL_CTL_ADD, rl->cq_fd, &ev)) {
			l->err = -errno;
			snprintf(l->errmsg, sizeof(l->errmsg), "epoll: %s",
				 strerror(errno));
			if (epfd >= 0)
				close(epfd);
			return NULL;
		}
	}
	l->cpu_ns = bench_thread_cpu_ns();
	l->t_start = bench_now_ns();
	/* relaxed: a flag to stop; the results travel by join */
	while (!atomic_load_explicit(l->stop, memory_order_relaxed) &&
	       !l->err) {
		int64_t t0 = bench_now_ns(), t1;
		uint64_t done = l->completed;

		while (!rl->inflight && !l->err) {
			rr_post(l, rl); /* depth 1: one write */
			if (!rl->inflight)
				rr_reap(l, rl); /* -FI_EAGAIN: progress */
		}
		while (l->completed == done && !l->err) {
			rr_reap(l, rl);
			if (t->event && l->completed == done)
				rr_wait_event(rl, epfd);
		}
		t1 = bench_now_ns();
		if (t->n < t->max)
			t->samples[t->n++] = t1 - t0;
		t->ops++;
	}
	l->t_end = bench_now_ns();
	l->cpu_ns = bench_thread_cpu_ns() - l->cpu_ns;
	if (epfd >= 0)
		close(epfd);
	return NULL;
}
