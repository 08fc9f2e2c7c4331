#!/bin/sh
# The main job: install what is missing, build, and run the ring comparison
# (quick mode) - batchpipe's ring against mutex, spinlock, ck_ring and
# liburcu's wfcqueue, interleaved. Extra arguments go to `bpbench ring`
# (e.g. scripts/run.sh --csv, or drop quick mode with scripts/run.sh --full).
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
if [ "${1:-}" = "--full" ]; then
	shift
	exec build/bench/bpbench ring "$@"
fi
exec build/bench/bpbench ring --quick "$@"
