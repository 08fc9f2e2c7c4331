/* SPDX-License-Identifier: MIT */
/*
 * outside_rdma: links against an installed libbatchpipe-rdma and calls into
 * libfabric through it. An unknown provider must give -ENOENT (so
 * fi_getinfo ran), the shm provider, where present, must open and close;
 * the fill generator and digest must agree with themselves. Exit 0 pass,
 * 1 fail.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include <batchpipe/error.h>
#include <batchpipe/rdma.h>

int main(void)
{
	static uint64_t a[512], b[512];
	struct bp_rdma_config c;
	struct bp_rdma *r = NULL;
	int rc;

	bp_rdma_config_init(&c);
	c.provider = "no-such-provider";
	rc = bp_rdma_create(&c, &r);
	if (rc != -ENOENT) {
		fprintf(stderr, "outside_rdma: unknown provider: %d (%s)\n", rc,
			bp_strerror(rc));
		return 1;
	}
	bp_rdma_config_init(&c);
	c.provider = "shm";
	rc = bp_rdma_create(&c, &r);
	if (rc == 0) {
		printf("outside_rdma: shm opened (%s)\n", bp_rdma_provider(r));
		bp_rdma_destroy(r);
	} else {
		printf("outside_rdma: shm not available here: %s\n",
		       bp_strerror(rc));
	}
	bp_rdma_fill_page(7, 3, a, sizeof(a));
	bp_rdma_fill_page(7, 3, b, sizeof(b));
	if (bp_rdma_digest(a, sizeof(a)) != bp_rdma_digest(b, sizeof(b))) {
		fprintf(stderr, "outside_rdma: digests differ\n");
		return 1;
	}
	printf("outside_rdma: batchpipe %s ok\n", bp_version());
	return 0;
}
