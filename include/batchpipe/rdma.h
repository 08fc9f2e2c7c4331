/* SPDX-License-Identifier: MIT */
/*
 * batchpipe/rdma.h - the RDMA stage: pipeline workers that post one-sided
 * libfabric operations (write, read, write with immediate data) in batches
 * and reap their completions in batches. Built as its own library,
 * libbatchpipe-rdma (pkg-config batchpipe-rdma), when meson's rdma option
 * finds libfabric; the core library never includes libfabric.
 *
 * Three objects:
 *
 *   struct bp_rdma        the stage. Per worker and rail it owns a libfabric
 *                         domain, endpoint, completion queue and address
 *                         vector: nothing on the hot path is shared with
 *                         another worker. Give bp_rdma_stage(r) and r as the
 *                         pipeline's stage and stage_ctx.
 *   struct bp_rdma_node   the passive side: memory exposed to remote peers
 *                         (one registration and key per client and rail),
 *                         with a progress thread per rail for providers that
 *                         need the target to poll (tcp, sockets, shm).
 *                         bp-target is built on it, and so is a client that
 *                         is written into.
 *   struct bp_rdma_conn   a control connection to a bp-target daemon: it
 *                         hands out the peer description the stage needs.
 *
 * A rail stands for one NIC: on a node with several (e.g. 4 per
 * GPU), rail r of every worker opens the r-th distinct domain the provider
 * reports; with one NIC (or loopback) the rails are separate domains on it.
 * Jobs are striped across a worker's rails unless a job names its rail.
 *
 * Errors are negative errno values (bp_strerror()); the text of a provider's
 * error goes to the log callback.
 */
#ifndef BATCHPIPE_RDMA_H
#define BATCHPIPE_RDMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchpipe/job.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/stage.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

#define BP_RDMA_MAX_RAILS 8
#define BP_RDMA_ADDR_MAX  128 /* bytes of a provider's endpoint address */

/* ------------------------------------------------------------------ jobs */

enum bp_rdma_op {
	BP_RDMA_WRITE = 1, /* local buf -> remote (fi_write) */
	BP_RDMA_READ = 2,  /* remote -> local buf (fi_read) */
	BP_RDMA_WRITEDATA =
		3, /* write, plus imm at the target (fi_writedata) */
};

#define BP_RDMA_ANY_RAIL 0xffu /* the stage picks the rail (striping) */

/*
 * bp_rdma_job.flags: BP_RDMA_JOB_DELIVERED asks for the completion only once
 * the data is at the target (FI_DELIVERY_COMPLETE), not merely sent: on
 * tcp-based providers a plain write completes when it left this process.
 * Put it on the last write of a transfer whose arrival matters.
 */
#define BP_RDMA_JOB_DELIVERED 0x1u

/*
 * One RMA operation. Embed it (hdr first) in your own job struct, or use it
 * as is. The stage reads these fields in process and never changes them;
 * it sets hdr.status before the job reaches the sink: BP_JOB_OK, or
 *   -EINVAL   unknown op or flag, zero length, NULL buf, unknown peer, or a
 *             rail out of range
 *   -ERANGE   offset + len beyond the peer's region
 *   -EFAULT   buf could not be registered with the provider
 *   -EHOSTUNREACH the peer's address could not be inserted, or the peer
 *             is given up on this rail for now (see peer_timeout_ns)
 *   -ETIMEDOUT the provider refused the job for peer_timeout_ns, or took it
 *             and then completed nothing on that rail for that long (the
 *             rail's endpoint is then reopened)
 *   -ECONNABORTED the provider cancelled the operation (tcp does when the
 *             target drops the connection, e.g. after a write with a bad
 *             key), or the peer was told gone (bp_rdma_peer_gone):
 *             BP_JOB_CANCELLED stays the pipeline's abort alone
 *   other     the provider's error completion (-err of fi_cq_err_entry), the
 *             text of which went to the log callback
 * hdr.op_context is the libfabric operation context while in flight.
 */
