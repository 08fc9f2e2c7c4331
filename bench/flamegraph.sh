#!/bin/sh
# Flame graphs of any command, and side by side / differential views of two.
#
#   bench/flamegraph.sh [--out DIR] [--name NAME] [--freq HZ] [--keep-data]
#                       [--no-png] -- COMMAND [ARGS...]
#       records COMMAND with perf and writes DIR/NAME.folded (folded stacks),
#       DIR/NAME.html (d3-flame-graph, works offline) and DIR/NAME.png (a
#       screenshot of the HTML), then prints the top self-time functions.
#   bench/flamegraph.sh --compare A B [--out DIR] [--no-png]
#       from DIR/A.folded and DIR/B.folded (recorded before): DIR/A-vs-B.html
#       (A, B and the differential graph B - A on one page) and its .png,
#       and the top self-time functions of each on stdout.
#
# Why these perf options: this machine has no hardware counters (cpu-clock),
# gcc drops leaf frames even with frame pointers and glibc has none, so
# stacks come from DWARF unwinding. perf 6.1's `perf script report` ignores
# -i and reads ./perf.data, so each profile is processed in its own folder.
#
# COMMAND's exit status is checked: a command that fails gives no flame
# graph and this script exits with the command's status (or 1).
# Exit status: 0 ok, 1 a step failed, 2 bad usage, 77 cannot run here (perf
# cannot record, or the d3-flame-graph page cannot be fetched and is not
# cached).
set -eu

FG_VERSION=4.1.3
CACHE=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/batchpipe

usage() { # [status]: 0 for --help (stdout), else bad usage (stderr, 2)
	if [ "${1:-2}" -eq 0 ]; then
		sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
	fi
	sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
die() {
	echo "flamegraph: $*" >&2
	exit 1
}

out=. name=profile freq=999 keep=0 png=1 compare=0 a="" b=""
while [ $# -gt 0 ]; do
	case $1 in
	--out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
	--name) [ $# -ge 2 ] || usage; name=$2; shift 2 ;;
	--freq) [ $# -ge 2 ] || usage; freq=$2; shift 2 ;;
	--keep-data) keep=1; shift ;;
	--no-png) png=0; shift ;;
	--compare) [ $# -ge 3 ] || usage; compare=1; a=$2; b=$3; shift 3 ;;
	--help | -h) usage 0 ;;
	--) shift; break ;;
	*) echo "flamegraph: unknown option '$1'" >&2; usage ;;
	esac
