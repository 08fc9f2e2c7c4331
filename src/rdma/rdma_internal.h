/* SPDX-License-Identifier: MIT */
/* The RDMA stage's private structures: fabric.c, stage.c, node.c, ... */
#ifndef BP_SRC_RDMA_INTERNAL_H
#define BP_SRC_RDMA_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <batchpipe/rdma.h>

#include "src/base/alloc.h"
#include "src/base/clock.h"
#include "src/base/counter.h"
#include "src/base/log.h"

#define BPI_FI_VERSION FI_VERSION(1, 9)

/* ---------------------------------------------------------------- fabric */

/* What to ask the provider for. */
struct bpi_fab_want {
	const char *provider; /* NULL: any */
	const char *node;     /* local address to bind, or NULL */
	bool passive;	      /* remote access to our memory (a node) */
	bool thread_safe;     /* FI_THREAD_SAFE, else FI_THREAD_DOMAIN */
	bool hmem;	      /* FI_HMEM */
};

/*
 * fi_getinfo for an RDM endpoint with RMA. Returns 0 and a list (free with
 * fi_freeinfo), or -ENOENT / -EOPNOTSUPP (hmem) with a log line.
 */
int bpi_fab_getinfo(const struct bpi_fab_want *want, const struct bpi_logger *l,
		    struct fi_info **out);

/*
 * The info rail r uses: the (r mod n)-th distinct domain of the first
 * provider in the list (several NICs: one rail each).
 */
struct fi_info *bpi_fab_rail_info(struct fi_info *list, unsigned r);

/* One endpoint with everything it needs, owned by one thread. */
struct bpi_fab {
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	uint64_t mr_mode;	   /* what the provider kept */
	_Atomic uint64_t next_key; /* keys, should getrandom fail (where the
				      provider takes requested keys) */
	int cq_fd;		   /* FI_WAIT_FD, or -1 */
};

/*
 * Open fabric, domain, CQ (FI_CQ_FORMAT_DATA, cq_size entries, with a wait
 * fd if wait_fd), AV (av_count entries) and an enabled endpoint. Returns 0,
 * or a negative errno with a log line; nothing stays open on failure.
 */
/* bp_rdma_shm_sweep, once per process (shm_files.c). */
void bpi_shm_sweep_once(void);
/*
 * The PID in a shm endpoint address of the library's ("fi_shm://bp-PID-..."),
 * or -1 (another name, or the PID guesses are off: BP_RDMA_NO_SHM_SWEEP).
 */
long bpi_shm_addr_pid(const void *addr, size_t len);

int bpi_fab_open(struct fi_info *info, unsigned cq_size, unsigned av_count,
		 bool wait_fd, const struct bpi_logger *l, struct bpi_fab *f);
void bpi_fab_close(struct bpi_fab *f);
/* Close a rail's endpoint, AV and CQ, keeping the fabric and domain. */
void bpi_fab_close_ep(struct bpi_fab *f);
/*
 * Close f's endpoint, CQ and AV and open new ones in the same domain (a
 * rail whose operations will never complete). On failure f has none.
 */
int bpi_fab_reopen_ep(struct fi_info *info, unsigned cq_size, unsigned av_count,
		      bool wait_fd, const struct bpi_logger *l,
		      struct bpi_fab *f);

/* Whether the provider's CQs have a wait fd (FI_WAIT_FD, FI_GETWAIT). */
bool bpi_fab_has_wait_fd(struct fi_info *info);

/* AUTO resolved for info: EVENT where there is a wait fd, else SPIN_SLEEP. */
enum bp_rdma_cq_wait bpi_fab_resolve_wait(enum bp_rdma_cq_wait w,
					  struct fi_info *info,
					  const struct bpi_logger *l);

/* Register memory in f's domain (bound to its endpoint where needed). */
int bpi_fab_mr_reg(struct bpi_fab *f, void *addr, size_t len, uint64_t access,
		   const struct bp_rdma_mem *mem, const struct bpi_logger *l,
		   struct fid_mr **out);

/* fi_errno (positive or negative) as a negative errno. */
int bpi_fi_err(int fi_rc);

/* --------------------------------------------------- registration cache */

/*
 * Registrations by (slot, address range), slot = worker * rails + rail: an
 * rculfhash table read without locks. An entry is filed under every 2 MiB
 * granule it covers, so a lookup is one hash probe on the granule of the
 * address. Entries are added by the slot's owner (or before start), and
 * removed only when the table is destroyed: nothing is freed under a reader.
 */
