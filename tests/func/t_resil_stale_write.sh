#!/usr/bin/env bash
# A write failed over to another path must not land later, over a newer
# write, from the send queue of the path's old connection (63b48cf).
#
# Two network namespaces (root only), two veth pairs, failover multipath:
# path 0 carries the I/O.  Path 0's delivery is held without the gateway
# seeing it (the target's address is taken off its veth: the gateway's
# packets go nowhere, its link stays up), so write B of block X stays in
# the gateway's TCP send queue (checked with ss).  Then the gateway-side
# link goes down: the link watch resets path 0 and B is retried on path 1
# and completes; a newer write C of block X completes on path 1.  Then the
# address and the link come back.  A graceful close would have left B's
# capsule (4 KiB, in-capsule data) queued on the old connection, sent with
# the next retransmission to the target's old I/O queue: block X would hold
# B.  Asserted: the old connection is gone (not lingering with unsent
# bytes), and once no old socket holds unsent bytes block X holds C.
# keep_alive_tmo is 60 s so that the target keeps the old controller (and
# would execute a late capsule) for the whole test.
set -u
. "$TOP/tests/func/resil/lib.sh"
need ss
G=gwsw$$ T=tgsw$$
netns_two_paths "$G" "$T"

A=nqn.2026-01.io.nvmf-gateway:stalewrite
tgt_start a "ip netns exec $T" -a 0.0.0.0 -s 4420 -s 4421 --subsys "$A:32M"
gw_two_paths "$G"

X=77
# unsent_ports: the local ports of the gateway's connections to path 0
# with bytes in their send queue (any state: an orphan too).
unsent_ports() {
	ip netns exec "$G" ss -tnaH dst 10.201.1.2 dport = :4420 |
		awk -v min="${1:-1}" '$3 >= min { n = split($4, a, ":"); print a[n] }'
}
# wait_sent PORTS: until none of PORTS holds unsent bytes (60 s at most).
wait_sent() {
	local p
	for _ in $(seq 1 600); do
		still=''
		for p in $(unsent_ports); do
			case " $1 " in *" $p "*) still="$still $p" ;; esac
		done
		[ -z "$still" ] && return 0
		sleep 0.1
	done
	return 1
}

a0=$(stat_field a port1_io)
io write "$tmp/e1.sock" $X 1 1 || fail "write A"
a1=$(stat_field a port1_io)
[ $((a1 - a0)) -ge 1 ] || fail "write A did not go down path 0"

# Hold path 0: the gateway's segments reach a namespace without the address.
ip -n "$T" addr del 10.201.1.2/24 dev p1-t
io write "$tmp/e1.sock" $X 1 2 > "$tmp/b.out" 2>&1 &
bpid=$!
old=''
for _ in $(seq 1 100); do
	old=$(unsent_ports)
	[ -n "$old" ] && break
	sleep 0.1
done
[ -n "$old" ] || fail "write B never waited in path 0's send queue"
old=$(echo $old)
others=$(unsent_ports 0 | grep -vxF -e "${old// /$'\n'}" | tr '\n' ' ')
echo "write B unsent on path 0, local port(s) $old; path 0's other connection(s): $others"
ip netns exec "$G" ss -tnai dst 10.201.1.2 dport = :4420
kill -0 $bpid 2> /dev/null || fail "write B completed although path 0 was held"

n=$(grep -c 'ctrl t1/path0: live -> resetting' "$tmp/gw.log")
t0=$(mono)
ip -n "$G" link set p1-g down
at=$(gw_wait 'ctrl t1/path0: live -> resetting' $((n + 1)) 30) ||
	fail "path 0 not reset after its link went down"
echo "link down -> path 0 resetting: $(echo "($at - $t0) * 1000 / 1" | bc) ms (gateway clock)"
wait $bpid || fail "write B failed: $(cat "$tmp/b.out")"
b0=$(stat_field a port2_io)
io write "$tmp/e1.sock" $X 1 3 || fail "write C"
b1=$(stat_field a port2_io)
[ $((b1 - b0)) -ge 1 ] || fail "write C did not go down path 1"
[ "$(io check "$tmp/e1.sock" $X 1 3)" = 1 ] || fail "block $X does not hold C before the link comes back"

# What became of the connection that held B: still there with unsent bytes
# (an orphan in FIN-WAIT-1) means B goes out once the link is back.
echo "after the failover:"
ip netns exec "$G" ss -tnai dst 10.201.1.2 dport = :4420
left=$(unsent_ports)

# The other old connections (the admin queue: its FIN) stay held until the
# one of write B has sent what it holds: the test target drops a
# controller's I/O queues with its admin queue, so that FIN arriving first
# would hide a late write (the Linux target keeps them until its KATO).
for p in $others; do
	ip -n "$G" rule add ipproto tcp sport "$p" dport 4420 blackhole || fail "ip rule"
done
ip -n "$T" addr add 10.201.1.2/24 dev p1-t
ip -n "$G" link set p1-g up
# Until no connection of before holds unsent bytes: the fixed gateway has
# none; an orphan delivers them at its next retransmission.
wait_sent "$old" || fail "old connection(s)$still still hold unsent bytes after 60 s"
for p in $others; do ip -n "$G" rule del ipproto tcp sport "$p" dport 4420 blackhole; done
wait_sent "$others" || fail "old connection(s)$still still hold unsent bytes after 60 s"
sleep 0.5
got=$(io check "$tmp/e1.sock" $X 1 3)
echo "block $X holds C: $got (1 = yes); the target's log:"
grep -i 'closed\|reset' "$tmp/tgt-a.log" | tail -5
[ "$got" = 1 ] || fail "block $X was overwritten by the failed-over write B from path 0's old connection"
[ -z "$left" ] || fail "path 0's old connection lingered with unsent bytes (local port(s) $left)"
gw_alive
gw_stop
echo pass
