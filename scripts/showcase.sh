#!/bin/bash
# The showcase's experiments, one after the other, into one results folder,
# then its report. scripts/run.sh installs and builds first, then calls this.
#
#   scripts/showcase.sh [--quick | --full | --tiny] [--bpbench PATH] [--out DIR]
#
#   --quick    (default) short versions of every experiment: about 2 minutes
#              on 2 cores
#   --full     the full sweeps, as long as they take
#   --tiny     steps of a few seconds, to check the whole chain (tests)
#   --bpbench  the bpbench binary (default build/bench/bpbench)
#   --out DIR  write there (default results/<UTC time>/, and results/latest
#              points to it)
#
# Steps: the locks experiment with trivial jobs and with ~50 ns jobs, the
# ring comparison, a pipeline run, a batch sweep, an RDMA loopback fill,
# RDMA latency against CPU per completion wait, a pair of flame graphs, the
# report. Each step's table goes to STEP.txt, its
# progress and errors to logs/STEP.err, its status to steps.tsv. A failed
# step is reported and the rest still run; the exit status is then 1.
# The step functions are called by name (step_$id); commas in arrays are
# list values for bpbench options.
# shellcheck disable=SC2317,SC2054
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
mode=quick bpbench=$root/build/bench/bpbench out=""
usage() { # [status]: 0 for --help (stdout), else bad usage (stderr, 2)
	if [ "${1:-2}" -eq 0 ]; then
		sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
	fi
	sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mode=quick; shift ;;
	--full) mode=full; shift ;;
	--tiny) mode=tiny; shift ;;
	--bpbench) [ $# -ge 2 ] || usage; bpbench=$2; shift 2 ;;
	--out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
	--help | -h) usage 0 ;;
	*) echo "showcase: unknown option '$1'" >&2; usage ;;
	esac
done
[ -x "$bpbench" ] || { echo "showcase: no bpbench at $bpbench (build first: scripts/run.sh)" >&2; exit 1; }
bpbench=$(cd "$(dirname "$bpbench")" && pwd)/$(basename "$bpbench")

stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [ -z "$out" ]; then
	out=$root/results/$stamp
	mkdir -p "$out" || exit 1
	ln -sfn "$stamp" "$root/results/latest"
fi
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
: >"$out/steps.tsv"
{
	printf 'mode\t%s\n' "$mode"
	printf 'started\t%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	printf 'loadavg_start\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf 'bpbench\t%s\n' "$bpbench"
} >"$out/showcase.tsv"

has_sub() { "$bpbench" --help 2>&1 | grep -Eq "^  $1( |$)"; }
has_opt() { "$bpbench" "$1" --help 2>&1 | grep -q -- "$2"; }

# The steps: id, title, estimated seconds per mode (quick tiny full).
ids=(locks locks-work50 ring pipeline chain sweep rdma-fill rdma-sizes rdma-latency flame report)
declare -A title est
# (quick: measured on a shared 2-core VM. The ring step's time is mostly
# DPDK's classic MP/MC rte_ring at 2x2 and 4x4: with more threads than
# cores its runs overrun their window, a thread waiting inside DPDK for a
# preempted one's tail update, which no stop flag can cut short.)
title[locks]="locks, trivial jobs";              est[locks]="15 4 300"
title[locks-work50]="locks, ~50 ns jobs";       est[locks-work50]="15 4 300"
title[ring]="ring comparison";                   est[ring]="30 4 120"
title[pipeline]="pipeline";                      est[pipeline]="16 4 240"
title[chain]="chains of stages";                 est[chain]="4 2 20"
title[sweep]="batch sweep (pipeline)";           est[sweep]="6 3 150"
title[rdma-fill]="RDMA loopback fill";           est[rdma-fill]="4 2 15"
title[rdma-sizes]="RDMA write sizes";           est[rdma-sizes]="15 4 90"
title[rdma-latency]="RDMA latency and CPU";      est[rdma-latency]="10 4 40"
title[flame]="flame graphs";                     est[flame]="22 10 50"
title[report]="report";                          est[report]="1 1 1"
col=1
[ $mode = tiny ] && col=2
[ $mode = full ] && col=3
estimate() { echo "${est[$1]}" | cut -d' ' -f$col; }

fmt_time() { # seconds -> "1m20s" / "45s"
	if [ "$1" -ge 60 ]; then printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); else printf '%ds' "$1"; fi
}

