#!/usr/bin/python3
"""One seed of the chaos harness (run by tests/chaos/run, not by hand).

chaos.py SEED DIR [SCHEDULE_SECONDS]

Starts the in-tree test target (two ports, --persist --vwc, two
namespaces) and `nvmf-gateway run` with both ports as two paths of one
target (policy, digests and timeouts picked by the seed), and runs:
  - an asynchronous verifying workload on export e1 through its NBD socket
    (libnbd, several commands in flight: writes, FUA writes, reads, flushes;
    some writes and reads cover 16 or 32 consecutive blocks, 64 or 128 KiB,
    which the gateway moves through pipes: each counts as a write or read
    of every block it covers);
  - two threads on export e2 through its FUSE file (pwrite, O_DSYNC pwrite,
    pread, fsync; one thread with O_DIRECT);
while a schedule drawn from SEED drives every fault knob of the target.
Then everything is undone (clear, ports up, ANA optimized) and it checks:
  liveness   every I/O completed (success or error) within LIVE_BOUND s, I/O
             works again after the faults, and `nvmf-gateway status` answers;
  integrity  every block reads back (through NBD, for both exports) as its
             last acknowledged write, or, where a lost volatile cache allowed
             it, as a value written since the last flush or FUA write that
             covered it;
  once       no NBD reply is delivered twice (replies counted per command);
  shutdown   SIGTERM ends the gateway with status 0 within TERM_BOUND s;
  logs       no sanitizer report or broken invariant in the gateway's log.
Exit 0 when all hold, 1 otherwise (the reasons on stdout).  The last line
of stdout is always one JSON object with the figures of the run.
"""
import json
import mmap
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import nbd

BS = 4096
LIVE_BOUND = 60.0  # no I/O may take longer: the gateway's own bounds are far below
RECOVER_BOUND = 60.0  # I/O works again this soon after the faults are undone
TERM_BOUND = 10.0  # SIGTERM to exit
NQN = "nqn.2026-01.io.nvmf-gateway:chaos"
NBLOCKS = 1024  # 4 MiB of each namespace is exercised (rewrites are the point)
QD = 8
# Of the NBD writes and reads, this share covers LARGE_BLOCKS consecutive
# blocks (64 or 128 KiB): the gateway moves those through pipes.
LARGE_SHARE = 0.12
LARGE_BLOCKS = (16, 32)

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GW = os.environ.get("CHAOS_GW", os.path.join(TOP, "build", "nvmf-gateway"))
TGT = os.environ.get("CHAOS_TGT", os.path.join(TOP, "build", "nvmf-test-target"))

failures = []
flock = threading.RLock()


def fail(msg):
    with flock:
        failures.append(msg)
    print("FAIL: " + msg, flush=True)


def log(msg):
    print("%8.3f %s" % (time.monotonic() - T0, msg), flush=True)


T0 = time.monotonic()


