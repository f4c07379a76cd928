#!/usr/bin/env bash
# run.sh BUILD: the service under a real systemd (issue 15).  Builds the
# guest image (image.sh: Debian 12 root from debootstrap, cached; the
# interop suite's 6.12 kernel; the gateway installed), boots it with
# systemd as PID 1 and nvmet in the same guest, and runs the cases of
# guest/case*.sh.  One result line per case in BUILD/results/systemd.res;
# logs in BUILD/systemd-vm/logs/.
# Env: SYSD_DEB=FILE.deb installs the package instead of `make install`;
#   SYSD_STATE (default BUILD/systemd-vm) the guest's folder; SYSD_CASES;
#   SYSD_CACHE, VM_CACHE, SYSD_BOOT_TIMEOUT (see image.sh, vm.sh);
#   SYSD_SIMULATE_INT3=1 (below).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD}" && pwd) || exit 1
. "$top/tests/lib/report.sh"
. "$here/vm.sh"
report_init "$build" systemd
st=${SYSD_STATE:-$build/systemd-vm}
logs=$st/logs
rm -rf "$logs" && mkdir -p "$logs"
CASES=(start reload watchdog stop hardening reboot_order)
# SYSD_CASES="reload watchdog": only those (the others are reported SKIP),
# and always start: it writes the configuration that every later case runs
# on (reboot_order alone failed "pve-guests.service is not active").
want() { [ -z "${SYSD_CASES:-}" ] || [ "$1" = start ] || [[ " $SYSD_CASES " == *" $1 "* ]]; }
t_all=$SECONDS
stamp() { echo "[$(date -u +%T) +$((SECONDS - t_all)) s] $*"; }

fail_rest() { # fail_rest WHY: every case not yet reported fails
	local c
	for c in "${CASES[@]}"; do
		grep -q "^[A-Z]* $c\b" "$RESULTS/systemd.res" || report FAIL "$c" "$1"
	done
}
cleanup() { vm_stop 2> /dev/null; }
trap cleanup EXIT

stamp "image"
if ! "$here/image.sh" "$build" "$st" > "$logs/image.log" 2>&1; then
	cat "$logs/image.log"
	fail_rest "no guest image (see $logs/image.log)"
	exit 1
fi
cat "$logs/image.log"
stamp "boot"
cd / # vm_exec runs in the caller's cwd when the guest has it
if ! sysd_start "$st" > "$logs/boot.log" 2>&1; then
	cat "$logs/boot.log"
	# The reason on every result line: sysd's own, up to "; console tail".
	why=$(grep -m1 -a '^sysd: ' "$logs/boot.log" | sed 's/^sysd: //; s/; console tail:.*//' | cut -c1-300)
	fail_rest "${why:-the guest did not boot} (see $st/console.log)"
	exit 1
fi
stamp "booted: $(VM_EXEC_TIMEOUT=300 vm_exec 'systemctl is-system-running --wait; systemctl --failed --no-legend; ps -p 1 -o comm=' | tr '\n' ' ')"

# gcase NAME SCRIPT [ARGS]: one guest script, its output in logs/NAME.log.
gcase() {
	local name=$1 rc
	shift
	VM_EXEC_TIMEOUT=600 vm_exec "/opt/sysd/$*" > "$logs/$name.log" 2>&1
	rc=$?
	return $rc
}
# A guest that no longer answers fails every case left at once, with the
# console's last lines, instead of each case waiting for its own limit.
guest_lost() {
	echo "the guest stopped answering during $1; console tail:"
	sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$st/console.log" | tr '\r' '\n' |
		grep -av 'Job .* running (' | grep -av '^ *$' | tail -n 30
	fail_rest "the guest stopped answering during $1 (see $st/console.log)"
	exit 1
}
run_case() { # run_case NAME SCRIPT [ARGS]
	local name=$1 t0=$SECONDS rc
	want "$name" || { report SKIP "$name" "not in SYSD_CASES"; return; }
	gcase "$@"
	rc=$?
	if [ $rc = 0 ]; then
		report PASS "$name" "$((SECONDS - t0)) s"
	else
		report FAIL "$name" "see $logs/$name.log"
		tail -n 15 "$logs/$name.log"
		[ $rc != 255 ] || guest_lost "$name"
	fi
}

run_case start case1_start.sh
run_case reload case2_reload.sh
run_case watchdog case3_watchdog.sh
run_case stop case4_stop.sh
run_case hardening case5_hardening.sh

t0=$SECONDS
ok=1
want reboot_order || { report SKIP reboot_order "not in SYSD_CASES"; ok=2; }
[ $ok = 2 ] || gcase reboot_order.prepare case6_order.sh prepare || ok=0
if [ $ok = 1 ]; then
	stamp "reboot (target unreachable)"
	t_rb=$SECONDS
	# SYSD_SIMULATE_INT3=1 (a check of the harness, not in make test): the
	# boot after this reboot "dies of an int3 Oops" once its journal is on
	# disk, so that vm.sh powers it on again and the boot step must find
	# the boot it checks by id, not as "-b -1" (the dead boot).
	if [ "${SYSD_SIMULATE_INT3:-}" = 1 ]; then
		(
			n=$(ls "$st"/console.*.log 2> /dev/null | wc -l) t=0
			# Bounded: a reboot that fails leaves nothing to kill.
			until [ "$(ls "$st"/console.*.log 2> /dev/null | wc -l)" -gt "$n" ] &&
				grep -qa 'flush runtime journal' "$st/console.log" 2> /dev/null; do
				sleep 0.2
				t=$((t + 1))
				[ $t -lt 3000 ] || exit 0
			done
			sleep 2
			# Stopped first: qemu writes the console at its own offset
			# and would overwrite what is appended while it runs.
			q=$(_vm_pid)
			kill -STOP "$q"
			echo "[ simulated ] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI (SYSD_SIMULATE_INT3)" >> "$st/console.log"
			echo "[ simulated ] Kernel panic - not syncing: Fatal exception (SYSD_SIMULATE_INT3)" >> "$st/console.log"
			kill -KILL "$q"
		) &
	fi
	if sysd_reboot >> "$logs/boot.log" 2>&1; then
		echo "reboot: $((SECONDS - t_rb)) s of wall time until the agent answered"
		gcase reboot_order.boot case6_order.sh boot || ok=0
	else ok=0; fi
fi
for f in prepare boot; do
	[ ! -e "$logs/reboot_order.$f.log" ] || { echo "== $f"; cat "$logs/reboot_order.$f.log"; }
done > "$logs/reboot_order.log"
# What the host saw of the reboots (a boot that failed says why there).
{ echo "== reboots (boot.log)"; grep -aE '^(sysd|vm): ' "$logs/boot.log"; } >> "$logs/reboot_order.log"
if [ $ok = 2 ]; then :
elif [ $ok = 1 ]; then
	report PASS reboot_order "$((SECONDS - t0)) s; $(grep -h 'target unreachable:' "$logs/reboot_order.log")$(grep -qa 'powering on once more' "$logs/boot.log" && echo "; a boot was powered on again after an emulator int3 Oops")"
else
	report FAIL reboot_order "see $logs/reboot_order.log and $st/console.log"
	sed '/^== reboots/,$d' "$logs/reboot_order.log" | tail -n 15
	# A reboot that failed: the host's reason and the console's tail.
	grep -aE '^(sysd|vm): ' "$logs/boot.log"
	! grep -qa '^sysd: .*console tail:' "$logs/boot.log" ||
		sed -n '/^sysd: .*console tail:/,$p' "$logs/boot.log" | tail -n 30
fi
stamp "done"
vm_stop
trap - EXIT
! report_failed
