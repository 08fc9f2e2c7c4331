#!/bin/sh
# bpbench ring with tiny parameters: the CSV keeps its columns (p50_ns and
# p99_ns added at the end), every row has its header's field count, --out
# writes the same CSV next to the table, and bad usage exits 2.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_ring: FAIL: $*" >&2
	exit 1
}

# check_csv FILE HEADER...: the headers appear in this order, each starting
# a block; every other non-empty line has its block's field count; no nan.
# Prints the number of rows of each block, one per line.
check_csv() {
	file=$1
	shift
	printf '%s\n' "$@" >"$tmp/headers"
	awk -v hdrs="$tmp/headers" '
	BEGIN { while ((getline l < hdrs) > 0) want[++nw] = l }
	/^$/ { next }
	seen < nw && $0 == want[seen + 1] {
		seen++; nf = split($0, h, ","); rows[seen] = 0; next
	}
	seen == 0 { print "line " NR " before any header: " $0; bad = 1; next }
	{
		n = split($0, f, ",")
		if (n != nf) {
			print "line " NR ": " n " fields, its header " nf ": " $0
			bad = 1
		}
		if ($0 ~ /(^|,)-?(nan|inf)(,|$)/) { print "line " NR ": " $0; bad = 1 }
		rows[seen]++
	}
	END {
		if (seen != nw) { print "missing header: " want[seen + 1]; bad = 1 }
		for (i = 1; i <= nw; i++) print rows[i] + 0 > "/dev/stdout"
		exit bad
	}' "$file"
}

main_hdr='queue,P,C,B,run,Mitems_per_s,p50_ns,p99_ns'
single_hdr='single,queue,B,ns_per_item'
args='--runs 2 --ms 5 --points 1x1 --batches 8 --queues batchpipe,mutex'

# --csv with --out: stdout and the file are the same CSV
"$BPBENCH" ring $args --csv --out "$tmp/o1" >"$tmp/ring.csv" 2>"$tmp/err" ||
	fail "ring --csv exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
counts=$(check_csv "$tmp/ring.csv" "$main_hdr" "$single_hdr") ||
	fail "bad CSV: $counts"
[ "$(echo $counts)" = "4 2" ] ||
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
"$BPBENCH" ring $args --no-single --out "$tmp/o2" --name r \
	>"$tmp/table" 2>"$tmp/err" || fail "ring --out exited $?"
head -1 "$tmp/table" | grep -q '^bpbench ring:' || fail "no table on stdout"
grep -q 'latency, enqueue -> dequeue' "$tmp/table" ||
	fail "no latency table"
counts=$(check_csv "$tmp/o2/r.csv" "$main_hdr") || fail "bad --out CSV: $counts"
[ "$counts" = 4 ] || fail "expected 4 rows in r.csv, got $counts"

# JSON still parses where python3 is there to say so
if command -v python3 >/dev/null 2>&1; then
	"$BPBENCH" ring $args --no-single --json 2>/dev/null |
		python3 -c 'import json, sys
d = json.load(sys.stdin)
assert len(d["results"]) == 2, d["results"]
for r in d["results"]:
    assert r["median_p50_ns"] > 0 and r["median_p99_ns"] >= r["median_p50_ns"], r
' || fail "--json"
fi

# bad usage: exit status 2, a message on stderr
for bad in "--bogus" "--runs 0" "--runs" "--points 1y1" "--queues nosuch" \
	"--csv --json" "--capacity 6" "--name a/b" "stray"; do
	"$BPBENCH" ring $bad >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "ring $bad exited $rc, not 2"
	[ -s "$tmp/err" ] || fail "ring $bad said nothing on stderr"
done
"$BPBENCH" ring --help >"$tmp/help" || fail "--help exited $?"
for opt in --runs --ms --points --batches --queues --cpus --capacity --seed \
	--no-single --quick --csv --json --out --name --help; do
	grep -q -- "^  $opt\b" "$tmp/help" || fail "--help does not list $opt"
done
echo "test_ring: ok"
