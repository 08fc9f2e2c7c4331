/* SPDX-License-Identifier: MIT */
/*
 * target.h - bp-target's parts, shared between its files:
 *
 *   main.c     options, start-up, the epoll loop, shutdown
 *   clients.c  control connections: input buffers, the conversation, stalls
 *   filler.c   the fill engine: a pipeline with the RDMA stage that writes
 *              generated pages into clients' regions
 *   health.c   wedged rails, orphaned shm files, a stop that is bounded
 *   auth.c     the token file and its constant-time check
 *   fillauth.c whom a FILL may write to: the asking client's endpoints
 *   tlog.c     log lines on stderr
 *
 * Threads: the main thread owns every socket and every client; a fill
 * thread per running fill submits jobs; the pipeline's workers and sink and
 * the node's progress threads belong to the library. The fill threads and
 * the sink talk to the main thread only through a fill request's atomics
 * and an eventfd.
 */
#ifndef BP_TARGET_H
#define BP_TARGET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchpipe/pipeline.h>
#include <batchpipe/rdma.h>

#include "src/rdma/proto.h"

/*
 * Client regions are written by one-sided RDMA: a libfabric progress thread
 * copies the bytes in with no synchronisation the CPU side could see (the
 * control protocol says when to look). QUERY's digest reads them anyway, by
 * design; under TSAN those reads are excluded from race detection.
 */
#if BP_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
#define rdma_reads_begin() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define rdma_reads_end()   AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define rdma_reads_begin() ((void)0)
#define rdma_reads_end()   ((void)0)
#endif

struct target_opts {
	const char *listen;   /* control address */
	unsigned port;	      /* 0: ephemeral */
	const char *provider; /* NULL: auto */
	unsigned rails;
	const char *fabric_node; /* address libfabric binds */
	const char *token_file;	 /* NULL: none */
	unsigned max_clients;
	uint64_t max_region;
	unsigned fill_workers;
	unsigned stall_ms;
	uint32_t stage_slot; /* bytes of one staging buffer: the largest page */
	unsigned stage_slots;	 /* staging buffers: pages in flight at most */
	unsigned max_fill_peers; /* distinct client regions FILL may target */
	enum bp_rdma_cq_wait progress_wait; /* the node's progress threads */
	unsigned stop_timeout_ms; /* then exit 3 without a stuck thread */
	unsigned wedge_ms;	  /* a rail inside one call this long */
	unsigned peer_timeout_ms; /* the fill stage's peer_timeout_ns */
	int verbose;
};

struct client;
struct quarantined;
struct health;
struct filler;
struct fill_req;

struct target {
	struct target_opts o;
	char token[BPI_TOKEN_MAX + 1];
	size_t token_len;
	bool have_token;
	struct bp_rdma_node *node;
	struct filler *filler;
	/* sum of the immediate data the node received: written by the
	 * progress threads, read by the main thread (see on_data) */
	_Atomic uint64_t imm_sum;
	int epfd;
	int lfd;			/* listening socket */
	int sigfd;			/* SIGTERM, SIGINT */
	int evfd;			/* fills: "look at me" */
	struct client *clients;		/* doubly linked, the main thread's */
	struct quarantined *quarantine; /* regions' memory, keys withdrawn */
	unsigned nclients;
	uint64_t next_id;
	bool quit;
	struct health *health; /* health.c */
};

/* tlog.c. client may be NULL (a daemon-wide line). */
__attribute__((format(printf, 4, 5))) void tlog(const struct target *t,
						int verbose_only,
						const struct client *c,
						const char *fmt, ...);
/* the library's log callback: ctx is the target */
void tlog_lib(void *ctx, enum bp_log_level level, const char *msg);
/* "client 3 (127.0.0.1:4242)" */
const char *client_name(const struct client *c);

/* auth.c */
int auth_load(struct target *t, const char *path);
bool auth_check(const struct target *t, const char *token, size_t len);

/* clients.c */
void clients_accept(struct target *t);
void clients_event(struct target *t, struct client *c, uint32_t events);
void clients_tick(struct target *t); /* stalls, fill progress; ~100 ms */
/* a step of every query in progress (clients_next_tick_ms is 0 while
 * one is) */
