#!/usr/bin/env bash
# The FUSE file looks and behaves like a fixed-size disk image: size, mode,
# block size; a read-only root; truncate only to its own size; chmod/chown
# refused; ENOSPC past the end, short reads at EOF; fsync is a flush and an
# O_DSYNC write is FUA; `fusermount3 -u` ends the gateway with exit 0.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require

size=$((8 << 20))
gw_start mount --mem 8M:4096 --name disk.img --uid 1234 --gid 4321 "$MNT"
F="$MNT/disk.img"

ls -l "$MNT"
[ "$(ls "$MNT")" = disk.img ] || fail "the root lists '$(ls "$MNT")'"
read -r sz mode bsz uid gid type <<< "$(stat -c '%s %a %o %u %g %F' "$F")"
[ "$sz" = $size ] || fail "size $sz, want $size"
[ "$mode" = 600 ] || fail "mode $mode, want 600"
[ "$bsz" = 4096 ] || fail "st_blksize $bsz, want 4096"
[ "$uid:$gid" = 1234:4321 ] || fail "owner $uid:$gid"
[ "$type" = "regular file" ] || fail "type $type"

# the root directory's contents are configuration
for stmt in "open('$MNT/new', 'w')" "os.mkdir('$MNT/d')" "os.unlink('$F')" \
	"os.rename('$F', '$MNT/other')" "os.symlink('x', '$MNT/l')" "os.link('$F', '$MNT/h')" \
	"os.mknod('$MNT/n')"; do
	e=$(errno_of "$stmt")
	case $e in EPERM|EROFS) ;; *) fail "$stmt: $e, want EPERM or EROFS" ;; esac
done
[ "$(errno_of "os.chmod('$F', 0o644)")" = EPERM ] || fail "chmod allowed"
[ "$(errno_of "os.chown('$F', 0, 0)")" = EPERM ] || fail "chown allowed"
[ "$(errno_of "os.truncate('$F', $size)")" = OK ] || fail "truncate to the same size failed"
[ "$(errno_of "os.truncate('$F', 4096)")" = EINVAL ] || fail "truncate to another size: not EINVAL"
[ "$(errno_of "os.truncate('$F', $size + 4096)")" = EINVAL ] || fail "growing: not EINVAL"
[ "$(stat -c %s "$F")" = $size ] || fail "size changed"

# past the end: ENOSPC at or beyond it, a short write across it, short reads
py() { python3 -c "import os,sys
fd = os.open('$F', os.O_RDWR)
$1"; }
[ "$(errno_of "fd=os.open('$F', os.O_RDWR); os.pwrite(fd, b'x', $size)")" = ENOSPC ] ||
	fail "a write at the end is not ENOSPC"
[ "$(errno_of "fd=os.open('$F', os.O_RDWR); os.pwrite(fd, b'x', $size + 12345)")" = ENOSPC ] ||
	fail "a write past the end is not ENOSPC"
n=$(py "print(os.pwrite(fd, b'y' * 1000, $size - 100))")
[ "$n" = 100 ] || fail "a write across the end wrote $n, want 100"
n=$(py "print(len(os.pread(fd, 5000, $size - 300)))")
[ "$n" = 300 ] || fail "a read across the end returned $n, want 300"
n=$(py "print(len(os.pread(fd, 10, $size)))")
[ "$n" = 0 ] || fail "a read at the end returned $n bytes"
[ "$(py "print(os.pread(fd, 100, $size - 100) == b'y' * 100)")" = True ] || fail "tail bytes lost"

# durability: fsync/fdatasync are flushes, O_DSYNC writes are FUA
py "os.pwrite(fd, b'a' * 10, 5); os.fsync(fd); os.fdatasync(fd)"
py "fd2 = os.open('$F', os.O_RDWR | os.O_DSYNC); os.pwrite(fd2, b'sync', 777)"
py "fd2 = os.open('$F', os.O_RDWR | os.O_SYNC | os.O_DIRECT); os.pwrite(fd2, b'S' * 9, 70000)"
[ "$(py "print(os.pread(fd, 4, 777))")" = "b'sync'" ] || fail "O_DSYNC data not there"

# the end: fusermount3 -u, the gateway exits 0 by itself
fusermount3 -u "$MNT" || fail "fusermount3 -u failed"
wait "$GW_PID"; st=$?
GW_PID=
cat "$T/gw.log"
[ $st -eq 0 ] || fail "gateway exit $st after fusermount3 -u"
grep -q "unmounted" "$T/gw.log" || fail "no unmount line in the log"
flushes=$(sed -n 's/.* \([0-9]*\) flushes$/\1/p' "$T/gw.log")
fua=$(sed -n 's/.* \([0-9]*\) FUA writes.*/\1/p' "$T/gw.log")
[ "${flushes:-0}" -ge 2 ] || fail "fsync + fdatasync gave ${flushes:-no} flushes"
[ "${fua:-0}" -ge 2 ] || fail "two O_DSYNC/O_SYNC writes gave ${fua:-no} FUA writes"
! grep -qs " $MNT " /proc/mounts || fail "still mounted"
echo "basic: OK ($flushes flushes, $fua FUA writes)"
