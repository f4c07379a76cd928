#!/bin/bash
# Case 5: the unit's hardening at run time.  A shell joins the service's
# own cgroup (so the device BPF program systemd attached for DevicePolicy=
# and DeviceAllow= applies to it) and tries to open devices: /dev/nbd*,
# /dev/fuse and the RDMA devices open, the others fail with EPERM.  The
# process has exactly CAP_SYS_ADMIN, CAP_IPC_LOCK, CAP_SYS_RESOURCE
# (PR_SET_IO_FLUSHER) and CAP_CHOWN (its control socket's group), and with
# them it
# attached /dev/nbd0 over netlink and mounted its FUSE file system.
. /opt/sysd/lib.sh
journal_mark c5
is_active || systemctl start "$U" || fail "start"
is_active || fail "not active after start"
pid=$(prop MainPID)
wait_until 120 "/dev/nbd0 attached" attached nbd0
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "/proc/$pid/status"
want=0000000001204001 # CAP_SYS_RESOURCE (24) | CAP_SYS_ADMIN (21) | CAP_IPC_LOCK (14) | CAP_CHOWN (0)
for c in CapEff CapPrm CapBnd; do
	[ "$(awk -v k="$c:" '$1 == k { print $2 }' "/proc/$pid/status")" = $want ] ||
		fail "$c is not exactly CAP_SYS_ADMIN + CAP_IPC_LOCK + CAP_SYS_RESOURCE + CAP_CHOWN"
done
# control_access.group (the guest's configuration): without CAP_CHOWN the
# control socket did not start ("Operation not permitted"), and with it
# ExecReload.
ctl=/run/nvmf-gateway/gateway.control
[ "$(stat -c '%G %a' "$ctl")" = "disk 660" ] ||
	fail "the control socket is '$(stat -c '%G %a' "$ctl" 2>&1)', not group disk, mode 660"
nvmf-gateway status > /dev/null || fail "status over the group's socket"

[ "$(awk '$1 == "NoNewPrivs:" { print $2 }' "/proc/$pid/status")" = 1 ] || fail "NoNewPrivs"
[ "$(awk '$1 == "Seccomp:" { print $2 }' "/proc/$pid/status")" = 2 ] || fail "no seccomp filter"
journal_since c5 -u "$U" | grep -q 'nbd0.*attached\|/dev/nbd0 attached' ||
	fail "no netlink attach of /dev/nbd0 by this process in the journal"

# Memory protections under the unit's own limits (issue 16): mlockall needs
# LimitMEMLOCK=infinity (or CAP_IPC_LOCK), PR_SET_IO_FLUSHER needs
# CAP_SYS_RESOURCE, and OOMScoreAdjust= sets the score before exec (as
# Nice= the priority).
rl=$(journalctl -q -u "$U" _PID="$pid" | grep -o 'reclaim: .*' | tail -n 1)
echo "this process logged: $rl"
grep -q 'reclaim: mlockall=ok io_flusher=ok' <<< "$rl" ||
	fail "the memory protections did not all take effect under the unit: '$rl'"
# Nice= sets -20 before exec, so the gateway's own setpriority of every
# thread to gateway.nice (-20) needs no CAP_SYS_NICE (issue 20).
grep -q ' nice=-20$' <<< "$rl" || fail "the priority did not take effect under the unit: '$rl'"
for t in /proc/"$pid"/task/*; do
	n=$(awk '{ sub(/.*\) /, ""); print $17 }' "$t/stat")
	[ "$n" = -20 ] || fail "thread ${t##*/} at nice $n under the unit"
done
[ "$(cat "/proc/$pid/oom_score_adj")" = -900 ] || fail "oom_score_adj is $(cat "/proc/$pid/oom_score_adj"), not -900"
lck=$(awk '$1 == "VmLck:" { print $2 }' "/proc/$pid/status")
[ "${lck:-0}" -gt 0 ] || fail "no locked memory (VmLck ${lck:-none})"
echo "memory protections hold: $rl, VmLck $lck kB"

# FUSE: mounted in the unit's own mount namespace (PrivateMounts=).
nsenter -t "$pid" -m -- ls -l /run/nvmf-gateway/fuse || fail "no FUSE mount in the unit's namespace"
f=$(nsenter -t "$pid" -m -- ls /run/nvmf-gateway/fuse | head -n 1)
nsenter -t "$pid" -m -- dd if="/run/nvmf-gateway/fuse/$f" bs=64k count=16 status=none | cmp - \
	<(dd if=/dev/nbd0 bs=64k count=16 iflag=direct status=none) || fail "FUSE file and /dev/nbd0 differ"
! grep -q /run/nvmf-gateway/fuse /proc/self/mounts || fail "the FUSE mount leaked to the host namespace"

cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
[ -e "$cg/cgroup.procs" ] || fail "no cgroup for $pid"
[ -e /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm (rdma_ucm)"
verbs=$(ls /dev/infiniband/uverbs* 2> /dev/null | head -n 1)
[ -n "$verbs" ] || fail "no /dev/infiniband/uverbs* (rxe0)"
allow="/dev/nbd0 /dev/nbd1 /dev/nbd15 /dev/fuse /dev/infiniband/rdma_cm $verbs /dev/null /dev/urandom"
deny="/dev/vda /dev/loop0 /dev/loop-control /dev/mem /dev/kmsg /dev/ttyS0 /dev/mapper/control"
for d in $deny; do [ -e "$d" ] || fail "$d does not exist to test"; done
# One shell in the unit's cgroup; it prints "DEV ok" or "DEV denied: why".
out=$(bash -c 'echo $$ > "$1/cgroup.procs" || exit 9; shift
	for d; do
		if err=$( { exec 3<> "$d"; } 2>&1 ); then echo "$d ok"; else echo "$d denied: ${err##*: }"; fi
	done' _ "$cg" $allow $deny) || fail "cannot join $cg"
echo "$out"
for d in $allow; do grep -qx "$d ok" <<< "$out" || fail "$d should open in the unit"; done
for d in $deny; do grep -qx "$d denied: Operation not permitted" <<< "$out" || fail "$d should be denied"; done
# The same opens outside the unit work: the denials are the unit's.
bash -c 'exec 3<> /dev/loop0' || fail "/dev/loop0 does not open outside the unit either"
echo "hardening holds: caps $want, devices as listed"
