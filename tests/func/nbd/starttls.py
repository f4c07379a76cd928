"""NBD_OPT_STARTTLS by hand over a Unix socket, for tests that hold or
probe handshake slots: the greeting, the option, its reply."""
import socket
import struct

IHAVEOPT = 0x49484156454F5054
OPT_LIST, OPT_STARTTLS = 3, 5


def recv_exact(s, n):
    """n bytes, or fewer if the server closed first."""
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            break
        b += d
    return b


def option(s, opt):
    s.sendall(struct.pack(">QII", IHAVEOPT, opt, 0))


def reply(s):
    """(type, message) of the next option reply; AssertionError on EOF."""
    r = recv_exact(s, 20)
    assert len(r) == 20, "EOF instead of an option reply"
    typ, ln = struct.unpack(">II", r[12:20])
    return typ, recv_exact(s, ln).decode()


def starttls(path):
    """A connected socket that sent STARTTLS, and the server's reply."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    recv_exact(s, 18)
    s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
    option(s, OPT_STARTTLS)
    return (s,) + reply(s)
