#!/usr/bin/env bash
# Large NBD read replies go out of a pipe (nbd/splice.c): the NVMe/TCP
# payload is spliced from the target's socket into it behind the reply
# header, then to the client.  Checked against real clients over the hop
# to the in-tree target (both reactor backends through run.sh):
#  - fio verify with 4K to 512K blocks (the target's MDTS is 128 KiB: a
#    512K read is four commands, which fill the pipe one after the other),
#    nbdcopy out and compare; the log counts the spliced replies and the
#    bytes the TCP queues spliced, and splits the reads' time in the
#    gateway into its stages;
#  - 512K reads alone on one connection: every reply spliced;
#  - a client killed in the middle of large reads: the gateway carries on
#    (SIGPIPE ignored, the pipe of the broken reply closed, not reused);
#  - NBD over TCP: reads and writes spliced from and to a TCP client, and
#    by default a client on this host gets its read replies from memory;
#  - data digest on: nothing spliced (the digest needs the bytes), still
#    exact; NVMF_GATEWAY_NO_SPLICE=1: no pipes at all.
# Large WRITE payloads go the other way: spliced from the client's socket
# into a pipe, duplicated (tee) behind the H2CData header and spliced to
# the target.  The same verify runs cover them, plus:
#  - 128 KiB writes at QD8 alone (the parser once spliced a payload while
#    its own poll for it was out, and the poll's end then found no request:
#    a crash within a second of this load);
#  - writers killed in the middle of their payloads;
#  - the target dropping every connection again and again under verified
#    writes: each retry sends the payload again from the pipe it stayed in.
set -u
. "$TOP/tests/func/control/lib.sh"
need fio nbdcopy nbdinfo prlimit

nqn=nqn.2014-08.org.nvmf-gateway:splice
tctl="$tmp/target.ctl"
T_ARGS=(--control "$tctl")
target_start "$nqn:64M"
tgt() { "$T" --ctl "$tctl" "$@" > /dev/null || fail "target control: $*"; }
conf() {
	cat > "$tmp/gw.conf" << EOF2
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "t"; subnqn = "$nqn"; nr_io_queues = 2; data_digest = $1; reconnect_delay = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "a"; target = "t"; nbd = { listen = "unix:$tmp/a.sock"; }; } );
EOF2
}
uri="nbd+unix:///a?socket=$tmp/a.sock"
verify() {
	fio --name=v --ioengine=nbd --uri="$uri" --rw=randrw --bssplit=4k/20:64k/30:128k/30:512k/20 \
		--iodepth=16 --size=48M --verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 \
		--output="$tmp/fio.txt" || { cat "$tmp/fio.txt"; fail "fio verify ($1)"; }
	head -c 16M /dev/urandom > "$tmp/in"
	nbdcopy "$tmp/in" "$uri" || fail "nbdcopy in ($1)"
	nbdcopy --request-size=131072 "$uri" "$tmp/out" || fail "nbdcopy out ($1)"
	cmp -n 16777216 "$tmp/in" "$tmp/out" || fail "read back differs ($1)"
}
# sum PATTERN: the sum of the first number after PATTERN over the log.
sum() { grep -o "$1" "$tmp/gw.log" | grep -o '[0-9]*' | awk '{s += $1} END {printf "%.0f\n", s}'; }

# Socket clients' writes go through pipes only when asked (by default
# only /dev/nbdN's do: see nbd/splice.c); the default is checked below.
export NVMF_GATEWAY_SPLICE_WRITES=all
conf false
NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
verify "pipes"
# 512K reads, four commands each: their parts arrive in order from this
# target, so every reply goes out of its pipe (a part that came early
# would put the read in the buffer: tests/unit/test_io_split.c).
# nbdcopy reads what the export holds: at least the 16 MiB written, 32
# reads, on a connection of its own (the last one opened), whose line
# counts them when it closes.  At most 8 requests in flight, so that each
# has one of the connection's 16 pipes; the in-tree target sends parts in
# order, so none may miss.
nbdcopy --connections=1 --requests=8 --request-size=524288 "$uri" "$tmp/out512" ||
	fail "nbdcopy 512K out"
