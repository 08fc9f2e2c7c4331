#!/bin/sh
# bpbench pipeline with tiny parameters: every CSV block keeps its header,
# every row has its header's field count, --out writes the same CSV next to
# the table, and bad usage exits 2.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_pipeline: FAIL: $*" >&2
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

pipe_hdr='producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_us'
ring_hdr='ring1x1,B,run,Mitems_per_s'
alone_hdr='alone,B,run,Mjobs_per_s'
work_hdr='work,work_ns,producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_us'
lat_hdr='latency,wait,test,run,bench_p50_us,bench_p99_us,bp_p50_us,bp_p99_us,idle_cpu_pct'
handoff_hdr='handoff,run,ns_one_way'
floor_hdr='wakefloor,run,p50_us,p99_us'
# every point and phase once, each as short as it goes
args='--runs 1 --ms 5 --workers 1 --batches 8 --waits spin-sleep
      --work-ns 100 --lat-ms 5 --wake-samples 3 --wake-gap-us 100
      --idle-ms 20 --pool 256'

"$BPBENCH" pipeline $args --csv --out "$tmp/o1" >"$tmp/p.csv" 2>"$tmp/err" ||
	fail "pipeline --csv exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
counts=$(check_csv "$tmp/p.csv" "$pipe_hdr" "$ring_hdr" "$alone_hdr" \
	"$work_hdr" "$lat_hdr" "$handoff_hdr" "$floor_hdr") ||
	fail "bad CSV: $counts"
# pipeline points: W1 B8, ordered W2 B8, and the headline W2/W16 at B32
# (unordered, ordered); ring and alone at B8 and B32; work at W1; one
# low-load, same-wait, wake-up and idle row; one hand-off; one floor
[ "$(echo $counts)" = "5 2 2 1 4 1 1" ] ||
	fail "rows per block: $(echo $counts), expected 5 2 2 1 4 1 1"
[ -s "$tmp/o1/pipeline.csv" ] || fail "--out wrote no pipeline.csv"
cmp -s "$tmp/p.csv" "$tmp/o1/pipeline.csv" ||
	fail "--out file differs from the --csv output"

# the sweep alone, the table on stdout and the CSV in DIR/NAME.csv
"$BPBENCH" pipeline --quick --sweep-only --no-latency --runs 1 --ms 5 \
	--workers 1 --batches 8 --waits busy-poll,sleep --out "$tmp/o2" \
	--name sweep >"$tmp/table" 2>"$tmp/err" ||
	fail "pipeline --out exited $?: $(tail -3 "$tmp/err")"
head -1 "$tmp/table" | grep -q '^bpbench pipeline:' || fail "no table"
grep -q '^HEADLINE' "$tmp/table" || fail "no headline in the table"
counts=$(check_csv "$tmp/o2/sweep.csv" "$pipe_hdr" "$ring_hdr" "$alone_hdr") ||
	fail "bad --out CSV: $counts"
[ "$(echo $counts)" = "2 0 0" ] ||
	fail "rows per block of sweep.csv: $(echo $counts), expected 2 0 0"

for bad in "--bogus" "--runs 0" "--workers" "--waits spin" \
	"--batches 4096 --pool 4096" "--pool 10" "--cpus 99999" "stray"; do
	"$BPBENCH" pipeline $bad >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "pipeline $bad exited $rc, not 2"
	[ -s "$tmp/err" ] || fail "pipeline $bad said nothing on stderr"
done
"$BPBENCH" pipeline --help >"$tmp/help" || fail "--help exited $?"
for opt in --runs --ms --producers --workers --batches --waits --work-ns \
	--pool --lat-ms --wake-samples --wake-gap-us --idle-ms --no-latency \
	--sweep-only --pin --inflight --ingress --egress --spin-ns --yields \
	--cpus --seed --quick --csv --out --name --help; do
	grep -q -- "^  $opt\b" "$tmp/help" || fail "--help does not list $opt"
done
echo "test_pipeline: ok"
