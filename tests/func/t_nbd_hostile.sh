#!/usr/bin/env bash
# Hostile clients: each is logged and cut off, another client and the
# process carry on.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

sock="$tmp/nbd.sock"
gw_start --mem 16M --name disk "unix:$sock"
out=$("$NBDPY" "$TOP/tests/func/nbd/hostile.py" "$sock" 2>&1) || { echo "$out"; cat "$tmp/gw.log"; fail "hostile.py"; }
echo "$out"
echo "$out" | grep -q "^OK hostile" || fail "hostile.py did not finish"
kill -0 "$gw_pid" || fail "the gateway died"
[ "$(nbdinfo --size "nbd+unix:///disk?socket=$sock")" = 16777216 ] || fail "no longer serving"
cat "$tmp/gw.log"
for want in "closing: bad option magic" "closing: option 7 with 2147483647 bytes" \
	"closing: more than 64 options" "closing: bad request magic 0xdeadbeef" \
	"closing: request with a 4294963200-byte payload" "closing: client sent NBD_CMD_DISC"; do
	grep -q "nbd unix:$sock#[0-9]*: $want" "$tmp/gw.log" || fail "log lacks '$want' with the peer"
done
# Each connection's end is logged once.
dups=$(grep -o "nbd unix:$sock#[0-9]*: closing" "$tmp/gw.log" | sort | uniq -d)
[ -z "$dups" ] || fail "a close logged twice: $dups"
gw_stop
echo PASS
