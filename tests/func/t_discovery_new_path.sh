#!/usr/bin/env bash
# A new port of a running target's subsystem becomes a path (issue 19), on
# the reactor backend NVMF_GATEWAY_REACTOR_BACKEND names:
# - target ta, configured by subsystem NQN without paths, comes up on the
#   one port the test target's discovery log lists (port 2 is left out);
# - the target then lists port 2 too (disc-port, with the change event):
#   the gateway adds it as path 1 of the running target, status shows two
#   live paths, and a verify loop on the export's NBD socket runs through
#   it all without an error;
# - port 1 goes down: the I/O goes on over the new path (the target counts
#   I/O commands on port 2), still without an error;
# - port 2 is no longer listed, then lost: it is deleted at the end of its
#   grace (ctrl_loss_tmo, 10 s here), then no longer reconnected.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:newpath
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
tgt_start t "" -s "$p1" -s "$p2" --subsys "$A:16M"
ctl t disc-port 2 hide > /dev/null

cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1; ctrl_loss_tmo = 10; } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF

st() { "$GW" status -s "$tmp/gw.control" -o json; }
npaths() { st | jq '.targets[0].paths | length'; }

GW_CONTROL="$tmp/gw.control" SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
gw_wait "export e1: serving (its target was discovered)" 1 15 > /dev/null ||
	fail "e1 did not come up: $(st | jq -c .targets)"
[ "$(npaths)" = 1 ] || fail "ta paths at start: $(st | jq -c '.targets[0].paths')"

verify_start
sleep 1
t0=$(mono)
ctl t disc-port 2 show > /dev/null
at=$(gw_wait "target ta: path 1 added: tcp 127.0.0.1:$p2" 1 15) ||
	fail "the new port was not added: $(st | jq -c '.targets[0].paths')"
echo "path added $(echo "$at - $t0" | bc -l) s after the port was listed"
wait_for 15 '[ "$(st | jq -r "[.targets[0].paths[] | .state] | join(\",\")")" = live,live ]' ||
	fail "ta does not have two live paths: $(st | jq -c '.targets[0].paths')"
[ "$(st | jq -r '.targets[0].paths[1].trsvcid')" = "$p2" ] || fail "path 1 is not port 2"
"$GW" status -s "$tmp/gw.control" > "$tmp/status.txt"
grep -q "127.0.0.1:$p2" "$tmp/status.txt" || fail "human status lacks the new path: $(cat "$tmp/status.txt")"

# Failover onto the new path proves it carries I/O.
io2=$(stat_field t port2_io)
ctl t port 1 down > /dev/null
gw_wait "ctrl ta/path0: lost" 1 15 > /dev/null || fail "the loss of path 0 was not seen"
wait_for 15 '[ "$(stat_field t port2_io)" -gt "$((io2 + 50))" ]' ||
	fail "no I/O over port 2 after port 1 went down: $(ctl t stats)"
sleep 1
verify_stop_ok
[ "$(st | jq -r '.targets[0].paths[1].state')" = live ] || fail "path 1 not live: $(st | jq -c '.targets[0].paths')"

# Gone from the log: kept while live; once lost, given up after its grace.
ctl t port 1 up > /dev/null
wait_for 20 '[ "$(st | jq -r ".discovery[0].state")" = watching ]' ||
	fail "the discovery controller did not come back: $(st | jq -c .discovery)"
ctl t disc-port 2 hide > /dev/null
gw_wait "target ta: path 1: no longer listed by discovery; kept while its connection lasts" 1 15 \
	> /dev/null || fail "the unlisting was not applied: $(st | jq -c '.targets[0].paths')"
[ "$(st | jq -r '.targets[0].paths[1].state')" = live ] || fail "path 1 was torn down when unlisted"
ctl t port 2 down > /dev/null
gw_wait "ctrl ta/path1: lost" 1 15 > /dev/null || fail "the loss of path 1 was not seen"
gw_wait "target ta: path 1 (tcp 127.0.0.1:$p2): .*deleting its controller" 1 40 \
	> /dev/null || fail "the lost unlisted path was not deleted: $(st | jq -c '.targets[0].paths')"
rc1=$(st | jq -r '.targets[0].paths[1].reconnects')
ctl t port 2 up > /dev/null
sleep 3 # reconnect_delay is 1 s: a path still chased would have tried
[ "$(st | jq -r '.targets[0].paths[1].reconnects')" = "$rc1" ] &&
	[ "$(st | jq -r '.targets[0].paths[1].state')" = dead ] ||
	fail "the unlisted path was reconnected: $(st | jq -c '.targets[0].paths[1]')"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 1 > /dev/null || fail "e1 does not serve over path 0"
gw_alive
gw_stop
echo "discovery new path: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
