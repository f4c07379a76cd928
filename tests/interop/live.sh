#!/usr/bin/env bash
# live.sh GW TR CASE (in the guest): issue 14's liveness cases against the
# kernel target (nvmet) over TR (tcp|rdma), through `nvmf-gateway run` in
# the guest.  A subsystem of its own on a port of its own (tcp 33, rdma 43,
# trsvcid 4433) so that the other cases' ports are never touched.  CASE:
#   change        the port's ANA group goes to `change` for 4 s (less than
#                 nvmet's ANATT, 10 s) twice, under fio verify on /dev/nbdN
#                 and the FUSE file: I/O waits and resumes, zero errors, the
#                 gateway logs the transition and its end
#   inaccessible  fast_io_fail_tmo 3, the only path inaccessible: a reader
#                 gets EIO, the gateway's own log says after 3 s (2.9 to 8
#                 accepted: its clock, not the slow guest's client); back to
#                 optimized, reads succeed again within 10 s
#   ns-disable    a subsystem of its own with two namespaces (port tcp 34 /
#                 rdma 44, trsvcid 4434), exported as e1 and e2 (NBD
#                 sockets, one reactor so both share one view of the path,
#                 fast_io_fail_tmo 6).  Under verified I/O on both,
#                 namespaces/2/enable = 0 for 2 s, then for 12 s.  nvmet
#                 (6.10 and later) answers a disabled namespace with
#                 Internal Path Error, no DNR: the gateway puts the path
#                 aside and waits (the only path) up to fast_io_fail_tmo.
#                 So: no e2 command hangs (60 s client deadline); the 2 s
#                 window ends in success, the 12 s one in EIO after 6 s
#                 (5.9 to 10 on the gateway's clock); e2 works again after
#                 each enable; e1 zero errors throughout and keeps at least
#                 a third of its rate while e2 waits (the path is put aside
#                 for namespace 2 only); `status` answers while disabled;
#                 SIGTERM ends the daemon within 10 s.  (An older nvmet's
#                 Invalid Namespace with DNR: ENXIO at once, also accepted.)
set -u
GW=${1:?usage: live.sh GW TR CASE} tr=${2:?} kase=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
IO="$here/../func/resil/io.py"
PY=/usr/bin/python3
nqn=nqn.2014-08.org.nvmf-gateway:interop-live
case $tr in tcp) pa=33 ;; rdma) pa=43 ;; *) echo "transport $tr?"; exit 2 ;; esac
W=/tmp/live-$tr-$kase
rm -rf "$W" && mkdir -p "$W" && cd "$W" || exit 1
export NVMF_GATEWAY_LOG=info NVMF_GATEWAY_STATE_DIR=/tmp/gw-state
GP=
fail() {
	echo "FAIL: $*"
	echo "--- gateway log"; grep -v '^ *$' "$W/gw.log" 2> /dev/null | tail -60
	exit 1
}
ana() { printf '%s' "$2" > "$NVMET/ports/$1/ana_groups/1/ana_state"; }
cleanup() {
	[ -z "${stop:-}" ] || touch "$stop" # ns-disable's clients end
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	ana "$pa" optimized
	[ ! -e "$NVMET/subsystems/$dnqn/namespaces/2/enable" ] ||
		printf 1 > "$NVMET/subsystems/$dnqn/namespaces/2/enable"
}
dnqn=nqn.2014-08.org.nvmf-gateway:interop-nsdis
trap cleanup EXIT

[ -d "$NVMET/subsystems/$nqn" ] || nvmet_subsys "$nqn" 64M 512 || exit 1
[ -d "$NVMET/ports/$pa" ] || nvmet_port "$pa" "$tr" 10.0.2.15 4433 || exit 1
[ -e "$NVMET/ports/$pa/subsystems/$nqn" ] || nvmet_link "$nqn" "$pa" || exit 1
ana "$pa" optimized || exit 1

