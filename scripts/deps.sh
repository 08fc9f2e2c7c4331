#!/bin/sh
# Install the Debian packages batchpipe needs to build, test and benchmark.
# Safe to run again: installs only what is missing.
set -eu

PKGS="build-essential meson ninja-build pkg-config python3 liburcu-dev libck-dev
libfabric-dev libfabric-bin libjemalloc-dev libcmocka-dev zlib1g-dev gzip
gnuplot-nox clang libclang-rt-dev iproute2 linux-perf chromium fonts-dejavu-core
libdpdk-dev libconcurrentqueue-dev"
# libdpdk-dev and libconcurrentqueue-dev: competitors of `bpbench ring`
# (DPDK's rte_ring, moodycamel::ConcurrentQueue); optional to the build, the
# lab names what it lacks. DPDK is the largest install here (about 45 s).
# npm fetches the flame graphs' page template once (bench/flamegraph.sh).
# Debian's nodejs has no npm of its own; a nodejs from elsewhere may bring it.
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "installing:$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
