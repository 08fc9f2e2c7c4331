#!/bin/sh
# The showcase end to end in its tiny mode, then its report in a real
# browser: report.html loads every image (the page records it in
# data-images-ok), fetches nothing from elsewhere, its links lead to files
# that exist, and its screenshot is not a blank page.
# A step may fail only because bpbench lacks its subcommand (it says which).
# Exit 0 pass, 77 skip (Chromium cannot run here), else fail.
set -u
: "${BPBENCH:?}" "${BP_SOURCE_ROOT:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$tmp/results

chrome=""
for c in chromium chromium-browser google-chrome; do
	command -v $c >/dev/null && { chrome=$c; break; }
done
[ -n "$chrome" ] || { echo "SKIP: no Chromium to open the report (scripts/deps.sh installs it)" >&2; exit 77; }
flags="--headless --no-sandbox --disable-gpu --disable-background-networking
--disable-component-update --disable-sync --no-first-run --hide-scrollbars
--virtual-time-budget=5000 --user-data-dir=$tmp/chrome"
# browse ARGS...: Chromium with $flags, bounded: a headless Chromium that
# hangs would otherwise hold the test until meson kills it. Its exit status
# in $crc, 124 when it ran out of time.
browse() {
	# shellcheck disable=SC2086 # $flags is several arguments
	timeout -k 5 60 $chrome $flags "$@"
	crc=$?
	[ $crc -eq 137 ] && crc=124
	return 0
}
# Chromium must run at all here (the flame graphs' pictures need it too).
echo '<html><body><p>probe</p></body></html>' >"$tmp/probe.html"
browse --dump-dom "file://$tmp/probe.html" >"$tmp/probe.dom" 2>"$tmp/chrome.err"
if [ $crc -eq 124 ]; then
	cat "$tmp/chrome.err" >&2
	echo "SKIP: Chromium cannot run here (a one-line page took over 60 s)" >&2
	exit 77
fi
if ! grep -q 'probe' "$tmp/probe.dom"; then
	cat "$tmp/chrome.err" >&2
	echo "SKIP: Chromium cannot run here" >&2
	exit 77
fi

"$BP_SOURCE_ROOT/scripts/showcase.sh" --tiny --bpbench "$BPBENCH" --out "$out" >"$tmp/showcase.out" 2>&1
rc=$?
cat "$tmp/showcase.out"
[ -s "$out/steps.tsv" ] || fail "no steps.tsv"
grep -q '^\[1/11\] .* about .* left$' "$tmp/showcase.out" || fail "no progress line with the time left"
subs=$("$BPBENCH" --help 2>&1)
while IFS="$(printf '\t')" read -r id status _secs _title note _others _steal; do
	case $status in
	ok)
		# Each step that ran has its section in the report.
		case $id in
		locks | locks-work50) marker="| threads | best batchpipe variant (B) |" ;;
		ring) marker="| batchpipe / best other (of medians) |" ;;
		pipeline) marker="## Pipeline" ;;
		chain) marker="## Chains of stages" ;;
		sweep) marker="| B small |" ;;
		rdma-fill) marker="| fill GB/s |" ;;
		rdma-sizes) marker="| provider | size | pipeline GB/s | raw GB/s |" ;;
		rdma-latency) marker="| provider | variant | wait | p50 us |" ;;
		flame) marker="side by side and differential:" ;;
		*) marker="" ;;
		esac
		[ -z "$marker" ] || grep -qF -- "$marker" "$out/report.md" ||
			fail "step $id ran but the report has no '$marker'"
		;;
	skipped) echo "note: step $id skipped: $note" ;;
	failed)
		sub=$(printf '%s\n' "$note" | sed -n "s/.*bpbench has no '\([a-z-]*\)' subcommand.*/\1/p")
		[ -n "$sub" ] || fail "step $id failed: $note"
		printf '%s\n' "$subs" | grep -Eq "^  $sub( |$)" &&
			fail "step $id says bpbench has no $sub, but it has"
		echo "note: step $id not checked: bpbench has no '$sub' yet"
		grep -q "FAILED" "$out/report.md" || fail "the report does not mark the failed step $id"
		;;
	*) fail "step $id: unknown status '$status'" ;;
	esac
done <"$out/steps.tsv"
[ $rc -eq 0 ] || grep -q "failed" "$out/steps.tsv" || fail "showcase exited $rc with no failed step"
grep -q "failed" "$out/steps.tsv" && [ $rc -eq 0 ] && fail "a step failed but the showcase exited 0"
for f in report.md report.html summary.txt ring.csv ring.txt pipeline.txt; do
	[ -s "$out/$f" ] || fail "no $f"
