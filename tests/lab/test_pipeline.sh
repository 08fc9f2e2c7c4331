#!/bin/sh
# bpbench pipeline with tiny parameters: every CSV block keeps its header,
# every row has its header's field count, --out writes the same CSV next to
# the table, and bad usage exits 2.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}" "${BP_SOURCE_ROOT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_pipeline: FAIL: $*" >&2
	exit 1
}

# check_csv FILE HEADER...: the rows per CSV block (tests/lab/lib.sh)
# shellcheck source=tests/lab/lib.sh disable=SC1091 # shellcheck tests/lab/*.sh reads it
. "$BP_SOURCE_ROOT/tests/lab/lib.sh"

pipe_hdr='producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_us,cpu_ns_per_job'
ring_hdr='ring1x1,B,run,Mitems_per_s'
alone_hdr='alone,B,run,Mjobs_per_s'
work_hdr='work,work_ns,producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_us'
lat_hdr='latency,wait,test,run,bench_p50_us,bench_p99_us,bp_p50_us,bp_p99_us,idle_cpu_pct'
handoff_hdr='handoff,run,ns_one_way'
floor_hdr='wakefloor,run,p50_us,p99_us'
plain_hdr='plain,producers,workers,B,wait,run,Mjobs_per_s,pipe_over_plain,cpu_ns_per_job'
lanes_hdr='lanes,producers,lanes,workers,B,wait,run,Mjobs_per_s,lanes_over_plain,lanes_over_pipe,cpu_ns_per_job'
# every point and phase once, each as short as it goes
args='--runs 1 --ms 5 --workers 1 --batches 8 --waits spin-sleep
      --work-ns 100 --lat-ms 5 --wake-samples 3 --wake-gap-us 100
      --idle-ms 20 --pool 256'

# shellcheck disable=SC2086 # $args is several arguments
"$BPBENCH" pipeline $args --csv --out "$tmp/o1" >"$tmp/p.csv" 2>"$tmp/err" ||
	fail "pipeline --csv exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
counts=$(check_csv "$tmp/p.csv" "$pipe_hdr" "$ring_hdr" "$alone_hdr" \
	"$work_hdr" "$lat_hdr" "$handoff_hdr" "$floor_hdr" "$plain_hdr" \
	"$lanes_hdr") || fail "bad CSV: $counts"
# pipeline points: W1 B8, ordered W2 B8, and the headline W2/W16 at B32
# (unordered, ordered); ring and alone at B8 and B32; work at W1; one
# low-load, same-wait, wake-up and idle row; one hand-off; one floor; the
# plain twins of the unordered points (W1 B8, W2 and W16 at B32); the
# lanes twin of the one at B <= 8 (W1 B8: 2 producers, 2 lanes)
[ "$counts" = "5 2 2 1 4 1 1 3 1" ] ||
	fail "rows per block: $counts, expected 5 2 2 1 4 1 1 3 1"
grep -Eq '^lanes,2,2,1,8,spin-sleep,0,[0-9.]+,[0-9.]+,[0-9.]+,[0-9]+[.][0-9]$' \
	"$tmp/p.csv" || fail "no lanes row for W1 B8 spin-sleep"
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
counts=$(check_csv "$tmp/o2/sweep.csv" "$pipe_hdr" "$ring_hdr" "$alone_hdr" \
	"$plain_hdr" "$lanes_hdr") || fail "bad --out CSV: $counts"
[ "$counts" = "2 0 0 0 0" ] ||
	fail "rows per block of sweep.csv: $counts, expected 2 0 0 0 0"

# --ordered: the sweep's pipelines deliver in order (instructions.py)
"$BPBENCH" pipeline --quick --sweep-only --ordered --no-latency --runs 1 \
	--ms 5 --workers 1 --batches 8 --waits sleep --csv >"$tmp/ord.csv" \
	2>"$tmp/err" || fail "pipeline --ordered exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "--ordered: not verified"
[ "$(grep -c '^2,1,8,sleep,1,0,' "$tmp/ord.csv")" = 1 ] ||
	fail "--ordered: no ordered sweep row: $(head -3 "$tmp/ord.csv")"
! grep -q '^2,1,8,sleep,0,' "$tmp/ord.csv" ||
	fail "--ordered: an unordered sweep row"

# the plain variant (pipeline/plain.c) once, tiny, every run verified like
# the pipeline's: its table, its headline lines and its rows; and none of
# it with --no-plain
"$BPBENCH" pipeline --runs 1 --ms 5 --workers 1 --batches 8 --waits sleep \
	--no-latency --work-ns 0 --pool 256 --out "$tmp/o3" >"$tmp/table3" \
	2>"$tmp/err" || fail "pipeline (plain) exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "plain: no verification line"
