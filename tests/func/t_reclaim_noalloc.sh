#!/usr/bin/env bash
# No heap allocation on the data path (issue 16, reclaim safety): the
# gateway runs with an LD_PRELOAD shim (tests/func/reclaim/allocshim.c)
# that counts malloc/calloc/realloc/posix_memalign/aligned_alloc calls while
# armed by SIGUSR2.  Armed only once fio's connections are up and warm, so
# it counts the steady state of I/O: NBD (fio's nbd engine, 2 connections on 2
# reactors, reads, writes, flushes) and the FUSE file (fio, io_uring and
# psync, O_DIRECT, fsync; buffered writeback sends requests of every size,
# and each new high water mark grows a pooled buffer once).  The gateway's own code must not
# allocate there; libfuse allocates one request per FUSE message inside
# fuse_session_process_buf (a library we do not control), reported apart.
# First the shim is shown to count: an NBD handshake while armed allocates.
set -u
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"
. "$TOP/tests/lib/func.sh"
need fio cc addr2line nbdinfo
tmp=$(mktemp -d /tmp/reclaim-noalloc.XXXXXX)
gw_pid= mnt=$tmp/mnt
cleanup_fn rm -rf "$tmp"
cleanup_fn unmount_lazy "$mnt"
cleanup_fn stop_var gw_pid
cc -shared -fPIC -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -o "$tmp/allocshim.so" \
	"$TOP/tests/func/reclaim/allocshim.c" || fail "cannot build the shim"

# calls FILE: the count of the last armed round.
calls() { sed -n '1s/^armed [0-9]* calls \([0-9]*\)$/\1/p' "$1"; }
rounds() { sed -n '1s/^armed \([0-9]*\) .*/\1/p' "$1"; }

