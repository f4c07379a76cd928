#!/usr/bin/env bash
# The NBD server on TCP (loopback, a free port): data, the send buffer left
# to autotuning; then a read-only export.
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
# A TCP client's send buffer is left to the kernel's autotuning: SO_SNDBUF
# would lock it at twice min(4 MiB, wmem_max) (nbd/server.c).  Sampled
# after the client's handshake, so after the gateway's accept and its
# setsockopt calls.
if command -v ss > /dev/null; then
	wmax=$(cat /proc/sys/net/core/wmem_max)
	locked=$((2 * (wmax < 4194304 ? wmax : 4194304)))
	"$NBDPY" -c 'import nbd, sys, time; h = nbd.NBD(); h.connect_uri(sys.argv[1]); print("connected", flush=True); time.sleep(30)' \
		"$uri" > "$tmp/hold.out" &
	hold=$!
	tb=
	for _ in $(seq 300); do
		grep -q connected "$tmp/hold.out" &&
			tb=$(ss -tmnH state established "sport = :$port" | grep -o 'tb[0-9]*' | head -1)
		[ -n "$tb" ] && break
		sleep 0.1
	done
	kill "$hold" 2> /dev/null
	wait "$hold" 2> /dev/null
	[ -n "$tb" ] || fail "no handshake, or no established connection on port $port in ss"
	if [ "$locked" = "$(awk '{print $3}' /proc/sys/net/ipv4/tcp_wmem)" ]; then
		echo "TCP: send buffer ${tb#tb} bytes (not checked: locked would be tcp_wmem's maximum too)"
	else
		[ "${tb#tb}" != "$locked" ] || fail "the gateway's TCP send buffer is locked at $locked bytes"
		echo "TCP: send buffer ${tb#tb} bytes, autotuned (locked would be $locked)"
	fi
else
	echo "TCP: send buffer not checked (no ss)"
fi
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