grep -q '^Pipeline / plain: ' "$tmp/table3" || fail "no pipeline / plain table"
grep -q '^   B=1, target >= 0.90: ' "$tmp/table3" || fail "no B=1 plain target"
grep -Eq '^   B>=8, target >= 1.00: (met|MISSED|n/a)' "$tmp/table3" ||
	fail "no B>=8 plain target"
counts=$(check_csv "$tmp/o3/pipeline.csv" "$pipe_hdr" "$ring_hdr" \
	"$alone_hdr" "$plain_hdr" "$lanes_hdr") || fail "bad plain CSV: $counts"
[ "$counts" = "5 2 2 3 0" ] ||
	fail "rows per block with plain: $counts, expected 5 2 2 3 0"
grep -Eq '^plain,2,1,8,sleep,0,[0-9.]+,[0-9.]+,[0-9]+[.][0-9]$' \
	"$tmp/o3/pipeline.csv" || fail "no plain row for W1 B8 sleep"
# CPU per job: measured (a positive number, not nan) for both variants,
# and its table printed beside pipeline / plain
awk -F, '/^plain,[0-9]/ && !($9 + 0 > 0) { bad = 1 }
	/^[0-9]/ && !($10 + 0 > 0) { bad = 1 }
	END { exit bad }' "$tmp/o3/pipeline.csv" ||
	fail "a run without its CPU per job: $(grep -E '^(plain,|[0-9])' \
		"$tmp/o3/pipeline.csv" | head -4)"
grep -q '^CPU per job, the same runs: ' "$tmp/table3" ||
	fail "no CPU per job table"
"$BPBENCH" pipeline --runs 1 --ms 5 --workers 1 --batches 8 \
	--waits busy-poll --no-latency --work-ns 0 --pool 256 --no-plain \
	--csv >"$tmp/np.csv" 2>"$tmp/err" ||
	fail "pipeline --no-plain exited $?: $(tail -3 "$tmp/err")"
grep -q '^Pipeline / plain' "$tmp/np.csv" && fail "--no-plain printed a table"
counts=$(check_csv "$tmp/np.csv" "$pipe_hdr" "$ring_hdr" "$alone_hdr" \
	"$plain_hdr" "$lanes_hdr") || fail "bad --no-plain CSV: $counts"
[ "$counts" = "5 2 2 0 0" ] ||
	fail "rows per block with --no-plain: $counts, expected 5 2 2 0 0"

# --stages: a chain against one stage, a serial stage against a mutex
"$BPBENCH" pipeline --stages 2 --runs 1 --ms 5 --work-ns 200 --pool 256 \
	>"$tmp/st.out" 2>"$tmp/err" ||
	fail "pipeline --stages 2 exited $?: $(tail -3 "$tmp/err")"
grep -q "every run verified" "$tmp/err" || fail "--stages: no verified count"
for want in '^trivial +2 +1 ' '^trivial +2 +32 ' '^work +2 +32 ' \
	'^ +2 +32 +[0-9.]+ +[0-9.]+ ' '^1\. 2-stage chain .* / one stage: [0-9.]+' \
	'target >= 0\.9: (met|MISSED)' '^3\. serial stage / mutex section'; do
	grep -Eq -- "$want" "$tmp/st.out" ||
		fail "--stages output lacks /$want/: $(cat "$tmp/st.out")"
done

for bad in "--bogus" "--runs 0" "--workers" "--waits spin" \
	"--batches 4096 --pool 4096" "--pool 10" "--cpus 99999" "stray" \
	"--stages 9" "--stages 2 --csv" "--ordered"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" pipeline $bad >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "pipeline $bad exited $rc, not 2"
	[ -s "$tmp/err" ] || fail "pipeline $bad said nothing on stderr"
done
"$BPBENCH" pipeline --help >"$tmp/help" || fail "--help exited $?"
for opt in --runs --ms --producers --workers --batches --waits --work-ns \
	--pool --lat-ms --wake-samples --wake-gap-us --idle-ms --no-latency \
	--no-plain --sweep-only --ordered --no-warmup --stages --pin --inflight --ingress --egress --spin-ns --yields \
	--cpus --seed --quick --csv --out --name --help; do
	grep -q -- "^  $opt\b" "$tmp/help" || fail "--help does not list $opt"
done
echo "test_pipeline: ok"
