#!/usr/bin/env bash
# A read-only export: mode 0400, reads work, every way of writing fails
# with EROFS (even for root, who passes the permission check).  With
# --allow-other and --uid, another user (nobody) owns and reads the file;
# without --allow-other, nobody cannot even look.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require

gw_start mount --mem 4M:512 --name ro.img --read-only --allow-other --uid 65534 --gid 65534 "$MNT"
F="$MNT/ro.img"
chmod 755 "$T"	# mktemp -d made it 0700
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
[ "$(stat -c %U "$F")" = nobody ] || fail "owner $(stat -c %U "$F"), want nobody"
[ "$(as_nobody head -c 512 "$F" | wc -c)" = 512 ] || fail "nobody cannot read its own file"
out=$(as_nobody dd if=/dev/zero of="$F" bs=512 count=1 conv=notrunc 2>&1) &&
	fail "nobody wrote to a read-only export"
echo "$out"
[ "$(stat -c %a "$F")" = 400 ] || fail "mode $(stat -c %a "$F"), want 400"
[ "$(head -c 4096 "$F" | tr -d '\0' | wc -c)" = 0 ] || fail "a fresh RAM volume is not zeroes"
[ "$(errno_of "os.open('$F', os.O_RDWR)")" = EROFS ] || fail "open O_RDWR allowed"
[ "$(errno_of "os.open('$F', os.O_WRONLY)")" = EROFS ] || fail "open O_WRONLY allowed"
out=$(dd if=/dev/zero of="$F" bs=512 count=1 conv=notrunc 2>&1) && fail "dd wrote"
echo "$out"
[ "$(errno_of "os.truncate('$F', 4096)")" != OK ] || fail "truncate allowed"
[ "$(errno_of "fd=os.open('$F', os.O_RDONLY); os.fsync(fd)")" = OK ] || fail "fsync failed"
gw_stop

gw_start mount --mem 4M:512 --name rw.img --uid 65534 "$MNT"
out=$(as_nobody stat "$MNT/rw.img" 2>&1) && fail "without --allow-other, nobody could stat"
case $out in *"Permission denied"*) ;; *) fail "without --allow-other: '$out'" ;; esac
gw_stop INT
echo "readonly: OK"
