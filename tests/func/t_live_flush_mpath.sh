#!/usr/bin/env bash
# A FLUSH whose writes were acknowledged on a path that then became ANA
# inaccessible, while another path is optimized: the namespace is flushed
# through the usable path (as the Linux host does), at once, not after
# waiting out the deadline for the inaccessible one.  Two ports of one
# subsystem with a volatile write cache, failover policy.
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:liveflush2
tgt_start a "" --vwc -s 0 -s 0 --subsys "$A:32M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A"; multipath = "failover";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 30; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"

[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "write (on path 0, failover)"
ctl a ana "$A" 1 inaccessible 1 > /dev/null
sleep 1 # the event and the log re-read
t0=$(date +%s.%N)
r=$("$NBDPY" "$LIO" flush "$S" 20)
took=$(echo "$(date +%s.%N) - $t0" | bc -l)
echo "flush with path 0 inaccessible and path 1 optimized: $r in $took s"
[ "$r" = ok ] || fail "the flush says '$r', want ok through path 1"
# Well below fast_io_fail_tmo (30 s): it did not wait for path 0.
awk -v t="$took" 'BEGIN { exit !(t < 15) }' || fail "the flush waited $took s"
! grep -q 'failed with EIO' "$tmp/gw.log" || fail "an I/O failed"
gw_alive
gw_stop_within 30
echo pass
