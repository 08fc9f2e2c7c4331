// SPDX-License-Identifier: MIT
// minimal_cpp: the pipeline from C++ - std::thread producers, a stage that
// squares, a sink that sums. The headers are plain C with extern "C"; a job
// is a struct whose first member is the bp_job the pipeline sees.
#include <batchpipe/batchpipe.h>

#include <cstdio>
#include <thread>
#include <vector>

namespace {

constexpr long per_producer = 100000;

struct job {
	bp_job hdr; // the pipeline sees &job::hdr
	long in = 0, out = 0;
};

struct totals {
	long sum = 0, delivered = 0; // the sink thread's alone
};

void square(void *, bp_worker *w, bp_job **js, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		job *j = reinterpret_cast<job *>(js[i]);

		j->out = j->in * j->in;
		j->hdr.status = BP_JOB_OK;
	}
	bp_worker_complete(w, js, n); // a synchronous stage completes here
}

void sink(void *ctx, bp_job **js, unsigned n)
{
	auto *t = static_cast<totals *>(ctx);

	for (unsigned i = 0; i < n; i++)
		t->sum += reinterpret_cast<job *>(js[i])->out;
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
	bp_pipeline *pipe = nullptr;
	totals t;
	std::vector<std::vector<job>> jobs(2, std::vector<job>(per_producer));
	std::vector<std::thread> producers;
	long want = 0; // the sum over both producers' jobs
	int rc;

	bp_pipeline_config_init(&cfg);
	cfg.stage = &stage;
	cfg.sink = sink;
	cfg.sink_ctx = &t;
	if ((rc = bp_pipeline_create(&cfg, &pipe)) < 0 ||
	    (rc = bp_pipeline_start(pipe)) < 0) {
		std::fprintf(stderr, "pipeline: %s\n", bp_strerror(rc));
		return 1;
	}
	for (auto &mine : jobs) {
		for (long i = 0; i < per_producer; i++)
			want += (i % 100) * (i % 100);
		producers.emplace_back([pipe, &mine] {
			bp_producer *pr;

			if (bp_producer_create(pipe, &pr) < 0)
				return;
			for (long i = 0; i < per_producer; i++) {
				mine[i].in = i % 100;
				bp_producer_submit(pr, &mine[i].hdr);
			}
			bp_producer_destroy(pr); // flushes the rest
		});
	}
	for (auto &p : producers)
		p.join();
	bp_pipeline_drain(pipe); // everything delivered, threads joined
	bp_pipeline_destroy(pipe);
	std::printf("delivered %ld, sum %ld\n", t.delivered, t.sum);
	if (t.delivered != 2 * per_producer || t.sum != want) {
		std::fprintf(stderr, "expected %ld jobs summing to %ld\n",
			     2 * per_producer, want);
		return 1;
	}
	return 0;
}
