# vm.sh: sourceable library that runs one qemu guest with the real Linux
# NVMe-oF target (see INTEROP.md) and runs commands in it.
#   vm_start STATE_DIR [HOSTPORT:GUESTPORT ...]   boot, wait for the agent
#   vm_exec CMD...                                 run a shell line in the guest
#   vm_stop                                        power off, wait
# The guest's root is the host's root (read-only 9p), so every host tool and
# the checkout are there at the same paths; /tmp and /run are guest tmpfs.
# Env: VM_CACHE (kernel cache, default /var/tmp/nvmf-gateway-vm),
#   VM_BOOT_TIMEOUT (s, default 120), VM_EXEC_TIMEOUT (s, default 600),
#   VM_MEM (guest RAM in MiB, default 2048), VM_CPU (qemu's -cpu, default
#   VM_CPU_DEFAULT below; tests/bench/engine.sh's ENGINE_CPU sets it),
#   VM_STATE (set by vm_start; set it to drive a running guest from another
#   shell).  STATE_DIR holds qemu.pid, console.log (serial console: kernel
#   and init messages) and share/ (the agent's cmd/ and out/ folders: the
#   output of every vm_exec call stays in share/out/ID).
# Sourcing does not change the caller's shell options; the code is set -u safe.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
# Without ERMS and FSRM the guest kernel copies to and from user memory with
# 8-byte moves: TCG emulates `rep movsb` one byte per pass, 3.5-7x slower
# (tests/bench/engine.sh).  Nothing the suites check depends on the copy
# routine, and every case that moves data runs faster: 497 s against 394 s
# for 25 cases of the interop suite, alternated on one host (the NBD and
# FUSE cases 1.2-2x, the TLS case 1.27x).
VM_CPU_DEFAULT=max,-erms,-fsrm

# True when PID is the qemu of $VM_STATE (not a reused pid of anything else).
# Builtins only: vm_exec's waiter asks 20 times a second for as long as a
# command runs, and forking tr and grep (and sleep) there took 0.3-0.4 of
# this 2-core host's CPU away from the guest's vCPUs (bench's "other").
_vm_alive() {
	local a x
	[ -n "${1:-}" ] && mapfile -d '' -t a < "/proc/$1/cmdline" 2> /dev/null || return 1
	for x in "${a[@]}"; do
		[ "$x" = "file:$VM_STATE/console.log" ] && return 0
	done
	return 1
}

_vm_pid() { cat "$VM_STATE/qemu.pid" 2> /dev/null; }

vm_start() {
	local st=${1:?usage: vm_start STATE_DIR [HOSTPORT:GUESTPORT ...]} fwd='' p try
	shift
	mkdir -p "$st" && st=$(cd "$st" && pwd -P) || return 1
	VM_STATE=$st
	if _vm_alive "$(_vm_pid)"; then
		echo "vm_start: a guest is already running for $st" >&2
		return 1
	fi
	for p; do
		[[ "$p" =~ ^[0-9]+:[0-9]+$ ]] || { echo "vm_start: bad forward '$p'" >&2; return 1; }
		fwd+=",hostfwd=tcp:127.0.0.1:${p%%:*}-:${p#*:}"
	done
	"$VM_DIR/kernel.sh" "$VM_CACHE" || return 1
	# One more boot when the first dies on its way up of the text-patching
	# race: multi-threaded TCG now and then runs a vCPU into text the other
	# is patching at boot (a static key's int3: "Oops: int3", "Fatal
	# exception in interrupt" in sched_clock_cpu at 2 s, seen on 2026-12-07
	# with nothing else running), which tsc=reliable (below) does not
	# cover.  Its console stays in console.1.log.  A guest that is merely
	# slow, or panics otherwise, is not booted again.
	for try in 1 2; do
		_vm_boot "$st" "$fwd" && return 0
		[ $? = 2 ] && [ "$try" = 1 ] || return 1
		echo "vm_start: the guest died of the boot-time text-patching race; booting it once more" >&2
	done
}

