#!/usr/bin/env bash
# Connections dropped by nvmf-test-target (after N commands, and at once in
# the middle of a run): with no reconnect yet, bench must fail with a clear
# error and exit 1, never crash.  Three rounds of each, because the gateway's
# teardown after a lost connection races (see the report of this test).
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:drop
tgt_start --subsys "$A:16M"

expect_fail() { # WHAT PATTERN
	[ "$BENCH_RC" = 1 ] || fail "$1: bench exit $BENCH_RC, want 1"
	grep -q -- "$2" "$TGT_DIR/bench.out" || fail "$1: no '$2' in the gateway's output"
	echo "ok: $1"
}

for round in 1 2 3; do
	ctl drop-after 300
	gw_bench "$A" -w randread -b 4k -d 4 -T 3
	expect_fail "drop after 300 commands (round $round)" "target closed the connection"
	grep -q "drop-after count reached" "$TGT_DIR/target.log" || fail "target did not log the drop"

	timeout -s KILL 120 "$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" -w randrw \
		-b 4k -d 4 -T 60 > "$TGT_DIR/bench.out" 2>&1 &
	bpid=$!
	for _ in $(seq 1 400); do
		case $(ctl stats) in *" conns=2 "*) break ;; esac
		sleep 0.05
	done
	case $(ctl stats) in *" conns=2 "*) ;; *) fail "bench never connected" ;; esac
	ctl drop
	wait "$bpid"
	BENCH_RC=$?
	cat "$TGT_DIR/bench.out"
	expect_fail "drop now (round $round)" "target closed the connection"
done
ctl drop # with nothing connected: still ok
kill -0 "$TGT_PID" || fail "target died"
tgt_finish
echo pass
