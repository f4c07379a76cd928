#!/usr/bin/env bash
# The control socket of `nvmf-gateway run` and its clients: mode 0600;
# status and stats as JSON (parsed with jq) and as tables; counters and
# latency percentiles move with the I/O done; reset TARGET reconnects the
# controller; a bad request gets {"error":...} on its own connection, which
# keeps working, and other connections are not disturbed; an over-long
# line is refused and skipped, and the connection goes on.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq nbdcopy python3

target_start nqn.2014-08.org.nvmf-gateway:ctl-a:64M nqn.2014-08.org.nvmf-gateway:ctl-b:32M:4096
cat > "$tmp/gw.conf" << EOF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = (
  { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:ctl-a"; reconnect_delay = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); },
  { name = "tb"; subnqn = "nqn.2014-08.org.nvmf-gateway:ctl-b";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = (
  { name = "a"; target = "ta"; nbd = { listen = "unix:$tmp/a.sock"; }; },
  { name = "b"; target = "tb"; nbd = { listen = "unix:$tmp/b.sock"; }; fuse = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
EOF
gw_start run "$tmp/gw.conf"

[ "$(stat -c %a "$ctl")" = 600 ] || fail "control socket mode $(stat -c %a "$ctl"), want 600"
echo "socket mode 600"

# status: JSON
"$GW" status -s "$ctl" -o json > "$tmp/status.json" || fail "status -o json"
python3 -m json.tool "$tmp/status.json" > /dev/null || fail "status is not JSON"
cat "$tmp/status.json"; echo
j() { jq -e -r "$1" "$tmp/status.json" > /dev/null || fail "status: $1"; }
j '.version | length > 0'
j '.uptime_s >= 0'
j '.state == "running"'
j '.exports_running == 2 and .exports_total == 2'
j '.targets | length == 2'
j '.targets[0].name == "ta" and .targets[0].state == "live"'
j '.targets[0].paths[0] | .transport == "tcp" and .traddr == "127.0.0.1" and .state == "live"'
j ".targets[0].paths[0].trsvcid == \"$port\""
j '.targets[0].paths[0] | .ana_state == "optimized" and .cntlid > 0 and .reconnects == 0'
j '.targets[0].paths[0] | has("in_flight") and has("retries") and has("errors")'
j '.exports[0] | .name == "a" and .kind == "nbd" and .target == "ta" and .nsid == 1'
j '.exports[0] | .state == "attached" and .size == 67108864 and .block_size == 512'
j '.exports[1] | .name == "b" and .kind == "nbd+fuse" and .fuse_file == true'
j '.exports[1] | .size == 33554432 and .block_size == 4096'

# status: table
"$GW" status -s "$ctl" > "$tmp/status.txt" || fail "status"
cat "$tmp/status.txt"
grep -q '^TARGET ' "$tmp/status.txt" || fail "table: no target header"
grep -q '^EXPORT ' "$tmp/status.txt" || fail "table: no export header"
grep -Eq '^ta +live +0 +tcp +127\.0\.0\.1:'"$port"' +live +optimized' "$tmp/status.txt" ||
	fail "table: target ta's path line"
grep -Eq '^b +nbd\+fuse +tb +1 +attached +32\.0MiB' "$tmp/status.txt" || fail "table: export b"
# The backend and why, in the table as in JSON; a suite that forces one
# (run.sh BUILD SUITE epoll) must see it named with its reason.
be=$(jq -r .reactor_backend "$tmp/status.json"); why=$(jq -r .reactor_backend_why "$tmp/status.json")
grep -Fqx "reactor backend: $be ($why)" "$tmp/status.txt" || fail "table: no 'reactor backend: $be ($why)'"
case ${NVMF_GATEWAY_REACTOR_BACKEND:-auto} in
epoll) [ "$be/$why" = "epoll/NVMF_GATEWAY_REACTOR_BACKEND=epoll" ] ||
	fail "forced epoll, status says $be ($why)" ;;
io_uring) [ "$be" = io_uring ] || fail "forced io_uring, status says $be ($why)" ;;
esac
# -c FILE finds the socket in the configuration
"$GW" status -c "$tmp/gw.conf" | grep -q '^a ' || fail "status -c FILE"

# I/O moves the counters; stats has percentiles
head -c 8M /dev/urandom > "$tmp/in"
nbdcopy "$tmp/in" "nbd+unix:///a?socket=$tmp/a.sock" || fail "nbdcopy in"
nbdcopy "nbd+unix:///a?socket=$tmp/a.sock" "$tmp/out" || fail "nbdcopy out"
cmp -n 8388608 "$tmp/in" "$tmp/out" || fail "read back differs"
"$GW" stats -s "$ctl" -o json > "$tmp/stats.json" || fail "stats -o json"
cat "$tmp/stats.json"; echo
s() { jq -e -r "$1" "$tmp/stats.json" > /dev/null || fail "stats: $1"; }
s '.exports[0].name == "a" and .exports[0].writes > 0 and .exports[0].reads > 0'
s '.exports[0].write_bytes >= 8388608 and .exports[0].read_bytes >= 8388608'
s '.exports[0].errors == 0 and .exports[0].in_flight == 0'
s '.exports[0].write_latency_us | .p50 > 0 and .p50 <= .p95 and .p95 <= .p99 and .p99 <= ."p99.9"'
s '.exports[0].read_latency_us | .p50 > 0 and .p50 <= .p99'
s '.exports[1].reads == 0 and .exports[1].writes == 0'
s '.targets[0].paths[0].writes > 0 and .targets[0].paths[0].write_bytes >= 8388608'
s '.targets[1].paths[0].writes == 0'
"$GW" stats -s "$ctl" > "$tmp/stats.txt" || fail "stats"
cat "$tmp/stats.txt"
grep -Eq '^a +attached +[1-9][0-9]* +[1-9][0-9]* +64\.0MiB +8\.0MiB +0 ' "$tmp/stats.txt" ||
	fail "stats table: export a"

# reset TARGET: the controller reconnects, I/O works again
cntlid=$(jq -r '.targets[0].paths[0].cntlid' "$tmp/status.json")
"$GW" reset ta -s "$ctl" | grep -qx ok || fail "reset ta"
wait_for 20 'test "$(st .targets[0].paths[0].reconnects)" -ge 1' || fail "no reconnect after reset"
wait_for 20 'test "$(st .targets[0].paths[0].state)" = live' || fail "not live after reset"
echo "reset: cntlid $cntlid -> $(st '.targets[0].paths[0].cntlid'), reconnects $(st '.targets[0].paths[0].reconnects')"
[ "$(st '.targets[1].paths[0].reconnects')" = 0 ] || fail "reset of ta touched tb"
nbdcopy "nbd+unix:///a?socket=$tmp/a.sock" "$tmp/out2" || fail "I/O after reset"
cmp -n 8388608 "$tmp/in" "$tmp/out2" || fail "data after reset"
"$GW" reset nosuch -s "$ctl" 2> "$tmp/err" && fail "reset of an unknown target succeeded"
grep -q 'no target named "nosuch"' "$tmp/err" || fail "reset nosuch: $(cat "$tmp/err")"

# bad requests: an error each, on the same connection, which then works
raw 'garbage' '{"cmd":1}' '[1,2]' '{"cmd":"frobnicate"}' '{"cmd":"export-remove"}' \
	'{"cmd":"status"}' > "$tmp/raw.txt" || fail "raw requests"
cut -c1-200 "$tmp/raw.txt"
[ "$(wc -l < "$tmp/raw.txt")" = 6 ] || fail "one reply per request"
sed -n 1p "$tmp/raw.txt" | jq -e '.error | startswith("bad JSON")' > /dev/null || fail "garbage"
sed -n 2p "$tmp/raw.txt" | jq -e '.error | contains("\"cmd\"")' > /dev/null || fail "cmd not a string"
sed -n 3p "$tmp/raw.txt" | jq -e '.error' > /dev/null || fail "an array"
sed -n 4p "$tmp/raw.txt" | jq -e '.error | startswith("unknown command")' > /dev/null || fail "unknown"
sed -n 5p "$tmp/raw.txt" | jq -e '.error | contains("needs \"name\"")' > /dev/null || fail "no name"
sed -n 6p "$tmp/raw.txt" | jq -e '.state == "running"' > /dev/null || fail "status after errors"
# another connection is fine too
[ "$(st .state)" = running ] || fail "a new connection after bad requests"

# an over-long line: refused, skipped to its newline, the connection goes on
python3 - "$ctl" << 'PY' || fail "over-long line"
import socket, sys, threading
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rb")
# the server answers after 64 KiB, while the rest is still being sent
t = threading.Thread(target=lambda: s.sendall(b"x" * 200000 + b'\n{"cmd":"status"}\n'))
t.start()
reply = f.readline()
assert b"over" in reply and b"error" in reply, reply
print("over-long line:", reply.decode().strip())
reply = f.readline()
assert b'"state":"running"' in reply, reply[:200]
t.join()
PY
# a client that sent half a request does not block others
python3 - "$ctl" << 'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"cmd":')
time.sleep(30)
PY
idle=$!
sleep 0.5
[ "$(st .exports_running)" = 2 ] || fail "status with a half-sent request open elsewhere"
kill "$idle"
wait "$idle" 2> /dev/null

# the CLI reports an unreachable socket
"$GW" status -s "$tmp/nothing.sock" 2> "$tmp/err" && fail "status on a missing socket"
grep -q "cannot reach the gateway" "$tmp/err" || fail "message: $(cat "$tmp/err")"

gw_stop
[ ! -e "$ctl" ] || fail "control socket left behind"
echo "control: OK"