struct bp_rdma_job {
	struct bp_job hdr;
	uint8_t op;	 /* enum bp_rdma_op */
	uint8_t rail;	 /* BP_RDMA_ANY_RAIL, or 0..rails-1 */
	uint16_t flags;	 /* BP_RDMA_JOB_DELIVERED, or 0 */
	uint32_t peer;	 /* from bp_rdma_peer_add */
	void *buf;	 /* local memory */
	size_t len;	 /* bytes, > 0 */
	uint64_t offset; /* into the peer's region */
	uint64_t imm;	 /* BP_RDMA_WRITEDATA: the immediate data */
};

/* Fill a job (the header is left as it is: the pipeline sets it). */
static inline void bp_rdma_job_set(struct bp_rdma_job *j, enum bp_rdma_op op,
				   uint32_t peer, void *buf, size_t len,
				   uint64_t offset)
{
	j->op = (uint8_t)op;
	j->rail = BP_RDMA_ANY_RAIL;
	j->flags = 0;
	j->peer = peer;
	j->buf = buf;
	j->len = len;
	j->offset = offset;
	j->imm = 0;
}

/* ---------------------------------------------------------------- peers */

/*
 * What an initiator needs to reach a region of a remote node: per rail the
 * node's endpoint address, the base to add offsets to (the region's virtual
 * address, or 0 where the provider addresses by offset) and the remote key.
 * bp_rdma_region_describe() and bp_rdma_conn_peer() fill one.
 */
struct bp_rdma_peer_desc {
	unsigned rails;
	uint64_t len; /* region bytes: offset + len must stay within */
	struct {
		uint8_t addr[BP_RDMA_ADDR_MAX];
		uint32_t addrlen;
		uint64_t base;
		uint64_t key;
	} rail[BP_RDMA_MAX_RAILS];
};

/* -------------------------------------------------------- memory types */

/* Where memory lives: registration passes it to the provider (FI_HMEM). */
enum bp_rdma_mem_iface {
	BP_RDMA_MEM_SYSTEM = 0,
	BP_RDMA_MEM_CUDA = 1, /* needs a provider with FI_HMEM; device id */
};

struct bp_rdma_mem {
	enum bp_rdma_mem_iface iface;
	int device; /* CUDA device ordinal; 0 for system memory */
};

/* ----------------------------------------------------------- the stage */

/* How a worker with operations in flight waits for their completions. */
enum bp_rdma_cq_wait {
	/* poll the completion queue on every worker pass (lowest latency,
	 * a core per worker) */
	BP_RDMA_CQ_BUSY = 0,
	/* poll, and after spin_ns without a completion sleep in short steps
	 * (growing to sleep_max_ns) between polls; the default */
	BP_RDMA_CQ_SPIN_SLEEP = 1,
	/* block on the completion queue's wait object (FI_WAIT_FD + epoll)
	 * for at most event_timeout_ns; -EOPNOTSUPP at create on providers
	 * without one (shm). Where the fd says ready with nothing to reap
	 * (or fi_trywait refuses) twice in a row, back off as SPIN_SLEEP
	 * does until a pass moves something */
	BP_RDMA_CQ_EVENT = 2,
	/* EVENT where the provider has a wait object, SPIN_SLEEP elsewhere
	 * (the node's default: a tcp target wakes on incoming traffic, while
	 * spinning and sleeping on a CQ that plain writes leave empty would
	 * pace them) */
	BP_RDMA_CQ_AUTO = 3,
};

/* Where workers run. */
enum bp_rdma_pin {
	BP_RDMA_PIN_NONE = 0, /* as the pipeline's worker_cpus say */
	/*
	 * each worker pins itself to the CPUs local to its rails' NIC (the
	 * PCI device's local_cpulist in sysfs, found from the provider's
	 * fi_nic bus attributes); where there is no NIC, to fallback_cpus[i %
	 * n_fallback_cpus] (or not at all), with a log line
	 */
	BP_RDMA_PIN_RAIL_LOCAL = 1,
};

