#!/usr/bin/env python3
"""A minimal NVMe/TCP host written from the spec, to check what the gateway
cannot show of nvmf-test-target: Identify fields, the ANA log and its AEN,
lose-cache against Flush and FUA, the keep-alive timeout, and the answer to
bad PDUs (C2HTermReq, then close).  Run by tests/func/t_target_raw.sh.

usage: rawhost.py PORT NQN NSCOUNT TARGET_BINARY CONTROL_SOCKET
"""
import socket
import struct
import subprocess
import sys
import time

PORT, NQN, NSCOUNT, TGT, CTL = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                sys.argv[4], sys.argv[5])
HOSTNQN = "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000aa"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def ctl(*words):
    out = subprocess.run([TGT, "--ctl", CTL] + list(words), capture_output=True, text=True)
    check(out.returncode == 0, "control %s: %s" % (words, out.stdout + out.stderr))


class Conn:
    def __init__(self, hdgst=False):
        self.s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
        self.hdgst = hdgst
        self.cid = 0
        icreq = struct.pack("<BBBBIHBBI", 0, 0, 128, 0, 128, 0, 0, 1 if hdgst else 0, 0)
        self.s.sendall(icreq.ljust(128, b"\0"))
        t, _, hdr, _ = self.recv_pdu()
        check(t == 1, "ICResp expected, got type %d" % t)
        pfv, cpda, dgst, maxdata = struct.unpack_from("<HBBI", hdr, 8)
        check(pfv == 0 and cpda == 0 and dgst == (1 if hdgst else 0) and maxdata >= 4096,
              "ICResp pfv %d cpda %d dgst %d maxdata %d" % (pfv, cpda, dgst, maxdata))
        self.maxdata = maxdata

    def recv_exact(self, n):
        b = b""
        while len(b) < n:
            chunk = self.s.recv(n - len(b))
            if not chunk:
                raise EOFError
            b += chunk
        return b

    def recv_pdu(self):
        ch = self.recv_exact(8)
        t, flags, hlen, pdo, plen = struct.unpack("<BBBBI", ch)
        rest = self.recv_exact(plen - 8)
        pdu = ch + rest
        return t, flags, pdu[:hlen], pdu

    def send_pdu(self, hdr, data=b"", dflags=0):
        hd = 4 if self.hdgst else 0
        flags = hdr[1] | (1 if self.hdgst else 0)
        hdr = bytearray(hdr)
        hdr[1] = flags
        pdo = len(hdr) + hd if data else 0
        hdr[3] = pdo
        struct.pack_into("<I", hdr, 4, (pdo + len(data)) if data else len(hdr) + hd)
        out = bytes(hdr) + (struct.pack("<I", crc32c(hdr)) if hd else b"")
        self.s.sendall(out + data)

    def sqe(self, opcode, nsid=0, cdw10=0, cdw11=0, cdw12=0, cdw13=0, dlen=0, incapsule=False,
            raw=None):
        self.cid = (self.cid + 1) & 0xFFFF
        b = bytearray(64) if raw is None else bytearray(raw)
        b[0] = opcode
        b[1] = 0x40
        struct.pack_into("<H", b, 2, self.cid)
        if raw is None:
            struct.pack_into("<I", b, 4, nsid)
            struct.pack_into("<IIIIII", b, 40, cdw10, cdw11, cdw12, cdw13, 0, 0)
        struct.pack_into("<QI3xB", b, 24, 0, dlen, (0x01 if incapsule else 0x5A) if dlen else 0x5A)
        return b

    def cmd(self, sqe, data=b"", want=0):
        """Sends a command; returns (status field, dw0/u64 result, c2h data)."""
        incap = data and sqe[39] == 0x01
        self.send_pdu(struct.pack("<BBBBI", 4, 0, 72, 0, 0) + bytes(sqe), data if incap else b"")
        cid = struct.unpack_from("<H", sqe, 2)[0]
        got = bytearray(want)
        while True:
            t, flags, hdr, pdu = self.recv_pdu()
            if t == 7:  # C2HData
                cccid, _, off, ln = struct.unpack_from("<HHII", hdr, 8)
                check(cccid == cid, "C2HData for CID %d, want %d" % (cccid, cid))
                pdo = hdr[3]
                got[off:off + ln] = pdu[pdo:pdo + ln]
                if flags & 0x8:
                    return 0, 0, bytes(got)
            elif t == 9:  # R2T
                cccid, ttag, off, ln = struct.unpack_from("<HHII", hdr, 8)
                check(cccid == cid and off + ln <= len(data), "R2T [%d,+%d)" % (off, ln))
                pos = off
                while pos < off + ln:
                    n = min(self.maxdata, off + ln - pos)
                    last = 0x4 if pos + n == off + ln else 0
                    h = struct.pack("<BBBBIHHII4x", 6, last, 24, 0, 0, cid, ttag, pos, n)
                    self.send_pdu(h, data[pos:pos + n])
                    pos += n
            elif t == 5:  # CapsuleResp
                res, _, _, rcid, st = struct.unpack_from("<QHHHH", hdr, 8)
                check(rcid == cid, "response for CID %d, want %d" % (rcid, cid))
                return st >> 1, res, bytes(got)
            else:
                fail("unexpected PDU type %d" % t)


