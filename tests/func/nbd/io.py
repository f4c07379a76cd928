# Run under nbdsh (h is connected): FLUSH, FUA, TRIM, WRITE_ZEROES with and
# without NO_HOLE, FAST_ZERO, CACHE, structured replies, out-of-range
# errors.  Every check raises on a mismatch; the last line says OK.
import errno
import os

def expect_err(what, fn, want):
    try:
        fn()
    except nbd.Error as e:
        if e.errnum != want:
            raise AssertionError("%s: errno %s, want %d" % (what, e.errnum, want))
        return
    raise AssertionError("%s: succeeded, want errno %d" % (what, want))

size = h.get_size()
assert size == 64 * 1024 * 1024, size
assert h.get_structured_replies_negotiated(), "structured replies not negotiated"
for cap in ("can_flush", "can_fua", "can_trim", "can_zero", "can_fast_zero",
            "can_multi_conn", "can_cache", "can_df"):
    assert getattr(h, cap)(), cap
assert not h.is_read_only()

bs = h.get_block_size(nbd.SIZE_MINIMUM)
data = os.urandom(65536)
h.pwrite(data, 1 << 20)
assert h.pread(65536, 1 << 20) == data
h.pwrite(data, 2 << 20, nbd.CMD_FLAG_FUA)
assert h.pread(65536, 2 << 20) == data
h.flush()
h.cache(65536, 1 << 20)

# TRIM: contents afterwards are undefined, so only "it succeeds".
h.trim(65536, 2 << 20)
h.pwrite(data, 3 << 20)
h.zero(65536, 3 << 20)
assert h.pread(65536, 3 << 20) == bytes(65536)
h.pwrite(data, 3 << 20)
h.zero(65536, 3 << 20, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(65536, 3 << 20) == bytes(65536)
h.pwrite(data, 3 << 20)
h.zero(65536, 3 << 20, nbd.CMD_FLAG_FAST_ZERO | nbd.CMD_FLAG_FUA)
assert h.pread(65536, 3 << 20) == bytes(65536)
# Zeroing that must allocate cannot be fast: fails quickly, data intact.
h.pwrite(data, 3 << 20)
expect_err("fast zero with no-hole", lambda: h.zero(65536, 3 << 20,
           nbd.CMD_FLAG_FAST_ZERO | nbd.CMD_FLAG_NO_HOLE), errno.ENOTSUP)
assert h.pread(65536, 3 << 20) == data

# Out of range and misaligned, with the client's own checks off so the
# server is the one that refuses.
h.set_strict_mode(0)
expect_err("read past the end", lambda: h.pread(bs, size), errno.EINVAL)
expect_err("read across the end", lambda: h.pread(2 * bs, size - bs), errno.EINVAL)
expect_err("write past the end", lambda: h.pwrite(bytes(bs), size), errno.ENOSPC)
expect_err("zero past the end", lambda: h.zero(bs, size), errno.ENOSPC)
expect_err("trim past the end", lambda: h.trim(bs, size), errno.EINVAL)
if bs > 1:
    expect_err("misaligned read", lambda: h.pread(bs, 1), errno.EINVAL)
expect_err("read over the max", lambda: h.pread(48 << 20, 0), errno.EINVAL)
# The connection is still good.
assert h.pread(65536, 1 << 20) == data
print("OK io", bs)
