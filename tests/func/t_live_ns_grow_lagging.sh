#!/usr/bin/env bash
# A namespace grown and followed through path 0's event, while path 1's
# event is late; when path 1's event comes, its Identify of the namespace
# fails with a transient status (Command Interrupted), so path 1's table
# still shows the old, smaller size.  That entry is path 1's stale view,
# not the subsystem's word: the volume must serve on through path 0, with
# path 1 left out for it.  Before, every namespace was taken as identified
# by any event of the path, the stale entry read as "shrunk" reported by
# the subsystem, and the healthy, grown export was failed with EIO (found
# by a hostile review).
set -u
. "$TOP/tests/func/live/lib.sh"
NSC="$TOP/tests/func/live/ns_client.py"
A=nqn.2026-01.io.nvmf-gateway:nsgrow-lag
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
ctl a aen-hold 2 on > /dev/null
ctl a ns-resize "$A" 1 64M > /dev/null
gw_wait 'export e1: now 67108864 bytes' 1 30 > /dev/null ||
	fail "the growth was not followed through path 0's event"
# Path 1's event now, its Identify failing once.
ctl a id-ns-fail 1 0x21 > /dev/null
ctl a aen-hold 2 off > /dev/null
gw_wait 'Identify of nsid 1 failed' 1 30 > /dev/null || fail "path 1's event did not come"
sleep 1
! grep -q 'failing the export' "$tmp/gw.log" ||
	fail "a stale entry of the lagging path failed the export: $(grep -m1 'failing the export' "$tmp/gw.log")"
for off in $((8 * M)) $((40 * M)) $((63 * M)); do
	r=$("$NBDPY" "$NSC" rw "$tmp/e1.sock" "$off")
	[ "$r" = ok ] || fail "I/O at $off after path 1's failed Identify: $r"
done
! grep -q 'invariant broken\|ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log" ||
	fail "invariant or sanitizer report: $(grep -m3 'invariant broken\|ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log")"
gw_alive
gw_stop_within 30
echo pass
