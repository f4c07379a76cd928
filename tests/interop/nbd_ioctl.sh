#!/usr/bin/env bash
# nbd_ioctl.sh GW NQN SIZE (in the guest): /dev/nbdN through the ioctl
# interface of kernels before 4.12, forced on this one (--interface ioctl,
# nbd_interface = "ioctl").  The attach says what the interface cannot do;
# ext4 works through it (in the first 64 MiB, mounted again by the daemon);
# SIGTERM flushes the page cache of
# the device before NBD_DISCONNECT (read back by the next gateway) and frees
# the device; an export removed by reload while mounted ends as on the
# netlink path (seen there with the same checks): writes fail, the gateway
# lives on, the device is freed (size 0) once unmounted.
set -eu -o pipefail
GW=$1 nqn=$2 size=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
ioctl_cleanup() {
	local rc=$?
	[ -z "${RUN_PID:-}" ] || kill -TERM "$RUN_PID" 2> /dev/null || true
	echo "nbd-ioctl: ${SECONDS} s"
	(exit $rc)
	nbd_cleanup
}
trap ioctl_cleanup EXIT
cd /tmp
mkdir -p /tmp/nbd-mnt

NBD_START_ARGS="--interface ioctl" nbd_start "$nqn" /dev/nbd2 ioctl
[ "$NBD_DEV" = /dev/nbd2 ]
grep -q '/dev/nbd2 attached: .*interface ioctl' "$NBD_LOG"
grep -q 'nbd2: the ioctl interface cannot reattach after a gateway restart' "$NBD_LOG"
[ -e /sys/block/nbd2/pid ] # NBD_DO_IT runs
[ ! -e /sys/block/nbd2/backend ] # a netlink attach would have one
[ "$(blockdev --getsize64 /dev/nbd2)" = "$size" ]
step() { echo "$SECONDS s: $*"; }
step attached
mkfs.ext4 -q -F /dev/nbd2 64M
mount /dev/nbd2 /tmp/nbd-mnt
nbd_files /tmp/nbd-mnt
umount /tmp/nbd-mnt
nbd_drop_caches
fsck.ext4 -fn /dev/nbd2
mount /dev/nbd2 /tmp/nbd-mnt
nbd_verify /tmp/nbd-mnt
umount /tmp/nbd-mnt
step ext4 verified
# Buffered writes left in the device's page cache: the stop must flush them.
head -c 4M /dev/urandom > /tmp/nbd-ioctl-a
dd if=/tmp/nbd-ioctl-a of=/dev/nbd2 bs=1M seek=200 status=none
nbd_stop
step stopped
grep -q 'nbd2: NBD_DO_IT returned [0-9]* ms after NBD_DISCONNECT' "$NBD_LOG"
nbd_detached /dev/nbd2
GW_PID=

# Export removal while mounted.
conf=/tmp/gw-ioctl.conf ctl=/tmp/gw-ioctl.control
write_conf() { # INTERFACE EXPORTS
	cat > $conf <<EOC
gateway = { reactors = 1; state_dir = "/tmp/gw-state"; control = "$ctl"; nbd_interface = "$1"; };
targets = ( { name = "t"; subnqn = "$nqn";
              paths = ( { transport = "tcp"; traddr = "$NBD_ADDR"; trsvcid = "$NBD_PORT"; } ); } );
exports = ( $2 );
EOC
}
st() { "$GW" status -s $ctl -o json | jq -r "$1"; }
# "for iface in netlink ioctl" shows the netlink path passing the same checks.
for iface in ioctl; do
	log=$NBD_LOGS/run-$iface.log
	write_conf $iface '{ name = "d"; target = "t"; nbd = { device = "/dev/nbd5"; }; }'
	"$GW" run -c $conf > "$log" 2>&1
	RUN_PID=$(pgrep -f "nvmf-gateway run -c $conf")
	grep -q 'attached as /dev/nbd5' "$log"
	[ "$(st '.exports[0].nbd_interface')" = $iface ]
	"$GW" status -s $ctl | grep -q "/dev/nbd5 ($iface)"
	# What the stop above flushed reached the namespace.
	dd if=/dev/nbd5 iflag=direct bs=1M skip=200 count=4 status=none | cmp - /tmp/nbd-ioctl-a
	step daemon attached
	# The filesystem written through the first gateway, whole.
	mount /dev/nbd5 /tmp/nbd-mnt
	nbd_verify /tmp/nbd-mnt
	echo hello > /tmp/nbd-mnt/x
	sync
	write_conf $iface ''
	"$GW" reload -s $ctl
	for _ in $(seq 150); do grep -q 'nbd5: detached' "$log" && break; sleep 0.2; done
	grep -q 'nbd5: detached' "$log"
	[ $iface != ioctl ] || grep -q 'nbd5: NBD_DO_IT returned [0-9]* ms after NBD_DISCONNECT' "$log"
	rc=0
	dd if=/dev/zero of=/tmp/nbd-mnt/y bs=1M count=4 conv=fsync status=none 2> /dev/null || rc=$?
	echo "$iface: write after removal: exit $rc"
	step removed
	[ $rc != 0 ]
	kill -0 "$RUN_PID" # the gateway lives on
	[ "$(st '.exports | length')" = 0 ]
	umount /tmp/nbd-mnt || umount -l /tmp/nbd-mnt
	for _ in $(seq 50); do [ "$(cat /sys/block/nbd5/size)" = 0 ] && break; sleep 0.2; done
	nbd_detached /dev/nbd5
	kill -TERM "$RUN_PID"
	for _ in $(seq 100); do kill -0 "$RUN_PID" 2> /dev/null || break; sleep 0.1; done
	# (`! cmd` alone never stops a `set -e` script: say what failed.)
	! kill -0 "$RUN_PID" 2> /dev/null || { echo "gateway $RUN_PID still runs 10 s after SIGTERM"; exit 1; }
	RUN_PID=
	cat "$log"
done
