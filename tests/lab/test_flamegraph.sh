#!/bin/sh
# bench/flamegraph.sh on a tiny bpbench run: folded stacks that name the
# program's own functions, an HTML page that loads nothing from the network,
# a PNG, a failing command that yields no flame graph, and --compare.
# Offline with an empty cache: exit 77 and the reason.
# Exit 0 pass, 77 skip (perf cannot record here, or the page's scripts
# cannot be fetched), else fail.
set -u
: "${BPBENCH:?}" "${BP_SOURCE_ROOT:?}"
FG=$BP_SOURCE_ROOT/bench/flamegraph.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

is_png() { [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
no_remote() { ! grep -Eiq '<(script|link|img)[^>]*(src|href)[[:space:]]*=[[:space:]]*["'"'"']?(https?:)?//' "$1"; }

# Offline with nothing cached: the page's scripts cannot be fetched, which
# is a skip (77) with the reason, not a failure. An empty cache and a
# registry that refuses connections stand for a machine without network;
# --compare needs no perf, so this runs everywhere.
mkdir "$tmp/off"
printf 'main;a 3\n' >"$tmp/off/x.folded"
printf 'main;b 2\n' >"$tmp/off/y.folded"
XDG_CACHE_HOME=$tmp/off/cache npm_config_cache=$tmp/off/npm \
	npm_config_registry=http://127.0.0.1:9/ \
	"$FG" --compare x y --out "$tmp/off" --no-png >/dev/null 2>"$tmp/off.err"
rc=$?
[ $rc -eq 77 ] || { cat "$tmp/off.err" >&2; fail "offline, nothing cached: exit $rc, expected 77"; }
grep -q 'd3-flame-graph' "$tmp/off.err" || fail "offline: no reason given"
[ -e "$tmp/off/x-vs-y.html" ] && fail "offline: a page was written"

tiny="ring --runs 1 --ms 20 --points 1x1 --batches 8 --no-single"
# shellcheck disable=SC2086
"$FG" --out "$tmp" --name a -- "$BPBENCH" $tiny --queues batchpipe >"$tmp/a.out" 2>"$tmp/a.err"
rc=$?
if [ $rc -eq 77 ]; then
	cat "$tmp/a.err" >&2
	echo "SKIP: flamegraph.sh cannot run here (perf cannot record, or the page cannot be fetched: above)" >&2
	exit 77
fi
[ $rc -eq 0 ] || { cat "$tmp/a.err" >&2; fail "flamegraph.sh exited $rc"; }
[ -s "$tmp/a.folded" ] || fail "a.folded is empty"
grep -Eq '(^|;)(ring_producer_main|ring_consumer_main|bp_ring_[a-z_]+)( |;)' "$tmp/a.folded" ||
	fail "a.folded names none of bpbench's functions"
grep -q '^top self time, a' "$tmp/a.out" || fail "no top self-time list on stdout"
grep -q 'Mitems/s' "$tmp/a.out" || fail "the command's own output did not pass through"
[ -s "$tmp/a.html" ] || fail "no a.html"
grep -q 'flamegraph(stacks' "$tmp/a.html" || fail "a.html is not the flame-graph template"
# the page says what it shows: its name, the command, the samples, how to read it
grep -q '<title>Flame graph: a</title>' "$tmp/a.html" || fail "a.html has no title of its own"
grep -q "<h1[^>]*>Flame graph: a</h1>" "$tmp/a.html" || fail "a.html has no heading"
grep -q "Command: <code>[^<]*bpbench ring" "$tmp/a.html" || fail "a.html does not name the command"
grep -Eq '<p>[0-9]+ samples of cpu-clock at [0-9]+ Hz' "$tmp/a.html" || fail "a.html gives no sample count"
grep -q 'Blue frames run in the kernel' "$tmp/a.html" || fail "a.html has no colour legend"
no_remote "$tmp/a.html" || fail "a.html loads a script or style from the network"
is_png "$tmp/a.png" || fail "a.png is not a PNG"

# A command that fails: its status comes back, and no flame graph appears.
"$FG" --out "$tmp" --name bad -- "$BPBENCH" ring --no-such-option >/dev/null 2>&1
rc=$?
[ $rc -ne 0 ] || fail "a failing command gave exit 0"
if [ -e "$tmp/bad.folded" ] || [ -e "$tmp/bad.html" ]; then
	fail "a failing command left a flame graph"
fi

# Bad usage.
"$FG" --out "$tmp" >/dev/null 2>&1
[ $? -eq 2 ] || fail "no command: expected exit 2"

# shellcheck disable=SC2086
"$FG" --out "$tmp" --name b -- "$BPBENCH" $tiny --queues mutex >/dev/null 2>"$tmp/b.err" ||
	{ cat "$tmp/b.err" >&2; fail "second profile failed"; }
"$FG" --compare b a --out "$tmp" >"$tmp/cmp.out" 2>"$tmp/cmp.err" ||
	{ cat "$tmp/cmp.err" >&2; fail "--compare failed"; }
[ "$(grep -c '^top self time' "$tmp/cmp.out")" -eq 2 ] || fail "--compare printed no top list per profile"
[ -s "$tmp/b-vs-a.html" ] || fail "no b-vs-a.html"
no_remote "$tmp/b-vs-a.html" || fail "b-vs-a.html loads a script or style from the network"
grep -q '"delta"' "$tmp/b-vs-a.html" || fail "b-vs-a.html has no differential graph"
is_png "$tmp/b-vs-a.png" || fail "b-vs-a.png is not a PNG"
"$FG" --compare b nosuch --out "$tmp" >/dev/null 2>&1 && fail "--compare with a missing profile gave exit 0"
echo "ok: flame graphs, failure status, compare"
exit 0
