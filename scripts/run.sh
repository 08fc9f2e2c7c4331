#!/bin/sh
# The main command: the showcase. Installs what is missing, builds, then runs
# quick versions of the lab's experiments (locks with trivial and ~50 ns jobs,
# the ring comparison, a pipeline run, a batch sweep, an RDMA loopback fill,
# a pair of flame graphs) into results/<UTC time>/ with a report
# (report.md, report.html). About 3 minutes on 2 cores, build included.
#   scripts/run.sh           the quick showcase
#   scripts/run.sh --full    the full sweeps (as long as they take)
# Other options go to scripts/showcase.sh (--tiny, --out DIR; --help).
# The old main job, the ring comparison alone: build/bench/bpbench ring --quick
set -eu
cd "$(dirname "$0")/.."
t0=$(date +%s)
scripts/deps.sh
echo "building (build/) ..."
scripts/build.sh build
echo "built in $(($(date +%s) - t0)) s"
exec scripts/showcase.sh --bpbench build/bench/bpbench "$@"
