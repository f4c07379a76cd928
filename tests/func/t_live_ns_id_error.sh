#!/usr/bin/env bash
# A namespace change event whose Identify Namespace fails with a status
# that says nothing of the namespace (Command Interrupted, 0x21): the
# namespace is left as it was and the export serves on; the next event
# is followed.  Before the fix any error status counted as "removed" and
# the export was taken down.
set -u
. "$TOP/tests/func/live/lib.sh"
NSC="$TOP/tests/func/live/ns_client.py"
A=nqn.2026-01.io.nvmf-gateway:nsid-err
M=$((1024 * 1024))
tgt_start a "" -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
ctl a id-ns-fail 1 0x21 > /dev/null
ctl a ns-resize "$A" 1 48M > /dev/null
gw_wait 'Identify of nsid 1 failed\|nsid 1 is no longer active' 1 30 > /dev/null ||
	fail "the event was not followed"
sleep 1
grep -q 'was removed\|taking the export down\|export e1: removed' "$tmp/gw.log" &&
	fail "a transient Identify failure took the export for removed"
r=$("$NBDPY" "$NSC" rw "$tmp/e1.sock" 4096)
echo "I/O after the failed Identify: $r"
[ "$r" = ok ] || fail "the export does not serve after a transient Identify failure: $r"
# The next event is followed.
ctl a ns-resize "$A" 1 64M > /dev/null
gw_wait 'export e1: now 67108864 bytes' 1 30 > /dev/null || fail "the next event was not followed"
[ "$("$NBDPY" "$NSC" size "$tmp/e1.sock")" = $((64 * M)) ] || fail "not 64 MiB after the next event"
gw_alive
gw_stop_within 30
echo pass
