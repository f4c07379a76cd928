#!/usr/bin/env bash
# A command the target never answers, on two paths: io_timeout = 1,
# reconnect_delay = 1, ctrl_loss_tmo = fast_io_fail_tmo = -1 (no wait
# bound), max_retries = 2.  The target runs every I/O command 10 min after
# it arrives (late; Connect is not held) and does not honour Abort (as
# nvmet): each attempt of a read
# times out, its Abort comes back "not aborted" and the path's controller
# is reset, while the other path is live or back.  The read fails
# (ETIMEDOUT in the gateway, EIO to the NBD client) on its third timeout,
# logged, within (max_retries + 1) x (io_timeout + 5 s) plus the
# reconnects, by the gateway's clock; three Aborts, no fourth.  Before the
# fix it went from path to path for ever, one reset per turn.  Then the
# knob goes and the export works again.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:tmoloop
tgt_start a "" -s 0 -s 0 --subsys "$A:32M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = -1; fast_io_fail_tmo = -1;
    io_timeout = 1; max_retries = 2; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 1 > /dev/null || fail "e1 does not work at start"

ctl a late 600000 > /dev/null
TMO='opcode 0x02) timed out after 1000 ms.*aborting it'
"$NBDPY" "$IO" first-error "$tmp/e1.sock" > "$tmp/e1.out" &
fe=$!
first=$(gw_wait "$TMO" 1 30) || fail "no read timed out within 30 s"
at=$(gw_wait 'failed with ETIMEDOUT: it timed out on 3 of 3 attempts' 1 60) || {
	echo "read timeouts so far: $(grep -c "$TMO" "$tmp/gw.log")"
	fail "the read did not fail within 60 s of its first timeout"
}
wait "$fe" || fail "no error on e1"
read -r _ err _ < "$tmp/e1.out"
took=$(echo "$at - $first" | bc -l)
echo "e1: $err; the gateway failed the read $took s after its first timeout"
[ "$err" = EIO ] || fail "e1 failed with $err, not EIO"
# Two more attempts of 1 s + up to 5 s each, plus a reconnect (1 s) between
# them when the other path is not back yet: generous.
echo "$took <= 20" | bc -l | grep -q 1 || fail "took $took s from the first timeout, more than 20"
sleep 2 # a fourth attempt, if any, would time out within this
n=$(grep -c "$TMO" "$tmp/gw.log")
[ "$n" = 3 ] || fail "$n reads timed out, not 3 (one per attempt)"
gw_alive

ctl a late 0 > /dev/null
"$NBDPY" "$IO" until-ok "$tmp/e1.sock" 60 > /dev/null || fail "e1 still fails 60 s after the knob went"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 2 || fail "verified I/O after the knob went"
gw_stop
echo pass
