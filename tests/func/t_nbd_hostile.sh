#!/usr/bin/env bash
# Hostile clients: each is logged and cut off, another client and the
# process carry on.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

sock="$tmp/nbd.sock"
gw_start nbd --mem 16M --name disk "unix:$sock"
out=$("$NBDPY" "$TOP/tests/func/nbd/hostile.py" "$sock" 2>&1) || { echo "$out"; cat "$tmp/gw.log"; fail "hostile.py"; }
echo "$out"
echo "$out" | grep -q "^OK hostile" || fail "hostile.py did not finish"
kill -0 "$GW_PID" || fail "the gateway died"
[ "$(nbdinfo --size "nbd+unix:///disk?socket=$sock")" = 16777216 ] || fail "no longer serving"
cat "$tmp/gw.log"
for want in "closing: bad option magic" "closing: option 7 with 2147483647 bytes" \
	"closing: more than 64 options" "closing: bad request magic 0xdeadbeef" \
	"closing: request with a 4294963200-byte payload" "closing: client sent NBD_CMD_DISC"; do
	grep -q "nbd unix:$sock#[0-9]*: $want" "$tmp/gw.log" || fail "log lacks '$want' with the peer"
done
# Each connection's end is logged once.
dups=$(grep -o "nbd unix:$sock#[0-9]*: closing" "$tmp/gw.log" | sort | uniq -d)
[ -z "$dups" ] || fail "a close logged twice: $dups"
# SIGTERM with a client connected and idle: the client is disconnected,
# the gateway exits 0 (gw_stop checks).
"$NBDPY" - "$sock" > "$tmp/idle.out" 2>&1 <<'PY' &
import nbd, sys, time
h = nbd.NBD()
h.set_export_name("disk")
h.connect_unix(sys.argv[1])
print("connected", flush=True)
for _ in range(400):
    try:
        h.pread(512, 0)
    except nbd.Error as e:
        print("disconnected:", e.string, flush=True)
        sys.exit(0)
    time.sleep(0.05)
print("never disconnected", flush=True)
sys.exit(1)
PY
idle=$!
for _ in $(seq 1 100); do grep -q connected "$tmp/idle.out" && break; sleep 0.05; done
grep -q connected "$tmp/idle.out" || fail "idle client did not connect"
gw_stop
wait "$idle" || { cat "$tmp/idle.out"; fail "idle client was not disconnected"; }
cat "$tmp/idle.out"
grep -q "server stopping" "$tmp/gw.log" || fail "stop not logged for the idle client"
echo PASS
