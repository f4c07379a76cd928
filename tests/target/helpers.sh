# Shell helpers for tests that run build/nvmf-test-target (sourced by
# tests/func/t_target_*.sh).  Each test starts its own target on a free
# loopback port and stops exactly that pid.
: "${BUILD:?run by tests/func/run.sh}"
TGT="$BUILD/nvmf-test-target"
: "${TOP:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"
TGT_PID=
TGT_DIR=$(mktemp -d /tmp/gw-tgt.XXXXXX)
cleanup_fn rm -rf "$TGT_DIR"
cleanup_fn tgt_stop
_tgt_log_tail() { [ -z "$TGT_PID" ] || tail -20 "$TGT_DIR/target.log"; }
fail_show _tgt_log_tail

# tgt_start ARGS...: a target on 127.0.0.1 with a kernel-chosen port; sets
# TGT_PID, TGT_PORT and TGT_CTL.  Its log is $TGT_DIR/target.log.
tgt_start() {
	[ -x "$TGT" ] || fail "$TGT not built"
	rm -f "$TGT_DIR/port"
	TGT_CTL="$TGT_DIR/ctl.sock"
	"$TGT" -a 127.0.0.1 -s 0 --ready-file "$TGT_DIR/port" --control "$TGT_CTL" "$@" \
		>> "$TGT_DIR/target.log" 2>&1 &
	TGT_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$TGT_DIR/port" ] && break
		kill -0 "$TGT_PID" 2>/dev/null || fail "target exited at start: $(tail -3 "$TGT_DIR/target.log")"
		sleep 0.05
	done
	[ -s "$TGT_DIR/port" ] || fail "target did not start listening"
	TGT_PORT=$(head -1 "$TGT_DIR/port")
	echo "target pid $TGT_PID on 127.0.0.1:$TGT_PORT"
}

tgt_stop() {
	if [ -n "$TGT_PID" ]; then
		kill "$TGT_PID" 2>/dev/null
		wait "$TGT_PID" 2>/dev/null
		TGT_PID=
	fi
}

# tgt_finish: stops the target and fails the test unless it exited 0 on
# SIGTERM (a sanitizer report or a crash would not).
tgt_finish() {
	local st
	kill "$TGT_PID" 2>/dev/null || fail "target already gone"
	wait "$TGT_PID"
	st=$?
	TGT_PID=
	[ "$st" = 0 ] || { tail -30 "$TGT_DIR/target.log"; fail "target exit status $st"; }
	echo "target stopped cleanly"
}

# ctl COMMAND...: one control command; fails the test unless answered "ok".
ctl() {
	local out
	out=$("$TGT" --ctl "$TGT_CTL" "$@") || fail "control '$*': $out"
	echo "control '$*': $out" >&2
	printf '%s\n' "$out"
}

# gw_bench NQN ARGS...: the gateway's bench against the target, output in
# $TGT_DIR/bench.out, exit status in BENCH_RC.
gw_bench() {
	local nqn=$1
	shift
	timeout -s KILL 120 "$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$nqn" "$@" \
		> "$TGT_DIR/bench.out" 2>&1
	BENCH_RC=$?
	cat "$TGT_DIR/bench.out"
}