struct bpi_mr_entry {
	uint64_t base, len;
	uint32_t slot;
	struct fid_mr *mr;
	void *desc;
};

struct bpi_mrcache;

int bpi_mrcache_create(struct bpi_mrcache **out);
/* The entry of slot that holds [addr, addr+len), or NULL. */
const struct bpi_mr_entry *bpi_mrcache_find(struct bpi_mrcache *c,
					    uint32_t slot, uintptr_t addr,
					    size_t len);
/* File a registration; the cache owns mr from here (closed at destroy). */
int bpi_mrcache_add(struct bpi_mrcache *c, uint32_t slot, uintptr_t base,
		    size_t len, struct fid_mr *mr,
		    const struct bpi_mr_entry **out);
void bpi_mrcache_destroy(struct bpi_mrcache *c);

/* ------------------------------------------------------------- waiting */

struct bpi_backoff {
	int64_t idle_since; /* the first empty poll, or 0 */
	uint64_t sleep_ns;  /* the next sleep */
};

void bpi_backoff_reset(struct bpi_backoff *b);
/* After each empty poll: 0 while spinning, else how long to sleep now
 * (the caller sleeps; the next sleep doubles, up to sleep_max_ns). */
uint64_t bpi_backoff_next(struct bpi_backoff *b, uint64_t spin_ns,
			  uint64_t sleep_max_ns);
/* Called after each empty poll: returns at once while spinning, else
 * sleeps (sleep_max_ns < 1 s). */
void bpi_backoff_wait(struct bpi_backoff *b, uint64_t spin_ns,
		      uint64_t sleep_max_ns);

/* ------------------------------------------------------------- pinning */

/* Pin the calling worker near its NIC, or to the fallback list. */
void bpi_pin_rail_local(const struct fi_info *info, unsigned worker,
			const int *fallback, unsigned nfallback,
			const struct bpi_logger *l);

/* ------------------------------------------------------------ the stage */

struct bpi_rail_stats {
	bpi_counter posted, completed, failed, eagain, pending_high;
	bpi_counter cq_reads, cq_empty, mr_misses;
	bpi_counter reap_hist[BP_RDMA_REAP_BUCKETS];
};

/* bpi_peer.state */
#define PEER_FREE   0 /* never used, or removed: bp_rdma_peer_add may take it */
#define PEER_READY  1 /* desc is whole: jobs may name it */
#define PEER_CLAIMD 2 /* bp_rdma_peer_add is writing desc */
#define PEER_GONE   3 /* bp_rdma_peer_gone: desc stays whole, jobs fail */

struct bpi_peer {
	struct bp_rdma_peer_desc desc;
	_Atomic int state; /* PEER_* */
	/*
	 * Bumped each time the slot is taken: a rail whose address (and
	 * down-state) for this id is of an older gen drops them first.
	 * Written before the release that makes the slot READY.
	 */
	_Atomic uint32_t gen;
	/*
	 * shm, a peer named by the library: a pidfd of its process, polled
	 * on the stage's slow paths (stage.c's peer_exited), else -1; and the
	 * PID, for the log. Written by bp_rdma_peer_add before READY.
	 */
	int pidfd;
	long pid;
};

/* One worker's rail: owned by that worker thread once the pipeline runs. */
struct bpi_rail {
	struct bpi_fab fab;
	unsigned inflight; /* posted, not yet completed */
	/*
	 * Posted jobs by slot (hdr.stage_word), so that a rail whose
	 * operations never complete (a dead peer on shm) can fail them; the
	 * free slots are free_slot[0 .. credits - inflight).
	 */
	struct bp_rdma_job **flight;
	uint32_t *free_slot;
	int64_t quiet_since;	   /* in flight, no completion since, or 0 */
	unsigned empty_reads;	   /* the clock is read every 256th */
	uint32_t gen;		   /* endpoint reopened this often: MR slots */
	struct bp_rdma_job *pend;  /* FIFO of jobs not yet posted (linked */
	struct bp_rdma_job **tail; /* through hdr.op_context[0]) */
	unsigned npend;
	int64_t eagain_since;  /* the head job's first -FI_EAGAIN, or 0 */
	unsigned eagain_count; /* the clock is read every 64th */
	int64_t *peer_down;    /* per peer id: when it was given up, or 0 */
	bool broken;	       /* the endpoint could not be reopened */
	/* the endpoint was closed by an abort (stage.c's reset_rail); the
	 * next pipeline's worker, or bp_rdma_register, opens it again */
	bool closed;
	fi_addr_t *peer_addr;  /* per peer id, FI_ADDR_NOTAVAIL until used */
	uint32_t *peer_gen;    /* per peer id: the gen peer_addr/down are of */
	/* operations in flight to peers gone (bp_rdma_peer_gone), counted
	 * at the last look: while not 0 the rail posts nothing, so that its
	 * endpoint can be reopened once they are all that is left */
	unsigned gone_inflight;
	const struct bpi_mr_entry *last_mr; /* the last registration used */
	struct fi_cq_data_entry *cqe;	    /* reap_batch entries */
	struct bpi_rail_stats st;
};

