#!/usr/bin/env bash
# The TLS keys of a discovery controller and of an auto_export policy, and
# tls = "require", through `check`: each mistake refused with FILE:LINE and
# the key never echoed; good settings pass.
set -u
: "${GW:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"
. "$TOP/tests/func/tls/key.sh"

tmp_dir gw-tls-disc-config
tls_genkey "$tmp/k"
conf() { # $1: a discovery entry's TLS settings, $2: a policy's, $3: target t1's
	cat > "$tmp/c.conf" <<CONF
discovery = ( { transport = "${T:-tcp}"; traddr = "127.0.0.1";
  $1 } );
auto_export = ( { subnqn = "nqn.2026-01.org.example:a*"; name = "%n";
  $2
  fuse = true; } );
targets = ( { name = "t1"; subnqn = "nqn.2026-01.org.example:t1";
  $3 } );
CONF
}
refused() { # $1 $2 $3: settings, $4: the message wanted after FILE:
	local out st
	conf "$1" "$2" "$3"
	out=$("$GW" check -c "$tmp/c.conf" 2>&1); st=$?
	echo "$out"
	[ $st = 1 ] || fail "'$1|$2|$3': exit $st, want 1"
	printf '%s\n' "$out" | grep -qF "$tmp/c.conf:$4" || fail "'$1|$2|$3': missing '$tmp/c.conf:$4'"
	printf '%s\n' "$out" | grep -q NVMeTLSkey && fail "the key was echoed"
	return 0
}
k="tls_key_file = \"$tmp/k\";"
conf "tls = true; $k" "tls = \"require\"; $k tls_kdf = \"rfc8446\";" "tls = \"require\"; $k"
"$GW" check -c "$tmp/c.conf" || fail "good TLS settings refused"

refused "tls = true;" "" "" "2: discovery[0]: tls = true needs tls_key_file"
refused "$k" "" "" "2: discovery[0]: tls_key_file is set but tls is not true"
T=rdma refused "tls = true; $k" "" "" "2: discovery[0]: tls is for tcp controllers; this one is rdma"
refused "tls = true; $k tls_kdf = \"x\";" "" "" "2: discovery[0].tls_kdf: unknown value \"x\""
refused "" "tls = true;" "" "4: auto_export[0]: tls = true needs tls_key_file"
refused "" "$k" "" "4: auto_export[0]: tls_key_file is set but tls is not true"
refused "" "tls = \"yes\"; $k" "" "4: auto_export[0].tls: invalid value \"yes\": true, false or \"require\""
refused "" "tls = true; tls_key_file = \"k\";" "" "4: auto_export[0].tls_key_file: invalid value \"k\": an absolute path"
refused "" "" "tls = \"always\"; $k" "7: targets[0].tls: invalid value \"always\": true, false or \"require\""
refused "" "" "tls = 1; $k" "7: targets[0].tls: "
"$GW" check -c "$tmp/c.conf" 2>&1 | grep -q "tls_key_file is set but tls is not true" &&
	fail "a second error for a bad tls value"
chmod 644 "$tmp/k"
refused "tls = true; $k" "" "" "2: discovery[0].tls_key_file: $tmp/k holds a secret and is readable by group or others (mode 0644)"
refused "" "tls = true; $k" "" "4: auto_export[0].tls_key_file: $tmp/k holds a secret"
echo pass
