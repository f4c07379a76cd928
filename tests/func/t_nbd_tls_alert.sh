#!/usr/bin/env bash
# A refused TLS handshake (wrong key, unknown identity) sends the client
# the alert that says why before the close: libnbd (GnuTLS) reports "A TLS
# fatal alert has been received" and an OpenSSL client names the alert,
# where a bare EOF ("non-properly terminated") said nothing.  Before the
# fix the alert was queued on the ring after the socket was already shut
# (io_uring backend): the client saw EOF.
# The same when the handshake fails while the gateway is still sending
# its flight (x509, a certificate chain far larger than the socket holds,
# a client that reads nothing until it has sent a record the gateway cannot
# open): the flight is sent whole, then the alert, then the close.  Before
# that fix the alert was skipped and the send cut short (both backends).
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo cc openssl
sock="$tmp/nbd.sock"
mkdir -m 700 "$tmp/psk"
hex=$(openssl rand -hex 32)
(umask 077; echo "alice:$hex" > "$tmp/psk/keys.psk"
 echo "alice:$(openssl rand -hex 32)" > "$tmp/wrong.psk"
 echo "mallory:$(openssl rand -hex 32)" > "$tmp/mallory.psk")
cc -O1 -o "$tmp/tls_bye" "$TOP/tests/func/nbd/tls_bye.c" "$TOP/tests/func/nbd/tls_client.c" -lssl -lcrypto ||
	fail "cannot build the test client"
gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-psk-file "$tmp/psk/keys.psk" "unix:$sock"

nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/wrong.psk" \
	> /dev/null 2> "$tmp/wrong.err" && fail "wrong PSK accepted"
cat "$tmp/wrong.err"
grep -q "TLS fatal alert has been received" "$tmp/wrong.err" ||
	fail "wrong key: nbdinfo got no alert: $(cat "$tmp/wrong.err")"
nbdinfo --size "nbds+unix://mallory@/disk?socket=$sock&tls-psk-file=$tmp/mallory.psk" \
	> /dev/null 2> "$tmp/mallory.err" && fail "unknown identity accepted"
cat "$tmp/mallory.err"
grep -q "TLS fatal alert has been received" "$tmp/mallory.err" ||
	fail "unknown identity: nbdinfo got no alert: $(cat "$tmp/mallory.err")"

# OpenSSL's client names the alert it got.
out=$("$tmp/tls_bye" "$sock" alice "$(openssl rand -hex 32)" disc) && fail "wrong key accepted"
echo "wrong key, OpenSSL client: $out"
echo "$out" | grep -q "handshake failed: .*alert" || fail "no alert named: $out"

# The refusals did not cost the others anything.
[ "$(nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/psk/keys.psk")" = \
	33554432 ] || fail "not serving after refused clients"
gw_alive
gw_stop

# x509 with a chain of about 11 MiB: more than the gateway's socket takes
# (its SO_SNDBUF is 4 MiB, doubled by the kernel), so its send of the
# flight is in flight when the client's bad record comes.
cc -O1 -o "$tmp/tls_alert_busy" "$TOP/tests/func/nbd/tls_alert_busy.c" \
	"$TOP/tests/func/nbd/tls_client.c" -lssl -lcrypto || fail "cannot build the busy client"
srv="$tmp/x509"
mkdir -m 700 "$srv"
ssl() { openssl "$@" 2> "$tmp/openssl.err" || { cat "$tmp/openssl.err"; fail "openssl $1"; }; }
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
	-keyout "$srv/server-key.pem" -out "$srv/server-cert.pem"
# Filler: one certificate of about 45 KB (a long comment), many times.
ssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=filler \
	-keyout "$tmp/filler-key.pem" -out "$tmp/filler.pem" \
	-addext "nsComment=$(head -c 45000 /dev/zero | tr '\0' x)"
for _ in $(seq 250); do cat "$tmp/filler.pem"; done >> "$srv/server-cert.pem"
xsock="$tmp/x509.sock"
gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-certificates "$srv" "unix:$xsock"
# 2 MiB waiting unread: the gateway is sending and cannot finish.
out=$(timeout 120 "$tmp/tls_alert_busy" "$xsock" $((2 << 20))) ||
	fail "handshake failed during the gateway's send: the client got no alert: $out"
echo "failed during the gateway's send: $out"
grep -q "TLS handshake failed" "$tmp/gw.log" || fail "no handshake failure line"
gw_alive
gw_stop

# The same failure with a client that then stops reading: the failed
# handshake gives its tls_max_handshakes slot back at once (it kept it for
# the whole drain, up to 30 s more), and the alert's send is bounded by 5 s
# of the gateway's clock, not the 30 s drain.  (Review of the fix above.)
gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-certificates "$srv" \
	--nbd-tls-max-handshakes 1 "unix:$xsock"
NOREAD=60 "$tmp/tls_alert_busy" "$xsock" $((2 << 20)) > "$tmp/noread.out" 2>&1 &
nr=$!
cleanup_fn stop_var nr
wait_for 60 'grep -q "TLS handshake failed" "$tmp/gw.log"' || fail "no handshake failure: $(cat "$tmp/noread.out")"
starttls() { "$NBDPY" - "$xsock" <<'PY'
import os, sys
sys.path.insert(0, os.environ["TOP"] + "/tests/func/nbd")
from starttls import starttls
print(hex(starttls(sys.argv[1])[1]))
PY
}
p=$(starttls)
[ "$p" = 0x1 ] || fail "the failed handshake still holds the only slot (STARTTLS answered $p)"
wait_for 30 'grep -q "closing: the last bytes not taken by the client within 5 s" "$tmp/gw.log"' ||
	fail "the failed handshake's send was not cut after 5 s: $(grep closing "$tmp/gw.log")"
gw_alive
gw_stop
echo pass
