#!/bin/bash
# Case 4: `systemctl stop` ends the service cleanly (exit 0, within the
# unit's TimeoutStopSec), /dev/nbd0 is detached, the controller is shut
# down, and what was written just before the stop is on the target: read
# back from the target's own loop device, past the LVM volume.
. /opt/sysd/lib.sh
is_active || fail "the unit is not active"
pid=$(prop MainPID)
tdev=$(losetup -j /run/nvmet/nqn.2026-12.io.nvmf-gateway.sysd:disk0.img -n -O NAME) &&
	[ -b "$tdev" ] || fail "no loop device under the target's disk0"
head -c 4M /dev/urandom > /run/pattern
# Buffered: the last close of /dev/nbd0 writes it back through the gateway.
dd if=/run/pattern of=/dev/nbd0 bs=1M seek=200 status=none || fail "write to /dev/nbd0"
journal_mark c4
t0=$(date +%s.%N)
systemctl stop "$U" || fail "systemctl stop"
t1=$(date +%s.%N)
echo "systemctl stop took $(echo "$t1 - $t0" | bc 2>/dev/null || awk "BEGIN{print $t1 - $t0}") s"
journal_since c4 -u "$U" | tail -n 25
[ "$(prop ActiveState)" = inactive ] || fail "unit is $(prop ActiveState) after stop"
[ "$(prop Result)" = success ] || fail "Result=$(prop Result)"
[ "$(prop ExecMainStatus)" = 0 ] || fail "exit status $(prop ExecMainStatus)"
! kill -0 "$pid" 2> /dev/null || fail "process $pid still there"
detached nbd0 || fail "/dev/nbd0 still attached after stop"
journal_since c4 -u "$U" | grep -q 'nbd0: detached' || fail "no detach in the journal"
journal_since c4 -u "$U" | grep -q 'shutdown complete' || fail "no controller shutdown in the journal"
dd if="$tdev" bs=1M skip=200 count=4 iflag=direct status=none | cmp - /run/pattern ||
	fail "the target does not hold what was written before the stop"
echo "stopped cleanly; the 4 MiB written before the stop are on the target"
