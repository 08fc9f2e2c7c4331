#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh SHIM PROGRAM [ARG...] - run a test program with membarrier(2)
# refused (the LD_PRELOAD shim no_membarrier.c), so that every wait queue
# takes the waker-fences mode: a lost wake-up there hangs or fails the
# program as it would with membarrier. Passes only if the program passes
# and the library did ask for membarrier and was refused (else the shim
# was not in the way and the run proved nothing).
# Exit: the program's status (77 skip), or 1 when nothing was refused.
set -u
shim=${1:?usage: run.sh SHIM PROGRAM [ARG...]}
shift
mark=$(mktemp) || exit 1
trap 'rm -f "$mark"' EXIT
: >"$mark"
BPT_NO_MEMBARRIER_MARK=$mark LD_PRELOAD=$shim "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
grep -q refused "$mark" || {
	echo "FAIL: the library never asked for membarrier: the shim proved nothing"
	exit 1
}
echo "PASS without membarrier: $*"
