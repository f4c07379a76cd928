#!/usr/bin/env python3
"""Hostile NBD clients for t_harden_budget: N connections to a Unix
socket, each sends COUNT reads of LEN bytes and never reads a reply byte
(or, with a sixth argument "write", COUNT writes of LEN bytes each with
only 100 bytes of its payload: the rest never comes).  "trickle-read"
and "trickle-write" do the same but take 96 KiB of each connection's
replies or send 16 KiB of its payload every quarter second: never still
for a second, yet 384 or 64 KiB/s.  Prints "READY" once every request is sent, then
holds the connections until it is killed."""
import socket
import struct
import sys
import time

NBD_OPT_EXPORT_NAME = 1


def recvn(s, n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise EOFError("server closed during the handshake")
        b += x
    return b


def hog(path, export, count, length, write):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # As little kernel buffering as allowed: the server's replies pile up
    # on its side, not in this socket.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(path)
    g = recvn(s, 18)
    assert g[:8] == b"NBDMAGIC" and g[8:16] == b"IHAVEOPT", g
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    name = export.encode()
    s.sendall(b"IHAVEOPT" + struct.pack(">II", NBD_OPT_EXPORT_NAME, len(name)) + name)
    recvn(s, 10)  # size, transmission flags
    for i in range(count):
        s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1 if write else 0, i + 1, i * length, length))
        if write:
            s.sendall(b"\0" * 100)
    s.setblocking(False)
    return s


def trickle(conns, mode):
    for s in list(conns):
        try:
            if mode == "trickle-read":
                if not s.recv(98304):
                    raise EOFError
            else:
                s.send(b"\0" * 16384)
        except BlockingIOError:
            pass
        except (OSError, EOFError):
            conns.remove(s)  # cut off by the server


def main():
    path, export, n, count, length = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    mode = (sys.argv[6:7] or ["read"])[0]
    write = mode in ("write", "trickle-write")
    conns = [hog(path, export, count, length, write) for _ in range(n)]
    print("READY", len(conns), flush=True)
    while True:
        time.sleep(0.25 if mode.startswith("trickle") else 1)
        if mode.startswith("trickle"):
            trickle(conns, mode)


main()
