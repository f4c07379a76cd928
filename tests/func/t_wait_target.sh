#!/usr/bin/env bash
# A target that is not there yet (issue 19): the daemon starts while the
# test target's port refuses connections.  It does not exit: READY=1 comes
# at once (STATUS counts the exports waiting for their target), `status`
# shows "waiting for target" with the last error and the next attempt, and
# neither the NBD socket nor the FUSE file exists yet.  Target t2
# (connect_loss_tmo = 3) never comes: its export fails, logged, 3 s (+
# slack) after the start by the gateway's clock.  The target of t1 starts
# about 5 s after the daemon on that port: export a serves by itself (NBD
# socket and FUSE file), no SIGHUP, no restart.  A second daemon takes an
# export-add and a reload while waiting, and serves once its target
# starts.  A third, whose target never comes, stops promptly on SIGTERM
# while waiting.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:wait-a
port=$(free_port) dead=$(free_port)
[ "$port" != "$dead" ] || dead=$(free_port)
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
fuse = { mountpoint = "$tmp/fuse"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    reconnect_delay = 1; },
  { name = "t2"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$dead"; } );
    reconnect_delay = 1; connect_loss_tmo = 3; } );
exports = ( { name = "a"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; };
    fuse = true; },
  { name = "b"; target = "t2"; nsid = 1; nbd = { listen = "unix:$tmp/b.sock"; }; } );
CONF

# Every datagram of the notify socket as one line (newlines shown as '|').
"$NBDPY" -u -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "w", buffering=1)
while True:
    out.write(s.recv(4096).decode().replace("\n", "|") + "\n")
' "$tmp/notify.sock" "$tmp/notify.txt" &
lpid=$!
cleanup_fn stop_var lpid
cleanup_fn unmount_lazy "$tmp/fuse"
wait_for 10 '[ -S "$tmp/notify.sock" ]' || fail "the notify listener did not start"

st() { "$GW" status -s "$tmp/gw.control" -o json; }
GW_CONTROL="$tmp/gw.control" NOTIFY_SOCKET="$tmp/notify.sock" gw_start run "$tmp/gw.conf"
t0=$(gw_at 'gateway: .*targets')
wait_for 30 'grep -q "^READY=1" "$tmp/notify.txt"' || fail "no READY=1 while the target is away"
grep '^READY=1' "$tmp/notify.txt"
grep -q '^READY=1|STATUS=0 of 2 exports running, 2 waiting for their target$' "$tmp/notify.txt" ||
	fail "READY=1 without the waiting exports in STATUS"
grep -q 'target t1: not reachable yet (Connection refused); waiting for it: reconnecting every 1 s for ever' \
	"$tmp/gw.log" || fail "no reason logged for t1"
grep -q 'export a: waiting for target t1' "$tmp/gw.log" || fail "no waiting line for a"

# Waiting: the state, the last error, the next attempt; nothing listens.
wait_for 10 '[ "$(st | jq -r ".targets[0].state")" = "waiting for target" ]' ||
	fail "status does not say t1 is waiting: $(st)"
s=$(st)
echo "$s" | jq -c '.targets[0] | del(.paths)'
[ "$(echo "$s" | jq -r '.targets[0].last_error')" = "Connection refused" ] || fail "last error"
echo "$s" | jq -e '.targets[0].next_attempt | test("^[0-9-]+T[0-9:]+Z$|connecting now")' > /dev/null ||
	fail "no next attempt time"
[ "$(echo "$s" | jq -r '.exports[0].state')" = "waiting for target" ] || fail "export a's state"
"$GW" status -s "$tmp/gw.control" | tee "$tmp/status.txt" | grep 'waiting for target'
grep -q 'target t1: waiting for target for .* last error: Connection refused, next attempt: ' \
	"$tmp/status.txt" || fail "the human status has no waiting line"
[ -e "$tmp/a.sock" ] && fail "a listens before its target is up"
[ -e "$tmp/fuse/a" ] && fail "a has a FUSE file before its target is up"

# t2 gives up at connect_loss_tmo: its export fails, the daemon stays.
gw_wait 'export b: target t2 not reached within connect_loss_tmo (3 s); export failed' 1 30 \
	> "$tmp/b.at" || fail "t2's connect_loss_tmo did not expire"