# gw_up TARGET_OPTS: the daemon, one path, export e1 on $W/e1.sock, on
# /dev/nbdN ($DEV) and as the FUSE file $FUSEF.
gw_up() {
	mkdir -p "$W/fuse"
	cat > "$W/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; };
targets = ( { name = "t1"; subnqn = "$nqn"; $1
    paths = ( { transport = "$tr"; traddr = "10.0.2.15"; trsvcid = "4433"; } ); } );
exports = ( { name = "e1"; target = "t1"; nsid = 1;
    nbd = { listen = "unix:$W/e1.sock"; device = "auto"; }; fuse = true; } );
fuse = { mountpoint = "$W/fuse"; };
CONF
	"$GW" check -c "$W/gw.conf" || fail "config"
	"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
	GP=$!
	for _ in $(seq 300); do
		[ -S "$W/e1.sock" ] && grep -q 'attached as /dev/nbd' "$W/gw.log" && break
		kill -0 "$GP" 2> /dev/null || fail "gateway exited"
		sleep 0.2
	done
	DEV=$(grep -o 'attached as /dev/nbd[0-9]*' "$W/gw.log" | grep -o '/dev/nbd[0-9]*' | head -1)
	[ -b "$DEV" ] || fail "no /dev/nbdN"
	for _ in $(seq 100); do [ -f "$W/fuse/e1" ] && break; sleep 0.1; done
	[ -f "$W/fuse/e1" ] || fail "no FUSE file"
	FUSEF=$W/fuse/e1
}
fio_check() { # fio_check PID OUTPUT WHAT
	wait "$1"
	local r=$?
	grep -E 'err=|verify' "$2"
	[ $r = 0 ] && grep -q 'err= 0' "$2" || fail "fio on the $3: exit $r"
	! grep -qi 'verify.*fail\|bad magic\|crc32c: verify' "$2" || fail "verify errors on the $3"
}

case $kase in
change)
	gw_up "reconnect_delay = 2; fast_io_fail_tmo = 5;"
	fio --name=live --filename="$DEV" --direct=1 --ioengine=libaio --rw=randwrite --bs=4k \
		--iodepth=8 --size=24M --time_based --runtime=40 --verify=crc32c --verify_backlog=64 \
		--verify_fatal=1 --verify_state_save=0 --output="$W/fio.txt" &
	FP=$!
	fio --name=live-fuse --filename="$FUSEF" --direct=1 --ioengine=io_uring --rw=randwrite \
		--bs=4k --iodepth=4 --offset=32M --size=24M --time_based --runtime=40 \
		--verify=crc32c --verify_backlog=64 --verify_fatal=1 --verify_state_save=0 \
		--output="$W/fio-fuse.txt" &
	FFP=$!
	sleep 5
	for i in 1 2; do
		ana "$pa" change
		sleep 4
		ana "$pa" optimized
		echo "round $i: 4 s in the change state, back to optimized"
		sleep 6
	done
	fio_check "$FP" "$W/fio.txt" "NBD device"
	fio_check "$FFP" "$W/fio-fuse.txt" "FUSE file"
	grep -q 'ANA transition; waiting up to ANATT' "$W/gw.log" || fail "the transition was not seen"
	grep 'ANA transition over after' "$W/gw.log" || fail "the end of the transition was not seen"
	! grep -q 'failed with EIO' "$W/gw.log" || fail "an I/O failed during the transition"
	;;
inaccessible)
	gw_up "reconnect_delay = 2; fast_io_fail_tmo = 3;"
	"$PY" "$IO" first-error "$W/e1.sock" > "$W/e1.out" &
	fe=$!
	sleep 1
	ana "$pa" inaccessible
	wait "$fe" || fail "no error on e1 within 60 s"
	read -r _ err _ < "$W/e1.out"
	[ "$err" = EIO ] || fail "want EIO, got $err"
	line=$(grep -m1 'failed with EIO after waiting' "$W/gw.log") || fail "the deadline was not logged"
	echo "gateway: $line"
	waited=$(echo "$line" | sed -n 's/.*after waiting \([0-9.]*\) s.*/\1/p')
	echo "$waited >= 2.9 && $waited <= 8" | bc -l | grep -q 1 ||
		fail "EIO after $waited s of the gateway's clock, want about 3"
	ana "$pa" optimized
	"$PY" "$IO" until-ok "$W/e1.sock" 10 || fail "no recovery within 10 s of optimized"
	kill -TERM "$GP"
	wait "$GP" || fail "gateway exit status after SIGTERM"
	GP=
	;;