# _vm_boot STATE_DIR FORWARDS: one boot; 2 when the guest panicked before
# its agent came up, 1 on any other failure.
_vm_boot() {
	local st=$1 fwd=$2 keep pid t0
	rm -rf "$st/share" "$st/console.log" "$st/seq"
	mkdir -p "$st/share/cmd" "$st/share/out" || return 1
	# The checkout must stay visible even when it lives under /tmp.
	keep=$(cd "$VM_DIR/../.." && pwd -P)
	# restrict=on: the guest reaches nothing but its forwarded ports.
	# tsc=reliable: without it, the clocksource watchdog of a guest on a
	# busy host finds the TSC "skewed" and switches clocks at run time,
	# which patches kernel text; under multi-threaded TCG that patching
	# can hit a stale int3 on the other vCPU and panic the guest (a CI run
	# lost its guest so: "Oops: int3" in sched_clock_cpu, nvmet_tcp_io_work).
	qemu-system-x86_64 -name nvmf-gateway-test -nodefaults -no-user-config \
		-accel tcg,thread=multi -cpu "${VM_CPU:-$VM_CPU_DEFAULT}" -m "${VM_MEM:-2048}" -smp 2 \
		-display none -no-reboot -serial "file:$st/console.log" \
		-kernel "$VM_CACHE/vmlinuz" -initrd "$VM_CACHE/initramfs.img" \
		-append "console=ttyS0 panic=-1 tsc=reliable vmshare=$st/share vmagent=$VM_DIR/guest-agent.sh vmkeep=$keep" \
		-netdev "user,id=n0,restrict=on$fwd" -device virtio-net-pci,netdev=n0 \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$st/share,mount_tag=share,security_model=none" \
		-pidfile "$st/qemu.pid" -daemonize || { echo "vm_start: qemu failed" >&2; return 1; }
	pid=$(_vm_pid)
	t0=$SECONDS
	until [ -e "$st/share/ready" ]; do
		if ! _vm_alive "$pid" || [ $((SECONDS - t0)) -ge "${VM_BOOT_TIMEOUT:-120}" ]; then
			if _vm_alive "$pid"; then
				echo "vm_start: the guest did not come up within ${VM_BOOT_TIMEOUT:-120} s; console tail:" >&2
			else
				echo "vm_start: the guest stopped before it came up; console tail:" >&2
			fi
			tail -n 30 "$st/console.log" >&2
			_vm_kill "$pid"
			# Only the text-patching race: a panic that would come
			# again (init killed, out of memory) fails at once.
			if grep -qE 'Oops: int3|Fatal exception in interrupt' "$st/console.log" 2> /dev/null; then
				cp "$st/console.log" "$st/console.1.log"
				return 2
			fi
			return 1
		fi
		sleep 0.5
	done
}

# Polls for the exit status file of one command; exits with that status, or
# 255 when the guest is gone or has not answered by the deadline.
_vm_wait_rc() {
	local rc=$1 pid=$2 deadline=$((SECONDS + $3)) tick st
	# read -t on a fifo nobody writes sleeps without forking (as the
	# guest agent does); one fifo per guest, made by the first waiter.
	[ -p "$VM_STATE/tick" ] || mkfifo "$VM_STATE/tick" 2> /dev/null
	exec {tick}<> "$VM_STATE/tick" || exit 255
	until [ -e "$rc" ]; do
		if ! _vm_alive "$pid" || [ $SECONDS -ge "$deadline" ]; then
			echo "vm_exec: no answer from the guest (see $VM_STATE/console.log)" >&2
			exit 255
		fi
		# A timeout is its status 142: under the caller's set -e
		# (make demo) it would end the waiter.
		read -r -t 0.05 -u "$tick" || :
	done
	read -r st < "$rc"
	exit "${st:-255}"
}

# vm_exec CMD...: the words form one shell line (as with ssh), run by bash
# as root in the guest in the caller's cwd, stdin /dev/null.  Output is
# streamed; returns the line's status, 124 when VM_EXEC_TIMEOUT killed it,
# 255 when the guest did not answer.
vm_exec() {
	local limit=${VM_EXEC_TIMEOUT:-600} seq id out waiter pid
	[ -n "${VM_STATE:-}" ] && pid=$(_vm_pid) && _vm_alive "$pid" ||
		{ echo "vm_exec: no guest running (vm_start first)" >&2; return 255; }
	seq=$(($(cat "$VM_STATE/seq" 2> /dev/null || echo 0) + 1))
	echo "$seq" > "$VM_STATE/seq"
	id=$(printf '%08d' "$seq")
	out=$VM_STATE/share/out/$id
	: > "$out"
	# A cwd under /tmp or /run may be hidden by the guest's tmpfs.
	{
		echo "#limit $limit"
		printf 'cd %q 2> /dev/null || { echo "vm_exec: %q is not in the guest, running in /" >&2; cd /; }\n' "$PWD" "$PWD"
		printf '%s\n' "$*"
	} > "$VM_STATE/share/cmd/.$id" && mv "$VM_STATE/share/cmd/.$id" "$VM_STATE/share/cmd/$id" || return 255
	_vm_wait_rc "$out.rc" "$pid" $((limit + 30)) &
	waiter=$!
	# tail exits after the waiter, once it has printed the last output.
	tail -c +1 -f -s 0.05 --pid="$waiter" "$out"
	wait "$waiter"
}

# Waits up to $2 s for qemu $1 to exit.
_vm_gone() {
	local t0=$SECONDS
	while _vm_alive "$1"; do
		[ $((SECONDS - t0)) -lt "$2" ] || return 1
		sleep 0.2
	done
}

# Last resort, only for the qemu pid recorded in $VM_STATE.
_vm_kill() {
	_vm_alive "$1" || return 0
	echo "vm: killing qemu $1" >&2
	kill "$1"
	_vm_gone "$1" 5 || kill -9 "$1"
	_vm_gone "$1" 5
	rm -f "$VM_STATE/qemu.pid"
}

vm_stop() {
	local pid
	[ -n "${VM_STATE:-}" ] && pid=$(_vm_pid) && _vm_alive "$pid" || return 0
	: > "$VM_STATE/share/cmd/stop"
	_vm_gone "$pid" 30 || _vm_kill "$pid"
}