done
case $freq in '' | *[!0-9]*) echo "flamegraph: --freq wants a number of Hz" >&2; usage ;; esac
case $name in '' | */* | .*) echo "flamegraph: --name wants a plain file name" >&2; usage ;; esac
if [ $compare -eq 0 ] && [ $# -eq 0 ]; then
	echo "flamegraph: no command to profile (put it after --)" >&2
	usage
fi
if [ $compare -eq 1 ] && [ $# -gt 0 ]; then
	echo "flamegraph: --compare takes no command" >&2
	usage
fi
command -v python3 >/dev/null || die "python3 is missing (scripts/deps.sh installs it)"
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
# The work folder of a recording and chromium's profile folder, whenever
# the script ends; a signal ends it (status 1) through the same cleanup.
work="" prof=""
trap 'rm -rf "$work" "$prof"' EXIT
trap 'exit 1' HUP INT TERM

# The helpers that read folded stacks and write pages, in one place.
fgpy() {
	python3 - "$@" <<'PY'
import html, json, os, re, sys

def read_folded(path):
    stacks = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks.append((stack.split(";"), int(count)))
    return stacks

def top_self(stacks, n=5):
    total = sum(c for _, c in stacks) or 1
    self_t = {}
    for frames, c in stacks:
        self_t[frames[-1]] = self_t.get(frames[-1], 0) + c
    best = sorted(self_t.items(), key=lambda kv: -kv[1])[:n]
    return total, [(name, c, 100.0 * c / total) for name, c in best]

def tree(stacks, scale=1.0):
    root = {"name": "all", "value": 0, "children": {}}
    for frames, c in stacks:
        node = root
        node["value"] += c * scale
        for fr in frames:
            node = node["children"].setdefault(fr, {"name": fr, "value": 0, "children": {}})
            node["value"] += c * scale
    return root

def to_d3(node, diff=False, other=None):
    # d3-flame-graph wants totals in "value" with selfValue(false); "delta"
    # is this node's total minus the same path's total in the other profile.
    out = {"name": node["name"], "value": round(node["value"]),
           "children": [to_d3(ch, diff, other["children"].get(k) if other else None)
                        for k, ch in sorted(node["children"].items())]}
    if diff:
        out["delta"] = round(node["value"] - (other["value"] if other else 0))
    return out

def depth(stacks):
    return max((len(f) for f, _ in stacks), default=1)

mode = sys.argv[1]
if mode == "top":
    for label, path in zip(sys.argv[2::2], sys.argv[3::2]):
        total, best = top_self(read_folded(path))
        print("top self time, %s (%d samples):" % (label, total))
        for name, c, pct in best:
            print("  %5.1f %%  %6d  %s" % (pct, c, name))
elif mode == "depth":
    print(depth(read_folded(sys.argv[2])))
elif mode == "annotate":
    # The standalone page says what it is: a heading with the name, the
    # command profiled, the samples, how to read width and colour, and the
    # top self time; the template's own page has none of it.
    page, name, folded, freq, cmd = sys.argv[2:7]
    stacks = read_folded(folded)
    total, best = top_self(stacks)
    text = open(page, encoding="utf-8").read()
    rows = "".join("<tr><td>%.1f %%</td><td>%d</td><td>%s</td></tr>" % (p, c, html.escape(n))
                   for n, c, p in best)
    head = ("<div style='font-family:sans-serif;margin:8px 16px'>"
            "<h1 style='font-size:18px'>Flame graph: %s</h1>"
            "<p>Command: <code>%s</code></p>"
            "<p>%d samples of cpu-clock at %s Hz over every thread of the command "
            "(perf record --call-graph dwarf). A frame's width is its share of those "
            "samples, itself and what it called; the frames above it are its callees. "
            "Blue frames run in the kernel, green ones in user space; the shades only "
            "tell frames apart. Click a frame to zoom.</p>"
            "<table><tr><th>share</th><th>samples</th><th>top self time</th></tr>%s</table>"
            "</div>" % (html.escape(name), html.escape(cmd), total, html.escape(freq), rows))
    text = re.sub(r"<title>[^<]*</title>",
                  lambda m: "<title>Flame graph: %s</title>" % html.escape(name), text, count=1)
    text, n = re.subn(r"(<body[^>]*>)", lambda m: m.group(1) + head, text, count=1)
    if not n:
        sys.exit("no <body> in " + page)
    open(page, "w", encoding="utf-8").write(text)
elif mode == "check-offline":
    # Any script, style or image the page would fetch from elsewhere.
    text = open(sys.argv[2], encoding="utf-8").read()
    bad = re.findall(r'<(?:script|link|img)\b[^>]*(?:src|href)\s*=\s*["\']?(?:https?:)?//[^"\'> ]*',
                     text, re.I)
    if bad:
        print("\n".join(bad))
        sys.exit(1)
elif mode == "inline":
    # template, fg dist dir, d3 dist dir (may be empty), output: replace every
    # external <script src> / <link href> naming a file these packages ship
    # by the file's contents, so the page never reaches a CDN.
    tpl, fgdist, d3dist, dst = sys.argv[2:6]
    text = open(tpl, encoding="utf-8").read()
    def local(url):
        base = url.rsplit("/", 1)[-1].split("?")[0]
        for d in (fgdist, d3dist):
            if d and os.path.isfile(os.path.join(d, base)):
                return os.path.join(d, base)
        if d3dist and re.match(r"d3(\.v\d+)?(\.min)?\.js$", base):
            return os.path.join(d3dist, "d3.min.js")
        sys.exit("no local copy of %s" % url)
    def script(m):
        body = open(local(m.group(1)), encoding="utf-8").read()
        return "<script>%s</script>" % body.replace("</script", "<\\/script")
    def style(m):
        return "<style>%s</style>" % open(local(m.group(1)), encoding="utf-8").read()
    text = re.sub(r'<script[^>]*\bsrc=["\']((?:https?:)?//[^"\']+)["\'][^>]*>\s*</script>', script, text)
    text = re.sub(r'<link[^>]*\bhref=["\']((?:https?:)?//[^"\']+\.css)["\'][^>]*>', style, text)
    open(dst, "w", encoding="utf-8").write(text)
elif mode == "compare":
    outdir, a, b, fgdist, d3dist = sys.argv[2:7]
    sa = read_folded(os.path.join(outdir, a + ".folded"))
    sb = read_folded(os.path.join(outdir, b + ".folded"))
    ta, tb = sum(c for _, c in sa), sum(c for _, c in sb)
    if not ta or not tb:
        sys.exit("empty profile")
    ja = to_d3(tree(sa))
    jb = to_d3(tree(sb))
    # The differential graph has B's shape; each frame's colour is how much
    # larger (red) or smaller (blue) its share of the samples is than in A,
    # with A scaled to B's sample count so different lengths compare.
    jd = to_d3(tree(sb), True, tree(sa, tb / ta))
    def rd(p):
        return open(p, encoding="utf-8").read().replace("</script", "<\\/script")
    def top_html(label, stacks):
        total, best = top_self(stacks)
        rows = "".join("<tr><td>%.1f %%</td><td>%d</td><td>%s</td></tr>" % (p, c, html.escape(n))
                       for n, c, p in best)
        return ("<div class='top'><h3>%s: top self time (%d samples)</h3><table>"
                "<tr><th>share</th><th>samples</th><th>function</th></tr>%s</table></div>"
                % (html.escape(label), total, rows))
    page = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%(a)s vs %(b)s</title>
<style>%(css)s
body { font-family: sans-serif; margin: 10px 20px; }
.pair { display: flex; gap: 16px; } .pair > div { flex: 1; min-width: 0; }
h2 { font-size: 16px; margin: 14px 0 4px; } h3 { font-size: 13px; margin: 4px 0; }
p.how { font-size: 13px; color: #444; margin: 2px 0 6px; max-width: 70em; }
table { border-collapse: collapse; font-size: 12px; }
td, th { padding: 1px 8px; text-align: left; } td:first-child { text-align: right; }
.tops { display: flex; gap: 40px; margin: 6px 0; }
</style>
<script>%(d3)s</script>
<script>%(fg)s</script>
<script>%(cm)s</script>
</head><body>
<h1 style="font-size:18px">%(a)s vs %(b)s</h1>
<p class="how">Width is the share of CPU samples (cpu-clock, %(ta)d and %(tb)d samples);
a frame's top edge that nothing sits on is its self time. Click a frame to zoom, hover for
the numbers.</p>
<div class="tops">%(topa)s%(topb)s</div>
<div class="pair">
<div><h2>%(a)s</h2><div id="ga"></div></div>
<div><h2>%(b)s</h2><div id="gb"></div></div>
</div>
<h2>differential: %(b)s with the change from %(a)s</h2>
<p class="how">The shape is %(b)s's profile; red frames take a larger share of the samples
than in %(a)s, blue a smaller one (the darker, the larger the change); orange frames do not
appear in %(a)s at all. Where the time went is where the widest red is.</p>
<div id="gd"></div>
<script>
const data = { ga: %(ja)s, gb: %(jb)s, gd: %(jd)s };
function draw(id, diff) {
  const el = document.getElementById(id);
  const g = flamegraph().width(el.clientWidth || 600).cellHeight(16)
    .minFrameSize(2).transitionDuration(0).sort(true).selfValue(false);
  if (diff) g.setColorMapper(flamegraph.colorMapper.differentialColorMapper);
  d3.select(el).datum(data[id]).call(g);
}
draw("ga", false); draw("gb", false); draw("gd", true);
document.body.setAttribute("data-graphs", document.querySelectorAll("svg.d3-flame-graph").length);
</script>
</body></html>
""" % {"a": html.escape(a), "b": html.escape(b), "ta": ta, "tb": tb,
       "css": rd(os.path.join(fgdist, "d3-flamegraph.css")),
       "d3": rd(os.path.join(d3dist, "d3.min.js")),
       "fg": rd(os.path.join(fgdist, "d3-flamegraph.min.js")),
       "cm": rd(os.path.join(fgdist, "d3-flamegraph-colorMapper.min.js")),
       "topa": top_html(a, sa), "topb": top_html(b, sb),
       "ja": json.dumps(ja), "jb": json.dumps(jb), "jd": json.dumps(jd)}
    open(os.path.join(outdir, "%s-vs-%s.html" % (a, b)), "w", encoding="utf-8").write(page)
    print(max(depth(sa), depth(sb)))
PY
}

# offline MESSAGE: the page's scripts cannot be had here; like perf that
# cannot record, a reason to skip (77), not a fault of the command.
offline() {
	echo "flamegraph: $*; it is fetched once into $CACHE, not there yet: no flame graph" >&2
	exit 77
}

# npm package PKG@VER unpacked once into the cache; prints its folder.
# Short retry waits: offline, npm's defaults take over a minute to give up.
# A subshell, so that its own trap removes its download folder.
npm_package() (
	tmp=""
	trap 'rm -rf "$tmp"' EXIT
	trap 'exit 1' HUP INT TERM
	dir=$CACHE/$1-$2
	if [ ! -f "$dir/package/package.json" ]; then
		command -v npm >/dev/null ||
			offline "npm is missing to fetch $1@$2 (scripts/deps.sh installs it)"
		tmp=$(mktemp -d)
		if ! (cd "$tmp" && npm pack --silent --fetch-retry-mintimeout=1000 \
			--fetch-retry-maxtimeout=5000 "$1@$2" >/dev/null 2>npm.log); then
			cat "$tmp/npm.log" >&2
			offline "cannot fetch $1@$2 with npm (no registry reachable?)"
		fi
		{ mkdir -p "$tmp/x" && tar xzf "$tmp"/*.tgz -C "$tmp/x"; } || die "cannot unpack $1@$2"
		mkdir -p "$CACHE" && rm -rf "$dir" && mv "$tmp/x" "$dir"
	fi
	echo "$dir/package"
)

# The flame-graph page template, made to work from the file system: 4.1.3's
# has d3 built in, but should it name a CDN script, that script is inlined
# from the npm packages, and the result is checked to fetch nothing.
offline_template() {
	t=$CACHE/d3-flamegraph-$FG_VERSION-offline.html
	if [ ! -f "$t" ]; then
		fg=$(npm_package d3-flame-graph $FG_VERSION) || exit $?
		src=$fg/dist/templates/d3-flamegraph-base.html
		[ -f "$src" ] || die "d3-flame-graph@$FG_VERSION has no template"
		d3=""
		if ! fgpy check-offline "$src" >/dev/null; then
			d3=$(npm_package d3 7) || exit $?
			d3=$d3/dist
		fi
		fgpy inline "$src" "$fg/dist" "$d3" "$t.tmp" || die "cannot inline the template's scripts"
		if ! fgpy check-offline "$t.tmp" >&2; then
			rm -f "$t.tmp"
			die "the template still loads the resources above"
		fi
		mv "$t.tmp" "$t"
	fi
	echo "$t"
}

find_chromium() {
	for c in chromium chromium-browser google-chrome; do
		command -v $c >/dev/null && { echo $c; return 0; }
	done
	return 1
}

# screenshot HTML PNG HEIGHT: the page after its scripts ran, as a picture.
screenshot() {
	chrome=$(find_chromium) ||
		die "chromium is missing: it draws $2 (scripts/deps.sh installs it; or --no-png)"
	prof=$(mktemp -d)
	# A profile folder of its own: a second chromium on a shared profile
	# would hand its work to the first one and exit.
	# Bounded: a headless chromium that hangs would hold the run forever.
	crc=0
	timeout -k 5 60 "$chrome" --headless --no-sandbox --disable-gpu --disable-background-networking \
		--disable-component-update --disable-sync --no-first-run --hide-scrollbars \
		--user-data-dir="$prof" --virtual-time-budget=5000 \
		--window-size="1400,$3" --screenshot="$2" "file://$1" >"$prof/log" 2>&1 || crc=$?
	if [ $crc -eq 124 ] || [ $crc -eq 137 ]; then
		cat "$prof/log" >&2
		rm -rf "$prof"
		die "chromium did not finish $2 within 60 s"
	fi
	if [ ! -s "$2" ]; then
		cat "$prof/log" >&2
		rm -rf "$prof"
		die "chromium wrote no $2"
	fi
	rm -rf "$prof"
}

height_for() { # depth of the deepest stack -> window height that shows it
	# (the heading, the command, how to read it and the top five: 300 px)
	h=$(($1 * 16 + 440))
	[ $h -lt 500 ] && h=500
	[ $h -gt 3000 ] && h=3000
	echo $h
}

if [ $compare -eq 1 ]; then
	for p in "$a" "$b"; do
		[ -s "$out/$p.folded" ] || die "no profile $out/$p.folded (record it first: --name $p -- ...)"
	done
	fg=$(npm_package d3-flame-graph $FG_VERSION) || exit $?
	d3=$(npm_package d3 7) || exit $?
	d=$(fgpy compare "$out" "$a" "$b" "$fg/dist" "$d3/dist") || die "cannot write $a-vs-$b.html"
	fgpy check-offline "$out/$a-vs-$b.html" >&2 ||
		die "$a-vs-$b.html would load the resources above"
	if [ $png -eq 1 ]; then
		screenshot "$out/$a-vs-$b.html" "$out/$a-vs-$b.png" $((d * 32 + 420))
	fi
	fgpy top "$a" "$out/$a.folded" "$b" "$out/$b.folded"
	echo "flamegraph: wrote $out/$a-vs-$b.html" >&2
	exit 0
fi

command -v perf >/dev/null ||
	{ echo "flamegraph: perf is missing (Debian: apt-get install linux-perf; scripts/deps.sh)" >&2; exit 77; }
work=$(mktemp -d "$out/.$name.XXXXXX")
if ! perf record -q -e cpu-clock -F "$freq" -o "$work/probe.data" -- true >"$work/probe.log" 2>&1; then
	par=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo "?")
	cat "$work/probe.log" >&2
	echo "flamegraph: perf cannot record here (kernel.perf_event_paranoid = $par;" \
		"as root: sysctl kernel.perf_event_paranoid=1, or run as root)" >&2
	exit 77
fi
rm -f "$work/probe.data"
template=$(offline_template) || exit $?

echo "flamegraph: recording $name: $*" >&2
rc=0
perf record -q -e cpu-clock -F "$freq" --call-graph dwarf -o "$work/perf.data" -- "$@" || rc=$?
if [ $rc -ne 0 ]; then
	echo "flamegraph: the command failed (exit $rc): no flame graph for $name" >&2
	exit $rc
fi
(cd "$work" && perf script report stackcollapse >"$out/$name.folded" 2>"$work/collapse.log") ||
	{ cat "$work/collapse.log" >&2; die "perf script report stackcollapse failed"; }
[ -s "$out/$name.folded" ] || die "perf recorded no samples of the command (it ran too briefly?): no flame graph for $name"
(cd "$work" && perf script report flamegraph --template "$template" \
	-o "$out/$name.html" >"$work/flame.log" 2>&1) ||
	{ cat "$work/flame.log" >&2; die "perf script report flamegraph failed"; }
[ -s "$out/$name.html" ] || die "perf wrote no $name.html"
fgpy annotate "$out/$name.html" "$name" "$out/$name.folded" "$freq" "$*" ||
	die "cannot add the heading to $name.html"
if [ $png -eq 1 ]; then
	screenshot "$out/$name.html" "$out/$name.png" "$(height_for "$(fgpy depth "$out/$name.folded")")"
fi
[ $keep -eq 1 ] && mv "$work/perf.data" "$out/$name.perf.data"
fgpy top "$name" "$out/$name.folded"
echo "flamegraph: wrote $out/$name.folded, $name.html$([ $png -eq 1 ] && echo ", $name.png")" >&2
