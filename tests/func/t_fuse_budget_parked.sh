#!/usr/bin/env bash
# FUSE requests waiting for a dead target and the buffer budget (found by a
# hostile review).  Target ta's port goes down with ctrl_loss_tmo = -1;
# file e1 is on ta, e2 (a FUSE file and an NBD export) on the healthy tb.
# 1. 48 direct reads of 1 MiB wait on e1: they hold at most a quarter of
#    the 32 MiB budget (the rest wait without a buffer), and a 1 MiB NBD
#    read of e2 is served at once.  Before, they took 48 MiB, past the
#    budget, and the NBD client waited until ta came back.  When it does,
#    every read of e1 completes with the right data.
# 2. An NBD client of e2 that reads no reply holds the 16 MiB budget (one
#    16 MiB read: its reply does not fit in the socket), then
#    64 direct reads of 32 KiB wait on e1: the mount stops reading
#    requests (64 in flight, the budget spent) and is a waiter for the
#    budget, so the client is cut off after stall_timeout and a read of
#    e2's FUSE file is served.  Before, nothing but an answered request
#    resumed the mount: e2 hung until ta came back.
# 3. One read waits on e1, then a burst of 31 reads of e2's file leaves 31
#    cached requests (31 MiB of the 32 MiB budget): an NBD read of e2 gets
#    its buffer (the mount's cache goes back when no request came for half
#    a second, or at once for a waiter).  Before, the one request in
#    flight kept the idle timer from ever giving the cache back, and a
#    waiter did not either: the NBD client waited until ta came back.
set -u
. "$TOP/tests/func/live/lib.sh"
need_root "mount (FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
need fusermount3
A=nqn.2026-01.io.nvmf-gateway:fbparked-a
B=nqn.2026-01.io.nvmf-gateway:fbparked-b
tgt_start a "" -s 0 --subsys "$A:128M:4096"
tgt_start b "" -s 0 --subsys "$B:128M:4096"
pa=$(head -1 "$tmp/a.ready") pb=$(head -1 "$tmp/b.ready")
mkdir -p "$tmp/fuse"
cleanup_fn unmount_lazy "$tmp/fuse"
conf() {
	cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw.control"; $1 };
targets = (
  { name = "ta"; subnqn = "$A"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = -1; },
  { name = "tb"; subnqn = "$B"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pb"; } ); } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; fuse = true; },
            { name = "e2"; target = "tb"; nsid = 1; fuse = true; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
fuse = { mountpoint = "$tmp/fuse"; };
CONF
}
# readers N SIZE: N threads, each one direct read of SIZE bytes of e1 at
# SIZE * i, which must hold byte i % 251 + 1 throughout (see pattern).
readers() {
	python3 - "$tmp/fuse/e1" "$1" "$2" > "$tmp/readers.out" 2>&1 << 'PY' &
import mmap, os, sys, threading
path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
errs = []
def r(i):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, size)
        if os.preadv(fd, [buf], i * size) != size or buf[:] != bytes([i % 251 + 1]) * size:
            errs.append("%d: wrong data" % i)
        os.close(fd)
    except OSError as e:
        errs.append("%d: %s" % (i, e))
ts = [threading.Thread(target=r, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print("readers done, errors:", errs[:3] if errs else 0, flush=True)
sys.exit(1 if errs else 0)
PY
	rpid=$!
	cleanup_fn stop_var rpid
}
# pattern N SIZE: what readers N SIZE expect, written through e1's file.
pattern() {
	python3 - "$tmp/fuse/e1" "$1" "$2" << 'PY' || fail "writing e1's pattern"
import os, sys
path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_WRONLY)
for i in range(n):
    os.pwrite(fd, bytes([i % 251 + 1]) * size, i * size)
os.fsync(fd); os.close(fd)
PY
}
readers_ok() {
	ctl a port 1 up > /dev/null
	wait "$rpid"
	local st=$?
	rpid=
	cat "$tmp/readers.out"
	[ $st = 0 ] || fail "$1: e1's reads after ta came back (exit $st)"
}

# 1.
conf 'buffer_budget = "32M";'
SOCKS="$tmp/e2.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
pattern 48 $((1 << 20))
ctl a port 1 down > /dev/null
gw_wait 'ta/path0: lost' 1 30 > /dev/null || fail "the gateway did not see ta's loss"
readers 48 $((1 << 20))
for _ in $(seq 100); do [ "$(buffers used_bytes)" -ge $((8 << 20)) ] && break; sleep 0.1; done
sleep 2
used=$(buffers used_bytes)
echo "1: 48 reads of e1 waiting: $((used >> 20)) MiB of the 32 MiB budget used"
timeout 20 python3 -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri("nbd+unix:///e2?socket=" + sys.argv[1])
h.pwrite(bytes([9]) * (1 << 20), 1 << 20)
assert h.pread(1 << 20, 1 << 20) == bytes([9]) * (1 << 20), "data"
h.shutdown()' "$tmp/e2.sock" || fail "1: an NBD read of e2 waited behind e1's reads waiting for ta (exit $?)"
echo "1: e2 served over NBD beside them"
[ "$used" -le $((10 << 20)) ] || fail "1: e1's waiting reads hold $((used >> 20)) MiB"
readers_ok 1
gw_stop_within 30

# 2.
conf 'buffer_budget = "16M"; stall_timeout = 2;'
SOCKS="$tmp/e2.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
pattern 70 32768
sleep 1 # the writes' cached requests go back (idle)
python3 "$TOP/tests/func/nbd/hog.py" "$tmp/e2.sock" e2 1 1 $((16 << 20)) > "$tmp/hog.out" 2>&1 &
hpid=$!
cleanup_fn stop_var hpid
for _ in $(seq 300); do grep -q READY "$tmp/hog.out" && break; sleep 0.1; done
grep -q READY "$tmp/hog.out" || { cat "$tmp/hog.out"; fail "2: the hog did not connect"; }
for _ in $(seq 100); do [ "$(buffers used_bytes)" -ge $((16 << 20)) ] && break; sleep 0.1; done
echo "2: the hog holds $(($(buffers used_bytes) >> 20)) MiB"
ctl a port 1 down > /dev/null
gw_wait 'ta/path0: lost' 1 30 > /dev/null || fail "the gateway did not see ta's loss"
readers 70 32768
sleep 2
timeout 20 dd if="$tmp/fuse/e2" of=/dev/null bs=1M count=1 iflag=direct status=none ||
	fail "2: a read of e2's file hung: the mount, parked for the budget, was not resumed"
echo "2: e2's file read beside 64 reads of e1 waiting and the hog"
grep -q "client took 0 reply bytes in 2 s" "$tmp/gw.log" || fail "2: the hog was not cut off"
readers_ok 2
kill "$hpid"; wait "$hpid" 2> /dev/null; hpid=
gw_stop_within 30

# 3.
conf 'buffer_budget = "32M";'
SOCKS="$tmp/e2.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e2" || fail "no FUSE file e2"
pattern 1 4096
# The read that waits first: the burst's cache is never idle with it.
ctl a port 1 down > /dev/null
gw_wait 'ta/path0: lost' 1 30 > /dev/null || fail "the gateway did not see ta's loss"
readers 1 4096
sleep 1
ctl b delay 500 > /dev/null
python3 - "$tmp/fuse/e2" << 'PY' || fail "3: the burst of reads of e2"
import mmap, os, sys, threading
def r(i):
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
    assert os.preadv(fd, [mmap.mmap(-1, 1 << 20)], i << 20) == 1 << 20
    os.close(fd)
ts = [threading.Thread(target=r, args=(i,)) for i in range(31)]
for t in ts: t.start()
for t in ts: t.join()
PY
ctl b delay 0 > /dev/null
echo "3: after the burst: $(($(buffers used_bytes) >> 20)) MiB of the budget used"
sleep 1
timeout 20 python3 -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri("nbd+unix:///e2?socket=" + sys.argv[1])
assert len(h.pread(1 << 20, 0)) == 1 << 20
h.shutdown()' "$tmp/e2.sock" || fail "3: an NBD read of e2 waited for the cache of a mount with one request in flight (exit $?)"
echo "3: e2 served over NBD; $(($(buffers used_bytes) >> 20)) MiB of the budget used"
readers_ok 3
gw_stop_within 30
echo pass
