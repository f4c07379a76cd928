# mempressure.sh: the memory-pressure case of the interop suite (issue 16),
# sourced by run.sh at its end (uses case_, g, GW, logdir).  It stops the
# suite's guest and boots a smaller one (VM_MEM, 768 MiB) of its own: the
# gateway there serves /dev/nbd0 from nvmet (a loop device over a file on
# the guest's tmpfs: backing it on the 9p share made every swap write so
# slow under TCG that the run never ended); the memory pressure is a
# cgroup's (nbd_mempressure.sh says why).  The case script is
# tests/interop/nbd_mempressure.sh.  MEMPRESSURE_MODES="on off" also runs
# the gateway without its protections (development: that run may hang the
# guest until the case's limit).
vm_stop
mp_state=$(mktemp -d /tmp/nvmf-mempressure.XXXXXX) || exit 1
nqnmp=nqn.2014-08.org.nvmf-gateway:interop-mempressure
mp_boot() {
	VM_MEM=${MEMPRESSURE_VM_MEM:-768} vm_start "$mp_state" &&
		vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqnmp 1G 4096 &&
			nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_link $nqnmp 1"
}
mp_case() {
	T=${MEMPRESSURE_LIMIT:-420} g "bash tests/interop/nbd_mempressure.sh $GW $nqnmp $1"
}
mp_rc=0
for mp_mode in ${MEMPRESSURE_MODES:-on}; do
	[[ mempressure-$mp_mode =~ ${INTEROP_CASES:-.} ]] || continue
	# Each mode on a fresh guest: a hung "off" run must not leave its
	# state behind for the next.
	vm_stop
	if mp_boot > "$logdir/mempressure-boot.log" 2>&1; then
		case_ "mempressure-$mp_mode" mp_case "$mp_mode"
		[ "$(tail -1 "$logdir/mempressure-$mp_mode.log")" = PASS ] || mp_rc=1
	else
		cat "$logdir/mempressure-boot.log"
		report FAIL "mempressure-$mp_mode" "the small guest did not start"
		rc=1 mp_rc=1
	fi
	grep -h 'mempressure:' "$logdir/mempressure-$mp_mode.log" 2> /dev/null
done
vm_stop
# The guest's console stays for a failed run (hung tasks are there).
[ $mp_rc = 0 ] && rm -rf "$mp_state"
