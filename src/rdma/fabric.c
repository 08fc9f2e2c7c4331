/* SPDX-License-Identifier: MIT */
/*
 * Opening libfabric objects: provider choice, one endpoint with its
 * domain, completion queue and address vector, memory registration. Cold
 * path, shared by the stage (one set per worker and rail) and the node.
 *
 * Each set gets a fabric and domain of its own, so that the thread that
 * owns it needs no lock (FI_THREAD_DOMAIN) and shares nothing with the
 * others: per-thread ownership, what keeps many-thread RDMA links full.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "src/rdma/rdma_internal.h"

int bpi_fi_err(int fi_rc)
{
	int e = fi_rc < 0 ? -fi_rc : fi_rc;

	/* libfabric's own codes above the errno range have no errno twin */
	if (e == 0)
		return 0;
	if (e >= FI_ERRNO_OFFSET)
		return -EIO;
	return -e;
}

/* The mr_mode bits batchpipe can honour; the provider keeps what it needs. */
#define BPI_MR_MODES                                                           \
	(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |    \
	 FI_MR_ENDPOINT)

int bpi_fab_getinfo(const struct bpi_fab_want *want, const struct bpi_logger *l,
		    struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	const char *node = want->node;
	uint64_t flags = 0;
	int rc;

	if (!hints)
		return -ENOMEM;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE;
	if (want->passive)
		hints->caps |= FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (want->hmem)
		hints->caps |= FI_HMEM;
	/* jobs carry room for fi_context2 (bp_job.op_context) */
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode =
		BPI_MR_MODES | (want->hmem ? FI_MR_HMEM : 0);
	hints->domain_attr->threading =
		want->thread_safe ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
	/* progress happens when we poll: no provider thread competes with
	 * the workers for the cores (sockets' progress thread adds ms) */
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	if (want->provider) {
		hints->fabric_attr->prov_name = strdup(want->provider);
		if (!hints->fabric_attr->prov_name) {
			fi_freeinfo(hints);
			return -ENOMEM;
		}
	}
	/* shm takes the node as its endpoint's name: two processes given
	 * the same one ("127.0.0.1") collide, and it needs no address */
	if (want->provider && !strcmp(want->provider, "shm"))
		node = NULL;
	if (node)
		flags |= FI_SOURCE;
	rc = fi_getinfo(BPI_FI_VERSION, node, NULL, flags, hints, out);
	fi_freeinfo(hints);
	if (rc == -FI_ENODATA || rc == -FI_ENOSYS) {
		if (want->hmem)
			bpi_log(l, BP_LOG_ERROR,
				"provider '%s' has no FI_HMEM (device memory) "
				"with RDM endpoints and RMA",
				want->provider ? want->provider : "(any)");
		else
			bpi_log(l, BP_LOG_ERROR,
				"no provider '%s' with RDM endpoints and RMA"
				"%s%s (fi_info -l lists the providers)",
				want->provider ? want->provider : "(any)",
				node ? " on " : "", node ? node : "");
		return want->hmem ? -EOPNOTSUPP : -ENOENT;
	}
	if (rc) {
		bpi_log(l, BP_LOG_ERROR, "fi_getinfo: %s", fi_strerror(-rc));
		return bpi_fi_err(rc);
	}
	return 0;
}

struct fi_info *bpi_fab_rail_info(struct fi_info *list, unsigned r)
{
	struct fi_info *distinct[BP_RDMA_MAX_RAILS];
	unsigned n = 0;

	for (struct fi_info *i = list; i && n < BP_RDMA_MAX_RAILS;
	     i = i->next) {
		bool seen = false;

		if (strcmp(i->fabric_attr->prov_name,
			   list->fabric_attr->prov_name))
			continue; /* rails stay on the first provider */
		for (unsigned k = 0; k < n; k++)
			if (!strcmp(distinct[k]->domain_attr->name,
				    i->domain_attr->name))
				seen = true;
		if (!seen)
			distinct[n++] = i;
	}
	return distinct[r % n];
}

