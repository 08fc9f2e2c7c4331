#!/bin/sh
# SPDX-License-Identifier: MIT
# test_install.sh SRCROOT - what a user of the installed library does:
#  1. a fresh meson setup of SRCROOT (tests, bench, examples, bp-target off),
#     installed into a temporary prefix;
#  2. outside.c and the C++ example (examples/minimal_cpp.cpp, what a C++
#     user copies) built with pkg-config against that prefix,
#     shared (rpath) and fully static (pkg-config --static, -static), run;
#     outside_rdma.c likewise where the RDMA stage was built (static:
#     batchpipe's archives, libfabric shared);
#  3. consumer/, a meson project with batchpipe as its subproject, set up
#     with --wrap-mode=nofallback and PKG_CONFIG_LIBDIR holding only
#     jemalloc.pc: liburcu, ck, libfabric and cmocka are not needed; its
#     program is run.
# Environment: CC, CXX (default cc, c++), BP_INSTALL_KEEP=1 keeps the
# temporary directory. Exit: 0 pass, 77 skip (a tool is missing), 1 fail.
set -eu
src=$(cd "${1:?usage: test_install.sh SRCROOT}" && pwd)
here=$src/tests/install
CC=${CC:-cc}
CXX=${CXX:-c++}

for tool in meson ninja pkg-config python3 "$CC" "$CXX"; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "SKIP: $tool not found"; exit 77; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bp-install.XXXXXX")
cleanup() {
	rc=$?
	if [ "${BP_INSTALL_KEEP:-0}" = 1 ]; then
		echo "kept $tmp"
	else
		rm -rf "$tmp"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
# run LOG CMD...: quiet unless it fails
run() {
	log=$1
	shift
	"$@" >"$tmp/$log.log" 2>&1 || { cat "$tmp/$log.log"; fail "$*"; }
}

# 1. Configure, build, install.
prefix=$tmp/prefix
step "meson setup + install into $prefix"
run setup meson setup "$tmp/build" "$src" --prefix="$prefix" \
	--wrap-mode=nodownload -Ddefault_library=both -Dtests=disabled \
	-Dbench=disabled -Dexamples=disabled -Dtarget=disabled
run build ninja -C "$tmp/build"
run install meson install -C "$tmp/build"
# The multiarch libdir (lib/x86_64-linux-gnu on Debian), as meson chose it.
libdir=$(meson introspect "$tmp/build" --buildoptions | python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
for f in "$libdir/libbatchpipe.a" "$libdir/pkgconfig/batchpipe.pc" \
	"$prefix/include/batchpipe/batchpipe.h" \
	"$prefix/share/doc/batchpipe/LICENSE" \
	"$prefix/share/doc/batchpipe/README.md" \
	"$prefix/share/doc/batchpipe/docs/api/pipeline.md"; do
	[ -f "$f" ] || fail "not installed: $f"
done
# soname_of LIB: its SONAME, which must be NAME.so.MAJOR.MINOR (before 1.0).
soname_of() {
	so=$(LC_ALL=C readelf -d "$libdir/$1.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	case $so in
	"$1".so.*.*.* | "") fail "$1.so: soname '$so', want $1.so.MAJOR.MINOR" ;;
	"$1".so.*.*) ;;
	*) fail "$1.so: soname '$so', want $1.so.MAJOR.MINOR" ;;
	esac
	[ -e "$libdir/$so" ] || fail "$so not installed"
	echo "$so"
}
soname=$(soname_of libbatchpipe) || exit 1
echo "installed $soname"

export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
cflags=$(pkg-config --cflags batchpipe) || fail "pkg-config --cflags batchpipe"
libs=$(pkg-config --libs batchpipe) || fail "pkg-config --libs batchpipe"
slibs=$(pkg-config --static --libs batchpipe) ||
	fail "pkg-config --static --libs batchpipe"
echo "pkg-config --static --libs batchpipe: $slibs"

# checkrun NAME: runs it and checks the kind of link it got.
checkrun() {
	exe=$tmp/$1 kind=$2
	"$exe" || fail "$1 exited $?"
	case $kind in
	shared)
		LC_ALL=C readelf -d "$exe" | grep -q "NEEDED.*\[$soname\]" ||
			fail "$1 does not load $soname"
		;;
	static)
		LC_ALL=C readelf -d "$exe" | grep -q NEEDED &&
			fail "$1 is not fully static"
		;;
	esac
	echo "ok: $1 ($kind)"
}

# 2. Outside programs through pkg-config. The flags stay unquoted: they are
# word lists.
step "outside programs via pkg-config"
# shellcheck disable=SC2086
run cshared "$CC" -std=c11 -Wall -Wextra -Werror -pthread $cflags \
	"$here/outside.c" -o "$tmp/outside-shared" $libs -Wl,-rpath,"$libdir"
checkrun outside-shared shared
# shellcheck disable=SC2086
run cstatic "$CC" -std=c11 -Wall -Wextra -Werror -pthread -static $cflags \
	"$here/outside.c" -o "$tmp/outside-static" $slibs
checkrun outside-static static
# shellcheck disable=SC2086
run cxxshared "$CXX" -std=c++17 -Wall -Wextra -Werror -pthread $cflags \
	"$src/examples/minimal_cpp.cpp" -o "$tmp/outside-cpp-shared" $libs \
	-Wl,-rpath,"$libdir"
