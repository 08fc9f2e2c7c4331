/* SPDX-License-Identifier: MIT */
/*
 * rdma_harness.h - what the experiments of `bpbench rdma` share: the
 * target of a run and its verification (rdma_bench_target.c), the
 * pipeline variant (rdma_variant_pipe.c) and the raw libfabric variant
 * (rdma_variant_raw.c), the points and the latency results; rdma/rdma.c
 * (the subcommand), rdma/latency.c and rdma/report.c use them.
 * The design of the experiment is described at the top of rdma/rdma.c.
 */
#ifndef BPBENCH_RDMA_HARNESS_H
#define BPBENCH_RDMA_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <batchpipe/error.h>
#include <batchpipe/pipeline.h>
#include <batchpipe/rdma.h>
#include <batchpipe/ring.h>

#include "lab/bpbench.h"
#include "rdma/rdma_raw.h"
#include "rdma/rdma_target.h"

/* "bpbench rdma", or the subcommand that uses the harness, for messages */
extern const char *rb_cmd_name;
#define BENCH_CMD	 rb_cmd_name
#define RB_MAX_PROV	 4
#define RB_MAX_LIST	 8
#define RB_MAX_RUNS	 100
#define RB_MAX_POINTS	 1024
#define RB_MAX_TIDS	 512
#define RB_MAX_PRODUCERS 16
#define RB_MAX_SLOTS	 1024
#define RB_DEF_SLOTS	 16
#define RB_SINK_CHUNK	 256
#define RB_FREE_WAIT_NS	 1000000 /* a producer re-checks stop this often */
#define RB_LOST_NS	 INT64_C(10000000000) /* a run not done by then: fatal */
#define RB_LAND_NS	 INT64_C(3000000000)  /* writes must land by then */
#define RB_POOL_BYTES	 (256u << 20)	      /* most pipeline buffer bytes */
#define RB_MAX_SAMPLES	 (1u << 21)
#define RB_LAT_SIZE	 4096
#define RB_PACE_NS	 10000000 /* 100 ops/s */

/* the variants; direct (run to completion) only with --direct */
enum { RB_PIPE = 0, RB_RAW = 1, RB_DIRECT = 2, RB_NVAR = 3 };

/* the base point: a dimension not given on the command line */
#define RB_BASE_POST  16
#define RB_BASE_REAP  16
#define RB_BASE_DEPTH 16

struct rb_opts {
	const char *prov[RB_MAX_PROV];
	int nprov;
	char prov_buf[256];
	unsigned sizes[RB_MAX_LIST], post[RB_MAX_LIST], reap[RB_MAX_LIST];
	unsigned depth[RB_MAX_LIST], workers[RB_MAX_LIST], rails[RB_MAX_LIST];
	int nsizes, npost, nreap, ndepth, nworkers, nrails;
	int grid;	     /* a list was given: the cross product */
	struct bench_args a; /* runs, ms, output */
	unsigned producers, region_mib, lat_ms, idle_ms, max_slots;
	const char *node;
	int latency_only, no_latency;
	int intake_only;	 /* --intake */
	int direct;		 /* --direct: the run-to-completion variant too */
	unsigned intake_samples; /* per completion wait */
	int lat_set, idle_set; /* given: --quick leaves them */
	int target_mode;       /* enum rb_target_kind: AUTO, DAEMON, NODE */
};

/* What a run writes into. */
enum rb_target_kind {
	RB_TARGET_AUTO = 0,   /* bp-target where it starts, else NODE */
	RB_TARGET_DAEMON = 1, /* bp-target, a process */
	RB_TARGET_NODE = 2,   /* a bp_rdma_node in this process */
	RB_TARGET_PLAIN = 3,  /* bp-plain-target, a process */
};

