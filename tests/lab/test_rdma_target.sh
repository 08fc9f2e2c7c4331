#!/bin/sh
# bpbench rdma-target with tiny parameters over shm: exit 0, a table row
# per size and target, the idle CPU line and a HEADLINE verdict per size;
# --out's CSV keeps its columns and row counts; bad usage exits 2, for it
# and for bp-plain-target; a bpbench killed outright while its targets are
# paused takes them along. Skips (77) without the RDMA stage or shm.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}" "${BP_SOURCE_ROOT:?}"
: "${BP_PLAIN_TARGET:?BP_PLAIN_TARGET must name bp-plain-target}"
export FI_TCP_IFACE=lo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_rdma_target: FAIL: $*" >&2
	exit 1
}
if ! "$BPBENCH" --help | grep -q '^  rdma-target '; then
	echo "test_rdma_target: SKIP: bpbench has no rdma-target subcommand"
	exit 77
fi

# check_csv FILE HEADER...: the rows per CSV block (tests/lab/lib.sh)
# shellcheck source=tests/lab/lib.sh disable=SC1091 # shellcheck tests/lab/*.sh reads it
. "$BP_SOURCE_ROOT/tests/lab/lib.sh"

# bp-plain-target's command line: one line saying what is wrong, then
# where the usage is, exit 2; --help exits 0
for bad in "" "--size 1M" "--provider shm" "--provider shm --size 7" \
	"--provider shm --size 1M stray" "--bogus" "--provider shm --size" \
	"--provider shm --size 1M --port 1"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BP_PLAIN_TARGET" $bad </dev/null >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "bp-plain-target '$bad': exit $rc, not 2"
	if [ "$(wc -l <"$tmp/err")" -ne 2 ] ||
		! grep -q '^bp-plain-target: see bp-plain-target --help$' \
			"$tmp/err"; then
		fail "bp-plain-target '$bad' said: $(cat "$tmp/err")"
	fi
done
"$BP_PLAIN_TARGET" --help >"$tmp/help" || fail "bp-plain-target --help: $?"
grep -q -- '--provider' "$tmp/help" || fail "bp-plain-target --help"

run_hdr='provider,size,target,run,GBps,Mops,target_cpu_pct'
idle_hdr='provider,target,idle_cpu_pct'
"$BPBENCH" rdma-target --providers shm --quick --runs 1 --ms 50 \
	--idle-ms 50 --target-waits busy --out "$tmp/o" >"$tmp/table" \
	2>"$tmp/err"
rc=$?
if grep -q 'shm: skipped, the provider does not open' "$tmp/err"; then
	[ $rc -eq 1 ] || fail "nothing measured, yet exit $rc"
	echo "test_rdma_target: SKIP: libfabric's shm provider does not open"
	exit 77
fi
[ $rc -eq 0 ] || fail "rdma-target exited $rc: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
for size in 64K 1M; do
	for target in bp-target bp-target:busy plain; do
		grep -Eq "^shm +$size +$target +[0-9.]+ \[[0-9.]+-[0-9.]+\]" \
			"$tmp/table" || fail "no table row for $size $target"
	done
	grep -Eq "^  shm $size: (met|MISSED) \([0-9]+\.[0-9]{3};" \
		"$tmp/table" || fail "no HEADLINE verdict for $size"
done
grep -q '^HEADLINE' "$tmp/table" || fail "no HEADLINE"
grep -Eq '^  shm +bp-target [0-9.]+  bp-target:busy [0-9.]+  plain [0-9.]+$' \
	"$tmp/table" || fail "no idle CPU line"
counts=$(check_csv "$tmp/o/rdma-target.csv" "$run_hdr" "$idle_hdr") ||
	fail "bad CSV: $counts"
# 2 sizes x 3 targets x 1 run; 3 targets idle
[ "$counts" = "6 3" ] || fail "expected 6 and 3 CSV rows, got $counts"

for bad in "--bogus" "--runs 0" "--sizes 7" "--target-waits nosuch" \
	"--target-waits busy,busy" "stray"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" rdma-target $bad >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "rdma-target $bad exited $rc, not 2"
	grep -q "^bpbench rdma-target: see bpbench rdma-target --help" \
		"$tmp/err" || fail "rdma-target $bad: no pointer to --help"
done
"$BPBENCH" rdma-target --help >"$tmp/help" || fail "--help exited $?"
for opt in --providers --sizes --target-waits --runs --ms --idle-ms --quick \
	--csv --out --name --help; do
	grep -q -- "^  $opt\b" "$tmp/help" || fail "--help does not list $opt"
done
# a provider that is nowhere: nothing measured is a failure
"$BPBENCH" rdma-target --providers nosuch --quick >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "rdma-target --providers nosuch exited $rc, not 1"
grep -q "NOTHING MEASURED" "$tmp/err" || fail "nosuch: no word on it"

# killed outright while one target runs and the others are paused: the
# targets go too (their own group, orphaned: SIGHUP ignored, SIGCONT, and
# the SIGTERM of PR_SET_PDEATHSIG), within 10 s (bp-target's stop is
# bounded by its --stop-timeout-ms, 5 s, bp-plain-target's by 2 s: shm can
# leave a peer of the killed process spinning inside the provider)
"$BPBENCH" rdma-target --providers shm --sizes 64K --runs 50 --ms 100 \
	>/dev/null 2>"$tmp/kill.err" &
b=$!
for _ in $(seq 200); do
	grep -q 'shm size 64K' "$tmp/kill.err" && break
	sleep 0.05
done
kids=$(sed -n 's/.* is pid \([0-9]*\)$/\1/p' "$tmp/kill.err")
if [ -z "$kids" ]; then
	kill -9 "$b"
	fail "no target started: $(cat "$tmp/kill.err")"
fi
sleep 0.3
kill -9 "$b"
wait "$b" 2>/dev/null
for k in $kids; do
	gone=0
	for _ in $(seq 200); do
		kill -0 "$k" 2>/dev/null || { gone=1; break; }
		sleep 0.05
	done
	if [ $gone -eq 0 ]; then
		kill -9 "$k"
		fail "target $k still runs 10 s after bpbench was killed"
	fi
done
# the shm endpoints of processes that could not close them (libfabric
# names them PID:...): the killed bpbench's, a target's that did not stop
for p in $b $kids; do
	rm -f "/dev/shm/$p:"*
done
echo "test_rdma_target: ok"
