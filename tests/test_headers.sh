#!/bin/sh
# test_headers.sh INCLUDE_DIR: every public header compiles on its own, as
# C11 and C17 (gcc, clang) and as C++11, C++17 and C++20 (g++, clang++),
# with -Wall -Wextra -Wpedantic -Werror - what a C or C++ application that
# includes just that one header gets; and that every public struct's name is
# a type in C++. A compiler that is not installed is
# skipped with a line; none of the C++ ones: exit 77.
set -u
inc=$1
fail=0 ran=0 cxx_ran=0
try() { # compiler language std header
	if ! command -v "$1" >/dev/null 2>&1; then
		return
	fi
	ran=$((ran + 1))
	[ "$2" = c++ ] && cxx_ran=$((cxx_ran + 1))
	if ! out=$(printf '#include <batchpipe/%s>\nint bp_header_test_;\n' "$4" |
		"$1" -x "$2" -std="$3" -Wall -Wextra -Wpedantic -Werror \
			-I"$inc" -fsyntax-only - 2>&1); then
		echo "FAIL: $1 -std=$3: batchpipe/$4"
		echo "$out" | head -5
		fail=$((fail + 1))
	fi
}
for h in "$inc"/batchpipe/*.h; do
	name=$(basename "$h")
	for std in c11 c17; do
		try gcc c "$std" "$name"
		try clang c "$std" "$name"
	done
	for std in c++11 c++17 c++20; do
		try g++ c++ "$std" "$name"
		try clang++ c++ "$std" "$name"
	done
done
# Every public struct is a type name in C++ on its own (no function of the
# same name hides it): `bp_pipeline_stats st;` must compile.
for h in "$inc"/batchpipe/*.h; do
	name=$(basename "$h")
	for t in $(sed -n 's/^struct \(bp_[a-z0-9_]*\) {.*/\1/p' "$h"); do
		for cxx in g++ clang++; do
			command -v "$cxx" >/dev/null 2>&1 || continue
			ran=$((ran + 1)) cxx_ran=$((cxx_ran + 1))
			if ! out=$(printf '#include <batchpipe/%s>\nvoid f_(%s *);\nvoid g_() { %s v; f_(&v); }\n' \
				"$name" "$t" "$t" | "$cxx" -x c++ -std=c++17 -Wall \
				-Wextra -Werror -I"$inc" -fsyntax-only - 2>&1); then
				echo "FAIL: $cxx: '$t v;' is not a declaration in C++ ($name)"
				echo "$out" | head -3
				fail=$((fail + 1))
			fi
		done
	done
done
for c in gcc clang g++ clang++; do
	command -v "$c" >/dev/null 2>&1 || echo "note: $c not installed, not tried"
done
echo "$ran compilations, $fail failed"
[ "$fail" -eq 0 ] || exit 1
[ "$cxx_ran" -gt 0 ] || { echo "SKIP: no C++ compiler"; exit 77; }
exit 0