struct bp_rdma_config {
	/* "tcp;ofi_rxm", "shm", "verbs;ofi_rxm", "efa", ...; NULL: the first
	 * provider that offers RDM endpoints with RMA */
	const char *provider;
	/* local address to bind, e.g. "127.0.0.1"; NULL: the provider's
	 * default. shm ignores it (it names endpoints by process) */
	const char *node;
	unsigned workers; /* must equal the pipeline's workers (default 1) */
	unsigned rails;	  /* endpoints per worker, 1..BP_RDMA_MAX_RAILS (1) */
	unsigned credits; /* most operations in flight per rail (64) */
	unsigned post_batch; /* most operations posted per rail per pass (16) */
	unsigned reap_batch; /* completions per fi_cq_read (16) */
	/* 1..65536 (64); the provider may hold fewer in an address vector
	 * (shm: 256), and create then fails with the provider's error */
	unsigned max_peers;
	enum bp_rdma_cq_wait cq_wait;
	uint64_t spin_ns;      /* SPIN_SLEEP: poll this long first (50 us) */
	uint64_t sleep_max_ns; /* SPIN_SLEEP: longest sleep (200 us) */
	uint64_t event_timeout_ns; /* EVENT: longest block (1 ms) */
	/*
	 * how long a rail waits on a peer (5 s): a job the provider keeps
	 * refusing with -FI_EAGAIN, or operations in flight with no
	 * completion at all. A dead peer on tcp or shm looks exactly like
	 * this (the provider never reports an error). Then its jobs fail
	 * (-ETIMEDOUT; queued ones -EHOSTUNREACH), in-flight ones by
	 * reopening the rail's endpoint, and the peer is given up on that
	 * rail for as long again (jobs fail fast), then tried anew.
	 */
	uint64_t peer_timeout_ns;
	/* open the domains with FI_HMEM, so bp_rdma_register takes device
	 * memory; -EOPNOTSUPP at create where the provider lacks it */
	bool hmem;
	enum bp_rdma_pin pin;
	const int *fallback_cpus;
	unsigned n_fallback_cpus;
	/*
	 * optional: called on the worker thread for each job just before it
	 * is posted (e.g. generate the data a write sends), one job ahead of
	 * the posts. A non-zero return (negative errno) fails that job with
	 * it, unposted.
	 */
	int (*prepare)(void *prepare_ctx, struct bp_rdma_job *job);
	void *prepare_ctx;
	void (*log)(void *log_ctx, enum bp_log_level level, const char *msg);
	void *log_ctx;
};

struct bp_rdma;

void bp_rdma_config_init(struct bp_rdma_config *c);

/*
 * Open the provider and, for every worker and rail, a domain, endpoint,
 * completion queue and address vector (the workers own them once the
 * pipeline starts). Returns 0 and *out, -EINVAL (a field out of range; the
 * log says which), -ENOENT (no such provider, or none with RDM + RMA),
 * -EOPNOTSUPP (cq_wait EVENT where the provider has no wait object), or
 * the provider's error. Nothing is left open on failure.
 */
int bp_rdma_create(const struct bp_rdma_config *c, struct bp_rdma **out);

/* The stage table: the pipeline config's stage, with stage_ctx = r. */
const struct bp_stage *bp_rdma_stage(const struct bp_rdma *r);

/*
 * Run to completion (docs/api/rdma.md, "Threaded or run to completion"):
 * the calling thread drives worker slot `slot` (0 .. workers-1) of r
 * itself, without a pipeline: it posts, reaps and gets its jobs back, with
 * no hand-off to another thread. The same checks, queues, credits, batches
 * and statuses as the stage's. The slot is the handle's until close: a
 * pipeline worker of that index fails to start meanwhile (-EBUSY), and the
 * other way round. One thread at a time per handle.
 *
 * open: 0 and *out, -EINVAL (NULL, slot out of range), -EBUSY (the slot
 * is in use), -ENOMEM.
 * post: queue jobs (set as for the stage: bp_rdma_job_set) and post what
 * the credits allow; returns n. A job refused (a bad field, a peer gone)
 * comes back from poll with its status, as every job does. -EINVAL (NULL),
 * -EPIPE after cancel (logged), -EBUSY (logged) when a job is out already
 * (posted and not yet back, or twice in the call): none is taken then.
 * poll: one pass of reaping and posting, then up to max finished jobs
 * into done (each with hdr.status set as in the table above); returns how
 * many. With none yet it waits as cq_wait says (BUSY polls, SPIN_SLEEP
 * backs off, EVENT blocks on the CQs' fds for event_timeout_ns at a time)
 * up to timeout_ns (0: one pass only; < 0: until one comes), and returns
 * 0 at once when nothing is posted. max 0: a pass, nothing returned.
 * -EINVAL for NULL.
 * cancel: queued jobs finish as BP_JOB_CANCELLED; posted ones finish as
 * they complete, or as BP_JOB_CANCELLED once their rail has completed
 * nothing for 20 ms; later posts are refused. Poll until outstanding is 0.
 * outstanding: jobs posted and not yet returned by poll.
 * close: 0, or -EBUSY (logged) while jobs are outstanding; -EINVAL NULL.
 */
