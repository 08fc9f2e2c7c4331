#!/bin/sh
# scripts/report.py on a results folder with malformed files: a truncated
# locks.json, a CSV without a column its section needs, a steps.tsv line
# cut short. The report is still written, each such section says
# "unreadable: FILE (why)" in its place, and a well-formed section after
# them is still there. Needs python3 only. Exit 0 pass, 77 skip (no
# python3), else fail.
set -u
: "${BP_SOURCE_ROOT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() { echo "test_report_input: FAIL: $*" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3" >&2; exit 77; }

d=$tmp/results
mkdir "$d"
printf 'locks\tok\t1\tlocks, trivial jobs\t\nlocks-work50\tok\t1\tlocks, ~50 ns jobs\t\n' >"$d/steps.tsv"
printf 'ring\tok\t1\tring comparison\t\t3\t0\npipeline\tok\t1\tpipeline\t\t55\t2\nsweep\tok\n' \
	>>"$d/steps.tsv"
printf 'variant,threads,B,run,Mitems_per_s\nmutex,1,1,0,2.5\n' >"$d/locks.csv"
printf '{"benchmark":"locks","work_ns":0,"headline":[{"threads":1,"best_' >"$d/locks.json"
printf 'variant,threads,B,run\nmutex,1,1,0\n' >"$d/locks-work50.csv"
printf 'queue,P,C,B,run,p50_ns\nmutex,1,1,8,0,100\n' >"$d/ring.csv"
printf 'producers,workers,B,wait,ordered,run,Mjobs_per_s,p50_us,p99_us\n' >"$d/pipeline.csv"
printf '1,1,8,spin-sleep,0,0,3.25,1,2\n' >>"$d/pipeline.csv"
printf 'bpbench pipeline: a table\n\nHEADLINE (targets)\n1. speed: 5 (target >= 4: meets)\n' \
	>"$d/pipeline.txt"
printf '2. cost 30 %% (target <= 15 %%: MISSES)\n   a: met; b: MISSED\n\nafter: MISSED\n' \
	>>"$d/pipeline.txt"
printf 'subcommand,param,value,param2,value2,run,throughput,throughput_unit,p99,p99_unit\n' \
	>"$d/sweep-pipeline.csv"
printf 'pipeline,batches,x,,,0,1.5,Mjobs/s,10,us\n' >>"$d/sweep-pipeline.csv"

python3 "$BP_SOURCE_ROOT/scripts/report.py" "$d" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$tmp/out" >&2; fail "report.py exited $rc"; }
for f in report.md report.html summary.txt; do
	[ -f "$d/$f" ] || fail "no $f"
done
for f in locks.json locks-work50.csv ring.csv; do
	grep -q "^unreadable: $f (.*)" "$d/report.md" || fail "report.md does not say $f is unreadable"
	grep -q "unreadable: $f (" "$d/report.html" || fail "report.html does not say $f is unreadable"
done
grep -q '^unreadable: locks-work50.csv (no column Mitems_per_s' "$d/report.md" ||
	fail "the missing column is not named"
grep -q '^| spin-sleep | 1 | 3.2 n=1 |' "$d/report.md" || fail "the pipeline section after them is missing"
grep -q '^## Batch sweep' "$d/report.md" || fail "no sweep section"
# the step's own verdicts, in the open: the HEADLINE block's lines only
grep -q '^| pipeline | ok | 2 met, 2 MISSED |' "$d/report.md" ||
	fail "the steps table does not count the pipeline's verdicts"
grep -q '^| 2. cost 30 % (target <= 15 %: MISSES) | MISSED |' "$d/report.md" ||
	fail "a MISSED target is not listed in its section"
grep -q '^pipeline: 2 of 4 targets MISSED' "$d/summary.txt" ||
	fail "the headline does not say targets were missed"
# the machine's load per step; a step under load is marked, and said first
grep -q '^| ring comparison | ok |  | 1 | others 3 %, steal 0 % |' "$d/report.md" ||
	fail "the steps table lacks a step's load"
grep -q '^| pipeline | ok | 2 met, 2 MISSED | 1 | others 55 %, steal 2 % (UNDER LOAD) |' \
	"$d/report.md" || fail "a step under load is not marked"
head -n 1 "$d/summary.txt" | grep -q '^load: pipeline (others 55 %, steal 2 %) ran while' ||
	fail "the headline does not begin with the load warning"
echo "test_report_input: ok"
exit 0
