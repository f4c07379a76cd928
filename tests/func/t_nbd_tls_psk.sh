#!/usr/bin/env bash
# NBD over TLS with a PSK (NBD_OPT_STARTTLS, TLS 1.3): libnbd's nbdinfo,
# nbdcopy and python bindings, qemu-img/qemu-io with tls-creds-psk; with
# tls = require a plaintext client is refused and the log says why; a
# wrong key or an unknown identity is refused with one clear line while
# the gateway keeps serving; tls = on serves both; tls = off refuses
# STARTTLS.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo nbdcopy qemu-img qemu-io openssl
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

sock="$tmp/nbd.sock"
mkdir -m 700 "$tmp/psk"
(umask 077; echo "alice:$(openssl rand -hex 32)" > "$tmp/psk/keys.psk"
 echo "alice:$(openssl rand -hex 32)" > "$tmp/wrong.psk"
 echo "mallory:$(openssl rand -hex 32)" > "$tmp/mallory.psk")
psk="$tmp/psk/keys.psk"
turi="nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$psk"
puri="nbd+unix:///disk?socket=$sock"

NVMF_GATEWAY_LOG=info gw_start nbd --mem 32M --name disk --nbd-tls require --nbd-tls-psk-file "$psk" \
	"unix:$sock"

info=$(nbdinfo "$turi") || fail "nbdinfo over TLS"
echo "$info" | grep -q "with TLS" || fail "nbdinfo does not say TLS: $info"
echo "$info" | grep -q "export-size: 33554432" || fail "nbdinfo size over TLS"
grep -q "TLS established (TLSv1.3, .*PSK identity 'alice')" "$tmp/gw.log" ||
	fail "no 'TLS established' line naming the identity"

# Data written over TLS reads back equal (several records per request).
head -c 16M /dev/urandom > "$tmp/in.bin"
nbdcopy "$tmp/in.bin" "$turi" || fail "nbdcopy in over TLS"
nbdcopy "$turi" "$tmp/out.bin" || fail "nbdcopy out over TLS"
cmp -n 16777216 "$tmp/in.bin" "$tmp/out.bin" || fail "nbdcopy TLS round trip differs"
echo "nbdcopy 16 MiB in and out over TLS: identical"

out=$("$NBDPY" - "$sock" "$psk" <<'PY' 2>&1
import sys, nbd
h = nbd.NBD()
h.set_tls(nbd.TLS_REQUIRE)
h.set_tls_username("alice")
h.set_tls_psk_file(sys.argv[2])
h.set_export_name("disk")
h.connect_unix(sys.argv[1])
assert h.get_tls_negotiated()
# 4 MiB: a reply sealed over several sends
buf = bytes(range(256)) * 16384
h.pwrite(buf, 1 << 20)
h.flush()
assert h.pread(len(buf), 1 << 20) == buf
h.shutdown()
print("OK python")
PY
) || { echo "$out"; fail "python3-nbd over TLS"; }
echo "$out" | grep -q "^OK python" || fail "python3-nbd: $out"

# qemu: the PSK file is dir/keys.psk.
qemu-img info --object "tls-creds-psk,id=tls0,endpoint=client,dir=$tmp/psk,username=alice" \
	--image-opts "driver=nbd,path=$sock,export=disk,tls-creds=tls0" > "$tmp/qi" 2>&1 ||
	{ cat "$tmp/qi"; fail "qemu-img info over TLS"; }
grep -q "virtual size: 32 MiB" "$tmp/qi" || fail "qemu-img info size over TLS"
qemu-io --object "tls-creds-psk,id=tls0,endpoint=client,dir=$tmp/psk,username=alice" \
	--image-opts "driver=nbd,path=$sock,export=disk,tls-creds=tls0" \
	-c 'write -P 0x5a 2M 1M' -c 'read -P 0x5a 2M 1M' > "$tmp/qio" 2>&1 ||
	{ cat "$tmp/qio"; fail "qemu-io over TLS"; }
grep -qi "pattern verification failed\|error" "$tmp/qio" && { cat "$tmp/qio"; fail "qemu-io error"; }
echo "qemu-img and qemu-io over TLS: fine"

# require: a client that skips STARTTLS gets nothing, and the log says why.
nbdinfo "$puri" > "$tmp/plain.out" 2>&1 && fail "plaintext nbdinfo accepted under tls = require"
grep -q ") refused: TLS required (tls = require)" "$tmp/gw.log" || fail "no refusal line"
# A wrong key and an unknown identity: one line each, naming the cause.
nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/wrong.psk" 2> /dev/null &&
	fail "wrong PSK accepted"
nbdinfo --size "nbds+unix://mallory@/disk?socket=$sock&tls-psk-file=$tmp/mallory.psk" \
	2> /dev/null && fail "unknown identity accepted"
grep -q "TLS handshake failed: .*binder does not verify; PSK identity 'alice'" "$tmp/gw.log" ||
	fail "no clear line for the wrong key"
grep -q "TLS handshake failed: .*unknown PSK identity 'mallory'" "$tmp/gw.log" ||
	fail "no clear line for the unknown identity"
# ... and the gateway still serves the right key.
[ "$(nbdinfo --size "$turi")" = 33554432 ] || fail "not serving after refused clients"
gw_stop

# on: both kinds of client.
gw_start nbd --mem 32M --name disk --nbd-tls on --nbd-tls-psk-file "$psk" "unix:$sock"
nbdinfo "$puri" | grep -q "without TLS" || fail "plaintext client under tls = on"
nbdinfo "$turi" | grep -q "with TLS" || fail "TLS client under tls = on"
gw_stop

# off: STARTTLS is refused, plaintext works.
gw_start nbd --mem 32M --name disk "unix:$sock"
nbdinfo --size "$turi" 2> /dev/null && fail "TLS client accepted with TLS off"
[ "$(nbdinfo --size "$puri")" = 33554432 ] || fail "plaintext with TLS off"
gw_stop

# Bad credentials stop the start with the file and line.
echo "alice:abc" > "$tmp/short.psk"
chmod 600 "$tmp/short.psk"
"$GW" nbd --mem 1M --nbd-tls on --nbd-tls-psk-file "$tmp/short.psk" "unix:$sock" > /dev/null \
	2> "$tmp/err" && fail "short key accepted"
grep -q "short.psk:1: the key is not an even number of hex digits" "$tmp/err" ||
	fail "bad PSK file error: $(cat "$tmp/err")"
# A PSK file others can read is refused, as a DH-HMAC-CHAP secret file.
chmod 644 "$psk"
"$GW" nbd --mem 1M --nbd-tls on --nbd-tls-psk-file "$psk" "unix:$sock" > /dev/null 2> "$tmp/err" &&
	fail "a PSK file of mode 0644 was taken"
grep -qF "$psk holds a secret and is readable by group or others" "$tmp/err" ||
	fail "mode 0644: $(cat "$tmp/err")"
echo "OK"