cmp -n 16777216 "$tmp/in" "$tmp/out512" || fail "512K reads differ"
cid=$(grep -o 'connection from [^ ]*#[0-9]*' "$tmp/gw.log" | tail -1 | grep -o '#[0-9]*$')
for _ in $(seq 100); do grep -q "$cid: [0-9]* read replies spliced" "$tmp/gw.log" && break; sleep 0.1; done
line=$(grep "$cid: [0-9]* read replies spliced" "$tmp/gw.log")
echo "512K reads (4 commands each), connection $cid: ${line##*: }"
[[ $line =~ ([0-9]+)\ read\ replies\ spliced,\ 0\ not ]] && [ "${BASH_REMATCH[1]}" -ge 32 ] &&
	[ "${BASH_REMATCH[1]}" -le 128 ] || fail "512K reads not all spliced: ${line##*: }"
# The same connection's batching counters (issue 20's diagnostics):
# every request it read was answered but its NBD_CMD_DISC (which has no
# reply), spliced replies included (each a send of its own), in no more
# receives than requests and no more send batches than replies.
line=$(grep "$cid: [0-9]* requests in" "$tmp/gw.log")
echo "batching, connection $cid: ${line##*: }"
[[ $line =~ ([0-9]+)\ requests\ in\ ([0-9]+)\ receives,\ ([0-9]+)\ replies\ in\ ([0-9]+)\ send\ batches ]] ||
	fail "no batching line for $cid"
rq=${BASH_REMATCH[1]} rv=${BASH_REMATCH[2]} rp=${BASH_REMATCH[3]} sb=${BASH_REMATCH[4]}
[ "$rq" -ge 32 ] && [ "$rp" = $((rq - 1)) ] && [ "$rv" -ge 1 ] && [ "$rv" -le "$rq" ] &&
	[ "$sb" -ge 1 ] && [ "$sb" -le "$rp" ] || fail "batching counters do not add up: ${line##*: }"
# Where its requests spent their time in the gateway (nbd/stages.c): one
# line for its reads (at least the 32 of 512K, at most every reply), none
# for writes; every mean within its worst case, and the volume (four
# commands each, over the hop) and the send (out of a pipe) took time.
line=$(grep "$cid: [0-9]* reads, us per request" "$tmp/gw.log")
echo "stages, connection $cid: ${line#*"$cid: "}"
n=${line##*"$cid: "}
n=${n%% *}
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 32 ] && [ "$n" -le "$rp" ] || fail "stage line counts $n reads: $line"
! grep -q "$cid: [0-9]* writes, us per request" "$tmp/gw.log" || fail "a writes stage line for a reader"
awk '{ s = $0; sub(/.*gateway: /, "", s); k = split(s, f, /, /); ok = k == 4
	for (i = 1; i <= k; i++) { split(f[i], w, /[ ()]+/); if (w[2] + 0 > w[4] + 0) ok = 0
		if ((w[1] == "volume" || w[1] == "send") && w[2] + 0 <= 0) ok = 0 }
	exit !ok }' <<< "$line" || fail "stage means do not fit their worst cases: $line"
rm -f "$tmp/out512"
# kill_clients RW SIZE: three fio clients killed 0.7 s into 128 KiB I/O at
# QD32 (--thread: the job is this pid, not a child that would live on).
kill_clients() {
	local i fpid
	for i in 1 2 3; do
		fio --thread --name=k --ioengine=nbd --uri="$uri" --rw="$1" --bs=128k --iodepth=32 \
			--size="$2" --time_based --runtime=30 --output=/dev/null &
		fpid=$!
		sleep 0.7
		kill -9 "$fpid"
		wait "$fpid" 2> /dev/null
	done
}
# A client gone in the middle of 128 KiB reads: the gateway carries on.
kill_clients read 64M
kill -0 "$GW_PID" || fail "the gateway died with its client"
# Writes alone, 128 KiB at QD8, then writers killed mid-payload.
fio --name=w --ioengine=nbd --uri="$uri" --rw=randwrite --bs=128k --iodepth=8 --size=48M \
	--time_based --runtime=3 --output="$tmp/fio-w.txt" || { cat "$tmp/fio-w.txt"; fail "128K writes"; }
