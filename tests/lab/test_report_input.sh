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
printf 'bpbench pipeline: a table\n\nLatency, 1 producer, 1 worker, one job at a time\n' \
	>"$d/pipeline.txt"
printf 'wake-up: 5000 us idle before each job\n%s\n' \
	'spin-sleep        4.0 / 5.7       4.1 / 6.1       4.1 / 5.7   101.7 / 174.6   114.7 / 196.6     0.03' \
	>>"$d/pipeline.txt"
printf '\nHEADLINE (targets)\n1. speed: 5 (target >= 4: meets)\n' >>"$d/pipeline.txt"
printf '2. cost 30 %% (target <= 15 %%: MISSES)\n   a: met; b: MISSED\n\nafter: MISSED\n' \
	>>"$d/pipeline.txt"
printf 'subcommand,param,value,param2,value2,run,throughput,throughput_unit,p99,p99_unit\n' \
	>"$d/sweep-pipeline.csv"
printf 'pipeline,batches,x,,,0,1.5,Mjobs/s,10,us\n' >>"$d/sweep-pipeline.csv"
# the RDMA sizes step: its CSV per size and variant, its verdicts under
# bpbench rdma's "targets" heading
printf 'rdma-sizes\tok\t13\tRDMA write sizes\t\t0\t0\n' >>"$d/steps.tsv"
printf 'provider,mode,size,post_batch,reap_batch,depth,workers,rails,run,GBps,Mops,cpu_ns_per_op\n' \
	>"$d/rdma-sizes.csv"
printf 'shm,pipeline,64,16,16,16,1,1,0,0.02,0.3,4000\nshm,raw,64,16,16,16,1,1,0,0.025,0.4,2000\n' \
	>>"$d/rdma-sizes.csv"
printf 'shm,pipeline,64,16,16,16,1,1,1,0.03,0.3,4000\nshm,raw,64,16,16,16,1,1,1,0.03,0.4,2000\n' \
	>>"$d/rdma-sizes.csv"
printf 'shm,pipeline,1048576,16,16,16,1,1,0,15,0.01,70000\nshm,raw,1048576,16,16,16,1,1,0,16,0.01,66000\n' \
	>>"$d/rdma-sizes.csv"
# a run whose window saw no write: nan, left out (not the section lost)
printf 'shm,pipeline,64,16,16,16,1,1,2,nan,nan,nan\n' >>"$d/rdma-sizes.csv"
printf 'a table\n\ntargets\n  1. shm 1M: pipeline 15 GB/s (>= 90 %%): MET\n' >"$d/rdma-sizes.txt"
printf '  2. shm 64 B: 0.8 of raw (>= 0.9): MISSED\n' >>"$d/rdma-sizes.txt"
# the flame step: two profiles (folded stacks, one in futex calls), the
# profiled runs' table and top self time, a comparison picture
printf 'flame\tok\t20\tflame graphs\t\t0\t0\n' >>"$d/steps.tsv"
mkdir "$d/flame"
printf 'x;main;pthread_mutex_lock;syscall;entry_SYSCALL_64;do_syscall_64;futex_wait 60\nx;main;work 40\n' \
	>"$d/flame/mutex.folded"
printf 'x;main;dequeue_fast 70\nx;main;work 30\n' >"$d/flame/batchpipe-ring.folded"
for f in mutex batchpipe-ring mutex-vs-batchpipe-ring; do
	echo '<html></html>' >"$d/flame/$f.html"
done
printf 'PNG' >"$d/flame/mutex-vs-batchpipe-ring.png"
printf 'threads  variant  best B         M/s   x mutex   CPUs\n     16  mutex         1       5.000       1.0   1.95\n' \
	>"$d/flame/mutex.unprofiled.txt"
{
	printf 'threads  variant  best B         M/s   x mutex   CPUs\n'
	printf '     16  mutex         1       4.810       1.0   1.91\n'
	printf 'top self time, mutex (100 samples):\n   60.0 %%      60  futex_wait\n\n'
	printf '     16  batchpipe-ring      32     141.578         -   1.99\n'
	printf 'top self time, batchpipe-ring (100 samples):\n   70.0 %%      70  dequeue_fast\n'
} >"$d/flame.txt"

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
# the pipeline's latency, wake-up and idle CPU, in the open
grep -q '^| spin-sleep | 4.0 / 5.7 | 4.1 / 5.7 | 101.7 / 174.6 | 0.03 |' "$d/report.md" ||
	fail "the pipeline's latency table is not shown"
grep -q 'wake-up: after 5000 us idle gap' "$d/report.md" || fail "the idle gap is not named"
# the step's own verdicts, in the open: the HEADLINE block's lines only
grep -q '^| pipeline | ok | 2 met, 2 MISSED |' "$d/report.md" ||
	fail "the steps table does not count the pipeline's verdicts"
grep -q '^| 2. cost 30 % (target <= 15 %: MISSES) | MISSED |' "$d/report.md" ||
	fail "a MISSED target is not listed in its section"
grep -q '^pipeline: 2 of 4 targets MISSED' "$d/summary.txt" ||
	fail "the headline does not say targets were missed"
grep -q '^| RDMA write sizes | ok | 1 met, 1 MISSED |' "$d/report.md" ||
	fail "the steps table does not count the RDMA sizes verdicts (its 'targets' block)"
# per size: both variants' spread and the median of per-run ratios (0.8, 1.0)
grep -q '^| shm | 64 | 0.025 \[0.020-0.030\] n=2 | 0.028 \[0.025-0.030\] n=2 | 0.90x (ranges overlap) | 4000 \[4000-4000\] n=2 |' \
	"$d/report.md" || fail "the RDMA sizes table is not as its CSV says"
grep -q '^| shm | 1M | 15.000 n=1 | 16.000 n=1 | 0.94x |' "$d/report.md" ||
	fail "the RDMA sizes table lacks 1M"
# each profile's own run and top self time, and what the pair shows
grep -q '^mutex (100 samples): the profiled run moved 4.81 M/s on 1.91 CPUs (the same command unprofiled, just before it: 5.00 M/s on 1.95 CPUs: 0.96x)' "$d/report.md" ||
	fail "the flame section does not give the profiled mutex run against the same command unprofiled"
grep -q 'Where its time went (self time): dequeue_fast 70.0 %' "$d/report.md" ||
	fail "the flame section does not give a profile's top self time"
grep -q 'In this run mutex moved 4.81 M/s on 1.91 CPUs and batchpipe-ring 142 M/s on 1.99 CPUs (29x). mutex spent 60.0 % of its samples in futex calls .* and 60.0 % in system calls; batchpipe-ring 0.0 % and 0.0 %. So mutex.s threads spend their CPU waking and waiting' \
	"$d/report.md" || fail "the flame comparison does not say what this pair shows"
# the machine's load per step; a step under load is marked, and said first
grep -q '^| ring comparison | ok |  | 1 | others 3 %, steal 0 % |' "$d/report.md" ||
	fail "the steps table lacks a step's load"
grep -q '^| pipeline | ok | 2 met, 2 MISSED | 1 | others 55 %, steal 2 % (UNDER LOAD) |' \
	"$d/report.md" || fail "a step under load is not marked"
head -n 1 "$d/summary.txt" | grep -q '^load: pipeline (others 55 %, steal 2 %) ran while' ||
	fail "the headline does not begin with the load warning"
echo "test_report_input: ok"
exit 0
