#!/usr/bin/env bash
# A 4 KiB-block RAM volume: the block size reaches the client and the
# server refuses what is not aligned to it.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo nbdcopy nbdsh qemu-img
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

sock="$tmp/nbd.sock"
gw_start nbd --mem 64M:4096 --name disk4k "unix:$sock"
uri="nbd+unix:///disk4k?socket=$sock"

[ "$(nbdinfo_field "$uri" block_size_minimum)" = 4096 ] || fail "minimum block size"
[ "$(nbdinfo_field "$uri" block_size_preferred)" = 4096 ] || fail "preferred block size"

out=$(nbdsh -u "$uri" -c "$(cat "$TOP/tests/func/nbd/io.py")" 2>&1) || { echo "$out"; fail "nbdsh io.py"; }
echo "$out"
echo "$out" | grep -q "^OK io 4096" || fail "io.py did not finish"

# 512-byte aligned but not 4 KiB aligned: refused by the server.
out=$(nbdsh -u "$uri" -c '
import errno
h.set_strict_mode(0)
for off, n in ((512, 4096), (0, 512), (4096, 1024)):
    try:
        h.pread(n, off)
    except nbd.Error as e:
        assert e.errnum == errno.EINVAL, e.errnum
        continue
    raise AssertionError("unaligned %d+%d accepted" % (off, n))
print("OK unaligned")' 2>&1) || { echo "$out"; fail "unaligned checks"; }
echo "$out" | grep -q "^OK unaligned" || fail "unaligned checks did not finish"

head -c 16M /dev/urandom > "$tmp/in.raw"
qemu-img convert -n -f raw -O raw "$tmp/in.raw" "$uri" || fail "qemu-img convert in"
nbdcopy "$uri" "$tmp/out.raw" || fail "nbdcopy out"
cmp -n 16777216 "$tmp/in.raw" "$tmp/out.raw" || fail "round trip differs"
echo "4k volume: round trip identical"
gw_stop
echo PASS
