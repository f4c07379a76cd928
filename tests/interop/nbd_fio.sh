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

# verify NAME BS QD: fio random writes of 64 MiB with crc32c verify.  (A
# `! grep` line does not stop a `set -e` script: the checks say so.)
verify() {
	local out="$NBD_LOGS/$1.txt"
	fio --name="nbd-$1" --filename="$NBD_DEV" --direct=1 --ioengine=libaio \
		--rw=randwrite --bs="$2" --iodepth="$3" --verify=crc32c --verify_fatal=1 \
		--size=64M --output="$out"
	cat "$out"
	grep -q 'err= 0' "$out" || { echo "fio $1: an error"; return 1; }
	if grep -qi 'verify.*fail\|bad magic\|crc32c: verify' "$out"; then
		echo "fio $1: verify failed"
		return 1
	fi
}

nbd_start "$nqn" auto fio
verify verify 4k 16
nbd_stop
nbd_detached "$NBD_DEV"

NVMF_GATEWAY_LOG=debug nbd_start "$nqn" auto fio1m
verify verify-1m 1M 4
nbd_stop
nbd_detached "$NBD_DEV"
echo "1 MiB verify reads: $(grep -h 'read replies spliced' "$NBD_LOG" | sed 's/.*: //')"
