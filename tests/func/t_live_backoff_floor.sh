#!/usr/bin/env bash
# A path put aside for one path-related status is not an outage: with
# fast_io_fail_tmo = 0, a read that meets Internal Path Error (3/0) waits
# out the backoff (the gateway gives it at least two) and succeeds once
# the status is off, instead of failing with EIO at once (found by review:
# the 1 s backoff counted against fast_io_fail_tmo).  And the one-shot
# `nbd` command: SIGTERM with a read waiting on an ANA-inaccessible path
# ends within seconds (the drain), not after ctrl_loss_tmo (600 s).
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:floor
tgt_start a "" -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 0; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"
[ "$("$NBDPY" "$LIO" read "$S" 10)" = ok ] || fail "first read"
ctl a status 3 0 > /dev/null
"$NBDPY" "$LIO" read "$S" 30 > "$tmp/r.out" &
rp=$!
sleep 0.4
ctl a status off > /dev/null
wait "$rp"
r=$(cat "$tmp/r.out")
echo "fast_io_fail_tmo = 0, status 3 0 then off after 0.4 s: the read says $r"
[ "$r" = ok ] || fail "a transient path status on a live path failed the read: $r (want ok)"
gw_alive
gw_stop_within 30

# The one-shot command's SIGTERM with a read waiting for a usable path.
"$GW" nbd -t tcp -a 127.0.0.1 -s "$port" -n "$A" "unix:$tmp/n.sock" > "$tmp/nbd.log" 2>&1 &
np=$!
for _ in $(seq 1 200); do [ -S "$tmp/n.sock" ] && break; sleep 0.05; done
[ -S "$tmp/n.sock" ] || fail "nbd did not listen"
ctl a status 3 2 > /dev/null
"$NBDPY" "$LIO" read "$tmp/n.sock" 60 > "$tmp/r2.out" &
rp=$!
sleep 1.5
kill -TERM "$np"
for _ in $(seq 1 300); do kill -0 "$np" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$np" 2> /dev/null; then
	kill -KILL "$np"
	fail "nbd did not exit within 30 s of SIGTERM with a read waiting (ctrl_loss_tmo is 600 s)"
fi
wait "$np"
wait "$rp"
echo "nbd exited after SIGTERM; the waiting read says $(cat "$tmp/r2.out")"
ctl a status off > /dev/null
echo pass
