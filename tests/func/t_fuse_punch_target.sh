#!/usr/bin/env bash
# fallocate on the FUSE file against the in-tree target, which may ignore
# a Dataset Management deallocate (the spec lets it: DSM is advice; nvmet
# on a block device passes it to a discard that may do nothing).  A
# punched hole must still read back as zeroes: the gateway punches with
# Write Zeroes (DEAC set, the target may deallocate), as Linux punches a
# block device.  A zero range keeps its blocks (fallocate(2)): Write
# Zeroes without DEAC.  Before, a punch went out as DSM and read back the
# old bytes from this target, and a zero range let it deallocate.
set -u
. "$TOP/tests/func/fuse/lib.sh"
. "$TOP/tests/target/helpers.sh"
fuse_require
nqn=nqn.2026-01.io.nvmf-gateway:punch
tgt_start --subsys "$nqn:16M:4096"
gw_start mount -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$nqn" --name disk "$MNT"
F="$MNT/disk"
grep -q 'caps flush,fua,trim,write-zeroes,fast-zero$' "$T/gw.log" || { cat "$T/gw.log"; fail "caps"; }
tr '\0' '\377' < /dev/zero | head -c $((16 << 20)) > "$T/ff"
dd if="$T/ff" of="$F" bs=1M oflag=direct conv=notrunc status=none || fail "fill"
ctl dsm-noop on
wz() { "$TGT" --ctl "$TGT_CTL" stats | grep -o "wz_$1=[0-9]*" | cut -d= -f2; }
zeroes() {	# OFF LEN: the file reads zeroes there (O_DIRECT: not the page cache)
	dd if="$F" iflag=direct,skip_bytes,count_bytes skip="$1" count="$2" bs=1M status=none |
		cmp -n "$2" - /dev/zero
}
d0=$(wz deac) n0=$(wz nodeac)
fallocate -p -o $((1 << 20)) -l $((1 << 20)) "$F" || fail "punch-hole"
zeroes $((1 << 20)) $((1 << 20)) || fail "a punched hole reads the old data (the target ignored the DSM)"
# Unaligned: the edges are written, the whole blocks zeroed.
fallocate -p -o 5000 -l 20000 "$F" || fail "unaligned punch-hole"
zeroes 5000 20000 || fail "an unaligned punched hole is not zeroes"
d1=$(wz deac) n1=$(wz nodeac)
echo "punch: Write Zeroes with DEAC $((d1 - d0)), without $((n1 - n0))"
[ $((d1 - d0)) -ge 2 ] && [ "$n1" = "$n0" ] || fail "the punches did not go out as Write Zeroes with DEAC"
fallocate -z -o $((4 << 20)) -l $((1 << 20)) "$F" || fail "zero-range"
zeroes $((4 << 20)) $((1 << 20)) || fail "zero-range is not zeroes"
d2=$(wz deac) n2=$(wz nodeac)
echo "zero-range: Write Zeroes with DEAC $((d2 - d1)), without $((n2 - n1))"
[ $((n2 - n1)) -ge 1 ] && [ "$d2" = "$d1" ] || fail "a zero range let the target deallocate"
# The bytes around were left alone.
cmp -n 5000 "$F" "$T/ff" || fail "bytes before the hole changed"
cmp -i $((2 << 20)):$((2 << 20)) -n $((2 << 20)) "$F" "$T/ff" || fail "bytes after the hole changed"
ctl clear
gw_stop
echo "punch-hole and zero-range against a target that ignores DSM: OK"
