#!/usr/bin/env bash
# nbd_lvm.sh GW NQN (in the guest): Proxmox's path on /dev/nbdN: a PV, a VG,
# a 32 MiB LV, ext4 on the LV, files verified after a remount.
set -eu -o pipefail
GW=$1 nqn=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd
mkdir -p /tmp/lvm/backup /tmp/lvm/archive

nbd_start "$nqn" auto lvm
C=(--config "$LVM_CONF")
pvcreate "${C[@]}" -ff -y "$NBD_DEV"
NBD_VG=nbdvg
vgcreate "${C[@]}" "$NBD_VG" "$NBD_DEV"
lvcreate "${C[@]}" -y -L 32M -n lv0 "$NBD_VG"
lv=/dev/mapper/$NBD_VG-lv0
[ -b "$lv" ]
lvs "${C[@]}" "$NBD_VG"
mkfs.ext4 -q -F "$lv"
mkdir -p /tmp/nbd-mnt
mount "$lv" /tmp/nbd-mnt
nbd_files /tmp/nbd-mnt
umount /tmp/nbd-mnt
nbd_drop_caches
fsck.ext4 -fn "$lv"
mount "$lv" /tmp/nbd-mnt
nbd_verify /tmp/nbd-mnt
umount /tmp/nbd-mnt
# The metadata is on the device: deactivate, rescan, find the LV again.
vgchange "${C[@]}" -an "$NBD_VG"
[ ! -b "$lv" ]
vgchange "${C[@]}" -ay "$NBD_VG"
[ -b "$lv" ]
fsck.ext4 -fn "$lv"
vgremove "${C[@]}" -f "$NBD_VG"
NBD_VG=
pvremove "${C[@]}" -y "$NBD_DEV"
nbd_stop
nbd_detached "$NBD_DEV"
