#!/usr/bin/env bash
# DH-HMAC-CHAP secrets kept from other users: --dhchap-secret-file and
# $NVMF_GATEWAY_DHCHAP_SECRET are taken; a secret file (CLI or config) owned
# by another user is refused even at mode 0600; a secret on the command line
# is overwritten in /proc/PID/cmdline with a warning, and one from the
# environment is gone from /proc/PID/environ.  (That the key authenticates
# is shown against the kernel target: tests/interop/cases_auth.sh.)
set -u
. "$TOP/tests/func/nbd/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a file owned by another user)"
# nvme gen-dhchap-key -s 000102..1f -m 0, and a 48-byte one (bytes 0x20..0x4f)
key='DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:'
ckey='DHHC-1:00:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj9AQUJDREVGR0hJSktMTU5PhcdKRQ==:'
sock="$tmp/s.sock"
served() { /usr/bin/python3 "$TOP/tests/func/access/probe.py" "unix:$sock"; }
nul_has() { tr '\0' '\n' < "$1" | grep -qF -- "$2"; }

# A file: private and root's is taken; another user's is not.
echo "$key" > "$tmp/k"
chmod 600 "$tmp/k"
chown 65534 "$tmp/k"
out=$(timeout 10 "$GW" nbd --mem 16M --dhchap-secret-file "$tmp/k" "unix:$sock" 2>&1) && fail "a file of uid 65534 was taken"
echo "$out"
echo "$out" | grep -qxF "nvmf-gateway: --dhchap-secret-file: $tmp/k holds a secret and is owned by uid 65534, neither root nor the gateway's uid 0; refusing it" ||
	fail "no owner message"
cat > "$tmp/gw.conf" << CONF
targets = ( { name = "t1"; subnqn = "nqn.2026-01.org.example:t1";
  paths = ( { transport = "tcp"; traddr = "127.0.0.1"; } );
  dhchap_secret_file = "$tmp/k"; } );
CONF
out=$("$GW" check -c "$tmp/gw.conf" 2>&1) && fail "check took a file of uid 65534"
echo "$out" | grep -qF "$tmp/gw.conf:3: targets[0].dhchap_secret_file: $tmp/k holds a secret and is owned by uid 65534, neither root nor the gateway's uid 0" ||
	fail "check: no owner message: $out"
chown 0 "$tmp/k"
"$GW" check -c "$tmp/gw.conf" > /dev/null || fail "check refused root's private file"
gw_start nbd --mem 16M --dhchap-secret-file "$tmp/k" "unix:$sock"
[ "$(served)" = served ] || fail "not served with a secret file"
gw_stop
echo "secret file: owner checked"

# The environment: read, then gone from /proc/PID/environ; a bad one named.
out=$(NVMF_GATEWAY_DHCHAP_SECRET=${key/KfiaR/KfiaS} timeout 10 "$GW" nbd --mem 16M "unix:$sock" 2>&1) &&
	fail "a bad key in the environment was taken"
echo "$out" | grep -q '^nvmf-gateway: \$NVMF_GATEWAY_DHCHAP_SECRET: invalid secret: ' || fail "env: $out"
echo "$out" | grep -qF "${key/KfiaR/KfiaS}" && fail "the secret was echoed"
NVMF_GATEWAY_DHCHAP_SECRET=$key NVMF_GATEWAY_DHCHAP_CTRL_SECRET=$ckey gw_start nbd --mem 16M "unix:$sock"
nul_has /proc/$GW_PID/environ "$key" && fail "the host key is in /proc/$GW_PID/environ"
nul_has /proc/$GW_PID/environ "$ckey" && fail "the ctrl key is in /proc/$GW_PID/environ"
gw_stop
echo "environment: taken, then emptied"

# The command line: scrubbed, with a warning naming the option.
gw_start nbd --mem 16M -S "$key" --dhchap-ctrl-secret="$ckey" "unix:$sock"
tr '\0' ' ' < /proc/$GW_PID/cmdline; echo
nul_has /proc/$GW_PID/cmdline "$key" && fail "-S: the key is in /proc/$GW_PID/cmdline"
nul_has /proc/$GW_PID/cmdline "${ckey#DHHC-1:00:}" && fail "-C: the key is in /proc/$GW_PID/cmdline"
nul_has /proc/$GW_PID/cmdline "-S" || fail "cmdline lost its -S"
[ "$(tr '\0' '\n' < /proc/$GW_PID/cmdline | wc -l)" = 8 ] || fail "cmdline has another shape"
for o in "-S/--dhchap-secret" "-C/--dhchap-ctrl-secret"; do
	grep -qF "the secret given with $o was readable by every local user in /proc/$GW_PID/cmdline (ps) until now" "$tmp/gw.log" ||
		fail "no warning for $o"
done
[ "$(served)" = served ] || fail "not served after the scrub"
gw_stop
echo "command line: scrubbed, warned"