struct bp_rdma_direct;

int bp_rdma_direct_open(struct bp_rdma *r, unsigned slot,
			struct bp_rdma_direct **out);
int bp_rdma_direct_post(struct bp_rdma_direct *d,
			struct bp_rdma_job *const *jobs, unsigned n);
int bp_rdma_direct_poll(struct bp_rdma_direct *d, struct bp_rdma_job **done,
			unsigned max, int64_t timeout_ns);
int bp_rdma_direct_cancel(struct bp_rdma_direct *d);
uint64_t bp_rdma_direct_outstanding(const struct bp_rdma_direct *d);
int bp_rdma_direct_close(struct bp_rdma_direct *d);

/* The provider in use ("tcp;ofi_rxm") and its rail count. */
const char *bp_rdma_provider(const struct bp_rdma *r);
unsigned bp_rdma_rails(const struct bp_rdma *r);

/*
 * Add a remote region; returns its peer id (>= 0) for bp_rdma_job.peer,
 * -EINVAL (NULL, rails differ from the stage's, an empty address), or
 * -ENOSPC (max_peers in use). Any thread, any time: workers insert the
 * address into their own address vectors on first use. Ids are below
 * max_peers; an id given back with bp_rdma_peer_remove is handed out again.
 * On shm, a peer whose address is one of the library's ("fi_shm://bp-PID-")
 * is watched: its process's pidfd is polled where a dead peer leads (a
 * post refused with -FI_EAGAIN, operations that complete nothing; never per
 * post), and once it has exited the peer is given up as by
 * bp_rdma_peer_gone (a log line says so), so its jobs fail at once rather
 * than after peer_timeout_ns (docs/api/rdma.md, "When a peer dies"). BP_RDMA_NO_SHM_SWEEP turns the
 * watch off with the sweep (PID namespaces that share /dev/shm).
 */
int bp_rdma_peer_add(struct bp_rdma *r, const struct bp_rdma_peer_desc *d);

/*
 * Give a peer id back: a later bp_rdma_peer_add may reuse it, and each
 * worker drops its address (fi_av_remove: the provider may close its
 * connection) the next time a job names the id. The caller must have had
 * every job it gave for this peer back from the sink, and give none after:
 * a job naming a removed id fails with -EINVAL. Returns 0, or -EINVAL (NULL
 * r, an id out of range or not in use). Any thread.
 */
int bp_rdma_peer_remove(struct bp_rdma *r, int id);

/*
 * The application knows the peer is gone (its process died, its control
 * connection ended): do not wait peer_timeout_ns to find out. Its jobs
 * fail with -ECONNABORTED: those given from now on at once, those queued
 * at each worker's next pass. A rail with operations in flight to it posts
 * nothing more until its other operations are back (one round trip), then
 * reopens its endpoint, failing the gone peer's operations, which a dead
 * peer never completes (shm; tcp at times), with -ECONNABORTED; any that
 * do complete meanwhile complete as usual. Other peers' jobs go on; only
 * theirs that were queued on such a rail wait, for that round trip. The
 * id stays taken until bp_rdma_peer_remove, once every job of the peer is
 * back. Returns 0 (also when told already), or -EINVAL (NULL r, an id out
 * of range or not in use). Any thread.
 */
int bp_rdma_peer_gone(struct bp_rdma *r, int id);