checkrun outside-cpp-shared shared
# shellcheck disable=SC2086
run cxxstatic "$CXX" -std=c++17 -Wall -Wextra -Werror -pthread -static \
	$cflags "$src/examples/minimal_cpp.cpp" -o "$tmp/outside-cpp-static" $slibs
checkrun outside-cpp-static static

# 2b. The RDMA stage, where it was built (a system libfabric was found).
# Debian 12 has no static libpsm_infinipath (libfabric.pc's Libs.private), so
# `pkg-config --static --libs batchpipe-rdma` cannot link: the static form
# here is batchpipe's archives with a shared libfabric.
if [ -f "$libdir/pkgconfig/batchpipe-rdma.pc" ]; then
	step "outside RDMA program via pkg-config"
	rcflags=$(pkg-config --cflags batchpipe-rdma) || fail "pkg-config batchpipe-rdma"
	rlibs=$(pkg-config --libs batchpipe-rdma) || fail "pkg-config batchpipe-rdma"
	rsoname=$(soname_of libbatchpipe-rdma) || exit 1
	# shellcheck disable=SC2086
	run rshared "$CC" -std=c11 -Wall -Wextra -Werror $rcflags \
		"$here/outside_rdma.c" -o "$tmp/outside-rdma-shared" $rlibs \
		-Wl,-rpath,"$libdir"
	"$tmp/outside-rdma-shared" || fail "outside-rdma-shared exited $?"
	LC_ALL=C readelf -d "$tmp/outside-rdma-shared" |
		grep -q "NEEDED.*\[$rsoname\]" || fail "outside-rdma-shared does not load $rsoname"
	echo "ok: outside-rdma-shared (shared)"
	ldirs=$(pkg-config --libs-only-L batchpipe)
	adeps=$(pkg-config --libs-only-l liburcu-cds liburcu-qsbr jemalloc) ||
		fail "pkg-config liburcu-cds liburcu-qsbr jemalloc"
	fabric=$(pkg-config --libs libfabric) || fail "pkg-config libfabric"
	# shellcheck disable=SC2086
	run rstatic "$CC" -std=c11 -Wall -Wextra -Werror $rcflags \
		"$here/outside_rdma.c" -o "$tmp/outside-rdma-static" $ldirs \
		-Wl,-Bstatic -lbatchpipe-rdma -lbatchpipe $adeps \
		-Wl,-Bdynamic $fabric -lm -lpthread
	"$tmp/outside-rdma-static" || fail "outside-rdma-static exited $?"
	LC_ALL=C readelf -d "$tmp/outside-rdma-static" | grep -q 'NEEDED.*libbatchpipe' &&
		fail "outside-rdma-static loads a shared batchpipe"
	echo "ok: outside-rdma-static (batchpipe static, libfabric shared)"
else
	echo "(no batchpipe-rdma.pc: the RDMA stage was not built, its part skipped)"
fi

# 3. batchpipe as a subproject, with only the library's own dependencies
# visible to pkg-config and no wrap fallbacks.
step "consumer project with batchpipe as a subproject"
pcdir=$tmp/pc
mkdir -p "$pcdir" "$tmp/consumer/subprojects"
for p in jemalloc; do
	d=$(pkg-config --variable=pcfiledir "$p") || fail "no $p.pc"
	cp "$d/$p.pc" "$pcdir/"
done
cp "$here/consumer/meson.build" "$here/outside.c" "$tmp/consumer/"
ln -s "$src" "$tmp/consumer/subprojects/batchpipe"
run csetup env -u PKG_CONFIG_PATH PKG_CONFIG_LIBDIR="$pcdir" \
	meson setup "$tmp/consumer/build" "$tmp/consumer" --wrap-mode=nofallback
# Configure looked for no lab, test or wrap dependency (libfabric: only the
# system's, for -Drdma=auto).
grep -E "dependency (ck|cmocka|liburcu|liburcu-cds|liburcu-memb|liburcu-qsbr) " \
	"$tmp/csetup.log" && fail "the subproject looked for a dependency it does not build with"
grep -E "fallback subproject|Executing subproject (urcu|jemalloc|ck|libfabric)" \
	"$tmp/csetup.log" &&
	fail "the subproject tried a wrap fallback"
run cbuild ninja -C "$tmp/consumer/build"
"$tmp/consumer/build/outside" || fail "consumer's outside exited $?"
# Only the library was built (with batchpipe-base, the archive of src/base
# that it takes whole, and batchpipe-internal, its uninstalled twin), and
# only its static archive (the consumer sets default_library=static, which
# batchpipe follows).
targets=$(meson introspect "$tmp/consumer/build" --targets | python3 -c '
import json, sys
print(" ".join(sorted(t["name"] for t in json.load(sys.stdin))))')
echo "consumer targets: $targets"
for t in $targets; do
	case $t in
	outside | batchpipe | batchpipe-base | batchpipe-internal) ;;
	*) fail "the subproject built $t" ;;
	esac
done
[ -f "$tmp/consumer/build/subprojects/batchpipe/src/libbatchpipe.a" ] ||
	fail "no static libbatchpipe.a in the subproject"
for f in "$tmp/consumer/build/subprojects/batchpipe/src/"*.so*; do
	[ -e "$f" ] && fail "the subproject built $f under default_library=static"
done
echo "ok: consumer (subproject, static)"
