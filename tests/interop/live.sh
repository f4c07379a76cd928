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
#                 sockets, one reactor).  Under verified I/O on both,
#                 namespaces/2/enable = 0: nvmet sends the Namespace
#                 Attribute Changed event and lists namespace 2 no more, so
#                 the gateway takes e2 down as a removed namespace (issue
#                 19): its socket goes, the removal is logged once, its
#                 client gets errors and never hangs (60 s deadline); e1
#                 has zero errors and keeps at least a third of its rate;
#                 `status` lists e1 only.  Enabled again, a reload exports
#                 e2 again.  SIGTERM ends the daemon within 10 s.
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
	# Namespace 2 disabled: nvmet sends the Namespace Attribute Changed
	# event and lists it no more, and the gateway takes e2 down as a
	# removed namespace (issue 19): its I/O fails, its socket goes, logged
	# once; e1, on the same path, serves on without an error.
	d=$(mono)
	printf 0 > "$ns2/enable" || fail "cannot disable namespace 2"
	for _ in $(seq 300); do grep -q 'export e2: removed' "$W/gw.log" && break; sleep 0.2; done
	grep -q 'export e2: removed' "$W/gw.log" || fail "e2 not taken down within 60 s of the disable"
	gone=$(grep -m1 'export e2: removed' "$W/gw.log" | stamp)
	echo "e2 taken down $(echo "$gone - $d" | bc -l | cut -c1-6) s after the disable (gateway clock)"
	[ "$(grep -c 'nsid 2 of target t1 was removed' "$W/gw.log")" = 1 ] ||
		fail "the removal was not logged exactly once: $(grep 'nsid 2' "$W/gw.log")"
	[ -S "$W/e2.sock" ] && fail "e2's socket still listens"
	b=$(ops e1) bt=$(mono)
	sleep 4
	"$GW" status -s "$ctl" -o json > "$W/status.json" || fail "no status after the removal"
	jq -e '.state == "running" and .targets[0].paths[0].state == "live" and
		([.exports[].name] == ["e1"])' "$W/status.json" > /dev/null ||
		fail "status after the removal: $(cat "$W/status.json")"
	a=$(ops e1) at=$(mono)
	rate() { echo "($1) / ($2)" | bc -l | cut -c1-6; }
	echo "e1: $(rate "$a1 - $a0" "$t1 - $t0") operations/s before, $(rate "$a - $b" "$at - $bt") after namespace 2 went away"
	[ "$a" -gt "$b" ] || fail "e1 stood still after namespace 2 went away"
	within "($a - $b) / ($at - $bt)" "($a1 - $a0) / ($t1 - $t0) / 3" 1000000 ||
		fail "e1 slowed down after namespace 2 went away"
	# Enabled again, the namespace is exported again by a reload (a
	# hand-written export that was taken down; auto_export is not there
	# yet to do it by itself), with the data e2 wrote before.
	printf 1 > "$ns2/enable" || fail "cannot enable namespace 2"
	sleep 2
	"$GW" reload -s "$ctl" > "$W/reload.out" 2>&1 || fail "reload: $(cat "$W/reload.out")"
	for _ in $(seq 300); do [ -S "$W/e2.sock" ] && break; sleep 0.2; done
	[ -S "$W/e2.sock" ] || fail "e2 not back after the enable and a reload"
	"$PY" -c 'import nbd, sys
