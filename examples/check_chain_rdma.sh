#!/bin/sh
# Run chain_rdma against a real bp-target started here on an ephemeral
# loopback port. verify: every block written, the target's digest is the
# file's. kill: the target is killed (SIGKILL) mid-run, and every block
# submitted must still come back to the sink once (ok or failed).
# usage: check_chain_rdma.sh CHAIN_RDMA BP_TARGET PROVIDER [verify|kill]
set -u
bin=$1
tgt=$2
prov=$3
mode=${4:-verify}
dir=$(mktemp -d) || exit 1
pid=
run=
cleanup() {
	[ -n "$run" ] && kill -9 "$run" 2>/dev/null
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
# a signal (meson's timeout sends TERM) exits, so the EXIT trap stops the
# target too: without it the shell dies and bp-target stays behind
trap 'exit 1' HUP INT TERM
fail() {
	echo "check_chain_rdma ($prov, $mode): FAIL: $*" >&2
	cat "$dir/tgt.out" >&2
	exit 1
}
if ! fi_info -p "$prov" >/dev/null 2>&1; then
	echo "check_chain_rdma: no libfabric provider $prov: skipped"
	exit 77
fi
export FI_TCP_IFACE=lo
size=$((2000000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ')))
head -c "$size" /dev/urandom >"$dir/data"
"$tgt" --port 0 --provider "$prov" >"$dir/tgt.out" 2>&1 &
pid=$!
port=
for _ in $(seq 1 300); do
	port=$(sed -n 's/^bp-target: listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' \
		"$dir/tgt.out")
	[ -n "$port" ] && break
	kill -0 "$pid" 2>/dev/null || fail "bp-target exited"
	sleep 0.1
done
[ -n "$port" ] || fail "bp-target did not say where it listens"
if [ "$mode" = verify ]; then
	out=$("$bin" "127.0.0.1:$port" "$prov" "$dir/data" 3) ||
		fail "chain_rdma: $out"
	echo "chain_rdma: $out"
	echo "$out" | grep -q "size $size .*failed 0 target digest ok$" ||
		fail "unexpected: $out"
	theirs=$(gzip -c "$dir/data" | gzip -lv | awk 'NR == 2 { print $2 }')
	echo "$out" | grep -q "^crc32 $theirs " || fail "crc32 is not gzip's ($theirs)"
	exit 0
fi
# kill: passes enough to outlast the kill; the first failed pass ends it
"$bin" "127.0.0.1:$port" "$prov" "$dir/data" 100000 --expect-loss \
	>"$dir/out" 2>"$dir/err" &
run=$!
sleep 1
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=
wait "$run"
rc=$?
run=
echo "chain_rdma: $(cat "$dir/out")"
[ $rc -eq 0 ] || fail "chain_rdma exited $rc: $(cat "$dir/out" "$dir/err")"
grep -q "every block accounted, the first failure" "$dir/out" ||
	fail "no block failed: the target was not killed mid-run?"
