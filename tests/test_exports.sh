#!/bin/sh
# SPDX-License-Identifier: MIT
# test_exports.sh NM LIB [SYMBOL...] - every symbol the shared library
# exports starts with bp_, the internal helpers (bpi_*) stay hidden, so do
# the eventcount's (bp_waitq*, the fence helpers: private to src/, named
# bpi_ there) and names ending in _ (the old spelling of "internal"), and
# the public entry points are really there (so an empty or unreadable
# symbol table fails): the SYMBOLs given, or the core library's.
# Exit: 0 pass, 77 skip (no nm), 1 fail.
set -u
nm=${1:-nm}
lib=${2:?usage: test_exports.sh NM LIBRARY [SYMBOL...]}
shift 2
wanted=${*:-bp_ring_create bp_ring_destroy bp_ring_enqueue_burst \
	bp_ring_dequeue_burst bp_ring_close bp_strerror bp_version \
	bp_wait_policy_init bp_wait_policy_check bp_now_ns}

command -v "$nm" >/dev/null 2>&1 || { echo "SKIP: $nm not found"; exit 77; }
[ -r "$lib" ] || { echo "FAIL: cannot read $lib"; exit 1; }

# Defined dynamic symbols, names only, version suffixes (@@VER) dropped.
syms=$("$nm" -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }') || {
	echo "FAIL: $nm -D $lib failed"; exit 1; }

fail=0
for s in $syms; do
	case $s in
	bp_waitq* | bp_full_fence* | bp_*_)
		echo "FAIL: internal symbol exported: $s"; fail=1 ;;
	bp_*) ;;
	# Linker-made markers, not the library's choice.
	_init | _fini | _edata | _end | __bss_start) ;;
	# Sanitizer instrumentation (-Db_sanitize=address adds __odr_asan.X).
	__odr_asan.* | __asan_* | __tsan_* | __ubsan_* | __sanitizer_*) ;;
	*) echo "FAIL: exported symbol without the bp_ prefix: $s"; fail=1 ;;
	esac
done

for want in $wanted; do
	printf '%s\n' $syms | grep -qx "$want" || {
		echo "FAIL: $want is not exported"; fail=1; }
done

n=$(printf '%s\n' $syms | grep -c '^bp_')
[ "$fail" -eq 0 ] && echo "ok: $n exported symbols, all bp_*"
exit $fail
