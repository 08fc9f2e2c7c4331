#!/bin/sh
# The whole test suite: installs what is missing, builds, runs every test,
# then the unit, concurrency and RDMA tests under ThreadSanitizer (the unit
# tests start threads too: misuse, producers, hooks) and the unit, stress,
# example and RDMA tests under AddressSanitizer + UBSan. Ends with
# "N passed, N failed, N skipped" and exits non-zero on any failure.
#   scripts/test.sh            everything
#   scripts/test.sh --fast     the plain build only (no sanitizers)
set -u
cd "$(dirname "$0")/.." || exit 1
fast=0
[ "${1:-}" = "--fast" ] && fast=1

scripts/deps.sh || exit 1
logs=""
status=0

run_suite() { # name builddir "meson options" "meson test args"
	name=$1 dir=$2 opts=$3 targs=$4
	echo "== $name: building $dir" >&2
	# shellcheck disable=SC2086
	if ! scripts/build.sh "$dir" $opts; then
		echo "== $name: BUILD FAILED" >&2
		status=1
		return
	fi
	rm -f "$dir/meson-logs/testlog.json"
	echo "== $name: testing" >&2
	# shellcheck disable=SC2086
	meson test -C "$dir" --print-errorlogs $targs >&2 || status=1
	logs="$logs $dir/meson-logs/testlog.json"
}

# -Drdma=enabled: a machine without libfabric fails here instead of
# silently testing less (deps.sh installs it).
run_suite plain build "-Dwerror=true -Drdma=enabled" ""
if [ $fast -eq 0 ]; then
	run_suite tsan build-tsan \
		"-Dwerror=true -Drdma=enabled -Db_sanitize=thread -Dallocator=libc -Dbench=false -Dexamples=false" \
		"--suite unit --suite stress --suite block --suite rdma --timeout-multiplier 4"
	run_suite asan build-asan \
		"-Dwerror=true -Drdma=enabled -Db_sanitize=address,undefined -Dc_args=-fno-sanitize-recover=undefined -Db_lundef=false -Dallocator=libc -Dbench=false" \
		"--suite unit --suite stress --suite example --suite rdma"
fi

# shellcheck disable=SC2086
python3 scripts/testsummary.py $logs || status=1
exit $status
