#!/usr/bin/env bash
# Connection limits (issue 16): a Unix listener with its own
# nbd.max_connections = 2 and a TCP listener under gateway.max_connections
# = 2.  The third client on each is closed before any handshake byte, with
# one log line naming it (uid and pid for Unix) and why; the first two
# still work, and once one leaves a new client gets in.  The buffer budget
# is 1M here, below one 32 MiB request: such requests still go through,
# one at a time, over two connections at once.
set -u
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
export PATH="/usr/bin:$PATH"
/usr/bin/python3 -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"
tmp=$(mktemp -d /tmp/gw-connlimit.XXXXXX)
tpid=''
cleanup_fn rm -rf "$tmp"
cleanup_fn stop_var tpid
t0=$(date +%s)

"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:cl-a:16M \
	--ready-file "$tmp/ready" > "$tmp/target.log" 2>&1 &
tpid=$!
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
[ -n "$port" ] || fail "the test target did not start"
nbdport=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control";
  max_connections = 2; buffer_budget = "1M"; };
targets = ( { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:cl-a";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = (
  { name = "a"; target = "ta"; nsid = 1;
    nbd = { listen = "unix:$tmp/a.sock"; max_connections = 2; }; },
  { name = "t"; target = "ta"; nsid = 1; nbd = { listen = "tcp:127.0.0.1:$nbdport"; }; } );
CONF
"$GW" check -c "$tmp/gw.conf" || fail "check"
SOCKS="$tmp/a.sock" gw_start run "$tmp/gw.conf"
wait_for 20 'grep -q "export t: NBD on" "$tmp/gw.log"' || fail "the gateway did not come up"

timeout 60 /usr/bin/python3 - "$tmp/a.sock" "$nbdport" > "$tmp/clients.out" 2>&1 << 'PY'
import nbd, os, socket, sys, time

def refused(family, addr):
    """True when the server closes without sending a byte."""
    s = socket.socket(family, socket.SOCK_STREAM)
    s.connect(addr)
    s.settimeout(20)
    try:
        data = s.recv(64)
    except ConnectionResetError:
        data = b""
    s.close()
    return data == b""

def client(name, unix=None, port=None):
    h = nbd.NBD()
    h.set_export_name(name)
    if unix:
        h.connect_unix(unix)
    else:
        h.connect_tcp("127.0.0.1", str(port))
    return h

def works(h, i):
    data = os.urandom(65536)
    h.pwrite(data, i * 65536)
    return h.pread(65536, i * 65536) == data

for label, name, family, addr, kw in (
        ("unix", "a", socket.AF_UNIX, sys.argv[1], {"unix": sys.argv[1]}),
        ("tcp", "t", socket.AF_INET, ("127.0.0.1", int(sys.argv[2])), {"port": sys.argv[2]})):
    first = [client(name, **kw), client(name, **kw)]
    assert all(works(h, i) for i, h in enumerate(first)), label + ": first two"
    assert refused(family, addr), label + ": the third was not refused"
    print(label, "third refused, pid", os.getpid(), flush=True)
    assert all(works(h, i) for i, h in enumerate(first)), label + ": first two after"
    first[0].shutdown()
    # The gateway counts the client gone on its own thread: a moment.
    for _ in range(100):
        try:
            h = client(name, **kw)
            break
        except nbd.Error:
            time.sleep(0.1)
    else:
        raise SystemExit(label + ": no room after one left")
    assert works(h, 5), label + ": the newcomer"
    h.shutdown()
    first[1].shutdown()
    print(label, "OK", flush=True)
print("OK connlimit")
PY
st=$?
cat "$tmp/clients.out"
[ $st = 0 ] && grep -q "OK connlimit" "$tmp/clients.out" || fail "clients (exit $st)"
pypid=$(sed -n 's/^unix third refused, pid //p' "$tmp/clients.out")
grep "refused" "$tmp/gw.log"
grep -q "nbd server unix:$tmp/a.sock: refused unix:$tmp/a.sock#3 (uid $(id -u), pid $pypid): 2 connections already open (max_connections 2)" "$tmp/gw.log" ||
	fail "no refusal line naming the Unix peer"
grep -q "nbd server tcp:127.0.0.1:$nbdport: refused 127.0.0.1:[0-9]*: 2 connections already open (max_connections 2)" "$tmp/gw.log" ||
	fail "no refusal line naming the TCP peer"
# One line per refused client (a retry after one left may be refused too,
# while the gateway has not yet counted it gone: that is another client).
[ "$(grep -c "refused unix:$tmp/a.sock#3 " "$tmp/gw.log")" = 1 ] || fail "not one line per refusal"
[ -z "$(grep -o "refused [^ ]*" "$tmp/gw.log" | sort | uniq -d)" ] || fail "a refusal logged twice"
head -c 16M /dev/urandom > "$tmp/r"
timeout 120 nbdcopy --connections=2 --request-size=33554432 "$tmp/r" "nbd://127.0.0.1:$nbdport/t" ||
	fail "16 MiB written in 32 MiB requests under a 1M budget"
timeout 120 nbdcopy --connections=2 --request-size=33554432 "nbd://127.0.0.1:$nbdport/t" "$tmp/back" ||
	fail "read back under a 1M budget"
cmp "$tmp/r" "$tmp/back" || fail "data differs under a 1M budget"
gw_stop
echo "took $(($(date +%s) - t0)) s"
echo PASS
