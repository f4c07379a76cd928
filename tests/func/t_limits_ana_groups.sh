#!/usr/bin/env bash
# A volume whose ANA group comes after the first 16 the gateway saw (issue
# 14, defect 6): 20 namespaces, each in its own group (the target puts
# nsid N in group N), two ports; nsid 20 is inaccessible on port 1 and
# optimized on port 2.  With round-robin and a verified write/read loop on
# the export of nsid 20, no I/O may go to path 0: counted by the gateway's
# per-path counters and by the target's port 1 I/O counter.
set -u
. "$TOP/tests/func/resil/lib.sh"
need curl

N=nqn.2026-01.io.nvmf-gateway:groups
tgt_start a "" -s 0 -s 0 --subsys "$N:8M:512:20"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
ctl a ana "$N" 20 inaccessible 1 > /dev/null
mport=$(free_port)
URL="http://127.0.0.1:$mport/metrics"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; metrics = "tcp:127.0.0.1:$mport"; };
targets = ( { name = "t1"; subnqn = "$N"; multipath = "round-robin";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "t1"; nsid = 20; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"

io_of() { # io_of PATH: reads + writes + errors the gateway counted on that path
	local r w e
	r=$(metric "$URL" nvmf_gateway_path_reads_total "target=\"t1\",path=\"$1\"")
	w=$(metric "$URL" nvmf_gateway_path_writes_total "target=\"t1\",path=\"$1\"")
	e=$(metric "$URL" nvmf_gateway_path_errors_total "target=\"t1\",path=\"$1\"")
	[ "$r" != none ] && [ "$w" != none ] && [ "$e" != none ] ||
		fail "no counters for path $1 in the metrics"
	echo $((r + w + e))
}

u0=$(stat_field a port1_io) t0=$(stat_field a port2_io)
verify_start
sleep 3
verify_stop_ok
a=$(io_of 0) b=$(io_of 1)
u1=$(stat_field a port1_io) t1=$(stat_field a port2_io)
echo "nsid 20 (group 20): path 0 (inaccessible) $a, path 1 (optimized) $b;" \
	"target port 1 +$((u1 - u0)), port 2 +$((t1 - t0))"
[ "$b" -gt 100 ] || fail "path 1 (optimized) carried only $b I/Os"
[ $((t1 - t0)) -gt 100 ] || fail "port 2 saw only $((t1 - t0)) I/O commands"
[ "$a" = 0 ] || fail "path 0 (inaccessible for group 20) carried $a I/Os"
[ $((u1 - u0)) = 0 ] || fail "port 1 saw $((u1 - u0)) I/O commands for an inaccessible group"
gw_alive
gw_stop
echo pass