closed0=$(grep -c -- '-> closed' "$tmp/gw.log")
kill_clients randwrite 48M
kill -0 "$GW_PID" || fail "the gateway died with its writers"
# A dead client's writes still in the socket or in flight land when they
# land (NBD has no fencing, any server does the same): the verify starts
# once their connections have ended, or it would race with them.
for _ in $(seq 300); do
	[ "$(grep -c -- '-> closed' "$tmp/gw.log")" -ge $((closed0 + 3)) ] && break
	sleep 0.1
done
[ "$(grep -c -- '-> closed' "$tmp/gw.log")" -ge $((closed0 + 3)) ] ||
	fail "the killed writers' connections did not end within 30 s"
verify "after killed clients"
# Every connection dropped by the target, over and over, under verified
# writes: the commands in flight are sent again after the reconnect, the
# payloads from the pipes they are still in.  The verify's 512K reads (four
# commands into one pipe) meet the drops too: a read sent again starts its
# pipe afresh.
# A spliced write's buffer is never filled: a retry that sent from it
# instead of the pipe would write garbage, and the verify would see it.
requeued() { grep -c "write of 131072 bytes at [0-9]* back from path 0 .*requeued" "$tmp/gw.log"; }
# One round: 6 drops under a verified fio.  On a busy machine all 6 can
# fall outside fio's writes; the round is then run once more, so that the
# check below still needs a write in flight at a drop.
drop_round() {
	# Each drop once the path is live again, so that writes are in flight.
	( for i in $(seq 6); do
		for _ in $(seq 200); do [ "$(st '.targets[0].paths[0].state')" = live ] && break; sleep 0.1; done
		sleep 0.3
		"$T" --ctl "$tctl" drop > /dev/null || exit 1
	done ) &
	dpid=$!
	fio --name=d --ioengine=nbd --uri="$uri" --rw=randwrite --bssplit=128k/70:512k/30 --iodepth=8 --size=24M --loops=40 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 \
		--output="$tmp/fio-d.txt" || { cat "$tmp/fio-d.txt"; fail "verified writes under dropped connections"; }
	wait "$dpid" || fail "the target's drop command failed"
}
q0=$(requeued)
drop_round
[ "$(requeued)" -gt "$q0" ] || { echo "no write in flight at any drop: one more round"; drop_round; }
q1=$(requeued)
echo "writes in flight when the target dropped their connection, sent again: $((q1 - q0))"
echo "512K reads in flight then, sent again: $(grep -c "read of 524288 bytes at [0-9]* back from path 0 .*requeued" "$tmp/gw.log")"
[ "$((q1 - q0))" -gt 0 ] || fail "no write was in flight when the target dropped connections"
gw_stop
replies=$(sum '[0-9]* read replies spliced')
bytes=$(sum '[0-9]* spliced to a pipe')
writes=$(sum '[0-9]* write payloads spliced')
wbytes=$(sum 'write data [0-9]* bytes spliced')
drops=$(grep -c "fault: dropped" "$tmp/target.log")
retried=$(grep -c "target closed the connection\|receive failed\|send failed" "$tmp/gw.log")
echo "pipes: $replies read replies spliced, $bytes payload bytes spliced by the TCP queues"
echo "pipes: $writes write payloads spliced, $wbytes write bytes spliced to the target"
echo "target drops: $drops, connection losses the gateway logged: $retried"
[ "$replies" -gt 100 ] || fail "only $replies read replies went out of a pipe"
[ "$bytes" -gt $((8 << 20)) ] || fail "only $bytes bytes spliced"
[ "$writes" -gt 100 ] || fail "only $writes write payloads went through a pipe"
[ "$wbytes" -gt $((8 << 20)) ] || fail "only $wbytes write bytes spliced"
[ "$drops" -ge 6 ] || fail "the target dropped connections only $drops times"
grep -q "invariant broken" "$tmp/gw.log" && fail "an invariant broke"

# Descriptors: with a limit of 128, eight busy connections do not take
# them all for pipes (a quarter at most): a new client and the control
# socket still get in while they run.  Before the cap, 8 x 16 pipes took
# 256 descriptors and accept failed with EMFILE.
conf false
NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
prlimit --pid "$GW_PID" --nofile=128:128 || fail "prlimit"
fio --name=m --ioengine=nbd --uri="$uri" --rw=randread --bs=128k --iodepth=32 --numjobs=8 \
	--size=48M --time_based --runtime=6 --output="$tmp/fio-m.txt" &
