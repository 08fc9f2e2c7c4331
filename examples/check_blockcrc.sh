#!/bin/sh
# Check blockcrc against gzip's own CRC-32 on a file of random size.
# usage: check_blockcrc.sh BLOCKCRC [workers]
set -eu
bin=$1
workers=${2:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
size=$(( 3000000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') ))
head -c "$size" /dev/urandom >"$dir/data"
ours=$("$bin" "$dir/data" "$workers")
theirs=$(gzip -c "$dir/data" | gzip -lv | awk 'NR == 2 { print $2 }')
echo "blockcrc: $ours; gzip: crc32 $theirs size $size"
[ "$ours" = "crc32 $theirs size $size" ]
