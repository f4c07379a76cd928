#!/usr/bin/env bash
# The interop suite: the gateway against the Linux kernel target (nvmet) in
# a qemu guest (INTEROP.md).  One guest boot; every case runs the freshly
# built gateway inside the guest, next to the kernel's own host.  The
# transport cases run once per transport of INTEROP_TRANSPORTS (default
# "tcp rdma"; rdma is soft-RoCE on the guest's eth0, case names end -rdma).
# At the end, a short pass on each older kernel of INTEROP_LEGACY_KERNELS
# (default "5.10", Debian 11's; empty: none) in a guest of its own
# (legacy.sh); INTEROP_KERNEL=5.10 runs that pass alone.
set -u
build="${1:-build}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
. "$top/tests/lib/report.sh"
report_init "$build" interop
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
. "$top/tests/interop/vm.sh"
cd "$top" || exit 1
GW="$top/$build/nvmf-gateway"
port=${INTEROP_PORT:-14420}
nqn512=nqn.2014-08.org.nvmf-gateway:interop-512
nqn4k=nqn.2014-08.org.nvmf-gateway:interop-4k
nqnacl=nqn.2014-08.org.nvmf-gateway:interop-acl
hostok=nqn.2014-08.org.nvmf-gateway:host-allowed
state=$(mktemp -d /tmp/nvmf-interop.XXXXXX) || exit 1
logdir="$top/$build/results/interop"
mkdir -p "$logdir"
trap vm_stop EXIT
rc=0
transports=${INTEROP_TRANSPORTS:-tcp rdma}

# case NAME CMD...: one test case; its output goes to the log folder.
# INTEROP_CASES=REGEX runs only the cases whose name matches (development).
# A case that loses the guest (a guest kernel panic powers qemu off: panic=-1
# with -no-reboot; a guest that no longer answers is killed) fails with the
# console's tail in its log and on stdout, and the guest is booted and the
# target set up again, so that one crash does not fail every later case (at
# most INTEROP_REBOOTS times, default 3).  One kind of guest death is the
# emulator's, not the case's: an "Oops: int3" while the kernel patches its
# own text (multi-threaded TCG can run a stale breakpoint on the other
# vCPU).  That case is said so, and run once more on the fresh guest.
reboots=0
case_() {
	local name=$1 try=1 gone
	shift
	[[ $name =~ ${INTEROP_CASES:-.} ]] || return 0
	while :; do
		if "$@" > "$logdir/$name.log" 2>&1; then
			report PASS "$name"
			return 0
		fi
		if [ "${VM_STATE:-}" = "$state" ] && _vm_alive "$(_vm_pid)" &&
			! VM_EXEC_TIMEOUT=30 vm_exec true > /dev/null 2>&1; then
			echo "the guest no longer answers after $name: killing it" >> "$logdir/$name.log"
			_vm_kill "$(_vm_pid)" >> "$logdir/$name.log" 2>&1
		fi
		gone=
		# The guest kernel's side of a failure (nvmet's messages) is
		# lost with the guest at the end: keep its tail with the case.
		if [ "${VM_STATE:-}" = "$state" ] && _vm_alive "$(_vm_pid)"; then
			{
				echo "--- guest dmesg tail after $name:"
				VM_EXEC_TIMEOUT=30 vm_exec "dmesg | tail -n 40" 2>&1
			} >> "$logdir/$name.log"
		fi
		if [ "${VM_STATE:-}" = "$state" ] && ! _vm_alive "$(_vm_pid)"; then
			gone=1
			cp "$state/console.log" "$logdir/$name.console.log" 2> /dev/null
			{
				echo "the guest is gone (qemu exited) during $name; console tail:"
				tail -n 60 "$state/console.log" 2> /dev/null
			} >> "$logdir/$name.log"
		fi
		if [ -n "$gone" ] && [ $try = 1 ] && [ "$reboots" -lt "${INTEROP_REBOOTS:-3}" ] &&
			grep -q 'Oops: int3' "$logdir/$name.console.log" 2> /dev/null; then
			mv "$logdir/$name.log" "$logdir/$name.try1.log"
			reboots=$((reboots + 1))
			echo "interop: $name: the guest kernel died of an int3 Oops in its own text patching" \
				"(an emulator artifact; console: $logdir/$name.console.log); booting again" \
				"($reboots of ${INTEROP_REBOOTS:-3}) and running the case once more"
			guest_up "reboot$reboots" || { report FAIL "$name" "the guest did not come back"; rc=1; return 0; }
			try=2
			continue
		fi
		rc=1
		sed '/^--- guest dmesg tail after/,$d' "$logdir/$name.log" | tail -25
		report FAIL "$name" "log $logdir/$name.log"
		[ -n "$gone" ] || return 0
		if [ "$reboots" -ge "${INTEROP_REBOOTS:-3}" ]; then
			echo "interop: the guest is gone again after $reboots reboots; not booting it again"
			return 0
		fi
		reboots=$((reboots + 1))
		echo "interop: the guest is gone after $name; booting it again ($reboots of ${INTEROP_REBOOTS:-3})"
		guest_up "reboot$reboots" || echo "interop: the guest did not come back"
		return 0
	done
}

