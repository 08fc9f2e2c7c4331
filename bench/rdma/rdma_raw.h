/* SPDX-License-Identifier: MIT */
/*
 * rdma_raw.h - the raw-libfabric competitor of `bpbench rdma` and `bpbench
 * rdma-fill`: the same one-sided writes as the RDMA stage, with plain
 * libfabric calls and no pipeline. One thread owns its endpoints (one
 * fabric, domain, endpoint, CQ and AV per rail), posts up to `depth`
 * writes per rail in batches of `post_batch` (FI_MORE on all but the last
 * of a batch) and reaps `reap_batch` completions per fi_cq_read, polling.
 * It is the code a user would write from the libfabric man pages: nothing
 * in it is slowed down on purpose, and nothing is shared between threads.
 * A throughput pass that moved nothing follows bpbench's retry policy for
 * every competitor (bench_backoff: pauses, then sched_yield), without which
 * more polling threads than cores collapse; the latency loop spins.
 */
#ifndef BPBENCH_RDMA_RAW_H
#define BPBENCH_RDMA_RAW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <batchpipe/rdma.h>

/* The tag every benchmark write carries in its first and last 8 bytes. */
#define RR_TAG(run, lane, i)                                                   \
	(((uint64_t)(run) << 52) | ((uint64_t)(lane) << 40) |                  \
	 ((uint64_t)(i) & ((UINT64_C(1) << 40) - 1)))
#define RR_TAG_RUN(t)  ((unsigned)((t) >> 52))
#define RR_TAG_LANE(t) ((unsigned)(((t) >> 40) & 0xfff))
#define RR_TAG_OP(t)   ((t) & ((UINT64_C(1) << 40) - 1))

/* Write the tag into the first and the last 8 bytes of a buffer. */
static inline void rr_stamp(void *buf, size_t size, uint64_t tag)
{
	__builtin_memcpy(buf, &tag, 8);
	__builtin_memcpy((char *)buf + size - 8, &tag, 8);
}

/*
 * Where lane `lane`'s op `i` lands in the target region: each lane owns
 * `slots` consecutive slots of `size` bytes and cycles through them.
 */
static inline uint64_t rr_offset(unsigned lane, uint64_t i, unsigned slots,
				 size_t size)
{
	return ((uint64_t)lane * slots + i % slots) * size;
}

struct rr_config {
	const char *provider;
	const char *node; /* "127.0.0.1", or NULL (shm) */
	unsigned depth;	  /* writes in flight per rail */
	/* source buffers per rail, used in turn (>= depth; 0: depth): the
	 * pipeline's pool cycles through as many, so both variants read the
	 * same amount of source memory */
	unsigned buffers;
	unsigned post_batch;
	unsigned reap_batch;
	bool wait_fd; /* a CQ with FI_WAIT_FD (event-wait latency) */
	/* every write FI_DELIVERY_COMPLETE, as the stage writes a job with
	 * BP_RDMA_JOB_DELIVERED: its completion means the data is in the
	 * peer's memory. Not on shm, whose completions already mean that
	 * (and where the stage leaves the flag off too) */
	bool delivered;
};

/* An operation's context: its buffer, found again from the completion. */
struct rr_op {
	struct fi_context2 ctx; /* first: the completion's op_context */
	void *buf;
	struct rr_op *next_free;
	/* with a make callback: 1 + the op whose data buf holds (0: none,
	 * reset at the start of each run), and its length */
	uint64_t made;
	size_t len;
};

/*
 * Optional, per write: put op i's data into buf (size bytes long) just
 * before it is posted, and return how many bytes to write (1..size). The
 * RDMA stage's prepare callback in a raw loop: called once per op, also
 * when the provider answers -FI_EAGAIN and the op is posted again later.
 */
typedef size_t rr_make_fn(void *ctx, uint64_t i, void *buf, size_t size);

/* One rail: everything a thread needs to write to the peer over one NIC. */
struct rr_rail {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr; /* the lane's buffers, where FI_MR_LOCAL */
	void *desc;
	fi_addr_t peer;
	uint64_t base, key; /* the peer region on this rail */
	int cq_fd;	    /* FI_WAIT_FD, or -1 */
	unsigned inflight;
	struct rr_op *ops;		 /* contexts, one per buffer */
	struct rr_op *free, **free_tail; /* FIFO: buffers used in turn */
	struct fi_cq_entry *cqe;	 /* reap_batch entries */
};

/*
 * One writer thread (a lane): rails, buffers, the run it is in, what it
 * counted. Fields up to `posted` are set before the thread starts.
 */
struct rr_lane {
	struct rr_config cfg;
	unsigned nrails;
	struct rr_rail rail[BP_RDMA_MAX_RAILS];
	uint8_t *bufs; /* nrails * buffers of size bytes */
	unsigned nbuf; /* buffers per rail */
	size_t size;
	unsigned lane;	/* this lane's number: its slots, its tags */
	unsigned slots; /* target slots per lane */
	unsigned run;	/* tag of the current run */
	atomic_int *stop;
	uint64_t max_ops; /* stop after this many posts (0: only *stop) */
	rr_make_fn *make; /* NULL: each write is the buffer, tag stamped */
	void *make_ctx;
	uint64_t wflags; /* set by rr_lane_open: flags added to each write */
	/* results of one run, read after join */
	uint64_t posted, completed, eagain, cq_empty;
	int64_t t_start, t_end;
	int64_t cpu_ns; /* this thread's CPU time over the run */
	int err;
	char errmsg[256];
};

/*
 * Whether `provider` offers what the raw loop and the RDMA stage need (RDM
 * endpoints with RMA) at node (NULL for shm): 0, or fi_getinfo's negative
 * error (-FI_ENODATA: not here). Opens nothing.
 */
int rr_provider_probe(const char *provider, const char *node);

/*
 * Open nrails rails toward the peer (a region description with at least
 * nrails rails) and the lane's buffers. Returns 0, or a negative errno with
 * the reason in l->errmsg; nothing stays open on failure.
 */
int rr_lane_open(struct rr_lane *l, const struct rr_config *c, unsigned nrails,
		 const struct bp_rdma_peer_desc *peer, size_t size);
void rr_lane_close(struct rr_lane *l);

/*
 * The throughput loop (a pthread start routine, arg = the lane): post and
 * reap until *stop, then reap what is still in flight. Sets t_start, t_end,
 * posted, completed, err.
 */
void *rr_lane_throughput(void *arg);

/*
 * Latency: one write of `size` bytes at a time on rail 0 until *stop; the
 * post -> completion time of each op goes to samples[] (up to max, the
 * rest counted only). event: wait on the CQ's fd (fi_trywait + epoll)
 * instead of polling.
 */
struct rr_lat {
	struct rr_lane *l;
	bool event;
	int64_t *samples;
	unsigned max, n;
	uint64_t ops;
};
void *rr_lane_latency(void *arg);

#endif /* BPBENCH_RDMA_RAW_H */