done
# the pictures the report draws from the CSVs, beside them and in the page
if command -v gnuplot >/dev/null 2>&1; then
	for f in ring-ratios pipeline-workers; do
		[ -s "$out/$f.png" ] || fail "no $f.png"
		grep -qF "![$f.png]($f.png)" "$out/report.md" || fail "report.md lacks $f.png"
	done
	# the RDMA sizes sweep's, where its step ran (it needs libfabric)
	if grep -q '^rdma-sizes	ok' "$out/steps.tsv"; then
		[ -s "$out/rdma-sizes.png" ] || fail "no rdma-sizes.png"
		grep -qF "![rdma-sizes.png](rdma-sizes.png)" "$out/report.md" ||
			fail "report.md lacks rdma-sizes.png"
	fi
fi
# every step says the machine's load while it ran
grep -q '| machine load |' "$out/report.md" || fail "no machine load column"
awk -F'\t' 'NF < 7 || $6 !~ /^[0-9]+$/ || $7 !~ /^[0-9]+$/ { bad = 1 } END { exit bad }' \
	"$out/steps.tsv" || fail "a step without its load in steps.tsv"
# The flame step may skip (perf cannot record, or offline with nothing
# cached): then the report says so instead of linking a page.
if grep -q '^flame	skipped' "$out/steps.tsv"; then
	grep -A 2 '^## Flame graphs' "$out/report.md" | grep -q '^not run: ' ||
		fail "the flame step skipped but the report does not say so"
else
	ls "$out"/flame/*-vs-*.html >/dev/null 2>&1 || fail "no flame-graph comparison page"
	# the comparison's caption says what this run's profiles show
	grep -q 'In this run .* of its samples in futex calls' "$out/report.md" ||
		fail "the flame-graph comparison does not say what this run shows"
	# each profile against the same command run unprofiled just before it
	if [ -s "$out/flame/mutex.unprofiled.txt" ]; then
		grep -q 'the same command unprofiled, just before it: ' "$out/report.md" ||
			fail "a profile is not compared with its command run unprofiled"
	fi
fi

# Nothing the page would fetch: every image is a data URI, no script or
# style file, no url(...) outside data URIs.
python3 - "$out/report.html" "$out" <<'PY' || fail "report.html refers to resources outside itself"
import os, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
bad = [s for s in re.findall(r'<img\b[^>]*\bsrc="([^"]*)"', page) if not s.startswith("data:image/png;base64,")]
bad += re.findall(r'<(?:script|iframe|embed|object)\b[^>]*\bsrc=[^>]*>', page)
bad += re.findall(r'<link\b[^>]*>', page)
bad += [u for u in re.findall(r'url\(([^)]*)\)', page) if not u.strip("'\"").startswith("data:")]
for href in re.findall(r'<a\b[^>]*\bhref="([^"]*)"', page):
    if re.match(r'[a-z]+:', href) or not os.path.isfile(os.path.join(sys.argv[2], href)):
        bad.append("link to " + href)
if bad:
    print("\n".join(b[:200] for b in bad))
    sys.exit(1)
PY

# A folder with nothing in it: a report that says so, not a crash.
mkdir "$tmp/empty"
python3 "$BP_SOURCE_ROOT/scripts/report.py" "$tmp/empty" >/dev/null || fail "report.py failed on an empty folder"
[ "$(grep -c 'not run' "$tmp/empty/report.md")" -ge 5 ] || fail "the empty report does not say what was not run"

browse --dump-dom "file://$out/report.html" >"$tmp/dom.html" 2>"$tmp/chrome.err"
[ $crc -ne 124 ] || { cat "$tmp/chrome.err" >&2; fail "Chromium did not finish report.html within 60 s"; }
grep -q '<body' "$tmp/dom.html" || { cat "$tmp/chrome.err" >&2; fail "Chromium could not open report.html"; }
n=$(grep -o '<img ' "$out/report.html" | wc -l)
[ "$n" -gt 0 ] || fail "the report has no images"
ok=$(sed -n 's/.*data-images-ok="\([^"]*\)".*/\1/p' "$tmp/dom.html" | head -n 1)
[ "$ok" = "$n/$n" ] || fail "images loaded: '$ok', expected $n/$n"
echo "images loaded: $ok"

browse --window-size=1200,2000 --screenshot="$tmp/shot.png" "file://$out/report.html" \
	>/dev/null 2>"$tmp/chrome.err"
[ $crc -ne 124 ] || { cat "$tmp/chrome.err" >&2; fail "Chromium did not finish the screenshot within 60 s"; }
[ -s "$tmp/shot.png" ] || fail "Chromium wrote no screenshot"
# Decode the PNG (zlib, PNG row filters) and count its colours: a blank or
# failed page is one or two colours; text, tables and plots are many.
python3 - "$tmp/shot.png" <<'PY' || fail "the screenshot looks blank"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), "unexpected PNG format"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colours = set()
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    if y % 4 == 0:
        for x in range(0, stride, bpp * 3):
            colours.add(bytes(line[x:x + 3]))
    prev = line
print("screenshot %dx%d, %d colours sampled" % (w, h, len(colours)))
sys.exit(0 if len(colours) > 20 else 1)
PY
echo "ok: showcase report"
exit 0
