#!/usr/bin/env bash
# QoS between two exports of one target (two namespaces of one test-target
# subsystem): e1 capped at 300 IOPS, e2 not; fio drives both at once for 5 s
# (after a 1 s ramp that absorbs e1's burst).  e1 must run at no more than
# 10% above its limit (what the limiter is for), and at least half of it
# or of what the unlimited e2 reached (fio's rates are the client's clock: on a busy machine the client
# may not reach the limit at all).  That e2 was not held back is the
# gateway's own counter: only e1's I/O waited (qos_delayed_total).
set -u
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
LIMIT=300
tmp=$(mktemp -d /tmp/gw-qos.XXXXXX)
tpid=''
cleanup_fn rm -rf "$tmp"
cleanup_fn stop_var tpid

"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:qos:64M:512:2 \
	--ready-file "$tmp/ready" > "$tmp/target.log" 2>&1 &
tpid=$!
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
[ -n "$port" ] || fail "the test target did not start"

cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; metrics = "unix:$tmp/metrics.sock"; };
targets = ( { name = "t1"; subnqn = "nqn.2014-08.org.nvmf-gateway:qos";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = (
  { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; };
    qos = { iops = $LIMIT; }; },
  { name = "e2"; target = "t1"; nsid = 2; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock $tmp/e2.sock $tmp/metrics.sock" gw_start run "$tmp/gw.conf"

# e1 keeps 32 I/Os queued (~100 ms at its limit): on a busy machine the
# client itself may stall, and the limiter can only give what is asked.
common=(--ioengine=nbd --rw=randread --bs=4k --iodepth=8 --time_based --runtime=5
	--ramp_time=1 --size=32M --group_reporting=0)
fio --output-format=json --output="$tmp/fio.json" \
	--name=e1 "${common[@]}" --iodepth=32 --uri="nbd+unix:///e1?socket=$tmp/e1.sock" \
	--name=e2 "${common[@]}" --uri="nbd+unix:///e2?socket=$tmp/e2.sock" ||
	{ cat "$tmp/fio.json"; fail "fio"; }
read -r capped free < <(python3 -c '
import json, sys
jobs = {j["jobname"]: j for j in json.load(open(sys.argv[1]))["jobs"]}
for n in ("e1", "e2"):
    assert jobs[n]["error"] == 0, n
print(jobs["e1"]["read"]["iops"], jobs["e2"]["read"]["iops"])' "$tmp/fio.json") ||
	fail "fio output"
echo "capped e1: $capped IOPS (limit $LIMIT); uncapped e2: $free IOPS"
python3 -c '
import sys
capped, free, limit = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
ok = True
# The client sets the pace when it cannot reach the limit at all: e2,
# unlimited, shows what it could do.
floor = 0.5 * min(limit, free)
if capped > 1.10 * limit or capped < floor:
    print(f"e1 at {capped:.0f} IOPS: not between {floor:.0f} and {1.10 * limit:.0f}"); ok = False
sys.exit(0 if ok else 1)' "$capped" "$free" "$LIMIT" || fail "QoS figures"

m=$(curl -fsS --unix-socket "$tmp/metrics.sock" http://x/metrics) || fail "scrape"
d1=$(echo "$m" | sed -n 's/^nvmf_gateway_export_qos_delayed_total{export="e1"} //p')
d2=$(echo "$m" | sed -n 's/^nvmf_gateway_export_qos_delayed_total{export="e2"} //p')
echo "qos_delayed: e1 $d1, e2 $d2"
[ -n "$d1" ] && [ "$d1" -gt 0 ] || fail "e1's I/O never waited"
[ "$d2" = 0 ] || fail "e2's I/O waited for QoS"
gw_stop

# The quick command takes the same limit: nbd --mem --qos-iops.
gw_start nbd --mem 16M --qos-iops 200 "unix:$tmp/q.sock"
fio --output-format=json --output="$tmp/q.json" --name=q "${common[@]}" --runtime=3 \
	--uri="nbd+unix:///?socket=$tmp/q.sock" || fail "fio on nbd --mem"
q=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"])' \
	"$tmp/q.json") || fail "fio output"
echo "nbd --qos-iops 200: $q IOPS"
# Never above the limit; below it only as far as a busy client explains.
python3 -c 'import sys; q = float(sys.argv[1]); sys.exit(not 100 <= q <= 220)' "$q" ||
	fail "nbd --qos-iops 200 ran at $q IOPS"
gw_stop
echo "qos: OK"
