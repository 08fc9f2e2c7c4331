/* SPDX-License-Identifier: MIT */
/*
 * rdma/report.c - what `bpbench rdma` prints: the tables, the verdicts
 * against the targets, and the CSV blocks (bench/README.md).
 */
#include "rdma/rdma_harness.h"

double rb_med(const double *v, int n)
{
	double tmp[RB_MAX_RUNS];

	memcpy(tmp, v, sizeof(double) * (size_t)n);
	return bench_median(tmp, n);
}

double rb_med_ratio(const double *a, const double *b, int n)
{
	double tmp[RB_MAX_RUNS];

	for (int i = 0; i < n; i++)
		tmp[i] = a[i] / b[i];
	return bench_median(tmp, n);
}

static double rb_med_diff(const double *a, const double *b, int n)
{
	double tmp[RB_MAX_RUNS];

	for (int i = 0; i < n; i++)
		tmp[i] = a[i] - b[i];
	return bench_median(tmp, n);
}

const char *rb_size_str(unsigned size, char *buf, size_t len)
{
	if (size >= 1048576 && size % 1048576 == 0)
		snprintf(buf, len, "%uM", size / 1048576);
	else if (size >= 1024 && size % 1024 == 0)
		snprintf(buf, len, "%uK", size / 1024);
	else
		snprintf(buf, len, "%u", size);
	return buf;
}

/* --direct: run to completion against raw, per point. */
static void rb_print_direct(FILE *f, const struct rb_opts *o,
			    const struct rb_results *r)
{
	for (int pv = 0; pv < o->nprov; pv++) {
		fprintf(f,
			"\n%s, run to completion (bp_rdma_direct, one thread "
			"per worker slot, no pipeline)\n",
			o->prov[pv]);
		fprintf(f,
			"%5s %4s %4s %5s %2s %2s | %9s %8s %6s | %9s %9s "
			"%8s\n",
			"size", "post", "reap", "depth", "W", "R",
			"dir GB/s", "raw GB/s", "ratio", "dir ns/op",
			"raw ns/op", "extra");
		for (int i = 0; i < r->npoints; i++) {
			const struct rb_point *p = &r->pt[i];
			char sz[16];

			if (p->prov != pv || p->skipped)
				continue;
			rb_size_str(p->size, sz, sizeof(sz));
			fprintf(f,
				"%5s %4u %4u %5u %2u %2u | %9.3f %8.3f %6.3f | "
				"%9.0f %9.0f %8.0f\n",
				sz, p->post, p->reap, p->depth, p->workers,
				p->rails, rb_med(p->gbps[RB_DIRECT], r->runs),
				rb_med(p->gbps[RB_RAW], r->runs),
				rb_med_ratio(p->gbps[RB_DIRECT],
					     p->gbps[RB_RAW], r->runs),
				rb_med(p->cpu[RB_DIRECT], r->runs),
				rb_med(p->cpu[RB_RAW], r->runs),
				rb_med_diff(p->cpu[RB_DIRECT], p->cpu[RB_RAW],
					    r->runs));
		}
	}
}

