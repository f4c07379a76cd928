#!/bin/bash
# Case 6, in two steps around one reboot of the guest (run.sh):
#   prepare  enable the pve-guests stand-in with the documented ordering
#            drop-in (systemd/vm-host-ordering.conf) and start it (it saw
#            /dev/nbd0); then the target is made unreachable (its port
#            removed) for the shutdown of this boot
#   boot     after the reboot, two checks:
#            - this boot: the gateway was active, /dev/nbd0 attached,
#              before pve-guests started;
#            - the shutdown before it, from that boot's journal (by its
#              id): pve-guests stopped (with /dev/nbd0 still there) before
#              the gateway began to stop, and the gateway stopped by itself
#              within a bound, with the target unreachable
# (Two reboots until stop 38, one for each check: each reboot of the TCG
# guest costs about a minute of make test.)
. /opt/sysd/lib.sh
G=pve-guests.service
BOUND=${SYSD_STOP_BOUND:-30}
mono() { systemctl show -p "$2" --value "$1"; }
# The boot that shuts down with the target unreachable: its id, for the
# check after the reboot (were the boot after it to die and be powered on
# again by vm.sh, "-b -1" would be that dead boot); then the target goes.
unreachable() {
	tr -d - < /proc/sys/kernel/random/boot_id > /var/lib/sysd-c6.boot || fail "boot id"
	. /opt/sysd/nvmet.sh
	for s in disk0 disk1; do nvmet_unlink nqn.2026-12.io.nvmf-gateway.sysd:$s 1 || fail "unlink $s"; done
	journal_mark c6
	wait_until 60 "the gateway saw the target go" bash -c \
		". /opt/sysd/lib.sh; journal_since c6 -u $U | grep -qiE 'live -> |reconnect|lost|disconnect|error'"
	journal_since c6 -u "$U" | tail -n 5
}
shutdown_checks() {
	local b j g_stop gw_stopping gw_stopped t_a t_b took first last
	b=$(cat /var/lib/sysd-c6.boot) && [ -n "$b" ] || fail "no boot id from the boot step"
	[ "$b" != "$(tr -d - < /proc/sys/kernel/random/boot_id)" ] || fail "this is the boot that was to shut down"
	# From the stand-in's start (the prepare step) on: that boot also
	# holds the earlier cases' stops of the gateway (watchdog, stop),
	# which are not the shutdown's.
	j=$(journalctl -b "$b" -o short-monotonic -u "$U" -u $G | sed -n '/guests: start/,$p')
	grep -E 'Stopp|guests: stop|Deactivated|timed out|Killing|SIGKILL|Failed' <<< "$j"
	num() { grep -m1 -n "$1" <<< "$j" | cut -d: -f1; }
	ts() { grep -m1 "$1" <<< "$j" | sed -E 's/^\[ *([0-9.]+)\].*/\1/'; }
	g_stop=$(num 'guests: stop') gw_stopping=$(num "Stopping $U") gw_stopped=$(num "Stopped $U")
	[ -n "$g_stop" ] && [ -n "$gw_stopping" ] && [ -n "$gw_stopped" ] ||
		fail "the previous boot's journal lacks the stop lines"
	[ "$g_stop" -lt "$gw_stopping" ] || fail "the gateway began to stop before pve-guests had"
	grep 'guests: stop' <<< "$j" | grep -qE 'nbd0 has [1-9][0-9]* sectors' ||
		fail "/dev/nbd0 was gone when pve-guests stopped"
	! grep -qE "$U.*(timed out|Killing|SIGKILL)" <<< "$j" || fail "the gateway had to be killed"
	grep -q "$U: Deactivated successfully" <<< "$j" || fail "the gateway did not exit cleanly"
	t_a=$(ts "Stopping $U") t_b=$(ts "Stopped $U")
	took=$(awk -v a="$t_a" -v b="$t_b" 'BEGIN { printf "%.1f", b - a }')
	echo "gateway stop with the target unreachable: $took s (bound $BOUND s)"
	awk -v t="$took" -v m="$BOUND" 'BEGIN { exit !(t <= m) }' || fail "stop took $took s > $BOUND s"
	# The whole shutdown, from the first unit stopping to the journal's end.
	first=$(journalctl -b "$b" -o short-monotonic | grep -m1 -E ' Stopping ' | sed -E 's/^\[ *([0-9.]+)\].*/\1/')
	last=$(journalctl -b "$b" -o short-monotonic -n 1 | sed -E 's/^\[ *([0-9.]+)\].*/\1/')
	echo "shutdown (first Stopping to the journal's last entry): $(awk -v a="$first" -v b="$last" 'BEGIN { printf "%.1f", b - a }') s"
}
case "${1:-}" in
prepare)
	mkdir -p /etc/systemd/system/$G.d &&
		cp /opt/sysd/vm-host-ordering.conf /etc/systemd/system/$G.d/nvmf-gateway.conf &&
		systemctl daemon-reload && systemctl enable "$U" "$G" || fail "enable"
	systemctl list-dependencies --after --plain $G | grep -q "$U" || fail "$G is not ordered after $U"
	# Running after the cases before this one; started if a case left it
	# stopped (SYSD_CASES subsets).
	systemctl start "$U" || fail "start $U"
	wait_until 120 "/dev/nbd0 attached" attached nbd0
	systemctl start $G || fail "start $G"
	journalctl -b 0 -u $G -o cat | grep 'guests: start' | tail -n 1
	unreachable
	;;
boot)
	s=$(systemctl is-system-running --wait)
	echo "system: $s"
	systemctl --failed --no-legend
	[ "$(systemctl show -p ActiveState --value $G)" = active ] || fail "$G is not active"
	is_active || fail "the gateway is not active"
	gw_up=$(mono "$U" ActiveEnterTimestampMonotonic)
	g_start=$(mono $G InactiveExitTimestampMonotonic)
	echo "gateway active at ${gw_up} us, pve-guests started at ${g_start} us (monotonic)"
	[ "$gw_up" -gt 0 ] && [ "$gw_up" -le "$g_start" ] || fail "pve-guests started before the gateway was ready"
	line=$(journalctl -b 0 -u $G -o cat | grep 'guests: start')
	echo "$line"
	[[ "$line" =~ nbd0\ has\ ([0-9]+)\ sectors ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] ||
		fail "/dev/nbd0 was not attached when pve-guests started"
	shutdown_checks
	;;
*) echo "usage: case6_order.sh prepare|boot" >&2; exit 2 ;;
esac
exit 0
