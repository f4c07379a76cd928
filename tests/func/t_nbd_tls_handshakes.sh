#!/usr/bin/env bash
# At most tls_max_handshakes TLS handshakes in progress per listener:
# clients that send STARTTLS and then nothing (half-open handshakes) take
# the slots up to the limit; the next ones are closed at once with one log
# line each instead of holding the reactors.  Once the idle clients go,
# TLS clients are served again (the slots are given back whether a
# handshake succeeds, fails or is abandoned).  Before the fix there was no
# limit (and no --nbd-tls-max-handshakes).
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo openssl
sock="$tmp/nbd.sock"
mkdir -m 700 "$tmp/psk"
(umask 077; echo "alice:$(openssl rand -hex 32)" > "$tmp/psk/keys.psk"
 echo "alice:$(openssl rand -hex 32)" > "$tmp/wrong.psk")
turi="nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/psk/keys.psk"
NVMF_GATEWAY_LOG=info gw_start nbd --mem 32M --reactors 2 --name disk --nbd-tls require \
	--nbd-tls-psk-file "$tmp/psk/keys.psk" --nbd-tls-max-handshakes 4 "unix:$sock"

# Handshakes that end (done or failed) give their slot back: more of them
# than the limit, one after the other.
for i in 1 2 3 4 5 6; do
	[ "$(nbdinfo --size "$turi")" = 33554432 ] || fail "TLS client $i refused"
	nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/wrong.psk" \
		> /dev/null 2>&1 && fail "wrong key accepted"
done

# 10 idle half-open clients: STARTTLS acknowledged, then no ClientHello.
# Once the gateway has logged its refusals, the client counts which of
# its sockets were closed (EOF already there), then holds the rest open
# until told to go.
mkfifo "$tmp/cmd"
"$NBDPY" - "$sock" "$tmp/cmd" > "$tmp/idle.out" 2>&1 <<'PY' &
import socket, struct, sys, select
socks = []
for i in range(10):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    g = b""
    while len(g) < 18:
        g += s.recv(18 - len(g))
    s.sendall(struct.pack(">I", 3) + struct.pack(">QII", 0x49484156454F5054, 5, 0))
    r = b""
    while len(r) < 20:
        d = s.recv(20 - len(r))
        if not d:
            break
        r += d
    assert len(r) == 20 and struct.unpack(">I", r[12:16])[0] == 1, "no STARTTLS ACK"
    socks.append(s)
print("connected", flush=True)
cmd = open(sys.argv[2])
cmd.readline()
# The refusals are logged just before the close: wait for 6 EOFs (10 s
# at most), then a little more for any wrong extra one.
closed, live, wait = 0, list(socks), 10.0
while live:
    rd, _, _ = select.select(live, [], [], wait)
    if not rd:
        break
    for s in rd:
        live.remove(s)
        if s.recv(1) == b"":
            closed += 1
    if closed >= 6:
        wait = 0.5
print("closed", closed, flush=True)
cmd.readline()
for s in socks:
    s.close()
print("gone", flush=True)
PY
ipid=$!
cleanup_fn stop_pid "$ipid"
exec 9> "$tmp/cmd"
wait_for 60 'grep -q "^connected" "$tmp/idle.out"' || fail "idle clients: $(cat "$tmp/idle.out")"
refusals() { grep -c "TLS handshakes already in progress on this listener (tls_max_handshakes 4)" "$tmp/gw.log"; }
wait_for 30 '[ "$(refusals)" -ge 6 ]' || fail "want 6 refusal lines, got $(refusals)"
echo check >&9
wait_for 30 'grep -q "^closed" "$tmp/idle.out"' || fail "idle clients: $(cat "$tmp/idle.out")"
cat "$tmp/idle.out"
grep -q "^closed 6$" "$tmp/idle.out" || fail "want 6 of 10 idle clients closed: $(cat "$tmp/idle.out")"
[ "$(refusals)" = 6 ] || fail "want 6 refusal lines, got $(refusals)"
# While the 4 slots are held, a TLS client is refused too (that is the
# limit); plaintext option haggling is not affected.
nbdinfo --size "$turi" > /dev/null 2>&1 && fail "a 5th handshake was let in"
wait_for 10 '[ "$(refusals)" = 7 ]' || fail "the 5th handshake was not refused by the limit: $(refusals) refusals"
echo go >&9
exec 9>&-
wait "$ipid" || fail "the idle clients: $(cat "$tmp/idle.out")"
# The abandoned handshakes gave their slots back when their clients went
# (well before the 30 s handshake deadline would have).
wait_for 5 '[ "$(nbdinfo --size "$turi" 2> /dev/null)" = 33554432 ]' ||
	fail "TLS clients still refused after the idle ones went"
gw_alive
gw_stop
echo pass
