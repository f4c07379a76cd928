#!/usr/bin/python3
"""NBD and file clients for the namespace change test (t_live_ns_change.sh).

size SOCK                   the export size a fresh connection is given
rw SOCK OFFSET              a fresh connection writes 4 KiB at OFFSET and
                            reads it back: "ok" or the errno name
hold SOCK STOP              one connection kept open: writes a 64 KiB
                            pattern at 0, prints "ready", then reads it
                            back every 0.1 s until the file STOP exists;
                            prints "ok N" (reads verified) or the failure
fhold PATH STOP             the same through an open file descriptor of
                            PATH; at the end also prints the size fstat
                            gives on that same descriptor: "ok N SIZE"
"""
import errno
import os
import sys
import time

PATTERN = bytes((i * 7 + 3) & 0xFF for i in range(65536))


def nbd_handle(sock):
    import nbd

    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=" + sock)
    return h


def errname(e):
    n = getattr(e, "errnum", None) or getattr(e, "errno", None) or 0
    return errno.errorcode.get(n, "error-%s" % n)


def hold(read, write, stop, tail=lambda: ""):
    write(PATTERN, 0)
    print("ready", flush=True)
    n = 0
    while True:
        last = os.path.exists(stop)
        got = read(len(PATTERN), 0)
        if got != PATTERN:
            print("mismatch after %d reads" % n, flush=True)
            return 1
        n += 1
        if last:
            break
        time.sleep(0.1)
    print(("ok %d %s" % (n, tail())).strip(), flush=True)
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "size":
        print(nbd_handle(sys.argv[2]).get_size())
        return 0
    if cmd == "rw":
        off = int(sys.argv[3])
        data = os.urandom(4096)
        try:
            h = nbd_handle(sys.argv[2])
            h.pwrite(data, off)
            print("ok" if h.pread(4096, off) == data else "mismatch")
        except Exception as e:  # nbd.Error: its errnum names the errno
            print(errname(e))
        return 0
    if cmd == "hold":
        try:
            h = nbd_handle(sys.argv[2])
            return hold(h.pread, h.pwrite, sys.argv[3])
        except Exception as e:
            print("failed: %s" % errname(e), flush=True)
            return 1
    if cmd == "fhold":
        fd = os.open(sys.argv[2], os.O_RDWR)
        try:
            return hold(
                lambda n, off: os.pread(fd, n, off),
                lambda b, off: os.pwrite(fd, b, off) and os.fsync(fd),
                sys.argv[3],
                lambda: str(os.fstat(fd).st_size),
            )
        except OSError as e:
            print("failed: %s" % errname(e), flush=True)
            return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
