/* SPDX-License-Identifier: MIT */
/*
 * blockcrc: the CRC-32 of a file, computed by a pipeline.
 *
 * The main thread reads the file in 64 KiB blocks into jobs from a pool and
 * submits them; workers compute each block's CRC-32 (zlib); the sink, with
 * ordered output, receives the blocks in file order, folds their CRCs into
 * one with crc32_combine and returns the jobs to the pool. The result is the
 * CRC gzip stores, so it can be checked with:
 *
 *     blockcrc FILE                   prints "crc32 XXXXXXXX size N"
 *     gzip -c FILE | gzip -lv         the "crc" column
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <batchpipe/batchpipe.h>

#define BLOCK 65536
#define JOBS  64 /* blocks in memory at once: the pool bounds the reader */

struct block {
	struct bp_job hdr;
	size_t len;
	uLong crc;
	unsigned char data[BLOCK];
};

struct result {
	struct bp_pool *pool;
	uLong crc;
	unsigned long long size;
	int failed;
};

static void crc_stage(void *state, struct bp_worker *w, struct bp_job **jobs,
		      unsigned n)
{
	(void)state;
	for (unsigned i = 0; i < n; i++) {
		struct block *b = (struct block *)jobs[i];

		b->crc = crc32(0L, b->data, (uInt)b->len);
		b->hdr.status = BP_JOB_OK;
	}
	bp_worker_complete(w, jobs, n);
}

/* Blocks arrive in submission (= file) order: fold them, recycle them. */
static void sink(void *ctx, struct bp_job **jobs, unsigned n)
{
	struct result *res = ctx;

	for (unsigned i = 0; i < n; i++) {
		struct block *b = (struct block *)jobs[i];

		if (b->hdr.status != BP_JOB_OK)
			res->failed = 1;
		res->crc = crc32_combine(res->crc, b->crc, (z_off_t)b->len);
		res->size += b->len;
	}
	bp_pool_free(res->pool, (void *const *)jobs, n);
}

int main(int argc, char **argv)
{
	static const struct bp_stage stage = { .name = "crc32", .process = crc_stage };
	struct result res = { .crc = crc32(0L, Z_NULL, 0) };
	struct bp_pipeline_config cfg;
	struct bp_pipeline *p;
	struct bp_producer *pr;
	int fd, rc;

	if (argc < 2) {
		fprintf(stderr, "usage: blockcrc FILE [workers]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	if ((rc = bp_pool_create(sizeof(struct block), JOBS, &res.pool)) < 0) {
		fprintf(stderr, "pool: %s\n", bp_strerror(rc));
		return 1;
	}
	bp_pipeline_config_init(&cfg);
	cfg.workers = argc > 2 ? (unsigned)atoi(argv[2]) : 2;
	cfg.max_batch = 4;
	cfg.max_inflight = 8;
	cfg.ordered = true;
	cfg.stage = &stage;
	cfg.sink = sink;
	cfg.sink_ctx = &res;
	if ((rc = bp_pipeline_create(&cfg, &p)) < 0 ||
	    (rc = bp_pipeline_start(p)) < 0 ||
	    (rc = bp_producer_create(p, &pr)) < 0) {
		fprintf(stderr, "pipeline: %s\n", bp_strerror(rc));
		return 1;
	}
	for (;;) {
		struct block *b;
		ssize_t got;

		/* the pool is empty while all blocks are in the pipeline */
		while (bp_pool_alloc(res.pool, (void **)&b, 1) == 0) {
			bp_producer_flush(pr);
			sched_yield();
		}
		got = read(fd, b->data, BLOCK);
		if (got <= 0) {
			bp_pool_free(res.pool, (void *const *)&b, 1);
			if (got < 0)
				perror("read");
			break;
		}
		b->len = (size_t)got;
		if ((rc = bp_producer_submit(pr, &b->hdr)) < 0) {
			fprintf(stderr, "submit: %s\n", bp_strerror(rc));
			return 1;
		}
	}
	bp_producer_destroy(pr); /* flushes the last blocks */
	bp_pipeline_drain(p);
	bp_pipeline_destroy(p);
	close(fd);
	printf("crc32 %08lx size %llu\n", res.crc, res.size);
	rc = res.failed || bp_pool_available(res.pool) != JOBS;
	bp_pool_destroy(res.pool);
	return rc;
}
