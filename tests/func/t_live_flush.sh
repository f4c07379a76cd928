#!/usr/bin/env bash
# Issue 14, defect 2: a FLUSH against an ANA-inaccessible path must wait,
# without spinning, for a usable path within the same deadline as a
# write, never re-send at once.  A target with a volatile write cache:
# write 4 KiB, set the namespace inaccessible, flush.  Before the fix
# flush_step re-sent the flush at once, forever (the path's error counter
# climbed by tens of thousands a second) and the NBD FLUSH was never
# answered.  Now: while it waits the target sees at most a few flushes a
# second; once the namespace is optimized again the flush succeeds; left
# inaccessible, it fails with EIO after fast_io_fail_tmo by the gateway's
# own clock; answered with ANA Inaccessible by the target itself (no
# event), it is re-sent about once a second; SIGTERM then ends the daemon.
set -u
. "$TOP/tests/func/live/lib.sh"
need curl

A=nqn.2026-01.io.nvmf-gateway:liveflush
mkdir -p "$tmp/disk"
tgt_start a "" --persist "$tmp/disk" --vwc -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
mport=$(free_port)
URL="http://127.0.0.1:$mport/metrics"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; metrics = "tcp:127.0.0.1:$mport"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 4; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"
errors() { metric "$URL" nvmf_gateway_path_errors_total 'target="t1",path="0"'; }

# 1: inaccessible for 2 s, then optimized: the flush waits and succeeds.
[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "write"
ctl a ana "$A" 1 inaccessible > /dev/null
e0=$(errors)
"$NBDPY" "$LIO" flush "$S" 30 > "$tmp/f.out" &
fp=$!
sleep 2
e1=$(errors)
ctl a ana "$A" 1 optimized > /dev/null
wait "$fp"
r=$(cat "$tmp/f.out")
echo "flush while inaccessible, then optimized: $r; path errors during the wait: $((e1 - e0))"
[ "$r" = ok ] || fail "the flush was answered '$r', want ok once the path is optimized again"
[ $((e1 - e0)) -le 10 ] || fail "the flush was re-sent $((e1 - e0)) times in 2 s: spinning"

# 2: inaccessible for good: EIO after fast_io_fail_tmo (4 s), measured by
# the gateway's log.
[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "write"
ctl a ana "$A" 1 inaccessible > /dev/null
e0=$(errors)
r=$("$NBDPY" "$LIO" flush "$S" 60)
e1=$(errors)
echo "flush with the path left inaccessible: $r; path errors: $((e1 - e0))"
[ "$r" = EIO ] || fail "want EIO at the deadline, got '$r'"
[ $((e1 - e0)) -le 20 ] || fail "the flush was re-sent $((e1 - e0)) times: spinning"
line=$(grep 'flush of 0 bytes at 0 failed with EIO after waiting' "$tmp/gw.log" | tail -1)
[ -n "$line" ] || fail "the deadline was not logged"
echo "gateway: $line"
waited=$(echo "$line" | sed -n 's/.*after waiting \([0-9.]*\) s.*/\1/p')
awk -v w="$waited" 'BEGIN { exit !(w >= 3.9 && w <= 10) }' ||
	fail "the flush failed after $waited s, want about 4 s"

ctl a ana "$A" 1 optimized > /dev/null
sleep 1

# 3: no event this time: the target answers the flush itself with ANA
# Inaccessible (the log still says optimized).  The flush is re-sent
# about once a second (each re-read of the log finds nothing new), not
# at once, and succeeds when the status goes off.
[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "write"
ctl a status 3 2 > /dev/null
e0=$(errors)
"$NBDPY" "$LIO" flush "$S" 30 > "$tmp/f.out" &
fp=$!
sleep 1.5 # well inside fast_io_fail_tmo (4 s), which counts from the first answer
e1=$(errors)
ctl a status off > /dev/null
wait "$fp"
r=$(cat "$tmp/f.out")
echo "flush answered ANA Inaccessible for 1.5 s, then ok: $r; path errors: $((e1 - e0))"
[ "$r" = ok ] || fail "the flush says '$r', want ok once the status is off"
[ $((e1 - e0)) -ge 1 ] || fail "the target's status was never seen: test broken"
[ $((e1 - e0)) -le 10 ] || fail "the flush was re-sent $((e1 - e0)) times in 1.5 s: spinning"

[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "write after recovery"
r=$("$NBDPY" "$LIO" flush "$S" 20)
[ "$r" = ok ] || fail "flush after recovery: $r"
gw_alive
gw_stop_within 30
echo pass
