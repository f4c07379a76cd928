#!/usr/bin/env bash
# I/O waiting for a dead target does not hold the buffer budget from the
# exports of other targets (found by a hostile review): target ta's only
# port goes down with ctrl_loss_tmo = -1, two NBD connections of its
# export a each send 8 reads of 4 MiB, which wait for a path.  Before,
# each took its 32 MiB share, the whole 64 MiB budget, and a 1 MiB read of
# export b (target tb, healthy) waited until ta came back.  Now the I/O
# waiting for ta's path holds at most a quarter of the budget, b's read is
# served at once, and when ta's port comes back every read of a completes
# with the right data.
set -u
. "$TOP/tests/func/resil/lib.sh"
A=nqn.2026-01.io.nvmf-gateway:pathwait-a
B=nqn.2026-01.io.nvmf-gateway:pathwait-b
tgt_start a "" -s 0 -s 0 --subsys "$A:96M" --subsys "$B:32M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control";
  buffer_budget = "64M"; };
targets = (
  { name = "ta"; subnqn = "$A"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = -1; },
  { name = "tb"; subnqn = "$B"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } ); } );
exports = (
  { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; },
  { name = "b"; target = "tb"; nsid = 1; nbd = { listen = "unix:$tmp/b.sock"; }; } );
CONF
SOCKS="$tmp/a.sock $tmp/b.sock" gw_start run "$tmp/gw.conf"

# 64 MiB of a known pattern on a, read back later.
"$NBDPY" - "$tmp/a.sock" << 'PY' || fail "writing the pattern to a"
import nbd, sys
h = nbd.NBD(); h.set_export_name("a"); h.connect_unix(sys.argv[1])
for i in range(16):
    h.pwrite(bytes([i + 1]) * (4 << 20), i << 22)
h.flush(); h.shutdown()
PY

ctl a port 1 down > /dev/null
gw_wait 'ta/path0: lost' 1 30 > /dev/null || fail "the gateway did not see ta's loss within 30 s"
# Two connections, 8 reads of 4 MiB each, all sent at once; they complete
# when the port is back (within a generous 120 s), data compared.
"$NBDPY" - "$tmp/a.sock" > "$tmp/parked.out" 2>&1 << 'PY' &
import nbd, sys, time
hs = []
for c in range(2):
    h = nbd.NBD(); h.set_export_name("a"); h.connect_unix(sys.argv[1]); hs.append(h)
cmds = []
for c, h in enumerate(hs):
    for k in range(8):
        i = c * 8 + k
        buf = nbd.Buffer(4 << 20)
        cmds.append((h, h.aio_pread(buf, i << 22), buf, i))
print("SENT", flush=True)
end = time.monotonic() + 120
left = list(cmds)
while left and time.monotonic() < end:
    for h in hs:
        h.poll(0)
    for c in list(left):
        if c[0].aio_command_completed(c[1]):
            left.remove(c)
    time.sleep(0.01)
if left:
    print("NOT DONE", len(left), flush=True); sys.exit(1)
for h, _, buf, i in cmds:
    if buf.to_bytearray() != bytes([i + 1]) * (4 << 20):
        print("MISMATCH", i, flush=True); sys.exit(1)
print("OK parked reads", flush=True)
PY
ppid=$!
cleanup_fn stop_var ppid
for _ in $(seq 300); do grep -q SENT "$tmp/parked.out" && break; sleep 0.1; done
grep -q SENT "$tmp/parked.out" || { cat "$tmp/parked.out"; fail "the reads of a were not sent"; }
# They reach the gateway: at least the quarter of the budget it lets them
# hold (16 MiB), then a moment for the rest to be read if they would be.
for _ in $(seq 300); do [ "$(buffers used_bytes)" -ge $((16 << 20)) ] && break; sleep 0.1; done
sleep 2
used=$(buffers used_bytes)
echo "with a's reads waiting: $((used >> 20)) MiB of the 64 MiB budget used"

# b's read: at once (20 s is generous); before, it waited for ta.
t0=$(mono)
timeout 20 "$NBDPY" -c '
import nbd, sys
h = nbd.NBD(); h.set_export_name("b"); h.connect_unix(sys.argv[1])
h.pwrite(bytes([7]) * (1 << 20), 1 << 20)
assert h.pread(1 << 20, 1 << 20) == bytes([7]) * (1 << 20), "data"
h.shutdown()' "$tmp/b.sock" || fail "a 1 MiB read of b waited behind a's reads waiting for ta (exit $?)"
echo "b served in $(echo "$(mono) - $t0" | bc -l) s beside a's waiting reads"
[ "$used" -le $((48 << 20)) ] || fail "a's waiting reads hold $((used >> 20)) MiB of the budget"
gw_alive

# ta back: every read of a completes, data compared.
ctl a port 1 up > /dev/null
wait "$ppid"
st=$?
ppid=
cat "$tmp/parked.out"
[ $st = 0 ] && grep -q "OK parked reads" "$tmp/parked.out" || fail "a's reads after ta came back (exit $st)"
gw_alive
gw_stop_within 30
echo pass
