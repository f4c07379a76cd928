#!/usr/bin/python3
"""NBD client for the namespace-disable case (tests/interop/live.sh).

ns_loop.py SOCK DEADLINE STOPFILE
    One 4 KiB command at a time on blocks 0..255, until STOPFILE exists:
    a write of a pattern naming the block and a sequence number, then a
    read of a block written earlier, checked against its last acknowledged
    write (a failed write leaves its block unknown).  Every command gets
    DEADLINE seconds: one not answered by then is a hang, reported as
    "timeout" and exit 1 at once (the connection is left as it is).
    Prints "ready" once connected; one line per command that failed
    ("ERR <errno name> <op> <seconds it took> <end>") and per success
    that took over 0.5 s or came after a failure ("OK <op> <seconds>
    <end>"), <end> being CLOCK_MONOTONIC when this client saw the answer
    (the clock of the gateway's log stamps, in the same guest); at the
    end one JSON line: ops, ok, errors (by errno name), verify_errors,
    longest_s.  A connection the server closed (its export taken down)
    ends the loop.  Exit 0 unless a command hung or a read returned wrong
    data; errors are for the test to judge.
"""
import errno
import json
import os
import random
import sys
import time

import nbd

BS = 4096
NBLOCKS = 256


def pattern(seq, blk):
    head = b"%016x%016x" % (seq, blk)
    return (head * (BS // len(head) + 1))[:BS]


def run(h, cmd, buf_or_none, off, deadline):
    """Returns None on success, the errno name, or "timeout"."""
    try:
        if cmd == "write":
            cookie = h.aio_pwrite(buf_or_none, off)
        else:
            cookie = h.aio_pread(buf_or_none, off)
    except nbd.Error as e:
        # The server closed the connection (an export taken down).
        return errno.errorcode.get(e.errnum or 0, "errnum-%s" % e.errnum)
    t_end = time.monotonic() + deadline
    while True:
        try:
            if h.aio_command_completed(cookie):
                return None
        except nbd.Error as e:
            return errno.errorcode.get(e.errnum or 0, "errnum-%s" % e.errnum)
        left = t_end - time.monotonic()
        if left <= 0:
            return "timeout"
        h.poll(int(min(left, 0.5) * 1000) + 1)


def main():
    sock, deadline, stop = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=" + sock)
    print("ready", flush=True)
    rng = random.Random(2)
    known = {}
    st = dict(ops=0, ok=0, errors={}, verify_errors=0, longest_s=0.0)
    seq = 0
    rbuf = nbd.Buffer(BS)
    after_err = False
    while not os.path.exists(stop):
        if known and seq % 2:
            op, blk = "read", rng.choice(list(known))
            arg = rbuf
        else:
            op, blk = "write", rng.randrange(NBLOCKS)
            arg = nbd.Buffer.from_bytearray(bytearray(pattern(seq + 1, blk)))
        seq += 1
        t0 = time.monotonic()
        err = run(h, op, arg, blk * BS, deadline)
        end = time.monotonic()
        took = end - t0
        st["ops"] += 1
        st["longest_s"] = max(st["longest_s"], round(took, 3))
        if err == "timeout":
            print("timeout: %s of block %d not answered in %.0f s" % (op, blk, deadline),
                  flush=True)
            st["timeouts"] = 1
            print(json.dumps(st), flush=True)
            os._exit(1)
        if err:
            st["errors"][err] = st["errors"].get(err, 0) + 1
            print("ERR %s %s %.2f %.3f" % (err, op, took, end), flush=True)
            after_err = True
            if op == "write":
                known.pop(blk, None)
            if h.aio_is_dead():
                print("connection closed by the server", flush=True)
                break
            continue
        st["ok"] += 1
        if after_err or took > 0.5:
            print("OK %s %.2f %.3f" % (op, took, end), flush=True)
        after_err = False
        if op == "write":
            known[blk] = seq
        elif bytes(rbuf.to_bytearray()) != pattern(known[blk], blk):
            st["verify_errors"] += 1
            print("verify error at block %d" % blk, flush=True)
    print(json.dumps(st), flush=True)
    return 1 if st["verify_errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
