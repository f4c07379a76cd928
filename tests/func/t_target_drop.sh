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
# Bench's buffers are freed after a lost connection too (they were not:
# the teardown had zeroed the queue count the free loop read).  Valgrind,
# on the epoll backend: it cannot see the kernel fill io_uring buffers.
if command -v valgrind > /dev/null; then
	ctl drop-after 300
	NVMF_GATEWAY_REACTOR_BACKEND=epoll timeout -s KILL 300 valgrind -q --leak-check=full \
		--show-leak-kinds=definite --errors-for-leak-kinds=definite --error-exitcode=99 \
		"$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" -w randread -b 4k -d 4 -T 30 \
		> "$TGT_DIR/bench.out" 2>&1
	BENCH_RC=$?
	cat "$TGT_DIR/bench.out"
	[ "$BENCH_RC" != 99 ] || fail "bench leaks memory after a lost connection"
	expect_fail "drop after 300 commands under valgrind" "target closed the connection"
else
	echo "no valgrind: the leak check after a lost connection did not run"
fi
ctl drop # with nothing connected: still ok
kill -0 "$TGT_PID" || fail "target died"
tgt_finish
echo pass
