#!/usr/bin/env bash
# The target moves the exported namespace to another ANA group (ANACAP
# allows it; nvmet's namespaces/N/ana_grpid does it).  The export must go
# on serving I/O in its new group:
# 1. moved without an event, then the connection drops: after the
#    reconnect Identify Namespace and the ANA log name the new group only.
#    Before the fix the volume still asked for the group it was created
#    with, which no path reported any more: every path read as unusable
#    and I/O failed with EIO at fast_io_fail_tmo.
# 2. moved with an ANA change event, no reconnect: the ANA log lists the
#    namespace under its new group; the gateway follows it at once, and
#    again across a reconnect.
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:regroup
tgt_start a "" -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"

# io_ok WHAT: a write and a read, each answered ok within 30 s (far more
# than fast_io_fail_tmo: an EIO at the deadline shows as EIO, not timeout).
io_ok() {
	local op r
	for op in write read; do
		r=$("$NBDPY" "$LIO" $op "$S" 30)
		echo "$1: $op says $r"
		[ "$r" = ok ] || fail "$op $1: $r (want ok)"
	done
}
io_ok "before any change"

# 1. Group 1 -> 5 with no event, then a reconnect.
ctl a ana-group "$A" 1 5 noaen > /dev/null
io_ok "after the silent move (the path still knows the old group)"
ctl a drop > /dev/null
gw_wait 'path 0 live again' 1 60 > /dev/null || fail "the path did not come back within 60 s"
io_ok "after the reconnect into group 5"
grep -q 'e1: .*now in ANA group 5' "$tmp/gw.log" ||
	fail "the gateway did not log that e1's namespace moved to group 5"

# 2. Group 5 -> 7 with an event: the ANA log alone tells the move.
ctl a ana-group "$A" 1 7 > /dev/null
gw_wait 'e1: .*now in ANA group 7' 1 30 > /dev/null ||
	fail "the gateway did not follow the move to group 7 from the ANA log"
grep -q 'nsid 1 moved from ANA group 5 to 7' "$tmp/gw.log" ||
	fail "the controller's namespace table did not follow the ANA log"
io_ok "after the move to group 7 (ANA log, no reconnect)"
ctl a drop > /dev/null
gw_wait 'path 0 live again' 2 60 > /dev/null || fail "the path did not come back a second time"
io_ok "after the second reconnect, in group 7"
[ "$(grep -c 'now in ANA group' "$tmp/gw.log")" = 2 ] ||
	fail "want one line per move: $(grep 'now in ANA group' "$tmp/gw.log")"
! grep -q 'failed with EIO' "$tmp/gw.log" || fail "the gateway failed I/O"
gw_alive
gw_stop_within 30
echo pass
