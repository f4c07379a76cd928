#!/usr/bin/env bash
# Issue 14, defect 1: one path-related status must not freeze an export.
# Single path, NBD socket.  The target answers every I/O with ANA
# Transition (sct 3 sc 3, no DNR), then with Internal Path Error (3/0),
# ANA Inaccessible (3/2), Keep Alive Timer Expired (0/0x18, the path is
# reset):
# a read sent meanwhile waits (the path is only put aside for a bounded
# backoff, the ANA log is read again) and succeeds once the status is
# off; later reads work at once.  Before the fix the first read parked
# forever and every later one too.  Then the deadline: with
# fast_io_fail_tmo = 2 and ANA Inaccessible left on, a read fails with EIO
# after 2 s; with ANA Transition left on, after ANATT (10 s); the gateway's
# own log says after how long (its monotonic clock, not ours).
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:live
tgt_start a "" -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 20; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"
[ "$("$NBDPY" "$LIO" read "$S" 10)" = ok ] || fail "first read"

for code in "3 3" "3 0" "3 2" "0 0x18"; do
	ctl a status $code > /dev/null
	"$NBDPY" "$LIO" read "$S" 30 > "$tmp/r.out" &
	rp=$!
	sleep 2 # the read sees the status (more than once: the backoff is 1 s)
	ctl a status off > /dev/null
	wait "$rp"
	r=$(cat "$tmp/r.out")
	echo "status $code, then off: the waiting read says $r"
	[ "$r" = ok ] || fail "read while status $code was on: $r (want ok once it is off)"
	for i in 1 2 3; do
		r=$("$NBDPY" "$LIO" read "$S" 10)
		[ "$r" = ok ] || fail "read $i after status $code went off: $r"
	done
done
# Keep Alive Timer Expired (0/0x18) as a status: the path was reset.
grep -q 'the controller answered Keep Alive Timer Expired' "$tmp/gw.log" ||
	fail "Keep Alive Timer Expired did not reset the path"

# Reconfigure to a short fast_io_fail_tmo: the status stays on, the read
# must fail with EIO after about 2 s of the gateway's clock.
gw_stop_within 30
sed -i 's/fast_io_fail_tmo = 20/fast_io_fail_tmo = 2/' "$tmp/gw.conf"
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
[ "$("$NBDPY" "$LIO" read "$S" 10)" = ok ] || fail "read after restart"
# expect_eio SCT SC LO HI: with that status left on, a read fails with EIO
# after LO..HI s of waiting by the gateway's own clock (its log line).
# The I/O ends either parked for a path (wait_for_path: "after waiting N
# s") or sent back by the status once more (may_resend: "N s after it
# first had to wait"), whichever it was doing at the deadline: both count
# from its first wait (seen: the second, under load, where this test knew
# only the first).
eio_lines() { grep -E 'failed with EIO( after waiting [0-9.]+ s|: .* [0-9.]+ s after it first had to wait)' "$tmp/gw.log"; }
expect_eio() {
	local r line waited before
	before=$(eio_lines | wc -l)
	ctl a status "$1" "$2" > /dev/null
	r=$("$NBDPY" "$LIO" read "$S" 60)
	echo "status $1 $2 left on, fast_io_fail_tmo = 2: the read says $r"
	[ "$r" = EIO ] || fail "want EIO at the deadline, got $r"
	for _ in $(seq 50); do [ "$(eio_lines | wc -l)" -gt "$before" ] && break; sleep 0.1; done
	[ "$(eio_lines | wc -l)" -gt "$before" ] || fail "the deadline was not logged"
	line=$(eio_lines | tail -1)
	echo "gateway: $line"
	waited=$(echo "$line" | sed -n 's/.*after waiting \([0-9.]*\) s.*/\1/p; s/.* \([0-9.]*\) s after it first had to wait.*/\1/p')
	awk -v w="$waited" -v lo="$3" -v hi="$4" 'BEGIN { exit !(w >= lo && w <= hi) }' ||
		fail "the gateway failed the I/O after $waited s, want $3 to $4 s"
	ctl a status off > /dev/null
	sleep 1.2 # the next line of the rate-limited log
}
# Inaccessible: the recovery deadline, fast_io_fail_tmo.
expect_eio 3 2 1.9 6
# Transition: ANATT (10 s from the test target), longer than fast_io_fail_tmo.
expect_eio 3 3 9.9 14
ctl a status off > /dev/null
[ "$("$NBDPY" "$LIO" read "$S" 10)" = ok ] || fail "read after the status went off"
gw_alive
gw_stop_within 30
echo pass
