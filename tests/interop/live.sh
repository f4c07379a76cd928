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
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	ana "$pa" optimized
}
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
*)
	echo "case $kase?"
	exit 2
	;;
esac
echo pass
