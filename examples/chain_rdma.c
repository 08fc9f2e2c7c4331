/* SPDX-License-Identifier: MIT */
/*
 * chain_rdma: a file's blocks checksummed by one stage and written to a
 * bp-target by RDMA by the next, in one pipeline (a chain of two stages).
 *
 *   main thread: submits every 64 KiB block of the file (in memory)
 *   stage 0 ("crc", CRC_WORKERS workers): the block's CRC-32 (zlib)
 *   stage 1 (the RDMA stage, 2 workers): writes the block to the target's
 *            region at the block's offset in the file
 *   sink (ordered): acknowledges each block in file order, folding the
 *            CRCs into the file's (crc32_combine), and counts the outcomes
 *
 * The file is written PASSES times over (each pass waits for the previous
 * one with bp_pipeline_flush, then reuses the jobs; a pass with a failure
 * is the last). At the end the target
 * is asked for the digest of its region, which must be that of the file:
 * every byte landed. Every write is flagged BP_RDMA_JOB_DELIVERED, so that
 * its completion means the bytes are in the target's memory, whichever
 * worker and rail carried it (docs/api/rdma.md, "Order and completion").
 *
 *   chain_rdma HOST:PORT PROVIDER FILE [PASSES] [--expect-loss]
 *
 * prints "crc32 XXXXXXXX size N blocks N ok N failed N target digest ok"
 * and exits 0 when every block was written and the digest matches. With
 * --expect-loss (the target is killed mid-run by the caller) it exits 0
 * when every block submitted came back to the sink once, ok or failed, and
 * the pipeline drained: nothing is lost when the target dies.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <batchpipe/batchpipe.h>
#include <batchpipe/rdma.h>

#define BLOCK	    65536
#define CRC_WORKERS 2
#define RDMA_WORKERS 2

struct block {
	struct bp_rdma_job rj; /* first: the RDMA stage's job */
	unsigned long crc;
	size_t len;
	unsigned seen; /* sink: deliveries this pass */
};

struct run {
	unsigned long crc; /* the file's, folded in order */
	unsigned long long size, ok, failed, delivered, twice;
	int64_t last_status;
};

static void crc_process(void *state, struct bp_worker *w, struct bp_job **jobs,
			unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct block *b = (struct block *)jobs[i];

		b->crc = crc32(0L, b->rj.buf, (uInt)b->len);
		jobs[i]->status = BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

static const struct bp_stage crc_stage = {.name = "crc",
					  .process = crc_process};

/* Blocks arrive in file order (ordered output through the chain). */
static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct run *run = ctx;

	for (unsigned i = 0; i < n; i++) {
		struct block *b = (struct block *)jobs[i];

		run->delivered++;
		if (b->seen++)
			run->twice++;
		if (jobs[i]->status == BP_JOB_OK) {
			run->ok++;
			run->crc = crc32_combine(run->crc, b->crc,
						 (z_off_t)b->len);
			run->size += b->len;
		} else {
			run->failed++;
			run->last_status = jobs[i]->status;
		}
	}
}

static void log_line(void *ctx, enum bp_log_level lvl, const char *msg)
{
	(void)ctx;
	if (lvl <= BP_LOG_WARN)
		fprintf(stderr, "chain_rdma: %s\n", msg);
}

static unsigned char *read_file(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size);
	while (buf && got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r <= 0) {
			free(buf);
			buf = NULL;
			break;
		}
		got += (size_t)r;
	}
	close(fd);
	*len = got;
	return buf;
}