ns-disable)
	# The gateway's log stamps are CLOCK_MONOTONIC, read here as
	# /proc/uptime (no fork: python or date can take seconds to start in
	# this guest); every time bound below is on that clock.
	export NVMF_GATEWAY_LOG=debug NVMF_GATEWAY_LOG_STAMP=1
	mono() { local up _; read -r up _ < /proc/uptime; echo "$up"; }
	within() { echo "$1 >= $2 && $1 <= $3" | bc -l | grep -q 1; }
	stamp() { sed -n 's/^nvmf-gateway: \[\([0-9.]*\)\].*/\1/p'; }
	case $tr in tcp) dp=34 ;; rdma) dp=44 ;; esac
	ns2=$NVMET/subsystems/$dnqn/namespaces/2
	if [ ! -d "$ns2" ]; then
		[ -d "$NVMET/subsystems/$dnqn" ] || nvmet_subsys "$dnqn" 32M 512 || exit 1
		truncate -s 32M "$NVMET_WORK/$dnqn-2.img" &&
			ld=$(losetup --find --show "$NVMET_WORK/$dnqn-2.img") &&
			mkdir "$ns2" && printf '%s' "$ld" > "$ns2/device_path" || exit 1
	fi
	printf 1 > "$ns2/enable" || exit 1
	[ -d "$NVMET/ports/$dp" ] || nvmet_port "$dp" "$tr" 10.0.2.15 4434 || exit 1
	[ -e "$NVMET/ports/$dp/subsystems/$dnqn" ] || nvmet_link "$dnqn" "$dp" || exit 1
	ctl=$W/ctl.sock stop=$W/stop lim=6
	cat > "$W/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "/tmp/gw-state"; control = "$ctl"; };
targets = ( { name = "t1"; subnqn = "$dnqn"; reconnect_delay = 2; fast_io_fail_tmo = $lim;
    paths = ( { transport = "$tr"; traddr = "10.0.2.15"; trsvcid = "4434"; } ); } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$W/e1.sock"; }; },
            { name = "e2"; target = "t1"; nsid = 2; nbd = { listen = "unix:$W/e2.sock"; }; } );