/*
 * Register [addr, addr+len) with every worker's domains, for memory that
 * jobs use again and again (a pool). Jobs may pass any buffer: one that is
 * not inside a registered range is registered by the worker on first use
 * and kept in the stage's registration cache (liburcu's rculfhash, read
 * without locks) until bp_rdma_destroy; such buffers must stay mapped
 * while the stage lives. mem NULL: system memory. Returns 0, -EINVAL
 * (NULL, len 0, or unknown iface), -EOPNOTSUPP (the provider has no FI_HMEM
 * for a device iface), -EBUSY (logged: a worker slot is owned, by a
 * running pipeline's worker or an open bp_rdma_direct handle, or another
 * register holds it: register before bp_pipeline_start or
 * bp_rdma_direct_open), or the provider's error. The stage keeps what it
 * registered and registers it again on an endpoint opened anew.
 */
int bp_rdma_register(struct bp_rdma *r, void *addr, size_t len,
		     const struct bp_rdma_mem *mem);

/* Per worker and rail counters, written by that worker only. */
#define BP_RDMA_REAP_BUCKETS 8 /* completions per read: 0,1,2-3,..,64+ */

struct bp_rdma_rail_stats {
	uint64_t posted;       /* operations accepted by the provider */
	uint64_t completed;    /* completions reaped, ok */
	uint64_t failed;       /* error completions and local failures */
	uint64_t eagain;       /* -FI_EAGAIN answers from post calls */
	uint64_t pending_high; /* most jobs waiting in the pending queue */
	uint64_t cq_reads;     /* fi_cq_read calls */
	uint64_t cq_empty;     /* fi_cq_read calls that returned nothing */
	uint64_t reap_hist[BP_RDMA_REAP_BUCKETS]; /* completions per read */
	uint64_t mr_cache_misses; /* buffers registered on first use */
};

/* Snapshot of one worker's rail (exact after drain). Returns 0 or -EINVAL. */
int bp_rdma_get_rail_stats(const struct bp_rdma *r, unsigned worker, unsigned rail,
		       struct bp_rdma_rail_stats *s);

/*
 * Whether a worker is stuck in a call out of the stage's own code: *calls
 * gets a count that worker advances on entering and on leaving each
 * provider call (posts, CQ reads, fi_trywait, AV inserts, registrations,
 * endpoint reopens) and each call of prepare, odd while it is inside one;
 * *site (if not NULL) the name of the call it is inside, or of the last
 * one ("fi_writemsg", "fi_cq_read", "prepare", ...; NULL before the first
 * or while the count moves). The same odd count read twice, t
 * apart, means one call has not returned for t: a drain waits for it
 * without end (docs/api/rdma.md, "When a peer dies"). The stage's
 * stall_report says the same in the pipeline's stall reports. Any thread.
 * Returns 0, or -EINVAL (r or calls NULL, worker out of range).
 */
int bp_rdma_worker_calls(const struct bp_rdma *r, unsigned worker,
			 uint64_t *calls, const char **site);

/*
 * The stage's statistics as one JSON object, {"provider":..,"workers":[
 * {"rails":[{..}]}]}: snprintf rules (the length needed; truncates).
 */
int bp_rdma_stats_json(const struct bp_rdma *r, char *buf, size_t size);

/* Close everything. The pipeline must be destroyed (or never started). */
void bp_rdma_destroy(struct bp_rdma *r);

/* ------------------------------------------------------ the passive side */

struct bp_rdma_node;
struct bp_rdma_region;

