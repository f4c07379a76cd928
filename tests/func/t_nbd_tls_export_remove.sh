#!/usr/bin/env bash
# export-remove of a TLS export while handshakes are in progress on both
# reactors (clients that sent STARTTLS and then nothing): the export goes,
# the daemon and its other export carry on.  A connection gave its
# handshake slot back after telling the server it was gone, when reactor 0
# may already have freed the listener's TLS state (a use-after-free across
# reactors); the ASan build's invariant (no handshake counted when the
# listener is freed) catches it on every run.
set -u
. "$TOP/tests/func/control/lib.sh"
need openssl nbdinfo
nqn=nqn.2014-08.org.nvmf-gateway:tls-rm
mkdir -m 700 "$tmp/psk"
psk="$tmp/psk/keys.psk"
(umask 077; echo "alice:$(openssl rand -hex 32)" > "$psk")
target_start "$nqn:16M"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "t"; subnqn = "$nqn";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "disk"; target = "t";
    nbd = { listen = "unix:$tmp/disk.sock"; tls = "require"; tls_psk_file = "$psk"; }; },
  { name = "other"; target = "t"; read_only = true; nbd = { listen = "unix:$tmp/other.sock"; }; } );
CONF
gw_start run "$tmp/gw.conf"

/usr/bin/python3 - "$tmp/disk.sock" > "$tmp/idle.out" 2>&1 << 'PY' &
import os, sys, time
sys.path.insert(0, os.environ["TOP"] + "/tests/func/nbd")
from starttls import starttls
socks = []
for i in range(8):
    socks.append(starttls(sys.argv[1])[0])  # asserts a STARTTLS reply came
print("connected", flush=True)
time.sleep(30)
PY
ipid=$!
cleanup_fn stop_pid "$ipid"
wait_for 20 'grep -q connected "$tmp/idle.out"' || fail "idle clients: $(cat "$tmp/idle.out")"
"$GW" export-remove disk -s "$ctl" | grep -qx ok || fail "export-remove"
wait_for 20 '! [ -S "$tmp/disk.sock" ]' || fail "disk's socket stays"
gw_alive
[ "$(nbdinfo --size "nbd+unix:///?socket=$tmp/other.sock")" = 16777216 ] || fail "the other export"
! grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer\|invariant broken' "$tmp/gw.log" ||
	fail "sanitizer or invariant report"
gw_stop
echo "TLS export removed during handshakes: ok"
