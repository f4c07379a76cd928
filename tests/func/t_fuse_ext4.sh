#!/usr/bin/env bash
# The quick-lab path: losetup the FUSE file, mkfs.ext4, mount, write files,
# unmount, fsck -fn clean, remount and verify every checksum; then the same
# device again with the loop driver's direct I/O (O_DIRECT on the file).
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require
need mkfs.ext4
LOOP=
FSMNT="$T/fs"
mkdir -p "$FSMNT"
# The file system on the gateway's file goes first, the gateway after it.
ext4_cleanup() {
	mountpoint -q "$FSMNT" && umount "$FSMNT"
	[ -n "$LOOP" ] && losetup -d "$LOOP" 2> /dev/null
	return 0
}

gw_start mount --mem 128M:4096 --name lab.img "$MNT"
cleanup_fn ext4_cleanup
for dio in off on; do
	LOOP=$(losetup -f --show --direct-io=$dio "$MNT/lab.img" 2>&1) ||
		skip "no loop device here: $LOOP"
	echo "loop $LOOP (direct-io=$dio)"
	mkfs.ext4 -q -F "$LOOP" || fail "mkfs.ext4"
	mount "$LOOP" "$FSMNT" || fail "mount ext4"
	for i in 1 2 3 4 5; do
		head -c $((i * 1234567)) /dev/urandom > "$FSMNT/f$i"
	done
	mkdir "$FSMNT/dir" && seq 1 20000 > "$FSMNT/dir/seq"
	(cd "$FSMNT" && sha256sum f* dir/seq) > "$T/sums"
	sync
	umount "$FSMNT" || fail "umount ext4"
	fsck.ext4 -fn "$LOOP" || fail "fsck found errors (direct-io=$dio)"
	mount "$LOOP" "$FSMNT" || fail "remount ext4"
	(cd "$FSMNT" && sha256sum -c --quiet "$T/sums") || fail "checksums differ after remount"
	umount "$FSMNT"
	losetup -d "$LOOP"
	LOOP=
	echo "direct-io=$dio: ext4 clean, 6 files verified"
done
gw_stop
echo "ext4: OK"