g() { VM_EXEC_TIMEOUT=${T:-300} vm_exec "export NVMF_GATEWAY_STATE_DIR=/tmp/gw-state; $*"; }

# guest_up TAG: boots the guest and sets up the kernel target: the
# subsystems and the ports every case expects.  Its logs: TAG.log and
# TAG-target.log in the log folder.
guest_up() {
	# A boot that fails is tried once more (its console is kept): a guest
	# kernel can die in early boot of the emulator artifact above.
	vm_start "$state" "$port:4420" > "$logdir/$1.log" 2>&1 || {
		cp "$state/console.log" "$logdir/$1.failed-console.log" 2> /dev/null
		echo "interop: the guest did not start ($1; console: $logdir/$1.failed-console.log); trying once more"
		tail -n 5 "$logdir/$1.log"
		vm_start "$state" "$port:4420" > "$logdir/$1.log" 2>&1
	} || {
		cat "$logdir/$1.log"
		report FAIL "$1" "guest did not start"
		return 1
	}
	# Only a first boot counts as a case; a reboot is told by case_.
	[[ $1 == boot* ]] && report PASS "$1"
	vm_exec ". tests/interop/nvmet.sh &&
	nvmet_subsys $nqn512 256M 512 && nvmet_subsys $nqn4k 256M 4096 &&
	nvmet_subsys $nqnacl 64M 512 $hostok &&
	nvmet_port 1 tcp 10.0.2.15 4420 &&
	nvmet_link $nqn512 1 && nvmet_link $nqn4k 1 && nvmet_link $nqnacl 1 &&
	if [[ ' $transports ' == *' rdma '* ]]; then
		nvmet_port 2 rdma 10.0.2.15 4420 && ibv_devices | grep rxe0 &&
		nvmet_link $nqn512 2 && nvmet_link $nqn4k 2 && nvmet_link $nqnacl 2
	fi" > "$logdir/$1-target.log" 2>&1 || {
		cat "$logdir/$1-target.log"
		report FAIL "target-setup${1#boot}"
		return 1
	}
}
# The automatic reactor backend on older kernels and with io_uring refused.
. "$top/tests/interop/legacy.sh"
if [ -n "${INTEROP_KERNEL:-}" ]; then
	legacy_pass "$INTEROP_KERNEL"
	exit $rc
fi

# NVMe/TCP TLS (TLS.md): tlshd and nvme-cli 2.x come from a Debian 13 root,
# built here once (debootstrap, a few minutes) and cached beside the kernel.
# tls-gateway (the gateway's own TLS against nvmet and tlshd) is a case of
# every run (INTEROP_TLS=0 leaves it out); tls-kernel-host (the recipe with
# the kernel's own host alone) is asked for by name (INTEROP_CASES naming
# it, or INTEROP_TLS=1).
tlsroot=$VM_CACHE/trixie-tls tlsroot_ok= want_tls= gw_tls=1
[[ "${INTEROP_TLS:-}" = 1 || "${INTEROP_CASES:-}" == *tls-kernel* ]] && want_tls=1
[ "${INTEROP_TLS:-}" = 0 ] && gw_tls=
if [[ " $transports " == *" tcp "* ]] &&
	{ [[ -n $want_tls && tls-kernel-host =~ ${INTEROP_CASES:-.} ]] ||
		[[ -n $gw_tls && tls-gateway =~ ${INTEROP_CASES:-.} ]] ||
		[[ -n $gw_tls && tls-discovery =~ ${INTEROP_CASES:-.} ]]; }; then
	"$top/tests/interop/tlsroot.sh" "$tlsroot" > "$logdir/tlsroot.log" 2>&1 && tlsroot_ok=1
fi

guest_up boot || exit 1

