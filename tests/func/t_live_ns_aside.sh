#!/usr/bin/env bash
# One namespace's path errors must not slow the other namespaces of the
# same target (found by interop live-ns-disable against nvmet 6.12: a
# disabled namespace answers Internal Path Error, 3/0, and the gateway's
# 1 s put-aside mark was per path, so namespace 1 on the same path fell to
# under 1 read a second while namespace 2 was disabled).  One path, two
# namespaces; namespace 2 answers 3/0 to every I/O (the target's status
# knob restricted with status-ns) while readers keep I/O on it; namespace
# 1's reads must not wait: judged by the gateway's own latency histogram
# of export e1 (stats: p99 of its reads), not by how fast this machine is.
set -u
. "$TOP/tests/func/live/lib.sh"
need jq

A=nqn.2026-01.io.nvmf-gateway:nsaside
tgt_start a "" -s 0 --subsys "$A:8M:512:2"
port=$(head -1 "$tmp/a.ready")
ctlsock="$tmp/gw.ctl"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$ctlsock"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 2; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; },
            { name = "e2"; target = "t1"; nsid = 2; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock $tmp/e2.sock" gw_start run "$tmp/gw.conf"
[ "$("$NBDPY" "$LIO" read "$tmp/e2.sock" 10)" = ok ] || fail "first read on e2"

# reads.py SOCK SECONDS QD: QD reads at a time until SECONDS have passed
# (this client's clock only says when to stop); prints "ok N err M".
cat > "$tmp/reads.py" << 'PY'
import sys, time, nbd
sock, secs, qd = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
h = nbd.NBD()
h.connect_uri("nbd+unix:///?socket=" + sock)
bufs = [nbd.Buffer(4096) for _ in range(qd)]
ok = err = 0
out = {}
end = time.monotonic() + secs
def issue(k):
    out[h.aio_pread(bufs[k], 4096 * k)] = k
for k in range(qd):
    issue(k)
while out:
    h.poll(200)
    for c in list(out):
        try:
            if not h.aio_command_completed(c):
                continue
            ok += 1
        except nbd.Error:
            err += 1
        k = out.pop(c)
        if time.monotonic() < end:
            issue(k)
print("ok %d err %d" % (ok, err))
PY

ctl a status-ns 2 > /dev/null
ctl a status 3 0 > /dev/null
"$NBDPY" "$tmp/reads.py" "$tmp/e2.sock" 4 4 > "$tmp/e2.out" &
e2p=$!
sleep 0.5
"$NBDPY" "$tmp/reads.py" "$tmp/e1.sock" 3 1 > "$tmp/e1.out" || fail "reader on e1"
wait "$e2p"
ctl a status off > /dev/null
read -r _ e1ok _ e1err < "$tmp/e1.out"
read -r _ e2ok _ e2err < "$tmp/e2.out"
"$GW" stats -s "$ctlsock" -o json > "$tmp/stats.json" || fail "stats -o json"
p99=$(jq -r '.exports[] | select(.name == "e1") | .read_latency_us.p99' "$tmp/stats.json")
p50=$(jq -r '.exports[] | select(.name == "e1") | .read_latency_us.p50' "$tmp/stats.json")
echo "nsid 2 answering 3/0: e2 ok $e2ok err $e2err; e1 ok $e1ok err $e1err," \
	"e1 read latency by the gateway p50 ${p50} us p99 ${p99} us"
[ "$e2err" -gt 0 ] || fail "nsid 2 never failed: the status knob did not act"
[ "$e1err" = 0 ] || fail "e1 had $e1err failed reads"
# Put aside with nsid 2, a read of nsid 1 waited up to the 1 s backoff.
[ "$p99" -lt 300000 ] || fail "e1's reads waited: p99 $p99 us (nsid 2's errors slowed nsid 1)"
[ "$e1ok" -ge 20 ] || fail "e1 completed only $e1ok reads in 3 s"
gw_alive
gw_stop_within 30
echo pass
