#!/usr/bin/env bash
# The FUSE connection aborted from outside (/sys/fs/fuse/connections/N/
# abort) while a read waits for a path that is down: nobody is left to take
# the reply, so the mount command drains the waiting I/O and exits at once,
# as it does on SIGTERM, instead of holding on until ctrl_loss_tmo (60 s
# here).  Found by a hostile review.  Whether it drained is read from the
# gateway's log (no ctrl_loss_tmo expiry), not timed by a clock here.
set -u
. "$TOP/tests/func/fuse/lib.sh"
. "$TOP/tests/target/helpers.sh"
fuse_require
fusectl_require
nqn=nqn.2026-01.io.nvmf-gateway:fuseabort
tgt_start --subsys "$nqn:16M:4096"
NVMF_GATEWAY_LOG=info gw_start mount -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$nqn" --name disk \
	--ctrl-loss-tmo 60 --reconnect-delay 1 "$MNT"
F="$MNT/disk"
dd if="$F" of=/dev/null bs=4096 count=1 iflag=direct status=none || fail "a first read"
ctl port 1 down > /dev/null
sleep 1
dd if="$F" of=/dev/null bs=4096 count=1 skip=7 iflag=direct status=none 2> /dev/null &
rpid=$!
sleep 2
kill -0 "$rpid" 2> /dev/null || fail "the read did not wait for the path"
fuse_abort "$MNT"
for _ in $(seq 400); do kill -0 "$GW_PID" 2> /dev/null || break; sleep 0.1; done
kill -0 "$GW_PID" 2> /dev/null && fail "the mount command still runs 40 s after its FUSE connection was aborted"
# By the gateway's own account, not a clock here: it drained, it did not
# wait out ctrl_loss_tmo (60 s).
! grep -q 'ctrl_loss_tmo expired' "$T/gw.log" || fail "it waited for the path instead of draining"
echo "the mount command exited after the abort, before ctrl_loss_tmo"
wait "$rpid" 2> /dev/null
GW_PID=
ctl port 1 up > /dev/null
echo pass
