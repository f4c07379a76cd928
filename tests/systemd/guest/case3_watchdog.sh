#!/bin/bash
# Case 3: a reactor that stops turning ends the WATCHDOG=1 pings, systemd
# restarts the service (WatchdogSec=), and the new process reattaches
# /dev/nbd0: an ext4 file system (on LVM) mounted on it stays mounted and
# fio, writing through the stall and verifying afterwards, ends without an
# error.  A reactor thread is found by its comm, gw-reactor-N.  SIGSTOP
# to one thread stops its whole thread group, so
# every reactor stalls, the one named included.
. /opt/sysd/lib.sh
is_active || fail "the unit is not active"
attached nbd0 || fail "/dev/nbd0 is not attached"
vgchange -q -ay "$VG" && mkdir -p "$MNT" && mount "/dev/$VG/lv0" "$MNT" || fail "mount"
# A failure must not leave /dev/nbd0 held open: the next cases detach it.
trap 'mountpoint -q "$MNT" && umount "$MNT"; vgchange -q -an "$VG" > /dev/null 2>&1' EXIT
pid=$(prop MainPID) restarts=$(prop NRestarts)
journal_mark c3
dmesg -C
cd /run
# Rate-limited so that the writes span the stall and the restart; the
# verify pass reads everything back afterwards.  24 MiB at 512 KiB/s is
# 48 s of writing, more than the 30 s of WatchdogSec plus the restart (fio,
# behind its rate after the stall, then writes the rest at full speed).
fio --name=wd --filename="$MNT/fio.dat" --size=24M --bs=64k --rw=write \
	--ioengine=psync --fsync=8 --rate=512k --verify=crc32c --verify_fatal=1 \
	--output=/run/fio-wd.txt &
fio_pid=$!
wait_until 120 "fio has written 4 MiB" \
	bash -c '[ "$(stat -c %s '"$MNT"'/fio.dat 2> /dev/null || echo 0)" -ge 4194304 ]'
tid=''
for t in /proc/"$pid"/task/*; do
	c=$(cat "$t/comm")
	echo "task ${t##*/}: $c"
	case $c in gw-reactor-*) tid=${t##*/} ;; esac
done
[ -n "$tid" ] || fail "no reactor thread (comm gw-reactor-N) in $pid"
echo "SIGSTOP to reactor thread $tid of $pid"
t_stop=$SECONDS
kill -STOP "$tid" || fail "kill -STOP"
wait_until 240 "a new main process" bash -c \
	'[ "$(systemctl show -p MainPID --value '"$U"')" != '"$pid"' ] &&
	 [ "$(systemctl show -p ActiveState --value '"$U"')" = active ] &&
	 [ "$(systemctl show -p NRestarts --value '"$U"')" -gt '"$restarts"' ]'
echo "restarted $((SECONDS - t_stop)) s after the stop; NRestarts $(prop NRestarts)"
wait_until 120 "nbd0 reattached in the journal" bash -c \
	". /opt/sysd/lib.sh; journal_since c3 -u $U | grep -q 'nbd0.*reattached\|/dev/nbd0 reattached'"
journal_since c3 -u "$U" | grep -Ei 'watchdog|reattach|abort|Main process|Scheduled restart|Started' | head -20
journal_since c3 -u "$U" | grep -q "Failed with result 'watchdog'" || fail "systemd did not end it for the watchdog"
wait "$fio_pid"; rc=$?
cat /run/fio-wd.txt
[ $rc = 0 ] && grep -q 'err= 0' /run/fio-wd.txt || fail "fio failed (exit $rc)"
mountpoint -q "$MNT" || fail "the file system is no longer mounted"
! dmesg | grep -Ei 'I/O error|EXT4-fs error|Buffer I/O' || fail "I/O errors in the kernel log"
rm -f "$MNT/fio.dat"
umount "$MNT" || fail umount
fsck.ext4 -n -f "/dev/$VG/lv0" || fail "fsck finds errors"
vgchange -q -an "$VG" || fail "vgchange -an"
echo "watchdog restart: fio verified, fs clean"
