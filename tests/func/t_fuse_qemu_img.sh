#!/usr/bin/env bash
# qemu-img on the FUSE file: info sees a raw image of the volume's size;
# convert into it (from qcow2, -n: the file exists and cannot be created)
# and out of it (to qcow2) round-trips, checked with qemu-img compare.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require
need qemu-img

gw_start mount --mem 32M:512 --name vm.img "$MNT"
F="$MNT/vm.img"
info=$(qemu-img info --output=json -f raw "$F") || fail "qemu-img info"
echo "$info"
echo "$info" | grep -q '"virtual-size": 33554432' || fail "qemu-img info: wrong size"

# a sparse-ish source with data at odd places
qemu-img create -q -f raw "$T/src.raw" 32M
for off in 0 12345 1048576 20000001 33550000; do
	head -c 4000 /dev/urandom | dd of="$T/src.raw" bs=4000 seek="$off" oflag=seek_bytes \
		conv=notrunc status=none
done
qemu-img convert -q -f raw -O qcow2 "$T/src.raw" "$T/src.qcow2" || fail "make the qcow2"
qemu-img convert -q -n -f qcow2 -O raw "$T/src.qcow2" "$F" || fail "convert into the FUSE file"
cmp "$F" "$T/src.raw" || fail "the FUSE file differs from the source"
qemu-img convert -q -f raw -O qcow2 "$F" "$T/back.qcow2" || fail "convert out of the FUSE file"
qemu-img compare -q "$T/back.qcow2" "$T/src.raw" || fail "the round trip differs"
gw_stop
echo "qemu-img: OK"
