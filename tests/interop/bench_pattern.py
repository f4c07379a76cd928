#!/usr/bin/env python3
"""Checks that FILE holds what `nvmf-gateway bench --verify --seed SEED` writes:
every LBA_SIZE block starts with the header naming it (magic, its LBA, a
generation, the seed).  Used to read the gateway's writes back through
another host (the kernel's).  Exit 0 when every block matches."""
import struct
import sys

MAGIC = 0x6E766D6667776221


def main():
    path, lba_size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    bad = n = 0
    with open(path, "rb") as f:
        while True:
            blk = f.read(lba_size)
            if len(blk) < lba_size:
                break
            magic, lba, _gen, s = struct.unpack_from("<QQII", blk)
            if magic != MAGIC or lba != n or s != seed:
                if bad < 5:
                    print(f"block {n}: magic {magic:#x} lba {lba} seed {s}")
                bad += 1
            n += 1
    print(f"{n} blocks, {bad} bad")
    return 0 if n and not bad else 1


sys.exit(main())
