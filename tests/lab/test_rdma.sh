#!/bin/sh
# bpbench rdma and rdma-fill with tiny parameters over loopback: the CSV
# keeps its columns, every row has its header's field count, --out writes
# the same CSV next to the table, and bad usage exits 2. Skips (77) where
# bpbench was built without the RDMA stage.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}" "${BP_SOURCE_ROOT:?}"
export FI_TCP_IFACE=lo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_rdma: FAIL: $*" >&2
	exit 1
}
if ! "$BPBENCH" --help | grep -q '^  rdma '; then
	echo "test_rdma: SKIP: bpbench has no rdma subcommand (built with" \
		"-Drdma=disabled)"
	exit 77
fi

# check_csv FILE HEADER...: the rows per CSV block (tests/lab/lib.sh)
# shellcheck source=tests/lab/lib.sh disable=SC1091 # shellcheck tests/lab/*.sh reads it
. "$BP_SOURCE_ROOT/tests/lab/lib.sh"

pts_hdr='provider,mode,size,post_batch,reap_batch,depth,workers,rails,run,GBps,Mops,cpu_ns_per_op'
lat_hdr='provider,mode,wait,avg_us,p50_us,p90_us,p99_us,p999_us,ops_per_s,client_cpu_pct,target_cpu_pct'
fill_hdr='run,seed,provider,rails,bytes,page,fill_Gbps,fill_Mpages_per_s,raw_Gbps,raw_Mops_per_s,verified_bytes,raw_verified_bytes'
args='--providers shm --sizes 4K --runs 1 --ms 20 --lat-ms 20 --idle-ms 20'

# shellcheck disable=SC2086 # $args is several arguments
"$BPBENCH" rdma $args --csv --out "$tmp/o1" >"$tmp/r.csv" 2>"$tmp/err"
rc=$?
if grep -q 'skipped, the provider does not open' "$tmp/err"; then
	# a run that measured nothing fails (below, with a provider that is
	# nowhere); here it means shm is missing
	[ $rc -eq 1 ] || fail "nothing measured, yet exit $rc"
	echo "test_rdma: SKIP: libfabric's shm provider does not open here"
	exit 77
fi
[ $rc -eq 0 ] || fail "rdma --csv exited $rc: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
counts=$(check_csv "$tmp/r.csv" "$pts_hdr" "$lat_hdr") || fail "bad CSV: $counts"
# shellcheck disable=SC2086 # one count a word
set -- $counts
# one point, pipeline and raw; at least one latency row
[ "$1" = 2 ] || fail "expected 2 point rows, got $1"
[ "$2" -ge 1 ] || fail "no latency rows"
# the run-to-completion stage's row beside the pipeline's and raw's
grep -q '^shm,direct,busy,' "$tmp/r.csv" || fail "no direct busy-poll latency row"
[ -s "$tmp/o1/rdma.csv" ] || fail "--out wrote no rdma.csv"
cmp -s "$tmp/r.csv" "$tmp/o1/rdma.csv" ||
	fail "--out file differs from the --csv output"

# shellcheck disable=SC2086 # $args is several arguments
"$BPBENCH" rdma $args --no-latency --out "$tmp/o2" --name pts \
	>"$tmp/table" 2>"$tmp/err" || fail "rdma --out exited $?"
if [ ! -s "$tmp/table" ] || grep -q "^$pts_hdr\$" "$tmp/table"; then
	fail "no table on stdout"
fi
counts=$(check_csv "$tmp/o2/pts.csv" "$pts_hdr") || fail "bad pts.csv: $counts"
[ "$counts" = 2 ] || fail "expected 2 rows in pts.csv, got $counts"

# rdma-fill: bp-target fills 1 MiB in 64 KiB pages, and the raw reference
# (a writer process) writes the same pages into the same buffer, two runs
# of each, every byte of both verified
"$BPBENCH" rdma-fill --bytes 1M --page 64K --runs 2 --csv \
	--out "$tmp/o3" >"$tmp/f.csv" 2>"$tmp/err" ||
	fail "rdma-fill --csv exited $?: $(tail -3 "$tmp/err")"
counts=$(check_csv "$tmp/f.csv" "$fill_hdr") || fail "bad fill CSV: $counts"
[ "$counts" = 2 ] || fail "expected 2 fill rows, got $counts"
awk -F, 'NR > 1 && ($11 != 1048576 || $12 != 1048576 || $7 == "" ||
	$8 == "" || $9 == "" || $10 == "") {
	print "bad row: " $0; bad = 1 } END { exit bad }' "$tmp/f.csv" ||
	fail "fill rows"
[ "$(grep -c 'fill .* GB/s, raw .* GB/s, every byte verified' "$tmp/err")" = 2 ] ||
	fail "rdma-fill: not one verified fill and raw pass per run"
cmp -s "$tmp/f.csv" "$tmp/o3/rdma-fill.csv" ||
	fail "--out file differs from the --csv output"
# the table at the runs the target is judged on: both rows, both ratios,
# both verified, a verdict
"$BPBENCH" rdma-fill --bytes 256K --page 16K --runs 9 >"$tmp/f.txt" \
	2>"$tmp/err" || fail "rdma-fill exited $?: $(tail -3 "$tmp/err")"