static void rb_print_table(FILE *f, const struct rb_opts *o,
			   const struct rb_results *r,
			   const char *const *target_desc)
{
	for (int pv = 0; pv < o->nprov; pv++) {
		int any = 0;

		for (int i = 0; i < r->npoints; i++)
			any |= r->pt[i].prov == pv;
		if (!any)
			continue;
		fprintf(f,
			"\n%s (target: %s), medians of %d interleaved runs of "
			"%u ms\n",
			o->prov[pv], target_desc[pv], r->runs, o->a.ms);
		fprintf(f,
			"%5s %4s %4s %5s %2s %2s | %8s %8s %6s | %8s %8s | "
			"%9s %9s %8s\n",
			"size", "post", "reap", "depth", "W", "R", "pipe GB/s",
			"raw GB/s", "ratio", "pipeMops", "raw Mops",
			"pipe ns/op", "raw ns/op", "extra");
		for (int i = 0; i < r->npoints; i++) {
			const struct rb_point *p = &r->pt[i];
			char sz[16];

			if (p->prov != pv)
				continue;
			rb_size_str(p->size, sz, sizeof(sz));
			fprintf(f, "%5s %4u %4u %5u %2u %2u | ", sz, p->post,
				p->reap, p->depth, p->workers, p->rails);
			if (p->skipped) {
				fprintf(f, "skipped: %s\n", p->note);
				continue;
			}
			fprintf(f,
				"%9.3f %8.3f %6.3f | %8.3f %8.3f | %10.0f "
				"%9.0f %8.0f\n",
				rb_med(p->gbps[RB_PIPE], r->runs),
				rb_med(p->gbps[RB_RAW], r->runs),
				rb_med_ratio(p->gbps[RB_PIPE], p->gbps[RB_RAW],
					     r->runs),
				rb_med(p->mops[RB_PIPE], r->runs),
				rb_med(p->mops[RB_RAW], r->runs),
				rb_med(p->cpu[RB_PIPE], r->runs),
				rb_med(p->cpu[RB_RAW], r->runs),
				rb_med_diff(p->cpu[RB_PIPE], p->cpu[RB_RAW],
					    r->runs));
		}
	}
	if (o->direct)
		rb_print_direct(f, o, r);
	fprintf(f,
		"\nratio: pipeline / raw GB/s, median of per-run ratios. "
		"ns/op: CPU time of the\nvariant's threads (pipeline: "
		"producers, workers, sink; raw: its threads) per\nop; extra = "
		"pipeline - raw (median of per-run differences). The "
		"target's\nCPU is in neither.\n");
}

static void rb_print_csv(FILE *f, const struct rb_opts *o,
			 const struct rb_results *r)
{
	fprintf(f,
		"provider,mode,size,post_batch,reap_batch,depth,workers,rails,"
		"run,GBps,Mops,cpu_ns_per_op\n");
	for (int i = 0; i < r->npoints; i++) {
		const struct rb_point *p = &r->pt[i];

		if (p->skipped)
			continue;
		for (int run = 0; run < r->runs; run++)
			for (int v = 0; v < (o->direct ? RB_NVAR : 2); v++) {
				fprintf(f,
					"%s,%s,%u,%u,%u,%u,%u,%u,%d,%.4f,%.4f,",
					o->prov[p->prov], rb_var_name[v],
					p->size, p->post, p->reap, p->depth,
					p->workers, p->rails, run,
					p->gbps[v][run], p->mops[v][run]);
				/* empty when the run completed no op */
				bench_csv_num(f, p->cpu[v][run], 1);
				fputc('\n', f);
			}
	}
}

static void rb_print_latency(FILE *f, const struct rb_opts *o,
			     const struct rb_prov_lat *pl,
			     const char *const *target_desc)
{
	for (int pv = 0; pv < o->nprov; pv++) {
		if (!pl[pv].done)
			continue;
		fprintf(f,
			"\n%s: 4 KiB writes, depth 1, one worker (target: %s), "
			"%u ms each\n",
			o->prov[pv], target_desc[pv], o->lat_ms);
		fprintf(f, "%-20s | %8s %8s %8s %8s %8s | %9s | %7s %7s\n",
			"completion wait", "avg us", "p50 us", "p90 us",
			"p99 us", "p99.9 us", "ops/s", "client%", "target%");
		for (int k = 0; k < RB_NLAT; k++) {
			const struct rb_lat *l = &pl[pv].lat[k];

			fprintf(f, "%-20s | ", rb_lat_name[k]);
			if (l->na) {
				fprintf(f, "n/a (%s)\n", l->note);
				continue;
			}
			fprintf(f,
				"%8.1f %8.1f %8.1f %8.1f %8.1f | %9.0f | %7.1f "
				"%7.1f\n",
				l->avg, l->p50, l->p90, l->p99, l->p999,
				l->ops_s, l->client_cpu, l->target_cpu);
		}
		fprintf(f,
			"idle CPU of the pipeline's threads (%% of one core), "
			"stage cq_wait:\n");
		for (int w = 0; w < RB_NIDLE; w++) {
			const struct rb_idle *id = &pl[pv].idle[w];

			if (id->na)
				fprintf(f, "  %-10s  n/a\n", rb_wait_name[w]);
			else
				fprintf(f,
					"  %-10s  idle %u ms: %6.2f %%   "
					"100 ops/s paced: %6.2f %%\n",
					rb_wait_name[w], o->idle_ms,
					id->idle_cpu, id->paced_cpu);
		}
	}
	fprintf(f,
		"\nlatency: pipeline = clock before bp_pipeline_submit -> sink "
		"entry, "
		"the sink resubmitting\n(closed loop); direct = "
		"bp_rdma_direct_post -> the job back from bp_rdma_direct_poll "
		"on\nthe same thread (run to completion); raw = post -> "
		"completion reaped. client%%: CPU of the pipeline's\nworkers "
		"and sink, or of the raw thread; target%%: the target's "
		"progress threads\n(or the bp-target process).\n");
}

