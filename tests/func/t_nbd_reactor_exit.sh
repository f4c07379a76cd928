#!/usr/bin/env bash
# The one-shot `nbd` starts its extra reactors before the session, and
# must stop and join them on every way out, before reactor_fini: with a
# RAM volume (no target to shut down) and on an option error before the
# session's reactor ever ran.  Finalizing a reactor whose thread still
# waits in it unmaps the ring under that thread: a crash or a hang at exit.
set -u
. "$TOP/tests/func/nbd/lib.sh"
sock="$tmp/nbd.sock"
for i in $(seq 10); do
	gw_start nbd --mem 16M --reactors 4 "unix:$sock"
	nbdinfo --size "nbd+unix:///?socket=$sock" > /dev/null || fail "round $i: nbdinfo"
	gw_stop_within 10 || fail "round $i: the gateway did not exit cleanly"
done
echo "10 starts and SIGTERMs with 4 reactors: exit 0 each"
# No -a: the session refuses before its reactor runs.
timeout 20 "$GW" nbd --reactors 4 -n nqn.2014-08.org.nvmf-gateway:none "unix:$sock" \
	> "$tmp/err.out" 2>&1
rc=$?
cat "$tmp/err.out"
[ $rc = 1 ] || fail "an option error with 4 reactors: exit $rc, want 1"
grep -q -- "-a/--traddr\|traddr" "$tmp/err.out" || fail "no message naming the missing option"
echo "reactor exit: OK"
