#!/usr/bin/env bash
# new_path.sh GW (in the guest): issue 19, a new port of a running target's
# subsystem becomes a path, against the kernel target (nvmet), tcp.
# Subsystem N is linked to port 57 (10.0.2.15:4457) from the start; port 56
# (4456) serves subsystem X so that nvmet answers discovery there.  The
# daemon has a discovery controller on each port and target tn configured
# by NQN only, with export e1 on /dev/nbdN.  With a writer running on it,
# N is linked to port 56: that port's Discovery Log Page Change event makes
# 10.0.2.15:4456 path 1 of the running target (no reload), live beside
# path 0, and the writer sees no error.  Then, the writer stopped and the
# device flushed, N is unlinked from port 57 (nvmet drops those
# connections): a writer runs over the new path alone without an error, and
# the data reads back.  SIGTERM ends the daemon.
set -u
GW=${1:?usage: new_path.sh GW}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
X=nqn.2014-08.org.nvmf-gateway:interop-disc-x
N=nqn.2014-08.org.nvmf-gateway:interop-newpath-n
pa=57 pb=56
W=/tmp/newpath
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
export NVMF_GATEWAY_LOG=info
GP= WP=
fail() {
	echo "FAIL: $*"
	echo "--- gateway log"; grep -v '^ *$' "$W/gw.log" 2> /dev/null | tail -60
	exit 1
}
cleanup() {
	[ -n "$WP" ] && kill "$WP" 2> /dev/null && wait "$WP"
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	[ ! -e "$NVMET/ports/$pb/subsystems/$N" ] || nvmet_unlink "$N" "$pb"
}
trap cleanup EXIT

[ -d "$NVMET/subsystems/$X" ] || nvmet_subsys "$X" 16M 512 || exit 1
[ -d "$NVMET/subsystems/$N" ] || nvmet_subsys "$N" 32M 512 || exit 1
[ -d "$NVMET/ports/$pa" ] || nvmet_port "$pa" tcp 10.0.2.15 4457 || exit 1
[ -d "$NVMET/ports/$pb" ] || nvmet_port "$pb" tcp 10.0.2.15 4456 || exit 1
[ -e "$NVMET/ports/$pa/subsystems/$N" ] || nvmet_link "$N" "$pa" || exit 1
[ -e "$NVMET/ports/$pb/subsystems/$X" ] || nvmet_link "$X" "$pb" || exit 1
[ ! -e "$NVMET/ports/$pb/subsystems/$N" ] || nvmet_unlink "$N" "$pb" || exit 1

cat > "$W/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; control = "$W/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "10.0.2.15"; trsvcid = "4457"; reconnect_delay = 1; },
  { transport = "tcp"; traddr = "10.0.2.15"; trsvcid = "4456"; reconnect_delay = 1; } );
targets = ( { name = "tn"; subnqn = "$N"; reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "tn"; nsid = 1; nbd = { device = "auto"; }; } );
CONF
"$GW" check -c "$W/gw.conf" || fail "config"
"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
GP=$!
st() { "$GW" status -s "$W/gw.control" -o json; }
waitfor() {
	for _ in $(seq "$2"); do
		eval "$1" && return 0
		kill -0 "$GP" 2> /dev/null || fail "the gateway exited"
		sleep 0.2
	done
	return 1
}
waitfor "grep -q 'attached as /dev/nbd' '$W/gw.log'" 300 || fail "e1 did not come up"
waitfor "[ \"\$(st | jq -r '[.discovery[] | .state] | join(\",\")')\" = watching,watching ]" 300 ||
	{ st | jq -c .discovery; fail "the discovery controllers are not watching"; }
DEV=$(grep -o 'attached as /dev/nbd[0-9]*' "$W/gw.log" | grep -o '/dev/nbd[0-9]*' | head -1)
[ -b "$DEV" ] || fail "no /dev/nbdN"
[ "$(st | jq '.targets[0].paths | length')" = 1 ] || { st | jq -c '.targets[0].paths'; fail "paths at start"; }

head -c 4M /dev/urandom > "$W/r"
( while :; do dd if="$W/r" of="$DEV" bs=1M oflag=direct conv=fsync status=none || exit 1; done ) &
WP=$!
sleep 1
nvmet_link "$N" "$pb" || fail "link N to port $pb"
echo "subsystem N linked to port $pb"
waitfor "grep -q 'target tn: path 1 added: tcp 10.0.2.15:4456' '$W/gw.log'" 300 ||
	{ st | jq -c '.targets[0].paths'; fail "the new port was not added as a path"; }
waitfor "[ \"\$(st | jq -r '[.targets[0].paths[] | .state] | join(\",\")')\" = live,live ]" 300 ||
	{ st | jq -c '.targets[0].paths'; fail "two live paths"; }
st | jq -c '.targets[0].paths[] | {index, trsvcid, state}'
! grep -q 'SIGHUP\|reloading' "$W/gw.log" || fail "a reload happened"

# The writer stops (and the device is flushed) before port 57 goes: nvmet's
# controllers have a volatile cache, so a path reset with writes not yet
# flushed makes the next flush fail once, by design (the FLUSH rule).
kill -0 "$WP" 2> /dev/null || fail "the writer failed while path 1 was added"
kill "$WP"; wait "$WP" 2> /dev/null; WP=
blockdev --flushbufs "$DEV" || fail "flush before the unlink"
nvmet_unlink "$N" "$pa" || fail "unlink N from port $pa"
echo "subsystem N unlinked from port $pa"
waitfor "[ \"\$(st | jq -r '.targets[0].paths[0].state')\" != live ]" 150 ||
	fail "path 0 still live after the unlink"
( while :; do dd if="$W/r" of="$DEV" bs=1M oflag=direct conv=fsync status=none || exit 1; done ) &
WP=$!
sleep 3
kill -0 "$WP" 2> /dev/null || fail "the writer failed on path 1 alone"
kill "$WP"; wait "$WP" 2> /dev/null; WP=
dd if="$W/r" of="$DEV" bs=1M oflag=direct conv=fsync status=none || fail "write over path 1"
cmp -n 4194304 "$W/r" "$DEV" || fail "the data does not read back"
[ "$(st | jq -r '.targets[0].paths[1].state')" = live ] || fail "path 1 not live"
kill -TERM "$GP"
wait "$GP" || fail "gateway exit status after SIGTERM"
GP=
echo "new path tcp: OK"
