#!/usr/bin/env bash
# A Command Retry Delay cannot hold an I/O past its deadline.  A status
# with CRD picks CRDT1..3 from Identify Controller (100 ms units, up to
# 6553.5 s); the gateway used to wait whatever the controller said, so a
# hostile or buggy target held a read for hours.  The target says CRDT1 =
# 65535 and answers Internal Error (0/6, retryable) with CRD 1:
# - e1 (fast_io_fail_tmo = 2): the delay is cut to what is left of its 2 s
#   budget, then the read fails with EIO; the gateway logs both, and the
#   failure comes about 2 s after the first delay by its own clock;
# - e2 (both deadlines long, max_retries = 1): the delay is cut to the
#   gateway's maximum (5 s), the one retry fails, the read says EIO;
# - e3 (no deadline at all, max_retries = 100: 100 delays of 5 s): SIGTERM
#   while its read waits out a delay; the drain cuts the delay and the
#   daemon exits within 30 s (it used to wait out every retry).
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:crd-a
B=nqn.2026-01.io.nvmf-gateway:crd-b
tgt_start a "" -s 0 --subsys "$A:8M" --subsys "$B:8M"
port=$(head -1 "$tmp/a.ready")
ctl a crdt 65535 0 0 > /dev/null
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
      paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
      reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 2; },
    { name = "t2"; subnqn = "$B"; max_retries = 1;
      paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
      reconnect_delay = 1; ctrl_loss_tmo = 600; fast_io_fail_tmo = -1; },
    { name = "t3"; subnqn = "$B"; max_retries = 100;
      paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
      reconnect_delay = 1; ctrl_loss_tmo = -1; fast_io_fail_tmo = -1; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; },
            { name = "e2"; target = "t2"; nsid = 1; nbd = { listen = "unix:$tmp/e2.sock"; }; },
            { name = "e3"; target = "t3"; nsid = 1;
              nbd = { listen = "unix:$tmp/e3.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock $tmp/e2.sock $tmp/e3.sock" gw_start run "$tmp/gw.conf"
[ "$("$NBDPY" "$LIO" read "$tmp/e1.sock" 10)" = ok ] || fail "first read on e1"
[ "$("$NBDPY" "$LIO" read "$tmp/e2.sock" 10)" = ok ] || fail "first read on e2"

ctl a status 0 6 crd1 > /dev/null
r=$("$NBDPY" "$LIO" read "$tmp/e1.sock" 20)
echo "e1 (fast_io_fail_tmo = 2), CRDT1 6553.5 s: the read says $r"
[ "$r" = EIO ] || fail "e1: the read says $r, want EIO (held by a 6553.5 s retry delay?)"
cut=$(gw_at 'e1: read .* capped by its deadline') || true
end=$(gw_at 'e1: read .* failed: path 0 asks a retry delay of 6553.5 s (CRD 1) and its deadline has passed') || true
[ -n "$cut" ] && [ -n "$end" ] || fail "e1: no log line for the capped delay and the failure"
took=$(echo "$end - $cut" | bc -l)
echo "e1: by the gateway's clock, failed $took s after its first retry delay"
[ "$(echo "$took >= 1.9 && $took < 10" | bc -l)" = 1 ] ||
	fail "e1 failed $took s after the capped delay began (want about 2 s, its budget)"

r=$("$NBDPY" "$LIO" read "$tmp/e2.sock" 30)
echo "e2 (no deadline, max_retries 1), CRDT1 6553.5 s: the read says $r"
[ "$r" = EIO ] || fail "e2: the read says $r, want EIO after one retry 5 s later"
grep -q 'e2: read .* retried after 5.000 s, capped by the gateway.s maximum' "$tmp/gw.log" ||
	fail "e2: no log line for the delay capped at 5 s"
ctl a status off > /dev/null
[ "$("$NBDPY" "$LIO" read "$tmp/e2.sock" 10)" = ok ] || fail "e2 after the status is off"

ctl a status 0 6 crd1 > /dev/null
"$NBDPY" "$LIO" read "$tmp/e3.sock" 60 > "$tmp/e3.out" &
rp=$!
gw_wait 'e3: read .* capped by the gateway.s maximum' 1 30 > /dev/null ||
	fail "e3: its read did not meet the retry delay"
gw_alive
gw_stop_within 30
wait "$rp"
echo "e3 (no deadline, 100 retries of 5 s), SIGTERM during a delay: the daemon exited;" \
	"the read says $(cat "$tmp/e3.out")"
[ "$(cat "$tmp/e3.out")" != timeout ] || fail "e3: the read got no answer"
echo pass
