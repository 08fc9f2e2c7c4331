#!/bin/sh
# Whatever ends bpbench, its bp-target goes with it and leaves no files:
# bpbench rdma-fill over shm is sent SIGPIPE, SIGHUP, SIGTERM and SIGINT
# in the middle of a fill (and once SIGKILL: the daemon is told through
# PR_SET_PDEATHSIG). Each time the daemon must be gone within 15 s (its
# own stop is bounded by --stop-timeout-ms, 5 s), and none of its
# /dev/shm/bp-PID-* files may remain. What the killed bpbench's own
# endpoints left is swept by the next process that opens a shm endpoint:
# a last short run, after which no file of any of them may remain. The
# same for bpbench rdma killed mid-run, whose raw loop names its shm
# endpoints as the library does.
# Skips (77) without the RDMA stage or libfabric's shm.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_rdma_cleanup: FAIL: $*" >&2
	exit 1
}
if ! "$BPBENCH" --help | grep -q '^  rdma-fill '; then
	echo "test_rdma_cleanup: SKIP: bpbench has no rdma subcommands"
	exit 77
fi
if ! fi_info -p shm >/dev/null 2>&1; then
	echo "test_rdma_cleanup: SKIP: no shm provider"
	exit 77
fi
files_of() { # PID: how many /dev/shm files carry it
	find /dev/shm -maxdepth 1 -name "bp-$1-*" 2>/dev/null | wc -l
}
pids=""
for sig in PIPE HUP TERM INT KILL; do
	"$BPBENCH" rdma-fill --provider shm --bytes 256M --page 4K \
		--runs 20 --no-raw >"$tmp/out" 2>"$tmp/err" &
	b=$!
	d=""
	# the daemon started and the fill writing: its files exist
	for _ in $(seq 200); do
		d=$(pgrep -P "$b" -f bp-target | head -1)
		[ -n "$d" ] && [ "$(files_of "$d")" -gt 0 ] &&
			grep -q 'verified\|GB\|fill' "$tmp/err" && break
		sleep 0.05
	done
	[ -n "$d" ] || { kill -9 "$b"; fail "$sig: no bp-target child seen"; }
	sleep 0.3 # mid-fill
	kill -"$sig" "$b"
	wait "$b" 2>/dev/null
	gone=0
	for _ in $(seq 300); do
		if ! kill -0 "$d" 2>/dev/null; then
			gone=1
			break
		fi
		sleep 0.05
	done
	if [ $gone -eq 0 ]; then
		kill -9 "$d"
		fail "SIG$sig to bpbench: its bp-target $d still runs 15 s later"
	fi
	n=$(files_of "$d")
	[ "$n" -eq 0 ] || fail "SIG$sig: bp-target $d left $n /dev/shm files"
	echo "SIG$sig: bpbench $b ended, bp-target $d gone, its files too"
	pids="$pids $b $d"
done
# bpbench rdma's raw libfabric loop opens shm endpoints of its own: killed
# while both variants alternate, what it leaves must be named so that the
# sweep knows it (bp-PID-...), never libfabric's default "PID:0:N"
if "$BPBENCH" --help | grep -q '^  rdma '; then
	"$BPBENCH" rdma --providers shm --in-process --sizes 64 --runs 5 \
		--ms 300 --no-latency >/dev/null 2>"$tmp/err" &
	b=$!
	# the raw loop's endpoint open: its file, named as the library's
	raw=""
	for _ in $(seq 300); do
		raw=$(find /dev/shm -maxdepth 1 -name "bp-$b-raw*" 2>/dev/null | head -1)
		[ -n "$raw" ] && break
		sleep 0.05
	done
	[ -n "$raw" ] || { kill -9 "$b"; fail "bpbench rdma $b: no bp-$b-raw* shm file seen in 15 s"; }
	kill -PIPE "$b"
	wait "$b" 2>/dev/null
	n=$(find /dev/shm -maxdepth 1 -name "$b:*" 2>/dev/null | wc -l)
	[ "$n" -eq 0 ] || fail "bpbench rdma $b left $n /dev/shm files named PID:..."
	echo "SIGPIPE: bpbench rdma $b ended, nothing of it named PID:..."
	pids="$pids $b"
fi
# the next run sweeps what the killed bpbench processes left
"$BPBENCH" rdma-fill --provider shm --bytes 1M --runs 1 --no-raw \
	>/dev/null 2>"$tmp/err" || fail "a last run: $(tail -3 "$tmp/err")"
for p in $pids; do
	n=$(files_of "$p")
	[ "$n" -eq 0 ] || fail "process $p's $n /dev/shm files survived"
done
echo "test_rdma_cleanup: ok"
