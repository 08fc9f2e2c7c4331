#!/bin/sh
# SPDX-License-Identifier: MIT
# run_fuzz.sh FUZZER CORPUS - run the protocol fuzzer for BP_FUZZ_SECONDS
# (default 60) seconds from the seed corpus. New inputs go to a scratch
# directory, not into the source tree. Exit: 0 pass, 77 skip (no fuzzer was
# built: the compiler is not clang, or clang has no libFuzzer), 1 fail (a
# crash, a leak or a broken invariant: libFuzzer prints the input).
set -u
fuzzer=${1:-}
corpus=${2:?usage: run_fuzz.sh FUZZER CORPUS}
secs=${BP_FUZZ_SECONDS:-60}

if [ -z "$fuzzer" ] || [ ! -x "$fuzzer" ]; then
	echo "SKIP: no libFuzzer build (needs clang with -fsanitize=fuzzer)"
	exit 77
fi
# absolute paths: the fuzzer runs in a scratch directory
case $fuzzer in /*) ;; *) fuzzer=$(pwd)/$fuzzer ;; esac
case $corpus in /*) ;; *) corpus=$(pwd)/$corpus ;; esac
# findings (crash-*, leak-*) are kept where the test ran
artifacts=${BP_FUZZ_ARTIFACTS:-$(pwd)}
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
cd "$work" || exit 1
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
	-print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$corpus" >fuzz.log 2>&1
rc=$?
tail -n 25 fuzz.log
if [ $rc -ne 0 ]; then
	echo "FAIL: fuzzer exited $rc"
	ls "$artifacts"/crash-* "$artifacts"/leak-* 2>/dev/null
	exit 1
fi
echo "PASS: $secs s of fuzzing without a finding"
exit 0
