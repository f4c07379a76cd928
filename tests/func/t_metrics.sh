#!/usr/bin/env bash
# The Prometheus endpoint of `nvmf-gateway run`: scraped over TCP and a unix
# socket, checked by promtool (Debian's prometheus package) and by a strict
# exposition parser, and its export counters moved by exactly the I/O done
# through the NBD socket.  Other paths get 404, other methods 405, and a
# malformed request only closes its connection (logged).
set -u
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
# promtool comes with Debian's prometheus package, which also installs and
# enables a Prometheus server: the project does not install it for its
# tests.  The strict parser (metrics/expo.py) always runs; promtool too
# where an operator already has it.
PROMTOOL=$(command -v promtool || true)
promtool() { [ -z "$PROMTOOL" ] || "$PROMTOOL" "$@"; }
PATH=/usr/bin:$PATH
tmp=$(mktemp -d /tmp/gw-metrics.XXXXXX)
tpid='' gpid=''
cleanup_fn rm -rf "$tmp"
cleanup_fn stop_var tpid
cleanup_fn stop_var gpid
expo="$TOP/tests/func/metrics/expo.py"

"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:metrics:64M \
	--ready-file "$tmp/ready" > "$tmp/target.log" 2>&1 &
tpid=$!
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
[ -n "$port" ] || fail "the test target did not start"
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

conf() {	# conf FILE METRICS_SPEC
	cat > "$1" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; metrics = "$2"; };
targets = ( { name = "t1"; subnqn = "nqn.2014-08.org.nvmf-gateway:metrics";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; };
    qos = { iops = 100000; write_bandwidth = "1G"; }; } );
CONF
}
conf "$tmp/gw.conf" "tcp:127.0.0.1:$mport"
"$GW" check -c "$tmp/gw.conf" || fail "check"
"$GW" run -f -c "$tmp/gw.conf" > "$tmp/gw.log" 2>&1 &
gpid=$!
url="http://127.0.0.1:$mport/metrics"
for _ in $(seq 200); do
	[ -S "$tmp/e1.sock" ] && curl -fsS -o /dev/null "$url" 2> /dev/null && break
	kill -0 "$gpid" 2> /dev/null || fail "the gateway exited"
	sleep 0.1
done
curl -fsS -o /dev/null "$url" || fail "no metrics endpoint"

scrape() {	# scrape NAME: raw text, promtool verdict, parsed JSON
	curl -fsS -D "$tmp/$1.hdr" -o "$tmp/$1.txt" "$url" || fail "scrape $1"
	grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/$1.hdr" || fail "content type"
	promtool check metrics < "$tmp/$1.txt" || fail "promtool rejects scrape $1"
	python3 "$expo" < "$tmp/$1.txt" > "$tmp/$1.json" || fail "strict parser rejects scrape $1"
}
val() {	# val NAME KEY
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(int(d[sys.argv[2]]))' \
		"$tmp/$1.json" "$2" || fail "no $2 in scrape $1"
}
E='{"export": "e1"}'
scrape s1
head -40 "$tmp/s1.txt"
[ "$(val s1 "nvmf_gateway_export_up{\"export\": \"e1\", \"target\": \"t1\"}")" = 1 ] || fail "export_up"
[ "$(val s1 "nvmf_gateway_export_size_bytes$E")" = 67108864 ] || fail "size"
[ "$(val s1 "nvmf_gateway_export_qos_iops_limit$E")" = 100000 ] || fail "iops limit"
[ "$(val s1 "nvmf_gateway_export_qos_write_bandwidth_limit_bytes$E")" = 1073741824 ] ||
	fail "write bandwidth limit"

# 12 writes of 64 KiB and 20 reads of 4 KiB, one NBD request each.
nbdsh -u "nbd+unix:///e1?socket=$tmp/e1.sock" -c '
for i in range(12):
    h.pwrite(bytes([i + 1]) * 65536, i * 65536)
for i in range(20):
    assert h.pread(4096, i * 4096) == bytes([i // 16 + 1]) * 4096
' || fail "nbdsh I/O"
scrape s2
for m in reads:20 writes:12 read_bytes:81920 write_bytes:786432 errors:0; do
	k=${m%%:*} want=${m#*:}
	a=$(val s1 "nvmf_gateway_export_${k}_total$E") b=$(val s2 "nvmf_gateway_export_${k}_total$E")
	echo "$k: $a -> $b"
	[ $((b - a)) = "$want" ] || fail "$k moved by $((b - a)), not $want"
done
# The path counters (one path here) moved by the same commands.
P='{"path": "0", "target": "t1"}'
[ "$(val s2 "nvmf_gateway_path_state{\"path\": \"0\", \"state\": \"live\", \"target\": \"t1\"}")" = 1 ] ||
	fail "path 0 not live in the metrics"
for m in reads:20 writes:12 read_bytes:81920 write_bytes:786432 errors:0; do
	k=${m%%:*} want=${m#*:}
	a=$(val s1 "nvmf_gateway_path_${k}_total$P") b=$(val s2 "nvmf_gateway_path_${k}_total$P")
	echo "path $k: $a -> $b"
	[ $((b - a)) = "$want" ] || fail "path $k moved by $((b - a)), not $want"
done
[ "$(val s2 "nvmf_gateway_export_read_latency_seconds_count$E")" = \
  "$(val s2 "nvmf_gateway_export_reads_total$E")" ] || fail "read histogram count != reads"
[ "$(val s2 "nvmf_gateway_export_write_latency_seconds_count$E")" -ge 12 ] || fail "write histogram"
[ "$(val s2 "nvmf_gateway_export_in_flight$E")" = 0 ] || fail "in flight after the I/O"

# HEAD: headers only.  404, 405.  A malformed request: closed, logged.
curl -fsSI "$url" | grep -q '^HTTP/1.0 200' || fail "HEAD"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/")" = 404 ] || fail "404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url")" = 405 ] || fail "405"
out=$(python3 - "$mport" << 'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"GET /metrics HTTP/9.9 junk\r\n\r\n")
print(len(s.recv(100)))
PY
) || fail "malformed request client"
[ "$out" = 0 ] || fail "a malformed request got an answer ($out bytes)"
grep -q 'malformed request' "$tmp/gw.log" || fail "malformed request not logged"
curl -fsS -o /dev/null "$url" || fail "endpoint dead after a malformed request"

kill -TERM "$gpid"; wait "$gpid"; st=$?; gpid=''
[ "$st" = 0 ] || fail "exit $st"
grep -q 'metrics tcp:127.0.0.1:[0-9]*: stopped' "$tmp/gw.log" || fail "metrics not stopped"

# The same over a unix socket.
conf "$tmp/gw2.conf" "unix:$tmp/metrics.sock"
"$GW" run -f -c "$tmp/gw2.conf" > "$tmp/gw.log" 2>&1 &
gpid=$!
for _ in $(seq 200); do [ -S "$tmp/metrics.sock" ] && break; sleep 0.1; done
curl -fsS --unix-socket "$tmp/metrics.sock" -o "$tmp/u.txt" http://x/metrics || fail "unix scrape"
promtool check metrics < "$tmp/u.txt" || fail "promtool rejects the unix scrape"
grep -q '^nvmf_gateway_export_reads_total{export="e1"} ' "$tmp/u.txt" || fail "unix scrape content"
kill -TERM "$gpid"; wait "$gpid"; st=$?; gpid=''
[ "$st" = 0 ] || fail "exit $st"
[ -e "$tmp/metrics.sock" ] && fail "metrics socket left behind"
echo "metrics: OK"
