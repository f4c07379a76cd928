#!/usr/bin/env bash
# wait_target.sh GW TR (in the guest): issue 19's "a target that is not
# there yet" against the kernel target (nvmet).  A subsystem of its own on
# a port of its own (tcp 37, rdma 47, trsvcid 4437) that no subsystem is
# linked to when the daemon starts, so nvmet does not listen there.  The
# daemon does not exit: it reports the export waiting for its target, with
# no NBD socket, no /dev/nbdN and no FUSE file.  8 s later the subsystem is
# linked to the port: with no reload or restart the export appears on all
# three, at the namespace's size, and data written through /dev/nbdN reads
# back through the FUSE file.  SIGTERM ends the daemon.
set -u
GW=${1:?usage: wait_target.sh GW TR} tr=${2:?}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
nqn=nqn.2014-08.org.nvmf-gateway:interop-wait
case $tr in tcp) pw=37 ;; rdma) pw=47 ;; *) echo "transport $tr?"; exit 2 ;; esac
W=/tmp/wait-$tr
rm -rf "$W" && mkdir -p "$W/fuse" && cd "$W" || exit 1
export NVMF_GATEWAY_LOG=info
GP=
fail() {
	echo "FAIL: $*"
	echo "--- gateway log"; grep -v '^ *$' "$W/gw.log" 2> /dev/null | tail -60
	exit 1
}
cleanup() {
	[ -n "$GP" ] && kill -TERM "$GP" 2> /dev/null && wait "$GP"
	[ ! -e "$NVMET/ports/$pw/subsystems/$nqn" ] || nvmet_unlink "$nqn" "$pw"
}
trap cleanup EXIT

[ -d "$NVMET/subsystems/$nqn" ] || nvmet_subsys "$nqn" 32M 512 || exit 1
[ -d "$NVMET/ports/$pw" ] || nvmet_port "$pw" "$tr" 10.0.2.15 4437 || exit 1
[ ! -e "$NVMET/ports/$pw/subsystems/$nqn" ] || nvmet_unlink "$nqn" "$pw" || exit 1

cat > "$W/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "/tmp/gw-state"; control = "$W/gw.control"; };
targets = ( { name = "t1"; subnqn = "$nqn"; reconnect_delay = 1;
    paths = ( { transport = "$tr"; traddr = "10.0.2.15"; trsvcid = "4437"; } ); } );
exports = ( { name = "e1"; target = "t1"; nsid = 1;
    nbd = { listen = "unix:$W/e1.sock"; device = "auto"; }; fuse = true; } );
fuse = { mountpoint = "$W/fuse"; };
CONF
"$GW" check -c "$W/gw.conf" || fail "config"
"$GW" run -f -c "$W/gw.conf" > "$W/gw.log" 2>&1 &
GP=$!
for _ in $(seq 300); do
	grep -q 'gateway: 0 of 1 exports running, 1 waiting for their target' "$W/gw.log" && break
	kill -0 "$GP" 2> /dev/null || fail "the gateway exited while its target is away"
	sleep 0.2
done
grep -q 'target t1: not reachable yet' "$W/gw.log" || fail "no waiting reason logged"
"$GW" status -s "$W/gw.control" | grep 'waiting for target' || fail "status does not say waiting"
[ -e "$W/e1.sock" ] && fail "NBD socket before the target"
[ -e "$W/fuse/e1" ] && fail "FUSE file before the target"
grep -q 'attached as /dev/nbd' "$W/gw.log" && fail "/dev/nbdN before the target"

sleep 8
nvmet_link "$nqn" "$pw" || fail "link"
echo "subsystem linked to port $pw"
for _ in $(seq 300); do
	[ -S "$W/e1.sock" ] && [ -f "$W/fuse/e1" ] && grep -q 'attached as /dev/nbd' "$W/gw.log" && break
	kill -0 "$GP" 2> /dev/null || fail "the gateway exited"
	sleep 0.2
done
grep 'target t1: connected after waiting' "$W/gw.log" || fail "no 'connected after waiting'"
DEV=$(grep -o 'attached as /dev/nbd[0-9]*' "$W/gw.log" | grep -o '/dev/nbd[0-9]*' | head -1)
[ -b "$DEV" ] || fail "no /dev/nbdN after the link"
[ -S "$W/e1.sock" ] || fail "no NBD socket after the link"
[ -f "$W/fuse/e1" ] || fail "no FUSE file after the link"
[ "$(blockdev --getsize64 "$DEV")" = 33554432 ] || fail "size of $DEV"
[ "$(stat -c %s "$W/fuse/e1")" = 33554432 ] || fail "size of the FUSE file"
head -c 1M /dev/urandom > "$W/r"
dd if="$W/r" of="$DEV" bs=1M oflag=direct conv=fsync status=none || fail "write to $DEV"
cmp -n 1048576 "$W/r" "$W/fuse/e1" || fail "the FUSE file does not read what $DEV wrote"
! grep -q 'SIGHUP\|reloading' "$W/gw.log" || fail "a reload happened"
kill -TERM "$GP"
wait "$GP" || fail "gateway exit status after SIGTERM"
GP=
echo "wait-target $tr: OK"
