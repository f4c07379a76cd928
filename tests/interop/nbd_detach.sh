#!/usr/bin/env bash
# nbd_detach.sh GW NQN OTHER_NQN (in the guest): SIGTERM detaches (device
# disconnected, controller shut down, exit 0); a busy device and an export
# already served by a running gateway are refused with one clear line.
set -eu -o pipefail
GW=$1 nqn=$2 other=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
. "$here/nbd_lib.sh"
trap nbd_cleanup EXIT
cd /tmp # fio writes its verify state file into the cwd

nbd_start "$nqn" /dev/nbd3 detach
[ "$(cat /sys/block/nbd3/size)" -gt 0 ]
grep -q "$nqn" /sys/block/nbd3/backend
# Another export on the same device: refused.
out=$("$GW" nbd -t tcp -a "$NBD_ADDR" -s "$NBD_PORT" -n "$other" /dev/nbd3 2>&1) && rc=0 || rc=$?
echo "$out"
[ $rc = 1 ]
echo "$out" | grep -q 'nbd3: in use by backend'
# The same export while its gateway runs: refused, the device untouched.
out=$("$GW" nbd -t tcp -a "$NBD_ADDR" -s "$NBD_PORT" -n "$nqn" auto 2>&1) && rc=0 || rc=$?
echo "$out"
[ $rc = 1 ]
echo "$out" | grep -q 'nbd3: served by another running gateway'
dd if=/dev/nbd3 of=/dev/null bs=1M count=4 iflag=direct status=none
nbd_stop
nbd_detached /dev/nbd3

# SIGTERM while writes wait for a path that is gone, with I/O allowed to
# wait for ever (-l -1): the detach flushes the device, and that flush
# must not wait with them.  The drain fails them within its few seconds,
# as for the socket export.  Before the fix SIGTERM never ended the
# gateway (nothing but SIGKILL did).
relink() { [ -e "$NVMET/ports/1/subsystems/$nqn" ] || nvmet_link "$nqn" 1; }
trap 'relink; nbd_cleanup' EXIT
# First the outage lasts past the kernel's 30 s request tick: with one
# connection and no request timeout the kernel waits with the gateway
# (it logs the request as stuck) and keeps the connection.  With the
# kernel's default timeout it closed it ("Connection timed out"), and
# with several connections resent the writes on another (nbd/kdev.h).
NBD_START_ARGS="-l -1" nbd_start "$nqn" auto detach-wait
dmesg -c > /dev/null 2>&1 || true
nvmet_unlink "$nqn" 1
dd if=/dev/urandom of="$NBD_DEV" bs=64k count=4 oflag=direct status=none 2> /dev/null &
ddp=$!
sleep 40
kmsg=$(dmesg 2> /dev/null | grep "${NBD_DEV#/dev/}" || true)
echo "kernel, 40 s into the outage: ${kmsg:-nothing}"
if grep -q 'closed by the kernel' "$NBD_LOG" || grep -q 'Connection timed out' <<< "$kmsg"; then
	cat "$NBD_LOG"
	echo "the kernel closed the connection during a 40 s outage"
	kill -KILL "$GW_PID"
	exit 1
fi
kill -0 "$ddp" 2> /dev/null || { echo "the writes ended during the outage (no path: they must wait)"; exit 1; }
kill -TERM "$GW_PID"
for _ in $(seq 300); do kill -0 "$GW_PID" 2> /dev/null || break; sleep 0.2; done
if kill -0 "$GW_PID" 2> /dev/null; then
	cat "$NBD_LOG"
	echo "SIGTERM did not end the gateway within 60 s (writes waiting for a path)"
	kill -KILL "$GW_PID"
	exit 1
fi
wait "$GW_PID" || echo "gateway exit code $? after SIGTERM with writes waiting"
GW_PID=
wait "$ddp" && echo "dd: the waiting writes succeeded" || echo "dd: the waiting writes failed (expected: no path)"
cat "$NBD_LOG"
grep -q "${NBD_DEV#/dev/}: detached" "$NBD_LOG"
grep -q 'no path was usable' "$NBD_LOG"
relink
nbd_detached "$NBD_DEV"
