#!/usr/bin/env bash
# nbd_fs.sh GW NQN SIZE (in the guest): /dev/nbd0 attached to namespace 1 of
# NQN has the namespace's size; ext4 on it survives umount, fsck and remount
# with every file intact; SIGTERM leaves the device disconnected.
set -eu -o pipefail
GW=$1 nqn=$2 size=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd

nbd_start "$nqn" /dev/nbd0 fs
[ "$NBD_DEV" = /dev/nbd0 ]
got=$(blockdev --getsize64 /dev/nbd0)
echo "size $got, namespace $size"
[ "$got" = "$size" ]
mkfs.ext4 -q -F /dev/nbd0
mkdir -p /tmp/nbd-mnt
mount /dev/nbd0 /tmp/nbd-mnt
nbd_files /tmp/nbd-mnt
umount /tmp/nbd-mnt
nbd_drop_caches
fsck.ext4 -fn /dev/nbd0
mount /dev/nbd0 /tmp/nbd-mnt
nbd_verify /tmp/nbd-mnt
umount /tmp/nbd-mnt
nbd_stop
nbd_detached /dev/nbd0
