#!/bin/sh
# bpbench ring with tiny parameters: the CSV keeps its columns (p50_ns and
# p99_ns added at the end), every row has its header's field count, --out
# writes the same CSV next to the table, and bad usage exits 2.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}" "${BP_SOURCE_ROOT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_ring: FAIL: $*" >&2
	exit 1
}

# check_csv FILE HEADER...: the rows per CSV block (tests/lab/lib.sh)
# shellcheck source=tests/lab/lib.sh disable=SC1091 # shellcheck tests/lab/*.sh reads it
. "$BP_SOURCE_ROOT/tests/lab/lib.sh"

main_hdr='queue,P,C,B,run,Mitems_per_s,p50_ns,p99_ns'
single_hdr='single,queue,B,ns_per_item'
args='--runs 2 --ms 5 --points 1x1 --batches 8 --queues batchpipe,mutex'

# --csv with --out: stdout and the file are the same CSV
# shellcheck disable=SC2086 # $args is several arguments
"$BPBENCH" ring $args --csv --out "$tmp/o1" >"$tmp/ring.csv" 2>"$tmp/err" ||
	fail "ring --csv exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
counts=$(check_csv "$tmp/ring.csv" "$main_hdr" "$single_hdr") ||
	fail "bad CSV: $counts"
[ "$counts" = "4 2" ] ||
	fail "expected 4 throughput rows and 2 single rows, got: $counts"
[ -s "$tmp/o1/ring.csv" ] || fail "--out wrote no $tmp/o1/ring.csv"
cmp -s "$tmp/ring.csv" "$tmp/o1/ring.csv" ||
	fail "--out file differs from the --csv output"

# every threaded run has latency samples: 0 < p50 <= p99
awk -F, 'NR > 1 && $1 != "single" && !/^single/ {
	if ($7 == "" || $8 == "" || $7 <= 0 || $7 + 0 > $8 + 0) {
		print "bad latency in: " $0; bad = 1
	}
} $0 == "single,queue,B,ns_per_item" { exit bad } END { exit bad }' \
	"$tmp/ring.csv" || fail "latency columns"

# the table on stdout, the CSV in DIR/NAME.csv
# shellcheck disable=SC2086 # $args is several arguments
"$BPBENCH" ring $args --no-single --out "$tmp/o2" --name r \
	>"$tmp/table" 2>"$tmp/err" || fail "ring --out exited $?"
head -1 "$tmp/table" | grep -q '^bpbench ring:' || fail "no table on stdout"
grep -q 'latency, enqueue -> dequeue' "$tmp/table" ||
	fail "no latency table"
counts=$(check_csv "$tmp/o2/r.csv" "$main_hdr") || fail "bad --out CSV: $counts"
[ "$counts" = 4 ] || fail "expected 4 rows in r.csv, got $counts"

# JSON still parses where python3 is there to say so
if command -v python3 >/dev/null 2>&1; then
	# shellcheck disable=SC2086 # $args is several arguments
	"$BPBENCH" ring $args --no-single --json 2>/dev/null |
		python3 -c 'import json, sys
d = json.load(sys.stdin)
assert len(d["results"]) == 2, d["results"]
for r in d["results"]:
    assert r["median_p50_ns"] > 0 and r["median_p99_ns"] >= r["median_p50_ns"], r
' || fail "--json"
fi

# every queue of this build, each run verified (an adapter that loses or
# forges items fails here); the optional competitors are in the table or
# named as missing, with how to get them; the SP/SC ceiling table is there
"$BPBENCH" ring --runs 1 --ms 3 --points 1x1,2x2 --batches 1,32 \
	>"$tmp/all" 2>"$tmp/err" || fail "ring, every queue, exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "every queue: no verification line"
for q in rte_ring rte_ring-hts rte_ring-rts moodycamel; do
	grep -q "$q" "$tmp/all" || fail "$q neither compared nor named as missing"
done
grep -q '^batchpipe-sp-sc against spsc-ceiling' "$tmp/all" ||
	fail "no SP/SC ceiling table"
# the targets, each with its verdict (or n/a where a queue did not run)
grep -q '^HEADLINE (targets' "$tmp/all" || fail "no HEADLINE"
for t in 'every PxC x B point >= the best other queue' \
	'geometric mean of the ratios >= 1.6' 'batchpipe-sp-sc >= 0.9 of' \
	"single thread, batchpipe's cost <= rte_ring's"; do
	grep -Eq "^  $t.*: (met|MISSED|n/a)" "$tmp/all" ||
		fail "HEADLINE lacks a verdict on: $t"
done

# bad usage: exit status 2, a message on stderr
for bad in "--bogus" "--runs 0" "--runs" "--points 1y1" "--queues nosuch" \
	"--csv --json" "--capacity 6" "--name a/b" "stray"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" ring $bad >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "ring $bad exited $rc, not 2"
	[ -s "$tmp/err" ] || fail "ring $bad said nothing on stderr"
	[ "$(wc -l <"$tmp/err")" -le 2 ] ||
		fail "ring $bad: more than the message and where the usage is"
done
# the range of a bad value is in its message
"$BPBENCH" ring --capacity 1000 2>"$tmp/err" >/dev/null
grep -q "bad value '1000' for --capacity N: .*power of two, 2\.\.2^24" \
	"$tmp/err" || fail "--capacity 1000: the message lacks the range"
# --out is tried before anything runs: a directory that cannot be made
# fails at once, with the subcommand's name
"$BPBENCH" ring --out /proc/nope --quick >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] || fail "ring --out /proc/nope exited $rc, not 2"
[ -s "$tmp/out" ] && fail "ring --out /proc/nope ran the experiment first"
grep -q "^bpbench ring: cannot create /proc/nope" "$tmp/err" ||
	fail "ring --out /proc/nope: $(cat "$tmp/err")"
# --version
"$BPBENCH" --version >"$tmp/ver" || fail "--version exited $?"
grep -Eq '^bpbench [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/ver" ||
	fail "--version printed: $(cat "$tmp/ver")"
"$BPBENCH" ring --help >"$tmp/help" || fail "--help exited $?"
for opt in --runs --ms --points --batches --queues --cpus --capacity --seed \
	--no-single --quick --csv --json --out --name --help; do
	grep -q -- "^  $opt\b" "$tmp/help" || fail "--help does not list $opt"
done
echo "test_ring: ok"
