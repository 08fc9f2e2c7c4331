#!/bin/sh
# bp-target's command line: --version, and bad usage as one line that says
# what is wrong (a bad value with its range) and where the usage is, exit 2.
# Starts no daemon. Usage: test_target_cli.sh BP_TARGET
set -u
bt=${1:?usage: test_target_cli.sh BP_TARGET}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "test_target_cli: FAIL: $*" >&2
	exit 1
}

"$bt" --version >"$tmp/out" 2>&1 || fail "--version exited $?"
grep -Eq '^bp-target [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/out" ||
	fail "--version printed: $(cat "$tmp/out")"
"$bt" --help >"$tmp/out" 2>&1 || fail "--help exited $?"
grep -q -- '--version' "$tmp/out" || fail "--help does not list --version"

for bad in "--rails 99" "--port 70000" "--bogus" "--port" "stray" \
	"--progress-wait nosuch"; do
	# shellcheck disable=SC2086 # the words are the arguments
	"$bt" $bad >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] || fail "'$bad': exit $rc, not 2"
	grep -q '^bp-target: see bp-target --help$' "$tmp/err" ||
		fail "'$bad': no pointer to --help: $(cat "$tmp/err")"
	grep -q '^usage:' "$tmp/err" && fail "'$bad': the whole usage"
	[ "$(wc -l <"$tmp/err")" -eq 2 ] ||
		fail "'$bad': not one line and the pointer: $(cat "$tmp/err")"
done
"$bt" --rails 99 2>"$tmp/err"
grep -q "^bp-target: bad value '99' for --rails N: endpoints (1\.\.[0-9]*," \
	"$tmp/err" || fail "--rails 99: no range: $(cat "$tmp/err")"
echo "test_target_cli: ok"
