# Shared by tests/func/t_resil_*.sh, t_live_*.sh, t_limits_*.sh and
# t_linkwatch.sh, on top of tests/lib/func.sh: the test target(s), each
# stopped by its own pid on exit, beside `SOCKS="..." gw_start run CONF`
# with a configuration the test writes.
: "${GW:?run by tests/func/run.sh}" "${TOP:?}" "${BUILD:?}"
export PATH="/usr/bin:$PATH"
# The gateway stamps its log lines with CLOCK_MONOTONIC: time bounds are
# read on its clock (gw_at), never on when a slow client saw the outcome.
export NVMF_GATEWAY_LOG_STAMP=1
NBDPY=/usr/bin/python3 # Debian's, with the libnbd bindings
TGT="$BUILD/nvmf-test-target"
IO="$TOP/tests/func/resil/io.py"
. "$TOP/tests/lib/func.sh"
tmp_dir gw-resil
declare -A TPID=()
NETNS=()
# On exit, after the gateway: the targets, then the namespaces.
cleanup_fn _netns_del_all
cleanup_fn _tgt_kill_all
_tgt_kill_all() {
	local k
	for k in "${!TPID[@]}"; do
		kill -KILL "${TPID[$k]}" 2> /dev/null && wait "${TPID[$k]}" 2> /dev/null
	done
}
_netns_del_all() {
	local ns
	for ns in "${NETNS[@]}"; do ip netns del "$ns" 2> /dev/null; done
}
_tgt_log_tails() {
	local f
	for f in "$tmp"/tgt-*.log; do [ -e "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done
	return 0
}
fail_show _tgt_log_tails

[ -x "$TGT" ] || fail "$TGT not built"
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

# tgt_start NAME PREFIX ARGS...: a test target named NAME (its control
# socket $tmp/NAME.ctl, log $tmp/tgt-NAME.log), run under PREFIX (e.g.
# "ip netns exec X", or "" ), on the ports ARGS give with -s.
tgt_start() {
	local name=$1 prefix=$2
	shift 2
	rm -f "$tmp/$name.ready"
	$prefix "$TGT" --control "$tmp/$name.ctl" --ready-file "$tmp/$name.ready" "$@" \
		>> "$tmp/tgt-$name.log" 2>&1 &
	TPID[$name]=$!
	for _ in $(seq 1 200); do
		[ -s "$tmp/$name.ready" ] && return 0
		kill -0 "${TPID[$name]}" 2> /dev/null || fail "target $name exited at start"
		sleep 0.05
	done
	fail "target $name did not start"
}

tgt_kill9() {
	kill -KILL "${TPID[$1]}" 2> /dev/null
	wait "${TPID[$1]}" 2> /dev/null
	unset "TPID[$1]"
}

# ctl NAME COMMAND...: one control command; the test fails unless "ok".
ctl() {
	local name=$1 out
	shift
	out=$("$TGT" --ctl "$tmp/$name.ctl" "$@") || fail "control $name '$*': $out"
	printf '%s\n' "$out"
}

# stat_field NAME KEY: a key=value of the target's stats.
stat_field() {
	ctl "$1" stats | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# metric URL NAME LABELS: one sample's value from the metrics endpoint
# (labels in exposition order, e.g. 'target="t1",path="0"').
metric() {
	curl -fsS "$1" | awk -v k="$2{$3}" '$1 == k { print $2; f=1 } END { if (!f) print "none" }'
}

# buffers FIELD: the buffer budget's FIELD (used_bytes, limit_bytes, ...)
# from `status -o json` on $tmp/gw.control.
buffers() {
	"$GW" status -s "$tmp/gw.control" -o json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["buffers"][sys.argv[1]])' "$1"
}

# mono: this host's CLOCK_MONOTONIC, the clock of the gateway's stamps.
mono() { "$NBDPY" -c 'import time; print("%.3f" % time.monotonic())'; }
# gw_at PATTERN [N]: the stamp of the Nth (default first) gateway log line
# matching PATTERN; empty when there is none yet.
gw_at() {
	grep -- "$1" "$tmp/gw.log" | sed -n "${2:-1}{s/^nvmf-gateway: \[\([0-9.]*\)\].*/\1/p;q}"
}
# gw_wait PATTERN N SECONDS: waits (generously, by the client's clock) for
# the Nth such line and prints its stamp.
gw_wait() {
	local at end=$((SECONDS + $3))
	while :; do
		at=$(gw_at "$1" "$2")
		[ -n "$at" ] && { echo "$at"; return 0; }
		[ $SECONDS -lt $end ] || return 1
		sleep 0.1
	done
}

# lose_port_time_error PATTERN: with a reader waiting for its first error
# on $tmp/e1.sock, target a's port 1 goes down; sets err (the errno name
# the reader got, within a generous 60 s) and took: the seconds from the
# gateway's "lost" line to its first line matching PATTERN (the behaviour
# under test), both stamped by the gateway.
lose_port_time_error() {
	local fe lost at
	"$NBDPY" "$IO" first-error "$tmp/e1.sock" > "$tmp/e1.out" &
	fe=$!
	sleep 1
	ctl a port 1 down
	lost=$(gw_wait 't1/path0: lost' 1 30) || fail "the gateway did not see the loss within 30 s"
	at=$(gw_wait "$1" 1 60) || fail "no '$1' within 60 s of the loss"
	wait "$fe" || fail "no error on e1 within 60 s"
	read -r _ err _ < "$tmp/e1.out"
	took=$(echo "$at - $lost" | bc -l)
	echo "e1: $err; the gateway: '$1' $took s after it saw the loss"
}

# verify_start: a verified write/read loop on $tmp/e1.sock in the background
# until verify_stop_ok, which ends it and fails the test on any error it saw
# (or until the test exits: a failed test does not leave it running).
verify_start() {
	"$NBDPY" "$IO" verify "$tmp/e1.sock" 600 "$tmp/stop" > "$tmp/verify.out" 2> "$tmp/verify.err" &
	vpid=$!
	cleanup_fn stop_var vpid 2
}
verify_stop_ok() {
	local vst
	touch "$tmp/stop"
	wait "$vpid"
	vst=$?
	cat "$tmp/verify.out" "$tmp/verify.err"
	[ "$vst" = 0 ] || fail "the verify loop saw errors"
}

# netns_two_paths G T: network namespaces G (the gateway's) and T (the
# target's), removed on exit, joined by two veth pairs: p1-g 10.201.1.1 -
# p1-t 10.201.1.2 and p2-g 10.201.2.1 - p2-t 10.201.2.2, all up, lo up in
# both.  Skips when this host cannot create namespaces.
netns_two_paths() {
	local g=$1 t=$2 i
	need_root "network namespaces"
	need ip
	ip netns add "$g" 2> /dev/null || skip "cannot create a network namespace here"
	NETNS+=("$g")
	ip netns add "$t" || fail "netns"
	NETNS+=("$t")
	for i in 1 2; do
		ip link add "p$i-g" netns "$g" type veth peer name "p$i-t" netns "$t" || fail "veth"
		ip -n "$g" addr add "10.201.$i.1/24" dev "p$i-g"
		ip -n "$t" addr add "10.201.$i.2/24" dev "p$i-t"
		ip -n "$g" link set "p$i-g" up
		ip -n "$t" link set "p$i-t" up
	done
	ip -n "$g" link set lo up
	ip -n "$t" link set lo up
}

# gw_two_paths G [TARGET OPTIONS]: the daemon in namespace G (netns_two_paths)
# with one failover target $A over both paths (ports 4420 and 4421 of
# 10.201.1.2 and 10.201.2.2), keep-alive 60 s so the target keeps an old
# controller for the whole test, and export e1 on $tmp/e1.sock.
gw_two_paths() {
	cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; log_level = "info"; };
targets = ( { name = "t1"; subnqn = "$A"; multipath = "failover";
    paths = ( { transport = "tcp"; traddr = "10.201.1.2"; trsvcid = "4420"; },
              { transport = "tcp"; traddr = "10.201.2.2"; trsvcid = "4421"; } );
    keep_alive_tmo = 60; reconnect_delay = 5; ctrl_loss_tmo = 60; ${2:-} } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
	SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf" "ip netns exec $1"
}

# io ARGS: tests/func/resil/io.py with the libnbd python.
io() { "$NBDPY" "$IO" "$@"; }

# wait_stat KEY VALUE: up to 10 s until target a's counter KEY reaches VALUE.
wait_stat() {
	for _ in $(seq 1 200); do
		[ "$(stat_field a "$1")" -ge "$2" ] && return 0
		sleep 0.05
	done
	return 1
}
