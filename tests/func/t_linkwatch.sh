#!/usr/bin/env bash
# Link watching, in two network namespaces made here (root only): the
# target in one, the gateway in the other, joined by two veth pairs, one
# per path (multipath failover: path 0 carries the I/O).  keep_alive_tmo is
# 10 s, so only the link watch can notice quickly that path 0's local
# interface went down.  Asserted: the MTU mismatch of the two interfaces is
# warned at start; setting the gateway-side veth of path 0 down is detected
# (log line and controller state change) in under 2 s; verified I/O goes on
# over path 1 (the target's per-port counters) with zero errors; setting it
# up again reconnects path 0 within 3 s (no reconnect_delay wait; both
# timed by the gateway's log stamps) and the
# I/O comes back to it.
set -u
. "$TOP/tests/func/resil/lib.sh"
G=gwlw$$ T=tglw$$
netns_two_paths "$G" "$T"
ip -n "$G" link set p2-g mtu 1400
ip -n "$T" link set p2-t mtu 1400

A=nqn.2026-01.io.nvmf-gateway:linkwatch
tgt_start a "ip netns exec $T" -a 0.0.0.0 -s 4420 -s 4421 --subsys "$A:32M"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; log_level = "info"; };
targets = ( { name = "t1"; subnqn = "$A"; multipath = "failover";
    paths = ( { transport = "tcp"; traddr = "10.201.1.2"; trsvcid = "4420"; },
              { transport = "tcp"; traddr = "10.201.2.2"; trsvcid = "4421"; } );
    keep_alive_tmo = 10; reconnect_delay = 5; ctrl_loss_tmo = 60; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf" "ip netns exec $G"
grep 'linkwatch' "$tmp/gw.log"
grep -q "path 0: local interface p1-g (by route), up" "$tmp/gw.log" || fail "path 0's interface not found"
grep -q "path 1: local interface p2-g (by route), up" "$tmp/gw.log" || fail "path 1's interface not found"
grep -q "p1-g has MTU 1500, path 1's p2-g has 1400" "$tmp/gw.log" || fail "no MTU mismatch warning"

verify_start
sleep 1.5
a0=$(stat_field a port1_io) b0=$(stat_field a port2_io)
sleep 1
a1=$(stat_field a port1_io) b1=$(stat_field a port2_io)
echo "before: port 1 +$((a1 - a0)), port 2 +$((b1 - b0))"
[ $((a1 - a0)) -gt 100 ] && [ $((b1 - b0)) = 0 ] || fail "failover policy: I/O not on path 0 only"

# Timed by the gateway's clock (its log stamps) from a t0 read before the
# link change: a slow client polling the log adds nothing.  Bounds: well
# under keep_alive_tmo (10 s) and reconnect_delay (5 s), the alternatives.
ms_since() { echo "($1 - $2) * 1000 / 1" | bc; }
t0=$(mono)
ip -n "$G" link set p1-g down
at=$(gw_wait 'linkwatch: target t1 path 0: local interface p1-g down' 1 30) &&
	seen=$(ms_since "$at" "$t0") || seen=''
at=$(gw_wait 'ctrl t1/path0: live -> resetting' 1 30) && state=$(ms_since "$at" "$t0") || state=''
echo "link down -> log line: ${seen:-never} ms, -> controller resetting: ${state:-never} ms (gateway clock)"
[ -n "$seen" ] && [ "$seen" -lt 2000 ] || fail "link down not detected within 2 s"
[ -n "$state" ] && [ "$state" -lt 2000 ] || fail "path 0 not failed over within 2 s"

sleep 0.5
b0=$(stat_field a port2_io)
sleep 2
b1=$(stat_field a port2_io)
echo "link down: port 2 +$((b1 - b0))"
[ $((b1 - b0)) -gt 100 ] || fail "I/O did not move to path 1"

n=$(grep -c 'path 0 live again' "$tmp/gw.log")
t0=$(mono)
ip -n "$G" link set p1-g up
at=$(gw_wait 'path 0 live again' $((n + 1)) 30) && back=$(ms_since "$at" "$t0") || back=''
echo "link up -> path 0 live: ${back:-never} ms (gateway clock)"
grep -q 'linkwatch: target t1 path 0: local interface p1-g up' "$tmp/gw.log" || fail "link up not seen"
[ -n "$back" ] && [ "$back" -lt 3000 ] || fail "path 0 not back within 3 s of its link (reconnect_delay is 5 s)"
sleep 0.5
a0=$(stat_field a port1_io)
sleep 1
a1=$(stat_field a port1_io)
echo "link up: port 1 +$((a1 - a0))"
[ $((a1 - a0)) -gt 100 ] || fail "I/O did not come back to path 0"

verify_stop_ok
gw_alive
gw_stop
echo pass
