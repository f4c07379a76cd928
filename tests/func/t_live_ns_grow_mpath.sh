#!/usr/bin/env bash
# A namespace grown, reported by the event of one path while the other
# path's event is late (issue 19, review): the volume grows at once, the
# path that still shows the old size carries none of its I/O until its own
# re-identify, and I/O in the new blocks succeeds all along.  In the ASan
# build the gateway asserts (INVARIANT) that every path still usable for
# the volume shows the new size when the size is published (release store,
# vol_size's acquire load): the marks come first.
set -u
. "$TOP/tests/func/live/lib.sh"
NSC="$TOP/tests/func/live/ns_client.py"
A=nqn.2026-01.io.nvmf-gateway:nsgrow-mp
M=$((1024 * 1024))
tgt_start a "" -s 0 -s 0 --subsys "$A:64M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
[ -n "$p2" ] || fail "the target did not give two ports: $(cat "$tmp/a.ready")"
ctl a ns-resize "$A" 1 32M noaen > /dev/null
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = (
  { name = "t1"; subnqn = "$A"; multipath = "round-robin";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
NVMF_GATEWAY_LOG=info SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
[ "$("$NBDPY" "$NSC" size "$tmp/e1.sock")" = $((32 * M)) ] || fail "e1 does not start at 32 MiB"
# Port 2's controller hears of the growth late; port 1's at once.
ctl a aen-hold 2 on > /dev/null
ctl a ns-resize "$A" 1 64M > /dev/null
gw_wait 'export e1: now 67108864 bytes' 1 30 > /dev/null ||
	fail "the growth was not followed through path 0's event"
gw_wait 'path 1 of target t1 still shows nsid 1 at 65536 blocks' 1 10 > /dev/null ||
	fail "the path whose event is late was not set aside for the volume"
for off in $((40 * M)) $((63 * M)) $((50 * M)) $((60 * M)); do
	r=$("$NBDPY" "$NSC" rw "$tmp/e1.sock" "$off")
	[ "$r" = ok ] || fail "I/O in the new blocks at $off while path 1 is late: $r"
done
ctl a aen-hold 2 off > /dev/null
r=$("$NBDPY" "$NSC" rw "$tmp/e1.sock" $((62 * M)))
[ "$r" = ok ] || fail "I/O in the new blocks after path 1's event: $r"
! grep -q 'invariant broken\|ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log" ||
	fail "invariant or sanitizer report: $(grep -m3 'invariant broken\|ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log")"
gw_alive
gw_stop_within 30
echo pass
