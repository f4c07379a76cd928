#!/usr/bin/env bash
# The FLUSH rule through the FUSE file with two open files: the target (a
# volatile write cache, --persist --vwc) is killed with -9 and restarted
# while writes made through open file A are acknowledged and not flushed.
# fsync on open file B fails with EIO, and so must fsync on A afterwards
# (each open file hears of the loss once, as of a writeback error), never
# a success for A's lost writes.  The chaos harness found this (seed
# 3010923133): B's fsync took the only EIO, A's said its writes were safe.
set -u
. "$TOP/tests/func/resil/lib.sh"
need_root "mount"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
need fusermount3

A=nqn.2026-01.io.nvmf-gateway:flushfuse
mkdir -p "$tmp/disk" "$tmp/mnt"
cleanup_fn unmount_lazy "$tmp/mnt"
tgt_start a "" --persist "$tmp/disk" --vwc -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; fuse = true; } );
fuse = { mountpoint = "$tmp/mnt"; };
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
for _ in $(seq 1 300); do [ -e "$tmp/mnt/e1" ] && break; sleep 0.1; done
[ -e "$tmp/mnt/e1" ] || fail "the FUSE file did not appear"

# Two open files; A writes 64 blocks and does not flush; on "go", fsync
# B, then A, then A again: prints the three outcomes.
coproc FS { exec python3 -c '
import errno, os, sys
def fsync(fd):
    try:
        os.fsync(fd)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
a = os.open(sys.argv[1], os.O_RDWR)
b = os.open(sys.argv[1], os.O_RDWR)
for i in range(64):
    os.pwrite(a, bytes([i + 1]) * 4096, i * 4096)
print("ready", flush=True)
sys.stdin.readline()
print(fsync(b), fsync(a), fsync(a), flush=True)
' "$tmp/mnt/e1"; }
read -r -t 60 r <&"${FS[0]}" || fail "the writer did not start"
[ "$r" = ready ] || fail "writer: $r"
n=$(grep -c 'path 0 live again' "$tmp/gw.log")
tgt_kill9 a
tgt_start a "" --persist "$tmp/disk" --vwc -s "$port" --subsys "$A:32M"
for _ in $(seq 1 600); do
	[ "$(grep -c 'path 0 live again' "$tmp/gw.log")" -gt "$n" ] && break
	sleep 0.1
done
[ "$(grep -c 'path 0 live again' "$tmp/gw.log")" -gt "$n" ] || fail "no reconnect within 60 s"
echo go >&"${FS[1]}"
read -r -t 60 rb ra ra2 <&"${FS[0]}" || fail "the fsyncs did not answer"
echo "after the loss: fsync(B) $rb, fsync(A) $ra, fsync(A) again $ra2"
[ "$rb" = EIO ] || fail "fsync on B after the loss: $rb, not EIO"
[ "$ra" = EIO ] || fail "A's writes were lost and fsync on A said '$ra' (B took the only EIO)"
[ "$ra2" = ok ] || fail "A's second fsync: $ra2"
lost=$(python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
import mmap
m = mmap.mmap(-1, 4096)
n = 0
for i in range(64):
    os.preadv(fd, [m], i * 4096)
    n += m[:] == bytes([i + 1]) * 4096
print(n)' "$tmp/mnt/e1")
[ "$lost" = 0 ] || fail "the target kept $lost of A's unflushed blocks: test broken"
gw_alive
gw_stop
echo pass
