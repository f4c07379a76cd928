# nvmet.sh: guest-side helpers over the kernel target's configfs tree, sourced
# in the guest:  vm_exec ". tests/interop/nvmet.sh && nvmet_subsys NQN ..."
#   nvmet_subsys NQN SIZE BLOCK_SIZE [HOST_NQN...]
#       subsystem with namespace 1 on a loop device (logical block size
#       BLOCK_SIZE, 512 or 4096) over a sparse SIZE file (truncate syntax:
#       64M, 1G) in $NVMET_WORK; any host may connect unless HOST_NQNs are
#       given, then only those.
#   nvmet_port ID tcp|rdma TRADDR TRSVCID [INLINE_DATA_SIZE]
#       (rdma first adds the soft-RoCE device rxe0 on eth0 if there is none)
#   nvmet_link NQN ID / nvmet_unlink NQN ID
#       expose / hide a subsystem on a port; the first link enables the port,
#       and a port with subsystems also answers discovery.  Unlinking drops
#       that subsystem's connections through the port.
#   nvmet_teardown
#       removes every port, subsystem and host, and the loop devices and
#       files made here.  Connected kernel hosts are not disconnected.
#   nvme_host_dev NQN
#       for the kernel's own host: waits (up to 20 s) for the block device
#       of namespace 1 of NQN after 'nvme connect' and prints its /dev path.
# Each returns non-zero, with a message, on the first step that fails.
# Bash; sourcing does not change the caller's shell options.

NVMET=/sys/kernel/config/nvmet
NVMET_WORK=${NVMET_WORK:-/tmp/nvmet}

# _nvmet_set FILE VALUE: one configfs attribute, with a readable error.
_nvmet_set() {
	printf '%s' "$2" > "$1" 2> /dev/null ||
		{ echo "nvmet: cannot set ${1#"$NVMET"/} to '$2'" >&2; return 1; }
}

nvmet_subsys() {
	local nqn=${1:?usage: nvmet_subsys NQN SIZE BLOCK_SIZE [HOST_NQN...]} size=${2:?} bs=${3:?}
	local s=$NVMET/subsystems/$nqn img dev h
	shift 3
	img=$NVMET_WORK/$nqn.img
	mkdir -p "$NVMET_WORK" && truncate -s "$size" "$img" &&
		dev=$(losetup --find --show --sector-size "$bs" "$img") ||
		{ echo "nvmet: no $bs-byte loop device over $img" >&2; return 1; }
	mkdir "$s" || return 1
	if [ $# -eq 0 ]; then
		_nvmet_set "$s/attr_allow_any_host" 1 || return 1
	else
		_nvmet_set "$s/attr_allow_any_host" 0 || return 1
		for h; do
			mkdir -p "$NVMET/hosts/$h" && ln -s "$NVMET/hosts/$h" "$s/allowed_hosts/$h" || return 1
		done
	fi
	mkdir "$s/namespaces/1" &&
		_nvmet_set "$s/namespaces/1/device_path" "$dev" &&
		_nvmet_set "$s/namespaces/1/enable" 1
}

nvmet_port() {
	local id=${1:?usage: nvmet_port ID tcp|rdma TRADDR TRSVCID [INLINE_DATA_SIZE]} type=${2:?} addr=${3:?} svc=${4:?}
	local p=$NVMET/ports/$id fam=ipv4
	case "$addr" in *:*) fam=ipv6 ;; esac
	if [ "$type" = rdma ] && [ -z "$(rdma link show 2> /dev/null)" ]; then
		rdma link add rxe0 type rxe netdev eth0 || return 1
	fi
	mkdir "$p" &&
		_nvmet_set "$p/addr_trtype" "$type" &&
		_nvmet_set "$p/addr_adrfam" "$fam" &&
		_nvmet_set "$p/addr_traddr" "$addr" &&
		_nvmet_set "$p/addr_trsvcid" "$svc" || return 1
	[ -z "${5:-}" ] || _nvmet_set "$p/param_inline_data_size" "$5"
}

nvmet_link() {
	ln -s "$NVMET/subsystems/${1:?usage: nvmet_link NQN PORT_ID}" "$NVMET/ports/${2:?}/subsystems/$1"
}

nvmet_unlink() {
	rm "$NVMET/ports/${2:?usage: nvmet_unlink NQN PORT_ID}/subsystems/${1:?}"
}

# In a subshell for nullglob: configfs only lets go of a directory once what
# links to it or lives in it is gone, hence the order.
nvmet_teardown() (
	shopt -s nullglob
	local d f
	for d in "$NVMET"/ports/*/subsystems/* "$NVMET"/subsystems/*/allowed_hosts/*; do
		rm "$d" || exit 1
	done
	for d in "$NVMET"/subsystems/*/namespaces/*; do
		_nvmet_set "$d/enable" 0 && rmdir "$d" || exit 1
	done
	for d in "$NVMET"/ports/*/referrals/*; do
		rmdir "$d" || exit 1
	done
	for d in "$NVMET"/ports/*/ana_groups/*; do
		[ "${d##*/}" = 1 ] || rmdir "$d" || exit 1 # group 1 is the port's own
	done
	for d in "$NVMET"/ports/* "$NVMET"/subsystems/* "$NVMET"/hosts/*; do
		rmdir "$d" || exit 1
	done
	for f in "$NVMET_WORK"/*.img; do
		losetup -j "$f" -n -O NAME | xargs -r losetup -d || exit 1
	done
	rm -rf "$NVMET_WORK"
)

# With native multipath the disk is named after the subsystem instance
# (nvme<S>n1), not the controller, so look it up under the subsystem.
nvme_host_dev() {
	local nqn=${1:?usage: nvme_host_dev NQN} s d _
	for _ in $(seq 100); do
		for s in /sys/class/nvme-subsystem/*; do
			[ "$(cat "$s/subsysnqn" 2> /dev/null)" = "$nqn" ] || continue
			for d in "$s"/nvme*n1; do
				[ -b "/dev/${d##*/}" ] && { echo "/dev/${d##*/}"; return 0; }
			done
		done
		sleep 0.2
	done
	echo "nvme: no block device for $nqn" >&2
	return 1
}