def connect(c, qid, cntlid=0xFFFF, kato=0, sqsize=31, nqn=NQN):
    b = bytearray(64)
    b[4] = 1  # fctype Connect
    struct.pack_into("<HHHBxI", b, 40, 0, qid, sqsize, 0, kato)
    d = bytearray(1024)
    struct.pack_into("<H", d, 16, cntlid)
    d[256:256 + len(nqn)] = nqn.encode()
    d[512:512 + len(HOSTNQN)] = HOSTNQN.encode()
    st, res, _ = c.cmd(c.sqe(0x7F, raw=b, dlen=1024, incapsule=True), bytes(d))
    return st, res & 0xFFFF


def prop(c, off, value=None, eight=False):
    b = bytearray(64)
    b[4] = 0 if value is not None else 4
    b[40] = 1 if eight else 0
    struct.pack_into("<I", b, 44, off)
    if value is not None:
        struct.pack_into("<Q", b, 48, value)
    st, res, _ = c.cmd(c.sqe(0x7F, raw=b))
    check(st == 0, "property %#x: status %#x" % (off, st))
    return res


def admin(kato=0):
    c = Conn()
    st, cntlid = connect(c, 0, kato=kato)
    check(st == 0, "admin connect: status %#x" % st)
    return c, cntlid


def enable(c):
    prop(c, 0x14, 1 | (6 << 16) | (4 << 20))
    check(prop(c, 0x1C) & 1, "CSTS.RDY not set after CC.EN")


