#!/usr/bin/env bash
# A refused TLS handshake (wrong key, unknown identity) sends the client
# the alert that says why before the close: libnbd (GnuTLS) reports "A TLS
# fatal alert has been received" and an OpenSSL client names the alert,
# where a bare EOF ("non-properly terminated") said nothing.  Before the
# fix the alert was queued on the ring after the socket was already shut
# (io_uring backend): the client saw EOF.
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
echo pass
