#!/usr/bin/env bash
# ctrl_loss_tmo = 5, reconnect_delay = 1: the only path of target t1 goes
# away for good (its target port stops listening and drops its
# connections).  Reads of its export wait, then fail with EIO about 5 s
# after the loss (asserted 5 s +- 1.5 s); the daemon stays up and the export
# of another target (t2, the other port) keeps working throughout, verified.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:loss-a
B=nqn.2026-01.io.nvmf-gateway:loss-b
tgt_start a "" -s 0 -s 0 --subsys "$A:32M" --subsys "$B:32M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 5; },
  { name = "t2"; subnqn = "$B";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 5; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; },
  { name = "e2"; target = "t2"; nsid = 1; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock $tmp/e2.sock" gw_start run "$tmp/gw.conf"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 1 > /dev/null || fail "e1 does not work at start"

# The other export keeps being verified while t1 is lost.
"$NBDPY" "$IO" verify "$tmp/e2.sock" 12 > "$tmp/v2.out" 2> "$tmp/v2.err" &
v2=$!
lose_port_time_error 'ctrl_loss_tmo expired'
[ "$err" = EIO ] || fail "e1 failed with $err, not EIO"
# ctrl_loss_tmo 5, judged at the reconnect attempts (every 1 s).
echo "$took >= 4 && $took <= 8" | bc -l | grep -q 1 || fail "path deleted $took s after the loss, not about 5 s (4 to 8)"
gw_alive
# Later I/O on e1 fails at once (every path deleted), not after a wait.
"$NBDPY" "$IO" first-error "$tmp/e1.sock" > "$tmp/e1b.out" || fail "e1 works again?"
read -r again err2 _ < "$tmp/e1b.out"
echo "e1 afterwards: $err2 in $again s"
# At once, not after another timeout: generous for a slow client.
[ "$err2" = EIO ] && echo "$again < 5" | bc -l | grep -q 1 || fail "e1 afterwards: $err2 after $again s"

wait "$v2" || { cat "$tmp/v2.out" "$tmp/v2.err"; fail "e2 saw errors while t1 was lost"; }
cat "$tmp/v2.out"
gw_alive
# The port comes back; the volume is re-attached by a reload (SIGHUP, as
# systemd's ExecReload sends it): e1 works again, e2 was never touched.
ctl a port 1 up > /dev/null
kill -HUP "$GW_PID"
ok=0
for _ in $(seq 1 40); do
	sleep 0.5
	if "$NBDPY" "$IO" verify "$tmp/e1.sock" 1 > /dev/null 2>&1; then ok=1; break; fi
done
[ "$ok" = 1 ] || { tail -20 "$tmp/gw.log"; fail "e1 does not work again after the port is back and a reload"; }
echo "e1 works again after the reload"
gw_alive
gw_stop
echo pass