fpid=$!
sleep 3
nbdinfo "$uri" > /dev/null || fail "a new client refused while 8 connections read"
"$GW" status -s "$ctl" > /dev/null || fail "the control socket refused while 8 connections read"
wait "$fpid" || { cat "$tmp/fio-m.txt"; fail "fio with 8 connections under a 128 descriptor limit"; }
fds=$(ls "/proc/$GW_PID/fd" | wc -l)
echo "8 connections reading under a limit of 128 descriptors: a new client and status got in ($fds open after)"
gw_stop
grep -q "Too many open files" "$tmp/gw.log" && fail "the gateway ran out of descriptors"

# NBD over TCP (the remote VM host): reads and writes, asked for, through
# pipes from and to a TCP client socket, exact (fio verify and nbdcopy).
# The client is on this host, where read replies go from memory unless
# NVMF_GATEWAY_SPLICE_READS=all (nbd/splice.c): asked for here, as a
# remote client gets them.
nport=$(free_port)
sed -i "s|listen = \"unix:$tmp/a.sock\"|listen = \"tcp:127.0.0.1:$nport\"|" "$tmp/gw.conf"
uri_unix=$uri
uri="nbd://127.0.0.1:$nport/a"
NVMF_GATEWAY_SPLICE_READS=all NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
verify "NBD over TCP"
gw_stop
replies=$(sum '[0-9]* read replies spliced')
writes=$(sum '[0-9]* write payloads spliced')
echo "NBD over TCP: $replies read replies and $writes write payloads spliced"
[ "$replies" -gt 50 ] || fail "NBD over TCP: only $replies read replies spliced"
[ "$writes" -gt 50 ] || fail "NBD over TCP: only $writes write payloads spliced"
grep -q "a TCP client on this host" "$tmp/gw.log" && fail "NVMF_GATEWAY_SPLICE_READS=all did not splice to loopback"
# By default a TCP client on this host gets its read replies from memory
# (its writes still through pipes, asked for above); exact all the same.
NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
verify "NBD over TCP, default reads"
gw_stop
replies=$(sum '[0-9]* read replies spliced')
writes=$(sum '[0-9]* write payloads spliced')
echo "NBD over TCP by default: $replies read replies and $writes write payloads spliced"
[ "$replies" = 0 ] || fail "NBD over TCP on loopback: $replies read replies spliced by default"
[ "$writes" -gt 50 ] || fail "NBD over TCP on loopback: only $writes write payloads spliced"
grep -q "nbd 127.0.0.1:[0-9]*: a TCP client on this host: read replies from memory" "$tmp/gw.log" ||
	fail "no log line says why a loopback client's reads were not spliced"
uri=$uri_unix

# Data digest: the TCP queues splice nothing; the data is still exact.
conf true
NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
verify "data digest"
gw_stop
bytes=$(sum '[0-9]* spliced to a pipe')
[ "$bytes" = 0 ] || fail "$bytes bytes spliced under a data digest"
wbytes=$(sum 'write data [0-9]* bytes spliced')
[ "$wbytes" = 0 ] || fail "$wbytes write bytes spliced under a data digest"
echo "data digest: exact, nothing spliced"

# By default a socket client's writes are not spliced; its reads are.
conf false
NVMF_GATEWAY_SPLICE_WRITES= NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
verify "default"
gw_stop
[ "$(sum 'write data [0-9]* bytes spliced')" = 0 ] || fail "a socket client's writes spliced by default"
[ "$(sum '[0-9]* read replies spliced')" -gt 0 ] || fail "no read reply spliced by default"
echo "default: a socket client's reads spliced, its writes not"

# The switch: no pipes.
conf false
NVMF_GATEWAY_NO_SPLICE=1 NVMF_GATEWAY_LOG=debug gw_start run "$tmp/gw.conf"
verify "NVMF_GATEWAY_NO_SPLICE=1"
gw_stop
grep -q "large .* go through pipes" "$tmp/gw.log" && fail "pipes with NVMF_GATEWAY_NO_SPLICE=1"
[ "$(sum '[0-9]* spliced to a pipe')" = 0 ] || fail "spliced with NVMF_GATEWAY_NO_SPLICE=1"
[ "$(sum 'write data [0-9]* bytes spliced')" = 0 ] || fail "writes spliced with NVMF_GATEWAY_NO_SPLICE=1"
echo "PASS"
