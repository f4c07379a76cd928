#!/usr/bin/env bash
# A reload re-reads the NBD listener's PSK file when its content changed
# (same path): the old key is refused and the new one accepted from then
# on, while a session that began with the old key goes on.  A reload that
# finds the file malformed is refused with the file and line named, and
# the keys in use stay.  Before the fix only the path was compared: the old
# key went on working until a restart.
set -u
. "$TOP/tests/func/control/lib.sh"
need nbdinfo openssl jq
NBDPY=/usr/bin/python3
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"
nqn=nqn.2014-08.org.nvmf-gateway:tls-reload
mkdir -m 700 "$tmp/psk"
psk="$tmp/psk/keys.psk"
old="$tmp/old.psk"
(umask 077; echo "alice:$(openssl rand -hex 32)" > "$psk"; cp "$psk" "$old")
sock="$tmp/nbd.sock"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "t"; subnqn = "$nqn";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "PORT"; } ); } );
exports = ( { name = "disk"; target = "t";
    nbd = { listen = "unix:$sock"; tls = "require"; tls_psk_file = "$psk"; }; } );
CONF
target_start "$nqn:16M"
sed -i "s/PORT/$port/" "$tmp/gw.conf"
gw_start run "$tmp/gw.conf"
size() { nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$1" 2> /dev/null; }
[ "$(size "$old")" = 16777216 ] || fail "the first key does not work"

# A session that began with the old key; it reads again after the reload.
mkfifo "$tmp/go"
"$NBDPY" - "$sock" "$old" "$tmp/go" > "$tmp/session.out" 2>&1 <<'PY' &
import sys, nbd
h = nbd.NBD()
h.set_tls(nbd.TLS_REQUIRE)
h.set_tls_username("alice")
h.set_tls_psk_file(sys.argv[2])
h.set_export_name("disk")
h.connect_unix(sys.argv[1])
h.pwrite(b"\x5a" * 4096, 0)
print("connected", flush=True)
open(sys.argv[3]).read()  # the reload is done
assert h.pread(4096, 0) == b"\x5a" * 4096
h.shutdown()
print("OK session")
PY
spid=$!
cleanup_fn stop_pid "$spid"
wait_for 30 'grep -q connected "$tmp/session.out"' || fail "the session did not start: $(cat "$tmp/session.out")"

(umask 077; echo "alice:$(openssl rand -hex 32)" > "$psk.new")
mv "$psk.new" "$psk"
"$GW" reload -s "$ctl" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
size "$old" > /dev/null && fail "the old key still works after the reload"
[ "$(size "$psk")" = 16777216 ] || fail "the new key is refused after the reload"
echo "reload: old key refused, new key accepted"
grep -q "export disk: NBD TLS keys re-read ($psk changed)" "$tmp/gw.log" ||
	fail "no line for the keys re-read"
echo done > "$tmp/go"
wait "$spid" || fail "the session begun with the old key broke: $(cat "$tmp/session.out")"
grep -q "OK session" "$tmp/session.out" || fail "session: $(cat "$tmp/session.out")"
echo "a session begun with the old key went on after the reload"

# The same content again: nothing is re-read.
"$GW" reload -s "$ctl" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
[ "$(grep -c "NBD TLS keys re-read" "$tmp/gw.log")" = 1 ] || fail "unchanged keys re-read"

# A malformed file: the reload is refused with its file and line, the keys
# in use stay.
cp "$psk" "$tmp/good.psk"
(umask 077; { echo "# keys"; echo "alice:zz"; } > "$psk.new")
mv "$psk.new" "$psk"
"$GW" reload -s "$ctl" > "$tmp/reload.out" 2>&1 && fail "a malformed key file was taken"
cat "$tmp/reload.out"
grep -qF "$psk:2: the key is not an even number of hex digits" "$tmp/reload.out" ||
	fail "the refusal does not name the file and line: $(cat "$tmp/reload.out")"
[ "$(size "$tmp/good.psk")" = 16777216 ] || fail "the keys in use were dropped by a refused reload"
echo "malformed key file: reload refused with the file and line; keys kept"

# SIGHUP does the same.
(umask 077; echo "alice:$(openssl rand -hex 32)" > "$psk.new")
mv "$psk.new" "$psk"
kill -HUP "$GW_PID"
wait_for 30 '[ "$(grep -c "NBD TLS keys re-read" "$tmp/gw.log")" = 2 ]' ||
	fail "SIGHUP did not re-read the changed keys"
[ "$(size "$psk")" = 16777216 ] || fail "the key read at SIGHUP is refused"
size "$tmp/good.psk" > /dev/null && fail "the key replaced at SIGHUP still works"
echo "SIGHUP: the changed keys re-read"
gw_stop
echo "OK"
