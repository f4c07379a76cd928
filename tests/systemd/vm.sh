# vm.sh: sourceable library that boots the systemd guest made by image.sh
# and drives it with the interop suite's agent protocol (tests/interop/vm.sh
# provides vm_exec and vm_stop; only the boot differs).
#   sysd_start STATE_DIR       boot STATE_DIR/root.img, wait for the agent
#   sysd_reboot                `systemctl reboot` in the guest, wait for the
#                              agent of the next boot
# Env: SYSD_BOOT_TIMEOUT (s, default 900: a boot of systemd under TCG took
# 2 to 5 min with the 2 shared cores at a load of 22).
# The console log (serial, with kernel timestamps) keeps every boot.
. "$(dirname "${BASH_SOURCE[0]}")/../interop/vm.sh"

# systemd gives a device or a mount 90 s by default: on a loaded machine the
# 9p share of the agent came later than that.
SYSD_TIMEOUTS="systemd.default_timeout_start_sec=900 systemd.default_device_timeout_sec=900"

_sysd_wait_ready() {
	local pid t0=$SECONDS limit=${SYSD_BOOT_TIMEOUT:-900}
	pid=$(_vm_pid)
	until [ -e "$VM_STATE/share/ready" ]; do
		if ! _vm_alive "$pid" || [ $((SECONDS - t0)) -ge "$limit" ]; then
			echo "sysd: the guest's agent did not come up within $limit s; console tail:" >&2
			tail -n 40 "$VM_STATE/console.log" >&2
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
	rm -rf "$st/share" "$st/console.log" "$st/seq"
	mkdir -p "$st/share/cmd" "$st/share/out" || return 1
	# No -no-reboot: case 6 reboots the guest.  restrict=on: the guest
	# reaches nothing; it needs no network (the target is on its loopback;
	# eth0 only carries the soft-RoCE device).
	qemu-system-x86_64 -name nvmf-gateway-sysd -nodefaults -no-user-config \
		-accel tcg,thread=multi -cpu max -m 2048 -smp 2 \
		-display none -serial "file:$st/console.log" \
		-kernel "$VM_CACHE/vmlinuz" -initrd "$st/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw net.ifnames=0 panic=-1 systemd.show_status=1 $SYSD_TIMEOUTS" \
		-drive "file=$st/root.img,if=virtio,format=raw,cache=unsafe" \
		-netdev user,id=n0,restrict=on -device virtio-net-pci,netdev=n0 \
		-virtfs "local,path=$st/share,mount_tag=share,security_model=none" \
		-pidfile "$st/qemu.pid" -daemonize || { echo "sysd_start: qemu failed" >&2; return 1; }
	_sysd_wait_ready || { _vm_kill "$(_vm_pid)"; return 1; }
}

# The reboot command removes its own file first: the agent is stopped by the
# shutdown and must not find it again on the next boot.
sysd_reboot() {
	local seq id f
	seq=$(($(cat "$VM_STATE/seq" 2> /dev/null || echo 0) + 1))
	echo "$seq" > "$VM_STATE/seq"
	id=$(printf '%08d' "$seq")
	f=$VM_STATE/share/cmd/$id
	rm -f "$VM_STATE/share/ready"
	printf '#limit 60\nrm -f %q\nsystemctl --no-block reboot\n' "$f" > "$VM_STATE/share/cmd/.$id" &&
		mv "$VM_STATE/share/cmd/.$id" "$f" || return 1
	_sysd_wait_ready
}
