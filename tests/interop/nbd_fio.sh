#!/usr/bin/env bash
# nbd_fio.sh GW NQN (in the guest): a device picked by the kernel ("auto"),
# fio 4k random writes at QD 16 with crc32c verify: no error.  Then 1 MiB
# writes and verify reads at QD4: four commands each at the gateway's
# default 256K --max-xfer, which nvmet may complete in any order; a read's
# parts fill its reply's pipe only in order, else the read ends in the
# buffer: exact either way.
set -eu -o pipefail
GW=$1 nqn=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd

nbd_start "$nqn" auto fio
fio --name=nbd-verify --filename="$NBD_DEV" --direct=1 --ioengine=libaio \
	--rw=randwrite --bs=4k --iodepth=16 --verify=crc32c --verify_fatal=1 \
	--size=64M --output="$NBD_LOGS/fio.txt"
cat "$NBD_LOGS/fio.txt"
grep -q 'err= 0' "$NBD_LOGS/fio.txt"
! grep -qi 'verify.*fail\|bad magic\|crc32c: verify' "$NBD_LOGS/fio.txt"
nbd_stop
nbd_detached "$NBD_DEV"

NVMF_GATEWAY_LOG=debug nbd_start "$nqn" auto fio1m
fio --name=nbd-verify-1m --filename="$NBD_DEV" --direct=1 --ioengine=libaio \
	--rw=randwrite --bs=1M --iodepth=4 --verify=crc32c --verify_fatal=1 \
	--size=64M --output="$NBD_LOGS/fio1m.txt"
cat "$NBD_LOGS/fio1m.txt"
grep -q 'err= 0' "$NBD_LOGS/fio1m.txt"
! grep -qi 'verify.*fail\|bad magic\|crc32c: verify' "$NBD_LOGS/fio1m.txt"
nbd_stop
nbd_detached "$NBD_DEV"
echo "1 MiB verify reads: $(grep -h 'read replies spliced' "$NBD_LOG" | sed 's/.*: //')"
