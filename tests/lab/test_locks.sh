#!/bin/sh
# SPDX-License-Identifier: MIT
# bpbench locks with tiny parameters: the CSV is well formed and covers
# every variant with positive numbers, --out writes CSV, JSON (with its
# keys) and two PNGs, a run with a fault injected fails its verification,
# plain-lockfree (threads of its own) runs verified with its in-flight limit
# binding, the headline gives its ratios, and a bad value is exit 2. Trivial jobs and a small
# --work-ns. Never asserts a timing. Exit 0 pass, 77 skip (no gnuplot),
# else fail.
set -u
: "${BPBENCH:?BPBENCH must name the bpbench binary}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

command -v gnuplot >/dev/null 2>&1 || {
	echo "SKIP: gnuplot is not installed" >&2
	exit 77
}
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read the JSON"

small="--threads 1,2 --batches 1,8 --runs 1 --ms 5 --pool 256"
# the variant names: the indented list under --variants in --help
variants=$("$BPBENCH" locks --help | awk '/^  --variants/ {on = 1; next}
	on && /^  --/ {exit} on && /^                     [a-z]/ {print $1}')
[ -n "$variants" ] || fail "no variants listed by --help"

# check_csv FILE: header, 5 fields a row, numbers in range, every variant
# with a row that delivered something. A single run may deliver nothing: a
# spinning variant whose lock holder was preempted through a 5 ms window on
# a busy machine is slow, not wrong (every run is verified by bpbench).
check_csv() {
	[ "$(head -n 1 "$1")" = "variant,threads,B,run,Mitems_per_s" ] ||
		fail "$1: header is '$(head -n 1 "$1")'"
	awk -F, 'NR > 1 {
		if (NF != 5) { print "row " NR ": " NF " fields"; bad = 1 }
		else if (!($2 > 0 && $3 > 0 && $4 >= 0 && $5 >= 0 &&
			   $5 ~ /^[0-9.]+$/)) {
			print "row " NR ": out of range: " $0; bad = 1 }
	} END { if (NR < 2) { print "no rows"; bad = 1 } exit bad }' "$1" ||
		fail "$1: malformed rows"
	for v in $variants; do
		awk -F, -v v="$v" '$1 == v && $5 > 0 { found = 1 }
			END { exit !found }' "$1" ||
			fail "$1: variant $v missing or never delivered"
	done
}

for work in 0 20; do
	# shellcheck disable=SC2086 # $small is several arguments
	"$BPBENCH" locks $small --work-ns $work --csv >"$tmp/w$work.csv" \
		2>"$tmp/w$work.err" ||
		fail "--csv --work-ns $work: exit $? ($(tail -n 3 "$tmp/w$work.err"))"
	check_csv "$tmp/w$work.csv"

	out="$tmp/out$work"
	# shellcheck disable=SC2086 # $small is several arguments
	"$BPBENCH" locks $small --work-ns $work --out "$out" --name lk \
		>"$tmp/w$work.txt" 2>"$tmp/w$work.err" ||
		fail "--out --work-ns $work: exit $? ($(tail -n 3 "$tmp/w$work.err"))"
	grep -q "best batchpipe variant" "$tmp/w$work.txt" ||
		fail "--work-ns $work: no headline in the table"
	check_csv "$out/lk.csv"
	python3 - "$out/lk.json" "$work" <<'PY' || fail "--work-ns $work: JSON"
import json, sys
d = json.load(open(sys.argv[1]))
work = int(sys.argv[2])
for k in ("work_ns", "work_ns_measured", "usable_cpus", "ceiling_mps",
          "threads", "batches", "runs", "headline"):
    assert k in d, "key %s missing" % k
assert d["work_ns"] == work
assert d["threads"] == [1, 2] and d["batches"] == [1, 8] and d["runs"] == 1
assert d["work_ns_measured"] > 0 and d["usable_cpus"] >= 1
assert (d["ceiling_mps"] is None) == (work == 0), d["ceiling_mps"]
assert len(d["headline"]) == 2
for h in d["headline"]:
    for k in ("threads", "best_batchpipe", "best_B", "best_mps",
              "mutex_mps", "ratio", "pipeline_mps"):
        assert k in h, "headline key %s missing" % k
    for k in ("plain_mps", "plain_B", "best_over_plain", "ring_mps",
              "ring_B", "pipeline_over_ring"):
        assert k in h, "headline key %s missing" % k
    # plain-lockfree is not batchpipe's: never the best batchpipe variant
    assert h["best_batchpipe"] in ("batchpipe-ring", "batchpipe-pipeline")
    assert h["best_mps"] > 0 and h["mutex_mps"] > 0 and h["ratio"] > 0
    assert h["plain_mps"] > 0 and h["plain_B"] in (1, 8)
    assert abs(h["best_over_plain"] - h["best_mps"] / h["plain_mps"]) < 1e-3
    assert h["ring_mps"] > 0 and h["pipeline_over_ring"] > 0
PY
	for png in lk-threads.png lk-best.png; do
		f="$out/$png"
		[ -s "$f" ] || fail "$f missing or empty"
		sig=$(od -An -tx1 -N8 "$f" | tr -d ' \n')
		[ "$sig" = "89504e470d0a1a0a" ] || fail "$f is not a PNG ($sig)"
	done
	[ -s "$out/lk-plot.dat" ] || fail "$out/lk-plot.dat missing"