static int failed(const struct bpi_logger *l, const char *what, int rc)
{
	bpi_log(l, BP_LOG_ERROR, "%s: %s", what,
		fi_strerror(rc < 0 ? -rc : rc));
	return bpi_fi_err(rc);
}

/*
 * shm names each endpoint after the process id ("PID:0:N") and removes
 * its /dev/shm file at exit; one killed with SIGKILL leaves it, and a
 * later process that gets the same pid cannot open that endpoint
 * (-EBUSY). A name of our own, unique whatever the pid: "bp-PID-RANDOM".
 */
static int shm_endpoint(struct fi_info *info, struct bpi_fab *f)
{
	struct fi_info *mine;
	char name[64];
	uint64_t r = 0;
	int rc;

	if (strcmp(info->fabric_attr->prov_name, "shm") ||
	    info->addr_format != FI_ADDR_STR)
		return fi_endpoint(f->domain, info, &f->ep, NULL);
	bpi_shm_sweep_once(); /* what killed processes left (shm_files.c) */
	mine = fi_dupinfo(info);
	if (!mine)
		return -FI_ENOMEM;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		/* relaxed: the names need only be unique */
		r = atomic_fetch_add_explicit(&f->next_key, 1,
					      memory_order_relaxed);
	snprintf(name, sizeof(name), "fi_shm://bp-%ld-%016llx", (long)getpid(),
		 (unsigned long long)r);
	free(mine->src_addr);
	mine->src_addr = strdup(name);
	mine->src_addrlen = mine->src_addr ? strlen(name) + 1 : 0;
	rc = mine->src_addr ? fi_endpoint(f->domain, mine, &f->ep, NULL)
			    : -FI_ENOMEM;
	fi_freeinfo(mine);
	return rc;
}

/* The CQ, AV and enabled endpoint, in f's open domain. */
static int open_ep(struct fi_info *info, unsigned cq_size, unsigned av_count,
		   bool wait_fd, const struct bpi_logger *l, struct bpi_fab *f)
{
	struct fi_cq_attr cq_attr = {
		.size = cq_size,
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_NONE,
	};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = av_count};
	int rc;

	f->cq_fd = -1;
	rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL);
	if (rc)
		return failed(
			l, wait_fd ? "fi_cq_open (FI_WAIT_FD)" : "fi_cq_open",
			rc);
	if (wait_fd) {
		rc = fi_control(&f->cq->fid, FI_GETWAIT, &f->cq_fd);
		if (rc)
			return failed(l, "fi_control(FI_GETWAIT)", rc);
	}
	rc = fi_av_open(f->domain, &av_attr, &f->av, NULL);
	if (rc) {
		bpi_log(l, BP_LOG_ERROR,
			"fi_av_open (%u entries: max_peers): %s", av_count,
			fi_strerror(-rc));
		return bpi_fi_err(rc);
	}
	rc = shm_endpoint(info, f);
	if (rc)
		return failed(l, "fi_endpoint", rc);
	rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!rc)
		rc = fi_ep_bind(f->ep, &f->av->fid, 0);
	if (rc)
		return failed(l, "fi_ep_bind", rc);
	rc = fi_enable(f->ep);
	if (rc)
		return failed(l, "fi_enable", rc);
	return 0;
}

void bpi_fab_close_ep(struct bpi_fab *f)
{
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	f->ep = NULL;
	f->av = NULL;
	f->cq = NULL;
	f->cq_fd = -1;
}

int bpi_fab_open(struct fi_info *info, unsigned cq_size, unsigned av_count,
		 bool wait_fd, const struct bpi_logger *l, struct bpi_fab *f)
{
	int rc;

	memset(f, 0, sizeof(*f));
	f->cq_fd = -1;
	f->mr_mode = info->domain_attr->mr_mode;
	atomic_init(&f->next_key, 1);
	rc = fi_fabric(info->fabric_attr, &f->fabric, NULL);
	if (rc)
		return failed(l, "fi_fabric", rc);
	rc = fi_domain(f->fabric, info, &f->domain, NULL);
	if (rc)
		rc = failed(l, "fi_domain", rc);
	else
		rc = open_ep(info, cq_size, av_count, wait_fd, l, f);
	if (rc)
		bpi_fab_close(f);
	return rc;
}

