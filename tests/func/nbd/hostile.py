# Hostile clients against the server at argv[1] (a Unix socket), while a
# well-behaved libnbd client keeps using it.  Each attacker must be cut off
# (EOF) and the good client must not notice.
import socket
import struct
import sys

import nbd

path = sys.argv[1]
IHAVEOPT = 0x49484156454F5054
REQ = 0x25609513

def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    g = recv_exact(s, 18)
    assert g[:8] == b"NBDMAGIC", g
    s.sendall(struct.pack(">I", 3))
    return s

def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b

def expect_eof(s, what):
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    s.close()
    print("closed:", what)

def export_name(s, name):
    s.sendall(struct.pack(">QII", IHAVEOPT, 1, len(name)) + name)
    recv_exact(s, 10)  # size, flags (NO_ZEROES negotiated)

good = nbd.NBD()
good.set_export_name("disk")
good.connect_unix(path)
good.pwrite(b"\x77" * 4096, 0)

def good_still_works():
    assert good.pread(4096, 0) == b"\x77" * 4096

# 1. Bad option magic.
s = conn()
s.sendall(b"GET / HTTP/1.0\r\n")
expect_eof(s, "bad option magic")
good_still_works()

# 2. An absurd option length.
s = conn()
s.sendall(struct.pack(">QII", IHAVEOPT, 7, 0x7FFFFFFF))
expect_eof(s, "oversized option")
good_still_works()

# 3. Too many options.
s = conn()
for i in range(65):
    try:
        s.sendall(struct.pack(">QII", IHAVEOPT, 8, 0))
    except BrokenPipeError:
        break
expect_eof(s, "too many options")
good_still_works()

# 4. Unknown command: an EINVAL reply, the connection stays; then a bad
#    request magic closes it.
s = conn()
export_name(s, b"disk")
s.sendall(struct.pack(">IHHQQI", REQ, 0, 77, 1, 0, 512))
magic, err, cookie = struct.unpack(">IIQ", recv_exact(s, 16))
assert (magic, err, cookie) == (0x67446698, 22, 1), (magic, err, cookie)
s.sendall(struct.pack(">IHHQQI", 0xDEADBEEF, 0, 0, 2, 0, 512))
expect_eof(s, "bad request magic")
good_still_works()

# 5. A write claiming a 4 GiB payload.
s = conn()
export_name(s, b"disk")
s.sendall(struct.pack(">IHHQQI", REQ, 0, 1, 3, 0, 0xFFFFF000))
expect_eof(s, "oversized write")
good_still_works()

# 6. Out of range read: EINVAL, still connected, then a clean disconnect.
s = conn()
export_name(s, b"disk")
s.sendall(struct.pack(">IHHQQI", REQ, 0, 0, 4, 1 << 40, 512))
magic, err, cookie = struct.unpack(">IIQ", recv_exact(s, 16))
assert (err, cookie) == (22, 4), (err, cookie)
s.sendall(struct.pack(">IHHQQI", REQ, 0, 2, 5, 0, 0))
expect_eof(s, "NBD_CMD_DISC")
good_still_works()

good.shutdown()
print("OK hostile")
