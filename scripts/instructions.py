#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Instructions per job through the pipeline, per item through the ring.

Runs `bpbench pipeline` (2 producers, 2 workers, B=32, unordered) and
`bpbench ring` (1x1, B=32) under valgrind's callgrind, one profile per
thread, and counts the library's instructions:

  pipeline: bp_pipeline_submit in the producers (without its waits), the worker loop
            (without its waits and the stage's process), the sink loop
            (without its waits and the application's sink callback);
  ring:     bp_ring_enqueue_burst in the producer, bp_ring_dequeue_burst in
            the consumer, failed polls included.

Each is divided by the jobs (items) the benchmark verified. Waits are left
out because under valgrind threads take turns, so how long a thread spins
says nothing about the library.

With --stages N the pipeline is also profiled as a chain of N stages (2
workers each, the stage's work split among them, `bpbench pipeline
--stages N --sweep-only`), and the library's instructions of the workers
of every stage are compared with the one-stage run's: what one more stage
costs per job.

With --ordered the pipeline is also profiled with ordered output (`bpbench
pipeline --sweep-only --ordered`): what the reorder window costs per job.

With --lanes N every unordered pipeline has N ingress lanes (`bpbench
pipeline --lanes N`).

usage: scripts/instructions.py [BUILD_DIR] [--batch B] [--stages N] [--ordered]
                              [--lanes N]
       (default: build, B = 32; the issue's small-batch cases: --batch 1)
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S+)")


def inclusive(path):
    """{function'caller: inclusive Ir} of one callgrind profile.

    callgrind_annotate lists a function once with its whole cost and
    again per source file its code comes from (inlined headers): the
    largest entry is the whole.
    """
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100",
         "--auto=no", path],
        check=True, capture_output=True, text=True).stdout
    costs = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if not m or "=>" in line:
            continue
        name = m.group(2).rsplit(":", 1)[-1]
        costs[name] = max(costs.get(name, 0),
                          int(m.group(1).replace(",", "")))
    return costs


def root(costs, prefix):
    """Inclusive cost of the function whose key starts with prefix, or 0."""
    hits = [v for k, v in costs.items() if k.startswith(prefix)]
    if len(hits) > 1:
        sys.exit(f"{prefix}: called from several places; cannot tell")
    return hits[0] if hits else 0


def need(costs, key):
    """Stop unless the profile has key: with other inlining (another
    compiler, -O0, LTO) the subtractions below would silently miss."""
    if key not in costs:
        sys.exit(f"no {key} in a profile: build with the default "
                 "options (meson's debugoptimized, gcc)")


def profile(tmp, tag, cmd):
    """Run cmd under callgrind; return (per-thread costs, stderr)."""
    base = os.path.join(tmp, tag)
    res = subprocess.run(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes",
         "--separate-callers=1", "--callgrind-out-file=" + base] + cmd,
        capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{tag}: exit {res.returncode}\n{res.stderr[-2000:]}")
    return [inclusive(f) for f in sorted(glob.glob(base + "-*"))], res.stderr


def count(stderr, what):
    m = re.search(r"every run verified \((\d+) " + what, stderr)
    if not m:
        sys.exit("no verified count in the benchmark's output:\n" + stderr)
    return int(m.group(1))


USAGE = ("usage: scripts/instructions.py [BUILD_DIR] [--batch B] "
         "[--stages N] [--ordered] [--lanes N]")


def take_opt(args, name, default):
    """The value of --name N (digits), removed from args."""
    if name not in args:
        return default
    i = args.index(name)
    if i + 1 >= len(args) or not args[i + 1].isdigit():
        sys.exit(USAGE)
    value = args[i + 1]
    del args[i:i + 2]
    return value


def pipeline_parts(tmp, tag, bench, batch, stages, ordered=False, lanes=None):
    """Library instructions of a pipeline run, per role, and its jobs."""
    threads, err = profile(tmp, tag, [
        bench, "pipeline", "--sweep-only", "--no-warmup", "--workers", "2",
        "--batches", batch, "--waits", "spin-sleep", "--no-latency",
        "--runs", "1", "--ms", "300", "--work-ns", "0",
        "--stages", str(stages)] + (["--ordered"] if ordered else []) +
        (["--lanes", lanes] if lanes else []))
    jobs = count(err, "jobs")
    part = {"producers": 0, "workers": 0, "sink": 0}
    seen = {"producers": 0, "workers": 0, "sink": 0}
    for c in threads:
        if root(c, "bp_pipeline_submit'pb_submit_held"):
            seen["producers"] += 1
            part["producers"] += (c["bp_pipeline_submit'pb_submit_held"] -
                                  c.get("bpi_wait_loop'bp_pipeline_submit", 0))
        if root(c, "bpi_worker_main'"):
            seen["workers"] += 1
            need(c, "pb_stage_process'bpi_worker_main")
            # the stage's own work out, the library it calls back in
            part["workers"] += (
                root(c, "bpi_worker_main'") -
                c.get("bpi_wait_loop'bpi_worker_main", 0) -
                c["pb_stage_process'bpi_worker_main"] +
                c.get("bp_worker_complete'pb_stage_process", 0))
        if root(c, "bpi_sink_main'"):
            seen["sink"] += 1
            need(c, "pb_sink'deliver")
            part["sink"] += (root(c, "bpi_sink_main'") -
                             c.get("bpi_wait_loop'bpi_sink_main", 0) -
                             c["pb_sink'deliver"])
    want = {"producers": 2, "workers": 2 * stages, "sink": 1}
    if any(seen[k] < want[k] for k in want):
        sys.exit(f"threads found per role {seen}, want at least {want}: "
                 "the profiles do not look like this benchmark's")
    return part, jobs


def main():
    args = sys.argv[1:]
    batch = take_opt(args, "--batch", "32")
    stages = int(take_opt(args, "--stages", "1"))
    lanes = take_opt(args, "--lanes", None)
    ordered = "--ordered" in args
    if ordered:
        args.remove("--ordered")
    build = args[0] if args else "build"
    bench = os.path.join(build, "bench", "bpbench")
    with tempfile.TemporaryDirectory() as tmp:
        part, jobs = pipeline_parts(tmp, "pipe", bench, batch, 1,
                                    lanes=lanes)
        chain = ordp = None
        if ordered:
            ordp = pipeline_parts(tmp, "ordered", bench, batch, 1, True)
        if stages > 1:
            chain = pipeline_parts(tmp, "chain", bench, batch, stages,
                                   lanes=lanes)
        threads, err = profile(tmp, "ring", [
            bench, "ring", "--points", "1x1", "--batches", batch,
            "--queues", "batchpipe", "--runs", "1", "--ms", "300",
            "--no-single"])
        items = count(err, "items")
        enq = sum(c.get("bp_ring_enqueue_burst'bench_bp_enqueue", 0)
                  for c in threads)
        deq = sum(c.get("bp_ring_dequeue_burst'bench_bp_dequeue", 0)
                  for c in threads)
    total = sum(part.values())
    if jobs == 0 or items == 0 or total <= 0 or enq <= 0 or deq <= 0:
        sys.exit("a count is zero: the profiles did not match")
    print(f"Instructions (valgrind callgrind), B={batch}")
    lanes_note = f", {lanes} ingress lanes" if lanes else ""
    print(f"pipeline, 2P/2W unordered{lanes_note}, {jobs} jobs: "
          f"{total / jobs:.1f} "
          "per job = " + ", ".join(f"{k} {v / jobs:.1f}"
                                   for k, v in part.items()))
    print(f"ring 1x1, {items} items: {(enq + deq) / items:.1f} per item "
          f"= enqueue {enq / items:.1f}, dequeue {deq / items:.1f}")
    if ordp:
        opart, ojobs = ordp
        if ojobs == 0:
            sys.exit("the ordered run's count is zero")
        ototal = sum(opart.values())
        print(f"pipeline, 2P/2W ordered, {ojobs} jobs: {ototal / ojobs:.1f} "
              "per job = " + ", ".join(f"{k} {v / ojobs:.1f}"
                                       for k, v in opart.items()) +
              f"; ordered output costs {ototal / ojobs - total / jobs:.1f}"
              " per job")
    if chain:
        cpart, cjobs = chain
        if cjobs == 0:
            sys.exit("the chain's count is zero: the profiles did not match")
        ctotal = sum(cpart.values())
        extra = (cpart["workers"] / cjobs - part["workers"] / jobs) / \
            (stages - 1)
        print(f"chain of {stages} stages, 2P/2W each, {cjobs} jobs: "
              f"{ctotal / cjobs:.1f} per job = " +
              ", ".join(f"{k} {v / cjobs:.1f}" for k, v in cpart.items()))
        print(f"an extra stage: {extra:.1f} library instructions per job "
              "(workers of every stage, against one stage)")


if __name__ == "__main__":
    main()
