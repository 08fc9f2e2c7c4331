#!/bin/sh
# test_docs.sh SOURCE_ROOT: the reference documentation keeps up with the
# code.
#  1. Every function named bp_* in the public headers (include/batchpipe/*.h,
#     comments left out) appears, as a whole word, in some docs/api/*.md.
#  2. Every relative link in docs/**.md and README.md, [text](path) or
#     [label]: path, outside fenced code blocks, names a file or folder that
#     exists (a #fragment is not checked).
# Lists every missing name and every broken link, then exits 1 if any.
set -u
root=${1:?usage: test_docs.sh SOURCE_ROOT}
fail=0

if ! ls "$root"/docs/api/*.md >/dev/null 2>&1; then
	echo "FAIL: no docs/api/*.md under $root"
	exit 1
fi

# Comments go first: a header comment may name a function of another
# header, or an old name.
names=$(for h in "$root"/include/batchpipe/*.h; do
	perl -0777 -pe 's{/\*.*?\*/}{ }gs; s{//[^\n]*}{}g' "$h"
done | grep -o '\bbp_[A-Za-z0-9_]*[[:space:]]*(' |
	sed 's/[[:space:]]*($//' | sort -u)
nnames=0 missing=""
for n in $names; do
	nnames=$((nnames + 1))
	grep -qw -- "$n" "$root"/docs/api/*.md || missing="$missing $n"
done
if [ -n "$missing" ]; then
	echo "FAIL: public functions not in any docs/api/*.md:"
	for n in $missing; do
		echo "  $n"
	done
	fail=1
fi

# Links: outside ``` fences; inline [x](t) and reference [x]: t forms.
nlinks=0
for f in "$root"/README.md "$root"/docs/*.md "$root"/docs/*/*.md; do
	[ -f "$f" ] || continue
	dir=$(dirname "$f")
	rel=${f#"$root"/}
	# shellcheck disable=SC2016 # the backquotes are Markdown's, not sh's
	text=$(awk '/^[[:space:]]*```/ { fence = !fence; next } !fence' "$f" |
		sed 's/`[^`]*`//g')
	links=$(
		printf '%s\n' "$text" | grep -o '\]([^)[:space:]]*' |
			sed 's/^](//'
		printf '%s\n' "$text" |
			grep -o '^[[:space:]]*\[[^]]*\]:[[:space:]]*[^[:space:]]*' |
			sed 's/^[^]]*\]:[[:space:]]*//'
	)
	for l in $links; do
		case $l in
		http://* | https://* | mailto:* | \#*) continue ;;
		esac
		nlinks=$((nlinks + 1))
		path=${l%%#*}
		case $path in
		/*) target=$root$path ;;
		*) target=$dir/$path ;;
		esac
		if [ ! -e "$target" ]; then
			echo "FAIL: $rel: broken link: $l"
			fail=1
		fi
	done
done

echo "$nnames public functions checked, $nlinks relative links checked"
exit $fail
