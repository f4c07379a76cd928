#!/usr/bin/env bash
# discovery.sh GW (in the guest): issue 19's persistent discovery against
# the kernel target (nvmet), tcp.  Port 38 (10.0.2.15:4438) serves
# subsystem X from the start, so nvmet listens there and its discovery
# controller answers.  The daemon has a discovery controller on that port
# and target ty configured by NQN only (no paths), with export e1 on NBD
# socket, /dev/nbdN and FUSE.  8 s after the start subsystem Y is linked to
# port 38: nvmet sends the Discovery Log Page Change event, the gateway
# re-reads the log, gives ty the listed port and e1 comes up on all three
# with no reload; data written through /dev/nbdN reads back through the
# FUSE file.  Then Y is unlinked: the log says it is no longer listed
# (nvmet drops the connections of an unlinked port itself: the gateway
# only must not crash or exit).  SIGTERM ends the daemon.
set -u
GW=${1:?usage: discovery.sh GW}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
X=nqn.2014-08.org.nvmf-gateway:interop-disc-x
Y=nqn.2014-08.org.nvmf-gateway:interop-disc-y
pd=38
W=/tmp/disc
rm -rf "$W" && mkdir -p "$W/fuse" && cd "$W" || exit 1
export NVMF_GATEWAY_LOG=info
GP=
fail() {
	echo "FAIL: $*"
	echo "--- gateway log"; grep -v '^ *$' "$W/gw.log" 2> /dev/null | tail -60
	exit 1
}
cleanup() {
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	[ ! -e "$NVMET/ports/$pd/subsystems/$Y" ] || nvmet_unlink "$Y" "$pd"
}
trap cleanup EXIT

[ -d "$NVMET/subsystems/$X" ] || nvmet_subsys "$X" 16M 512 || exit 1
[ -d "$NVMET/subsystems/$Y" ] || nvmet_subsys "$Y" 32M 512 || exit 1
[ -d "$NVMET/ports/$pd" ] || nvmet_port "$pd" tcp 10.0.2.15 4438 || exit 1
[ -e "$NVMET/ports/$pd/subsystems/$X" ] || nvmet_link "$X" "$pd" || exit 1
[ ! -e "$NVMET/ports/$pd/subsystems/$Y" ] || nvmet_unlink "$Y" "$pd" || exit 1

cat > "$W/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; control = "$W/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "10.0.2.15"; trsvcid = "4438"; reconnect_delay = 1; } );
targets = ( { name = "ty"; subnqn = "$Y"; reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "ty"; nsid = 1;
    nbd = { listen = "unix:$W/e1.sock"; device = "auto"; }; fuse = true; } );
fuse = { mountpoint = "$W/fuse"; };
CONF
"$GW" check -c "$W/gw.conf" || fail "config"
"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
GP=$!
st() { "$GW" status -s "$W/gw.control" -o json; }
for _ in $(seq 300); do
	[ "$(st 2> /dev/null | jq -r '.discovery[0].state' 2> /dev/null)" = watching ] && break
	kill -0 "$GP" 2> /dev/null || fail "the gateway exited"
	sleep 0.2
done
st | jq -c '.discovery, .discovered'
[ "$(st | jq -r '.discovery[0].change_events')" = true ] || fail "nvmet's change events not enabled"
st | jq -e --arg x "$X" '[.discovered[] | select(.subnqn == $x)] | length == 1' > /dev/null ||
	fail "subsystem X not discovered"
[ -e "$W/e1.sock" ] && fail "NBD socket before Y is listed"

sleep 8
nvmet_link "$Y" "$pd" || fail "link"
echo "subsystem Y linked to port $pd"
for _ in $(seq 300); do
	[ -S "$W/e1.sock" ] && [ -f "$W/fuse/e1" ] && grep -q 'attached as /dev/nbd' "$W/gw.log" && break
	kill -0 "$GP" 2> /dev/null || fail "the gateway exited"
	sleep 0.2
done
grep 'discovery log changed' "$W/gw.log" || fail "no change event from nvmet"
grep 'target ty: path 0 from discovery: tcp 10.0.2.15:4438' "$W/gw.log" || fail "no discovered path"
DEV=$(grep -o 'attached as /dev/nbd[0-9]*' "$W/gw.log" | grep -o '/dev/nbd[0-9]*' | head -1)
[ -b "$DEV" ] || fail "no /dev/nbdN"
[ "$(blockdev --getsize64 "$DEV")" = 33554432 ] || fail "size of $DEV"
[ "$(stat -c %s "$W/fuse/e1")" = 33554432 ] || fail "size of the FUSE file"
head -c 1M /dev/urandom > "$W/r"
dd if="$W/r" of="$DEV" bs=1M oflag=direct conv=fsync status=none || fail "write to $DEV"
cmp -n 1048576 "$W/r" "$W/fuse/e1" || fail "the FUSE file does not read what $DEV wrote"
! grep -q 'SIGHUP\|reloading' "$W/gw.log" || fail "a reload happened"

nvmet_unlink "$Y" "$pd" || fail "unlink"
for _ in $(seq 150); do
	grep -q "subsystem $Y: path tcp 10.0.2.15:4438 no longer listed" "$W/gw.log" && break
	sleep 0.2
done
grep -q "subsystem $Y: path tcp 10.0.2.15:4438 no longer listed" "$W/gw.log" ||
	fail "the unlink was not seen"
kill -0 "$GP" 2> /dev/null || fail "the gateway exited after the unlink"
kill -TERM "$GP"
wait "$GP" || fail "gateway exit status after SIGTERM"
GP=
echo "discovery tcp: OK"