struct bp_rdma_node_config {
	const char *provider; /* as bp_rdma_config */
	const char *node;     /* address to bind ("127.0.0.1"); NULL */
	unsigned rails;	      /* 1..BP_RDMA_MAX_RAILS (1) */
	/* a thread per rail polls its completion queue (true, default) */
	bool progress_threads;
	/* how an idle progress thread waits: BUSY (lowest latency, a core
	 * per rail), SPIN_SLEEP (spin_ns, then sleeps growing to
	 * sleep_max_ns), EVENT (the CQ's wait fd, which wakes on incoming
	 * traffic, and polls on after a wake-up for spin_ns (1 us..1 ms),
	 * growing to 2 ms while wake-ups come sooner than spin_ns, yielding
	 * its CPU meanwhile and stopping when another thread takes it;
	 * docs/api/rdma.md; -EOPNOTSUPP where the provider has none) or AUTO
	 * (the default: EVENT where possible) */
	enum bp_rdma_cq_wait progress_wait;
	uint64_t spin_ns;      /* 50 us */
	uint64_t sleep_max_ns; /* 50 us */
	bool hmem;	       /* as bp_rdma_config: device memory in expose */
	/* optional: immediate data of a BP_RDMA_WRITEDATA arrived (on a
	 * progress thread) */
	void (*on_data)(void *data_ctx, unsigned rail, uint64_t imm);
	void *data_ctx;
	void (*log)(void *log_ctx, enum bp_log_level level, const char *msg);
	void *log_ctx;
	/* optional: as bp_pipeline_config's, on each progress thread (role
	 * BP_THREAD_RDMA_PROGRESS, index: the rail), which starts with
	 * asynchronous signals blocked as the pipeline's threads do */
	bp_thread_hook *thread_start;
	bp_thread_hook *thread_stop;
	void *thread_ctx;
};

void bp_rdma_node_config_init(struct bp_rdma_node_config *c);

/* Returns 0 and *out, -EINVAL, -ENOENT (provider), -EOPNOTSUPP (hmem or
 * EVENT progress unsupported), -ENOMEM, a progress thread's creation
 * error, or the provider's error. Nothing is left open on failure. */
int bp_rdma_node_create(const struct bp_rdma_node_config *c,
			struct bp_rdma_node **out);

/*
 * Expose [addr, addr+len) to remote writes and reads through every rail,
 * under keys of its own (each client of a daemon gets its own region).
 * Any thread. Returns 0 and *out, -EINVAL, -EOPNOTSUPP (iface), or the
 * provider's error.
 */
int bp_rdma_node_expose(struct bp_rdma_node *n, void *addr, size_t len,
			const struct bp_rdma_mem *mem,
			struct bp_rdma_region **out);

/* What a remote stage needs to reach the region (bp_rdma_peer_add). */
void bp_rdma_region_describe(const struct bp_rdma_region *reg,
			     struct bp_rdma_peer_desc *d);

/* Withdraw the region (its keys stop working). NULL is accepted. */
void bp_rdma_region_close(struct bp_rdma_region *reg);

/*
 * Without progress threads: poll every rail's completion queue once.
 * Returns the number of entries reaped, or a negative errno.
 */
int bp_rdma_node_progress(struct bp_rdma_node *n);

/* Immediate-data arrivals counted so far (all rails). */
uint64_t bp_rdma_node_data_count(const struct bp_rdma_node *n);

/*
 * Whether rail's polling is stuck inside the provider: *calls gets a count
 * the polling thread (or bp_rdma_node_progress) advances on entering and on
 * leaving each fi_cq_read, odd while inside one. The same odd count read
 * twice, t apart, is a call that has not returned for t (libfabric 1.17's
 * shm after a peer died holding its lock: docs/api/rdma.md, "When a peer
 * dies"); bp_rdma_node_destroy would wait for it without end. Any thread.
 * Returns 0, or -EINVAL (n or calls NULL, rail out of range).
 */
int bp_rdma_node_rail_calls(const struct bp_rdma_node *n, unsigned rail,
			    uint64_t *calls);

/*
 * Remove the shm endpoint files (/dev/shm/bp-PID-...) that the library's
 * shm endpoints of processes now gone left behind (a process killed with
 * SIGKILL leaves them: 16 MiB each). Only files of this user (any user's
 * for root) whose PID no longer exists. Returns the number removed, or a
 * negative errno (/dev/shm unreadable). Any thread, any time; the library
 * calls it itself when it opens its first shm endpoint in a process
 * (unless BP_RDMA_NO_SHM_SWEEP is set: where PID namespaces share
 * /dev/shm, a live process of another one looks gone; the variable turns
 * the stage's watch of shm peers' processes off too, bp_rdma_peer_add).
 */
int bp_rdma_shm_sweep(void);

const char *bp_rdma_node_provider(const struct bp_rdma_node *n);

/* Stop the progress threads, close the regions still open and the
 * endpoints. NULL accepted. */
void bp_rdma_node_destroy(struct bp_rdma_node *n);

