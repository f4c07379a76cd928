#!/usr/bin/env bash
# Orderly ends over TLS say close_notify before the close, so that the
# client can tell them from a cut connection: after NBD_CMD_DISC, after
# NBD_OPT_ABORT, and when the gateway stops (SIGTERM) under a client in
# transmission.  Before the fix each ended with a bare EOF.  A client's
# own close_notify is answered with one (cbye; before that fix the gateway
# closed without answering).
set -u
. "$TOP/tests/func/nbd/lib.sh"
need cc openssl nbdinfo
sock="$tmp/nbd.sock"
mkdir -m 700 "$tmp/psk"
hex=$(openssl rand -hex 32)
(umask 077; echo "alice:$hex" > "$tmp/psk/keys.psk")
cc -O1 -o "$tmp/tls_bye" "$TOP/tests/func/nbd/tls_bye.c" "$TOP/tests/func/nbd/tls_client.c" -lssl -lcrypto ||
	fail "cannot build the test client"
gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-psk-file "$tmp/psk/keys.psk" "unix:$sock"

for mode in disc abort cbye; do
	out=$(timeout 60 "$tmp/tls_bye" "$sock" alice "$hex" $mode) ||
		fail "$mode: the end was not a close_notify: $out"
	[ "$out" = close_notify ] || fail "$mode: $out"
	echo "$mode: close_notify"
done
# libnbd's orderly end still works (it ends with NBD_CMD_DISC).
[ "$(nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/psk/keys.psk")" = \
	33554432 ] || fail "nbdinfo after the orderly ends"

# The gateway stops under a client in transmission and one in option
# haggling (after the TLS handshake).
"$tmp/tls_bye" "$sock" alice "$hex" wait > "$tmp/wait.out" 2>&1 &
cpid=$!
cleanup_fn stop_pid "$cpid"
"$tmp/tls_bye" "$sock" alice "$hex" owait > "$tmp/owait.out" 2>&1 &
opid=$!
cleanup_fn stop_pid "$opid"
wait_for 30 'grep -q ready "$tmp/wait.out" && grep -q ready "$tmp/owait.out"' ||
	fail "the waiting clients did not get in: $(cat "$tmp/wait.out" "$tmp/owait.out")"
gw_stop
st=0
wait "$cpid" || st=$?
grep -q "^close_notify" "$tmp/wait.out" ||
	fail "stop: the client in transmission saw no close_notify (status $st): $(cat "$tmp/wait.out")"
st=0
wait "$opid" || st=$?
grep -q "^close_notify" "$tmp/owait.out" ||
	fail "stop: the client in option haggling saw no close_notify (status $st): $(cat "$tmp/owait.out")"
echo "server stop: close_notify in transmission and in option haggling"
echo pass
