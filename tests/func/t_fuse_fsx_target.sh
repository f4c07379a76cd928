#!/usr/bin/env bash
# The fsx checker through NVMe/TCP against the in-tree target made to look
# like nvmet on a loop device: DLFEAT 0 (punch-hole by Write Zeroes, not
# TRIM) and commands executed out of order after a random 0..5 ms, on a
# namespace that holds data before the run.
set -u
. "$TOP/tests/func/fuse/lib.sh"
. "$TOP/tests/target/helpers.sh"
fuse_require
nqn=nqn.2026-01.io.nvmf-gateway:fsx
tgt_start --subsys "$nqn:64M:4096" --dlfeat 0
gw_start mount -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$nqn" --name disk -k 30 "$MNT"
F="$MNT/disk"
grep -q 'caps flush,fua,trim,write-zeroes$' "$T/gw.log" || { cat "$T/gw.log"; fail "caps"; }
dd if=/dev/urandom of="$F" bs=1M count=64 oflag=direct conv=notrunc status=none || fail "fill"
"$TGT" --ctl "$TGT_CTL" reorder 5 > /dev/null || fail "reorder"
for seed in 7 8; do
	python3 "$TOP/tests/func/fuse/fsx.py" "$F" 3000 "$seed" 4096 || fail "fsx seed $seed"
done
"$TGT" --ctl "$TGT_CTL" clear > /dev/null
gw_stop
echo "fsx against a reordering DLFEAT-0 target: OK"
