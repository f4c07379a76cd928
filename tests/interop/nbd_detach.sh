#!/usr/bin/env bash
# nbd_detach.sh GW NQN OTHER_NQN (in the guest): SIGTERM detaches (device
# disconnected, controller shut down, exit 0); a busy device and an export
# already served by a running gateway are refused with one clear line.
set -eu -o pipefail
GW=$1 nqn=$2 other=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd

nbd_start "$nqn" /dev/nbd3 detach
[ "$(cat /sys/block/nbd3/size)" -gt 0 ]
grep -q "$nqn" /sys/block/nbd3/backend
# Another export on the same device: refused.
out=$("$GW" nbd -t tcp -a "$NBD_ADDR" -s "$NBD_PORT" -n "$other" /dev/nbd3 2>&1) && rc=0 || rc=$?
echo "$out"
[ $rc = 1 ]
echo "$out" | grep -q 'nbd3: in use by backend'
# The same export while its gateway runs: refused, the device untouched.
out=$("$GW" nbd -t tcp -a "$NBD_ADDR" -s "$NBD_PORT" -n "$nqn" auto 2>&1) && rc=0 || rc=$?
echo "$out"
[ $rc = 1 ]
echo "$out" | grep -q 'nbd3: served by another running gateway'
dd if=/dev/nbd3 of=/dev/null bs=1M count=4 iflag=direct status=none
nbd_stop
nbd_detached /dev/nbd3
