/* SPDX-License-Identifier: MIT */
/*
 * The stall watch: is a worker stuck in one call out of the stage's own
 * code? A provider call that never returns cannot be interrupted, and a
 * drain waits for it without end. libfabric 1.17's shm does that: its
 * posts spin on a spinlock in the peer's shared region, and a peer killed
 * while holding it (its own progress takes it often) leaves them spinning
 * for ever. All the library can do is say so: around each such call the
 * worker advances its count (odd while inside) and names the call (site;
 * stage.c's out_enter), and the stall report a stopper logs names each
 * worker inside one call, where, and for how long.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "src/rdma/rdma_internal.h"
#include "src/base/json_put.h"

/* Between the two looks of one report: no post or read takes this long. */
#define LOOK_NS INT64_C(20000000)

static const char *const site_name[SITE_COUNT] = {
	[SITE_NONE] = NULL,
	[SITE_WRITE] = "fi_writemsg",
	[SITE_READ] = "fi_readmsg",
	[SITE_CQ_READ] = "fi_cq_read",
	[SITE_CQ_READERR] = "fi_cq_readerr",
	[SITE_TRYWAIT] = "fi_trywait",
	[SITE_AV_INSERT] = "fi_av_insert",
	[SITE_MR_REG] = "fi_mr_reg",
	[SITE_CLOSE] = "fi_close",
	[SITE_REOPEN] = "the endpoint's reopen",
	[SITE_PREPARE] = "prepare",
};

/*
 * One look at a worker: its count, then the site, then the count again
 * (see out_enter). The site is the counted call's only if the count did
 * not move; otherwise SITE_NONE.
 */
static uint64_t look(struct bpi_rdma_worker *ws, unsigned *site)
{
	/* acquire: pairs with out_enter's release of calls: its site (or a
	 * later one) is seen below */
	uint64_t c = atomic_load_explicit(&ws->calls, memory_order_acquire);

	if (site) {
		/* acquire: pairs with out_enter's release of site: a later
		 * call's site comes with a count past c below */
		*site = atomic_load_explicit(&ws->site, memory_order_acquire);
		/* relaxed: ordered by the acquire above */
		if (atomic_load_explicit(&ws->calls, memory_order_relaxed) !=
			    c ||
		    *site >= SITE_COUNT)
			*site = SITE_NONE;
	}
	return c;
}

int bp_rdma_worker_calls(const struct bp_rdma *r, unsigned worker,
			 uint64_t *calls, const char **site)
{
	unsigned s;

	if (!r || !calls || worker >= r->cfg.workers)
		return -EINVAL;
	*calls = look(&r->workers[worker], &s);
	if (site)
		*site = site_name[s];
	return 0;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000),
			      .tv_nsec = (long)(ns % 1000000000)};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Since when worker ws has been inside call c: the first sight a report
 * noted, or now - LOOK_NS, noted now. Under r->stall_lock: two stoppers
 * may report at once (a timed-out one reports after giving up the
 * joiner's role).
 */
static int64_t first_sight(struct bpi_rdma_worker *ws, uint64_t c, int64_t now)
{
	if (ws->seen_calls != c) {
		ws->seen_calls = c;
		ws->seen_ns = now - LOOK_NS;
	}
	return ws->seen_ns;
}

int bpi_rdma_stall_report(void *ctx, char *buf, size_t size)
{
	struct bp_rdma *r = ctx;
	uint64_t first[BP_MAX_WORKERS];
	unsigned stuck = 0, posts = 0;
	size_t len = 0;
	int64_t now;

	if (size && buf)
		buf[0] = '\0';
	if (!r || r->magic != BPI_RDMA_MAGIC || (!buf && size))
		return 0; /* not a stage context: nothing to say */
	for (unsigned i = 0; i < r->cfg.workers; i++)
		first[i] = look(&r->workers[i], NULL);
	sleep_ns(LOOK_NS);
	pthread_mutex_lock(&r->stall_lock);
	now = bpi_now_ns();
	for (unsigned i = 0; i < r->cfg.workers; i++) {
		struct bpi_rdma_worker *ws = &r->workers[i];
		unsigned site;
		uint64_t c = look(ws, &site);

		if (!(c & 1) || c != first[i])
			continue; /* outside, or in and out again */
		BP_JSON_PUT("%sworker %u inside %s for at least %.2f s",
			    stuck ? "; " : "", i,
			    site_name[site] ? site_name[site] : "a call",
			    (double)(now - first_sight(ws, c, now)) / 1e9);
		stuck++;
		posts += site == SITE_WRITE || site == SITE_READ;
	}
	pthread_mutex_unlock(&r->stall_lock);
	if (stuck)
		BP_JSON_PUT(" (a call that does not return cannot be "
			    "interrupted, and the drain waits for it%s)",
			    posts && !strcmp(r->provider, "shm")
				    ? "; libfabric 1.17's shm posts spin for "
				      "ever on the lock of a peer killed while "
				      "holding it"
				    : "");
	return (int)len;
}
