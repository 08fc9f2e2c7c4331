#!/bin/sh
# SPDX-License-Identifier: MIT
# test_sweep.sh - `bpbench sweep`: the presets and the generic form with
# tiny child windows; the CSV (exact header, field counts, positive
# throughput, p99 present where the child measures it), the --out files
# (CSV equal to stdout's, PNG with its signature), bad usage (exit 2) and a
# failing child (the sweep fails and shows the child's stderr).
# Needs BPBENCH (the bpbench binary). Exit: 0 pass, 77 skip (no gnuplot,
# after every check that does not need it), 1 fail. Never asserts a timing.
set -u
bp=${BPBENCH:?set BPBENCH to the bpbench binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_sweep.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fails=0
header='subcommand,param,value,param2,value2,run,throughput,throughput_unit,p99,p99_unit'

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# run NAME CMD...: stdout to $tmp/NAME.out, stderr to $tmp/NAME.err,
# exit status in $rc.
run() {
	name=$1
	shift
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
}

# check_csv FILE SUB PARAM ROWS P99(yes|no) [PARAM2]: the sweep's CSV.
check_csv() {
	f=$1 sub=$2 param=$3 rows=$4 p99=$5 p2=${6:-}
	if [ "$(head -n 1 "$f")" != "$header" ]; then
		fail "$f: header is '$(head -n 1 "$f")'"
		return
	fi
	n=$(($(wc -l <"$f") - 1))
	[ "$n" -eq "$rows" ] || fail "$f: $n data rows, expected $rows"
	bad=$(awk -F, -v sub_="$sub" -v param="$param" -v p99="$p99" \
		-v p2="$p2" 'NR > 1 {
		if (NF != 10) { print "line " NR ": " NF " fields"; next }
		if ($1 != sub_ || $2 != param)
			print "line " NR ": subcommand/param " $1 "/" $2
		if ($3 !~ /^[0-9]+$/) print "line " NR ": value " $3
		if ($4 != p2) print "line " NR ": param2 " $4
		if ((p2 == "") != ($5 == "")) print "line " NR ": value2 " $5
		if ($7 !~ /^[0-9.e+-]+$/ || $7 + 0 <= 0)
			print "line " NR ": throughput " $7
		if ($8 == "") print "line " NR ": no throughput unit"
		if (p99 == "yes" && ($9 == "" || $9 + 0 <= 0 || $10 == ""))
			print "line " NR ": p99 " $9 " " $10
		if (p99 == "no" && ($9 != "" || $10 != ""))
			print "line " NR ": p99 " $9 " " $10 " (none expected)"
		if ($9 == "" && $10 != "") print "line " NR ": unit, no p99"
	}' "$f")
	[ -z "$bad" ] || fail "$f: $bad"
}

# check_png FILE: exists, not empty, starts with the PNG signature.
check_png() {
	if [ ! -s "$1" ]; then
		fail "$1 missing or empty"
		return
	fi
	sig=$(od -An -tx1 -N8 "$1" | tr -d ' \n')
	[ "$sig" = 89504e470d0a1a0a ] || fail "$1: not a PNG ($sig)"
}

# ---- CSV on stdout: pipeline and ring presets ----
run pipe "$bp" sweep pipeline --runs 1 --batches 1,8 --csv -- --ms 5
if [ "$rc" -ne 0 ]; then
	fail "sweep pipeline exited $rc"
	cat "$tmp/pipe.err"
else
	check_csv "$tmp/pipe.out" pipeline batches 2 yes
	[ "$(cut -d, -f3 "$tmp/pipe.out" | tail -n +2 | sort -n | tr '\n' ' ')" = "1 8 " ] ||
		fail "pipeline: B values $(cut -d, -f3 "$tmp/pipe.out" | tr '\n' ' ')"
	grep -q '^pipeline,batches,1,,,0,[^,]*,Mjobs/s,[^,]*,us$' "$tmp/pipe.out" ||
		fail "pipeline: units not Mjobs/s and us"
fi

# ring prints p99_ns: every row has a p99 and its unit
run ring "$bp" sweep ring --runs 1 --batches 1,16 --csv -- --ms 5
if [ "$rc" -ne 0 ]; then
	fail "sweep ring exited $rc"
	cat "$tmp/ring.err"
else
	check_csv "$tmp/ring.out" ring batches 2 yes
fi

# ---- the generic form, with a second parameter ----
run gen "$bp" sweep --param batches=2,4 --param2 points=1x1,2x2 \
	--tput Mitems_per_s --runs 1 --csv -- \
	ring --queues batchpipe --runs 1 --no-single --ms 5
if [ "$rc" -ne 0 ]; then
	fail "generic sweep exited $rc"
	cat "$tmp/gen.err"
else
	check_csv "$tmp/gen.out" ring batches 4 no points
	[ "$(cut -d, -f5 "$tmp/gen.out" | tail -n +2 | sort -u | tr '\n' ' ')" = "1x1 2x2 " ] ||
		fail "generic: param2 values $(cut -d, -f5 "$tmp/gen.out" | tr '\n' ' ')"
fi

# ---- rdma, where bpbench has it: no p99 per batch size ----
if "$bp" --help | grep -q '^  rdma '; then
	run rdma "$bp" sweep rdma --runs 1 --batches 1,4 --csv -- --ms 5
	if [ "$rc" -ne 0 ]; then
		fail "sweep rdma exited $rc"
		cat "$tmp/rdma.err"
	else
		check_csv "$tmp/rdma.out" rdma post+reap 2 no
	fi
else
	echo "note: bpbench built without rdma, rdma preset not tested"
fi

# ---- bad usage: one line, where the usage is, exit 2 ----
for args in "pipeline --batches 0" "pipeline --batches 1,x" \
	"pipeline --runs 0" "nosuch" "pipeline --nosuch" \
	"pipeline -- --batches 4" "pipeline --param batches=1" \
	"--param batches=1 -- ring" "--param batches=0 --tput x -- ring" \
	"pipeline --param2 workers=1,,2" "pipeline --batches 4,4" \
	"pipeline --name a/b" "--param batches=1 --tput x -- sweep" \
	"pipeline stray" "pipeline --out a'b" "pipeline --name a.b" \
	"pipeline --param2 batches=1,2" "--param batches=1 --tput x"; do
	# shellcheck disable=SC2086 # the words are the arguments
	run bad "$bp" sweep $args
	[ "$rc" -eq 2 ] || fail "sweep $args exited $rc, expected 2"
	grep -q '^bpbench sweep: see bpbench sweep --help' "$tmp/bad.err" ||
		fail "sweep $args: no pointer to --help on stderr"
	grep -q '^usage:' "$tmp/bad.err" && fail "sweep $args: the whole usage"
done
[ -e "$tmp/a'b" ] || [ -e "a'b" ] && fail "--out a'b was created before it was refused"
run help "$bp" sweep --help
if ! { [ "$rc" -eq 0 ] && grep -q -- '--batches LIST' "$tmp/help.out" &&
	grep -q '^  pipeline ' "$tmp/help.out" &&
	grep -q -- '^  --param2 NAME=LIST' "$tmp/help.out" &&
	grep -q -- '-- SUBCOMMAND \[child options\]' "$tmp/help.out"; }; then
	fail "sweep --help (exit $rc) lacks options or presets"
fi

# ---- a child that fails stops the sweep, its stderr shown; a child's bad
# usage (exit 2) and a column the options name that its CSV lacks are bad
# usage of the sweep too: exit 2, the message on a line of its own (not on
# the progress line) ----
run child "$bp" sweep pipeline --runs 1 --batches 1,2 -- --no-such-option
[ "$rc" -eq 2 ] || fail "a child's bad option: the sweep exited $rc, expected 2"
grep -q "no-such-option" "$tmp/child.err" ||
	fail "a failing child: its stderr is not shown"
grep -q '^bpbench sweep: see bpbench sweep --help' "$tmp/child.err" ||
	fail "a child's bad option: no pointer to --help"
[ -s "$tmp/child.out" ] && fail "a failing child: the sweep printed results"
run col "$bp" sweep --param batches=2 --tput no_such_column --runs 1 -- \
	ring --queues batchpipe --points 1x1 --runs 1 --no-single --ms 5
[ "$rc" -eq 2 ] || fail "a missing --tput column: exit $rc, expected 2"
grep -q "^bpbench sweep: bad value 'no_such_column' for --tput" "$tmp/col.err" ||
	fail "a missing --tput column: not said on a line of its own"
[ -s "$tmp/col.out" ] && fail "a missing --tput column: the sweep printed results"

# ---- --out: needs gnuplot ----
if ! command -v gnuplot >/dev/null 2>&1; then
	run nogp "$bp" sweep ring --runs 1 --batches 1,2 --out "$tmp/o" -- --ms 5
	[ "$rc" -eq 1 ] || fail "--out without gnuplot exited $rc, expected 1"
	[ "$fails" -eq 0 ] || exit 1
	echo "SKIP: gnuplot not installed, --out not tested"
	exit 77
fi
run outp "$bp" sweep pipeline --runs 1 --batches 1,8 --param2 workers=1,2 \
	--csv --out "$tmp/o" --name pp -- --ms 5
if [ "$rc" -ne 0 ]; then
	fail "sweep pipeline --out exited $rc"
	cat "$tmp/outp.err"
else
	check_csv "$tmp/o/pp.csv" pipeline batches 4 yes workers
	cmp -s "$tmp/outp.out" "$tmp/o/pp.csv" ||
		fail "pipeline --out: pp.csv differs from the CSV on stdout"
	check_png "$tmp/o/pp.png"
	[ -s "$tmp/o/pp-plot.dat" ] || fail "pipeline --out: no pp-plot.dat"
fi
run outr "$bp" sweep ring --runs 1 --batches 1,16 --out "$tmp/o" -- --ms 5
if [ "$rc" -ne 0 ]; then
	fail "sweep ring --out exited $rc"
	cat "$tmp/outr.err"
else
	check_csv "$tmp/o/sweep-ring.csv" ring batches 2 yes
	check_png "$tmp/o/sweep-ring.png"
	grep -q 'tput/B0' "$tmp/outr.out" ||
		fail "ring --out: no table on stdout"
fi

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "PASS"
exit 0