h = nbd.NBD(); h.connect_uri("nbd+unix:///?socket=" + sys.argv[1])
print("e2 back: %d bytes" % h.get_size()); h.pread(4096, 0); h.shutdown()' "$W/e2.sock" ||
		fail "e2 does not serve after the reload"
	touch "$stop"
	wait $P2
	r=$?
	cat "$W/e2.out"
	[ $r = 0 ] || fail "e2 client: exit $r (a hang or wrong data)"
	[ "$(grep -c '^ERR ' "$W/e2.out")" -gt 0 ] || fail "e2's client saw no error when its namespace went away"
	wait $P1 || fail "e1: errors: $(cat "$W/e1.json" "$W/e1.err")"
	cat "$W/e1.json"
	! grep -q 'e1: .*failed' "$W/gw.log" || fail "an e1 I/O failed"
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
ns-replace)
	# Another namespace behind nsid 1 while the gateway is away: the port
	# unlinked (nvmet drops the controller), namespace 1 removed and made
	# again on another loop device of the same size (nvmet gives it a new
	# UUID; its NGUID stays zero), the port linked again.  At the
	# reconnect the gateway must see another namespace and fail e1, not
	# serve the new device's blocks: nvmet names a namespace only by the
	# UUID in its descriptor list (Identify CNS 03h).
	rnqn=nqn.2014-08.org.nvmf-gateway:interop-nsrep rp=35
	[ "$tr" = tcp ] || { echo "tcp only"; exit 2; }
	[ -d "$NVMET/subsystems/$rnqn" ] || nvmet_subsys "$rnqn" 32M 512 || exit 1
	[ -d "$NVMET/ports/$rp" ] || nvmet_port "$rp" tcp 10.0.2.15 4435 || exit 1
	[ -e "$NVMET/ports/$rp/subsystems/$rnqn" ] || nvmet_link "$rnqn" "$rp" || exit 1
	cat > "$W/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "/tmp/gw-state"; };
targets = ( { name = "t1"; subnqn = "$rnqn"; reconnect_delay = 1; ctrl_loss_tmo = 120;
    paths = ( { transport = "tcp"; traddr = "10.0.2.15"; trsvcid = "4435"; } ); } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$W/e1.sock"; }; } );
CONF
	"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
	GP=$!
	for _ in $(seq 300); do [ -S "$W/e1.sock" ] && break; sleep 0.2; done
	[ -S "$W/e1.sock" ] || fail "gateway did not start"
	rw() { "$PY" -c 'import errno, nbd, sys
h = nbd.NBD(); h.connect_uri("nbd+unix:///?socket=" + sys.argv[1])
try:
    h.pwrite(b"r" * 4096, 0); print("ok" if h.pread(4096, 0) == b"r" * 4096 else "mismatch")
except nbd.Error as e:
    print(errno.errorcode.get(e.errnum, e.errnum))' "$W/e1.sock"; }
	[ "$(rw)" = ok ] || fail "e1 does not serve before the replacement"
	s=$NVMET/subsystems/$rnqn/namespaces/1
	nvmet_unlink "$rnqn" "$rp" || fail "unlink"
	for _ in $(seq 100); do grep -q 'closing the connection\|connection lost\|reconnecting' "$W/gw.log" && break; sleep 0.2; done
	printf 0 > "$s/enable" && rmdir "$s" || fail "cannot remove namespace 1"
	truncate -s 32M "$NVMET_WORK/$rnqn-b.img" &&
		ld=$(losetup --find --show "$NVMET_WORK/$rnqn-b.img") &&
		mkdir "$s" && printf '%s' "$ld" > "$s/device_path" && printf 1 > "$s/enable" ||
		fail "cannot make namespace 1 again"
	cat "$s/device_uuid" 2> /dev/null | sed 's/^/new device_uuid: /'
	nvmet_link "$rnqn" "$rp" || fail "link"
	for _ in $(seq 300); do grep -q 'nsid 1: another namespace' "$W/gw.log" && break; sleep 0.2; done
	grep -m1 'nsid 1: another namespace' "$W/gw.log" ||
		fail "the replaced namespace was not seen at the reconnect within 60 s"
	r=$(rw)
	echo "e1 after the replacement: $r"
	[ "$r" = EIO ] || fail "e1 served the replaced namespace ($r)"
	kill -TERM "$GP"; wait "$GP"; GP=
	;;
*)
	echo "case $kase?"
	exit 2
	;;
esac
echo pass
