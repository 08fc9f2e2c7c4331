#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The library's instructions per RDMA operation, counted with callgrind.

Runs `bpbench rdma` at one point (shm, 64 B writes, post 16 / reap 16 /
depth 64, one worker, into bp-target, which runs natively) with --direct,
under valgrind's callgrind, one profile per thread, and counts the
instructions executed in the library's code (its src/ tree, inlined
headers included) - not the provider's, not libc's, not the benchmark's:

  direct:   the run-to-completion thread (bp_rdma_direct_post / _poll):
            the stage alone, no hand-off;
  pipeline: the producer, worker and sink threads, less what they spend
            in the library's wait loops (bpi_wait_loop and what it
            calls): under valgrind threads take turns, so how long a
            thread spins says nothing.

Each is divided by the operations the benchmark verified in that variant
(its --verbose lines). The direct thread's busy polls that find nothing
are counted: they are what polling costs (fi_cq_read per op is printed
beside it).

usage: scripts/rdma_instructions.py [BUILD_DIR] [--size BYTES]
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# callgrind_annotate's inclusive costs, as the pipeline's count reads them
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from instructions import inclusive  # noqa: E402

WAITS = ("bpi_wait_loop",)  # the library's waits, left out

# What counts as the library: code from its src/ tree (bpbench links the
# library's objects statically, so objects cannot tell; inlined header
# code is attributed to its header's file, which callgrind records).
LIBRARY_FILE = re.compile(r"(^|/)src/(?!.*subprojects)")

# callgrind compresses names: "(id) name" defines, "(id)" refers; the
# definitions of one run are spread over its per-thread files
KINDS = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl",
         "cfi": "fl", "cfl": "fl", "fn": "fn", "cfn": "fn"}


def read_names(paths):
    names = {"ob": {}, "fl": {}, "fn": {}}
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, rest = line.partition("=")
                m = re.match(r"\((\d+)\)\s+(.*)$", rest.rstrip("\n"))
                if key in KINDS and m:
                    names[KINDS[key]][m.group(1)] = m.group(2)
    return names


def self_costs(path, names):
    """{(source file, function): self Ir} of one callgrind profile."""
    fl = fi = fn = None
    after_call = False
    costs = {}

    def name(key, rest):
        m = re.match(r"\((\d+)\)", rest)
        return names[KINDS[key]].get(m.group(1), "?") if m else rest

    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            key, eq, rest = line.partition("=")
            if eq and key == "fl":
                fl, fi = name(key, rest), None
            elif eq and key in ("fi", "fe"):
                fi = name(key, rest)
            elif eq and key == "fn":
                fn, fi = name(key, rest), None
            elif eq and key == "calls":
                after_call = True
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                if after_call:  # a call's inclusive cost: not self
                    after_call = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and fn is not None:
                    k = (fi or fl, fn)
                    costs[k] = costs.get(k, 0) + int(parts[1])
    return costs


def lib_self(costs):
    return sum(v for (fl, _), v in costs.items()
               if fl and LIBRARY_FILE.search(fl))


def has(costs, fn):
    return any(f == fn for (_, f) in costs)


def profile(tmp, tag, bench, size, toggles):
    """Run the point under callgrind, collecting only inside the functions
    toggles names (and what they call): thread ids are reused as the
    variants' threads come and go, so a thread's file may hold several
    roles; collecting one variant's entry points at a time keeps them
    apart. Returns (paths, stderr)."""
    base = os.path.join(tmp, tag)
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
           "--callgrind-out-file=" + base]
    cmd += ["--toggle-collect=" + t for t in toggles]
    cmd += [bench, "rdma", "--providers", "shm", "--sizes", size,
            "--post", "16", "--reap", "16", "--depth", "64",
            "--runs", "1", "--ms", "300", "--no-latency", "--direct",
            "--verbose"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"bpbench rdma: exit {res.returncode}\n"
                 f"{res.stderr[-2000:]}")
    return sorted(glob.glob(base + "*")), res.stderr


def main():
    args = sys.argv[1:]
    size = "64"
    if "--size" in args:
        i = args.index("--size")
        if i + 1 >= len(args):
            sys.exit(__doc__)
        size = args[i + 1]
        del args[i:i + 2]
    build = args[0] if args else "build"
    bench = os.path.join(build, "bench", "bpbench")
    part = {"producer": 0, "worker": 0, "sink": 0, "direct": 0}
    top = {}  # the run-to-completion path's library functions, self Ir
    with tempfile.TemporaryDirectory() as tmp:
        paths, err = profile(tmp, "direct", bench, size, ["rb_direct_lane"])
        direct_ops = sum(int(m) for m in re.findall(
            r"direct thread \d+: (\d+) ops", err))
        dreads = re.findall(r"direct run \d+: direct: (fi_cq_read per op "
                            r"[\d.]+ \(empty [\d.]+\), -FI_EAGAIN per op "
                            r"[\d.]+)", err)
        names = read_names(paths)
        for path in paths:
            for (fl, fn), v in self_costs(path, names).items():
                if fl and LIBRARY_FILE.search(fl):
                    part["direct"] += v
                    top[fn] = top.get(fn, 0) + v
        paths, err = profile(tmp, "pipe", bench, size,
                             ["rb_producer_main", "bpi_worker_main",
                              "bpi_sink_main"])
        # every run, warm-up included, is in the profile: sum them all
        pipe_ops = sum(int(m) for m in re.findall(
            r"(?:warm-up|pipeline run \d+): cpu ns/op:.*?; (\d+) ops", err))
        reads = re.findall(r"pipeline run \d+: .*fi_cq_read per op "
                           r"([\d.]+) \(empty ([\d.]+)\)", err)
        names = read_names(paths)
        for path in paths:
            c = self_costs(path, names)
            lib = lib_self(c)
            if not lib:
                continue
            waits = 0
            if any(has(c, w) for w in WAITS):
                waits = inclusive(path).get("bpi_wait_loop", 0)
            role = ("worker" if has(c, "bpi_worker_main") else
                    "sink" if has(c, "bpi_sink_main") else "producer")
            part[role] += lib - waits
    if not pipe_ops or not direct_ops:
        sys.exit("no verified op counts in bpbench's output")
    pipe = part["producer"] + part["worker"] + part["sink"]
    print(f"Instructions of the library (its src/) per RDMA op, valgrind "
          f"callgrind; shm into bp-target, {size} B writes, post 16 reap "
          f"16 depth 64, one worker")
    print(f"run to completion ({direct_ops} ops): "
          f"{part['direct'] / direct_ops:.1f} per op; by function: " +
          ", ".join(f"{fn} {v / direct_ops:.1f}" for fn, v in
                    sorted(top.items(), key=lambda kv: -kv[1])[:8]))
    if dreads:
        print("run to completion: " + "; ".join(dreads) + " (a post "
              "refused with -FI_EAGAIN is gathered again at the next pass: "
              "under valgrind the provider refuses far more often than "
              "natively)")
    print(f"pipeline ({pipe_ops} ops): {pipe / pipe_ops:.1f} per op = "
          + ", ".join(f"{k} {part[k] / pipe_ops:.1f}"
                      for k in ("producer", "worker", "sink"))
          + " (waits left out)")
    if reads:
        print("pipeline fi_cq_read per op (empty): " +
              ", ".join(f"{a} ({b})" for a, b in reads))


if __name__ == "__main__":
    main()
