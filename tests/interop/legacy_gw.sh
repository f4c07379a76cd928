#!/usr/bin/env bash
# legacy_gw.sh GW NQN tcp|rdma BACKEND WHY_REGEX [uring-disabled] (in the
# guest): the daemon with the automatic reactor backend on a kernel that is
# not the usual one (Debian 11's 5.10, or 6.12 with kernel.io_uring_disabled
# =2: "uring-disabled" sets it here and puts the old value back on any exit).
# The start log and the status JSON must name BACKEND and a reason matching
# WHY_REGEX; then the NBD and FUSE checks run against nvmet: ext4 on the
# daemon's /dev/nbdN, a FUSE write read back through FUSE, the NBD socket
# (libnbd, a real client), /dev/nbdN and the kernel's own host, and the
# other way round; SIGTERM stops it cleanly.
set -eu -o pipefail
GW=$1 nqn=$2 tr=$3 want=$4 why_re=$5 mode=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
conf=/tmp/lg.conf sock=/tmp/lg.sock mnt=/tmp/lg-fuse ctl=/tmp/lg.control log=/tmp/lg.log
uri="nbd+unix:///d?socket=$sock"
old_disabled=
pid=

cleanup() {
	local rc=$?
	set +e
	mountpoint -q /tmp/nbd-mnt && umount /tmp/nbd-mnt
	[ -z "${NBD_HOST_NQN:-}" ] || nvme disconnect -n "$NBD_HOST_NQN" > /dev/null 2>&1
	if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then
		kill -TERM "$pid"
		for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
	fi
	if [ -n "$old_disabled" ]; then
		sysctl -qw kernel.io_uring_disabled="$old_disabled" &&
			echo "kernel.io_uring_disabled back to $old_disabled"
	fi
	[ $rc = 0 ] && echo PASS || echo "FAIL (exit $rc)"
	exit $rc
}
trap cleanup EXIT
cd /tmp

echo "kernel $(uname -r)"
if [ "$mode" = uring-disabled ]; then
	old_disabled=$(sysctl -n kernel.io_uring_disabled)
	sysctl -w kernel.io_uring_disabled=2
fi
# Automatic selection: nothing may force a backend.
unset NVMF_GATEWAY_REACTOR_BACKEND
mkdir -p "$mnt"
cat > "$conf" << EOF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; control = "$ctl"; };
targets = ( { name = "t"; subnqn = "$nqn";
              paths = ( { transport = "$tr"; traddr = "10.0.2.15"; trsvcid = "4420"; } ); } );
exports = ( { name = "d"; target = "t"; nsid = 1;
              nbd = { listen = "unix:$sock"; device = "auto"; }; fuse = true; } );
fuse = { mountpoint = "$mnt"; };
EOF
"$GW" check -c "$conf"
r=0
"$GW" run -c "$conf" > "$log" 2>&1 || r=$?
cat "$log"
[ $r = 0 ]
pid=$(pgrep -f "nvmf-gateway run -c $conf")

# Which backend, and why: the start line and the status JSON agree.
line=$(grep -o 'gateway: reactors on .*' "$log")
echo "chosen: $line"
[[ $line =~ ^"gateway: reactors on $want (" ]]
[[ $line =~ $why_re ]]
st() { "$GW" status -s "$ctl" -o json | jq -r "$1"; }
[ "$(st .reactor_backend)" = "$want" ]
[[ $(st .reactor_backend_why) =~ $why_re ]]

dev=$(grep -o 'attached as /dev/nbd[0-9]*' "$log" | grep -o '/dev/nbd[0-9]*')
size=$(blockdev --getsize64 "$dev")
[ "$(stat -c %s "$mnt/d")" = "$size" ]
echo "$dev and $mnt/d: $size bytes (${SECONDS}s)"

# ext4 on the first 64 MiB of /dev/nbdN (nbd_lib's files and checksums).
mkfs.ext4 -q -F -E nodiscard "$dev" 64M
mkdir -p /tmp/nbd-mnt
mount "$dev" /tmp/nbd-mnt
nbd_files /tmp/nbd-mnt
umount /tmp/nbd-mnt
nbd_drop_caches
fsck.ext4 -fn "$dev"
mount "$dev" /tmp/nbd-mnt
nbd_verify /tmp/nbd-mnt
umount /tmp/nbd-mnt
echo "ext4 on $dev OK (${SECONDS}s)"

# FUSE writes 8 MiB at 128 MiB; FUSE, the NBD socket, /dev/nbdN and the
# kernel host read it back.
mib=$((1024 * 1024))
head -c $((8 * mib)) /dev/urandom > /tmp/lg-a
dd if=/tmp/lg-a of="$mnt/d" bs=1M seek=128 conv=notrunc,fsync status=none
nbd_drop_caches
dd if="$mnt/d" bs=1M skip=128 count=8 status=none | cmp - /tmp/lg-a
nbdsh -u "$uri" -c "import sys; sys.stdout.buffer.write(h.pread($((8 * mib)), $((128 * mib))))" |
	cmp - /tmp/lg-a
dd if="$dev" iflag=direct bs=1M skip=128 count=8 status=none | cmp - /tmp/lg-a
nvme connect -t "$tr" -a 10.0.2.15 -s 4420 -n "$nqn" > /dev/null
NBD_HOST_NQN=$nqn
kdev=$(nvme_host_dev "$nqn")
dd if="$kdev" iflag=direct bs=1M skip=128 count=8 status=none | cmp - /tmp/lg-a
echo "FUSE write read back through FUSE, the NBD socket, $dev and $kdev (${SECONDS}s)"

# The kernel host writes 4 MiB at 160 MiB; FUSE, the socket and
# /dev/nbdN read it.
head -c $((4 * mib)) /dev/urandom > /tmp/lg-b
dd if=/tmp/lg-b of="$kdev" oflag=direct bs=1M seek=160 status=none
nvme disconnect -n "$nqn" > /dev/null
NBD_HOST_NQN=
nbd_drop_caches
dd if="$mnt/d" bs=1M skip=160 count=4 status=none | cmp - /tmp/lg-b
nbdsh -u "$uri" -c "import sys; sys.stdout.buffer.write(h.pread($((4 * mib)), $((160 * mib))))" |
	cmp - /tmp/lg-b
dd if="$dev" iflag=direct bs=1M skip=160 count=4 status=none | cmp - /tmp/lg-b
echo "kernel host write read back through FUSE, the NBD socket and $dev (${SECONDS}s)"
[ "$(st '.exports[0].errors')" = 0 ]

kill -TERM "$pid"
for _ in $(seq 200); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2> /dev/null; then
	echo "the gateway still runs 20 s after SIGTERM"
	exit 1
fi
pid=
tail -n 5 "$log"
grep -q 'gateway: stopped' "$log"
if grep -q " $mnt " /proc/mounts; then
	echo "$mnt is still mounted"
	exit 1
fi
[ "$(blockdev --getsize64 "$dev" 2> /dev/null || echo 0)" = 0 ]
echo "stopped cleanly on $want (${SECONDS}s)"
