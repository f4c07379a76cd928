#!/usr/bin/env bash
# A namespace removed while the gateway stops: the stop takes the export
# down, the namespace event does not take it down a second time.  A read
# is in flight (the target delays it), SIGTERM starts the drain, then the
# target removes the namespace and sends its event.  Before the fix the
# event's takedown found no exporter left on the export (the stop had
# taken them) and freed its volume at once, under the NBD connection still
# draining the read: a use-after-free (ASan: heap-use-after-free in
# nio_done), logged as "export e1: its namespace was removed; taking the
# export down" after "stopping".
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:nsgonestop
tgt_start a "" -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; io_timeout = 30; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
[ "$("$NBDPY" "$LIO" read "$tmp/e1.sock" 10)" = ok ] || fail "first read"

ctl a delay 6000 > /dev/null
"$NBDPY" "$LIO" read "$tmp/e1.sock" 60 > "$tmp/r1.out" &
rp=$!
sleep 1
kill -TERM "$GW_PID"
gw_wait 'gateway: .*stopping' 1 10 > /dev/null || true
ctl a ns-remove "$A" 1 > /dev/null
for _ in $(seq 1 400); do kill -0 "$GW_PID" 2> /dev/null || break; sleep 0.1; done
kill -0 "$GW_PID" 2> /dev/null && fail "the gateway did not exit within 40 s of SIGTERM"
st=0
wait "$GW_PID" || st=$?
GW_PID=
wait "$rp"
echo "read in flight at the stop: $(cat "$tmp/r1.out")"
grep -E 'AddressSanitizer|runtime error' "$tmp/gw.log" && fail "sanitizer report"
[ $st = 0 ] || fail "gateway exit status $st after SIGTERM"
grep -n 'namespace was removed\|export e1: removed\|state .*stopping\|stopping' "$tmp/gw.log" | head
grep -q 'export e1: its namespace was removed; taking the export down$' "$tmp/gw.log" &&
	fail "the namespace event took the export down a second time during the stop"
# The event did arrive during the stop (else this test proved nothing).
grep -q 'export e1: its namespace was removed; the stop takes the export down' "$tmp/gw.log" ||
	fail "the namespace event was not seen during the stop"
echo pass