static void rb_print_latency_csv(FILE *f, const struct rb_opts *o,
				 const struct rb_prov_lat *pl)
{
	fprintf(f, "provider,mode,wait,avg_us,p50_us,p90_us,p99_us,p999_us,"
		   "ops_per_s,client_cpu_pct,target_cpu_pct\n");
	for (int pv = 0; pv < o->nprov; pv++)
		for (int k = 0; pl[pv].done && k < RB_NLAT; k++) {
			const struct rb_lat *l = &pl[pv].lat[k];

			if (l->na)
				continue;
			fprintf(f,
				"%s,%s,%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.0f,%.2f,"
				"%.2f\n",
				o->prov[pv], rb_lat_csv[k], rb_lat_wait[k],
				l->avg, l->p50, l->p90, l->p99, l->p999,
				l->ops_s, l->client_cpu, l->target_cpu);
		}
}

static const struct rb_point *rb_find(const struct rb_results *r, int pv,
				      unsigned size, unsigned post,
				      unsigned reap, unsigned depth)
{
	for (int i = 0; i < r->npoints; i++) {
		const struct rb_point *p = &r->pt[i];

		if (p->prov == pv && p->size == size && p->post == post &&
		    p->reap == reap && p->depth == depth && p->workers == 1 &&
		    p->rails == 1 && !p->skipped)
			return p;
	}
	return NULL;
}

static const char *rb_verdict(bool ok)
{
	return ok ? "MET" : "MISSED";
}