took=$(echo "$(cat "$tmp/b.at") - $t0" | bc -l)
echo "export b failed $took s after the start"
echo "$took >= 2.9 && $took <= 10" | bc -l | grep -q 1 || fail "connect_loss_tmo 3 s took $took s"
gw_alive
[ "$(st | jq -r '.exports[1].state')" = failed ] || fail "export b not failed"

# The target comes up late (5 s after the daemon, by the gateway's clock).
while [ "$(echo "$(mono) < $t0 + 5" | bc -l)" = 1 ]; do sleep 0.2; done
grep -q '^READY=1' "$tmp/notify.txt" || fail "READY=1 should have come before the target"
tgt_start a "" -s "$port" --subsys "$A:16M"
wait_for 30 '[ -S "$tmp/a.sock" ]' || fail "export a did not come up with its target"
up=$(gw_wait 'target t1: connected after waiting' 1 5) || fail "no 'connected after waiting' line"
echo "t1 up $(echo "$up - $t0" | bc -l) s after the start"
"$NBDPY" "$IO" verify "$tmp/a.sock" 1 > /dev/null || fail "a does not serve"
wait_for 10 '[ -e "$tmp/fuse/a" ]' || fail "a's FUSE file did not appear with its target"
[ "$(stat -c %s "$tmp/fuse/a")" = 16777216 ] || fail "a's FUSE file size"
[ "$(st | jq -r '.exports[0].state')" = attached ] || fail "a not attached: $(st)"
grep -c '^READY=1' "$tmp/notify.txt" | grep -qx 1 || fail "READY=1 sent more than once"
grep -q 'SIGHUP\|reloading' "$tmp/gw.log" && fail "a reload happened"
gw_alive
gw_stop

# While waiting: export-add of another export of the target answers ok (it
# waits too), and a reload replaces the waiting target; both exports come
# up when the target does.
late=$(free_port)
conf2() {	# conf2 EXPORT...
	local x list=""
	for x in "$@"; do
		list="$list${list:+, }{ name = \"$x\"; target = \"t\"; nsid = 1; nbd = { listen = \"unix:$tmp/$x.sock\"; }; }"
	done
	cat > "$tmp/gw2.conf" <<- CONF
	gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
	targets = ( { name = "t"; subnqn = "$A"; reconnect_delay = 1;
	    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$late"; } ); } );
	exports = ( $list );
	CONF
}
conf2 c
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw2.conf"
gw_wait 'target t: not reachable yet' 1 30 > /dev/null || fail "the second daemon does not wait"
conf2 c d
"$GW" export-add d -s "$tmp/gw.control" || fail "export-add while the target is away"
[ "$(st | jq -r '.exports[1].state')" = "waiting for target" ] || fail "d is not waiting: $(st)"
"$GW" reload -s "$tmp/gw.control" || fail "reload while the target is away"
wait_for 10 '[ "$(st | jq -r ".targets[0].state")" = "waiting for target" ]' ||
	fail "not waiting after the reload: $(st)"
tgt_start b "" -s "$late" --subsys "$A:16M"
wait_for 30 '[ -S "$tmp/c.sock" ] && [ -S "$tmp/d.sock" ]' ||
	fail "c and d did not come up after the reload"
"$NBDPY" "$IO" verify "$tmp/d.sock" 1 > /dev/null || fail "d does not serve"
gw_stop

# SIGTERM while waiting: a prompt, clean exit.
cat > "$tmp/gw3.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw3.control"; };
targets = ( { name = "t"; subnqn = "$A"; reconnect_delay = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$dead"; } ); } );
exports = ( { name = "e"; target = "t"; nsid = 1; nbd = { listen = "unix:$tmp/e.sock"; }; } );
CONF
gw_start run "$tmp/gw3.conf"
gw_wait 'target t: not reachable yet' 1 30 > /dev/null || fail "the third daemon does not wait"
sleep 1.5 # a reconnect attempt or two
gw_stop_within 5
grep -q 'gateway: stopped' "$tmp/gw.log" || fail "no orderly stop while waiting"
echo pass