done

# the verification can fail: with a fault injected (a test-only switch of
# bpbench locks) a tiny sweep must stop with exit 1 and VERIFY FAILED
for fault in drop miscompute; do
	BPBENCH_LOCKS_FAULT=$fault "$BPBENCH" locks --variants batchpipe-ring \
		--threads 1,2 --batches 1,8 --runs 1 --ms 5 --pool 256 --csv \
		>/dev/null 2>"$tmp/fault.err"
	rc=$?
	[ $rc -eq 1 ] || fail "fault $fault: exit $rc, expected 1"
	grep -q "VERIFY FAILED: batchpipe-ring" "$tmp/fault.err" ||
		fail "fault $fault: no VERIFY FAILED ($(tail -n 1 "$tmp/fault.err"))"
done

# plain-lockfree runs its own threads: once more, alone, tiny, at more workers
# than this machine's CPUs and with a pool of two batches, so that its limit
# on the jobs in flight binds all the time; bpbench verifies the run (issued
# == received + left over, the checksum) and exits 1 on a failure
"$BPBENCH" locks --variants plain-lockfree --threads 16 --batches 8 \
	--runs 1 --ms 20 --pool 16 --csv >"$tmp/plain.csv" 2>"$tmp/plain.err" ||
	fail "plain-lockfree: exit $? ($(tail -n 1 "$tmp/plain.err"))"
grep -q "every run verified" "$tmp/plain.err" ||
	fail "plain-lockfree: not verified ($(tail -n 1 "$tmp/plain.err"))"
awk -F, 'NR == 2 && $1 == "plain-lockfree" && $2 == 16 && $3 == 8 && $5 > 0 {
	ok = 1 } END { exit !(ok && NR == 2) }' "$tmp/plain.csv" ||
	fail "plain-lockfree: CSV is '$(cat "$tmp/plain.csv")'"
# the headline's ratios: best batchpipe / plain-lockfree, pipeline / ring
"$BPBENCH" locks --variants batchpipe-ring,batchpipe-pipeline,plain-lockfree \
	--threads 2 --batches 8 --runs 1 --ms 20 --pool 256 \
	>"$tmp/ratios.txt" 2>"$tmp/ratios.err" ||
	fail "ratios: exit $? ($(tail -n 1 "$tmp/ratios.err"))"
grep -q "^2 threads, trivial: best batchpipe variant = .* = [0-9.]*x plain-lockfree (B=8 " \
	"$tmp/ratios.txt" || fail "headline lacks best / plain-lockfree"
grep -q "(batchpipe-pipeline: .* = [0-9.]*x batchpipe-ring (B=8))" \
	"$tmp/ratios.txt" || fail "headline lacks pipeline / ring"

# bad usage: exit 2, one line that says what is wrong, and where the usage is
for bad in "--threads 0" "--batches 1,x" "--variants nope" "--work-ns -1" \
	"--pool 4 --batches 8" "--cpus 0,0" "--name a/b" "--frobnicate" \
	"--threads 1,1" "--batches 8,8" "--variants mutex,mutex" \
	"--out a'b" "--name a'b" "--json" "stray"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" locks $bad >/dev/null 2>"$tmp/bad.err"
	rc=$?
	[ $rc -eq 2 ] || fail "'$bad': exit $rc, expected 2"
	grep -q "^bpbench locks: " "$tmp/bad.err" || fail "'$bad': no message"
	grep -q "^bpbench locks: see bpbench locks --help" "$tmp/bad.err" ||
		fail "'$bad': no pointer to --help"
	grep -q "^usage:" "$tmp/bad.err" && fail "'$bad': the whole usage"
done
# bad usage found after parsing (one option against another) leaves no --out
# directory behind: it is made only once the usage is known to be good
for bad in "--batches 8,8" "--pool 4 --batches 8"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$BPBENCH" locks $bad --out "$tmp/never" >/dev/null 2>&1
	rc=$?
	[ $rc -eq 2 ] || fail "'$bad --out': exit $rc, expected 2"
	[ -e "$tmp/never" ] && fail "'$bad --out': made the --out directory"
done
# --help: exit 0, every option listed
"$BPBENCH" locks --help >"$tmp/help.txt" 2>&1 || fail "--help: exit $?"
for o in threads batches variants work-ns runs ms pool cpus seed quick csv \
	out name help; do
	grep -q "^  --$o" "$tmp/help.txt" || fail "--help lacks --$o"
done
# the targets at 16 threads, each with its verdict
"$BPBENCH" locks --variants batchpipe-ring,batchpipe-pipeline,plain-lockfree \
	--threads 16 --batches 8 --runs 1 --ms 20 --pool 256 \
	>"$tmp/targets.txt" 2>"$tmp/targets.err" ||
	fail "targets: exit $? ($(tail -n 1 "$tmp/targets.err"))"
grep -Eq '^  16 threads: best batchpipe >= 0.9 of plain-lockfree: (met|MISSED)' \
	"$tmp/targets.txt" || fail "no verdict on best batchpipe / plain-lockfree"
grep -Eq '^  16 threads: batchpipe-pipeline >= 0.6 of batchpipe-ring: (met|MISSED)' \
	"$tmp/targets.txt" || fail "no verdict on pipeline / ring"
echo "PASS"
exit 0