CONF
	"$GW" check -c "$W/gw.conf" || fail "config"
	"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
	GP=$!
	for _ in $(seq 300); do
		[ -S "$W/e1.sock" ] && [ -S "$W/e2.sock" ] && [ -S "$ctl" ] && break
		kill -0 "$GP" 2> /dev/null || fail "gateway exited"
		sleep 0.2
	done
	[ -S "$W/e2.sock" ] || fail "gateway did not start"
	ops() { # reads + writes of export $1, the gateway's counters
		"$GW" stats -s "$ctl" -o json | jq -r ".exports[] | select(.name == \"$1\") | .reads + .writes"
	}
	# e1: verified writes and reads (one at a time) until $stop;
	# e2: the same with a 60 s deadline on every command.
	"$PY" "$IO" verify "$W/e1.sock" 600 "$stop" > "$W/e1.json" 2> "$W/e1.err" &
	P1=$!
	"$PY" "$here/ns_loop.py" "$W/e2.sock" 60 "$stop" > "$W/e2.out" 2>&1 &
	P2=$!
	# Python may take long to start here: wait for both to be moving.
	for _ in $(seq 600); do
		[ "$(ops e1)" -gt 20 ] && [ "$(ops e2)" -gt 20 ] && break
		kill -0 $P1 && kill -0 $P2 || fail "a client died: $(cat "$W/e1.err" "$W/e2.out")"
		sleep 0.2
	done
	[ "$(ops e2)" -gt 20 ] || fail "no I/O on e2 after 120 s"
	a0=$(ops e1) t0=$(mono)
	sleep 3
	a1=$(ops e1) t1=$(mono)
	# Round 1: namespace 2 off for 2 s, nothing else in the window (a
	# slow guest stretches it all the same: measured, d1 to en1).
	d1=$(mono)
	printf 0 > "$ns2/enable" || fail "cannot disable namespace 2"
	sleep 2
	printf 1 > "$ns2/enable" || fail "cannot enable namespace 2"
	en1=$(mono)
	sleep 6
	# Round 2: 12 s, past fast_io_fail_tmo; e1's rate and `status` in it.
	d2=$(mono)
	printf 0 > "$ns2/enable" || fail "cannot disable namespace 2"
	sleep 1
	b=$(ops e1) bt=$(mono)
	sleep 6
	"$GW" status -s "$ctl" -o json > "$W/status.json" || fail "no status while disabled"
	jq -e '.state == "running" and .targets[0].paths[0].state == "live" and
		([.exports[] | select(.state == "running" or .state == "attached")] | length == 2)' \
		"$W/status.json" > /dev/null || fail "status while disabled: $(cat "$W/status.json")"
	a=$(ops e1) at=$(mono)
	while within "$(mono) - $d2" 0 12; do sleep 0.2; done
	printf 1 > "$ns2/enable" || fail "cannot enable namespace 2"
	en2=$(mono)
	sleep 8
	touch "$stop"
	wait $P2
	r=$?
	cat "$W/e2.out"
	[ $r = 0 ] || fail "e2 client: exit $r (a hang or wrong data)"
	wait $P1 || fail "e1: errors: $(cat "$W/e1.json" "$W/e1.err")"
	cat "$W/e1.json"
	rate() { echo "($1) / ($2)" | bc -l | cut -c1-6; }
	echo "e1: $(rate "$a1 - $a0" "$t1 - $t0") operations/s before, $(rate "$a - $b" "$at - $bt") while namespace 2 was disabled"
	[ "$a" -gt "$b" ] || fail "e1 stood still while namespace 2 was disabled"
	# Namespace 2's Internal Path Error puts the path aside for namespace
	# 2 only: e1 keeps at least a third of its rate (before the fix, the
	# whole path was put aside for 1 s at a time: under 1 operation/s
	# against 24 to 50).  Both rates by the gateway's counters over the
	# guest's monotonic clock, in the same run.
	within "($a - $b) / ($at - $bt)" "($a1 - $a0) / ($t1 - $t0) / 3" 1000000 ||
		fail "e1 slowed down while namespace 2 was disabled: $(rate "$a - $b" "$at - $bt") operations/s against $(rate "$a1 - $a0" "$t1 - $t0") before"
	# back DISABLED_AT ENABLED_AT: e2's first success after the enable,
	# within 10 s of it (the stamp of the client's answer, CLOCK_MONOTONIC).
	back() {
		local ok
		echo -n "round $3: "
		ok=$(awk -v a="$2" '$1 == "OK" && $4 + 0 >= a' "$W/e2.out" | head -1)
		[ -n "$ok" ] || fail "no e2 success after the enable at $2"
		set -- "$1" "$2" $ok
		within "$6 - $2" 0 10 || fail "e2 working again only $(rate "$6 - $2" 1) s after the enable"
		echo "disabled $(rate "$2 - $1" 1) s; e2 $4 answered OK $(rate "$6 - $2" 1) s after the enable, after $5 s"
	}
	back "$d1" "$en1" 1
	back "$d2" "$en2" 2

	# What nvmet answered for the disabled namespace.
	st=$(awk -v a="$d1" '{ s = $2; gsub(/[][]/, "", s) } s + 0 >= a && /opcode 0x0[12]: /' \
		"$W/gw.log" | head -1 | grep -o 'opcode 0x0[12]: .*') ||
		fail "no error status of a read or write logged after the disable"
	echo "nvmet answered: $st"
	grep -q 'failed with' "$W/gw.log" && grep 'failed with' "$W/gw.log" | head -5
	! grep -q 'e1: .*failed' "$W/gw.log" || fail "an e1 I/O failed"
	case $st in
	*'Internal Path Error'*)
		# Failover with no other path: waits, EIO at fast_io_fail_tmo.
		want=EIO
		eio=$(grep 'e2: .*failed with EIO after waiting' "$W/gw.log") ||
			fail "the 12 s window gave no EIO"
		while read -r line; do
			ls=$(echo "$line" | stamp)
			waited=$(echo "$line" | sed -n 's/.*after waiting \([0-9.]*\) s.*/\1/p')
			within "$waited" $((lim - 1)).9 $((lim + 4)) || fail "EIO after $waited s: $line"
			# Not in round 1: its I/O waited 2 s and went on, unless
			# this guest stretched the window near the limit.
			if within "$ls" "$d1" "$en1 + 1.5"; then
				within "$en1 - $d1" 0 $((lim - 2)) && fail "EIO in the 2 s window: $line"
			fi
		done <<< "$eio"
		grep -q 'e2: .*failed with EIO after waiting' <<< "$(awk -v a="$d2" -v b="$en2" \
			'{ s = $2; gsub(/[][]/, "", s) } s + 0 >= a && s + 0 <= b + 1.5' "$W/gw.log")" ||
			fail "no EIO during the 12 s window"
		;;
	*'Invalid Namespace'*dnr*)
		want=ENXIO
		;;
	*) fail "unexpected status: $st" ;;
	esac
	[ "$(grep -c '^ERR ' "$W/e2.out")" -gt 0 ] || fail "e2 saw no error in 12 s disabled"
	! grep '^ERR ' "$W/e2.out" | grep -v "^ERR $want " || fail "e2 errors other than $want"
	kill -TERM "$GP"
	k_at=$(mono)
	for _ in $(seq 600); do kill -0 "$GP" 2> /dev/null || break; sleep 0.1; done
	kill -0 "$GP" 2> /dev/null && fail "gateway still running 60 s after SIGTERM"
	wait "$GP" || fail "gateway exit status after SIGTERM"
	GP=
	last=$(tail -1 "$W/gw.log" | stamp)
	echo "SIGTERM: the gateway's last line at $last, SIGTERM sent at $k_at (read just after the kill)"
	within "$last - $k_at" -1 10 || fail "shutdown took $(echo "$last - $k_at" | bc -l) s"
	;;
*)
	echo "case $kase?"
	exit 2
	;;
esac
echo pass
