#!/usr/bin/env bash
# The FUSE mount with many requests waiting for a path (found by a hostile
# review of the bound on FUSE requests in flight):
# A. with the buffer budget not spent, 70 direct reads waiting on export
#    e1 (its target's port down) do not stop the mount reading requests:
#    e2's file, on another target, is still read and stat'ed at once.  A
#    bound on the count alone froze the whole mount past 64;
# B. with the budget spent (8M) the mount stops reading requests, and an
#    abort of its FUSE connection is still seen (a poll for the
#    connection's error while every read is parked): the daemon stops
#    within its drain bound, not at ctrl_loss_tmo (60 s here).
set -u
. "$TOP/tests/func/live/lib.sh"
need_root "mount (FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
need fusermount3
fusectl_require
A=nqn.2026-01.io.nvmf-gateway:parked-a
B=nqn.2026-01.io.nvmf-gateway:parked-b
tgt_start a "" -s 0 --subsys "$A:128M:4096"
tgt_start b "" -s 0 --subsys "$B:16M:4096"
pa=$(head -1 "$tmp/a.ready") pb=$(head -1 "$tmp/b.ready")
mkdir -p "$tmp/fuse"
cleanup_fn unmount_lazy "$tmp/fuse"
conf() {
	cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; $1 };
targets = (
  { name = "ta"; subnqn = "$A"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; },
  { name = "tb"; subnqn = "$B"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pb"; } ); } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; fuse = true; },
            { name = "e2"; target = "tb"; nsid = 1; fuse = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
CONF
}
# N direct 1 MiB reads of e1 in the background (they wait for its path).
readers() {
	python3 - "$tmp/fuse/e1" "$1" > "$tmp/readers.out" 2>&1 << 'PY' &
import mmap, os, sys, threading
path, n = sys.argv[1], int(sys.argv[2])
def r(i):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        os.preadv(fd, [mmap.mmap(-1, 1 << 20)], i << 20)
    except OSError:
        pass
ts = [threading.Thread(target=r, args=(i,), daemon=True) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
PY
	rpid=$!
	cleanup_fn stop_pid "$rpid"
}

# A.
conf ""
gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e2" || fail "no FUSE file e2"
ctl a port 1 down > /dev/null
readers 70
sleep 3
timeout 10 stat "$tmp/fuse/e2" > /dev/null || fail "stat of e2 hangs behind e1's waiting reads"
timeout 10 dd if="$tmp/fuse/e2" of=/dev/null bs=1M count=1 iflag=direct status=none ||
	fail "a read of e2 hangs behind e1's waiting reads"
echo "A: e2 served beside 70 reads waiting on e1 ($SECONDS s)"
# Stopping drains what waits for the path (5 s), then the readers end.
gw_stop_within 30
wait "$rpid"
echo "A: stopped ($SECONDS s)"
ctl a port 1 up > /dev/null

# B.
conf 'buffer_budget = "8M";'
gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
ctl a port 1 down > /dev/null
readers 70
sleep 3
fuse_abort "$tmp/fuse"
for _ in $(seq 300); do kill -0 "$GW_PID" 2> /dev/null || break; sleep 0.1; done
kill -0 "$GW_PID" 2> /dev/null && fail "the daemon still runs 30 s after its FUSE connection was aborted"
! grep -q 'ctrl_loss_tmo expired' "$tmp/gw.log" || fail "it waited for the path"
echo "B: the daemon stopped after the abort, before ctrl_loss_tmo"
grep -q "was unmounted from outside; stopping" "$tmp/gw.log" || fail "no line for the end of the mount"
GW_PID=
wait "$rpid"
echo pass