int bpi_fab_reopen_ep(struct fi_info *info, unsigned cq_size, unsigned av_count,
		      bool wait_fd, const struct bpi_logger *l,
		      struct bpi_fab *f)
{
	int rc;

	bpi_fab_close_ep(f);
	rc = open_ep(info, cq_size, av_count, wait_fd, l, f);
	if (rc)
		bpi_fab_close_ep(f);
	return rc;
}

void bpi_fab_close(struct bpi_fab *f)
{
	bpi_fab_close_ep(f);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	memset(f, 0, sizeof(*f));
	f->cq_fd = -1;
}

int bpi_fab_mr_reg(struct bpi_fab *f, void *addr, size_t len, uint64_t access,
		   const struct bp_rdma_mem *mem, const struct bpi_logger *l,
		   struct fid_mr **out)
{
	struct iovec iov = {.iov_base = addr, .iov_len = len};
	struct fi_mr_attr attr = {
		.mr_iov = &iov,
		.iov_count = 1,
		.access = access,
		.iface = FI_HMEM_SYSTEM,
	};
	int rc;

	if (mem && mem->iface == BP_RDMA_MEM_CUDA) {
		attr.iface = FI_HMEM_CUDA;
		attr.device.cuda = mem->device;
	}
	/*
	 * Where the provider takes requested keys (no FI_MR_PROV_KEY), the
	 * key is all that guards a region on tcp, which addresses regions by
	 * offset: a counter would let one client of a daemon guess another's
	 * key. Random 64-bit keys, drawn again on the rare collision.
	 */
	for (int tries = 0;; tries++) {
		if (getrandom(&attr.requested_key, sizeof(attr.requested_key),
			      0) != sizeof(attr.requested_key))
			/* relaxed: the keys need only be unique */
			attr.requested_key = atomic_fetch_add_explicit(
				&f->next_key, 1, memory_order_relaxed);
		rc = fi_mr_regattr(f->domain, &attr, 0, out);
		if (rc != -FI_ENOKEY || tries == 8)
			break;
	}
	if (rc)
		return failed(l, "fi_mr_regattr", rc);
	if (f->mr_mode & FI_MR_ENDPOINT) {
		rc = fi_mr_bind(*out, &f->ep->fid, 0);
		if (!rc)
			rc = fi_mr_enable(*out);
		if (rc) {
			fi_close(&(*out)->fid);
			*out = NULL;
			return failed(l, "fi_mr_bind/enable", rc);
		}
	}
	return 0;
}

bool bpi_fab_has_wait_fd(struct fi_info *info)
{
	struct fi_cq_attr attr = {.size = 16,
				  .format = FI_CQ_FORMAT_DATA,
				  .wait_obj = FI_WAIT_FD};
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cq *cq = NULL;
	int fd = -1;
	bool ok = false;

	if (fi_fabric(info->fabric_attr, &fabric, NULL))
		return false;
	if (!fi_domain(fabric, info, &domain, NULL) &&
	    !fi_cq_open(domain, &attr, &cq, NULL))
		ok = fi_control(&cq->fid, FI_GETWAIT, &fd) == 0 && fd >= 0;
	if (cq)
		fi_close(&cq->fid);
	if (domain)
		fi_close(&domain->fid);
	fi_close(&fabric->fid);
	return ok;
}

enum bp_rdma_cq_wait bpi_fab_resolve_wait(enum bp_rdma_cq_wait w,
					  struct fi_info *info,
					  const struct bpi_logger *l)
{
	if (w != BP_RDMA_CQ_AUTO)
		return w;
	if (bpi_fab_has_wait_fd(info))
		return BP_RDMA_CQ_EVENT;
	bpi_log(l, BP_LOG_INFO,
		"%s has no completion wait fd: polling with spin-then-sleep",
		info->fabric_attr->prov_name);
	return BP_RDMA_CQ_SPIN_SLEEP;
}