for re in '^  fill  *[0-9.]* \[[0-9.]*-[0-9.]*\]' \
	'^  raw  *[0-9.]* \[[0-9.]*-[0-9.]*\]' \
	'^  fill / raw: [0-9.]* (ratio of medians), [0-9.]* (median of per-run ratios)$' \
	'^  verified: 2359296 bytes of fills, 2359296 of raw passes' \
	'^HEADLINE' '^  fill / raw >= 0.9 (tcp;ofi_rxm, 16384-byte pages): \(met\|MISSED\) ([0-9.]*, ratio of medians [0-9.]*)$'; do
	grep -q "$re" "$tmp/f.txt" || fail "rdma-fill table: no line like '$re'"
done
# a wrong page from the writer is caught, and said to be the raw pass's
BPBENCH_RDMA_FILL_FAULT=raw "$BPBENCH" rdma-fill --bytes 256K --page 16K \
	--runs 1 >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || fail "a wrong raw page: exit $rc, not 1"
grep -q 'VERIFY FAILED: raw run 0: [0-9]* of 262144 bytes differ' "$tmp/err" ||
	fail "a wrong raw page: not reported: $(tail -2 "$tmp/err")"
# --no-raw: the raw fields are empty, the target is not judged
"$BPBENCH" rdma-fill --bytes 256K --runs 1 --no-raw >"$tmp/n.txt" \
	--out "$tmp/o4" 2>"$tmp/err" || fail "rdma-fill --no-raw exited $?"
awk -F, 'NR > 1 && ($9 != "" || $10 != "" || $12 != "" || $11 != 262144) {
	print "bad row: " $0; bad = 1 } END { exit bad }' "$tmp/o4/rdma-fill.csv" ||
	fail "--no-raw rows"
grep -q '^  fill / raw >= 0.9 (.*): n/a (--no-raw)$' "$tmp/n.txt" ||
	fail "--no-raw: no n/a verdict"

for cmd in rdma rdma-fill; do
	for bad in "--bogus" "--runs 0" "--runs" "stray"; do
		# shellcheck disable=SC2086 # the words are the arguments
		"$BPBENCH" $cmd $bad >/dev/null 2>"$tmp/err"
		rc=$?
		[ $rc -eq 2 ] || fail "$cmd $bad exited $rc, not 2"
		[ -s "$tmp/err" ] || fail "$cmd $bad said nothing on stderr"
	done
	"$BPBENCH" $cmd --help >"$tmp/help" || fail "$cmd --help exited $?"
	for opt in --runs --csv --out --name --help; do
		grep -q -- "^  $opt\b" "$tmp/help" ||
			fail "$cmd --help does not list $opt"
	done
done
# --direct: the run-to-completion variant, a third row per run, verified
# as the others
# shellcheck disable=SC2086 # $args is several arguments
"$BPBENCH" rdma $args --no-latency --direct --csv >"$tmp/d.csv" 2>"$tmp/err" ||
	fail "rdma --direct exited $?: $(tail -3 "$tmp/err")"
counts=$(check_csv "$tmp/d.csv" "$pts_hdr") || fail "bad --direct CSV: $counts"
[ "$counts" = 3 ] || fail "expected 3 rows with --direct, got $counts"
grep -q '^shm,direct,4096,' "$tmp/d.csv" || fail "no direct row"

# --intake: a job submitted while another is in flight (needs bp-target,
# which it stops and continues; shm holds nothing in flight: n/a there)
"$BPBENCH" rdma --intake --providers 'shm,tcp;ofi_rxm' --intake-samples 5 \
	>"$tmp/intake" 2>"$tmp/err" || fail "rdma --intake exited $?: $(tail -3 "$tmp/err")"
grep -q '^Intake: ' "$tmp/intake" || fail "--intake: no table"
grep -q '^  intake spin-sleep, shm: ' "$tmp/intake" || fail "--intake: no shm verdict"
if grep -q '^tcp;ofi_rxm *spin-sleep *5 ' "$tmp/intake"; then
	grep -Eq '^  intake event, tcp;ofi_rxm: (met|MISSED) \(p50' "$tmp/intake" ||
		fail "--intake: no tcp event verdict"
fi

for bad in "--sizes 7" "--latency --no-latency" "--waits nosuch" "--intake --csv"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" rdma $bad >/dev/null 2>"$tmp/bad.err"
	rc=$?
	[ $rc -eq 2 ] || fail "rdma $bad exited $rc, not 2"
	grep -q "^bpbench rdma: see bpbench rdma --help" "$tmp/bad.err" ||
		fail "rdma $bad: no pointer to --help"
	grep -q "^usage:" "$tmp/bad.err" && fail "rdma $bad: the whole usage"
done
# a provider that is nowhere: nothing measured is a failure, and says why
"$BPBENCH" rdma --providers nosuch --quick >/dev/null 2>"$tmp/none.err"
rc=$?
[ $rc -eq 1 ] || fail "rdma --providers nosuch exited $rc, not 1"
grep -q "nosuch: not here.*fi_info -l" "$tmp/none.err" ||
	fail "rdma --providers nosuch: no word on the missing provider"
grep -q "NOTHING MEASURED" "$tmp/none.err" ||
	fail "rdma --providers nosuch: no word that nothing was measured"
grep -q "every run verified" "$tmp/none.err" &&
	fail "rdma --providers nosuch claims verified runs"
echo "test_rdma: ok"
