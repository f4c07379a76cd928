#!/usr/bin/python3
"""probe.py unix:PATH | tcp:HOST:PORT [SOURCE_ADDR|-] [LINE]

Connects (from SOURCE_ADDR when given), sends an optional LINE and reads
what the server says first.  Prints "served" when the server spoke (an
NBD greeting, a control or HTTP reply) and "closed" when it closed the
connection without a word; exit 0 either way, 2 when it could not connect.
"""
import socket
import sys

spec = sys.argv[1]
src = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
send = sys.argv[3].encode() if len(sys.argv) > 3 else b""
if send:
    # An HTTP request ends with an empty line; a control request with one
    # newline.
    send += b"\r\n\r\n" if send.startswith(b"GET ") else b"\n"
try:
    if spec.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(spec[5:])
    else:
        host, port = spec[4:].rsplit(":", 1)
        host = host.strip("[]")
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(fam)
        s.settimeout(10)
        if src:
            s.bind((src, 0))
        s.connect((host, int(port)))
except OSError as e:
    print("cannot connect:", e)
    sys.exit(2)
try:
    if send:
        s.sendall(send)
    data = s.recv(64)
except ConnectionResetError:
    data = b""
print("served" if data else "closed")
