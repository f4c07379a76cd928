#!/usr/bin/env bash
# The TLS keys of a target through `check`: tls without a key file, a key
# file without tls, a key file others may read, a malformed key, an rdma
# path with tls and an unknown tls_kdf are each refused with FILE:LINE,
# and the key is never echoed; a private, well-formed key passes.
set -u
: "${GW:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"
. "$TOP/tests/func/tls/key.sh"

tmp_dir gw-tls-config
tls_genkey "$tmp/k"
conf() { # $1: the TLS settings of target t1
	cat > "$tmp/c.conf" <<CONF
targets = ( { name = "t1"; subnqn = "nqn.2026-01.org.example:t1";
  paths = ( { transport = "${T:-tcp}"; traddr = "127.0.0.1"; } );
  $1 } );
CONF
}
refused() { # $1: settings, $2: the message wanted after FILE:3:
	local out st
	conf "$1"
	out=$("$GW" check -c "$tmp/c.conf" 2>&1); st=$?
	echo "$out"
	[ $st = 1 ] || fail "'$1': exit $st, want 1"
	printf '%s\n' "$out" | grep -qF "$tmp/c.conf:3: $2" || fail "'$1': missing '$tmp/c.conf:3: $2'"
	printf '%s\n' "$out" | grep -q NVMeTLSkey && fail "'$1': the key was echoed"
	return 0
}

conf "tls = true; tls_key_file = \"$tmp/k\";"
"$GW" check -c "$tmp/c.conf" || fail "a private, well-formed key refused"
conf "tls = true; tls_key_file = \"$tmp/k\"; tls_kdf = \"rfc8446\";"
"$GW" check -c "$tmp/c.conf" || fail "tls_kdf = rfc8446 refused"

refused "tls = true;" "targets[0]: tls = true needs tls_key_file"
refused "tls_key_file = \"$tmp/k\";" "targets[0]: tls_key_file is set but tls is not true"
refused "tls = true; tls_key_file = \"$tmp/k\"; tls_kdf = \"hkdf\";" \
	'targets[0].tls_kdf: unknown value "hkdf" (expected rfc8446|compat)'
T=rdma refused "tls = true; tls_key_file = \"$tmp/k\";" \
	"targets[0]: tls is for tcp paths; paths[0] is rdma"
chmod 644 "$tmp/k"
refused "tls = true; tls_key_file = \"$tmp/k\";" \
	"targets[0].tls_key_file: $tmp/k holds a secret and is readable by group or others (mode 0644)"
# A bad CRC: the last base64 character of the key changed.
(umask 077; sed 's/.\(.\):$/A\1:/' "$tmp/k" > "$tmp/bad")
cmp -s "$tmp/k" "$tmp/bad" && (umask 077; sed 's/.\(.\):$/B\1:/' "$tmp/k" > "$tmp/bad")
refused "tls = true; tls_key_file = \"$tmp/bad\";" \
	"targets[0].tls_key_file: $tmp/bad does not hold an NVMe TLS key:"
echo pass