static void rb_print_targets(FILE *f, const struct rb_opts *o,
			     const struct rb_results *r,
			     const struct rb_prov_lat *pl)
{
	int n = r->runs;

	fprintf(f, "\ntargets\n");
	for (int pv = 0; pv < o->nprov; pv++) {
		const char *name = o->prov[pv];
		static const unsigned big[2] = {65536, 1u << 20};
		double worst = NAN;

		for (int b = 0; b < 2; b++) {
			const struct rb_point *p =
				rb_find(r, pv, big[b], RB_BASE_POST,
					RB_BASE_REAP, RB_BASE_DEPTH);
			double ratio;
			char sz[16];

			if (!p)
				continue;
			ratio = rb_med_ratio(p->gbps[RB_PIPE], p->gbps[RB_RAW],
					     n);
			fprintf(f,
				"  1. %-12s %4s: pipeline %.2f GB/s = %.1f %% "
				"of raw %.2f GB/s (>= 90 %%): %s\n",
				name, rb_size_str(big[b], sz, sizeof(sz)),
				rb_med(p->gbps[RB_PIPE], n), 100 * ratio,
				rb_med(p->gbps[RB_RAW], n),
				rb_verdict(ratio >= 0.90));
		}
		{
			const struct rb_point *a = rb_find(r, pv, 64, 1, 1, 1);
			const struct rb_point *b =
				rb_find(r, pv, 64, 16, 16, 64);

			if (a && b) {
				double ma = rb_med(a->mops[RB_PIPE], n);
				double mb = rb_med(b->mops[RB_PIPE], n);

				fprintf(f,
					"  2. %-12s   64 B: post 16 reap 16 "
					"depth 64 %.3f Mops/s = %.2fx post 1 "
					"reap 1 depth 1 %.3f (>= 2x%s): %s\n",
					name, mb, mb / ma, ma,
					strncmp(name, "tcp", 3)
						? ", asked for tcp"
						: "",
					rb_verdict(mb / ma >= 2));
			}
		}
		{
			const struct rb_point *a = rb_find(r, pv, 64, 1, 1, 1);
			const struct rb_point *b =
				rb_find(r, pv, 64, 16, 16, 64);

			for (int i = 0; i < r->npoints; i++) {
				const struct rb_point *p = &r->pt[i];
				double d;

				if (p->prov != pv || p->skipped ||
				    p->size != 64)
					continue;
				d = rb_med_diff(p->cpu[RB_PIPE], p->cpu[RB_RAW],
						n);
				if (isnan(worst) || d > worst)
					worst = d;
			}
			if (b)
				fprintf(f,
					"  3. %-12s extra CPU per 64 B op: "
					"post 16 reap 16 depth 64 %+.0f ns, "
					"1/1/1 %+.0f ns, worst 64 B point "
					"%+.0f "
					"ns (<= 300 ns at 16/16/64): %s\n",
					name,
					rb_med_diff(b->cpu[RB_PIPE],
						    b->cpu[RB_RAW], n),
					a ? rb_med_diff(a->cpu[RB_PIPE],
							a->cpu[RB_RAW], n)
					  : NAN,
					worst,
					rb_verdict(rb_med_diff(b->cpu[RB_PIPE],
							       b->cpu[RB_RAW],
							       n) <= 300));
			if (b && o->direct)
				fprintf(f,
					"  3. %-12s run to completion "
					"(--direct) extra CPU per 64 B op at "
					"16/16/64: %+.0f ns (<= 300 ns): %s\n",
					name,
					rb_med_diff(b->cpu[RB_DIRECT],
						    b->cpu[RB_RAW], n),
					rb_verdict(rb_med_diff(b->cpu[RB_DIRECT],
							       b->cpu[RB_RAW],
							       n) <= 300));
		}
		if (pl[pv].done) {
			const struct rb_lat *pb = &pl[pv].lat[RB_L_PBUSY];
			const struct rb_lat *rbz = &pl[pv].lat[RB_L_RBUSY];
			const struct rb_idle *ev = &pl[pv].idle[2];

			if (!pb->na && !rbz->na)
				fprintf(f,
					"  4. %-12s busy-poll p50: pipeline "
					"%.1f us, raw %.1f us, +%.1f us (<= 2 "
					"us): %s\n",
					name, pb->p50, rbz->p50,
					pb->p50 - rbz->p50,
					rb_verdict(pb->p50 - rbz->p50 <= 2));
			if (pl[pv].rtc_n) {
				const double *dp = pl[pv].rtc_p50[0],
					     *rp = pl[pv].rtc_p50[1];
				int m = pl[pv].rtc_n;
				double d50 = rb_med_diff(dp, rp, m);
				double r99 = rb_med_ratio(pl[pv].rtc_p99[0],
							  pl[pv].rtc_p99[1], m);

				fprintf(f,
					"  4. %-12s run to completion "
					"(bp_rdma_direct) busy-poll, %d "
					"interleaved runs against raw: p50 "
					"%.1f vs %.1f us (medians), %+.2f us "
					"(median of per-run differences; "
					"<= 1.5 us): %s; p99 / raw p99 %.2f "
					"(median of per-run ratios; <= 2): "
					"%s\n",
					name, m, rb_med(dp, m), rb_med(rp, m),
					d50, rb_verdict(d50 <= 1.5), r99,
					rb_verdict(r99 <= 2));
			}
			if (ev->na)
				fprintf(f,
					"  4. %-12s event-wait idle CPU: n/a "
					"(no wait fd)\n",
					name);
			else
				fprintf(f,
					"  4. %-12s event-wait idle CPU %.2f "
					"%% "
					"(paced 100 ops/s %.2f %%) (< 1 %%): "
					"%s\n",
					name, ev->idle_cpu, ev->paced_cpu,
					rb_verdict(ev->idle_cpu < 1));
		}
	}
}

void rb_csv(FILE *f, const void *ctx)
{
	const struct rb_report *rep = ctx;

	if (!rep->o->latency_only)
		rb_print_csv(f, rep->o, rep->r);
	if (!rep->o->no_latency) {
		if (!rep->o->latency_only)
			fprintf(f, "\n");
		rb_print_latency_csv(f, rep->o, rep->pl);
	}
}

void rb_table(FILE *f, const void *ctx)
{
	const struct rb_report *rep = ctx;

	if (!rep->o->latency_only)
		rb_print_table(f, rep->o, rep->r, rep->tdesc);
	if (!rep->o->no_latency)
		rb_print_latency(f, rep->o, rep->pl, rep->tdesc);
	rb_print_targets(f, rep->o, rep->r, rep->pl);
}
