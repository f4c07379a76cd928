#!/usr/bin/env bash
# A short gap in the discovery log does not delete a path between
# reconnects, on the reactor backend NVMF_GATEWAY_REACTOR_BACKEND names:
# - target ta (paths from discovery) has one path, port 2 (port 1 carries
#   the discovery controller and is left out of the log);
# - port 2 drops out of the log (an array whose discovery service is back
#   before its subsystems are relinked), then its connection is lost: the
#   path keeps reconnecting as any lost path, within its grace
#   (ctrl_loss_tmo), rather than being deleted with I/O failing at once;
# - reads issued during the gap, and the verify loop running through it,
#   complete without an error once port 2 is listed and up again, and
#   the log shows no deletion.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:unlisted-gap
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
tgt_start t "" -s "$p1" -s "$p2" --subsys "$A:16M"
ctl t disc-port 1 hide > /dev/null

# fast_io_fail_tmo far above the gap: without the grace the deleted path
# failed I/O at once, not after it.
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1; ctrl_loss_tmo = 60;
              fast_io_fail_tmo = 30; } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF

st() { "$GW" status -s "$tmp/gw.control" -o json; }

GW_CONTROL="$tmp/gw.control" SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
gw_wait "export e1: serving (its target was discovered)" 1 15 > /dev/null ||
	fail "e1 did not come up: $(st | jq -c .targets)"
[ "$(st | jq -r '[.targets[0].paths[] | .trsvcid] | join(",")')" = "$p2" ] ||
	fail "ta's paths at start: $(st | jq -c '.targets[0].paths')"
wait_for 10 '[ "$(st | jq -r ".discovery[0].state")" = watching ]' ||
	fail "the discovery controller is not watching: $(st | jq -c .discovery)"

verify_start
sleep 1
ctl t disc-port 2 hide > /dev/null
gw_wait "target ta: path 0: no longer listed by discovery; kept while its connection lasts" 1 15 \
	> /dev/null || fail "the unlisting was not applied: $(st | jq -c '.targets[0].paths')"
t0=$(mono)
ctl t port 2 down > /dev/null
gw_wait "ctrl ta/path0: lost" 1 15 > /dev/null || fail "the loss of path 0 was not seen"
# Reads issued during the gap (on a connection of their own; reads, so
# as not to disturb what the verify loop checks): they wait for the path.
io check "$tmp/e1.sock" 100 4 7 > "$tmp/read.out" 2>&1 &
rpid=$!
sleep 2
[ "$(st | jq -r '.targets[0].paths[0].state')" != dead ] ||
	fail "the unlisted path was deleted during the gap: $(st | jq -c '.targets[0].paths[0]')"

# Listed and reachable again within the grace.
ctl t disc-port 2 show > /dev/null
gw_wait "target ta: path 0: listed by discovery again" 1 15 > /dev/null ||
	fail "the relisting was not applied"
ctl t port 2 up > /dev/null
at=$(gw_wait "target ta: path 0 live again" 1 20) ||
	fail "path 0 did not come back: $(st | jq -c '.targets[0].paths[0]')"
echo "path 0 live again $(echo "$at - $t0" | bc -l) s after its port went down"
wait "$rpid" || fail "the reads issued during the gap failed: $(cat "$tmp/read.out")"
sleep 1
verify_stop_ok
! grep -E "deleting its controller|failed with EIO" "$tmp/gw.log" ||
	fail "a path was deleted or I/O failed during the gap"
[ "$(st | jq -r '.targets[0].paths[0].state')" = live ] || fail "path 0 not live: $(st | jq -c '.targets[0].paths')"
gw_alive
gw_stop
echo "discovery unlisted gap: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
