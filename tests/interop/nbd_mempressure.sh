#!/usr/bin/env bash
# nbd_mempressure.sh GW NQN on|off [BOUND_S] (in a small-memory guest): the
# gateway serves /dev/nbd0 from the guest's own nvmet; ext4 on it carries a
# swap file; a memory hog drives the guest into that swap while fio writes
# and verifies files on the same filesystem.  "off" runs the gateway with
# --no-reclaim (no mlockall, PR_SET_IO_FLUSHER or oom_score_adj).
# Pass: everything ends within BOUND_S (default 300) by the guest's clock,
# fio has no verify error, the swap was really used, the gateway is alive.
# Prints one line "mempressure: mode=... seconds=... swap_peak_mib=...".
set -eu -o pipefail
GW=$1 nqn=$2 mode=$3 bound=${4:-300}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
mnt=/tmp/nbd-mnt
mp_cleanup() {
	local rc=$?
	set +e
	trap - ERR # what is already gone here is no failure
	[ -z "${HOG_PID:-}" ] || kill "$HOG_PID" 2> /dev/null
	[ -z "${SAMPLER_PID:-}" ] || kill "$SAMPLER_PID" 2> /dev/null
	[ $rc = 0 ] || tail -20 "${log:-/dev/null}"
	[ ! -e "$mnt/swap" ] || swapoff "$mnt/swap" 2> /dev/null
	(exit $rc)
	nbd_cleanup
}
trap mp_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd

flag=
[ "$mode" = off ] && flag=--no-reclaim
log=$NBD_LOGS/mempressure-$mode.log
: > "$log"
"$GW" nbd -t tcp -a "$NBD_ADDR" -s "$NBD_PORT" -n "$nqn" $flag /dev/nbd0 >> "$log" 2>&1 &
GW_PID=$!
NBD_LOG=$log NBD_DEV=/dev/nbd0
for _ in $(seq 600); do
	grep -q '/dev/nbd0 attached' "$log" && break
	kill -0 "$GW_PID" || { cat "$log"; exit 1; }
	sleep 0.2
done
grep -q '/dev/nbd0 attached' "$log" || { echo "no attach within 120 s"; cat "$log"; exit 1; }
grep 'reclaim:' "$log"
if [ "$mode" = on ]; then
	grep -q 'reclaim: mlockall=ok io_flusher=ok oom_score_adj=-900' "$log"
else
	grep -q 'reclaim: mlockall=off io_flusher=off oom_score_adj=0' "$log"
fi
grep -E 'VmLck|VmRSS' "/proc/$GW_PID/status"

# The pressure is a memory cgroup holding this script, fio and the hog
# (memory.high: reclaimed hard and throttled, not OOM-killed), which pushes
# them into the swap file on /dev/nbd0 while the guest's kernel, where
# nvmet runs, keeps free memory.  Under global pressure nvmet itself
# deadlocks (its receive path allocates with GFP_KERNEL and reclaim waits
# on /dev/nbd0: a keep-alive expiry and hung nvmet_tcp workers), and with
# the gateway inside the cgroup its socket buffers are charged there and
# stall the same way; a real target is another machine, and a real host's
# gateway is not confined with the hog.  The gateway stays in the root
# cgroup, its pages under the guest's global reclaim only.
cg=/sys/fs/cgroup
mountpoint -q $cg || mount -t cgroup2 none $cg
echo +memory > $cg/cgroup.subtree_control
mkdir -p $cg/host
echo ${MEMPRESSURE_CG_MIB:-96}M > $cg/host/memory.high
echo $$ > $cg/host/cgroup.procs

mkfs.ext4 -q -E lazy_itable_init=1,lazy_journal_init=1 /dev/nbd0
mkdir -p "$mnt"
mount /dev/nbd0 "$mnt"
mem_mib=$(($(cat $cg/host/memory.high) / 1048576))
swap_mib=320
fallocate -l ${swap_mib}M "$mnt/swap"
chmod 600 "$mnt/swap"
mkswap -q "$mnt/swap"
swapon "$mnt/swap"
free -m

# The peak of swap in use, sampled by the guest.
(
	peak=0 i=0
	while :; do
		used=$(awk '/^SwapTotal:/ { t = $2 } /^SwapFree:/ { f = $2 } END { print int((t - f) / 1024) }' /proc/meminfo)
		[ "$used" -gt "$peak" ] && peak=$used && echo "$peak" > /tmp/swap-peak
		[ $((i++ % 20)) = 0 ] && echo "progress: uptime $(cut -d' ' -f1 /proc/uptime) s, swap used $used MiB"
		sleep 0.5
	done
) &
SAMPLER_PID=$!

t0=$(cut -d. -f1 /proc/uptime)
# More than the cgroup's memory, touched twice over: the excess lives
# in the swap file on /dev/nbd0, and the gateway's own pages are
# candidates too unless they are locked.
hog_mib=$((mem_mib + 48))
/usr/bin/python3 - "$hog_mib" > /tmp/hog.txt 2>&1 << 'PY' &
import mmap, sys
mib = int(sys.argv[1])
chunks = []
for _ in range(mib // 16):
    m = mmap.mmap(-1, 16 << 20)
    for off in range(0, 16 << 20, 4096):
        m[off] = 1
    chunks.append(m)
for rnd in range(1):
    for m in chunks:
        for off in range(0, 16 << 20, 4096):
            m[off] = rnd + 2
print("hog: %d MiB touched twice" % mib)
PY
HOG_PID=$!
fio --name=mempressure --directory="$mnt" --size=8M --nrfiles=2 --rw=randwrite \
	--bs=4k --ioengine=psync --fsync=256 --end_fsync=1 \
	--verify=crc32c --verify_fatal=1 --output=/tmp/fio-mp.txt || fio_rc=$?
hog_rc=0
wait "$HOG_PID" || hog_rc=$?
HOG_PID=
t1=$(cut -d. -f1 /proc/uptime)
kill "$SAMPLER_PID"
SAMPLER_PID=
peak=$(cat /tmp/swap-peak 2> /dev/null || echo 0)
alive=dead
kill -0 "$GW_PID" 2> /dev/null && alive=alive
verr=$(grep -ciE 'verify.*fail|bad magic|crc32c: verify' /tmp/fio-mp.txt || true)
cat /tmp/fio-mp.txt /tmp/hog.txt
free -m
echo "mempressure: mode=$mode seconds=$((t1 - t0)) cgroup_mib=$mem_mib swap_peak_mib=$peak hog_mib=$hog_mib hog_rc=$hog_rc fio_rc=${fio_rc:-0} verify_errors=$verr gateway=$alive"
[ "${fio_rc:-0}" = 0 ] && grep -q 'err= 0' /tmp/fio-mp.txt
[ "$verr" = 0 ]
[ "$alive" = alive ]
[ $((t1 - t0)) -le "$bound" ] || { echo "took $((t1 - t0)) s, bound $bound s"; exit 1; }
[ "$peak" -ge 32 ] || { echo "swap peak $peak MiB: the guest never went deep into swap"; exit 1; }
swapoff "$mnt/swap"
umount "$mnt"
nbd_stop
