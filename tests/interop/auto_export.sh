#!/usr/bin/env bash
# auto_export.sh GW [tcp|rdma] (in the guest): issue 19's policy exports
# against the kernel target (nvmet).  The daemon has one persistent discovery
# controller on port 39 (10.0.2.15:4439; rdma: port 49, 4449; it serves
# subsystem X from the start so that nvmet answers there) and one
# auto_export policy for
# "*:interop-auto-*" (NBD socket, /dev/nbdN and FUSE, named %n-ns%i), and
# no target or export written by hand.
#   0. the port lists a referral to itself: not followed (a loop), and
#      one discovery controller only;
#   1. 6 s after the start subsystem A (namespace 1) is linked to the port:
#      the discovery change event makes A a target and ns 1 an export on all
#      three exporters, with no reload; status says auto_export[0].
#   2. namespace 2 of A enabled at run time: its Namespace Attribute
#      Changed event makes a second export; data written through its
#      /dev/nbdN reads back through its FUSE file.
#   3. namespace 2 disabled while a writer runs on ns 1 through /dev/nbdN:
#      the ns-2 export goes away (socket, FUSE file, device), the writer
#      sees no error, and ns 1's data reads back.
# SIGTERM ends the daemon.
set -u
GW=${1:?usage: auto_export.sh GW [tcp|rdma]} tr=${2:-tcp}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
X=nqn.2014-08.org.nvmf-gateway:interop-disc-x
A=nqn.2014-08.org.nvmf-gateway:interop-auto-a
case $tr in tcp) pd=39 svc=4439 ;; rdma) pd=49 svc=4449 ;; *) exit 2 ;; esac
W=/tmp/autoexp
rm -rf "$W" && mkdir -p "$W/fuse" && cd "$W" || exit 1
export NVMF_GATEWAY_LOG=info
GP= WP=
fail() {
	echo "FAIL: $*"
	echo "--- gateway log"; grep -v '^ *$' "$W/gw.log" 2> /dev/null | tail -60
	exit 1
}
cleanup() {
	[ -n "$WP" ] && kill "$WP" 2> /dev/null && wait "$WP"
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	[ ! -e "$NVMET/ports/$pd/subsystems/$A" ] || nvmet_unlink "$A" "$pd"
}
trap cleanup EXIT

[ -d "$NVMET/subsystems/$X" ] || nvmet_subsys "$X" 16M 512 || exit 1
[ -d "$NVMET/subsystems/$A" ] || nvmet_subsys "$A" 32M 512 || exit 1
ns2=$NVMET/subsystems/$A/namespaces/2
if [ ! -d "$ns2" ]; then
	truncate -s 48M "$NVMET_WORK/$A-2.img" &&
		ld=$(losetup --find --show "$NVMET_WORK/$A-2.img") &&
		mkdir "$ns2" && printf '%s' "$ld" > "$ns2/device_path" || exit 1
fi
printf 0 > "$ns2/enable" || exit 1
[ -d "$NVMET/ports/$pd" ] || nvmet_port "$pd" "$tr" 10.0.2.15 "$svc" || exit 1
[ -e "$NVMET/ports/$pd/subsystems/$X" ] || nvmet_link "$X" "$pd" || exit 1
[ ! -e "$NVMET/ports/$pd/subsystems/$A" ] || nvmet_unlink "$A" "$pd" || exit 1
# The port refers to itself: the log lists a referral to the controller
# that read it (issue 19 test 5: a referral loop does not loop).
ref=$NVMET/ports/$pd/referrals/self
if [ ! -d "$ref" ]; then
	mkdir "$ref" && _nvmet_set "$ref/addr_adrfam" ipv4 && _nvmet_set "$ref/addr_trtype" "$tr" &&
		_nvmet_set "$ref/addr_traddr" 10.0.2.15 && _nvmet_set "$ref/addr_trsvcid" "$svc" &&
		_nvmet_set "$ref/enable" 1 || exit 1
fi

cat > "$W/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; control = "$W/gw.control"; };
discovery = ( { transport = "$tr"; traddr = "10.0.2.15"; trsvcid = "$svc"; reconnect_delay = 1; } );
auto_export = ( { subnqn = "*:interop-auto-*"; name = "%n-ns%i";
    nbd = { listen = "unix:$W/%n-ns%i.sock"; device = "auto"; }; fuse = true; } );
