#!/usr/bin/env bash
# nbd_nvme_cmp.sh GW NQN (in the guest): what is written through /dev/nbdN
# is what the kernel's own NVMe host reads from the namespace, and the other
# way round.
set -eu -o pipefail
GW=$1 nqn=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd
mib=$((1024 * 1024))

head -c 16M /dev/urandom > /tmp/cmp-a.bin
head -c 8M /dev/urandom > /tmp/cmp-b.bin
nbd_start "$nqn" auto cmp
dd if=/tmp/cmp-a.bin of="$NBD_DEV" bs=1M seek=3 oflag=direct conv=fsync status=none
nbd_stop
nbd_detached "$NBD_DEV"

NBD_HOST_NQN=$nqn
nvme connect -t tcp -a "$NBD_ADDR" -s "$NBD_PORT" -n "$nqn"
ndev=$(nvme_host_dev "$nqn")
echo "kernel host: $ndev"
cmp -i 0:$((3 * mib)) -n $((16 * mib)) /tmp/cmp-a.bin "$ndev"
dd if=/tmp/cmp-b.bin of="$ndev" bs=1M seek=40 oflag=direct conv=fsync status=none
nvme disconnect -n "$nqn"
NBD_HOST_NQN=

nbd_start "$nqn" auto cmp2
cmp -i 0:$((40 * mib)) -n $((8 * mib)) /tmp/cmp-b.bin "$NBD_DEV"
cmp -i 0:$((3 * mib)) -n $((16 * mib)) /tmp/cmp-a.bin "$NBD_DEV"
nbd_stop
