#!/usr/bin/env bash
# The NBD server on TCP (loopback, a free port), then a read-only export.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo nbdcopy nbdsh
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

port=$(free_port)
gw_start nbd --mem 64M --name tdisk "tcp:127.0.0.1:$port"
uri="nbd://127.0.0.1:$port/tdisk"
grep -q "on tcp:127.0.0.1:$port" "$tmp/gw.out" || fail "startup line does not say where"
[ "$(nbdinfo --size "$uri")" = 67108864 ] || fail "size over TCP"
head -c 64M /dev/urandom > "$tmp/in.bin"
nbdcopy "$tmp/in.bin" "$uri" || fail "nbdcopy in"
nbdcopy "$uri" "$tmp/out.bin" || fail "nbdcopy out"
cmp "$tmp/in.bin" "$tmp/out.bin" || fail "TCP round trip differs"
echo "TCP: nbdcopy 64 MiB identical"
gw_stop

# tcp:PORT alone binds loopback.
port=$(free_port)
gw_start nbd --mem 16M --read-only "tcp:$port"
uri="nbd://127.0.0.1:$port/"
grep -q "read-only" "$tmp/gw.out" || fail "startup line does not say read-only"
[ "$(nbdinfo_field "$uri" is_read_only)" = true ] || fail "not advertised read-only"
ss -ltn 2>/dev/null | grep -q "127.0.0.1:$port " || [ ! -x /usr/bin/ss ] || fail "not bound to loopback"
out=$(nbdsh -u "$uri" -c "$(cat "$TOP/tests/func/nbd/ro.py")" 2>&1) || { echo "$out"; fail "ro.py"; }
echo "$out" | grep -q "^OK ro" || fail "ro.py did not finish"
echo "read-only: writes refused with EPERM"
gw_stop
echo PASS
