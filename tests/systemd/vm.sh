# vm.sh: sourceable library that boots the systemd guest made by image.sh
# and drives it with the interop suite's agent protocol (tests/interop/vm.sh
# provides vm_exec and vm_stop; only the boot differs).
#   sysd_start STATE_DIR       boot STATE_DIR/root.img, wait for the agent
#   sysd_reboot                `systemctl reboot` in the guest, wait for the
#                              agent of the next boot
# Env: SYSD_BOOT_TIMEOUT (s, default 300).  A boot to the agent took 19 to
# 25 s at a load of 1 to 5 under TCG, 76 s at 4 to 9, 2.5 min at 14.  The guest gives up sooner on its own (the units' start
# timeouts below); the console says why and the wait ends at once.
# The console log (serial, with kernel timestamps): console.log, and the
# boots before a reboot in console.1.log, console.2.log.
. "$(dirname "${BASH_SOURCE[0]}")/../interop/vm.sh"

# A start job without a limit of its own (test-nvmet's oneshot has one, the
# agent too) gets 240 s instead of 90: a loaded TCG guest is slow, but every
# wait in the guest stays bounded.
SYSD_TIMEOUTS="systemd.default_timeout_start_sec=240 systemd.default_device_timeout_sec=240"

# What on the console means that the agent will never come: its start
# failed (its own message says why), the boot went to emergency mode or
# the kernel gave up.
SYSD_DEAD='Failed to start test-agent|test-agent: |emergency mode|Kernel panic|end Kernel panic'

_sysd_wait_ready() {
	local pid t0=$SECONDS limit=${SYSD_BOOT_TIMEOUT:-300} why='' off
	pid=$(_vm_pid)
	# Only this boot's lines: the log keeps the boots before a reboot.
	off=$(($(stat -c %s "$VM_STATE/console.log" 2> /dev/null || echo 0) + 1))
	until [ -e "$VM_STATE/share/ready" ]; do
		if ! _vm_alive "$pid"; then
			why="qemu exited"
		elif [ $((SECONDS - t0)) -ge "$limit" ]; then
			why="not within $limit s"
		elif tail -c +"$off" "$VM_STATE/console.log" 2> /dev/null | grep -qaE "$SYSD_DEAD"; then
			why="$(tail -c +"$off" "$VM_STATE/console.log" | grep -aE -m1 "$SYSD_DEAD" |
				tr -d '\r' | sed 's/\x1b\[[0-9;]*[A-Za-z]//g')"
		fi
		if [ -n "$why" ]; then
			echo "sysd: the guest's agent did not come up after $((SECONDS - t0)) s: $why; console tail:" >&2
			sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$VM_STATE/console.log" | tr '\r' '\n' |
				grep -av 'Job .* running (' | grep -av '^ *$' | tail -n 40 >&2
			return 1
		fi
		sleep 0.5
	done
}

sysd_start() {
	local st=${1:?usage: sysd_start STATE_DIR}
	st=$(cd "$st" && pwd -P) || return 1
	VM_STATE=$st
	if _vm_alive "$(_vm_pid)"; then
		echo "sysd_start: a guest is already running for $st" >&2
		return 1
	fi
	rm -rf "$st/share" "$st"/console*.log "$st/seq"
	mkdir -p "$st/share/cmd" "$st/share/out" || return 1
	_sysd_boot
}

# The console of a boot that has ended goes to the next console.N.log,
# whose path is printed.
_sysd_keep_console() {
	local f
	f=$VM_STATE/console.$(($(ls "$VM_STATE"/console.*.log 2> /dev/null | wc -l) + 1)).log
	mv "$VM_STATE/console.log" "$f" && echo "$f"
}