def pattern(exp, blk, gen):
    if gen == 0:
        return bytes(BS)  # a block never written holds zeros
    head = b"chaos%03d%08x%016x" % (exp, blk, gen)
    head += b"." * (32 - len(head))
    return head * (BS // 32)


def decode(exp, blk, data):
    """The generation a block holds, or None for anything not written whole."""
    if data == bytes(BS):
        return 0
    try:
        gen = int(data[16:32].rstrip(b"."), 16)
    except ValueError:
        return None
    return gen if bytes(data) == pattern(exp, blk, gen) else None


class Epoch:
    """Lost-cache bookkeeping shared by both exports (one target).  A
    command is 'clean' if no lose-cache overlapped it."""

    def __init__(self):
        self.n = 0
        self.losing = False


class Model:
    """What each block of one export may hold.  hist[b] lists every value
    ever sent to b (index 0: zeros); low[b] is the oldest entry it may
    still hold, dur[b] the newest entry a flush or FUA made durable (a
    flush vouches for low[b] at its issue),
    last_ok[b] the newest acknowledged write.  One command per block at a
    time, so the order of values is the order of acknowledgements."""

    def __init__(self, name, exp, epoch, lock):
        self.name, self.exp, self.ep, self.lock = name, exp, epoch, lock
        self.hist = [[0] for _ in range(NBLOCKS)]
        self.low = [0] * NBLOCKS
        self.dur = [0] * NBLOCKS
        self.last_ok = [0] * NBLOCKS
        # A failed flush may mean acknowledged writes were lost (a path
        # reset with its volatile cache): it says so once, and no later
        # flush vouches for what was acknowledged before that failure.
        self.nodur = [0] * NBLOCKS
        self.busy = set()
        self.gen = 0
        self.st = dict(writes=0, fua=0, reads=0, flushes=0, errors=0, checked=0,
                       large_writes=0, large_reads=0)

    def tag(self):
        return None if self.ep.losing else self.ep.n

    def clean(self, tag):
        return tag is not None and tag == self.ep.n and not self.ep.losing

    def pick(self, rng):
        for _ in range(8):
            b = rng.randrange(NBLOCKS)
            if b not in self.busy:
                self.busy.add(b)
                return b
        return None

    def pick_range(self, rng, n):
        """n consecutive free blocks, all marked busy; their first, or None."""
        for _ in range(8):
            b = rng.randrange(NBLOCKS - n + 1)
            if self.busy.isdisjoint(range(b, b + n)):
                self.busy.update(range(b, b + n))
                return b
        return None

    def write_issue(self, b):
        self.gen += 1
        return self.gen, self.tag()

    def write_done(self, b, gen, tag, fua, ok, count=True):
        """count: False for the blocks of a large write after its first
        (one command, counted once)."""
        self.busy.discard(b)
        self.hist[b].append(gen)
        idx = len(self.hist[b]) - 1
        if not ok:
            if count:
                self.st["errors"] += 1
            return  # it may or may not have landed: hist[low:] has both
        if count:
            self.st["writes"] += 1
            if fua:
                self.st["fua"] += 1
        self.last_ok[b] = idx
        if self.clean(tag):
            self.low[b] = idx
            if fua:
                self.dur[b] = idx

    def flush_issue(self):
        # A flush makes durable what each block holds when it runs: at
        # least low[b], not last_ok[b].  An acknowledged write that a
        # lose-cache overlapped may already be gone (the target ran it,
        # then reverted the page and marked it clean), and no flush brings
        # it back: vouching for it made a later loss's revert to the older
        # value look like a lost durable write (model_selftest).
        return list(self.low), self.tag()

    def flush_done(self, snap, tag, ok):
        if not ok:
            self.st["errors"] += 1
            for b in range(NBLOCKS):
                if self.last_ok[b] > self.nodur[b]:
                    self.nodur[b] = self.last_ok[b]
            return
        self.st["flushes"] += 1
        if self.clean(tag):
            for b in range(NBLOCKS):
                if snap[b] > self.dur[b] and snap[b] > self.nodur[b]:
                    self.dur[b] = snap[b]

    def lose(self):
        """The target is about to drop its volatile cache: each block may
        go back to anything since its durable entry."""
        for b in range(NBLOCKS):
            if self.dur[b] < self.low[b]:
                self.low[b] = self.dur[b]

    def check(self, b, data, when):
        self.st["checked"] += 1
        gen = decode(self.exp, b, data)
        allowed = self.hist[b][self.low[b]:]
        if gen is None or gen not in allowed:
            fail("%s: %s: block %d holds %s, want one of %s (history %s, low %d, durable %d)"
                 % (self.name, when, b, "garbage" if gen is None else "generation %d" % gen,
                    allowed[-6:], self.hist[b][-8:], self.low[b], self.dur[b]))
            return False
        return True


class NbdLoad(threading.Thread):
    """Asynchronous writes/FUA writes/reads/flushes on one NBD export;
    every reply counted per command."""

    def __init__(self, model, sock, seed, lock):
        super().__init__(daemon=True)
        self.m, self.sock, self.lock = model, sock, lock
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.inflight = {}  # id -> [kind, start, args...]
        self.replies = {}
        self.next_id = 0
        self.last_ok = 0.0
        self.dead = False
        self.hung = set()

    def run(self):
        h = nbd.NBD()
        h.connect_uri("nbd+unix:///e1?socket=" + self.sock)
        self.h = h
        while True:
            if self.stop.is_set():
                if not self.inflight:
                    break
            else:
                while len(self.inflight) < QD:
                    if not self.issue(h):
                        break
            if h.aio_is_dead():
                fail("%s: the NBD connection died: %s" % (self.m.name, nbd.get_error()))
                self.dead = True
                return
            h.poll(100)
            now = time.monotonic()
            for i, op in self.inflight.items():
                if now - op[1] > LIVE_BOUND and i not in self.hung:
                    self.hung.add(i)
                    fail("%s: NBD %s (block, count) %s pending for more than %.0f s" %
                         (self.m.name, op[0], op[2:4], LIVE_BOUND))
            if self.hung and self.stop.is_set():
                return  # hangs are forever: reported, stop waiting
        h.shutdown()

    def issue(self, h):
        r = self.rng.random()
        i = self.next_id
        with self.lock:
            if r < 0.08:
                snap, tag = self.m.flush_issue()
                op = ["flush", time.monotonic(), None, None, snap, tag]
                self.inflight[i] = op
                self.next_id += 1
                h.aio_flush(completion=lambda e, i=i: self.done(i, e.value))
                return True
            n, b = 1, None
            if self.rng.random() < LARGE_SHARE:
                # A large one only where all its blocks are free; else
                # one block, as usual.
                n = self.rng.choice(LARGE_BLOCKS)
                b = self.m.pick_range(self.rng, n)
                if b is None:
                    n = 1
            if b is None:
                b = self.m.pick(self.rng)
            if b is None:
                return False
            if r < 0.55:
                fua = self.rng.random() < 0.15
                gens, tag = [], None
                for k in range(n):  # a write of each block
                    gen, tag = self.m.write_issue(b + k)
                    gens.append(gen)
                buf = b"".join(pattern(self.m.exp, b + k, gens[k]) for k in range(n))
                op = ["write", time.monotonic(), b, n, gens, tag, fua]
                self.inflight[i] = op
                self.next_id += 1
                h.aio_pwrite(buf, b * BS, completion=lambda e, i=i: self.done(i, e.value),
                             flags=nbd.CMD_FLAG_FUA if fua else 0)
            else:
                buf = bytearray(n * BS)
                op = ["read", time.monotonic(), b, n, buf]
                self.inflight[i] = op
                self.next_id += 1
                h.aio_pread(buf, b * BS, completion=lambda e, i=i: self.done(i, e.value))
        return True

    def done(self, i, err):
        self.replies[i] = self.replies.get(i, 0) + 1
        if self.replies[i] > 1 or i not in self.inflight:
            fail("%s: NBD command %d completed %d times" % (self.m.name, i, self.replies[i]))
            return 1
        op = self.inflight.pop(i)
        ok = err == 0
        took = time.monotonic() - op[1]
        if took > LIVE_BOUND and i not in self.hung:
            fail("%s: NBD %s took %.1f s" % (self.m.name, op[0], took))
        if ok and op[0] != "flush":
            # Only a read or write says a path works again: a flush
            # with nothing acknowledged to vouch for succeeds without one.
            self.last_ok = time.monotonic()
        with self.lock:
            if op[0] == "flush":
                self.m.flush_done(op[4], op[5], ok)
                return 1
            b, n = op[2], op[3]
            if n > 1:
                self.m.st["large_" + op[0] + "s"] += 1
            if op[0] == "write":
                for k in range(n):  # each block written, with the command's outcome
                    self.m.write_done(b + k, op[4][k], op[5], op[6], ok, count=k == 0)
                return 1
            for k in range(n):
                self.m.busy.discard(b + k)
            if not ok:
                self.m.st["errors"] += 1
                return 1
            self.m.st["reads"] += 1
            when = "NBD read during the faults"
            if n > 1:
                when = "NBD read of blocks %d-%d during the faults" % (b, b + n - 1)
            for k in range(n):
                self.m.check(b + k, op[4][k * BS:(k + 1) * BS], when)
        return 1


class FuseLoad(threading.Thread):
    """Blocking pwrite/pread/fsync on the FUSE file, on the blocks
    congruent to `part` mod 2 (so no other thread touches them)."""

    def __init__(self, model, path, seed, part, direct, lock):
        super().__init__(daemon=True)
        self.m, self.path, self.part, self.direct, self.lock = model, path, part, direct, lock
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.cur = None  # (what, start) of the call in progress
        self.last_ok = 0.0
        self.hung = False

    def run(self):
        flags = os.O_RDWR | (os.O_DIRECT if self.direct else 0)
        fd = os.open(self.path, flags)
        fds = os.open(self.path, flags | os.O_DSYNC)
        buf = mmap.mmap(-1, BS)  # page-aligned, as O_DIRECT wants
        while not self.stop.is_set():
            r = self.rng.random()
            b = self.rng.randrange(NBLOCKS // 2) * 2 + self.part
            with self.lock:
                if b in self.m.busy:
                    continue
                self.m.busy.add(b)
            try:
                if r < 0.08:
                    with self.lock:
                        self.m.busy.discard(b)
                        snap, tag = self.m.flush_issue()
                    try:
                        self.call("fsync", lambda: os.fsync(fd), live=False)
                        ok = True
                    except OSError:
                        ok = False
                    with self.lock:
                        self.m.flush_done(snap, tag, ok)
                    continue
                elif r < 0.55:
                    fua = self.rng.random() < 0.15
                    with self.lock:
                        gen, tag = self.m.write_issue(b)
                    buf[:] = pattern(self.m.exp, b, gen)
                    try:
                        n = self.call("pwrite", lambda: os.pwritev(fds if fua else fd, [buf], b * BS))
                        ok = n == BS
                    except OSError:
                        ok = False
                    with self.lock:
                        self.m.write_done(b, gen, tag, fua, ok)
                    continue
                else:
                    # A buffered read may come from the page cache.
                    n = self.call("pread", lambda: os.preadv(fd, [buf], b * BS),
                                  live=self.direct)
                    with self.lock:
                        self.m.busy.discard(b)
                        self.m.st["reads"] += 1
                        if n == BS:
                            self.m.check(b, bytes(buf), "FUSE read during the faults")
            except OSError:
                with self.lock:
                    self.m.busy.discard(b)
                    self.m.st["errors"] += 1
        os.close(fd)
        os.close(fds)

    def call(self, what, fn, live=True):
        """live: its success shows that I/O reaches the target (not an
        fsync, which may have nothing to flush, nor a cached read)."""
        self.cur = (what, time.monotonic())
        try:
            r = fn()
            if live:
                self.last_ok = time.monotonic()
            return r
        finally:
            took = time.monotonic() - self.cur[1]
            self.cur = None
            if took > LIVE_BOUND:
                fail("%s: FUSE %s took %.1f s" % (self.m.name, what, took))

    def watch(self):
        c = self.cur
        if c and time.monotonic() - c[1] > LIVE_BOUND and not self.hung:
            self.hung = True
            fail("%s: FUSE %s pending for more than %.0f s" % (self.m.name, c[0], LIVE_BOUND))


class Schedule:
    """Faults drawn from the seed; each one that lasts is undone later."""

    STATUSES = [  # (sct, sc): generic, command specific, media, path related, vendor
        (0, 0x04), (0, 0x06), (0, 0x07), (0, 0x21), (1, 0x00), (1, 0x0b), (2, 0x81),
        (2, 0x85), (3, 0x00), (3, 0x01), (3, 0x02), (3, 0x03), (3, 0x60), (3, 0x70), (7, 0x01)]
    KINDS = ["status", "ana", "drop", "drop-after", "refuse", "delay", "reorder", "port",
             "corrupt", "malformed", "lose-cache", "ana-outage"]

    def __init__(self, rng, ctl, epoch, models, lock, control):
        self.rng, self.ctl, self.ep, self.models, self.lock = rng, ctl, epoch, models, lock
        self.control = control
        self.undo = []  # (due, command words)
        self.count = {}
        self.injected = 0
        self.ports_down = set()
        # Swarm testing: each seed draws from its own few kinds, so that
        # a quiet schedule (say, statuses and nothing that resets a path)
        # is as likely as a storm of everything.
        self.kinds = rng.sample(self.KINDS, rng.randint(1, len(self.KINDS)))
        log("fault kinds of this seed: %s" % " ".join(self.kinds))

    def cmd(self, *words):
        out = subprocess.run([TGT, "--ctl", self.ctl] + [str(w) for w in words],
                             capture_output=True, text=True, timeout=30)
        log("target: %s -> %s" % (" ".join(str(w) for w in words), out.stdout.strip()))
        if out.returncode:
            fail("target control '%s': %s%s" % (" ".join(map(str, words)), out.stdout, out.stderr))
        return out.stdout

    def later(self, secs, *words):
        self.undo.append((time.monotonic() + secs, words))

    def path_errors(self):
        out = subprocess.run([GW, "stats", "-s", self.control, "-o", "json"],
                             capture_output=True, text=True, timeout=30)
        if out.returncode:
            fail("nvmf-gateway stats failed: %s%s" % (out.stdout, out.stderr))
            return 0
        return sum(p["errors"] for t in json.loads(out.stdout)["targets"] for p in t["paths"])

    def outage(self):
        """One namespace inaccessible on every path, and nothing else going
        on: its I/O must wait without spinning.  Each command in flight
        may fail once per path, then nothing should be sent to the target
        until the state changes; a command re-sent at once, forever, shows
        in the gateway's own path error counters."""
        rng = self.rng
        for u in sorted(self.undo):  # every other fault undone first
            self.cmd(*u[1])
        self.undo.clear()
        self.ports_down.clear()
        ns = rng.choice([1, 2])
        tail = ["noaen"] if rng.random() < 0.35 else []
        for p in (1, 2):
            self.cmd("ana", NQN, ns, "inaccessible", p, *tail)
        time.sleep(1.0)  # what was in flight fails once and parks
        e0, t0 = self.path_errors(), time.monotonic()
        time.sleep(rng.uniform(2.0, 4.0))
        e1, t1 = self.path_errors(), time.monotonic()
        log("outage of nsid %d: path errors +%d in %.1f s" % (ns, e1 - e0, t1 - t0))
        if e1 - e0 > 200 + 100 * (t1 - t0):
            fail("nsid %d inaccessible on every path (no other fault): the gateway's path "
                 "errors rose by %d in %.1f s, a command re-sent without waiting"
                 % (ns, e1 - e0, t1 - t0))
        for p in (1, 2):
            self.cmd("ana", NQN, ns, "optimized", p)  # with the event, or nothing may tell

    def step(self):
        now = time.monotonic()
        for u in [u for u in self.undo if u[0] <= now]:
            self.undo.remove(u)
            if u[1][:1] == ("port",):
                self.ports_down.discard(u[1][1])
            self.cmd(*u[1])
        rng = self.rng
        k = rng.choice(self.kinds)
        self.count[k] = self.count.get(k, 0) + 1
        self.injected += 1
        if k == "status":
            # Half of them path related (SCT 3): the ones multipath acts on.
            sct, sc = rng.choice(self.STATUSES if rng.random() < 0.5 else self.STATUSES[8:14])
            w = ["status", sct, "0x%02x" % sc]
            if rng.random() < 0.4:
                w.append("dnr")
            if rng.random() < 0.6:
                w.append("%.2f" % rng.uniform(0.05, 1.0))
            self.cmd(*w)
            self.later(rng.uniform(0.2, 2.5), "status", "off")
        elif k == "ana":
            st = rng.choice(["optimized", "non-optimized", "inaccessible", "change"])
            w = ["ana", NQN, rng.choice([1, 2]), st, rng.choice([1, 2])]
            if rng.random() < 0.35:
                w.append("noaen")
            self.cmd(*w)
            if st != "optimized":
                self.later(rng.uniform(0.5, 6), *(w[:3] + ["optimized"] + w[4:5]))
        elif k == "drop":
            self.cmd("drop")
        elif k == "drop-after":
            self.cmd("drop-after", rng.randint(3, 300))
        elif k == "refuse":
            self.cmd("refuse", rng.randint(1, 3))
        elif k == "delay":
            self.cmd("delay", rng.choice([20, 200, 1000, 3000, 7000]))
            self.later(rng.uniform(0.5, 4), "delay", 0)
        elif k == "reorder":
            self.cmd("reorder", rng.choice([5, 50, 300]))
            self.later(rng.uniform(0.5, 4), "reorder", 0)
        elif k == "port":
            p = rng.choice([1, 2])
            if p in self.ports_down:
                return
            self.ports_down.add(p)
            self.cmd("port", p, "down")
            self.later(rng.uniform(0.3, 6), "port", p, "up")
        elif k == "corrupt":
            w = ["corrupt", rng.choice(["hdgst", "ddgst"])]
            if rng.random() < 0.5:
                w.append("io")
            self.cmd(*w)
        elif k == "malformed":
            self.cmd("malformed", rng.choice(["type", "hlen", "cid", "plen"]))
        elif k == "ana-outage":
            self.outage()
        elif k == "lose-cache":
            with self.lock:
                self.ep.losing = True
                self.ep.n += 1
                if os.environ.get("CHAOS_SABOTAGE") != "lose":  # proves a loss is caught
                    for m in self.models:
                        m.lose()
            self.cmd("lose-cache")
            with self.lock:
                self.ep.n += 1
                self.ep.losing = False

    def settle(self):
        """Undo everything: no fault is left once this returns."""
        self.undo.clear()
        self.cmd("clear")
        self.cmd("refuse", 0)
        for p in (1, 2):
            self.cmd("port", p, "up")
            for ns in (1, 2):
                self.cmd("ana", NQN, ns, "optimized", p)


def wait_for(pred, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def read_back(model, sock, export):
    """Every block of the model, read through NBD after the faults."""
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///%s?socket=%s" % (export, sock))
    bad = 0
    for b in range(NBLOCKS):
        if len(model.hist[b]) == 1 and b % 16:
            continue  # never written: a sample of those is enough
        start = time.monotonic()
        try:
            data = h.pread(BS, b * BS)
        except nbd.Error as e:
            fail("%s: final read of block %d: %s" % (model.name, b, e))
            bad += 1
            if bad > 5:
                break
            continue
        if time.monotonic() - start > LIVE_BOUND:
            fail("%s: final read of block %d took too long" % (model.name, b))
        if not model.check(b, data, "read back after the faults"):
            bad += 1
            if bad > 20:
                fail("%s: more than 20 bad blocks, stopped checking" % model.name)
                break
    h.shutdown()


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    seed = int(sys.argv[1])
    d = os.path.abspath(sys.argv[2])
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 25.0
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    policy = ["round-robin", "failover", "queue-depth"][seed % 3]
    cfg = dict(policy=policy, keep_alive_tmo=rng.choice([2, 3, 5]), reconnect_delay=1,
               fast_io_fail_tmo=rng.choice([3, 5, -1]), ctrl_loss_tmo=rng.choice([30, 60, -1]),
               io_timeout=rng.choice([3, 5, 10]), block=rng.choice([512, 4096]),
               reactors=rng.choice([1, 2]), nr_io_queues=rng.choice([1, 2]))
    # Digests from an RNG of their own, so that the schedule a seed draws
    # stays what it was.  A data digest keeps every payload out of the
    # gateway's pipes (it must be computed over the bytes): half the seeds
    # have none, so large I/Os are spliced there.
    drng = random.Random(seed * 7 + 4)
    cfg.update(hdr_digest=drng.choice(["true", "false"]),
               data_digest=drng.choice(["true", "false"]))
    log("seed %d: %s" % (seed, json.dumps(cfg)))
    figures = dict(seed=seed, faults=0, ios=0, checked=0, ok=False)
    procs = {}
    mnt = os.path.join(d, "fuse")
    os.makedirs(mnt, exist_ok=True)
    os.makedirs(os.path.join(d, "persist"), exist_ok=True)
    ctl = os.path.join(d, "tgt.ctl")
    ready = os.path.join(d, "tgt.ready")

    def cleanup():
        g = procs.get("gw")
        if g and g.poll() is None:
            g.kill()
            g.wait()
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        t = procs.get("tgt")
        if t and t.poll() is None:
            t.kill()
            t.wait()

    def on_term(signum, frame):
        raise SystemExit("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_term)  # `timeout` still cleans up
    try:
        run(seed, d, secs, rng, cfg, figures, procs, mnt, ctl, ready)
    except Exception as e:  # a harness error fails the seed too, with its cause
        import traceback
        traceback.print_exc(file=sys.stdout)
        fail("harness: %r" % e)
    finally:
        cleanup()
    figures["ok"] = not failures
    figures["failures"] = len(failures)
    print(json.dumps(figures), flush=True)
    sys.exit(0 if not failures else 1)


def run(seed, d, secs, rng, cfg, figures, procs, mnt, ctl, ready):
    tlog = open(os.path.join(d, "target.log"), "w")
    procs["tgt"] = subprocess.Popen(
        [TGT, "-s", "0", "-s", "0", "--persist", os.path.join(d, "persist"), "--vwc",
         "--subsys", "%s:16M:%d:2" % (NQN, cfg["block"]), "--control", ctl,
         "--ready-file", ready, "--seed", str(seed)], stdout=tlog, stderr=subprocess.STDOUT)
    if not wait_for(lambda: os.path.exists(ready), 20):
        return fail("the target did not start")
    p1, p2 = open(ready).read().split()[:2]
    conf = os.path.join(d, "gw.conf")
    e1, e2 = os.path.join(d, "e1.sock"), os.path.join(d, "e2.sock")
    control = os.path.join(d, "gw.control")
    with open(conf, "w") as f:
        f.write("""gateway = { reactors = %(reactors)d; control = "%(control)s"; state_dir = "%(d)s/state"; };
targets = ( { name = "t"; subnqn = "%(nqn)s"; multipath = "%(policy)s";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "%(p1)s"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "%(p2)s"; } );
    hdr_digest = %(hdr_digest)s; data_digest = %(data_digest)s; nr_io_queues = %(nr_io_queues)d; queue_size = 32;
    keep_alive_tmo = %(keep_alive_tmo)d; reconnect_delay = %(reconnect_delay)d;
    fast_io_fail_tmo = %(fast_io_fail_tmo)d; ctrl_loss_tmo = %(ctrl_loss_tmo)d;
    io_timeout = %(io_timeout)d; } );
exports = ( { name = "e1"; target = "t"; nsid = 1; nbd = { listen = "unix:%(e1)s"; }; },
            { name = "e2"; target = "t"; nsid = 2; nbd = { listen = "unix:%(e2)s"; }; fuse = true; } );
fuse = { mountpoint = "%(mnt)s"; };
""" % dict(cfg, control=control, d=d, nqn=NQN, p1=p1, p2=p2, e1=e1, e2=e2, mnt=mnt))
    chk = subprocess.run([GW, "check", "-c", conf], capture_output=True, text=True)
    if chk.returncode:
        return fail("configuration rejected: " + chk.stdout + chk.stderr)
    glog = open(os.path.join(d, "gw.log"), "w")
    # Socket clients' write payloads go through pipes too (by default only
    # /dev/nbdN's do), so that faults hit them.
    env = dict(os.environ, NVMF_GATEWAY_SPLICE_WRITES="all",
               ASAN_OPTIONS="abort_on_error=0:detect_leaks=1",
               UBSAN_OPTIONS="print_stacktrace=1")
    procs["gw"] = gw = subprocess.Popen([GW, "run", "-f", "-c", conf], stdout=glog,
                                        stderr=subprocess.STDOUT, env=env)
    fpath = os.path.join(mnt, "e2")
    if not wait_for(lambda: gw.poll() is not None or (
            os.path.exists(e1) and os.path.exists(e2) and os.path.exists(fpath)), 30):
        return fail("the gateway did not come up (log %s/gw.log)" % d)
    if gw.poll() is not None:
        return fail("the gateway exited at start with status %d" % gw.returncode)

    lock = threading.RLock()
    ep = Epoch()
    m1, m2 = Model("e1", 1, ep, lock), Model("e2", 2, ep, lock)
    loads = [NbdLoad(m1, e1, seed * 7 + 1, lock),
             FuseLoad(m2, fpath, seed * 7 + 2, 0, True, lock),
             FuseLoad(m2, fpath, seed * 7 + 3, 1, False, lock)]
    for w in loads:
        w.start()
    time.sleep(1.0)
    sched = Schedule(rng, ctl, ep, [m1, m2], lock, control)
    end = time.monotonic() + secs
    while time.monotonic() < end and gw.poll() is None:
        sched.step()
        time.sleep(rng.choice([0.1, 0.3, 0.6, 1.0, 1.5, 2.5]))
        for w in loads[1:]:
            w.watch()
    figures["faults"] = sched.injected
    figures["fault_kinds"] = sched.count
    if gw.poll() is not None:
        fail("the gateway died during the faults: status %d" % gw.returncode)
        return
    sched.settle()
    t_clear = time.monotonic()
    log("faults undone; waiting for I/O to work again")

    def recovered():
        for w in loads[1:]:
            w.watch()
        return all(w.last_ok > t_clear for w in loads if w.is_alive())
    stuck = not wait_for(recovered, RECOVER_BOUND)
    if stuck:
        fail("I/O did not work again within %.0f s of the faults being undone: %s" %
             (RECOVER_BOUND, ["%s last success %.1f s before" % (w.m.name, t_clear - w.last_ok)
                              for w in loads if w.last_ok <= t_clear]))
    else:
        log("I/O works again after %.1f s" % (time.monotonic() - t_clear))
    time.sleep(1.0)  # a little clean traffic after the faults
    for w in loads:
        w.stop.set()
    # Already stuck for RECOVER_BOUND: what still waits has waited long enough.
    drain_end = time.monotonic() + (5 if stuck else LIVE_BOUND + 5)
    for w in loads:
        while w.is_alive() and time.monotonic() < drain_end:
            w.join(0.5)
            if isinstance(w, FuseLoad):
                w.watch()
        if w.is_alive():
            fail("%s: a %s workload is still waiting for I/O" % (w.m.name, type(w).__name__))
    hung = any(w.is_alive() for w in loads)
    figures["ios"] = sum(m.st["writes"] + m.st["reads"] + m.st["flushes"] + m.st["errors"]
                         for m in (m1, m2))
    figures["stats"] = {m.name: m.st for m in (m1, m2)}
    figures["nbd_replies"] = sum(loads[0].replies.values())
    figures["large_ios"] = m1.st["large_writes"] + m1.st["large_reads"]
    log("workload: %s" % json.dumps(figures["stats"]))

    if not hung:
        # Nothing to do now: a gateway still burning CPU spins somewhere
        # (a request re-sent at once, forever).  2 s of wall clock, at
        # most 0.5 s of CPU, generous for a loaded machine.
        cpu0, t0 = cpu_seconds(gw.pid), time.monotonic()
        time.sleep(2.0)
        busy = (cpu_seconds(gw.pid) - cpu0) / (time.monotonic() - t0)
        figures["idle_cpu"] = round(busy, 3)
        if busy > 0.25:
            fail("the idle gateway uses %.0f%% CPU (a busy loop?)" % (busy * 100))
    st = subprocess.run([GW, "status", "-s", control], capture_output=True, text=True, timeout=30)
    if st.returncode:
        fail("nvmf-gateway status failed (%d): %s%s" % (st.returncode, st.stdout, st.stderr))
    open(os.path.join(d, "status.txt"), "w").write(st.stdout)

    if not hung:
        with lock:
            read_back(m1, e1, "e1")
            read_back(m2, e2, "e2")
    figures["checked"] = m1.st["checked"] + m2.st["checked"]

    t = time.monotonic()
    gw.send_signal(signal.SIGTERM)
    try:
        rc = gw.wait(TERM_BOUND)
        took = time.monotonic() - t
        figures["term_s"] = round(took, 2)
        log("SIGTERM: exit %d after %.2f s" % (rc, took))
        if rc:
            fail("the gateway exited with status %d after SIGTERM" % rc)
    except subprocess.TimeoutExpired:
        fail("the gateway did not exit within %.0f s of SIGTERM" % TERM_BOUND)
    glog.flush()
    # What went through pipes, from each NBD connection's last words
    # (debug lines: NVMF_GATEWAY_LOG=debug in the environment).
    sp = dict(reads=0, reads_not=0, writes=0, writes_taken_out=0, writes_given_up=0)
    rd = re.compile(r"nbd .*: (\d+) read replies spliced, (\d+) not$")
    wr = re.compile(r"nbd .*: (\d+) write payloads spliced, (\d+) taken out of their pipe, "
                    r"(\d+) given up$")
    bad = False
    with open(os.path.join(d, "gw.log"), errors="replace") as f:
        for line in f:
            if not bad and any(k in line for k in (
                    "ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
                    "invariant", "Assertion", "double completion")):
                fail("gateway log: " + line.strip())
                bad = True
            m = rd.search(line.rstrip())
            if m:
                sp["reads"] += int(m.group(1))
                sp["reads_not"] += int(m.group(2))
            m = wr.search(line.rstrip())
            if m:
                sp["writes"] += int(m.group(1))
                sp["writes_taken_out"] += int(m.group(2))
                sp["writes_given_up"] += int(m.group(3))
    figures["spliced"] = sp


def model_selftest():
    """The model alone, on the sequence that once made it vouch for a lost
    write: A written and flushed; B run by the target, reverted by a
    lose-cache, then acknowledged; a flush; C written; another loss.  The
    target then holds A, which must be allowed, while zeros (older than
    the durable A) must not.  chaos.py --self-test; exit 1 on a failure."""
    ep, b = Epoch(), 7
    m = Model("self-test", "self-test", ep, threading.Lock())

    def lose():
        ep.losing, ep.n = True, ep.n + 1
        m.lose()
        ep.n, ep.losing = ep.n + 1, False

    ga, t = m.write_issue(b)
    m.write_done(b, ga, t, False, True)
    m.flush_done(*m.flush_issue(), True)
    gb, tb = m.write_issue(b)
    lose()
    m.write_done(b, gb, tb, False, True)
    m.flush_done(*m.flush_issue(), True)
    gc, t = m.write_issue(b)
    m.write_done(b, gc, t, False, True)
    lose()
    allowed = m.hist[b][m.low[b]:]
    ok = ga in allowed and gb in allowed and gc in allowed and 0 not in allowed
    print("model self-test: %s (allowed %s, low %d, durable %d)"
          % ("ok" if ok else "FAIL", allowed, m.low[b], m.dur[b]))
    return 0 if ok else 1


if __name__ == "__main__" and sys.argv[1:] == ["--self-test"]:
    sys.exit(model_selftest())
if __name__ == "__main__":
    main()
