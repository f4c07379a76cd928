# nbd_lib.sh: guest-side helpers for the kernel NBD cases (tests/interop/
# nbd_*.sh), sourced there.  Needs GW (the gateway binary) in the
# environment and tests/interop/nvmet.sh sourced for nvme_host_dev.
#   nbd_start NQN TARGET NAME   runs "$GW nbd ... TARGET" (/dev/nbdN or auto)
#       in the background, output in $NBD_LOGS/NAME.log; waits (bounded) for
#       its attach line; sets GW_PID, NBD_DEV (/dev/nbdN) and NBD_LOG;
#       NBD_START_ARGS adds options (e.g. --interface ioctl)
#   nbd_stop                    SIGTERM, wait; fails unless the exit code is 0
#       and the log shows the detach and the controller shutdown
#   nbd_detached DEV            DEV is no longer connected (size 0, no pid
#       or backend attribute)
#   nbd_files DIR / nbd_verify DIR   files with checksums / check them
#   LVM_CONF                    lvm --config for this guest (INTEROP.md)
#   NBD_ADDR, NBD_PORT          the target (default the suite's nvmet port;
#       tls_gateway.sh points them at its TLS port)
: "${GW:?GW must name the gateway binary}"
NBD_ADDR=${NBD_ADDR:-10.0.2.15}
NBD_PORT=${NBD_PORT:-4420}
NBD_LOGS=${NBD_LOGS:-/tmp/nbd-logs}
mkdir -p "$NBD_LOGS"
export NVMF_GATEWAY_LOG=${NBD_GW_LOG:-info} NVMF_GATEWAY_STATE_DIR=/tmp/gw-state
export NVMF_GATEWAY_RUN_DIR=/run/nvmf-gateway

nbd_start() {
	local nqn=${1:?usage: nbd_start NQN TARGET NAME} target=${2:?} name=${3:?} _
	NBD_LOG=$NBD_LOGS/$name.log
	: > "$NBD_LOG"
	# shellcheck disable=SC2086 # NBD_START_ARGS: extra options, split
	"$GW" nbd ${NBD_START_ARGS:-} -t "${NBD_TR:-tcp}" -a "$NBD_ADDR" -s "$NBD_PORT" -n "$nqn" "$target" >> "$NBD_LOG" 2>&1 &
	GW_PID=$!
	# Bounded wait (120 s) for the NVMe connect and the netlink attach.
	for _ in $(seq 600); do
		NBD_DEV=$(grep -oE '/dev/nbd[0-9]+ (re)?attached' "$NBD_LOG" | tail -1 | cut -d' ' -f1) || true
		if [ -n "$NBD_DEV" ]; then
			echo "gateway $GW_PID: $(grep -E '/dev/nbd[0-9]+ (re)?attached' "$NBD_LOG")"
			return 0
		fi
		if ! kill -0 "$GW_PID" 2> /dev/null; then
			wait "$GW_PID"
			echo "gateway exited with $? before attaching:"
			cat "$NBD_LOG"
			return 1
		fi
		sleep 0.2
	done
	echo "gateway did not attach within 120 s:"
	cat "$NBD_LOG"
	return 1
}

nbd_stop() {
	local rc
	kill -TERM "$GW_PID"
	wait "$GW_PID"
	rc=$?
	cat "$NBD_LOG"
	[ $rc = 0 ] || { echo "gateway exit code $rc after SIGTERM"; return 1; }
	grep -q "${NBD_DEV#/dev/}: detached" "$NBD_LOG" || { echo "no detach in the log"; return 1; }
	grep -q 'shutdown complete' "$NBD_LOG" || { echo "no controller shutdown in the log"; return 1; }
}

nbd_detached() {
	local n=${1#/dev/} s
	s=$(cat "/sys/block/$n/size")
	[ "$s" = 0 ] || { echo "$1 still has $s sectors"; return 1; }
	[ ! -e "/sys/block/$n/pid" ] || { echo "$1 still has a pid attribute"; return 1; }
	[ ! -e "/sys/block/$n/backend" ] || { echo "$1 still has a backend attribute"; return 1; }
}

# Files of assorted sizes (not block multiples) and their checksums.
nbd_files() {
	local d=$1 i
	for i in $(seq 1 16); do
		head -c $((i * 37 * 1024 + i * 13)) /dev/urandom > "$d/f$i" || return 1
	done
	mkdir -p "$d/sub" && head -c 3M /dev/urandom > "$d/sub/big" || return 1
	(cd "$d" && sha256sum f* sub/big > /tmp/nbd-sums)
}

nbd_verify() {
	(cd "$1" && sha256sum --quiet -c /tmp/nbd-sums)
}

# Reads after this come from the device, not from the page cache.
nbd_drop_caches() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
}

LVM_CONF='devices { filter = [ "a|^/dev/nbd|", "r|.*|" ] use_devicesfile = 0
	obtain_device_list_from_udev = 0 external_device_info_source = "none" }
backup { backup_dir = "/tmp/lvm/backup" archive_dir = "/tmp/lvm/archive" }
activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 1 }'

# A case script stops at its first failing command (set -e): name it.
set -E
trap 'echo "FAILED: line $LINENO: $BASH_COMMAND" >&2' ERR

# EXIT trap of the case scripts: whatever a failed case left behind must not
# break the next one (mounts, LVM, a running gateway, the kernel host).
nbd_cleanup() {
	local rc=$?
	set +e
	mountpoint -q /tmp/nbd-mnt && umount /tmp/nbd-mnt
	[ -z "${NBD_VG:-}" ] || vgchange --config "$LVM_CONF" -an "$NBD_VG" > /dev/null 2>&1
	[ -z "${NBD_HOST_NQN:-}" ] || nvme disconnect -n "$NBD_HOST_NQN" > /dev/null 2>&1
	if [ -n "${GW_PID:-}" ] && kill -0 "$GW_PID" 2> /dev/null; then
		kill -TERM "$GW_PID"
		wait "$GW_PID"
	fi
	[ $rc = 0 ] && echo PASS || echo "FAIL (exit $rc)"
	exit $rc
}
