#!/usr/bin/env bash
# nbd_resize.sh GW [tcp|rdma] (in the guest): issue 19's grown namespace through the
# kernel NBD device.  A 64 MiB namespace of its own subsystem is attached as
# /dev/nbd7 with ext4 mounted on it and fio verify running in a file there;
# the backing file is grown to 128 MiB, the loop device told (losetup -c)
# and nvmet's namespaces/1/revalidate_size written, which sends the
# Namespace Attribute Changed event.  The device shows the new size while
# mounted, resize2fs grows ext4 online, fio ends with no error, fsck is
# clean; a gateway killed and started again reattaches at 128 MiB.  Then
# LVM on it: grown again to 192 MiB under an active VG, pvresize takes the
# new size online, the LV and its ext4 grow into it, data intact.
set -eu -o pipefail
GW=$1
# rdma: nvmet's port 2 (soft-RoCE, the same address), the gateway over it.
NBD_TR=${2:-tcp}
case $NBD_TR in tcp) port=1 ;; rdma) port=2 ;; *) exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd
nqn=nqn.2014-08.org.nvmf-gateway:interop-resize${NBD_TR#tcp}
img=$NVMET_WORK/$nqn.img
nvmet_subsys $nqn 64M 4096
nvmet_link $nqn $port
loopdev=$(losetup -j "$img" -n -O NAME)

nbd_start "$nqn" /dev/nbd7 resize1
[ "$(blockdev --getsize64 /dev/nbd7)" = $((64 << 20)) ]
mkfs.ext4 -q -F /dev/nbd7
mkdir -p /tmp/nbd-mnt
mount /dev/nbd7 /tmp/nbd-mnt
fio --name=nbd-resize --filename=/tmp/nbd-mnt/fio.dat --direct=1 --ioengine=libaio \
	--rw=randwrite --bs=4k --iodepth=8 --verify=crc32c --verify_fatal=1 \
	--size=8M --output="$NBD_LOGS/fio-resize.txt" &
fio_pid=$!
sleep 2
kill -0 $fio_pid # still running when the namespace grows
truncate -s 128M "$img"
losetup -c "$loopdev"
echo 1 > "$NVMET/subsystems/$nqn/namespaces/1/revalidate_size"
t0=$SECONDS
for _ in $(seq 600); do
	[ "$(blockdev --getsize64 /dev/nbd7)" = $((128 << 20)) ] && break
	sleep 0.1
done
echo "/dev/nbd7: $(blockdev --getsize64 /dev/nbd7) bytes $((SECONDS - t0)) s after revalidate_size"
[ "$(blockdev --getsize64 /dev/nbd7)" = $((128 << 20)) ]
grep -q 'nbd7: resized live from 67108864 to 134217728 bytes' "$NBD_LOG"
resize2fs /dev/nbd7
df -k /tmp/nbd-mnt
[ "$(df -k --output=size /tmp/nbd-mnt | tail -1)" -gt $((100 * 1024)) ]
wait $fio_pid
cat "$NBD_LOGS/fio-resize.txt"
grep -q 'err= 0' "$NBD_LOGS/fio-resize.txt"
umount /tmp/nbd-mnt
fsck.ext4 -fn /dev/nbd7
# A restart after the growth: the device reattached at the live size.
kill -9 "$GW_PID"
wait "$GW_PID" || true
GW_PID=
nbd_start "$nqn" /dev/nbd7 resize2
grep -q '/dev/nbd7 reattached' "$NBD_LOG"
grep -q "export '.*' (134217728 bytes) reattached to /dev/nbd7" "$NBD_LOG"
[ "$(blockdev --getsize64 /dev/nbd7)" = $((128 << 20)) ]
fsck.ext4 -fn /dev/nbd7
# LVM on the device (the Proxmox way): the namespace grows under an active
# VG with a mounted LV, and pvresize takes the new size online.
mkdir -p /tmp/lvm/backup /tmp/lvm/archive
C=(--config "$LVM_CONF")
pvcreate "${C[@]}" -ff -y /dev/nbd7
NBD_VG=resizevg
vgcreate "${C[@]}" "$NBD_VG" /dev/nbd7
lvcreate "${C[@]}" -y -L 64M -n lv0 "$NBD_VG"
mkfs.ext4 -q -F "/dev/$NBD_VG/lv0"
mount "/dev/$NBD_VG/lv0" /tmp/nbd-mnt
head -c 8M /dev/urandom > /tmp/lvm-data
cp /tmp/lvm-data /tmp/nbd-mnt/data
sync
pv_before=$(pvs "${C[@]}" --noheadings --units b --nosuffix -o pv_size /dev/nbd7 | tr -d ' ')
truncate -s 192M "$img"
losetup -c "$loopdev"
echo 1 > "$NVMET/subsystems/$nqn/namespaces/1/revalidate_size"
for _ in $(seq 600); do
	[ "$(blockdev --getsize64 /dev/nbd7)" = $((192 << 20)) ] && break
	sleep 0.1
done
[ "$(blockdev --getsize64 /dev/nbd7)" = $((192 << 20)) ]
pvresize "${C[@]}" /dev/nbd7
pv_after=$(pvs "${C[@]}" --noheadings --units b --nosuffix -o pv_size /dev/nbd7 | tr -d ' ')
echo "PV: $pv_before -> $pv_after bytes"
[ "$pv_after" -gt $((pv_before + (56 << 20))) ]
lvextend "${C[@]}" -L +32M "$NBD_VG/lv0"
resize2fs "/dev/$NBD_VG/lv0"
cmp /tmp/lvm-data /tmp/nbd-mnt/data
umount /tmp/nbd-mnt
fsck.ext4 -fn "/dev/$NBD_VG/lv0"
vgchange "${C[@]}" -an "$NBD_VG"
NBD_VG=
nbd_stop
nbd_detached /dev/nbd7
nvmet_unlink $nqn $port
