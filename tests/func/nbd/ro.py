# Run under nbdsh against a --read-only export.
import errno

def expect_err(what, fn, want):
    try:
        fn()
    except nbd.Error as e:
        if e.errnum != want:
            raise AssertionError("%s: errno %s, want %d" % (what, e.errnum, want))
        return
    raise AssertionError("%s: succeeded, want errno %d" % (what, want))

assert h.is_read_only()
assert not h.can_trim() and not h.can_zero() and not h.can_flush()
h.set_strict_mode(0)
expect_err("write", lambda: h.pwrite(bytes(4096), 0), errno.EPERM)
expect_err("trim", lambda: h.trim(4096, 0), errno.EPERM)
expect_err("zero", lambda: h.zero(4096, 0), errno.EPERM)
assert h.pread(4096, 0) == bytes(4096)
print("OK ro")
