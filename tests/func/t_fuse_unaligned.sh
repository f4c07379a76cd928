#!/usr/bin/env bash
# Any offset, any length: dd at odd offsets compared with a reference file,
# then the fsx-style random checker (writes, buffered and O_DIRECT reads,
# fsync, punch-hole, zero-range, reopen, writes across the end) against its
# model: 100k operations over 512- and 4096-byte block volumes.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require

for geo in 4M:512 8M:4096; do
	bs=${geo#*:}
	# with 4k blocks, an 8k transfer limit: requests split below it
	gw_start mount --mem "$geo" --name disk $([ "$bs" = 4096 ] && echo --max-xfer 8k) "$MNT"
	F="$MNT/disk"
	head -c 3000000 /dev/urandom > "$T/ref"
	: > "$T/expect"
	truncate -s "$(stat -c %s "$F")" "$T/expect"
	# a copy of the volume kept by hand: ref at odd offsets, odd block sizes
	for spec in "1 7777 3" "511 1 1" "4095 12345 17" "1048577 4097 0" "5 65537 0"; do
		read -r seek obs len_k <<< "$spec"
		len=$(( len_k ? len_k * 10007 : 500000 ))
		dd if="$T/ref" of="$F" bs="$obs" seek="$seek" count="$len" \
			oflag=seek_bytes iflag=count_bytes conv=notrunc status=none ||
			fail "dd to $seek+$len (bs $obs) failed"
		dd if="$T/ref" of="$T/expect" bs="$obs" seek="$seek" count="$len" \
			oflag=seek_bytes iflag=count_bytes conv=notrunc status=none
		dd if="$F" bs=3333 skip="$seek" count="$len" iflag=skip_bytes,count_bytes \
			status=none | cmp - <(head -c "$len" "$T/ref") ||
			fail "read back of $seek+$len differs"
	done
	cmp "$F" "$T/expect" || fail "block $bs: the whole file differs from the reference"
	echo "block $bs: dd at odd offsets OK"
	python3 "$TOP/tests/func/fuse/fsx.py" "$F" 50000 "$bs" "$bs" || fail "fsx on block $bs"
	gw_stop
done
echo "unaligned: OK"
