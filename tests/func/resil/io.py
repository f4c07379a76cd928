#!/usr/bin/python3
"""NBD clients for the resilience tests (Debian's python3 with libnbd).

verify SOCK SECONDS [STOPFILE]
    Verified writes and reads on random 4 KiB blocks until SECONDS have
    passed (or STOPFILE exists): every block written is remembered, and
    reads check it against the last acknowledged write.  Prints one JSON
    line: ops, writes, reads, verify_errors, io_errors, longest_stall_s.
    Exit 0 only with no verify and no I/O error.
first-error SOCK
    Reads block 0 again and again; at the first failed read prints the
    seconds from that read's start, its errno name and the wall-clock time
    of the failure (time.time(), to compare with `date +%s.%N`).  Gives up
    after 60 s (exit 1).
until-ok SOCK SECONDS
    Reads until one succeeds; prints the seconds it took (exit 1 after
    SECONDS).
flush SOCK
    One NBD FLUSH: prints "ok" or the errno name.
write SOCK BLOCK COUNT SEED
    Writes COUNT 4 KiB blocks from BLOCK with a pattern of SEED (no flush).
check SOCK BLOCK COUNT SEED
    Prints how many of those blocks hold the pattern of SEED.
session SOCK
    Several clients of one export, each on its own connection, driven from
    stdin one line at a time: "NAME connect", "NAME write BLOCK COUNT SEED",
    "NAME flush", "NAME close" (NBD_CMD_DISC), "NAME drop" (the socket closed
    without a word, as a client that dies).  Prints one answer line per command: "ok"
    or the errno name (a coprocess of the test script).
"""
import errno
import json
import os
import random
import sys
import time

import nbd

BS = 4096


def connect(sock):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=" + sock)
    return h


def pattern(seed, blk):
    head = b"%016x%016x" % (seed & (2**64 - 1), blk)
    return (head * (BS // len(head) + 1))[:BS]


def errname(e):
    return errno.errorcode.get(e.errnum or 0, "errnum-%s" % e.errnum)


def verify(sock, seconds, stop=None):
    h = connect(sock)
    nblocks = min(h.get_size() // BS, 4096)
    rng = random.Random(1)
    known = {}
    st = dict(ops=0, writes=0, reads=0, verify_errors=0, io_errors=0)
    t_end = time.monotonic() + seconds
    last = time.monotonic()
    stall = 0.0
    seq = 0
    while time.monotonic() < t_end and not (stop and os.path.exists(stop)):
        blk = rng.randrange(nblocks)
        try:
            if known and rng.random() < 0.5:
                blk = rng.choice(list(known))
                got = h.pread(BS, blk * BS)
                st["reads"] += 1
                if got != pattern(known[blk], blk):
                    st["verify_errors"] += 1
                    print("verify error at block %d" % blk, file=sys.stderr)
            else:
                seq += 1
                h.pwrite(pattern(seq, blk), blk * BS)
                known[blk] = seq
                st["writes"] += 1
        except nbd.Error as e:
            st["io_errors"] += 1
            print("I/O error: %s" % errname(e), file=sys.stderr)
            # A failed write leaves the block unknown.
            known.pop(blk, None)
        st["ops"] += 1
        now = time.monotonic()
        stall = max(stall, now - last)
        last = now
    # Every block acknowledged, read back once more at the end.
    for blk, s in known.items():
        try:
            if h.pread(BS, blk * BS) != pattern(s, blk):
                st["verify_errors"] += 1
        except nbd.Error:
            st["io_errors"] += 1
    st["longest_stall_s"] = round(stall, 3)
    st["blocks_checked"] = len(known)
    print(json.dumps(st))
    return 0 if not st["verify_errors"] and not st["io_errors"] else 1


def first_error(sock):
    h = connect(sock)
    t_end = time.monotonic() + 60
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        try:
            h.pread(BS, 0)
        except nbd.Error as e:
            print("%.2f %s %.3f" % (time.monotonic() - t0, errname(e), time.time()))
            return 0
        time.sleep(0.01)
    print("no error in 60 s")
    return 1


def until_ok(sock, seconds):
    h = connect(sock)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        try:
            h.pread(BS, 0)
            print("%.2f" % (time.monotonic() - t0))
            return 0
        except nbd.Error:
            time.sleep(0.1)
    print("still failing after %s s" % seconds)
    return 1


def session(sock):
    hs = {}
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        name, what = w[0], w[1]
        try:
            if what == "connect":
                hs[name] = connect(sock)
            elif what == "write":
                blk, count, seed = (int(x) for x in w[2:5])
                for b in range(blk, blk + count):
                    hs[name].pwrite(pattern(seed, b), b * BS)
            elif what == "flush":
                hs[name].flush()
            elif what == "close":
                hs.pop(name).shutdown()
            elif what == "drop":
                del hs[name]  # the last reference: nbd_close, no NBD_CMD_DISC
            else:
                print("bad command", flush=True)
                continue
            print("ok", flush=True)
        except nbd.Error as e:
            print(errname(e), flush=True)
    return 0


def main():
    cmd, sock = sys.argv[1], sys.argv[2]
    if cmd == "session":
        return session(sock)
    if cmd == "verify":
        return verify(sock, float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    if cmd == "first-error":
        return first_error(sock)
    if cmd == "until-ok":
        return until_ok(sock, float(sys.argv[3]))
    if cmd == "flush":
        h = connect(sock)
        try:
            h.flush()
            print("ok")
        except nbd.Error as e:
            print(errname(e))
        return 0
    blk, count, seed = (int(x) for x in sys.argv[3:6])
    h = connect(sock)
    if cmd == "write":
        for b in range(blk, blk + count):
            h.pwrite(pattern(seed, b), b * BS)
        return 0
    if cmd == "check":
        print(sum(h.pread(BS, b * BS) == pattern(seed, b) for b in range(blk, blk + count)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
