#!/usr/bin/env bash
# DH-HMAC-CHAP secrets through `check` and the CLI: a secret in a file that
# group or others may read is refused with FILE:LINE, the same file made
# private passes, and a malformed key is named without being echoed.
set -u
: "${GW:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"

tmp_dir gw-auth
umask 022
# nvme gen-dhchap-key -s 000102..1f -m 0
key='DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:'
echo "$key" > "$tmp/host.key"
cat > "$tmp/file.conf" <<CONF
targets = ( { name = "t1"; subnqn = "nqn.2026-01.org.example:t1";
  paths = ( { transport = "tcp"; traddr = "127.0.0.1"; } );
  dhchap_secret_file = "$tmp/host.key"; } );
CONF
chmod 644 "$tmp/host.key"
out=$("$GW" check -c "$tmp/file.conf" 2>&1); st=$?
echo "$out"
[ $st -eq 1 ] || fail "world-readable secret file: exit $st, want 1"
want="$tmp/file.conf:3: targets[0].dhchap_secret_file: $tmp/host.key holds a secret and is readable by group or others (mode 0644); refusing it: chmod go-rwx $tmp/host.key"
printf '%s\n' "$out" | grep -qxF "$want" || fail "missing: $want"
chmod 600 "$tmp/host.key"
"$GW" check -c "$tmp/file.conf" || fail "private secret file refused"

# The secret inline: the configuration file itself must be private.
cat > "$tmp/inline.conf" <<CONF
targets = ( { name = "t1"; subnqn = "nqn.2026-01.org.example:t1";
  paths = ( { transport = "tcp"; traddr = "127.0.0.1"; } );
  dhchap_secret = "$key"; dhchap_ctrl_secret = "$key"; } );
CONF
chmod 640 "$tmp/inline.conf"
out=$("$GW" check -c "$tmp/inline.conf" 2>&1); st=$?
echo "$out"
[ $st -eq 1 ] || fail "group-readable inline secret: exit $st, want 1"
[ "$(printf '%s\n' "$out" | grep -c "^$tmp/inline.conf:3: targets\[0\].dhchap_.*secret: .*(mode 0640)")" -eq 2 ] ||
	fail "want both secrets refused at line 3"
printf '%s\n' "$out" | grep -qF "$key" && fail "the secret was echoed"
chmod 600 "$tmp/inline.conf"
"$GW" check -c "$tmp/inline.conf" || fail "private inline secret refused"

# The CLI: a mistyped key is refused before connecting, not echoed.
bad=${key/KfiaR/KfiaS}
out=$("$GW" bench -a 127.0.0.1 -n nqn.2026-01.org.example:t1 -S "$bad" -T 1 2>&1); st=$?
echo "$out"
[ $st -eq 1 ] || fail "bad -S: exit $st"
printf '%s\n' "$out" | grep -q "dhchap-secret: invalid secret: the key's CRC-32 does not match" ||
	fail "no CRC message"
printf '%s\n' "$out" | grep -qF "$bad" && fail "the secret was echoed"
echo "secrets: permissions and format checked"
