#!/usr/bin/python3
"""One NBD command with a deadline, for the liveness tests.

read SOCK SECONDS     one 4 KiB read at offset 0
flush SOCK SECONDS    one NBD FLUSH
write SOCK SECONDS    one 4 KiB write at offset 0
Prints "ok", the errno name, or "timeout" when the command was not
answered within SECONDS (exit 0 in every case: the test decides).
"""
import errno
import os
import sys
import time

import nbd


def main():
    cmd, sock, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=" + sock)
    buf = nbd.Buffer(4096)
    if cmd == "read":
        cookie = h.aio_pread(buf, 0)
    elif cmd == "write":
        cookie = h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"w" * 4096)), 0)
    elif cmd == "flush":
        cookie = h.aio_flush()
    else:
        print(__doc__, file=sys.stderr)
        return 2
    t_end = time.monotonic() + secs
    while True:
        try:
            if h.aio_command_completed(cookie):
                print("ok")
                return 0
        except nbd.Error as e:
            print(errno.errorcode.get(e.errnum or 0, "errnum-%s" % e.errnum))
            return 0
        left = t_end - time.monotonic()
        if left <= 0:
            print("timeout")
            sys.stdout.flush()
            # Leave without a clean disconnect: the command is still out.
            os._exit(0)
        h.poll(int(min(left, 0.5) * 1000))


if __name__ == "__main__":
    sys.exit(main())
