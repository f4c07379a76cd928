#!/usr/bin/env bash
# fallocate on the FUSE file: punch-hole and zero-range (aligned and not)
# read back as zeroes and leave the neighbouring bytes alone; allocation in
# range succeeds, past the end fails with ENOSPC, other modes EOPNOTSUPP.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require

check_range() {	# the model file vs the FUSE file
	cmp "$MNT/disk" "$T/model" || fail "after $1: contents differ from the model"
}

for geo in 8M:512 8M:4096; do
	gw_start mount --mem "$geo" --name disk "$MNT"
	F="$MNT/disk"
	head -c $((8 << 20)) /dev/urandom > "$T/model"
	dd if="$T/model" of="$F" bs=1M conv=notrunc status=none || fail "fill"
	check_range fill
	for spec in "p 1000 20000" "p 4096 8192" "p 1048576 2097152" "p 4000 200" \
		"z 70001 9000" "z 3145728 65536" "z 511 2" "p 8388000 10000" "zn 8380000 100000"; do
		read -r mode off len <<< "$spec"
		fallocate -$mode -o "$off" -l "$len" "$F" || fail "fallocate -$mode -o $off -l $len"
		end=$((off + len > 8 << 20 ? 8 << 20 : off + len))
		dd if=/dev/zero of="$T/model" bs=65536 seek="$off" count=$((end - off)) conv=notrunc \
			status=none iflag=count_bytes oflag=seek_bytes
		[ "$(cmp -n $((end - off)) -i "$off:0" "$F" /dev/zero 2>&1)" = "" ] ||
			fail "-$mode $off+$len: not zeroes"
		check_range "fallocate -$mode -o $off -l $len"
	done
	out=$(fallocate -z -o 8380000 -l 100000 "$F" 2>&1) && fail "zero-range growing the file"
	case $out in *"No space left"*) ;; *) fail "zero-range past the end: '$out'" ;; esac
	fallocate -o 4096 -l 65536 "$F" || fail "allocation in range failed"
	fallocate -n -o 0 -l $((16 << 20)) "$F" || fail "allocation with --keep-size failed"
	out=$(fallocate -o 0 -l $((16 << 20)) "$F" 2>&1) && fail "growing by fallocate succeeded"
	case $out in *"No space left"*) ;; *) fail "growing: '$out', want ENOSPC" ;; esac
	out=$(fallocate -c -o 0 -l 65536 "$F" 2>&1) && fail "collapse-range succeeded"
	case $out in *"not supported"*) ;; *) fail "collapse-range: '$out'" ;; esac
	[ "$(stat -c %s "$F")" = $((8 << 20)) ] || fail "the size changed"
	check_range "the refused modes"
	gw_stop
done
echo "fallocate: OK"