def test_identify():
    c, cntlid = admin()
    st, _, _ = c.cmd(c.sqe(0x06, cdw10=1, dlen=4096), want=4096)
    check(st == 0x400C, "Identify before CC.EN: status %#x, want Command Sequence Error + DNR" % st)
    cap = prop(c, 0x00, eight=True)
    check(cap & 0xFFFF == 127 and (cap >> 24) & 0xFF and (cap >> 37) & 1, "CAP %#x" % cap)
    check(prop(c, 0x08) >= 0x10300, "VS below 1.3")
    enable(c)
    st, _, idc = c.cmd(c.sqe(0x06, cdw10=1, dlen=4096), want=4096)
    check(st == 0, "Identify Controller: %#x" % st)
    mdts, idcntlid, ver = idc[77], struct.unpack_from("<H", idc, 78)[0], struct.unpack_from("<I", idc, 80)[0]
    check(mdts == 5 and idcntlid == cntlid and ver == 0x10300, "mdts %d cntlid %d ver %#x" % (mdts, idcntlid, ver))
    nn, oncs = struct.unpack_from("<IH", idc, 516)
    sgls, = struct.unpack_from("<I", idc, 536)
    ioccsz, = struct.unpack_from("<I", idc, 1792)
    check(nn == NSCOUNT and oncs & 0xC == 0xC and idc[525] & 1, "nn %d oncs %#x vwc %#x" % (nn, oncs, idc[525]))
    check(sgls & 1 and sgls & (1 << 20) and ioccsz == (64 + 8192) // 16, "sgls %#x ioccsz %d" % (sgls, ioccsz))
    # NVMe 2.x Identify Controller: ANATT 342, ANACAP 343, ANAGRPMAX 344,
    # NANAGRPID 348 (the bytes nvmet sends, tests/unit/test_id_ctrl.c).
    check(idc[76] & 0x8 and idc[342] and idc[343] == 0x1f and
          struct.unpack_from("<I", idc, 348)[0] == NSCOUNT, "ANA fields")
    check(idc[768:768 + len(NQN)].decode() == NQN, "subnqn")
    check(struct.unpack_from("<H", idc, 320)[0] > 0, "KAS is 0")
    st, _, lst = c.cmd(c.sqe(0x06, cdw10=2, dlen=4096), want=4096)
    ids = [x for x in struct.unpack("<1024I", lst) if x]
    check(st == 0 and ids == list(range(1, NSCOUNT + 1)), "active namespace list %s" % ids[:8])
    seen = set()
    for nsid in ids:
        st, _, ns = c.cmd(c.sqe(0x06, nsid=nsid, cdw10=0, dlen=4096), want=4096)
        nsze, ncap, nuse = struct.unpack_from("<QQQ", ns, 0)
        ds = ns[128 + 2]
        check(st == 0 and nsze == ncap == nuse > 0 and ds in (9, 12), "Identify NS %d" % nsid)
        check(struct.unpack_from("<I", ns, 92)[0] == nsid and ns[33] & 0x8, "anagrpid/dlfeat of %d" % nsid)
        nguid, eui = bytes(ns[104:120]), bytes(ns[120:128])
        check(nguid not in seen and eui not in seen and any(nguid), "NGUID/EUI64 of %d not unique" % nsid)
        seen |= {nguid, eui}
        st, _, desc = c.cmd(c.sqe(0x06, nsid=nsid, cdw10=3, dlen=4096), want=4096)
        check(st == 0 and desc[0] == 1 and desc[12] == 2 and desc[16:32] == nguid, "NS descriptors of %d" % nsid)
    st, _, _ = c.cmd(c.sqe(0x06, nsid=NSCOUNT + 1, cdw10=0, dlen=4096), want=4096)
    check(st == 0x400B, "Identify of a missing namespace: %#x, want Invalid Namespace + DNR" % st)
    st, dw0, _ = c.cmd(c.sqe(0x09, cdw10=7, cdw11=(3 << 16) | 3))
    check(st == 0 and dw0 == (3 << 16) | 3, "Set Features Number of Queues: %#x %#x" % (st, dw0))
    st, _, _ = c.cmd(c.sqe(0x09, cdw10=0x99))
    check(st == 0x4002, "unknown feature: %#x" % st)
    prop(c, 0x14, 1 | (6 << 16) | (4 << 20) | (1 << 14))
    check((prop(c, 0x1C) >> 2) & 3 == 2, "CSTS.SHST not complete after CC.SHN")
    print("ok: identify, properties, features")


def ana_log(c, rae=False):
    st, _, log = c.cmd(c.sqe(0x02, cdw10=0x0C | (rae << 15) | ((4096 // 4 - 1) << 16), dlen=4096),
                       want=4096)
    check(st == 0, "ANA log: %#x" % st)
    ngrps = struct.unpack_from("<H", log, 8)[0]
    states, off = {}, 16
    for _ in range(ngrps):
        grp, nns, _, state = struct.unpack_from("<IIQB", log, off)
        states[grp] = state
        off += 32 + 4 * nns
    return states


def test_aen():
    c, _ = admin()
    enable(c)
    check(ana_log(c) == {n: 1 for n in range(1, NSCOUNT + 1)}, "ANA log not all optimized")
    aer = c.sqe(0x0C)
    c.send_pdu(struct.pack("<BBBBI", 4, 0, 72, 0, 0) + bytes(aer))
    ctl("ana", NQN, "2", "inaccessible")
    t, _, hdr, _ = c.recv_pdu()
    dw0, _, _, _, cid, st = struct.unpack_from("<IIHHHH", hdr, 8)
    check(t == 5 and cid == struct.unpack_from("<H", aer, 2)[0] and st >> 1 == 0, "AER completion")
    check(dw0 == 0x000C0302, "AEN dw0 %#x, want ANA change notice 0x000c0302" % dw0)
    states = ana_log(c)
    check(states[2] == 3 and states[1] == 1, "ANA log after change: %s" % states)
    # "noaen": the state changes, the log says so, but no event is sent
    # (a lost AEN, for the chaos schedule); the next change with the
    # event completes the same AER.
    aer = c.sqe(0x0C)
    c.send_pdu(struct.pack("<BBBBI", 4, 0, 72, 0, 0) + bytes(aer))
    ctl("ana", NQN, "2", "optimized", "1", "noaen")
    c.s.settimeout(0.5)
    try:
        c.recv_pdu()
        fail("an AEN was sent for 'ana ... noaen'")
    except socket.timeout:
        pass
    c.s.settimeout(10)
    check(ana_log(c, rae=True)[2] == 1, "ANA log after a change without the event")
    ctl("ana", NQN, "2", "optimized")
    t, _, hdr, _ = c.recv_pdu()
    dw0, _, _, _, cid, st = struct.unpack_from("<IIHHHH", hdr, 8)
    check(t == 5 and cid == struct.unpack_from("<H", aer, 2)[0] and dw0 == 0x000C0302,
          "AEN after 'noaen' then a change with the event: type %d dw0 %#x" % (t, dw0))
    ana_log(c)
    print("ok: ANA change AEN and ANA log; 'noaen' changes the state without the event")


def io_queue():
    c, cntlid = admin()
    enable(c)
    st, _, _ = c.cmd(c.sqe(0x09, cdw10=7, cdw11=0))
    check(st == 0, "number of queues")
    q = Conn()
    st, _ = connect(q, 1, cntlid=cntlid, sqsize=127)
    check(st == 0, "I/O connect: %#x" % st)
    return c, q


def write(q, lba, data, fua=False):
    n = len(data) // 512
    incap = len(data) <= 8192
    st, _, _ = q.cmd(q.sqe(0x01, nsid=1, cdw10=lba, cdw12=(n - 1) | (1 << 30 if fua else 0),
                           dlen=len(data), incapsule=incap), data)
    check(st == 0, "write at %d: %#x" % (lba, st))


def read(q, lba, n):
    st, _, d = q.cmd(q.sqe(0x02, nsid=1, cdw10=lba, cdw12=n - 1, dlen=n * 512), want=n * 512)
    check(st == 0, "read at %d: %#x" % (lba, st))
    return d


def test_lose_cache():
    c, q = io_queue()
    write(q, 0, b"A" * 512)
    st, _, _ = q.cmd(q.sqe(0x00, nsid=1))
    check(st == 0, "flush")
    write(q, 8, b"B" * 512)
    write(q, 16, b"C" * 512, fua=True)
    write(q, 64, b"D" * 16384)  # by R2T/H2CData
    check(read(q, 64, 32) == b"D" * 16384, "R2T write did not land")
    ctl("lose-cache")
    check(read(q, 0, 1) == b"A" * 512, "flushed block lost")
    check(read(q, 8, 1) == bytes(512), "unflushed block survived lose-cache")
    check(read(q, 16, 1) == b"C" * 512, "FUA block lost")
    check(read(q, 64, 32) == bytes(16384), "unflushed R2T write survived lose-cache")
    write(q, 128, b"E" * 4096)
    rng = struct.pack("<IIQ", 0, 4, 129)
    st, _, _ = q.cmd(q.sqe(0x09, nsid=1, cdw10=0, cdw11=1 << 2, dlen=16, incapsule=True), rng)
    check(st == 0 and read(q, 128, 8) == b"E" * 512 + bytes(2048) + b"E" * 1536, "DSM deallocate")
    st, _, _ = q.cmd(q.sqe(0x08, nsid=1, cdw10=128, cdw12=0))
    check(st == 0 and read(q, 128, 1) == bytes(512), "write zeroes")
    st, _, _ = q.cmd(q.sqe(0x02, nsid=1, cdw10=0xFFFFFFF0, cdw12=0, dlen=512), want=512)
    check(st == 0x4080, "read beyond the end: %#x, want LBA Out of Range + DNR" % st)
    st, _, _ = q.cmd(q.sqe(0x02, nsid=1, cdw10=0, cdw12=1, dlen=512), want=512)
    check(st == 0x400F, "read with a short SGL: %#x, want Data SGL Length Invalid + DNR" % st)
    print("ok: lose-cache honours Flush and FUA; DSM, Write Zeroes, range checks")


def expect_term(c, fes, what):
    try:
        t, _, hdr, _ = c.recv_pdu()
    except (EOFError, ConnectionResetError):
        fail("%s: connection closed without a C2HTermReq" % what)
    check(t == 3 and struct.unpack_from("<H", hdr, 8)[0] == fes,
          "%s: PDU type %d fes %#x, want C2HTermReq fes %#x" % (what, t, struct.unpack_from("<H", hdr, 8)[0], fes))
    try:
        check(c.s.recv(1) == b"", "%s: connection not closed after the TermReq" % what)
    except ConnectionResetError:
        pass
    print("ok: %s -> C2HTermReq fes %#x and close" % (what, fes))


def test_bad_pdus():
    c = Conn()
    c.s.sendall(struct.pack("<BBBBI", 4, 0, 70, 0, 78) + bytes(70))
    expect_term(c, 1, "capsule with hlen 70")
    c = Conn(hdgst=True)
    pdu = bytearray(struct.pack("<BBBBI", 4, 1, 72, 0, 76)) + bytes(64)
    c.s.sendall(bytes(pdu) + struct.pack("<I", crc32c(pdu) ^ 1))
    expect_term(c, 3, "wrong header digest")
    c = Conn()
    c.send_pdu(struct.pack("<BBBBIHHII4x", 6, 4, 24, 0, 0, 1, 5, 0, 512), bytes(512))
    expect_term(c, 1, "H2CData without an R2T")
    c = Conn()
    c.s.sendall(struct.pack("<BBBBI", 0, 0, 128, 0, 128) + bytes(120))
    expect_term(c, 2, "second ICReq")


def test_kato():
    c, _ = admin(kato=1000)
    enable(c)
    start = time.monotonic()
    c.s.settimeout(30)
    try:
        data = c.s.recv(1)
    except ConnectionResetError:
        data = b""
    took = time.monotonic() - start
    check(data == b"", "target sent data instead of closing")
    check(took >= 0.9, "closed after %.2f s, before the 1 s keep-alive timeout" % took)
    print("ok: keep-alive timeout closes the association (after %.1f s)" % took)


test_identify()
test_aen()
test_lose_cache()
test_bad_pdus()
test_kato()
print("pass")
