#!/usr/bin/env bash
# A read-only export: mode 0400, reads work, every way of writing fails
# with EROFS (even for root, who passes the permission check).
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require

gw_start --mem 4M:512 --name ro.img --read-only
F="$MNT/ro.img"
[ "$(stat -c %a "$F")" = 400 ] || fail "mode $(stat -c %a "$F"), want 400"
[ "$(head -c 4096 "$F" | tr -d '\0' | wc -c)" = 0 ] || fail "a fresh RAM volume is not zeroes"
[ "$(errno_of "os.open('$F', os.O_RDWR)")" = EROFS ] || fail "open O_RDWR allowed"
[ "$(errno_of "os.open('$F', os.O_WRONLY)")" = EROFS ] || fail "open O_WRONLY allowed"
out=$(dd if=/dev/zero of="$F" bs=512 count=1 conv=notrunc 2>&1) && fail "dd wrote"
echo "$out"
[ "$(errno_of "os.truncate('$F', 4096)")" != OK ] || fail "truncate allowed"
[ "$(errno_of "fd=os.open('$F', os.O_RDONLY); os.fsync(fd)")" = OK ] || fail "fsync failed"
gw_stop
echo "readonly: OK"
