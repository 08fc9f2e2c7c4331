#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_netns.sh BP_TARGET NETNS_CLIENT - the multi-host path on one machine:
# two network namespaces joined by a veth pair, bp-target in one (listening
# on its veth address, with a token, as it must off loopback), the client in
# the other: it writes into the daemon's region and checks the digest, then
# has the daemon fill a region of its own and checks every page
# (netns_client.c). Provider tcp;ofi_rxm bound to the veth
# (FI_TCP_IFACE). Traffic stays between the two namespaces.
#
# Exits 77 (skip) where namespaces cannot be made (not root, no ip), 0 when
# the client verified both directions, 1 otherwise. The namespaces and the
# daemon go away on every exit (trap).
set -u

TARGET=${1:?usage: test_netns.sh BP_TARGET NETNS_CLIENT}
CLIENT=${2:?usage: test_netns.sh BP_TARGET NETNS_CLIENT}
PROV=${BP_NETNS_PROVIDER:-tcp;ofi_rxm}
RAILS=${BP_NETNS_RAILS:-2}

skip() { echo "SKIP: $*"; exit 77; }
command -v ip >/dev/null 2>&1 || skip "no ip (iproute2) here"
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
[ -x "$TARGET" ] || { echo "FAIL: no bp-target at $TARGET"; exit 1; }
[ -x "$CLIENT" ] || { echo "FAIL: no client at $CLIENT"; exit 1; }

# unique per run: names carry our pid; the /30 from it too (10.199.X.0/30,
# used only inside these namespaces)
A="bpA$$"
B="bpB$$"
VA="vA$$"
VB="vB$$"
X=$(( $$ % 64 * 4 ))
NET="10.199.$(( $$ / 64 % 250 ))"
ADDR_A="$NET.$(( X + 1 ))"
ADDR_B="$NET.$(( X + 2 ))"
TMP=$(mktemp -d) || exit 1
DPID=

cleanup() {
	[ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
	ip netns del "$A" 2>/dev/null
	ip netns del "$B" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ip netns add "$A" 2>"$TMP/err" || skip "ip netns add failed: $(cat "$TMP/err")"
ip netns add "$B" || exit 1
ip link add "$VA" type veth peer name "$VB" || skip "no veth here"
ip link set "$VA" netns "$A" && ip link set "$VB" netns "$B" || exit 1
ip -n "$A" addr add "$ADDR_A/30" dev "$VA" || exit 1
ip -n "$B" addr add "$ADDR_B/30" dev "$VB" || exit 1
for ns in "$A" "$B"; do ip -n "$ns" link set lo up || exit 1; done
ip -n "$A" link set "$VA" up && ip -n "$B" link set "$VB" up || exit 1

# the daemon in A, on its veth address, with a token
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/token"
echo >>"$TMP/token"
FIFO="$TMP/out"
mkfifo "$FIFO" || exit 1
FI_TCP_IFACE="$VA" ip netns exec "$A" "$TARGET" --listen "$ADDR_A" --port 0 \
	--provider "$PROV" --rails "$RAILS" --fabric-node "$ADDR_A" \
	--token-file "$TMP/token" >"$FIFO" 2>"$TMP/daemon.err" &
DPID=$!
exec 3<"$FIFO"
LINE=
if ! read -r LINE <&3; then
	echo "FAIL: bp-target did not start:"; cat "$TMP/daemon.err"; exit 1
fi
cat <&3 >/dev/null &  # keep its stdout drained
echo "$LINE"
case "$LINE" in
"bp-target: listening on $ADDR_A:"*) ;;
*) echo "FAIL: unexpected first line from bp-target"; cat "$TMP/daemon.err"; exit 1 ;;
esac
PORT=${LINE#*"$ADDR_A":}
PORT=${PORT%% *}

# the client in B; bounded in time
FI_TCP_IFACE="$VB" timeout 120 ip netns exec "$B" "$CLIENT" \
	--target "$ADDR_A:$PORT" --fabric-node "$ADDR_B" \
	--token-file "$TMP/token" --provider "$PROV" --rails "$RAILS" \
	--len $(( 8 << 20 ))
RC=$?
if [ $RC -ne 0 ]; then
	echo "FAIL: netns client exited $RC; daemon's stderr:"
	cat "$TMP/daemon.err"
	exit 1
fi
# without the token the daemon refuses (from the same namespace pair)
printf 'wrong\n' >"$TMP/badtoken"
FI_TCP_IFACE="$VB" timeout 60 ip netns exec "$B" "$CLIENT" \
	--target "$ADDR_A:$PORT" --fabric-node "$ADDR_B" \
	--token-file "$TMP/badtoken" --provider "$PROV" --rails "$RAILS" \
	--len $(( 1 << 20 )) 2>"$TMP/bad.err"
if [ $? -eq 0 ] || ! grep -qi 'permission\|denied\|refused\|access' "$TMP/bad.err"; then
	echo "FAIL: a wrong token was not refused:"; cat "$TMP/bad.err"; exit 1
fi
echo "a wrong token is refused: $(cat "$TMP/bad.err")"
kill "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
DPID=
echo "PASS netns ($PROV, $RAILS rails, $ADDR_B -> $ADDR_A)"
exit 0
