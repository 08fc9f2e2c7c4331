#!/bin/sh
# SPDX-License-Identifier: MIT
# bpbench app with tiny parameters: the CSV keeps its two blocks and their
# columns, every variant has a row per run with positive numbers, --out
# writes the same CSV next to the table, the table ends with the three
# headline lines, --variants leaves the others out, a run with a fault
# injected (lost, duplicated, reordered, miscomputed job) fails its
# verification with exit 1, and bad usage exits 2. Never asserts a timing.
# Exit 0 pass, else fail.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}" "${BP_SOURCE_ROOT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() {
	echo "test_app: FAIL: $*" >&2
	exit 1
}

# check_csv FILE HEADER...: the rows per CSV block (tests/lab/lib.sh)
# shellcheck source=tests/lab/lib.sh disable=SC1091 # shellcheck tests/lab/*.sh reads it
. "$BP_SOURCE_ROOT/tests/lab/lib.sh"

run_hdr='variant,B,run,jobs,Mjobs_per_s,cpu_ns_per_job,slot_waits'
sum_hdr='B,batchpipe_Mjobs_per_s,mutex_Mjobs_per_s,ceiling_Mjobs_per_s,batchpipe_over_mutex,batchpipe_over_ceiling,batchpipe_cpu_ns_per_job,mutex_cpu_ns_per_job,ceiling_cpu_ns_per_job'
# --pool 64 is small enough that producers wait for their slots too
small='--jobs 2000 --runs 2 --batches 1,32 --pool 64'

# --csv with --out: stdout and the file are the same CSV
# shellcheck disable=SC2086 # $small is several arguments
"$BPBENCH" app $small --csv --out "$tmp/o1" >"$tmp/app.csv" 2>"$tmp/err" ||
	fail "app --csv exited $?: $(tail -3 "$tmp/err")"
grep -q 'every run verified' "$tmp/err" || fail "no verification line"
counts=$(check_csv "$tmp/app.csv" "$run_hdr" "$sum_hdr") ||
	fail "bad CSV: $counts"
[ "$counts" = "12 2" ] ||
	fail "expected 12 run rows (3 variants x 2 B x 2 runs) and 2 B rows, got: $counts"
[ -s "$tmp/o1/app.csv" ] || fail "--out wrote no $tmp/o1/app.csv"
cmp -s "$tmp/app.csv" "$tmp/o1/app.csv" ||
	fail "--out file differs from the --csv output"

# every variant at every B and run: 8000 jobs, positive rate and CPU time
for v in batchpipe mutex ceiling; do
	n=$(awk -F, -v v="$v" '$1 == v && ($2 == 1 || $2 == 32) && $4 == 8000 &&
		$5 > 0 && $6 > 0 && $7 >= 0 { n++ } END { print n + 0 }' \
		"$tmp/app.csv")
	[ "$n" = 4 ] || fail "variant $v: $n good rows of 4"
done
# the B rows: medians and both ratios measured
awk -F, 'NR > 1 && ($1 == 1 || $1 == 32) {
	for (i = 2; i <= 9; i++) if ($i == "" || $i <= 0) bad = 1; n++
} END { exit bad || n != 2 }' "$tmp/app.csv" || fail "B rows incomplete"

# the table on stdout, the CSV in DIR/NAME.csv
# shellcheck disable=SC2086 # $small is several arguments
"$BPBENCH" app $small --out "$tmp/o2" --name a >"$tmp/table" 2>"$tmp/err" ||
	fail "app --out exited $?: $(tail -3 "$tmp/err")"
head -1 "$tmp/table" | grep -q '^bpbench app:' || fail "no table on stdout"
grep -q '^HEADLINE' "$tmp/table" || fail "no HEADLINE"
n=$(grep -cE '^  batchpipe >= .*: (met|MISSED) \(' "$tmp/table")
[ "$n" = 3 ] || fail "$n headline lines with met/MISSED, expected 3"
counts=$(check_csv "$tmp/o2/a.csv" "$run_hdr" "$sum_hdr") ||
	fail "bad --out CSV: $counts"

# --variants: only those rows; the ratios they lack are empty
"$BPBENCH" app --variants mutex --jobs 1000 --runs 1 --batches 4 --csv \
	>"$tmp/m.csv" 2>"$tmp/err" || fail "--variants mutex exited $?"
counts=$(check_csv "$tmp/m.csv" "$run_hdr" "$sum_hdr") ||
	fail "--variants mutex: bad CSV: $counts"
[ "$counts" = "1 1" ] || fail "--variants mutex: rows $counts, expected 1 1"
grep -q '^4,,[0-9.]*,,,,,[0-9.]*,$' "$tmp/m.csv" ||
	fail "--variants mutex: B row is $(tail -1 "$tmp/m.csv")"

# the verification can fail: with a fault injected (a test-only switch of
# bpbench app) a tiny run stops with exit 1 and VERIFY FAILED naming the
# variant, in each of the variants with a sink
for v in batchpipe mutex; do
	for fault in drop dup reorder miscompute; do
		BPBENCH_APP_FAULT=$fault "$BPBENCH" app --variants $v \
			--jobs 500 --runs 1 --batches 1,8 --pool 64 --csv \
			>/dev/null 2>"$tmp/fault.err"
		rc=$?
		[ $rc -eq 1 ] || fail "$v, fault $fault: exit $rc, expected 1"
		grep -q "VERIFY FAILED: $v B=" "$tmp/fault.err" ||
			fail "$v, fault $fault: no VERIFY FAILED ($(tail -1 "$tmp/fault.err"))"
	done
done
BPBENCH_APP_FAULT=miscompute "$BPBENCH" app --variants ceiling --jobs 500 \
	--runs 1 --batches 1 --csv >/dev/null 2>"$tmp/fault.err"
rc=$?
[ $rc -eq 1 ] || fail "ceiling, fault miscompute: exit $rc, expected 1"
grep -q "VERIFY FAILED: ceiling" "$tmp/fault.err" ||
	fail "ceiling, fault miscompute: no VERIFY FAILED"

# bad usage: exit 2, one line that says what is wrong, and where the usage is
for bad in "--jobs 0" "--batches 1,x" "--batches 2048" "--batches 8,8" \
	"--variants nope" "--variants mutex,mutex" "--producers 0" \
	"--workers 65" "--pool 8 --batches 8" "--cpus 0,0" "--name a/b" \
	"--json" "--ms 5" "--frobnicate" "stray"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" app $bad >/dev/null 2>"$tmp/bad.err"
	rc=$?
	[ $rc -eq 2 ] || fail "'$bad': exit $rc, expected 2"
	grep -q "^bpbench app: " "$tmp/bad.err" || fail "'$bad': no message"
	grep -q "^bpbench app: see bpbench app --help" "$tmp/bad.err" ||
		fail "'$bad': no pointer to --help"
	grep -q "^usage:" "$tmp/bad.err" && fail "'$bad': the whole usage"
done
# --help: exit 0, every option listed
"$BPBENCH" app --help >"$tmp/help.txt" 2>&1 || fail "--help: exit $?"
for o in jobs batches variants producers workers pool runs cpus seed quick \
	csv out name help; do
	grep -q "^  --$o" "$tmp/help.txt" || fail "--help lacks --$o"
done
echo "PASS"
exit 0
