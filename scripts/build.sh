#!/bin/sh
# Configure (once) and build a build directory: scripts/build.sh DIR [meson options].
set -eu
dir=$1
shift
cd "$(dirname "$0")/.."
if [ ! -f "$dir/build.ninja" ]; then
	meson setup "$dir" --wrap-mode=nodownload "$@" >"$dir.setup.log" 2>&1 ||
		{ cat "$dir.setup.log" >&2; exit 1; }
	rm -f "$dir.setup.log"
fi
ninja -C "$dir" >"$dir.ninja.log" 2>&1 || { cat "$dir.ninja.log" >&2; exit 1; }
rm -f "$dir.ninja.log"
