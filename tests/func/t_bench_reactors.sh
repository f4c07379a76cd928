#!/usr/bin/env bash
# bench --reactors N: each reactor drives its own queues and its own slice
# of the region, and the session's reactor sums them.  Checked against
# nvmf-test-target: every reactor does I/O and --verify finds every block
# as written; more reactors than queues is refused; SIGINT and a dropped
# connection end the run with a report or an error, never a hang.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:bench-reactors
tgt_start --subsys "$A:32M"

# check NAME PY: the last JSON line, as d, must make PY true.
check() {
	local j
	j=$(grep '^{' "$TGT_DIR/bench.out" | tail -1)
	[ -n "$j" ] || fail "$1: no JSON line"
	python3 - "$1" "$2" "$j" << 'PY' || fail "$1: see above"
import json, sys
name, cond, d = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print(f"{name}: {d['queues']} queues on {d['reactors']} reactors, I/Os per reactor {d['reactor_ios']},"
      f" {d['checked']} blocks checked, {d['mismatches']} mismatches, {d['errors']} errors")
ok = eval(" ".join(cond.split()))
if not ok:
    print(f"{name}: want {cond}")
sys.exit(0 if ok else 1)
PY
}

gw_bench "$A" -o json -T 1 --reactors 2 -w randrw -b 4k -d 8 --verify --size 8M
[ "$BENCH_RC" = 0 ] || fail "2 reactors, verify: exit $BENCH_RC"
check "2 reactors, verify" 'd["reactors"] == 2 and d["queues"] == 2 and all(n > 0 for n in d["reactor_ios"])
    and d["mismatches"] == 0 and d["checked"] > 0 and sum(d["reactor_ios"]) == d["ios"]'

# Queues shared out unevenly (reactor 0 gets queues 0 and 2), a write
# region that does not divide evenly into the slices.
gw_bench "$A" -o json -T 1 --reactors 2 -j 3 -w write -b 128k -d 4 --verify --size 8320k
[ "$BENCH_RC" = 0 ] || fail "2 reactors, 3 queues: exit $BENCH_RC"
check "2 reactors, 3 queues" 'd["reactors"] == 2 and d["queues"] == 3 and all(n > 0 for n in d["reactor_ios"])
    and d["mismatches"] == 0'

# nvme-cli's -i still sets the queues (one reactor drives both).
gw_bench "$A" -o json -T 1 -i 2 -w randread -b 4k -d 4
[ "$BENCH_RC" = 0 ] || fail "-i 2: exit $BENCH_RC"
check "-i 2" 'd["queues"] == 2 and d["reactors"] == 1'

# Dropped while both reactors fill the region: errors, exit 1, one report.
ctl drop-after 60 > /dev/null
gw_bench "$A" -o json -T 5 --reactors 2 -w randrw -b 4k -d 8 --verify --size 8M --io-timeout 5000
ctl clear > /dev/null
[ "$BENCH_RC" = 1 ] || fail "dropped in the fill: exit $BENCH_RC, want 1"
n=$(grep -c '^{' "$TGT_DIR/bench.out")
[ "$n" = 1 ] || fail "dropped in the fill: $n reports, want 1"
check "dropped in the fill" 'd["errors"] > 0'

gw_bench "$A" -T 1 --reactors 3 -j 2
[ "$BENCH_RC" = 1 ] || fail "3 reactors on 2 queues: exit $BENCH_RC, want 1"
grep -q "3 reactors need 3 queues" "$TGT_DIR/bench.out" || fail "3 reactors on 2 queues: no message"

# SIGINT ends every reactor's run: a report, exit 0.
timeout -s KILL 60 "$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" -o json -T 60 \
	--reactors 2 -w randread -b 4k -d 8 > "$TGT_DIR/bench.out" 2>&1 &
pid=$!
sleep 2
kill -INT $pid
wait $pid
rc=$?
cat "$TGT_DIR/bench.out"
[ $rc = 0 ] || fail "SIGINT: exit $rc"
check "SIGINT" 'd["seconds"] < 30 and all(n > 0 for n in d["reactor_ios"])'

# The connection dropped under both reactors: errors, exit 1, no hang.
timeout -s KILL 60 "$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" -o json -T 30 \
	--reactors 2 -w randwrite -b 4k -d 8 --io-timeout 5000 > "$TGT_DIR/bench.out" 2>&1 &
pid=$!
sleep 2
ctl drop > /dev/null
wait $pid
rc=$?
tail -5 "$TGT_DIR/bench.out"
[ $rc = 1 ] || fail "connection dropped: exit $rc, want 1"
check "connection dropped" 'd["errors"] > 0'
tgt_finish
echo "PASS"
