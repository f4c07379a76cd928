#!/usr/bin/env bash
# fio with verify=crc32c on the FUSE file: psync (QD 1) and io_uring (QD 1
# and 16), 4k and 128k (split at a 64k transfer limit), through the page cache and with direct=1; every
# job writes, then reads back and checks every block.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require
need fio

# --max-xfer: 128k jobs and 1 MiB FUSE requests are split into 64k volume I/Os
gw_start mount --mem 64M:4096 --max-xfer 64k --name disk "$MNT"
n=0
for engine in psync io_uring; do
	for qd in 1 16; do
		[ $engine = psync ] && [ $qd = 16 ] && continue
		for bs in 4k 128k; do
			for direct in 0 1; do
				name="$engine-qd$qd-$bs-direct$direct"
				fio --verify_state_save=0 --name="$name" --filename="$MNT/disk" --size=16M --offset=$((n % 3 * 16))M \
					--rw=randwrite --bs=$bs --ioengine=$engine --iodepth=$qd \
					--direct=$direct --verify=crc32c --do_verify=1 \
					--verify_fatal=1 --randseed=$((n + 1)) > "$T/fio.log" 2>&1
				st=$?
				grep -E "err=|verify" "$T/fio.log" | head -3
				[ $st -eq 0 ] || { cat "$T/fio.log"; fail "fio $name: exit $st"; }
				grep -q "err= 0" "$T/fio.log" || fail "fio $name: errors"
				grep -qi "verify: bad" "$T/fio.log" && fail "fio $name: verify errors"
				n=$((n + 1))
			done
		done
	done
done
gw_stop
echo "fio: $n jobs verified"
