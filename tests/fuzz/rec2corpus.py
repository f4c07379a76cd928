#!/usr/bin/env python3
"""Turns NVMe/TCP sessions recorded by tcp_record.py into seeds for
fuzz_tcp_rx: each seed is the fuzzer's 22-byte header (digests, requests
in flight) followed by every target-to-host PDU of up to four recorded
commands, with their CIDs rewritten to the fuzzer's (k | (k + 1) << 12)
and the header digests recomputed.  The data and its digests are the
target's, untouched.

usage: rec2corpus.py RECDIR OUTDIR [MAX_SEEDS]"""
import hashlib
import os
import struct
import sys

ICRESP, C2H_TERM, RSP, C2H_DATA, R2T, CMD = 0x01, 0x03, 0x05, 0x07, 0x09, 0x04
F_SUCCESS = 0x08
MAX_LEN = 256 * 1024


def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = crc32c_table()


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = TABLE[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def pdus(stream):
    off = 0
    while off + 8 <= len(stream):
        plen = struct.unpack_from("<I", stream, off + 4)[0]
        if plen < 8 or off + plen > len(stream):
            break
        yield stream[off:off + plen]
        off += plen


def commands(h2c, hd):
    """Per CID, the FIFO of (write, data length) the host sent."""
    cmds = {}
    for p in pdus(h2c):
        if p[0] != CMD:
            continue
        opcode, cid = p[8], struct.unpack_from("<H", p, 10)[0]
        dlen = struct.unpack_from("<I", p, 40)[0]
        in_capsule = len(p) > p[2] + hd
        write = (opcode & 3) == 1 or opcode == 0x7F
        # The fuzzer sends all write data through R2Ts: a command whose data
        # went in the capsule is one without data there.
        cmds.setdefault(cid, []).append((write, 0 if in_capsule else dlen))
    return cmds


def pdu_cid(p):
    return struct.unpack_from("<H", p, 20 if p[0] == RSP else 8)[0]


def instances(c2h, cmds):
    """The target's PDUs grouped per command, in order of first PDU."""
    out, open_ = [], {}
    for i, p in enumerate(pdus(c2h)):
        if p[0] not in (RSP, C2H_DATA, R2T):
            continue
        cid = pdu_cid(p)
        inst = open_.get(cid)
        if inst is None:
            if not cmds.get(cid):
                continue
            write, dlen = cmds[cid].pop(0)
            inst = {"write": write, "len": dlen, "pdus": []}
            open_[cid] = inst
            out.append(inst)
        inst["pdus"].append((i, p))
        if p[0] == RSP or (p[0] == C2H_DATA and p[1] & F_SUCCESS):
            del open_[cid]
    return [x for x in out if x["len"] <= MAX_LEN]


def seed(group, hd, dd, piece):
    hdr = bytes([(1 if hd else 0) | (2 if dd else 0) | (piece << 4), len(group) - 1])
    for k in range(4):
        if k < len(group):
            hdr += struct.pack("<BI", 1 if group[k]["write"] else 0, group[k]["len"])
        else:
            hdr += bytes(5)
    body = []
    for k, inst in enumerate(group):
        cid = k | (k + 1) << 12
        for i, p in inst["pdus"]:
            p = bytearray(p)
            struct.pack_into("<H", p, 20 if p[0] == RSP else 8, cid)
            if hd:
                hlen = p[2]
                struct.pack_into("<I", p, hlen, crc32c(p[:hlen]))
            body.append((i, bytes(p)))
    return hdr + b"".join(p for _, p in sorted(body, key=lambda x: x[0]))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    recdir, outdir = sys.argv[1], sys.argv[2]
    max_seeds = int(sys.argv[3]) if len(sys.argv) == 4 else 60
    os.makedirs(outdir, exist_ok=True)
    seeds, big = [], 0
    for name in sorted(os.listdir(recdir)):
        if not name.endswith(".c2h"):
            continue
        base = os.path.join(recdir, name[:-4])
        c2h = open(base + ".c2h", "rb").read()
        h2c = open(base + ".h2c", "rb").read()
        if len(c2h) < 128 or c2h[0] != ICRESP:
            continue
        hd, dd = bool(c2h[11] & 1), bool(c2h[11] & 2)
        insts = instances(c2h[128:], commands(h2c[128:], 4 if hd else 0))
        # Groups of 1, 2, 3, 4 commands in turn; a few per connection.
        i, size, per_conn = 0, 1, 0
        while i < len(insts) and per_conn < 8:
            group = insts[i:i + size]
            piece = (0, 4, 10)[len(seeds) % 3]
            # nvmet answers a write only after its data arrived: feeding
            # the R2T and the response in separate pieces lets the fuzzer
            # send that data in between, as a real host would.
            if any(g["write"] and g["len"] for g in group):
                piece = 4
            s = seed(group, hd, dd, piece)
            if len(s) > 16384:
                big += 1
            if len(s) <= 16384 or big <= 4:
                seeds.append(s)
                per_conn += 1
            i += size
            size = size % 4 + 1
    # Spread the cap over all connections rather than the first ones.
    if len(seeds) > max_seeds:
        step = len(seeds) / max_seeds
        seeds = [seeds[int(k * step)] for k in range(max_seeds)]
    for s in seeds:
        with open(os.path.join(outdir, hashlib.sha1(s).hexdigest()), "wb") as f:
            f.write(s)
    print(f"rec2corpus: {len(seeds)} seeds in {outdir}")


if __name__ == "__main__":
    main()
