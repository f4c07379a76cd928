#!/usr/bin/env python3
"""A random-operation integrity checker for the FUSE file, in the spirit of
fsx: random unaligned writes, reads (buffered and O_DIRECT), fsyncs,
punch-holes, zero-ranges and reopens against an in-memory model of the
file.  Seeded and reproducible; on the first mismatch it prints the last
operations and the first wrong byte, and exits 1.

usage: fsx.py FILE NUM_OPS SEED BLOCK_SIZE
"""
import ctypes
import os
import random
import sys
from collections import deque

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def main():
    path, nops, seed, bs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    size = os.stat(path).st_size
    fd = os.open(path, os.O_RDWR)
    dfd = os.open(path, os.O_RDWR | os.O_DIRECT)
    model = bytearray(os.pread(fd, size, 0))
    assert len(model) == size
    # The model starts from the page cache: it must agree with the volume
    # itself, or a later mismatch would blame the export for stale cache.
    start = os.pread(dfd, size, 0)
    if start != model:
        i = next(i for i in range(size) if start[i] != model[i])
        print("fsx: seed %d: before any operation, byte %d is %d buffered, %d direct"
              % (seed, i, model[i], start[i]))
        sys.exit(1)
    del start
    log = deque(maxlen=40)
    counts = {}

    def die(msg):
        print("fsx: seed %d: %s" % (seed, msg))
        print("fsx: the last %d operations:" % len(log))
        for entry in log:
            print("  " + entry)
        sys.exit(1)

    def rand_range(maxlen):
        # offsets and lengths near block edges are the interesting ones
        if rng.random() < 0.3:
            off = rng.randrange(0, size // bs) * bs + rng.choice([0, 1, bs - 1, bs // 2])
        else:
            off = rng.randrange(0, size)
        off = min(off, size - 1)
        if rng.random() < 0.3:
            length = rng.choice([1, bs - 1, bs, bs + 1, 2 * bs, 3 * bs - 1])
        else:
            length = rng.randrange(1, maxlen)
        return off, length

    def check(data, off, what):
        want = bytes(model[off:off + len(data)])
        if data != want:
            bad = [i for i in range(len(data)) if data[i] != want[i]]
            i, j = bad[0], bad[-1]
            zero = all(data[k] == 0 for k in range(i, j + 1))
            die("%s: byte %d is %d, the model says %d (%d bytes differ in %d..%d%s)" % (
                what, off + i, data[i], want[i], len(bad), off + i, off + j,
                ", all read as zero" if zero else ""))

    for n in range(nops):
        r = rng.random()
        if r < 0.35:
            off, length = rand_range(3 * bs + 100)
            data = rng.randbytes(length)
            fdx = dfd if rng.random() < 0.3 else fd
            op = "write%s %d+%d" % ("(direct)" if fdx == dfd else "", off, length)
            log.append("#%d %s" % (n, op))
            got = os.pwrite(fdx, data, off)
            want = min(length, size - off)
            if got != want:
                die("%s wrote %d, want %d" % (op, got, want))
            model[off:off + got] = data[:got]
        elif r < 0.70:
            off, length = rand_range(4 * bs + 100)
            fdx = dfd if rng.random() < 0.3 else fd
            op = "read%s %d+%d" % ("(direct)" if fdx == dfd else "", off, length)
            log.append("#%d %s" % (n, op))
            data = os.pread(fdx, length, off)
            if len(data) != min(length, size - off):
                die("%s returned %d bytes" % (op, len(data)))
            check(data, off, op)
        elif r < 0.75:
            log.append("#%d fsync" % n)
            os.fsync(fd)
        elif r < 0.83:
            off, length = rand_range(3 * bs)
            log.append("#%d punch %d+%d" % (n, off, length))
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, length)
            end = min(off + length, size)
            model[off:end] = bytes(end - off)
        elif r < 0.91:
            off, length = rand_range(3 * bs)
            log.append("#%d zero-range %d+%d" % (n, off, length))
            fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, length)
            end = min(off + length, size)
            model[off:end] = bytes(end - off)
        elif r < 0.93:
            log.append("#%d reopen" % n)
            os.close(fd)
            fd = os.open(path, os.O_RDWR)
        else:
            # a short write across the end, then the end itself
            off = size - rng.randrange(1, bs + 1)
            data = rng.randbytes(rng.randrange(1, 2 * bs))
            log.append("#%d write-at-end %d+%d" % (n, off, len(data)))
            got = os.pwrite(fd, data, off)
            if got != min(len(data), size - off):
                die("write-at-end wrote %d" % got)
            model[off:off + got] = data[:got]
            try:
                os.pwrite(fd, b"z", size)
                die("a write at the end succeeded")
            except OSError as e:
                if e.errno != 28:
                    die("a write at the end: %s, want ENOSPC" % e)
        kind = log[-1].split()[1] if log else "?"
        counts[kind] = counts.get(kind, 0) + 1

    # the end: everything, through a fresh open
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    check(os.pread(fd, size, 0), 0, "final full read")
    print("fsx: seed %d: %d operations, file matches the model (%s)" % (
        seed, nops, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))


if __name__ == "__main__":
    main()