fuse = { mountpoint = "$W/fuse"; };
CONF
"$GW" check -c "$W/gw.conf" || fail "config"
"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
GP=$!
st() { "$GW" status -s "$W/gw.control" -o json; }
for _ in $(seq 300); do
	[ "$(st 2> /dev/null | jq -r '.discovery[0].state' 2> /dev/null)" = watching ] && break
	kill -0 "$GP" 2> /dev/null || fail "the gateway exited"
	sleep 0.2
done
[ "$(st | jq '.exports | length')" = 0 ] || fail "an export before A is listed"
grep "referral to $tr 10.0.2.15:$svc not followed: loop" "$W/gw.log" || fail "the self-referral was not seen as a loop"
[ "$(st | jq '.discovery | length')" = 1 ] || { st | jq -c .discovery; fail "more than one discovery controller"; }

# up NAME: socket, FUSE file and /dev/nbdN all there.
up() { [ -S "$W/$1.sock" ] && [ -f "$W/fuse/$1" ] && [ -n "$(st | jq -r --arg n "$1" '.exports[] | select(.name == $n) | .nbd_device // empty' 2> /dev/null)" ]; }
waitfor() {
	for _ in $(seq "$2"); do
		eval "$1" && return 0
		kill -0 "$GP" 2> /dev/null || fail "the gateway exited"
		sleep 0.2
	done
	return 1
}

sleep 6
nvmet_link "$A" "$pd" || fail "link A"
echo "subsystem A linked to port $pd"
waitfor "up interop-auto-a-ns1" 300 || { st | jq -c .exports; fail "ns 1 of A not exported on all three"; }
st | jq -c '.exports[] | {name, origin, nbd_device, size}'
[ "$(st | jq -r '.exports[] | select(.name == "interop-auto-a-ns1") | .origin')" = "auto_export[0]" ] ||
	fail "origin of the ns-1 export"
D1=$(st | jq -r '.exports[] | select(.name == "interop-auto-a-ns1") | .nbd_device')
waitfor "[ -b '$D1' ] && [ \"\$(blockdev --getsize64 '$D1')\" = 33554432 ]" 150 || fail "ns 1 device $D1"
! grep -q 'SIGHUP\|reloading' "$W/gw.log" || fail "a reload happened"

printf 1 > "$ns2/enable" || fail "enable ns 2"
echo "namespace 2 of A enabled"
waitfor "up interop-auto-a-ns2" 300 || { st | jq -c .exports; fail "ns 2 not exported"; }
D2=$(st | jq -r '.exports[] | select(.name == "interop-auto-a-ns2") | .nbd_device')
waitfor "[ -b '$D2' ] && [ \"\$(blockdev --getsize64 '$D2')\" = 50331648 ]" 150 || fail "ns 2 device $D2"
head -c 1M /dev/urandom > "$W/r2"
dd if="$W/r2" of="$D2" bs=1M oflag=direct conv=fsync status=none || fail "write to $D2"
cmp -n 1048576 "$W/r2" "$W/fuse/interop-auto-a-ns2" || fail "ns 2's FUSE file does not read what $D2 wrote"

# A writer on ns 1 through the whole removal of ns 2.
head -c 4M /dev/urandom > "$W/r1"
( while :; do dd if="$W/r1" of="$D1" bs=1M oflag=direct conv=fsync status=none || exit 1; done ) &
WP=$!
sleep 1
printf 0 > "$ns2/enable" || fail "disable ns 2"
echo "namespace 2 of A disabled"
waitfor "[ ! -S $W/interop-auto-a-ns2.sock ] && [ ! -e $W/fuse/interop-auto-a-ns2 ]" 300 ||
	fail "ns 2's export did not go away"
waitfor "[ \"\$(st | jq '[.exports[] | select(.name == \"interop-auto-a-ns2\")] | length')\" = 0 ]" 150 ||
	fail "ns 2's export still in status"
sleep 1
kill -0 "$WP" 2> /dev/null || fail "the writer on ns 1 failed during the removal of ns 2"
kill "$WP"; wait "$WP" 2> /dev/null; WP=
dd if="$W/r1" of="$D1" bs=1M oflag=direct conv=fsync status=none || fail "write to $D1 after"
cmp -n 4194304 "$W/r1" "$D1" || fail "ns 1 does not read back"
cmp -n 4194304 "$W/r1" "$W/fuse/interop-auto-a-ns1" || fail "ns 1's FUSE file does not read back"
kill -TERM "$GP"
wait "$GP" || fail "gateway exit status after SIGTERM"
GP=
echo "auto_export $tr: OK"
