#!/usr/bin/env bash
# The NBD listener's TLS keys in the configuration (exports[].nbd.tls,
# tls_psk_file, tls_certificates, tls_verify_peer): `check` names the file
# and line of each mistake (a PSK file others can read, a bad key line,
# TLS on a kernel-device-only export, credentials with TLS off), and
# `run` serves the export over TLS to nbdinfo and refuses plaintext.
set -u
. "$TOP/tests/func/control/lib.sh"
need nbdinfo openssl jq
nqn=nqn.2014-08.org.nvmf-gateway:tls-conf

mkdir -m 700 "$tmp/psk"
psk="$tmp/psk/keys.psk"
(umask 077; echo "alice:$(openssl rand -hex 32)" > "$psk")
conf() { # conf NBD_GROUP_BODY
	cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "t"; subnqn = "$nqn";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "${port:-4420}"; } ); } );
exports = ( { name = "disk"; target = "t";
    nbd = { $1 }; } );
CONF
}
bad() { # bad WANT NBD_GROUP_BODY: check refuses it with WANT
	conf "$2"
	out=$("$GW" check -c "$tmp/gw.conf" 2>&1) && fail "check took: $2"
	echo "$out" | grep -qF -- "$1" || fail "check: want '$1', got: $out"
}
sock="$tmp/nbd.sock"
L="listen = \"unix:$sock\";
    tls = \"require\";"

chmod 640 "$psk"
bad "$tmp/gw.conf:6: exports[0].nbd.tls_psk_file: $psk holds a secret and" \
	"$L tls_psk_file = \"$psk\";"
chmod 600 "$psk"
echo "bob:zz" > "$tmp/psk/bad.psk"
chmod 600 "$tmp/psk/bad.psk"
bad "$tmp/gw.conf:6: exports[0].nbd: $tmp/psk/bad.psk:1: the key is not an even number of hex digits" \
	"$L tls_psk_file = \"$tmp/psk/bad.psk\";"
bad "exports[0].nbd.tls: the kernel's NBD client (/dev/nbdN) has no TLS" \
	"device = \"auto\"; tls = \"on\"; tls_psk_file = \"$psk\";"
bad "exports[0].nbd: TLS credentials given but tls is off" \
	"listen = \"unix:$sock\"; tls_psk_file = \"$psk\";"
bad "give tls_psk_file or tls_certificates" "$L"
bad "exports[0].nbd.tls_max_handshakes = 0 is out of range 1..4096" \
	"$L tls_psk_file = \"$psk\"; tls_max_handshakes = 0;"
bad "exports[0].nbd.tls_max_handshakes: applies with tls on or require" \
	"listen = \"unix:$sock\"; tls_max_handshakes = 8;"
bad "exports[0].nbd.tls: unknown value \"maybe\" (expected off|on|require)" "listen = \"unix:$sock\"; tls = \"maybe\";"
echo "check: each mistake named with its file and line"

target_start "$nqn:16M"
conf "$L tls_psk_file = \"$psk\"; tls_max_handshakes = 8;"
gw_start run "$tmp/gw.conf"
[ "$(nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$psk")" = 16777216 ] ||
	fail "nbdinfo over TLS through the daemon"
nbdinfo --size "nbd+unix:///disk?socket=$sock" > /dev/null 2>&1 && fail "plaintext accepted"
grep -q ") refused: TLS required (tls = require)" "$tmp/gw.log" || fail "no refusal line"
gw_stop
echo "OK"
