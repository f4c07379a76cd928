#!/usr/bin/env bash
# Issue 14: export-remove and SIGTERM end in bounded time even when I/O
# waits for a path with no deadline of its own.  fast_io_fail_tmo and
# ctrl_loss_tmo are both off (I/O waits for ever, which the gateway says
# once at start); the only path answers ANA Inaccessible.  A read waits;
# export-remove answers and the read gets EIO within the drain grace (5 s
# by the gateway's clock, from its log); then the same for SIGTERM with a
# second export.  Before the fix the read was never answered (the NBD
# connection was cut after the server's own 30 s reply timeout).
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:livedrain
tgt_start a "" -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
ctlsock="$tmp/gw.ctl"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctlsock"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = -1; fast_io_fail_tmo = -1; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; },
            { name = "e2"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock $tmp/e2.sock" gw_start run "$tmp/gw.conf"
grep -q 'I/O waits for a usable path for ever' "$tmp/gw.log" ||
	fail "the gateway did not say that I/O may wait for ever"
[ "$("$NBDPY" "$LIO" read "$tmp/e1.sock" 10)" = ok ] || fail "first read"

ctl a status 3 2 > /dev/null
"$NBDPY" "$LIO" read "$tmp/e1.sock" 60 > "$tmp/r1.out" &
rp=$!
sleep 2
"$GW" export-remove e1 -s "$ctlsock" > "$tmp/rm.out" 2>&1 &
xp=$!
wait "$rp"
r=$(cat "$tmp/r1.out")
echo "read waiting during export-remove: $r"
[ "$r" = EIO ] || fail "the waiting read says '$r', want EIO once the export is removed"
for _ in $(seq 1 300); do kill -0 "$xp" 2> /dev/null || break; sleep 0.1; done
kill -0 "$xp" 2> /dev/null && fail "export-remove did not answer within 30 s"
wait "$xp" || fail "export-remove failed: $(cat "$tmp/rm.out")"
line=$(grep -m1 'the export is being removed and no path was usable' "$tmp/gw.log") ||
	fail "the drain was not logged"
echo "gateway: $line"
grep -q 'export e1: removed' "$tmp/gw.log" || fail "e1 not removed"

"$NBDPY" "$LIO" read "$tmp/e2.sock" 60 > "$tmp/r2.out" &
rp=$!
sleep 2
gw_stop_within 30
wait "$rp"
r=$(cat "$tmp/r2.out")
echo "read waiting during SIGTERM: $r"
[ "$r" = EIO ] || fail "the waiting read says '$r', want EIO before the daemon exits"
echo pass