struct rb_target {
	char provider[64];
	const char *node;
	unsigned rails;
	uint64_t len;
	bool daemon;
	/* in-process */
	struct bp_rdma_node *n;
	struct bp_rdma_region *reg;
	uint8_t *mem;
	pid_t tids[RB_MAX_TIDS];
	int ntids;
	/* daemon */
	struct rt_daemon d;
	struct bp_rdma_conn *conn;
	struct bp_rdma_peer_desc desc;
	/* plain */
	bool plain;
	struct rt_plain pl;
};

struct rb_check {
	unsigned run, nlanes, slots;
	const uint64_t *ops; /* [nlanes] ops written by each lane */
	size_t size;
	uint64_t outstanding; /* most writes of the variant in flight at once */
};

struct rb_point {
	int prov;
	unsigned size, post, reap, depth, workers, rails;
	bool skipped;
	char note[300];
	/* [variant][run] */
	double gbps[RB_NVAR][RB_MAX_RUNS], mops[RB_NVAR][RB_MAX_RUNS];
	double cpu[RB_NVAR][RB_MAX_RUNS];
};

struct rb_result {
	double gbps, mops, cpu_ns; /* per op */
};

struct rb_pjob {
	struct bp_rdma_job rj; /* first: the sink's bp_job is &rj.hdr */
	int64_t t0; /* latency runs: the clock before bp_pipeline_submit */
	unsigned lane;
} __attribute__((aligned(BENCH_CACHELINE)));

struct rb_pipe;

struct rb_prod {
	struct rb_pipe *pp;
	unsigned lane;
	struct rb_pjob *jobs;
	unsigned njobs;
	uint8_t *bufs;
	struct bp_ring *free; /* SP: the sink; SC: this producer */
	struct bp_job **batch;
	pthread_t th;
	uint64_t next_i; /* ops submitted this run */
	int64_t t_start, cpu_ns;
} __attribute__((aligned(BENCH_CACHELINE)));

enum rb_sink_mode { RB_SINK_LOOP, RB_SINK_LAT, RB_SINK_PACED };

struct rb_pipe {
	struct bp_rdma *r;
	struct bp_pipeline *p;
	size_t size;
	unsigned P, B, slots, run;
	unsigned W, R; /* the stage's workers and rails */
	int peer;
	struct rb_prod *prod;
	pid_t tids[RB_MAX_TIDS]; /* the pipeline's workers and sink */
	int ntids;
	enum rb_sink_mode mode;
	atomic_int stop;
	/* the sink's, read by the main thread after done says so */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t done;
	int64_t last_ns;
	uint64_t bad;
	int bad_status;
	struct bp_job **ret; /* [P][RB_SINK_CHUNK] */
	unsigned *nret;	     /* [P] */
	/* latency and paced runs */
	int64_t *samples;
	unsigned max_samples, nsamples;
	uint64_t lat_next_i;
	int lat_err;
	atomic_int lat_end;  /* the sink stopped resubmitting */
	atomic_int job_free; /* paced: the job is back */
};

struct rb_pipe_cfg {
	unsigned workers, rails, depth, post, reap, P, njobs;
	size_t size;
	unsigned slots;
	enum bp_rdma_cq_wait cq_wait;
	bool busy_threads; /* workers and sink busy-poll too */
	enum rb_sink_mode mode;
};

struct rb_raw {
	struct rr_lane *lanes;
	unsigned W;
	atomic_int stop;
};

struct rb_dlane;
struct rb_direct {
	struct bp_rdma *r;
	struct rb_dlane *lanes;
	unsigned W, R;
	atomic_int stop;
};
struct rb_results {
	struct rb_point *pt;
	int npoints;
	int runs;
};

#define RB_NLAT 7

enum {
	RB_L_PBUSY,
	RB_L_PSPIN,
	RB_L_PEVENT,
	RB_L_DBUSY, /* run to completion: bp_rdma_direct_* on one thread */
	RB_L_DEVENT,
	RB_L_RBUSY,
	RB_L_REVENT
};

struct rb_lat {
	bool na; /* the provider has no wait fd */
	char note[300];
	double avg, p50, p90, p99, p999, max; /* us */
	double ops_s, client_cpu, target_cpu;
};

