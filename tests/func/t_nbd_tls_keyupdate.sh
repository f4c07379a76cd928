#!/usr/bin/env bash
# A client with the key (TLS 1.3, PSK) asks for two 1 MiB reads, never
# reads its socket, and sends key update requests: each makes the
# gateway's TLS answer into a buffer that is outside the memory budget and
# cannot be sent.  The gateway must stop reading (or cut the connection)
# rather than hold the answers: its RSS may not grow with what the client
# sends.  Before the fix it grew linearly (7.6 -> 108 MB for 97 MB sent).
set -u
. "$TOP/tests/func/nbd/lib.sh"
need cc openssl
sock="$tmp/nbd.sock"
mkdir -m 700 "$tmp/psk"
hex=$(openssl rand -hex 32)
(umask 077; echo "alice:$hex" > "$tmp/psk/keys.psk")
cc -O1 -o "$tmp/tls_keyupdate" "$TOP/tests/func/nbd/tls_keyupdate.c" "$TOP/tests/func/nbd/tls_client.c" -lssl -lcrypto ||
	fail "cannot build the test client"
gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-psk-file "$tmp/psk/keys.psk" "unix:$sock"
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$GW_PID/status"; }
before=$(rss)
# The client ends when it has sent 64 MiB, when the gateway stops taking
# them, or when the gateway cuts it off (then it may fail: fine).
sent=$(timeout 120 "$tmp/tls_keyupdate" "$sock" alice "$hex" 64) || echo "the client ended with status $?"
sent=${sent:-0}
after=$(rss)
echo "key updates sent: $((sent / 1024)) KiB; gateway RSS $before -> $after KiB"
grep -q "reads in a row brought no data" "$tmp/gw.log" && echo "the gateway cut the client off"
# The two 1 MiB replies and their ciphertext are expected; 64 MiB of
# answers held would be far beyond this.  Under AddressSanitizer the RSS
# says nothing (its quarantine keeps freed memory): the client must then
# have been stopped short of its 64 MiB instead.
if ldd "$GW" | grep -q libasan; then
	[ "$sent" -lt $((32 << 20)) ] || fail "the gateway took all $((sent >> 20)) MiB of key updates"
else
	[ $((after - before)) -lt $((16 * 1024)) ] ||
		fail "the gateway's RSS grew by $(((after - before) / 1024)) MiB with the key updates"
fi
nbdinfo "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/psk/keys.psk" > /dev/null ||
	fail "the gateway stopped serving others"
gw_alive
gw_stop
echo pass
