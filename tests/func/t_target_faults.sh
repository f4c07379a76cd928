#!/usr/bin/env bash
# Every fault knob of nvmf-test-target, set through its control socket, has
# its effect on the gateway's bench: the mapped error and exit 1, a logged
# digest or protocol error and a closed connection (never a crash), refused
# connects, delayed completions, ANA states.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:faults
tgt_start --subsys "$A:16M"

expect_fail() { # WHAT PATTERN: bench failed with exit 1 (not a crash) and said PATTERN
	[ "$BENCH_RC" = 1 ] || fail "$1: bench exit $BENCH_RC, want 1"
	grep -q -- "$2" "$TGT_DIR/bench.out" || fail "$1: no '$2' in the gateway's output"
	echo "ok: $1"
}
expect_ok() {
	[ "$BENCH_RC" = 0 ] || fail "$1: bench exit $BENCH_RC, want 0"
	echo "ok: $1"
}

# A status with DNR: the I/O fails at once with the mapped errno.
ctl status 0 0x81 dnr
gw_bench "$A" -w randwrite -b 4k -d 4 -T 1
expect_fail "status Capacity Exceeded, dnr" "failed: No space left on device"
grep -q "errors: " "$TGT_DIR/bench.out" || fail "no error count"
ctl status 1 0x80 dnr 1.0
gw_bench "$A" -w randread -b 4k -d 1 -T 1
expect_fail "status sct 1 sc 0x80 (Conflicting Attributes)" "failed: Invalid argument"
ctl status off
gw_bench "$A" -w randrw -b 4k -d 4 -T 1 --verify
expect_ok "status off again"

# Digest corruption on an I/O queue: the gateway logs it and closes.
ctl corrupt hdgst io
gw_bench "$A" -w randread -b 4k -d 4 -T 1 -g
expect_fail "corrupt header digest" "header digest mismatch"
ctl corrupt ddgst io
gw_bench "$A" -w randread -b 4k -d 4 -T 1 -G
expect_fail "corrupt data digest" "data digest mismatch"

# Malformed PDUs: a protocol error, the connection closed, no crash.
for kind in "type:unexpected PDU type 0x0a" "hlen:with hlen 20" "cid:not in flight" \
	"plen:plen 4096"; do
	ctl malformed "${kind%%:*}"
	gw_bench "$A" -w randread -b 4k -d 4 -T 1
	expect_fail "malformed ${kind%%:*}" "protocol error: .*${kind#*:}"
done
grep -q "host sent H2CTermReq" "$TGT_DIR/target.log" || fail "gateway sent no TermReq"

# Refused connects, then accepted again.
ctl refuse 3600
gw_bench "$A" -w randread -b 4k -T 1
expect_fail "refuse" "Connection refused"
ctl refuse 0
gw_bench "$A" -w randread -b 4k -T 1
expect_ok "accepting again"

# ANA states of the namespace's group on this port.
ctl ana "$A" 1 inaccessible
gw_bench "$A" -w randread -b 4k -T 1
expect_fail "ANA inaccessible" "failed: Link has been severed"
ctl ana "$A" 1 change
gw_bench "$A" -w randread -b 4k -T 1
expect_fail "ANA change" "failed: Resource temporarily unavailable"
ctl ana "$A" 1 non-optimized
gw_bench "$A" -w randread -b 4k -T 1
expect_ok "ANA non-optimized carries I/O"
ctl ana "$A" 1 optimized

# Delayed completions: every I/O takes at least the delay (a lower bound
# only, so a slow machine cannot fail it).
ctl delay 50
gw_bench "$A" -w randread -b 4k -d 1 -T 1
expect_ok "delay 50 ms"
p50=$(sed -n 's/.*lat(us) avg [0-9.]* p50 \([0-9]*\).*/\1/p' "$TGT_DIR/bench.out")
[ -n "$p50" ] && [ "$p50" -ge 50000 ] || fail "delay 50 ms: p50 ${p50:-?} us"
ctl delay 0

# Bad control commands are refused with a reason.
out=$("$TGT" --ctl "$TGT_CTL" status 9 9) && fail "bad status accepted"
case $out in err*) ;; *) fail "bad command answer: $out" ;; esac
out=$("$TGT" --ctl "$TGT_CTL" ana "$A" 7 optimized) && fail "bad nsid accepted"
case $out in "err no namespace 7"*) ;; *) fail "bad nsid answer: $out" ;; esac

# The same knobs from the command line.
stats=$(ctl stats)
tgt_finish
tgt_start --subsys "$A:16M" --status 0:0x81:dnr
gw_bench "$A" -w randread -b 4k -T 1
expect_fail "--status on the command line" "failed: No space left on device"
tgt_finish

# Two ports of one subsystem (two paths to the same namespace): ANA state is
# per port, as the Linux target keeps it per port and group.
tgt_start --subsys "$A:16M" -s 0
PORT2=$(sed -n 2p "$TGT_DIR/port")
[ -n "$PORT2" ] || fail "no second port"
ctl ana "$A" 1 inaccessible 2
gw_bench "$A" -w randread -b 4k -T 1
expect_ok "port 1 still optimized"
TGT_PORT1=$TGT_PORT
TGT_PORT=$PORT2
gw_bench "$A" -w randread -b 4k -T 1
expect_fail "port 2 inaccessible" "failed: Link has been severed"
TGT_PORT=$TGT_PORT1
out=$("$TGT" --ctl "$TGT_CTL" ana "$A" 1 optimized 3) && fail "port 3 accepted"
case $out in "err no port 3"*) ;; *) fail "port 3 answer: $out" ;; esac
kill -0 "$TGT_PID" || fail "target died"
echo "$stats"
tgt_finish
echo pass
