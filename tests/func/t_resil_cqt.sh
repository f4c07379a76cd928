#!/usr/bin/env bash
# Command Quiesce Time: a write in flight on a path that is lost waits the
# controller's CQT before its retry on another path, so that the old
# controller, still working on it, cannot carry it out over a newer write.
#
# Two network namespaces (root only), two veth pairs, failover multipath
# (path 0 carries the I/O); the test target reports CQT 6000 ms.  Write B
# of block X reaches the target on path 0, which holds it (the late knob:
# it takes effect 3 s after it arrived).  The gateway-side link of path 0
# goes down: the gateway gives B up on path 0 (the target never hears of
# it: the link is down) and retries it on path 1; then a newer write C of
# block X.  Asserted: B's retry waited CQT (its log line; B's own time and
# the target's port 2 counter, on the gateway's and the target's view),
# and block X holds C after the held B took effect.  Without CQT handling
# B is retried at once, C completes before the held B lands: block X holds
# B.  keep_alive_tmo 60 s: the target keeps the old controller meanwhile.
set -u
. "$TOP/tests/func/resil/lib.sh"
G=gwcq$$ T=tgcq$$
netns_two_paths "$G" "$T"

A=nqn.2026-01.io.nvmf-gateway:cqt
tgt_start a "ip netns exec $T" -a 0.0.0.0 -s 4420 -s 4421 --subsys "$A:32M"
ctl a cqt 6000 > /dev/null
gw_two_paths "$G"

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
t_arr=$(mono) # B arrived before this
ctl a late 0 > /dev/null
# The 3 s hold leaves the steps from B's arrival to the link's loss room.
kill -0 $bpid 2> /dev/null || fail "write B completed on path 0 before its link went down"
ip -n "$G" link set p1-g down
lost=$(gw_wait 'ctrl t1/path0: live -> resetting' 1 30) || fail "path 0 not reset after its link went down"
wait $bpid || fail "write B failed: $(cat "$tmp/b.out")"
io write "$tmp/e1.sock" $X 1 3 || fail "write C"
[ "$(stat_field a port2_io)" -ge $((b0 + 2)) ] || fail "B's retry and C did not go down path 1"
line=$(grep 'was in flight on path 0 when it was lost' "$tmp/gw.log" | head -1)
echo "gateway: ${line:-no CQT line}"
# The held B takes effect 3 s after it arrived (before t_arr): wait past that.
w=$(echo "$t_arr + 3.5 - $(mono)" | bc)
case "$w" in -* | 0) ;; *) sleep "$w" ;; esac
got=$(io check "$tmp/e1.sock" $X 1 3)
echo "block $X holds C: $got (1 = yes)"
[ "$got" = 1 ] || fail "block $X was overwritten by write B, held by path 0's controller"
case "$line" in
*"retried after 6.000 s (CQT 6.000 s)"*) ;;
*) fail "no log line of B's retry waiting CQT 6 s" ;;
esac
at=$(gw_at 'was in flight on path 0 when it was lost')
echo "path 0 reset -> CQT line: $(echo "($at - $lost) * 1000 / 1" | bc) ms (gateway clock)"
gw_alive
gw_stop
echo pass
