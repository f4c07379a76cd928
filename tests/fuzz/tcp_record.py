#!/usr/bin/env python3
"""Recording TCP proxy for the fuzz corpus: listens on LISTEN (addr:port),
forwards every connection to TARGET (addr:port), and writes the bytes of
connection N to OUTDIR/connNNN.h2c (host to target) and OUTDIR/connNNN.c2h
(target to host), untouched.  Runs until killed.

usage: tcp_record.py LISTEN TARGET OUTDIR"""
import os
import socket
import sys
import threading


def split(hp):
    host, port = hp.rsplit(":", 1)
    return host, int(port)


def pump(src, dst, path):
    with open(path, "wb") as f:
        while True:
            try:
                b = src.recv(1 << 16)
            except OSError:
                b = b""
            if not b:
                break
            f.write(b)
            try:
                dst.sendall(b)
            except OSError:
                break
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    listen, target, outdir = split(sys.argv[1]), split(sys.argv[2]), sys.argv[3]
    os.makedirs(outdir, exist_ok=True)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(listen)
    ls.listen(64)
    n = 0
    while True:
        c, _ = ls.accept()
        try:
            t = socket.create_connection(target)
        except OSError as e:
            print(f"tcp_record: cannot reach {target}: {e}", file=sys.stderr)
            c.close()
            continue
        for s in (c, t):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        base = os.path.join(outdir, f"conn{n:03d}")
        n += 1
        threading.Thread(target=pump, args=(c, t, base + ".h2c"), daemon=True).start()
        threading.Thread(target=pump, args=(t, c, base + ".c2h"), daemon=True).start()


if __name__ == "__main__":
    main()