#define RB_NIDLE 3 /* the stage's cq_wait modes */

struct rb_idle {
	bool na;
	double idle_cpu, paced_cpu; /* % of one core */
};

/* --intake: per completion wait (rdma/intake.c) */
struct rb_intake {
	bool na;
	char note[300];
	unsigned samples;  /* with the first write in flight */
	unsigned not_held; /* samples without: left out */
	struct rb_lat lat; /* submit -> post */
};
struct rb_prov_intake {
	bool done;
	struct rb_intake w[RB_NIDLE];
};
#define RB_RTC_RUNS 9 /* run to completion against raw: interleaved pairs */
struct rb_prov_lat {
	bool done;
	struct rb_lat lat[RB_NLAT];
	struct rb_idle idle[RB_NIDLE];
	/* busy-poll, direct then raw, RB_RTC_RUNS times: p50 and p99 (us) */
	int rtc_n;
	double rtc_p50[2][RB_RTC_RUNS], rtc_p99[2][RB_RTC_RUNS];
};

/* What the printers get (bench_emit's ctx). */
struct rb_report {
	const struct rb_opts *o;
	const struct rb_results *r;
	const struct rb_prov_lat *pl;
	const char *const *tdesc; /* per provider: what the target was */
};

/* ---- the target and its check (rdma/rdma_bench_target.c) ----------------- */

void rb_log(void *ctx, enum bp_log_level level, const char *msg);
/* enum bp_rdma_cq_wait's words (bp-target --progress-wait), and back: the
 * value, or -1 */
#define RB_NCQ_WAIT (BP_RDMA_CQ_AUTO + 1)
extern const char *const rb_cq_wait_word[RB_NCQ_WAIT];
int rb_cq_wait_parse(const char *word);
extern int rb_target_wait;
extern int rb_raw_same_src;
void rb_target_close(struct rb_target *t);
/* kind: enum rb_target_kind; says on stderr what the target is */
int rb_target_open(struct rb_target *t, const char *provider, const char *node,
		   unsigned rails, uint64_t len, int kind);
/*
 * A target process, RB_TARGET_DAEMON (rb_target_wait: its progress wait)
 * or RB_TARGET_PLAIN (one rail), and nothing else: 0, or a negative errno
 * with the reason in why.
 */
int rb_target_start(struct rb_target *t, const char *provider, const char *node,
		    unsigned rails, uint64_t len, int kind, char *why,
		    size_t whylen);
/* The target's process, or 0 for the in-process node. */
pid_t rb_target_pid(const struct rb_target *t);
int64_t rb_target_cpu_ns(const struct rb_target *t);
void rb_target_desc(const struct rb_target *t, unsigned rails,
		    struct bp_rdma_peer_desc *d);
extern uint64_t rb_words_checked;
/* The digest of the 8 bytes at off in the target region. */
int rb_target_fp(struct rb_target *t, uint64_t off, uint64_t *fp);
void rb_verify_target(struct rb_target *t, const struct rb_check *c,
		      const char *what);
unsigned rb_next_run(void);
void rb_spawn(pthread_t *t, void *(*fn)(void *), void *arg);

/* ---- the pipeline variant (rdma/rdma_variant_pipe.c) --------------------- */

extern int rb_thread_wait;
extern int rb_verbose;
/* --verbose's handler (rb_verbose = 1) */
int rb_opt_verbose(struct bench_args *a, const char *arg);
void rb_pipe_close(struct rb_pipe *pp);
int rb_pipe_open(struct rb_pipe *pp, struct rb_target *t,
		 const struct rb_pipe_cfg *c);
void rb_pipe_wait_done(struct rb_pipe *pp, uint64_t total, const char *what);
void rb_pipe_check_stats(struct rb_pipe *pp, const struct bp_pipeline_stats *s0,
			 uint64_t total, const char *what);
/* Check the target holds what the pipeline's lanes wrote (ops[lane]). */
void rb_pipe_verify(struct rb_target *t, const struct rb_pipe *pp,
		    unsigned nlanes, const uint64_t *ops, uint64_t outstanding,
		    const char *what);
