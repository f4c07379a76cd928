#!/usr/bin/env bash
# A drain (SIGTERM here) that begins while a write waits the controller's
# Command Quiesce Time before its retry ends that wait at the drain's
# deadline (5 s), not at the end of CQT.  As t_resil_cqt (two namespaces,
# failover, write B held by path 0's controller, path 0's link down), with
# CQT 30 s; fast_io_fail_tmo 20 s, B's wait budget, cuts that wait to
# 20 s (checked in its log line); SIGTERM once the gateway logged B's CQT
# wait.  Asserted, on the gateway's log stamps: it stops within 15 s of the
# signal (the drain's 5 s and its once-a-second check, with room), not
# after CQT; B completes (its retry on path 1 at the drain's deadline) and
# the exit status is 0.
set -u
. "$TOP/tests/func/resil/lib.sh"
G=gwcd$$ T=tgcd$$
netns_two_paths "$G" "$T"

A=nqn.2026-01.io.nvmf-gateway:cqtdrain
tgt_start a "ip netns exec $T" -a 0.0.0.0 -s 4420 -s 4421 --subsys "$A:32M"
ctl a cqt 30000 > /dev/null
gw_two_paths "$G" "fast_io_fail_tmo = 20;"

X=77

a0=$(stat_field a port1_io)
io write "$tmp/e1.sock" $X 1 1 || fail "write A"
[ "$(stat_field a port1_io)" -gt "$a0" ] || fail "write A did not go down path 0"

# B arrives on path 0 and is held there; later commands are not held.
ctl a late 3000 > /dev/null
a0=$(stat_field a port1_io)
b0=$(stat_field a port2_io)
io write "$tmp/e1.sock" $X 1 2 > "$tmp/b.out" 2>&1 &
bpid=$!
wait_stat port1_io $((a0 + 1)) || fail "write B did not reach the target on path 0"
ctl a late 0 > /dev/null
# The 3 s hold leaves the steps from B's arrival to the link's loss room.
kill -0 $bpid 2> /dev/null || fail "write B completed on path 0 before its link went down"
ip -n "$G" link set p1-g down
gw_wait 'ctrl t1/path0: live -> resetting' 1 30 > /dev/null || fail "path 0 not reset after its link went down"
gw_wait 'was in flight on path 0 when it was lost' 1 30 > /dev/null ||
	fail "no log line of B's CQT wait"
line=$(grep 'was in flight on path 0 when it was lost' "$tmp/gw.log" | head -1)
echo "gateway: $line"
case "$line" in
*"retried after 20.000 s (CQT 30.000 s)"*) ;;
*) fail "B's CQT wait not cut to its wait budget (fast_io_fail_tmo 20 s)" ;;
esac
gw_alive
gw_stop
wait $bpid || fail "write B failed: $(cat "$tmp/b.out")"
t0=$(gw_at 'signal 15: stopping')
t1=$(gw_at 'stopping -> shutdown')
[ -n "$t0" ] && [ -n "$t1" ] || fail "no stop lines in the log"
took=$(echo "($t1 - $t0) * 1000 / 1" | bc)
echo "SIGTERM -> shutdown: $took ms (gateway clock; CQT 30 s, drain 5 s)"
[ "$took" -lt 15000 ] || fail "the stop waited for B's CQT, not the drain's deadline"
echo pass
