#!/usr/bin/env bash
# Two ports of one subsystem as two paths (round-robin), ANA states switched
# through the target's control socket while a verified write/read loop runs
# through the NBD export: I/O goes only down the optimized path, proven
# from the gateway's per-path counters (metrics endpoint) and from the
# target's per-port I/O counters; zero verify and I/O errors.
set -u
. "$TOP/tests/func/resil/lib.sh"
need curl

N=nqn.2026-01.io.nvmf-gateway:mpath
tgt_start a "" -s 0 -s 0 --subsys "$N:64M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
mport=$(free_port)
URL="http://127.0.0.1:$mport/metrics"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; metrics = "tcp:127.0.0.1:$mport"; };
targets = ( { name = "t1"; subnqn = "$N"; multipath = "round-robin";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"

io_of() { # io_of PATH: reads + writes the gateway counted on that path
	local r w
	r=$(metric "$URL" nvmf_gateway_path_reads_total "target=\"t1\",path=\"$1\"")
	w=$(metric "$URL" nvmf_gateway_path_writes_total "target=\"t1\",path=\"$1\"")
	[ "$r" != none ] && [ "$w" != none ] || fail "no counters for path $1 in the metrics"
	echo $((r + w))
}
wait_ana() { # wait_ana PATH STATE
	for _ in $(seq 1 100); do
		[ "$(metric "$URL" nvmf_gateway_path_ana_state \
			"target=\"t1\",path=\"$1\",ana_state=\"$2\"")" = 1 ] && return 0
		sleep 0.1
	done
	fail "path $1 never reported ANA state $2"
}
# phase NAME BUSY IDLE: with I/O running, over 2 s the gateway's path BUSY
# and the target's port BUSY+1 carried I/O, path IDLE and its port none.
phase() {
	sleep 0.5 # in-flight commands sent before the change complete
	local g0=$(io_of "$2") i0=$(io_of "$3") t0=$(stat_field a "port$(($2 + 1))_io")
	local u0=$(stat_field a "port$(($3 + 1))_io")
	sleep 2
	local g1=$(io_of "$2") i1=$(io_of "$3") t1=$(stat_field a "port$(($2 + 1))_io")
	local u1=$(stat_field a "port$(($3 + 1))_io")
	echo "$1: path $2 +$((g1 - g0)) (port +$((t1 - t0))), path $3 +$((i1 - i0)) (port +$((u1 - u0)))"
	[ $((g1 - g0)) -gt 100 ] || fail "$1: path $2 (optimized) carried no I/O"
	[ $((t1 - t0)) -gt 100 ] || fail "$1: port $(($2 + 1)) saw no I/O"
	[ $((i1 - i0)) = 0 ] || fail "$1: path $3 (inaccessible) carried $((i1 - i0)) I/Os"
	[ $((u1 - u0)) = 0 ] || fail "$1: port $(($3 + 1)) saw $((u1 - u0)) I/O commands"
}

verify_start
sleep 1
# Both optimized: round-robin uses both.
a0=$(io_of 0) b0=$(io_of 1)
sleep 1.5
a1=$(io_of 0) b1=$(io_of 1)
echo "both optimized: path 0 +$((a1 - a0)), path 1 +$((b1 - b0))"
[ $((a1 - a0)) -gt 0 ] && [ $((b1 - b0)) -gt 0 ] || fail "round-robin did not use both paths"

for round in 1 2 3; do
	ctl a ana "$N" 1 inaccessible 2 > /dev/null
	wait_ana 1 inaccessible
	ctl a ana "$N" 1 optimized 1 > /dev/null
	wait_ana 0 optimized
	phase "round $round, port 2 inaccessible" 0 1
	ctl a ana "$N" 1 optimized 2 > /dev/null
	wait_ana 1 optimized
	ctl a ana "$N" 1 inaccessible 1 > /dev/null
	wait_ana 0 inaccessible
	phase "round $round, port 1 inaccessible" 1 0
done
verify_stop_ok
gw_alive
gw_stop
echo pass
