#!/usr/bin/env bash
# bench's "with the target" figure (nvmf_queue.target_ns, measured by the
# TCP transport from the reap of our last send for a command to the
# target's next PDU for it): never more than an I/O's own latency, at
# least what the target held each command (a delay fault), and right
# when a write's data goes in several R2Ts.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:target-time

# run NAME MIN_US BENCH_ARGS...: bench, then its JSON checked: one command
# per I/O, with the target at least MIN_US and at most the mean latency.
run() {
	local name=$1 min=$2 j
	shift 2
	gw_bench "$A" -o json -T 1 --size 8M "$@"
	[ "$BENCH_RC" = 0 ] || fail "$name: bench exit $BENCH_RC"
	j=$(grep '^{' "$TGT_DIR/bench.out" | tail -1)
	[ -n "$j" ] || fail "$name: no JSON line"
	python3 - "$name" "$min" "$j" << 'PY' || fail "$name: see above"
import json, sys
name, low, d = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
t, mean, cmds = d["target_us"], d["lat_us"]["mean"], d["cmds_per_io"]
print(f"{name}: {d['ios']} I/Os, latency {mean:.1f} us, with the target {t:.1f} us, {cmds:.2f} commands each")
ok = d["ios"] > 0 and cmds == 1.0 and low <= t <= mean and t > 0
if not ok:
    print(f"{name}: want {low:.0f} <= with the target <= latency, one command per I/O")
sys.exit(0 if ok else 1)
PY
}

tgt_start --subsys "$A:16M"
run "write" 0 -w write -b 128k -d 4
run "read" 0 -w read -b 128k -d 4
run "randread 4k" 0 -w randread -b 4k -d 8
# Held 30 ms before it completes: all of it is the target's.
ctl delay 30 > /dev/null
run "write, delayed" 30000 -w write -b 128k -d 2
run "read, delayed" 30000 -w read -b 128k -d 2
ctl clear > /dev/null
tgt_finish

# Eight R2Ts per write: each is a turn of the target's, our data between.
tgt_start --subsys "$A:16M" --r2t-size 16384
run "write, 16K R2Ts" 0 -w write -b 128k -d 4
ctl delay 30 > /dev/null
run "write, 16K R2Ts, delayed" 30000 -w write -b 128k -d 2
tgt_finish
echo "PASS"
