#!/bin/bash
# Case 1: `systemctl enable --now` goes activating -> active (running) only
# once the gateway has sent READY=1: the target is slowed down (netem delay on
# lo) so that the wait is long enough to watch; while it lasts the unit is
# in SubState "start" (past ExecStartPre) with /dev/nbd0 not attached yet
# (Type=simple would go from start-pre straight to running).  Polls are
# slow under TCG on a loaded host: one observation is the proof.
# Before all that, the package's unit was skipped at boot for want of the
# configuration (ConditionPathExists of its drop-in).
# Then /dev/nbd0 carries LVM and ext4: files written, read back after a
# remount with the caches dropped.
. /opt/sysd/lib.sh
# The package enables the unit at install, and its drop-in conditions it on
# the configuration, which the image does not have: at boot it was skipped,
# not started and not failed.  Then the admin writes the file.
[ ! -e "$CONF" ] || fail "$CONF exists before the admin wrote it"
if dpkg-query -W nvmf-gateway > /dev/null 2>&1; then
	[ "$(systemctl is-enabled "$U")" = enabled ] || fail "the package did not enable $U"
	[ "$(prop ActiveState)/$(prop ConditionResult)" = inactive/no ] ||
		fail "without a configuration the unit is $(prop ActiveState), condition $(prop ConditionResult)"
	journalctl -b -o cat -u "$U" | grep 'unmet condition' || fail "no skip at boot in the journal"
fi
install -m 0600 /opt/sysd/nvmf-gateway.conf "$CONF" || fail "cannot write $CONF"
tc qdisc add dev lo root netem delay 400ms || fail "netem"
trap 'tc qdisc del dev lo root 2> /dev/null' EXIT
journal_mark c1
systemctl --no-block enable --now "$U" || fail "enable --now"
t0=$SECONDS seen_start=0
while :; do
	st="$(prop ActiveState)/$(prop SubState)"
	att=no
	attached nbd0 && att=yes
	case "$st" in
	activating/start)
		[ $att = no ] && seen_start=$((seen_start + 1)) ;;
	active/running)
		echo "active (running) after $((SECONDS - t0)) s; nbd0 attached: $att"
		[ $att = yes ] || fail "active before /dev/nbd0 was attached"
		break ;;
	failed/* | inactive/dead)
		[ $((SECONDS - t0)) -lt 5 ] || { journal_since c1 -u "$U"; fail "unit is $st"; } ;;
	esac
	[ $((SECONDS - t0)) -lt 300 ] || fail "not active within 300 s (last $st)"
	sleep 0.1
done
tc qdisc del dev lo root
echo "polls in activating/start with nbd0 not attached: $seen_start"
[ "$seen_start" -ge 1 ] || fail "the unit was never seen waiting for READY=1"
systemctl is-enabled "$U" | grep -qx enabled || fail "not enabled"
systemctl status --no-pager "$U" > /run/sysd-status; cat /run/sysd-status
grep -q 'Active: active (running)' /run/sysd-status || fail "status"
journal_since c1 -u "$U" | grep -E 'attached|READY|Started|Starting' | head -20

# LVM and ext4 on the device from the configuration.
pvcreate -q -y /dev/nbd0 && vgcreate -q "$VG" /dev/nbd0 && lvcreate -q -y -n lv0 -L 128M "$VG" ||
	fail "LVM on /dev/nbd0"
mkfs.ext4 -q "/dev/$VG/lv0" || fail mkfs
mkdir -p "$MNT" && mount "/dev/$VG/lv0" "$MNT" || fail mount
for i in $(seq 1 12); do head -c $((i * 41 * 1024 + 7)) /dev/urandom > "$MNT/f$i"; done
(cd "$MNT" && sha256sum f* > /run/sysd-sums)
umount "$MNT" && vgchange -q -an "$VG" && sync && echo 3 > /proc/sys/vm/drop_caches || fail "umount"
vgchange -q -ay "$VG" && mount "/dev/$VG/lv0" "$MNT" || fail "remount"
(cd "$MNT" && sha256sum --quiet -c /run/sysd-sums) || fail "files differ after the remount"
umount "$MNT" && vgchange -q -an "$VG" || fail "final umount"
pvs --noheadings -o pv_name,vg_name | grep -q "/dev/nbd0 *$VG" || fail "pvs does not list nbd0 in $VG"
echo "LVM + ext4 on /dev/nbd0: 12 files verified"