# One power-on of the guest, its console in console.log (the earlier boots'
# in console.N.log, N = 1, 2...).
# -no-reboot: a reboot of the guest ends qemu, and sysd_reboot powers it on
# again.  A warm reset of the same TCG qemu made the next boot crawl: its
# init spent minutes in clear_page_erms (soft lockups, 300 s and more to
# the agent) where a first boot took 1 to 2 min on the same loaded host.
# tsc=reliable: no clocksource switch at run time (see tests/interop/vm.sh).
# thread=single: both vCPUs on one host thread.  Multi-threaded TCG lost
# boots to an "Oops: int3" in sched_clock_cpu right after "sched_clock:
# Marking stable" at 1.6 s (the kernel enabling a static key while the
# other vCPU runs the site; CI's reboot_order, stop 34, and one boot of
# four here), which tsc=reliable does not avoid.  The suite's guest does no
# benchmark: the cost is wall time (boots 23 to 42 s against 17 to 28).
# -erms,-fsrm: no byte-at-a-time `rep movsb` copies (tests/interop/vm.sh).
# restrict=on: the guest reaches nothing; it needs no network (the target
# is on its loopback; eth0 only carries the soft-RoCE device).
_sysd_boot() {
	local st=$VM_STATE
	qemu-system-x86_64 -name nvmf-gateway-sysd -nodefaults -no-user-config \
		-accel tcg,thread=single -cpu max,-erms,-fsrm -m 2048 -smp 2 -no-reboot \
		-display none -serial "file:$st/console.log" \
		-kernel "$VM_CACHE/vmlinuz" -initrd "$st/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw net.ifnames=0 panic=-1 tsc=reliable systemd.show_status=1 $SYSD_TIMEOUTS" \
		-drive "file=$st/root.img,if=virtio,format=raw,cache=unsafe" \
		-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 \
		-virtfs "local,path=$st/share,mount_tag=share,security_model=none" \
		-pidfile "$st/qemu.pid" -daemonize || { echo "sysd: qemu failed" >&2; return 1; }
	_sysd_wait_ready && return 0
	_vm_kill "$(_vm_pid)"
	# One kind of guest death is the emulator's, not the boot's: an
	# "Oops: int3" while the kernel patches its own text (see above; kept
	# should single-threaded TCG ever show it too).  Said so, and powered
	# on once more; any other failure fails.  Callers that read a boot's
	# journal name the boot by its id, so a boot that died is no "-b -1".
	if [ -z "${_SYSD_RETRY:-}" ] && grep -qa 'Oops: int3' "$st/console.log" 2> /dev/null; then
		echo "sysd: the guest kernel died of an int3 Oops in its own text patching (an emulator artifact; console: $(_sysd_keep_console)); powering on once more" >&2
		rm -f "$st/qemu.pid"
		_SYSD_RETRY=1 _sysd_boot
		return
	fi
	return 1
}

# `systemctl reboot` in the guest: the whole shutdown runs in the guest (its
# journal keeps it), qemu exits at the reset, and the guest is powered on
# again.  The reboot command removes its own file first: the agent is
# stopped by the shutdown and must not find it again on the next boot.
sysd_reboot() {
	local seq id f pid t0=$SECONDS limit=${SYSD_BOOT_TIMEOUT:-300}
	pid=$(_vm_pid)
	seq=$(($(cat "$VM_STATE/seq" 2> /dev/null || echo 0) + 1))
	echo "$seq" > "$VM_STATE/seq"
	id=$(printf '%08d' "$seq")
	f=$VM_STATE/share/cmd/$id
	rm -f "$VM_STATE/share/ready"
	# The path is the agent's own (its cwd is the share): the guest
	# mounts the share elsewhere than the host's path of it.
	printf '#limit 60\nrm -f cmd/%q\nsystemctl --no-block reboot\n' "$id" > "$VM_STATE/share/cmd/.$id" &&
		mv "$VM_STATE/share/cmd/.$id" "$f" || return 1
	if ! _vm_gone "$pid" "$limit"; then
		echo "sysd: the guest's shutdown did not end within $limit s; console tail:" >&2
		sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$VM_STATE/console.log" | tr '\r' '\n' |
			grep -av 'Job .* running (' | grep -av '^ *$' | tail -n 40 >&2
		_vm_kill "$pid"
		return 1
	fi
	echo "sysd: shutdown for the reboot took $((SECONDS - t0)) s"
	# And here, for a shutdown that stopped the agent before the command's
	# own rm ran: found again, it rebooted the next boot (CI, stop 17).
	rm -f "$f" "$VM_STATE/qemu.pid"
	_sysd_keep_console > /dev/null
	_sysd_boot
}