struct bpi_rdma_worker {
	alignas(BP_FALSE_SHARING) struct bp_rdma *r;
	unsigned id;
	unsigned next_rail;	    /* striping */
	unsigned gone_seen;	    /* bp_rdma.gone_epoch at the last look */
	/* EVENT: every rail's CQ fd; EVENT and SPIN_SLEEP: the pipeline's
	 * intake fd (bp_worker_intake_fd), intake_fd, -1 if not added */
	int epfd;
	int intake_fd;
	/*
	 * EVENT: a set with the intake fd alone, and the waits since the
	 * last pass that moved something: a provider whose CQ fd says ready
	 * with nothing to reap (tcp with an operation in flight) would make
	 * the wait a spin; past two such waits the worker backs off as in
	 * SPIN_SLEEP, on this set, instead (wait_event)
	 */
	int idle_epfd;
	unsigned empty_waits;
	struct bpi_backoff backoff; /* SPIN_SLEEP */
	/* when the pipeline's abort reached this worker (rdma_cancel), 0
	 * before: from then on, a rail whose operations complete nothing for
	 * BPI_RDMA_ABORT_QUIET_NS is reset (stage.c's abort_quiet) */
	int64_t cancel_ns;
	/* who drives this slot: OWNER_NONE, a pipeline's worker (rdma_init
	 * to fini), or a direct handle (bp_rdma_direct_open to _close) */
	_Atomic int owner;
	/* direct: completed jobs go onto this FIFO (linked through
	 * op_context[0], free again once the provider is done with a job)
	 * instead of bp_worker_complete; out counts the jobs posted and not
	 * yet returned by bp_rdma_direct_poll */
	bool direct;
	struct bp_rdma_job *done_head, **done_tail;
	uint64_t out;
	struct bp_job **done;
	unsigned ndone; /* of BPI_RDMA_DONE_CAP, in stage.c */
	/* the batch post() is posting: post_batch entries each */
	struct bp_rdma_job **batch;
	fi_addr_t *baddr;
	void **bdesc;
	struct bpi_rail rails[BP_RDMA_MAX_RAILS];
	/* entries into and exits from calls out of the stage's own code
	 * (provider calls, prepare), written by the worker: odd while it is
	 * inside one, site says which (stage.c's out_enter, stall.c) */
	bpi_counter calls;
	_Atomic unsigned site; /* enum bpi_site */
	/* a stall report's first sight of a call that had not returned: its
	 * count and since when (stall.c, under bp_rdma.stall_lock) */
	uint64_t seen_calls;
	int64_t seen_ns;
};

/* The calls out of the stage's own code that the stall watch names. */
enum bpi_site {
	SITE_NONE = 0,
	SITE_WRITE,	 /* fi_writemsg */
	SITE_READ,	 /* fi_readmsg */
	SITE_CQ_READ,	 /* fi_cq_read */
	SITE_CQ_READERR, /* fi_cq_readerr */
	SITE_TRYWAIT,	 /* fi_trywait */
	SITE_AV_INSERT,	 /* fi_av_insert */
	SITE_MR_REG,	 /* fi_mr_reg (a buffer's first use) */
	SITE_CLOSE,	 /* fi_close of that registration, if not cached */
	SITE_REOPEN,	 /* a rail's endpoint reopened */
	SITE_PREPARE,	 /* bp_rdma_config.prepare */
	SITE_COUNT
};

#define BPI_RDMA_MAGIC 0x62705244u /* "bpRD": stage_ctx is a struct bp_rdma */

/*
 * After an abort, how long a rail's operations in flight may complete
 * nothing before they are cancelled and the endpoint closed: long enough
 * for a live peer to complete something (a 1 MiB write takes under 1 ms
 * on loopback), short enough that an abort with a dead peer returns well
 * within 100 ms instead of after peer_timeout_ns.
 */
#define BPI_RDMA_ABORT_QUIET_NS 20000000