/* ------------------------------------------------ talking to bp-target */

struct bp_rdma_conn;

struct bp_rdma_conn_config {
	const char *host;     /* bp-target's control address ("127.0.0.1") */
	unsigned port;	      /* its control port */
	const char *token;    /* shared secret, or NULL (loopback daemons) */
	const char *provider; /* must match the daemon's; NULL: its own */
	unsigned rails;	      /* must match the daemon's rail count */
	uint64_t region_len;  /* bytes of target memory to ask for */
	int64_t timeout_ns;   /* for each control exchange (default 5 s) */
	void (*log)(void *log_ctx, enum bp_log_level level, const char *msg);
	void *log_ctx;
};

void bp_rdma_conn_config_init(struct bp_rdma_conn_config *c);

/*
 * Connect to bp-target and get a region of region_len bytes of its memory,
 * exposed to this client only. Returns 0 and *out, -ECONNREFUSED /
 * -ETIMEDOUT / -EHOSTUNREACH (the daemon cannot be reached), -EACCES (token
 * refused), -EPROTO (a malformed answer), -EINVAL (a bad argument, or
 * provider or rails the daemon does not have: the log says which),
 * -ENOMEM (the daemon could not allocate the region).
 */
int bp_rdma_connect(const struct bp_rdma_conn_config *c,
		    struct bp_rdma_conn **out);

/* The daemon's region for this client, for bp_rdma_peer_add. */
void bp_rdma_conn_peer(const struct bp_rdma_conn *conn,
		       struct bp_rdma_peer_desc *d);

/* The provider the daemon serves (what a stage must open to reach it). */
const char *bp_rdma_conn_provider(const struct bp_rdma_conn *conn);

/*
 * The random fill: ask the daemon to RDMA-write len bytes of the
 * page generator's output (bp_rdma_fill_page, seeded with seed) into a
 * region of ours (d from bp_rdma_region_describe), in pages of page bytes.
 * Blocks until the daemon says it is done; progress (bytes written so far)
 * is reported through the optional callback. The daemon fills only
 * endpoints of the process holding conn (over shm: of its own user).
 * Returns 0, or the daemon's error (negative errno; -EACCES: d is not this
 * process's), or a connection error.
 */
int bp_rdma_conn_fill(struct bp_rdma_conn *conn,
		      const struct bp_rdma_peer_desc *d, uint64_t len,
		      uint32_t page, uint64_t seed,
		      void (*progress)(void *ctx, uint64_t done, uint64_t len),
		      void *progress_ctx);

/*
 * Ask the daemon what its region for us holds: a digest (bp_rdma_digest)
 * of [offset, offset+len), and the immediate data it has received (count and
 * sum over all clients). Lets a test check writes without reading back.
 * Returns 0, -ERANGE (outside the region), or a connection error.
 */
struct bp_rdma_target_query {
	uint64_t digest;
	uint64_t imm_count;
	uint64_t imm_sum;
};
int bp_rdma_conn_query(struct bp_rdma_conn *conn, uint64_t offset, uint64_t len,
		       struct bp_rdma_target_query *q);

/* Say goodbye and close (the daemon frees this client's region). */
void bp_rdma_conn_close(struct bp_rdma_conn *conn);

/*
 * The fill's page generator: the bytes of page number index (page bytes
 * long, a multiple of 8) under seed. Both sides use it: the daemon to
 * write, the client to verify.
 */
void bp_rdma_fill_page(uint64_t seed, uint64_t index, void *buf, size_t page);

/* A 64-bit digest of len bytes (FNV-1a over 8-byte words, then bytes). */
uint64_t bp_rdma_digest(const void *buf, size_t len);

/*
 * The digest in pieces: h = BP_RDMA_DIGEST_INIT, then h =
 * bp_rdma_digest_more(h, piece, n) for each piece in order, every piece
 * but the last a multiple of 8 bytes long, gives bp_rdma_digest of the
 * whole.
 */
#define BP_RDMA_DIGEST_INIT UINT64_C(0xcbf29ce484222325)
uint64_t bp_rdma_digest_more(uint64_t h, const void *buf, size_t len);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* BATCHPIPE_RDMA_H */