void clients_work(struct target *t);
/* shutdown, in this order: stop_fills (threads joined), filler_destroy,
 * close_all (requests freed, regions closed, their memory quarantined),
 * bp_rdma_node_destroy (the rail threads joined), then release_memory:
 * a write a rail's progress was still receiving lands in quarantined
 * pages, never in unmapped ones */
void clients_stop_fills(struct target *t);
void clients_close_all(struct target *t);
void clients_release_memory(struct target *t);
/* ms until the next thing clients_tick must do, at most 100 */
int clients_next_tick_ms(const struct target *t);

/*
 * fillauth.c: may the client at the other end of a control connection
 * (peer: its address, local: ours) have a FILL write to d's endpoints?
 * 0, or -EACCES with the reason in why (for the log). *hint: the process
 * found holding the client's socket last time (0 at first), looked at
 * first. fill_auth_init notes the daemon's own shm files (after they
 * exist), which no FILL may name.
 */
struct sockaddr_storage;
void fill_auth_init(void);
int fill_auth_check(const struct sockaddr_storage *peer,
		    const struct sockaddr_storage *local,
		    const struct bp_rdma_peer_desc *d, long *hint, char *why,
		    size_t n);

/*
 * health.c. health_tick (from the loop, and once at start): every rail's
 * progress thread watched for a provider call that does not return
 * (--wedge-ms: logged, and new clients refused while it lasts), orphaned
 * shm files swept every 10 s. health_wedged: whether a rail is wedged, and
 * the text for a refused HELLO. The stop: health_stop_begin arms a
 * watchdog, health_stop_step names what the stop does now, health_stop_end
 * disarms it; a stop not ended within --stop-timeout-ms is logged with
 * its step, the listening socket and the daemon's shm files go, and the
 * process exits with status 3.
 */
void health_tick(struct target *t);
bool health_wedged(const struct target *t, char *why, size_t n);
void health_stop_begin(struct target *t);
void health_stop_step(const char *step);
void health_stop_end(struct target *t);

/* filler.c */
int filler_create(struct target *t, struct filler **out);
void filler_destroy(struct filler *f);
/*
 * The stage's peer id for d, referenced (>= 0), or -ENOSPC (every one of
 * --max-fill-peers held), -EINVAL, -EPROTO. filler_peer_put gives the
 * reference back once none of the holder's fills is in flight; the last
 * one frees the id. filler_peer_is: whether id is held and describes d.
 */
int filler_peer_get(struct filler *f, const struct bp_rdma_peer_desc *d);
bool filler_peer_is(const struct filler *f, int id,
		    const struct bp_rdma_peer_desc *d);
void filler_peer_put(struct filler *f, int id);
/*
 * A holder of id went away with a fill in flight: if it was the id's only
 * holder, tell the stage the peer is gone (bp_rdma_peer_gone), so that
 * pages a dead client never completes fail now, not after the stage's
 * peer timeout, and the fills of others do not wait behind them.
 */
void filler_peer_abandon(struct filler *f, int id);
/* The fill stage (its workers' provider calls are watched: health.c). */
const struct bp_rdma *filler_rdma(const struct filler *f);
/*
 * Start a fill of m (a FILL) to peer (from filler_peer_get for m's desc):
 * returns 0 and *out (a thread is submitting its pages), or -EINVAL (page
 * larger than a staging buffer, bad desc, peer not m's), -ENOMEM, -EAGAIN
 * (thread creation).
 */
int filler_start(struct filler *f, const struct bpi_msg *m, int peer,
		 struct fill_req **out);
/* Stop submitting more of r's pages (the client went away). */
void fill_req_stop(struct fill_req *r);
/* Bytes written so far; true and *status, *ns once every page is in. */
bool fill_req_poll(struct fill_req *r, uint64_t *done, int *status,
		   uint64_t *ns);
/* Wait for r's thread to stop submitting (fill_req_stop first). */
void fill_req_join(struct fill_req *r);
/* Join and free: once fill_req_poll said finished, or once the pipeline
 * is gone (filler_destroy: nothing of r can be in flight any more). */
void fill_req_free(struct fill_req *r);

#endif /* BP_TARGET_H */
