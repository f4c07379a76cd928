#!/usr/bin/env bash
# At most tls_max_handshakes TLS handshakes in progress per listener:
# clients that send STARTTLS and then nothing (half-open handshakes) take
# the slots up to the limit; the next ones are refused at NBD_OPT_STARTTLS
# with an NBD error reply (NBD_REP_ERR_POLICY, "too many TLS handshakes in
# progress") and one log line each, instead of holding the reactors
# (before that fix: the STARTTLS ACK, then a bare EOF, which nbdinfo could
# not explain; now it says "server refused TLS").  Once the idle clients go,
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
NVMF_GATEWAY_LOG=info gw_start nbd --mem 32M --reactors 2 --name disk --nbd-tls on \
	--nbd-tls-psk-file "$tmp/psk/keys.psk" --nbd-tls-max-handshakes 4 "unix:$sock"

# Handshakes that end (done or failed) give their slot back: more of them
# than the limit, one after the other.
for i in 1 2 3 4 5 6; do
	[ "$(nbdinfo --size "$turi")" = 33554432 ] || fail "TLS client $i refused"
	nbdinfo --size "nbds+unix://alice@/disk?socket=$sock&tls-psk-file=$tmp/wrong.psk" \
		> /dev/null 2>&1 && fail "wrong key accepted"
done

# 10 idle half-open clients: STARTTLS acknowledged, then no ClientHello.
# The first 4 take the slots; the next 6 are refused at STARTTLS with an
# NBD error reply that says why (NBD_REP_ERR_POLICY and a message), and
# plaintext options are refused on them from then on (the listener has
# tls = on, which allows plaintext: a refused client must not be pushed
# into it; before that fix NBD_OPT_LIST was answered in plaintext).
mkfifo "$tmp/cmd"
"$NBDPY" - "$sock" "$tmp/cmd" > "$tmp/idle.out" 2>&1 <<'PY' &
import os, sys
sys.path.insert(0, os.environ["TOP"] + "/tests/func/nbd")
from starttls import OPT_LIST, option, reply, starttls
socks, acks, refused = [], 0, []
for i in range(10):
    s, typ, msg = starttls(sys.argv[1])
    if typ == 1:
        acks += 1
    else:
        # Then plaintext is refused on this connection, although the
        # listener allows it (tls = on): a client that only allows TLS
        # would otherwise go on in plaintext, a downgrade anyone holding
        # the slots could force.  NBD_OPT_LIST must get NBD_REP_ERR_TLS_REQD.
        option(s, OPT_LIST)
        t2 = reply(s)[0]
        refused.append("0x%08x %s; then LIST: 0x%08x" % (typ, msg, t2))
    socks.append(s)
print("acks", acks, flush=True)
print("refused", len(refused), flush=True)
for m in refused:
    print("reply", m, flush=True)
print("connected", flush=True)
cmd = open(sys.argv[2])
cmd.readline()
for s in socks:
    s.close()
print("gone", flush=True)
PY
ipid=$!
cleanup_fn stop_pid "$ipid"
exec 9<> "$tmp/cmd"
wait_for 60 'grep -q "^connected" "$tmp/idle.out"' || fail "idle clients: $(cat "$tmp/idle.out")"
cat "$tmp/idle.out"
refusals() { grep -c "STARTTLS refused: 4 TLS handshakes already in progress on this listener (tls_max_handshakes 4)" "$tmp/gw.log"; }
grep -q "^acks 4$" "$tmp/idle.out" || fail "want 4 of 10 idle clients let in: $(cat "$tmp/idle.out")"
grep -q "^refused 6$" "$tmp/idle.out" || fail "want 6 of 10 idle clients refused: $(cat "$tmp/idle.out")"
[ "$(grep -c "^reply 0x80000002 too many TLS handshakes in progress.*; then LIST: 0x80000005$" "$tmp/idle.out")" = 6 ] ||
	fail "the refusals are not NBD_REP_ERR_POLICY with a reason, then plaintext refused: $(cat "$tmp/idle.out")"
[ "$(refusals)" = 6 ] || fail "want 6 refusal lines, got $(refusals)"
# While the 4 slots are held, a TLS client is refused too (that is the
# limit); plaintext option haggling is not affected.
nbdinfo --size "$turi" > /dev/null 2> "$tmp/5th.err" && fail "a 5th handshake was let in"
cat "$tmp/5th.err"
grep -q "server refused TLS" "$tmp/5th.err" || fail "nbdinfo did not say TLS was refused: $(cat "$tmp/5th.err")"
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