enum {
	BPI_OWNER_NONE = 0,
	BPI_OWNER_WORKER,
	BPI_OWNER_DIRECT,
	BPI_OWNER_REGISTER /* bp_rdma_register, for its call */
};

/*
 * The stage's engine (stage.c), driven by a pipeline worker's callbacks or
 * by a direct handle (direct.c; w is then NULL): take jobs in and post;
 * one pass of reaping and posting (returns the jobs that moved, *busy the
 * rails that had work); the wait cq_wait asks for after a pass that moved
 * nothing (one wait, at most cap_ns when that is not 0); cancel the queued jobs (and, from then on, operations that
 * complete nothing for BPI_RDMA_ABORT_QUIET_NS).
 */
void bpi_rdma_take(struct bpi_rdma_worker *ws, struct bp_worker *w,
		   struct bp_rdma_job *const *jobs, unsigned n);
unsigned bpi_rdma_pass(struct bpi_rdma_worker *ws, struct bp_worker *w,
		       unsigned *busy);
void bpi_rdma_wait(struct bpi_rdma_worker *ws, struct bp_worker *w,
		   uint64_t cap_ns);
void bpi_rdma_moved(struct bpi_rdma_worker *ws);
void bpi_rdma_cancel(struct bpi_rdma_worker *ws, struct bp_worker *w);
/* A slot's start of use by a worker or a direct handle (stage.c). */
void bpi_rdma_slot_start(struct bp_rdma *r, struct bpi_rdma_worker *ws);

/* Open a rail's endpoint anew (stage.c); the caller owns the rail. */
int bpi_rdma_rail_reopen(struct bp_rdma *r, struct bpi_rdma_worker *ws,
			 unsigned k);

struct bpi_user_reg;
int bpi_rdma_rail_register(struct bp_rdma *r, unsigned id, unsigned k,
			   const struct bpi_user_reg *u);

/* Completed jobs a worker collects before handing them off (stage.c). */
#define BPI_RDMA_DONE_CAP 256

/* The stage's callbacks (stage.c); bp_rdma_create copies it, ctx = r. */
extern const struct bp_stage bpi_rdma_stage_ops;

/*
 * Mark peer gone, READY -> GONE once (stage.c): every worker fails its
 * queued and posted jobs to it at its next pass. Returns whether this call
 * made the change (false: not ready, or gone already).
 */
bool bpi_rdma_mark_gone(struct bp_rdma *r, uint32_t peer);

struct bp_rdma {
	unsigned magic;		   /* checked by init: stage_ctx is one */
	struct bp_rdma_config cfg; /* validated copy */
	struct bpi_logger log;
	struct fi_info *info; /* the provider's list */
	char provider[64];
	struct bp_stage stage;
	struct bpi_rdma_worker *workers;
	struct bpi_peer *peers;
	_Atomic unsigned npeers;
	/* bumped by each bp_rdma_peer_gone: workers look for its peers */
	_Atomic unsigned gone_epoch;
	struct bpi_mrcache *mrs;
	bool mr_local; /* the provider wants local descriptors */
	/* a plain completion already means the data landed (shm copies
	 * before it completes): BP_RDMA_JOB_DELIVERED costs nothing extra */
	bool completes_delivered;
	bool watch_pids; /* shm: peers' processes watched (bpi_peer.pidfd) */
	/* stall reports (cold): two stoppers may report at once */
	pthread_mutex_t stall_lock;
	/*
	 * What bp_rdma_register registered, so that an endpoint opened anew
	 * (bpi_rdma_rail_reopen) registers it again in its slot space.
	 * Written by bp_rdma_register while it owns every slot
	 * (BPI_OWNER_REGISTER), read by a slot's owner: the owner words'
	 * release and acquire order them.
	 */
	struct bpi_user_reg *regs;
	unsigned nregs, regs_cap;
};

struct bpi_user_reg {
	void *addr;
	size_t len;
	bool has_mem;
	struct bp_rdma_mem mem;
};

/* A worker slot's rail's registrations in the cache: one slot space per
 * endpoint generation (a reopened endpoint starts a new one). */
static inline uint32_t bpi_mr_slot(const struct bp_rdma *r, unsigned id,
				   unsigned k, uint32_t gen)
{
	return (gen * r->cfg.workers + id) * r->cfg.rails + k;
}

/* The stage's stall_report callback (stall.c): which worker is stuck in
 * one call out of the stage, and where. Sleeps 20 ms to look twice. */
int bpi_rdma_stall_report(void *ctx, char *buf, size_t size);

#endif
