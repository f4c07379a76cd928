#!/usr/bin/env bash
# nbd_restart.sh GW NQN (in the guest): fio with verify runs on /dev/nbdN,
# the gateway is killed with SIGKILL and started again for the same device:
# the device stays, the gateway reattaches it (RECONFIGURE with fresh
# sockets), and fio ends with no I/O error and no verify failure.
set -eu -o pipefail
GW=$1 nqn=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd

nbd_start "$nqn" /dev/nbd5 restart1
n=${NBD_DEV#/dev/}
fio --name=nbd-restart --filename="$NBD_DEV" --direct=1 --ioengine=libaio \
	--rw=randwrite --bs=4k --iodepth=16 --verify=crc32c --verify_fatal=1 \
	--size=32M --output="$NBD_LOGS/fio-restart.txt" &
fio_pid=$!
# Kill once fio is well into its write phase (field 5: writes completed).
for _ in $(seq 1200); do
	w=$(awk '{print $5}' "/sys/block/$n/stat")
	[ "$w" -lt 1000 ] || break
	kill -0 $fio_pid 2> /dev/null || break
	sleep 0.1
done
kill -0 $fio_pid 2> /dev/null || { echo "fio ended before the kill: nothing tested"; exit 1; }
echo "killing gateway $GW_PID after $w writes"
kill -9 "$GW_PID"
wait "$GW_PID" || true
GW_PID=
size=$(cat "/sys/block/$n/size")
echo "device after the kill: $size sectors"
[ "$size" -gt 0 ]
nbd_start "$nqn" "$NBD_DEV" restart2
grep -q "$NBD_DEV reattached" "$NBD_LOG"
wait $fio_pid
cat "$NBD_LOGS/fio-restart.txt"
grep -q 'err= 0' "$NBD_LOGS/fio-restart.txt"
nbd_stop
nbd_detached "$NBD_DEV"
# Once detached, a new attach is a fresh connect, not a reattach.
nbd_start "$nqn" "$NBD_DEV" restart3
grep -qE "$NBD_DEV attached" "$NBD_LOG"
nbd_stop