int main(int argc, char **argv)
{
	struct bp_rdma_conn_config cc;
	struct bp_rdma_config rc_cfg;
	struct bp_pipeline_config cfg;
	struct bp_chain_stage chain[2];
	struct bp_rdma_peer_desc desc;
	struct bp_rdma_target_query q;
	struct bp_rdma_conn *conn = NULL;
	struct bp_rdma *r = NULL;
	struct bp_pipeline *p = NULL;
	struct block *blocks = NULL;
	struct run run = {0};
	unsigned long long submitted = 0;
	unsigned char *data;
	unsigned passes = 1, nblocks;
	bool expect_loss = false;
	char host[256], *colon;
	size_t size = 0;
	int peer, rc;

	if (argc < 4) {
		fprintf(stderr, "usage: chain_rdma HOST:PORT PROVIDER FILE "
				"[PASSES] [--expect-loss]\n");
		return 2;
	}
	for (int i = 4; i < argc; i++)
		if (!strcmp(argv[i], "--expect-loss"))
			expect_loss = true;
		else
			passes = (unsigned)strtoul(argv[i], NULL, 10);
	snprintf(host, sizeof(host), "%s", argv[1]);
	colon = strrchr(host, ':');
	data = read_file(argv[3], &size);
	if (!colon || !data || passes == 0) {
		fprintf(stderr, "chain_rdma: bad HOST:PORT, PASSES or FILE\n");
		return 2;
	}
	*colon = '\0';
	nblocks = (unsigned)((size + BLOCK - 1) / BLOCK);

	/* the target's region, and a stage that can reach it */
	bp_rdma_conn_config_init(&cc);
	cc.host = host;
	cc.port = (unsigned)strtoul(colon + 1, NULL, 10);
	cc.provider = argv[2];
	cc.region_len = size;
	cc.log = log_line;
	if ((rc = bp_rdma_connect(&cc, &conn)) != 0) {
		fprintf(stderr, "chain_rdma: connect: %s\n", bp_strerror(rc));
		return 1;
	}
	bp_rdma_conn_peer(conn, &desc);
	bp_rdma_config_init(&rc_cfg);
	rc_cfg.provider = bp_rdma_conn_provider(conn);
	rc_cfg.node = "127.0.0.1";
	rc_cfg.workers = RDMA_WORKERS;
	rc_cfg.peer_timeout_ns = 1000000000; /* a dead target: 1 s */
	rc_cfg.log = log_line;
	if ((rc = bp_rdma_create(&rc_cfg, &r)) != 0 ||
	    (rc = peer = bp_rdma_peer_add(r, &desc)) < 0 ||
	    (rc = bp_rdma_register(r, data, size, NULL)) != 0) {
		fprintf(stderr, "chain_rdma: stage: %s\n", bp_strerror(rc));
		goto out;
	}

	/* the chain: CRC, then RDMA */
	memset(chain, 0, sizeof(chain));
	chain[0] = (struct bp_chain_stage){.stage = &crc_stage,
					   .workers = CRC_WORKERS};
	chain[1] = (struct bp_chain_stage){.stage = bp_rdma_stage(r),
					   .workers = RDMA_WORKERS,
					   .max_inflight = 64};
	bp_pipeline_config_init(&cfg);
	cfg.stages = chain;
	cfg.n_stages = 2;
	cfg.ordered = true;
	cfg.max_batch = 16;
	cfg.sink = sink;
	cfg.sink_ctx = &run;
	cfg.log = log_line;
	if ((rc = bp_pipeline_create(&cfg, &p)) != 0 ||
	    (rc = bp_pipeline_start(p)) != 0) {
		fprintf(stderr, "chain_rdma: pipeline: %s\n", bp_strerror(rc));
		goto out;
	}
	blocks = calloc(nblocks, sizeof(*blocks));
	if (!blocks) {
		rc = -ENOMEM;
		goto out;
	}
	for (unsigned pass = 0; pass < passes && rc == 0; pass++) {
		run.crc = crc32(0L, Z_NULL, 0);
		run.size = 0;
		for (unsigned i = 0; i < nblocks; i++) {
			struct block *b = &blocks[i];
			struct bp_job *h = &b->rj.hdr;
			size_t off = (size_t)i * BLOCK;

			b->len = size - off < BLOCK ? size - off : BLOCK;
			b->seen = 0;
			bp_rdma_job_set(&b->rj, BP_RDMA_WRITE, (uint32_t)peer,
					data + off, b->len, off);
			b->rj.flags = BP_RDMA_JOB_DELIVERED;
			rc = bp_pipeline_submit(p, &h, 1, 0, -1);
			if (rc != 1) {
				fprintf(stderr, "chain_rdma: submit: %s\n",
					bp_strerror(rc));
				break;
			}
			submitted++;
			rc = 0;
		}
		/* every block of this pass delivered: the jobs are free */
		if (rc == 0 && (rc = bp_pipeline_flush(p, -1)) != 0)
			fprintf(stderr, "chain_rdma: flush: %s\n",
				bp_strerror(rc));
		if (run.failed)
			break; /* the target is gone: no more passes */
	}
	if ((rc = bp_pipeline_drain(p)) != 0)
		fprintf(stderr, "chain_rdma: drain: %s\n", bp_strerror(rc));
	printf("crc32 %08lx size %llu blocks %llu ok %llu failed %llu", run.crc,
	       run.size, submitted, run.ok, run.failed);
	if (run.delivered != submitted || run.twice) {
		printf(" LOST: %llu of %llu delivered, %llu twice\n",
		       run.delivered, submitted, run.twice);
		rc = -EPROTO;
	} else if (expect_loss) {
		printf(" (every block accounted%s%s)\n",
		       run.failed ? ", the first failure: " : "",
		       run.failed ? bp_strerror((int)run.last_status) : "");
	} else if (run.failed || run.size != size) {
		printf(" FAILED: %s\n", bp_strerror((int)run.last_status));
		rc = -EIO;
	} else if (bp_rdma_conn_query(conn, 0, size, &q) != 0 ||
		   q.digest != bp_rdma_digest(data, size)) {
		printf(" target digest DIFFERS\n");
		rc = -EIO;
	} else {
		printf(" target digest ok\n");
	}
out:
	bp_pipeline_destroy(p);
	bp_rdma_destroy(r);
	if (conn)
		bp_rdma_conn_close(conn);
	free(blocks);
	free(data);
	return rc == 0 ? 0 : 1;
}
