#!/usr/bin/env bash
# `nvmf-gateway run` with two TLS targets: t1 with the right key serves its
# NBD export with verified I/O; t2's key differs from its target's, so each
# connect attempt is refused with one log line naming the cause, retried
# with the normal backoff, while the daemon and e1 carry on.  Then a
# plaintext target t3 (tls = false) against a TLS-only port: a clear line
# saying the port may require TLS.  Also the one-shot bench with a wrong
# key: exit 1, one line.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"

N1=nqn.2026-01.io.nvmf-gateway:tls-1
N2=nqn.2026-01.io.nvmf-gateway:tls-2
H=nqn.2026-01.io.nvmf-gateway:tls-host
tls_genkey "$tmp/right.key"
tls_genkey "$tmp/wrong.key"
tgt_start a "" -s 0 --subsys "$N1:32M" --subsys "$N2:32M" --tls-key "$tmp/right.key"
pa=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; };
targets = (
  { name = "t1"; subnqn = "$N1";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; } );
    tls = true; tls_key_file = "$tmp/right.key"; reconnect_delay = 1; },
  { name = "t2"; subnqn = "$N2";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; } );
    tls = true; tls_key_file = "$tmp/wrong.key"; reconnect_delay = 1; },
  { name = "t3"; subnqn = "$N2";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; } );
    reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; },
            { name = "e2"; target = "t2"; nsid = 1; nbd = { listen = "unix:$tmp/e2.sock"; }; },
            { name = "e3"; target = "t3"; nsid = 1; nbd = { listen = "unix:$tmp/e3.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
"$NBDPY" "$IO" verify "$tmp/e1.sock" 3 > "$tmp/verify.out" 2> "$tmp/verify.err" ||
	{ cat "$tmp/verify.out" "$tmp/verify.err"; fail "verified I/O through e1 over TLS"; }
grep -q '"verify_errors": 0' "$tmp/verify.out" || fail "verify errors on e1"
gw_alive
cat "$tmp/gw.log"
bad=$(grep -c "TLS handshake with 127.0.0.1:$pa failed: .*different TLS key" "$tmp/gw.log")
[ "$bad" -ge 2 ] || fail "want t2 refused at least twice (retried), saw $bad lines"
# One line per attempt: every error line of t2's path is that line.
other=$(grep "ctrl t2" "$tmp/gw.log" | grep -vc "TLS handshake with")
echo "t2: $bad refused handshakes, $other other error lines"
[ "$other" = 0 ] || fail "t2's failed handshakes logged more than one line each"
grep -q "TLS PSK identity 'NVMe0R01 $H $N1'" "$tmp/tgt-a.log" || fail "t1 did not use TLS"
grep -q "not reachable yet (Key was rejected by service)" "$tmp/gw.log" ||
	fail "the wait line for t2 does not say the key was rejected"
plain=$(grep -c "before the ICResp: does the port require TLS" "$tmp/gw.log")
[ "$plain" -ge 1 ] || fail "t3 (plaintext) was not told the port may require TLS"
gw_stop

# The one-shot commands: exit 1 and one line.
out=$(timeout 60 "$GW" bench -t tcp -a 127.0.0.1 -s "$pa" -n "$N1" -q "$H" --tls \
	--tls-key-file "$tmp/wrong.key" -w randread -b 4k -T 1 2>&1); st=$?
echo "$out"
[ "$st" = 1 ] || fail "bench with a wrong key: exit $st, want 1"
# (The epoll backend adds a notice line of its own.)
[ "$(printf '%s\n' "$out" | grep -c 'error:')" = 1 ] || fail "want one error line from bench, got: $out"
printf '%s\n' "$out" | grep -q "TLS handshake with 127.0.0.1:$pa failed: .*different TLS key" ||
	fail "bench's line does not name the cause"
out=$(timeout 60 "$GW" discover -t tcp -a 127.0.0.1 -s "$pa" -q "$H" 2>&1); st=$?
echo "$out"
[ "$st" = 1 ] || fail "plaintext discover of a TLS port: exit $st, want 1"
printf '%s\n' "$out" | grep -q "does the port require TLS" || fail "discover does not say why"

# A TLS server that answers the plaintext ICReq with an alert record (as
# an OpenSSL or GnuTLS server may, instead of a bare close): the gateway
# names the alert and the fix.
hp=$(free_port)
python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
c.recv(128)
c.sendall(bytes([0x15, 3, 3, 0, 2, 2, 10]))  # alert: fatal, unexpected_message
c.recv(1)' "$hp" > "$tmp/alert.out" 2>&1 &
apid=$!
cleanup_fn stop_pid "$apid"
for _ in $(seq 1 100); do grep -q ready "$tmp/alert.out" && break; sleep 0.05; done
out=$(timeout 60 "$GW" bench -t tcp -a 127.0.0.1 -s "$hp" -n "$N1" -q "$H" -w randread -b 4k -T 1 2>&1); st=$?
echo "$out"
[ "$st" = 1 ] || fail "plaintext against a TLS alert: exit $st, want 1"
printf '%s\n' "$out" | grep -q "answered the ICReq with a TLS alert: the port requires TLS" ||
	fail "the alert was not recognised"
stop_pid "$apid"

# An impostor at the target's address: a TLS 1.3 server with a certificate
# and no PSK, which ignores the key the gateway offers and answers with a
# certificate handshake.  The gateway must refuse it; it did not (OpenSSL's
# client verifies nothing by default), and sent its ICReq to the impostor.
if command -v openssl > /dev/null; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj /CN=impostor -keyout "$tmp/imp.key" -out "$tmp/imp.crt" 2> "$tmp/openssl.err" ||
		{ cat "$tmp/openssl.err"; fail "openssl req"; }
	ip=$(free_port)
	python3 -c 'import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
try:
    t = ctx.wrap_socket(c, server_side=True)
    print("IMPOSTOR GOT", len(t.recv(128)), "bytes", flush=True)
except (ssl.SSLError, OSError) as e:
    print("handshake refused:", e, flush=True)' "$ip" "$tmp/imp.crt" "$tmp/imp.key" > "$tmp/imp.out" 2>&1 &
	ipid=$!
	cleanup_fn stop_pid "$ipid"
	for _ in $(seq 1 100); do grep -q ready "$tmp/imp.out" && break; sleep 0.05; done
	out=$(timeout 60 "$GW" bench -t tcp -a 127.0.0.1 -s "$ip" -n "$N1" -q "$H" --tls \
		--tls-key-file "$tmp/right.key" -w randread -b 4k -T 1 2>&1); st=$?
	echo "$out"
	wait "$ipid"
	cat "$tmp/imp.out"
	[ "$st" = 1 ] || fail "bench against a certificate-only impostor: exit $st, want 1"
	printf '%s\n' "$out" | grep -q "sent a certificate instead of using the PSK" ||
		fail "the impostor's certificate handshake was not named"
	! grep -q "IMPOSTOR GOT" "$tmp/imp.out" || fail "the impostor got the ICReq"
else
	echo "no openssl: the impostor step is left out (the unit test handshake_impostor_certificate covers it)"
fi
echo pass
