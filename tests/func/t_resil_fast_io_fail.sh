#!/usr/bin/env bash
# fast_io_fail_tmo = 2 (ctrl_loss_tmo 60, reconnect_delay 1): the only path
# goes away (its target port stops listening and drops its connections).
# Reads fail with EIO about 2 s after the loss (asserted 2 s +- 1.5 s)
# while the gateway keeps reconnecting (logged attempts after the EIO);
# once the port is back, reads succeed again within reconnect_delay + 4 s,
# with no restart and no reload.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:fastfail
tgt_start a "" -s 0 --subsys "$A:32M"
p1=$(sed -n 1p "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; log_level = "info"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 2; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 1 > /dev/null || fail "e1 does not work at start"

lose_port_time_error 'fast_io_fail_tmo): failing I/O'
[ "$err" = EIO ] || fail "e1 failed with $err, not EIO"
echo "$took >= 1.5 && $took <= 5" | bc -l | grep -q 1 || fail "I/O failed $took s after the loss, not about 2 s (1.5 to 5)"
# Reconnecting goes on after the EIO.
n0=$(grep -c 'path 0: reconnecting (attempt' "$tmp/gw.log")
sleep 2.5
n1=$(grep -c 'path 0: reconnecting (attempt' "$tmp/gw.log")
echo "reconnect attempts: $n0, 2.5 s later $n1"
[ "$n1" -gt "$n0" ] || fail "no reconnect attempt after the EIO"
grep -q 'ctrl_loss_tmo expired' "$tmp/gw.log" && fail "the path was deleted"
gw_alive

n=$(grep -c 'path 0 live again' "$tmp/gw.log")
t0=$(mono)	# before the port is up: never less than the truth
ctl a port 1 up > /dev/null
at=$(gw_wait 'path 0 live again' $((n + 1)) 60) || fail "path 0 not live again within 60 s of the port's return"
back=$(echo "$at - $t0" | bc -l)
echo "path 0 live again $back s after the port came back (gateway clock)"
echo "$back <= 6" | bc -l | grep -q 1 || fail "took $back s, more than reconnect_delay + 5 s"
"$NBDPY" "$IO" until-ok "$tmp/e1.sock" 60 > "$tmp/ok.out" || fail "e1 still fails 60 s after the path came back"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 2 || fail "verified I/O after the return"
gw_stop
echo pass
