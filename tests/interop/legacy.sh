# legacy.sh: issue 18's kernels for the automatic reactor backend, sourced
# by run.sh (uses case_, g, guest_up, report, GW, nqn512, transports, rc).
# The guest side is tests/interop/legacy_gw.sh: the daemon with NBD (device
# and socket) and FUSE exports, its chosen backend and reason checked.
#   legacy_uring_disabled   on the suite's 6.12 guest: kernel.io_uring_disabled
#       = 2, so the gateway must fall back to epoll and say why
#   legacy_pass KERNEL      stops the suite's guest, boots one on that kernel
#       series (kernel.sh VM_KERNEL, its own cache $VM_CACHE/kKERNEL) and runs
#       a short list there: the backend case (NBD device and socket, FUSE,
#       the kernel host) and cases_gateway.sh over tcp (the daemon's NBD and
#       FUSE cases: start, cross-kernel data, nbd tools, ext4 on the device,
#       reload, stop; about 2 min on a quiet host, 190 s for the whole pass
#       with its boot); INTEROP_LEGACY_FULL=0 runs the backend case alone.
#       Case names end -kKERNEL.
legacy_cache_base=$VM_CACHE

legacy_case() { T=600 g "bash tests/interop/legacy_gw.sh $GW $nqn512 $*"; }

# Over tcp by default: the rdma variant passed too (148 s in a loaded TCG
# guest), but make test's budget is short; INTEROP_LEGACY_TRANSPORTS="tcp
# rdma" adds it (each only when the run has that transport).
legacy_uring_disabled() {
	local ltr lsfx
	for ltr in ${INTEROP_LEGACY_TRANSPORTS:-tcp}; do
		[[ " $transports " == *" $ltr "* ]] || continue
		lsfx=; [ "$ltr" = tcp ] || lsfx=-$ltr
		case_ "legacy-uring-disabled$lsfx" legacy_case "$ltr" epoll kernel.io_uring_disabled uring-disabled
	done
	# legacy_gw.sh puts the sysctl back itself; this covers a case killed
	# by its time limit (no EXIT trap then), so later cases get io_uring.
	g "sysctl -qw kernel.io_uring_disabled=0" > /dev/null 2>&1 || true
}

legacy_pass() {
	local k=$1 want why n any="" t0=$SECONDS
	case "$k" in
	# Every opcode the reactor asks for is 5.6 or older.
	5.10) want=io_uring why='io_uring has every operation' ;;
	*)
		report FAIL "boot-k$k" "no legacy kernel $k (kernel.sh knows 6.12 and 5.10)"
		rc=1
		return 0
		;;
	esac
	local full=${INTEROP_LEGACY_FULL:-1} more=
	[ "$full" = 1 ] && more="run-start run-cross-kernel run-nbd-tools run-kdev-ext4 run-reload-kdev run-stop"
	for n in boot legacy-auto $more; do
		[[ $n-k$k =~ ${INTEROP_CASES:-.} ]] && any=1
	done
	[ -n "$any" ] || return 0
	vm_stop
	export VM_KERNEL=$k
	VM_CACHE=$legacy_cache_base/k$k
	transports=tcp
	if guest_up "boot-k$k"; then
		echo "interop: the legacy guest runs $(vm_exec uname -r)"
		case_ "legacy-auto-k$k" legacy_case tcp "$want" "'$why'"
		if [ "$full" = 1 ]; then
			gw_tr=tcp gw_sfx=-k$k
			. "$top/tests/interop/cases_gateway.sh"
		fi
	else
		rc=1
	fi
	vm_stop
	VM_CACHE=$legacy_cache_base
	unset VM_KERNEL
	echo "interop: the $k pass (boot, target, cases) took $((SECONDS - t0)) s"
}
