#!/usr/bin/env bash
# A namespace replaced under the same NSID, reported by the event of one
# path while the other path's event is late (issue 19): NSIDs belong to
# the subsystem, so the other path reaches the same new namespace.  The
# export must fail at the first event, not go on serving the new volume's
# blocks through the path whose event has not come yet.  Before the fix
# only the reporting path was put aside, and I/O went on through the other.
set -u
. "$TOP/tests/func/live/lib.sh"
NSC="$TOP/tests/func/live/ns_client.py"
A=nqn.2026-01.io.nvmf-gateway:nsident-mp
tgt_start a "" -s 0 -s 0 --subsys "$A:32M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
[ -n "$p2" ] || fail "the target did not give two ports: $(cat "$tmp/a.ready")"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = (
  { name = "t1"; subnqn = "$A"; multipath = "round-robin";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
r=$("$NBDPY" "$NSC" rw "$tmp/e1.sock" 4096)
[ "$r" = ok ] || fail "I/O before the change: $r"
# Port 2's controller hears of the change late; port 1's at once.
ctl a aen-hold 2 on > /dev/null
ctl a ns-identity "$A" 1 > /dev/null
gw_wait 'e1: .*nsid 1: another namespace' 1 30 > /dev/null ||
	fail "the replaced namespace was not seen through path 0's event"
r=$("$NBDPY" "$NSC" rw "$tmp/e1.sock" 4096)
echo "I/O after path 0's event, path 1's still held: $r"
[ "$r" = EIO ] || fail "the export served on through the path whose event is late: $r"
ctl a aen-hold 2 off > /dev/null
gw_alive
gw_stop_within 30
echo pass
