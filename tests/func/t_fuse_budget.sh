#!/usr/bin/env bash
# What the FUSE file may hold of the buffer budget (found by a hostile
# review), read from `status`'s buffers object:
# 1. cached requests go back when the mount is idle: a burst of 32
#    concurrent 1 MiB direct reads left their buffers cached (32 MiB, four
#    times the 8 MiB budget), and an NBD client of the same process then
#    waited for a buffer for as long as the mount lived;
# 2. requests in flight are bounded (FUSE_MAX_INFLIGHT, 64): the kernel
#    bounds only background requests, so 192 threads each in a 1 MiB
#    direct read from a slow target took a buffer each, 192 MiB past the
#    budget.  (Direct writes to one file the kernel runs one at a time.)
set -u
. "$TOP/tests/func/live/lib.sh"
need_root "mount (FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
need fusermount3
A=nqn.2026-01.io.nvmf-gateway:fusebudget
M=$((1024 * 1024))
tgt_start a "" -s 0 --subsys "$A:256M:4096"
port=$(head -1 "$tmp/a.ready")
mkdir -p "$tmp/fuse"
cleanup_fn unmount_lazy "$tmp/fuse"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw.control"; buffer_budget = "8M"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 10; io_timeout = 60; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; fuse = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
F="$tmp/fuse/e1"
# N threads, each one O_DIRECT read of 1 MiB at its own offset.
readers() {
	python3 - "$F" "$1" << 'PY'
import mmap, os, sys, threading
path, n = sys.argv[1], int(sys.argv[2])
errs = []
def r(i):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, 1 << 20)
        if os.preadv(fd, [buf], i << 20) != 1 << 20:
            errs.append("%d: short" % i)
        os.close(fd)
    except OSError as e:
        errs.append("%d: %s" % (i, e))
ts = [threading.Thread(target=r, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print("readers done, errors:", errs[:3] if errs else 0, flush=True)
sys.exit(1 if errs else 0)
PY
}
# A field of status's buffers object.

# 1. The burst (held together by a slow target), then an NBD client that
#    needs a new buffer.
ctl a delay 500 > /dev/null
readers 32 || fail "the burst of 32 readers"
ctl a delay 0 > /dev/null
echo "after the burst: $(buffers used_bytes) bytes of the budget used, peak $(buffers peak_bytes)"
timeout 20 python3 -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri("nbd+unix:///?socket=" + sys.argv[1])
h.pwrite(bytes([5]) * (1 << 20), 5 << 20)
assert h.pread(1 << 20, 5 << 20) == bytes([5]) * (1 << 20), "data"
h.shutdown(); print("NBD write and read after the FUSE burst: OK")' "$tmp/e1.sock" ||
	fail "an NBD client waited for buffers the idle FUSE mount kept (exit $?)"

# 2. Many readers held in flight by a slow target.
ctl a delay 3000 > /dev/null
readers 192 > "$tmp/r.out" 2>&1 &
rpid=$!
cleanup_fn stop_pid "$rpid"
sleep 2
used=$(buffers used_bytes)
ctl a delay 0 > /dev/null
wait "$rpid" || { cat "$tmp/r.out"; fail "the 192 readers"; }
peak=$(buffers peak_bytes)
echo "192 readers in flight: $((used / M)) MiB of the budget used, peak $((peak / M)) MiB" \
	"(bound 100: 64 requests of 1 MiB and edges)"
[ "$((used / M))" -gt 8 ] || fail "the readers did not reach the gateway meanwhile ($used bytes used)"
[ "$((peak / M))" -lt 100 ] || fail "FUSE took $((peak / M)) MiB of buffers for requests in flight"
gw_alive
gw_stop_within 30
echo pass
