#!/usr/bin/env bash
# FUSE writes waiting for a dead target and the buffer budget.  Target ta's
# port goes down with ctrl_loss_tmo = -1; file e1 is on ta, e2 (a FUSE file
# and an NBD export) on the healthy tb; the budget is 12 MiB.  fio keeps 32
# direct asynchronous writes of 1 MiB to e1 in flight; the kernel lets 12
# of them reach the gateway (its background requests).
# 1. They hold at most about a quarter of the budget (the rest wait in the
#    /dev/fuse buffers their data came in, and the mount reads on with new
#    buffers): a 1 MiB NBD read of e2 is served at once, and so is a read
#    of e2's FUSE file.  Before, each write took a budget buffer: all 12
#    MiB, and the NBD client waited until ta came back.
# 2. With no buffers beyond the mount's 4 reads (NVMF_GATEWAY_FUSE_HELD_BUFS
#    =0), the mount stops reading once those 4 hold writes: the budget
#    stays at the quarter and the NBD read of e2 is still served; e2's FUSE
#    file waits for ta with them, and is read once ta is back.
# Each time ta comes back, every write completes and fio reads back and
# checks what it wrote.
set -u
. "$TOP/tests/func/live/lib.sh"
need_root "mount (FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
need fusermount3
A=nqn.2026-01.io.nvmf-gateway:fbwrites-a
B=nqn.2026-01.io.nvmf-gateway:fbwrites-b
tgt_start a "" -s 0 --subsys "$A:128M:4096"
tgt_start b "" -s 0 --subsys "$B:128M:4096"
pa=$(head -1 "$tmp/a.ready") pb=$(head -1 "$tmp/b.ready")
mkdir -p "$tmp/fuse"
cleanup_fn unmount_lazy "$tmp/fuse"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw.control"; buffer_budget = "12M"; };
targets = (
  { name = "ta"; subnqn = "$A"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = -1; },
  { name = "tb"; subnqn = "$B"; paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pb"; } ); } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; fuse = true; },
            { name = "e2"; target = "tb"; nsid = 1; fuse = true; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
fuse = { mountpoint = "$tmp/fuse"; };
CONF
buffers() {
	"$GW" status -s "$tmp/gw.control" -o json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["buffers"][sys.argv[1]])' "$1"
}
# writers N: fio, N direct asynchronous writes of 1 MiB in flight
# (libaio, as qemu's aio=native) over the first N MiB of e1, each block
# with its checksum and offset, which fio reads back and checks once they
# are all written (verify).  Asynchronous: a synchronous direct write holds
# the file's lock in the kernel, one at a time.
writers() {
	fio --name=w --filename="$tmp/fuse/e1" --ioengine=libaio --direct=1 --rw=write --bs=1M \
		--iodepth="$1" --iodepth_batch_submit="$1" --size="$1"M \
		--verify=crc32c --do_verify=1 --verify_fatal=1 > "$tmp/writers.out" 2>&1 &
	wpid=$!
	cleanup_fn stop_var wpid
}
nbd_e2() {
	timeout 20 python3 -c '
import nbd, sys
h = nbd.NBD(); h.connect_uri("nbd+unix:///e2?socket=" + sys.argv[1])
h.pwrite(bytes([9]) * (1 << 20), 1 << 20)
assert h.pread(1 << 20, 1 << 20) == bytes([9]) * (1 << 20), "data"
h.shutdown()' "$tmp/e2.sock"
}
# writers_ok PART: ta back, every write done, and fio read them back.
writers_ok() {
	ctl a port 1 up > /dev/null
	wait "$wpid"
	local st=$?
	wpid=
	grep -E "err=|verify" "$tmp/writers.out"
	[ $st = 0 ] && grep -q "err= 0" "$tmp/writers.out" ||
		fail "$1: e1's writes after ta came back, or their read-back (fio exit $st)"
	echo "$1: every write of e1 done and read back"
}
# waiting N: the writes reach the gateway (the quarter of the budget they
# may hold, then a moment for more to be read if they would be).
waiting() {
	for _ in $(seq 100); do [ "$(buffers used_bytes)" -ge $((3 << 20)) ] && break; sleep 0.1; done
	sleep 2
	used=$(buffers used_bytes)
	echo "$1: writes of e1 waiting: $((used >> 20)) MiB of the 12 MiB budget used"
}

# down: ta's port down, seen by the gateway (the Nth time).
down() {
	ctl a port 1 down > /dev/null
	gw_wait 'ta/path0: lost' "$1" 30 > /dev/null || fail "the gateway did not see ta's loss"
}

# 1.
SOCKS="$tmp/e2.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
down 1
writers 32
waiting 1
nbd_e2 || fail "1: an NBD read of e2 waited behind e1's writes waiting for ta (exit $?)"
echo "1: e2 served over NBD beside them"
timeout 20 dd if="$tmp/fuse/e2" of=/dev/null bs=1M count=1 iflag=direct status=none ||
	fail "1: a read of e2's file waited behind the writes of e1"
echo "1: e2's file read beside them"
[ "$used" -le $((5 << 20)) ] || fail "1: e1's waiting writes hold $((used >> 20)) MiB"
writers_ok 1
gw_stop_within 30

# 2.
NVMF_GATEWAY_FUSE_HELD_BUFS=0 SOCKS="$tmp/e2.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
down 1
writers 32
waiting 2
nbd_e2 || fail "2: an NBD read of e2 waited behind e1's writes waiting for ta (exit $?)"
echo "2: e2 served over NBD beside them"
[ "$used" -le $((5 << 20)) ] || fail "2: e1's waiting writes hold $((used >> 20)) MiB"
dd if="$tmp/fuse/e2" of=/dev/null bs=1M count=1 iflag=direct status=none &
dpid=$!
cleanup_fn stop_var dpid
sleep 3
kill -0 "$dpid" 2> /dev/null ||
	fail "2: e2's file was read with the mount's 4 buffers holding writes (the held-buffer bound not reached?)"
echo "2: e2's file waits with the mount's 4 buffers holding writes of e1"
writers_ok 2
timeout 20 tail --pid="$dpid" -f /dev/null || fail "2: the read of e2's file did not end once ta was back"
wait "$dpid" || fail "2: the read of e2's file failed"
dpid=
echo "2: e2's file read once ta was back"
gw_alive
gw_stop_within 30
echo pass