struct rb_result rb_pipe_run(struct rb_pipe *pp, struct rb_target *t,
			     unsigned ms, uint64_t outstanding,
			     const char *what);

/*
 * The stage as a variant runs it, from a point's config: create it (cq_wait
 * as c says) and add the target as its peer; returns the peer id or a
 * negative errno (*out NULL if create failed).
 */
int rb_stage_open(struct rb_target *t, const struct rb_pipe_cfg *c,
		  struct bp_rdma **out);
/*
 * A run of lanes that each wrote ops[lane] writes of size bytes into slots
 * slots: check the target (rb_verify_target), then the result from the
 * summed CPU time and the run's span t0..t1.
 */
/* A stage's rail counters summed over W workers and R rails. */
void rb_rail_sum(const struct bp_rdma *r, unsigned W, unsigned R,
		 struct bp_rdma_rail_stats *sum);
struct rb_result rb_lanes_result(struct rb_target *t, const char *what,
				 const struct rb_check *chk, int64_t t0,
				 int64_t t1, int64_t cpu_ns);
/* ---- the run-to-completion variant (rdma/rdma_variant_direct.c) ----------- */
void rb_direct_close(struct rb_direct *x);
int rb_direct_open(struct rb_direct *x, struct rb_target *t,
		   const struct rb_pipe_cfg *c);
struct rb_result rb_direct_run(struct rb_direct *x, struct rb_target *t,
			       unsigned ms, uint64_t outstanding,
			       const char *what);
/* ---- the raw variant (rdma/rdma_variant_raw.c) --------------------------- */

void rb_raw_close(struct rb_raw *rw);
int rb_raw_open(struct rb_raw *rw, struct rb_target *t,
		const struct rb_pipe_cfg *c, bool wait_fd, char *why,
		size_t len);
struct rb_result rb_raw_run(struct rb_raw *rw, struct rb_target *t, unsigned ms,
			    uint64_t outstanding, const char *what);

/* ---- the points, latency and output (rdma.c, latency.c, report.c) ------ */

extern const char *const rb_var_name[RB_NVAR];
/* --providers: the list into buf, split after parsing; -1 if too long */
int rb_copy_providers(char *buf, size_t len, const char *arg);
/* --sizes: up to max sizes of 16 B .. 64 MiB, multiples of 8 (the checks
 * read whole words); their count, or -1 */
int rb_parse_sizes(const char *arg, unsigned *sizes, int max);
/* The last line on stderr: the time since t0, the providers measured (or
 * NOTHING MEASURED), the target words checked. */
void rb_print_done(int64_t t0, int measured, int nprov);
unsigned rb_pool_jobs(const struct rb_point *p, unsigned P);
extern const char *const rb_lat_name[RB_NLAT];
extern const char *const rb_lat_csv[RB_NLAT];
extern const char *const rb_lat_wait[RB_NLAT];
extern const char *const rb_wait_name[RB_NIDLE];
/* Sort s[0..n) (ns) and fill l's percentiles (us). */
void rb_lat_percentiles(int64_t *s, unsigned n, struct rb_lat *l);
void rb_intake(const struct rb_opts *o, struct rb_target *t,
	       struct rb_prov_intake *pi);
void rb_intake_table(FILE *f, const struct rb_opts *o,
		     const struct rb_prov_intake *pi);
void rb_latency(const struct rb_opts *o, struct rb_target *t,
		struct rb_prov_lat *pl);
void rb_csv(FILE *f, const void *ctx);
void rb_table(FILE *f, const void *ctx);
/* Over n runs (at most RB_MAX_RUNS), leaving v in run order: the median,
 * the median of the per-run ratios a / b; a size as "64K", "1M", "64". */
double rb_med(const double *v, int n);
double rb_med_ratio(const double *a, const double *b, int n);
const char *rb_size_str(unsigned size, char *buf, size_t len);

#endif /* BPBENCH_RDMA_HARNESS_H */
