#!/usr/bin/env bash
# Start and end: a stale mount left by a gateway killed with -9 is cleaned
# up by the next start (with a log line); -d returns 0 only once the mount
# is usable and prints the daemon's pid; umount ends the daemon cleanly.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require

gw_start mount --mem 4M:4096 --name disk "$MNT"
echo hello | dd of="$MNT/disk" conv=notrunc status=none
kill -9 "$GW_PID"
wait "$GW_PID" 2> /dev/null
GW_PID=
out=$(stat "$MNT" 2>&1) && fail "the mount of a killed gateway still answers"
# ENOTCONN, or ECONNABORTED while the kernel is still aborting the connection.
case $out in *"not connected"* | *"connection abort"*) ;; *) fail "stale mount: '$out', want ENOTCONN or ECONNABORTED" ;; esac

gw_start mount --mem 4M:4096 --name disk "$MNT"
grep -q "stale mount" "$T/gw.log" || fail "no log line about the stale mount"
[ "$(stat -c %s "$MNT/disk")" = $((4 << 20)) ] || fail "the new mount does not work"
gw_stop

# -d: the parent exits 0 once the mount is usable and prints the pid
pid=$("$GW" mount -d --mem 4M:4096 --name disk "$MNT" 2> "$T/gw.log") ||
	{ cat "$T/gw.log"; fail "mount -d failed"; }
GW_PID=$pid
[ -n "$pid" ] && kill -0 "$pid" || fail "no daemon pid (got '$pid')"
[ "$(stat -c %s "$MNT/disk")" = $((4 << 20)) ] || fail "not usable when -d returned"
[ "$(grep " $MNT " /proc/mounts | awk '{print $3}')" = fuse.nvmf-gateway ] ||
	fail "not a fuse.nvmf-gateway mount"
umount "$MNT" || fail "umount failed"
for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
kill -0 "$pid" 2> /dev/null && fail "the daemon did not exit after umount"
GW_PID=
cat "$T/gw.log"
grep -q "stopped" "$T/gw.log" || fail "no clean stop in the daemon's log"

# -d with a mountpoint that cannot work: the parent says so, exit 1
"$GW" mount -d --mem 4M "$T/nonexistent" 2> "$T/err.log" && fail "-d on a missing dir exited 0"
cat "$T/err.log"
echo "lifecycle: OK"
