# shellcheck shell=sh
# What the lab's tests of bpbench's CSV share; sourced by them
# (. "$BP_SOURCE_ROOT/tests/lab/lib.sh").

# check_csv FILE HEADER...: the headers appear in this order, each starting
# a block; every other non-empty line has its block's field count; no nan
# or inf. Prints the number of rows of each block on one line ("4 2"), or
# what is wrong, one line each; the status is 1 when something is.
check_csv() {
	file=$1
	shift
	hdrs=$(printf '%s|' "$@")
	awk -v hdrs="${hdrs%|}" '
	BEGIN { nw = split(hdrs, want, "|") }
	/^$/ { next }
	seen < nw && $0 == want[seen + 1] {
		seen++; nf = split($0, h, ","); rows[seen] = 0; next
	}
	seen == 0 { print "line " NR " before any header: " $0; bad = 1; next }
	{
		n = split($0, f, ",")
		if (n != nf) {
			print "line " NR ": " n " fields, its header " nf ": " $0
			bad = 1
		}
		if ($0 ~ /(^|,)-?(nan|inf)(,|$)/) { print "line " NR ": " $0; bad = 1 }
		rows[seen]++
	}
	END {
		if (seen != nw) { print "missing header: " want[seen + 1]; bad = 1 }
		for (i = 1; i <= nw; i++) printf "%s%d", (i > 1 ? " " : ""), rows[i]
		print ""
		exit bad
	}' "$file"
}
