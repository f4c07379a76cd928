#!/usr/bin/env bash
# The gateway's priority while it serves the kernel of its own host (issue
# 20): the kernel's own block I/O workers (nvme-tcp's io_work, nbd's
# receive worker, nvmet's) run at nice -20, and a gateway at 0 in their
# place lost a third of /dev/nbd0's 128K IOPS in the guest to preemption by
# them.  `run` with a FUSE export (so the protections apply) against the
# in-tree test target:
#  - by default the log says nice=-20 and every thread of the process,
#    reactors and the threads started after (FUSE, I/O), is at -20 after
#    fio verify over FUSE;
#  - gateway.nice = 5 puts every thread at 5;
#  - without CAP_SYS_NICE (and RLIMIT_NICE 0) -20 is refused: the log says
#    nice=failed(EACCES) with a warning naming the way out, and the gateway
#    serves on;
#  - started at -20 (the unit's Nice=) without CAP_SYS_NICE: no warning;
#  - gateway.nice = -21 is a config error naming file and line.
set -u
. "$TOP/tests/func/control/lib.sh"
need_root "FUSE, and setting a negative nice"
[ -c /dev/fuse ] || skip "no /dev/fuse (FUSE makes the gateway apply its protections)"
need fusermount3 fio setpriv
# CAP_SYS_NICE (bit 23) in this shell's effective set: the gateway started
# from it may go below 0.
cap=$(awk '$1 == "CapEff:" { print $2 }' /proc/self/status)
(((16#$cap >> 23) & 1)) || skip "no CAP_SYS_NICE here"
gpid=''
cleanup_fn stop_var gpid
target_start nqn.2014-08.org.nvmf-gateway:nice:64M
conf() { # NICE_LINE
	cat > "$tmp/gw.conf" << EOF
gateway = { reactors = 2; state_dir = "$tmp/state";
$1
};
targets = (
  { name = "t"; subnqn = "nqn.2014-08.org.nvmf-gateway:nice";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "a"; target = "t"; nsid = 1; fuse = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
EOF
}
# start [WRAPPER...]: the gateway on gw.conf, up with its reclaim line.
start() {
	: > "$tmp/gw.log"
	"$@" "$GW" run -f -c "$tmp/gw.conf" > "$tmp/gw.log" 2>&1 &
	gpid=$!
	for _ in $(seq 300); do
		[ -e "$tmp/fuse/a" ] && grep -q 'reclaim: mlockall=' "$tmp/gw.log" && break
		kill -0 "$gpid" 2> /dev/null || { cat "$tmp/gw.log"; fail "the gateway exited"; }
		sleep 0.1
	done
	[ -e "$tmp/fuse/a" ] || { cat "$tmp/gw.log"; fail "the gateway did not come up"; }
	grep 'reclaim: mlockall=' "$tmp/gw.log"
}
verify() {
	fio --name=f --filename="$tmp/fuse/a" --ioengine=io_uring --direct=1 --rw=randwrite \
		--bssplit=4k/50:128k/50 --iodepth=8 --size=16M --verify=crc32c --verify_fatal=1 \
		--verify_state_save=0 --output="$tmp/fio.out" > /dev/null 2>&1 ||
		{ cat "$tmp/fio.out"; fail "fio verify over FUSE ($1)"; }
}
# threads_at N: every thread of the gateway has nice N (stat field 19).
threads_at() {
	local t n bad=0 cnt=0
	for t in /proc/"$gpid"/task/*; do
		n=$(awk '{ sub(/.*\) /, ""); print $17 }' "$t/stat") || continue
		cnt=$((cnt + 1))
		echo "  thread ${t##*/} ($(cat "$t/comm")): nice $n"
		[ "$n" = "$1" ] || bad=1
	done
	[ "$cnt" -ge 2 ] && [ $bad = 0 ]
}
stop() { stop_var gpid; gpid=''; unmount_lazy "$tmp/fuse"; }

conf ""
start
grep -q 'reclaim: .* nice=-20$' "$tmp/gw.log" || fail "no nice=-20 in the reclaim line"
verify default
threads_at -20 || fail "not every thread at -20"
stop

conf "nice = 5;"
start
grep -q 'reclaim: .* nice=5$' "$tmp/gw.log" || fail "no nice=5 in the reclaim line"
verify "nice 5"
threads_at 5 || fail "not every thread at 5"
stop

# The test's own nice, which the gateway inherits; an RLIMIT_NICE above 0
# could let it go lower without the capability.
base=$(awk '{ sub(/.*\) /, ""); print $17 }' /proc/self/stat)
if [ "$(ulimit -e)" = 0 ] && [ "$base" -gt -20 ]; then
	conf ""
	start setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice
	grep -q 'reclaim: .* nice=failed(EACCES)$' "$tmp/gw.log" || fail "no nice=failed(EACCES) without CAP_SYS_NICE"
	grep -q 'cannot set nice -20: .*LimitNICE=' "$tmp/gw.log" || fail "no warning naming the way out"
	verify "no CAP_SYS_NICE"
	threads_at "$base" || fail "threads moved without the right to"
	stop
else
	echo "RLIMIT_NICE $(ulimit -e), nice $base: the refusal is not checked here"
fi

# Started at -20 (the unit's Nice=), still without CAP_SYS_NICE: nothing
# to change, so no warning (under the unit setpriority is refused by its
# seccomp filter: tests/systemd/guest/case5_hardening.sh).
start nice -n $((-20 - base)) setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice
grep -q 'reclaim: .* nice=-20$' "$tmp/gw.log" || fail "no nice=-20 when started there"
! grep -q 'cannot set nice' "$tmp/gw.log" || fail "a warning though every thread was at -20"
threads_at -20 || fail "not every thread at -20 when started there"
stop

conf "nice = -21;"
out=$("$GW" check -c "$tmp/gw.conf" 2>&1) && fail "nice = -21 accepted"
echo "$out"
grep -q "gw.conf:2: .*nice" <<< "$out" || fail "the error does not name the file, line and key"
echo "PASS"
