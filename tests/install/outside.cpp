// SPDX-License-Identifier: MIT
// outside_cpp: the C++ program built outside the source tree against an
// installed batchpipe. Two std::thread producers submit through bp_producer,
// a stage squares, the sink sums; exits 0 only when every job arrived once
// with the right value and the counters agree.
#include <batchpipe/batchpipe.h>

#include <cstdio>
#include <thread>
#include <vector>

namespace
{

constexpr unsigned producers = 2;
constexpr long per_producer = 10000;

struct job {
	bp_job hdr; // the pipeline sees &job::hdr
	long in = 0, out = 0;
};

struct totals {
	long sum = 0, delivered = 0, bad = 0; // the sink thread's alone
};

void square(void *, bp_worker *w, bp_job **js, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		job *j = reinterpret_cast<job *>(js[i]);

		j->out = j->in * j->in;
		j->hdr.status = BP_JOB_OK;
	}
	bp_worker_complete(w, js, n);
}

void sink(void *ctx, bp_job **js, unsigned n)
{
	auto *t = static_cast<totals *>(ctx);

	for (unsigned i = 0; i < n; i++) {
		const job *j = reinterpret_cast<const job *>(js[i]);

		t->sum += j->out;
		t->bad += j->hdr.status != BP_JOB_OK || j->out != j->in * j->in;
	}
	t->delivered += n;
}

} // namespace

int main()
{
	static const bp_stage stage = [] {
		bp_stage s{};
		s.name = "square";
		s.process = square;
		return s;
	}();
	bp_pipeline_config cfg;
	totals t;
	bp_pipeline *p = nullptr;
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.stage = &stage;
	cfg.sink = sink;
	cfg.sink_ctx = &t;
	if ((rc = bp_pipeline_create(&cfg, &p)) < 0 ||
	    (rc = bp_pipeline_start(p)) < 0) {
		std::fprintf(stderr, "outside_cpp: %s\n", bp_strerror(rc));
		if (p)
			bp_pipeline_destroy(p);
		return 1;
	}

	std::vector<std::vector<job>> jobs(producers,
					   std::vector<job>(per_producer));
	std::vector<int> failed(producers, 0);
	std::vector<std::thread> threads;
	for (unsigned k = 0; k < producers; k++)
		threads.emplace_back([&, k] {
			bp_producer *pr;

			if (bp_producer_create(p, &pr) < 0) {
				failed[k] = 1;
				return;
			}
			for (long i = 0; i < per_producer; i++) {
				jobs[k][i].in = i % 100;
				if (bp_producer_submit(pr, &jobs[k][i].hdr) < 0)
					failed[k] = 1;
			}
			if (bp_producer_destroy(pr) < 0) // flushes the rest
				failed[k] = 1;
		});
	for (auto &th : threads)
		th.join();
	bp_pipeline_drain(p);
	struct bp_pipeline_stats st; // "struct": a function has the name too
	rc = bp_pipeline_stats(p, &st);
	bp_pipeline_destroy(p);

	const long n = producers * per_producer;
	// per_producer / 100 rounds of 0..99 each: 328350 per round
	const long want = producers * (per_producer / 100) * 328350L;
	std::printf("batchpipe %s (C++): delivered %ld of %ld, sum %ld (want "
		    "%ld), submitted %llu ok %llu\n",
		    bp_version(), t.delivered, n, t.sum, want,
		    static_cast<unsigned long long>(st.submitted),
		    static_cast<unsigned long long>(st.ok));
	return rc == 0 && failed[0] == 0 && failed[1] == 0 &&
			       t.delivered == n && t.bad == 0 &&
			       t.sum == want &&
			       st.submitted ==
				       static_cast<unsigned long long>(n) &&
			       st.ok == static_cast<unsigned long long>(n)
		       ? 0
		       : 1;
}