# The harness itself: a command that runs in the guest costs the host next
# to nothing while vm_exec waits for it.  Its waiter once forked three
# programs 20 times a second, 0.4 of a CPU taken from the vCPUs of every
# case and benchmark (3.7 s of CPU over a 10 s command; 0.15 s now).  A
# bound on the children's CPU time by `times` (this shell's, hence a file),
# not on any clock.
t_harness_quiet() {
	local f=$state/times ms0 ms1
	times > "$f.0"
	vm_exec "sleep 10" || return 1
	times > "$f.1"
	ms0=$(times_children_ms "$f.0") && ms1=$(times_children_ms "$f.1") || return 1
	echo "vm_exec's waiter over a 10 s command: $((ms1 - ms0)) ms of CPU (bound 1500)"
	[ $((ms1 - ms0)) -lt 1500 ]
}
# times_children_ms FILE: user+sys of the children, in ms, from `times`.
times_children_ms() {
	local u s t ms=0
	{ read -r _ _ && read -r u s; } < "$1" || return 1
	for t in "$u" "$s"; do
		[[ $t =~ ^([0-9]+)m([0-9]+)\.([0-9]{3})s$ ]] || { echo "times: '$t'" >&2; return 1; }
		ms=$((ms + BASH_REMATCH[1] * 60000 + 10#${BASH_REMATCH[2]} * 1000 + 10#${BASH_REMATCH[3]}))
	done
	echo $ms
}
case_ harness-quiet t_harness_quiet
# Callers under set -e (make demo's script): vm_exec gives the command's
# status, not the waiter's sleep's (read -t's timeout is status 142,
# which once ended the waiter, and make demo with it).  In a bash of its
# own: a case runs where set -e is ignored.
t_harness_errexit() {
	local st
	VM_STATE=$VM_STATE bash -c 'set -e; . "$1"; vm_exec "sleep 1; true"; echo "vm_exec under set -e: 0"' \
		_ "$top/tests/interop/vm.sh" || { echo "vm_exec under set -e: status $? (0 expected)"; return 1; }
	VM_STATE=$VM_STATE bash -c 'set -e; . "$1"; vm_exec "sleep 1; exit 3"' _ "$top/tests/interop/vm.sh"
	st=$?
	echo "vm_exec under set -e, a command that exits 3: status $st"
	[ "$st" = 3 ]
}
case_ harness-errexit t_harness_errexit

for tr in $transports; do
sfx=; [ $tr = tcp ] || sfx=-$tr

# (1) discover lists every subsystem of the port and the discovery entry.
t_discover() {
	g "$GW discover -t $tr -a 10.0.2.15 -s 4420 > /tmp/d.txt; r=\$?; cat /tmp/d.txt; [ \$r = 0 ] &&
	   grep -q 'subnqn:  $nqn512\$' /tmp/d.txt && grep -q 'subnqn:  $nqn4k\$' /tmp/d.txt &&
	   grep -q 'subtype: current discovery subsystem' /tmp/d.txt &&
	   $GW discover -t $tr -a 10.0.2.15 -s 4420 -o json | grep -q '\"subnqn\": \"$nqn4k\"' &&
	   nvme discover -t $tr -a 10.0.2.15 -s 4420 | grep -c '^subnqn' > /tmp/k.txt &&
	   [ \$(grep -c '^subnqn' /tmp/d.txt) = \$(cat /tmp/k.txt) ]"
}
case_ discover$sfx t_discover

# (2) bench --verify (a 120 s io-timeout: a 1 MiB command in a TCG guest on a
# loaded host took over 30 s once): sizes below and above the transfer cap (256 KiB by
# default, so 1 MiB is split), several queue depths, digests off and on.
t_bench() {
	local nqn=$1 bs=$2 qd=$3 wl=$4
	shift 4
	g "$GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqn -w $wl -b $bs -d $qd -T 2 --verify --size 16M --io-timeout 120000 $*"
}
# Digests exist on TCP only; RDMA adds the deepest queue instead.
# QD1 in TCG is slow on either wire (a 16 MiB --verify region took 70-97 s
# over tcp): a smaller region keeps that case short.
digests=("") qd1=--size=2M
[ $tr = tcp ] && digests=("" "-g -G")
for dg in "${digests[@]}"; do
	tag=${dg:+-digest}$sfx
	case_ "bench-512-0.5k-qd1$tag" t_bench $nqn512 512 1 randrw $dg $qd1
	case_ "bench-512-4k-qd32$tag" t_bench $nqn512 4k 32 randrw $dg
	case_ "bench-512-128k-qd8$tag" t_bench $nqn512 128k 8 randwrite $dg
	case_ "bench-512-1m-qd4$tag" t_bench $nqn512 1m 4 randrw $dg
	case_ "bench-4k-4k-qd16$tag" t_bench $nqn4k 4k 16 randrw $dg
	case_ "bench-4k-1m-qd2$tag" t_bench $nqn4k 1m 2 read $dg
done
# Two reactors, a queue each, each on its own slice of the region.
case_ "bench-reactors2$sfx" t_bench $nqn512 64k 8 randrw --reactors 2
if [ $tr = tcp ]; then
	case_ bench-split-64k t_bench $nqn512 256k 4 randrw --max-xfer 64k
else
	case_ bench-512-4k-qd128$sfx t_bench $nqn512 4k 128 randrw
	case_ rdma-inline-1000 t_rdma_inline_odd
fi

# An RDMA port whose in-capsule size is not a multiple of 64 (nvmet's
# param_inline_data_size 1000: IOCCSZ 66, 992 bytes of data): the I/O
# queue Connect's 1024 bytes and the 4 KiB writes go keyed, the 512-byte
# ones in the capsule.  The gateway once took the 64-byte-rounded buffer
# for the limit (1024) and every I/O queue connect failed on the target's
# short receive buffer.
t_rdma_inline_odd() {
	g ". tests/interop/nvmet.sh
	   nvmet_port 9 rdma 10.0.2.15 4429 1000 && nvmet_link $nqn512 9 || exit 1
	   trap 'nvmet_unlink $nqn512 9; rmdir \$NVMET/ports/9' EXIT
	   cat \$NVMET/ports/9/param_inline_data_size
	   $GW bench -t rdma -a 10.0.2.15 -s 4429 -n $nqn512 -w randwrite -b 512 -d 8 -T 2 --verify --size 2M --io-timeout 120000 &&
	   $GW bench -t rdma -a 10.0.2.15 -s 4429 -n $nqn512 -w randrw -b 4k -d 8 -T 2 --verify --size 2M --io-timeout 120000"
}

# (4) a 512-byte I/O on a 4 KiB-block namespace is refused up front.
t_bs_mismatch() {
	g "out=\$($GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqn4k -b 512 -T 1 2>&1); r=\$?; echo \"\$out\";
	   [ \$r = 1 ] && echo \"\$out\" | grep -q 'not a multiple of the LBA size 4096'"
}
case_ bench-4k-lba-rejects-512$sfx t_bs_mismatch

# (5) errors: one clear line, exit 1, bounded time.
t_err() {
	local want=$1
	shift
	g "out=\$(timeout 60 $GW bench -t $tr -a 10.0.2.15 -T 1 $* 2>&1); r=\$?; echo \"\$out\"; echo rc=\$r;
	   [ \$r = 1 ] && echo \"\$out\" | grep -q '$want'"
}
case_ err-wrong-nqn$sfx t_err "has no subsystem nqn.2014-08.org.nvmf-gateway:nope" -s 4420 -n nqn.2014-08.org.nvmf-gateway:nope
closed="cannot connect to 10.0.2.15:4999: Connection refused"
[ $tr = rdma ] && closed="10.0.2.15:4999: connection refused: no NVMe/RDMA listener"
case_ err-closed-port$sfx t_err "$closed" -s 4999 -n $nqn512
case_ err-host-not-allowed$sfx t_err "is not allowed to connect" -s 4420 -n $nqnacl -q nqn.2014-08.org.nvmf-gateway:host-other
# (6) the gateway writes, the kernel's own host (same transport) reads
# every block back and finds the pattern naming it.
t_cross_write() {
	g "set -e; . tests/interop/nvmet.sh
	   $GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqn4k -w write -b 64k -d 8 -T 1 --verify --seed 4242 --size 8M
	   nvme connect -t $tr -a 10.0.2.15 -s 4420 -n $nqn4k > /dev/null
	   trap 'nvme disconnect -n $nqn4k > /dev/null' EXIT
	   dev=\$(nvme_host_dev $nqn4k)
	   dd if=\$dev iflag=direct bs=1M count=8 status=none > /tmp/gw-cross-read.bin
	   python3 tests/interop/bench_pattern.py /tmp/gw-cross-read.bin 4096 4242"
}
case_ cross-gateway-writes-kernel-reads$sfx t_cross_write
# (7) the target drops the association under load (the subsystem leaves
# the port): the gateway logs why and bench exits 1, nothing hangs.
t_target_drop() {
	local port_id=1 msg="closing the connection"
	[ $tr = rdma ] && port_id=2 msg="target disconnected; closing the connection"
	g ". tests/interop/nvmet.sh
	   NVMF_GATEWAY_LOG=info $GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqn4k -w randrw -d 16 -T 120 > /tmp/drop.txt 2>&1 &
	   b=\$!
	   for i in \$(seq 600); do grep -q 'connecting -> live' /tmp/drop.txt && break; sleep 0.1; done
	   sleep 1; nvmet_unlink $nqn4k $port_id
	   for i in \$(seq 600); do kill -0 \$b 2> /dev/null || break; sleep 0.1; done
	   kill -0 \$b 2> /dev/null && { echo 'bench still running 60 s after the drop'; kill \$b; }
	   wait \$b; r=\$?; nvmet_link $nqn4k $port_id; cat /tmp/drop.txt; echo rc=\$r
	   [ \$r = 1 ] && grep -q 'connecting -> live' /tmp/drop.txt && grep -q '$msg' /tmp/drop.txt"
}
case_ err-target-drops$sfx t_target_drop
t_acl_ok() { g "$GW bench -t $tr -a 10.0.2.15 -s 4420 -n $nqnacl -q $hostok -w randrw -T 1 --verify --size 4M"; }
case_ host-allowed-connects$sfx t_acl_ok
. "$top/tests/interop/cases_path_opts.sh"
# DH-HMAC-CHAP in-band authentication.
. "$top/tests/interop/cases_auth.sh"
# Issue 16: secrets from a file or the environment, -S scrubbed from cmdline.
. "$top/tests/interop/cases_access.sh"
done

# The daemon with its NBD and FUSE exports, checked against the kernel host
# (for rdma: the gateway and the kernel's nvme-rdma host on the same target).
for gw_tr in $transports; do
	gw_sfx=; [ $gw_tr = tcp ] || gw_sfx=-$gw_tr
	. "$top/tests/interop/cases_gateway.sh"
done

# One target over an RDMA and a TCP path at once.
if [[ " $transports " == *" tcp "* && " $transports " == *" rdma "* ]]; then
	. "$top/tests/interop/cases_mixed.sh"
fi

# The gateway on this host through the port forward: FUSE and NBD clients.
if [[ " $transports " == *" tcp "* ]]; then
	. "$top/tests/interop/cases_host.sh"
	# nvmet with TLS 1.3 required and the kernel's own host through tlshd
	# (groundwork for the gateway's TLS, issue 21): plaintext refused, TLS
	# data written and read back.
	t_tls_kernel() {
		[ -n "$tlsroot_ok" ] || { cat "$logdir/tlsroot.log"; echo "no Debian 13 root for tlshd"; return 1; }
		T=600 g "TLS_RECORD=${TLS_RECORD:-} bash tests/interop/tls_kernel.sh $tlsroot/root"
	}
	[ -z "$want_tls" ] || case_ tls-kernel-host t_tls_kernel
	# The gateway's own TLS (OpenSSL) against the same nvmet port and
	# tlshd: discover, bench --verify, data across both TLS hosts, the
	# daemon's NBD export of a tls target, wrong key and plaintext errors.
	t_tls_gateway() {
		[ -n "$tlsroot_ok" ] || { cat "$logdir/tlsroot.log"; echo "no Debian 13 root for tlshd"; return 1; }
		T=600 g "TLS_RECORD=${TLS_RECORD:-} GW=$GW bash tests/interop/tls_kernel.sh $tlsroot/root 4431 gateway"
	}
	[ -z "$gw_tls" ] || case_ tls-gateway t_tls_gateway
	# The daemon's persistent discovery controller over TLS to nvmet and an
	# auto_export target over TLS made from its log (tls_discovery.sh).
	t_tls_discovery() {
		[ -n "$tlsroot_ok" ] || { cat "$logdir/tlsroot.log"; echo "no Debian 13 root for tlshd"; return 1; }
		T=600 g "GW=$GW bash tests/interop/tls_kernel.sh $tlsroot/root 4432 discovery"
	}
	[ -z "$gw_tls" ] || case_ tls-discovery t_tls_discovery
fi

# Failures under I/O: link flaps, ANA, path loss, ctrl_loss_tmo, fast_io_fail_tmo.
. "$top/tests/interop/cases_resil.sh"
. "$top/tests/interop/cases_live.sh"
. "$top/tests/interop/cases_limits.sh"

# /dev/nbdN attached by the gateway: filesystems, LVM, restart.
. "$top/tests/interop/cases_nbd.sh"

# 6.12 with kernel.io_uring_disabled=2: the gateway falls back to epoll.
legacy_uring_disabled

# Last: swap on /dev/nbd0 in a small guest of its own (it stops this one).
. "$top/tests/interop/mempressure.sh"

for k in ${INTEROP_LEGACY_KERNELS-5.10}; do
	legacy_pass "$k"
done

exit $rc