# where FILE: each recorded caller as "ADDR COUNT function file:line (module)".
where() {
	local a c start end off path
	tail -n +2 "$1" | tr -d '\0' | grep '^0x' | while read -r a c; do
		while read -r range _ off _ _ path; do
			start=$((16#${range%-*})) end=$((16#${range#*-}))
			if [ $((a)) -ge $start ] && [ $((a)) -lt $end ]; then
				printf '%s %s ' "$a" "$c"
				addr2line -f -C -e "$path" $(printf '0x%x' $((a - start + 16#$off))) |
					paste -sd' ' | tr '\n' ' '
				echo "(${path##*/})"
				break
			fi
		done < "/proc/$gw_pid/maps"
	done
}

# toggle: SIGUSR2 arms or disarms the shim (the handler runs at once).
toggle() {
	kill -USR2 "$gw_pid"
	sleep 0.2
}

# ---- NBD on a Unix socket ----
sock=$tmp/nbd.sock out=$tmp/alloc.nbd
ALLOC_SHIM_OUT=$out LD_PRELOAD=$tmp/allocshim.so NVMF_GATEWAY_LOG=info \
	"$GW" nbd --mem 64M --name disk --reactors 2 "unix:$sock" > "$tmp/nbd.out" 2> "$tmp/nbd.log" &
gw_pid=$!
for _ in $(seq 200); do
	grep -q "serving export" "$tmp/nbd.out" && break
	kill -0 $gw_pid 2> /dev/null || { cat "$tmp/nbd.log"; fail "gateway exited"; }
	sleep 0.05
done
grep -q "serving export" "$tmp/nbd.out" || fail "gateway did not serve"
[ "$(rounds "$out")" = 0 ] || fail "the shim is not loaded ($out)"

# The shim can see an allocation: a new connection while armed.
toggle "$out"
nbdinfo --size "nbd+unix:///disk?socket=$sock" > /dev/null || fail nbdinfo
toggle "$out"
n=$(calls "$out")
echo "armed over one NBD handshake: $n allocations"
[ "${n:-0}" -gt 0 ] || fail "the shim counted nothing over a handshake: it cannot see allocations"

uri="nbd+unix:///disk?socket=$sock"
fio --name=nbd --ioengine=nbd --uri="$uri" --rw=randrw --bssplit=4k/40:64k/30:256k/30 --iodepth=16 \
	--numjobs=2 --size=64M --time_based --runtime=9 --fsync=32 \
	--output="$tmp/fio.nbd" > /dev/null 2>&1 &
fio_pid=$!
for _ in $(seq 200); do
	[ "$(grep -c 'connection from' "$tmp/nbd.log")" -ge 3 ] && break
	sleep 0.05
done
# Warm-up: past the handshakes, and every request slot in circulation has
# carried a 256 KiB request.  A slot's buffer grows (once) the first time
# it carries a larger request than before (nbd_conn_ensure_buf): lazy, and
# bounded by the connection's buffer budget; what is checked here is the
# steady state after that.
sleep 3
toggle "$out"
sleep 3
toggle "$out"
wait $fio_pid || { cat "$tmp/fio.nbd"; fail "fio on NBD"; }
grep -E '^ *(read|write):' "$tmp/fio.nbd"
n=$(calls "$out")
echo "NBD, 3 s armed under fio: $n allocations"
# Zero, or only the bounded growth of request slots seen late: at most one
# per slot (2 connections x NBD_MAX_INFLIGHT 128), against thousands of I/Os
# in the window.  An allocation per I/O anywhere fails.
if [ "${n:-1}" != 0 ]; then
	w=$(where "$out")
	echo "$w"
	other=$(echo "$w" | grep -vc ' nbd_conn_ensure_buf ' || true)
	[ "$other" = 0 ] && [ "$n" -le 256 ] || fail "the NBD data path allocated $n times"
	echo "NBD: $n slot buffers grown late (nbd_conn_ensure_buf, at most one per slot)"
fi
kill -TERM $gw_pid
wait $gw_pid
gw_pid=

# ---- FUSE ----
if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 > /dev/null; then
	echo "no FUSE here (root, /dev/fuse and fusermount3 are needed): the NBD half passed"
	exit 0
fi
out=$tmp/alloc.fuse
mkdir -p "$mnt"
ALLOC_SHIM_OUT=$out LD_PRELOAD=$tmp/allocshim.so \
	"$GW" mount --mem 64M:4096 --name disk "$mnt" > "$tmp/fuse.log" 2>&1 &
gw_pid=$!
for _ in $(seq 200); do
	grep -qs " $mnt fuse" /proc/mounts && break
	kill -0 $gw_pid 2> /dev/null || { cat "$tmp/fuse.log"; fail "mount exited"; }
	sleep 0.1
done
grep -qs " $mnt fuse" /proc/mounts || fail "no FUSE mount"
fio --name=fd --filename="$mnt/disk" --ioengine=io_uring --direct=1 --rw=randrw \
	--bssplit=4k/40:64k/30:128k/30 --iodepth=8 --size=32M --time_based --runtime=8 --output="$tmp/fio.fuse1" \
	> /dev/null 2>&1 &
f1=$!
fio --name=fs --filename="$mnt/disk" --ioengine=psync --direct=1 --rw=randwrite --bs=4k \
	--offset=32M --size=32M --fsync=16 --time_based --runtime=8 --output="$tmp/fio.fuse2" \
	> /dev/null 2>&1 &
f2=$!
# Warm-up, as for NBD: the request pool and its buffers reach their high
# water mark (fuse/io.c req_get, buf_reserve grow them once).
sleep 3
toggle "$out"
sleep 3
toggle "$out"
wait $f1 || { cat "$tmp/fio.fuse1"; fail "fio io_uring on FUSE"; }
wait $f2 || { cat "$tmp/fio.fuse2"; fail "fio psync on FUSE"; }
grep -E '^ *(read|write):' "$tmp/fio.fuse1" "$tmp/fio.fuse2"
n=$(calls "$out")
echo "FUSE, 3 s armed under fio: $n allocations"
w=$(where "$out")
echo "$w"
# Ours: only the pool's high-water growth (req_get, buf_reserve), bounded
# by the pool (FREE_REQS_MAX 64 requests, two buffers each).
ours=$(echo "$w" | grep -v '(libfuse3\.' | grep -v ' req_get \| buf_reserve ' | grep -c . || true)
grown=$(echo "$w" | grep -v '(libfuse3\.' | awk '{ s += $2 } END { print s + 0 }')
[ "$ours" = 0 ] || fail "the gateway's FUSE path allocated outside its request pool"
[ "$grown" -le 192 ] || fail "the FUSE request pool grew $grown times in 3 s"
lib=$(echo "$w" | grep '(libfuse3\.' | awk '{ s += $2 } END { print s + 0 }')
[ $((lib + grown)) = "${n:-x}" ] || fail "$n allocations, only $((lib + grown)) attributed"
echo "FUSE: $n allocations: $lib in libfuse3 (one fuse_req per message), $grown pool growth"
umount "$mnt"
wait $gw_pid
gw_pid=
