#!/usr/bin/env bash
# selftest.sh [CACHE_DIR]: proves the VM harness end to end.  Boots the guest
# with 127.0.0.1:$SELFTEST_PORT (default 14420) forwarded to 4420, serves two
# subsystems (512 B and 4 KiB blocks) from nvmet over TCP, discovers and
# connects them with the kernel's own host in the guest, checks data through
# both, then checks from the host that the forward reaches the real target.
# Prints each step's time.  The guest's state folder (console log, every
# command's output) is kept in /tmp when a step fails.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export VM_CACHE=${1:-${VM_CACHE:-/var/tmp/nvmf-gateway-vm}}
. "$here/vm.sh"
# vm_exec runs in the caller's cwd, the same path in the guest.
cd "$here/../.." || exit 1

port=${SELFTEST_PORT:-14420}
nqn512=nqn.2014-08.org.nvmf-gateway:selftest-512
nqn4k=nqn.2014-08.org.nvmf-gateway:selftest-4k
state=$(mktemp -d /tmp/nvmf-vm-selftest.XXXXXX) || exit 1
passed=0
trap vm_stop EXIT

# step NAME CMD...: runs one step, prints its time, stops at the first failure.
step() {
	local name=$1 t0=${EPOCHREALTIME/./} rc ms
	shift
	echo "--- $name"
	"$@"
	rc=$?
	ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
	printf 'selftest: %-10s %s in %d.%03d s\n' "$name" "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")" \
		$((ms / 1000)) $((ms % 1000))
	if [ $rc != 0 ]; then
		echo "selftest: $passed passed, 1 failed (guest state kept in $state)"
		exit 1
	fi
	passed=$((passed + 1))
}

target() {
	vm_exec ". tests/interop/nvmet.sh &&
		nvmet_subsys $nqn512 64M 512 && nvmet_subsys $nqn4k 64M 4096 &&
		nvmet_port 1 tcp 10.0.2.15 4420 &&
		nvmet_link $nqn512 1 && nvmet_link $nqn4k 1"
}

discover() {
	vm_exec "nvme discover -t tcp -a 10.0.2.15 -s 4420 > /tmp/discover.log; rc=\$?; cat /tmp/discover.log
		[ \$rc = 0 ] && grep -q 'subnqn: *$nqn512\$' /tmp/discover.log &&
		grep -q 'subnqn: *$nqn4k\$' /tmp/discover.log"
}

connect() {
	vm_exec "nvme connect -t tcp -a 10.0.2.15 -s 4420 -n $nqn512 &&
		nvme connect -t tcp -a 10.0.2.15 -s 4420 -n $nqn4k"
}

# io NQN BLOCK_SIZE: the disk has that block size and gives back 4 MiB of
# random data written at an 8 MiB offset, bypassing the page cache.
io() {
	vm_exec "set -- $1 $2;" '. tests/interop/nvmet.sh && dev=$(nvme_host_dev "$1") || exit 1
		lbs=$(cat /sys/block/${dev#/dev/}/queue/logical_block_size)
		echo "$dev: $lbs-byte blocks"
		[ "$lbs" = "$2" ] || { echo "expected $2-byte blocks" >&2; exit 1; }
		head -c 4M /dev/urandom > /tmp/pattern &&
		dd if=/tmp/pattern of="$dev" bs=1M seek=8 oflag=direct status=none &&
		dd if="$dev" of=/tmp/readback bs=1M skip=8 count=4 iflag=direct status=none &&
		cmp /tmp/pattern /tmp/readback && echo "4 MiB written and read back"'
}

disconnect() {
	vm_exec "nvme disconnect -n $nqn512 && nvme disconnect -n $nqn4k"
}

# An NVMe/TCP ICReq through the forward must get the target's ICResp (type
# 1, header and PDU length 128): a bare connect would succeed even with no
# listener in the guest, as qemu accepts on the host side.
forward() {
	local resp
	exec 3<> "/dev/tcp/127.0.0.1/$port" || return 1
	{ printf '\x00\x00\x80\x00\x80\x00\x00\x00'; head -c 120 /dev/zero; } >&3
	resp=$(timeout 10 head -c 8 <&3 | od -An -tx1 | tr -d ' \n')
	exec 3>&-
	echo "ICResp header from 127.0.0.1:$port: ${resp:-none}"
	[ "$resp" = 0100800080000000 ]
}

teardown() {
	vm_exec '. tests/interop/nvmet.sh && nvmet_teardown || exit 1
		left="$(ls $NVMET/subsystems)$(ls $NVMET/ports)$(ls $NVMET/hosts)$(losetup -a)"
		[ -z "$left" ] || { echo "left behind: $left" >&2; exit 1; }
		echo "target removed"'
}

step kernel "$here/kernel.sh" "$VM_CACHE"
step boot vm_start "$state" "$port:4420"
step target target
step discover discover
step connect connect
step io-512 io "$nqn512" 512
step io-4k io "$nqn4k" 4096
step disconnect disconnect
step forward forward
step teardown teardown
step stop vm_stop
trap - EXIT
rm -rf "$state"
echo "selftest: $passed passed, 0 failed"