# Time left: the estimates of the steps not done yet, scaled by how the
# finished steps compared with their own estimates (this machine's speed).
done_est=0 done_real=0
left_estimate() { # index of the step about to run
	rest=0
	for ((j = $1; j < ${#ids[@]}; j++)); do rest=$((rest + $(estimate "${ids[$j]}"))); done
	if [ $done_est -gt 0 ]; then
		# Clamped: one odd step should not make the estimate absurd.
		f=$((100 * done_real / done_est))
		[ $f -lt 50 ] && f=50
		[ $f -gt 300 ] && f=300
		rest=$((rest * f / 100))
	fi
	echo $rest
}

failed=""
record() { # id status seconds note [others% steal%]
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${title[$1]}" "$4" \
		"${5:-}" "${6:-}" >>"$out/steps.tsv"
}

# The machine's load during a step: the CPU time of every process outside
# this showcase's session (other users, other jobs, a build next door)
# and the steal a hypervisor took, each as a % of the CPUs over the step's
# wall time. A step that shared the machine says so (report.py marks it).
ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
steal_stat() { # "steal total" jiffies since boot, all CPUs
	awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print $9, t }' /proc/stat
}
others_ticks() { # FILE: "pid ticks" of every process outside this session
	# ticks: its own CPU and that of its children it has reaped (a build
	# next door is many short compilers, seen only in their parent's
	# cutime). A first line "ok" says the scan ran.
	python3 - "$$" >"$1" 2>/dev/null <<'PY' || : >"$1"
import os, sys
me = os.getsid(int(sys.argv[1]))
print("ok")
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        with open("/proc/%s/stat" % p) as f:
            s = f.read()
    except OSError:
        continue  # gone meanwhile
    f = s[s.rindex(")") + 2:].split()  # from field 3 (state) on
    if int(f[3]) != me:  # field 6: the session
        # fields 14-17: utime, stime, cutime, cstime; not init's children:
        # it reaps orphans, such as the showcase's own escaped browser
        # processes, whose CPU would land in the step that ends them
        print(p, int(f[11]) + int(f[12]) + (int(f[13]) + int(f[14]) if p != "1" else 0))
PY
}
load_of_step() { # before-file after-file steal0 total0 wall_ms -> "others% steal%"
	read -r s1 t1 <<<"$(steal_stat)"
	# Without a scan at both ends (no python3) the other load is unknown: "-".
	if [ "$(head -n 1 "$1")" != ok ] || [ "$(head -n 1 "$2")" != ok ]; then
		awk -v s0="$3" -v t0="$4" -v s1="$s1" -v t1="$t1" 'BEGIN {
			printf "- %.0f\n", t1 > t0 ? 100 * (s1 - s0) / (t1 - t0) : 0 }'
		return
	fi
	awk -v s0="$3" -v t0="$4" -v s1="$s1" -v t1="$t1" -v w="$5" -v hz="$hz" -v n="$ncpu" '
		$1 == "ok" { next }
		FILENAME == ARGV[1] { before[$1] = $2; next }
		{ d = $2 - ($1 in before ? before[$1] : 0)  # new ones: all of it
		  if (d > 0) ticks += d }  # a pid reused meanwhile: not below 0
		END {
			cap = w / 1000 * n  # CPU-seconds the machine had
			pct = cap > 0 ? 100 * ticks / hz / cap : 0  # (in printf, > redirects)
			steal = t1 > t0 ? 100 * (s1 - s0) / (t1 - t0) : 0
			printf "%.0f %.0f\n", pct, steal }' "$1" "$2"
}

# run_step ID INDEX: runs step_ID; its stdout is the step's table (ID.txt).
n_steps=${#ids[@]}
run_step() {
	id=$1 i=$2
	left=$(left_estimate "$i")
	[ "$left" -lt 1 ] && left=1
	printf '[%d/%d] %s ... about %s left\n' $((i + 1)) "$n_steps" "${title[$id]}" "$(fmt_time "$left")"
	t0=$(date +%s)
	ms0=$(date +%s%3N)
	read -r s0 tt0 <<<"$(steal_stat)"
	others_ticks "$out/logs/.load0"
	"step_$id" >"$out/$id.txt" 2>"$out/logs/$id.err"
	rc=$?
	t=$(($(date +%s) - t0))
	others_ticks "$out/logs/.load1"
	read -r others steal <<<"$(load_of_step "$out/logs/.load0" "$out/logs/.load1" \
		"$s0" "$tt0" $(($(date +%s%3N) - ms0)))"
	rm -f "$out/logs/.load0" "$out/logs/.load1"
	[ -s "$out/$id.txt" ] || rm -f "$out/$id.txt"
	if [ $rc -eq 0 ]; then
		# Only steps that ran to the end say how fast this machine is.
		done_est=$((done_est + $(estimate "$id")))
		done_real=$((done_real + (t > 0 ? t : 1)))
		record "$id" ok "$t" "" "$others" "$steal"
		printf '      done in %s (other load %s %%, steal %s %%)\n' "$(fmt_time $t)" "$others" "$steal"
	elif [ $rc -eq 77 ]; then
		why=$(tail -n 1 "$out/logs/$id.err")
		record "$id" skipped "$t" "$why" "$others" "$steal"
		printf '      skipped: %s\n' "$why"
	else
		why=$(grep -v '^ *$' "$out/logs/$id.err" | tail -n 1)
		record "$id" failed "$t" "$why (exit $rc)" "$others" "$steal"
		failed="$failed $id"
		printf '      FAILED (exit %d): %s\n' $rc "$why"
		printf '      (all of it: %s)\n' "$out/logs/$id.err"
	fi
}

need_sub() { # a subcommand the finished lab has; missing = the step fails
	has_sub "$1" && return 0
	echo "not run: bpbench has no '$1' subcommand" >&2
	return 1
}

# --out DIR where the subcommand has it (table on stdout, CSV into DIR);
# else the CSV on stdout, into the file, and the table is that CSV.
table_and_csv() { # sub name args...
	sub=$1 name=$2
	shift 2
	if has_opt "$sub" --out; then
		if [ "$name" = "$sub" ]; then
			"$bpbench" "$sub" "$@" --out "$out"
		else
			"$bpbench" "$sub" "$@" --out "$out" --name "$name"
		fi
	else
		echo "bpbench $sub has no --out: CSV only" >&2
		"$bpbench" "$sub" "$@" --csv >"$out/$name.csv" && cat "$out/$name.csv"
	fi
}

step_locks() {
	need_sub locks || return 1
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--threads 1,4 --batches 1,32 --runs 1 --ms 10) ;;
	full) a=() ;;
	esac
	"$bpbench" locks "${a[@]}" --work-ns 0 --out "$out" --name locks
}
step_locks-work50() {
	need_sub locks || return 1
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--threads 1,4 --batches 1,32 --runs 1 --ms 10) ;;
	full) a=() ;;
	esac
	"$bpbench" locks "${a[@]}" --work-ns 50 --out "$out" --name locks-work50
}
step_ring() {
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--runs 1 --ms 10 --points 1x1,2x2 --batches 1,32 --no-single) ;;
	full) a=() ;;
	esac
	table_and_csv ring ring "${a[@]}"
}
step_pipeline() {
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--sweep-only --workers 1,2 --batches 1,32 --waits spin-sleep --runs 1 --ms 10) ;;
	full) a=() ;;
	esac
	table_and_csv pipeline pipeline "${a[@]}"
}
# A chain of two stages against one stage doing the same work, and a
# serial stage against a mutex section (bpbench pipeline --stages 2).
step_chain() {
	if ! has_opt pipeline --stages; then
		echo "not run: bpbench pipeline has no --stages" >&2
		return 77
	fi
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--runs 1 --ms 5 --work-ns 200) ;;
	full) a=() ;;
	esac
	"$bpbench" pipeline --stages 2 "${a[@]}"
}
step_sweep() {
	need_sub sweep || return 1
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--runs 1 --batches 1,32 -- --ms 10) ;;
	full) a=() ;;
	esac
	# --out before the child's arguments: everything after -- is the child's.
	b=()
	for x in "${a[@]}"; do
		if [ "$x" = -- ]; then b+=(--out "$out" --name sweep-pipeline); fi
		b+=("$x")
	done
	[ "${#b[@]}" -eq "${#a[@]}" ] && b+=(--out "$out" --name sweep-pipeline)
	"$bpbench" sweep pipeline "${b[@]}"
}
step_rdma-fill() {
	if ! has_sub rdma-fill; then
		echo "not run: bpbench has no rdma-fill (built without libfabric: -Drdma=enabled needs libfabric-dev)" >&2
		return 77
	fi
	if command -v fi_info >/dev/null && ! fi_info -p 'tcp;ofi_rxm' >/dev/null 2>&1; then
		echo "not run: libfabric offers no tcp;ofi_rxm provider here" >&2
		return 77
	fi
	# Nine runs of the fill and of its raw reference, alternating (the
	# target is judged on >= 9): --quick fills 64 MiB, full the default 256.
	case $mode in
	quick) a=(--quick) ;;
	tiny) a=(--bytes 8M) ;;
	full) a=() ;;
	esac
	# Loopback only: libfabric's tcp provider would pick eth0 otherwise.
	if has_opt rdma-fill --out; then
		FI_TCP_IFACE=lo "$bpbench" rdma-fill "${a[@]}" --out "$out"
	else
		FI_TCP_IFACE=lo "$bpbench" rdma-fill "${a[@]}"
	fi
}
# Throughput and CPU per write against the write's size, the pipeline's
# RDMA stage and a raw libfabric loop interleaved, on each provider that
# opens here (post, reap and depth 16, one worker, one rail).
step_rdma-sizes() {
	if ! has_sub rdma; then
		echo "not run: bpbench has no rdma (built without libfabric: -Drdma=enabled needs libfabric-dev)" >&2
		return 77
	fi
	case $mode in
	quick) a=(--quick --sizes 64,512,4K,32K,256K,1M) ;;
	tiny) a=(--sizes 64,4K,64K --runs 1 --ms 20 --providers shm) ;;
	full) a=(--sizes 64,256,1K,4K,16K,64K,256K,1M) ;;
	esac
	# Loopback only: libfabric's tcp provider would pick eth0 otherwise.
	FI_TCP_IFACE=lo "$bpbench" rdma --no-latency "${a[@]}" --out "$out" --name rdma-sizes
	lrc=$?
	if [ "$lrc" -eq 1 ] && grep -q 'NOTHING MEASURED' "$out/logs/rdma-sizes.err"; then
		echo "not run: no libfabric provider of the step opens here (fi_info -l lists them)" >&2
		return 77
	fi
	return "$lrc"
}
# Document 001's trade-off: one-operation latency (4 KiB, depth 1) against
# the CPU it costs, per completion wait, the pipeline and a raw libfabric
# loop, on each provider that opens here.
step_rdma-latency() {
	if ! has_sub rdma; then
		echo "not run: bpbench has no rdma (built without libfabric: -Drdma=enabled needs libfabric-dev)" >&2
		return 77
	fi
	case $mode in
	quick) a=(--quick --lat-ms 200) ;;
	tiny) a=(--quick --lat-ms 30 --idle-ms 30 --providers shm) ;;
	full) a=() ;;
	esac
	# Loopback only: libfabric's tcp provider would pick eth0 otherwise.
	FI_TCP_IFACE=lo "$bpbench" rdma --latency "${a[@]}" --out "$out" --name rdma-latency
	lrc=$?
	# No provider opened here: a reason to skip, as for the fill, not a fault
	if [ "$lrc" -eq 1 ] && grep -q 'NOTHING MEASURED' "$out/logs/rdma-latency.err"; then
		echo "not run: no libfabric provider of the step opens here (fi_info -l lists them)" >&2
		return 77
	fi
	return "$lrc"
}
# flamegraph.sh's 77 (perf cannot record, or offline with the page's
# scripts not cached) is returned as it is: the step is skipped, its reason
# the last line of its log, like the RDMA step without libfabric.
step_flame() {
	fg=$root/bench/flamegraph.sh
	fdir=$out/flame
	case $mode in
	quick) ms=2000 ;;
	tiny) ms=200 ;;
	full) ms=5000 ;;
	esac
	if has_sub locks; then
		# The write-up's first and last step at 16 threads: mutex job queue
		# and one-by-one results, against batchpipe's ring at both ends.
		# Each is also run unprofiled just before (NAME.unprofiled.txt): a
		# profile is compared with the same command in the same minute,
		# not with the locks step's, which the VM's phase can move by 3x.
		A=mutex B=batchpipe-ring
		mkdir -p "$fdir" || return
		a=(locks --variants mutex --threads 16 --batches 1 --runs 1 --ms "$ms")
		b=(locks --variants batchpipe-ring --threads 16 --batches 32 --runs 1 --ms "$ms")
		"$bpbench" "${a[@]}" >"$fdir/$A.unprofiled.txt" || return
		"$fg" --out "$fdir" --name "$A" -- "$bpbench" "${a[@]}" || return
		"$bpbench" "${b[@]}" >"$fdir/$B.unprofiled.txt" || return
		"$fg" --out "$fdir" --name "$B" -- "$bpbench" "${b[@]}" || return
	else
		echo "bpbench has no locks: profiling the ring comparison's mutex and batchpipe queues instead" >&2
		A=ring-mutex B=ring-batchpipe
		"$fg" --out "$fdir" --name "$A" -- "$bpbench" ring --queues mutex --points 4x4 \
			--batches 32 --runs 1 --ms "$ms" --no-single || return
		"$fg" --out "$fdir" --name "$B" -- "$bpbench" ring --queues batchpipe --points 4x4 \
			--batches 32 --runs 1 --ms "$ms" --no-single || return
	fi
	"$fg" --compare "$A" "$B" --out "$fdir"
}
step_report() {
	python3 "$root/scripts/report.py" "$out" >&2
}

for ((i = 0; i < n_steps; i++)); do
	id=${ids[$i]}
	if [ "$id" = report ]; then
		printf 'finished\t%s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')" >>"$out/showcase.tsv"
		printf 'loadavg_end\t%s\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/showcase.tsv"
	fi
	run_step "$id" "$i"
done

echo
if [ -s "$out/summary.txt" ]; then
	cat "$out/summary.txt"
fi
echo "results: $out"
[ -f "$out/report.html" ] && echo "report:  $out/report.html  ($out/report.md)"
if [ -n "$failed" ]; then
	echo "FAILED steps:$failed (their logs: $out/logs/)"
	exit 1
fi
exit 0
