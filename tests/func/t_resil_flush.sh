#!/usr/bin/env bash
# A target with a volatile write cache (--persist --vwc: only what was
# flushed survives its restart) is killed with -9 and restarted while the
# gateway holds writes it acknowledged and nobody flushed.  The NBD FLUSH
# that should cover them must fail with EIO, never succeed; the flushed
# data is still there; the unflushed data is really gone (so the test
# tested something); a later write + FLUSH succeeds.  The control case: a
# restart with nothing unflushed gives a FLUSH that succeeds.
# Then with two clients of one export: the loss is reported to each
# connection (as errseq(9) reports a writeback error to each open file),
# not once to whichever flushes first: a client whose writes were lost
# must never get a successful flush after another client took the EIO.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:flush
mkdir -p "$tmp/disk"
tgt_start a "" --persist "$tmp/disk" --vwc -s 0 --subsys "$A:32M"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"

restart() { # restart: kill -9, start again, wait until the gateway is back
	local n
	n=$(grep -c 'path 0 live again' "$tmp/gw.log")
	tgt_kill9 a
	tgt_start a "" --persist "$tmp/disk" --vwc -s "$port" --subsys "$A:32M"
	# Not a timing assertion (the flush semantics are): a generous wait
	# by this client's clock, which a busy machine slows.
	for _ in $(seq 1 600); do
		[ "$(grep -c 'path 0 live again' "$tmp/gw.log")" -gt "$n" ] && return 0
		sleep 0.1
	done
	fail "the gateway did not reconnect within 60 s"
}

"$NBDPY" "$IO" write "$S" 0 64 1 || fail "write"
[ "$("$NBDPY" "$IO" flush "$S")" = ok ] || fail "first flush"
# Control: nothing unflushed across the restart -> the flush succeeds.
restart
r=$("$NBDPY" "$IO" flush "$S")
echo "flush after a restart with nothing unflushed: $r"
[ "$r" = ok ] || fail "flush after a clean restart: $r"

"$NBDPY" "$IO" write "$S" 64 64 2 || fail "write"
restart
r=$("$NBDPY" "$IO" flush "$S")
echo "flush covering writes lost with the cache: $r"
[ "$r" = EIO ] || fail "the flush covering lost writes returned '$r', not EIO"
grep -q 'acknowledged writes not flushed; the next flush reports EIO' "$tmp/gw.log" ||
	fail "the loss was not logged"
kept=$("$NBDPY" "$IO" check "$S" 0 64 1)
lost=$("$NBDPY" "$IO" check "$S" 64 64 2)
echo "flushed blocks intact: $kept/64, unflushed blocks still there: $lost/64"
[ "$kept" = 64 ] || fail "flushed data lost"
[ "$lost" = 0 ] || fail "the target did not lose its cache ($lost blocks kept): test broken"

"$NBDPY" "$IO" write "$S" 64 64 3 || fail "write"
r=$("$NBDPY" "$IO" flush "$S")
[ "$r" = ok ] || fail "flush after the loss was reported: $r"

# Two clients: A writes and does not flush, the target loses its cache, B
# flushes first (EIO), then A (EIO too, and only once), then a client
# that connects afterwards (nothing owed to it).
coproc SESS { exec "$NBDPY" "$IO" session "$S"; }
# bash unsets SESS_PID once it reaps the coprocess: keep our own copy.
sess_pid=$SESS_PID
ask() { # ask "NAME CMD ARGS": prints the answer line
	echo "$1" >&"${SESS[1]}"
	local a
	read -r -t 60 a <&"${SESS[0]}" || fail "session: no answer to '$1'"
	echo "$a"
}
for c in "a connect" "b connect" "a write 128 64 5"; do
	[ "$(ask "$c")" = ok ] || fail "session: $c"
done
restart
rb=$(ask "b flush")
ra=$(ask "a flush")
ra2=$(ask "a flush")
echo "two clients after the loss: B's flush $rb, A's flush $ra, A's next flush $ra2"
[ "$rb" = EIO ] || fail "B's flush after the loss returned '$rb', not EIO"
[ "$ra" = EIO ] || fail "A's writes were lost and A's flush returned '$ra' (B took the only EIO)"
[ "$ra2" = ok ] || fail "A's second flush after the loss was reported: $ra2"
[ "$(ask "c connect")" = ok ] || fail "session: c connect"
rc=$(ask "c flush")
[ "$rc" = ok ] || fail "a client that connected after the loss was reported got '$rc'"
lost=$("$NBDPY" "$IO" check "$S" 128 64 5)
[ "$lost" = 0 ] || fail "the target did not lose A's writes ($lost blocks kept): test broken"

# A client that dies without having heard of the loss of its writes (its
# reconnect resends the flush): the next client to connect is told.
for c in "d connect" "d write 256 64 7" "e connect"; do
	[ "$(ask "$c")" = ok ] || fail "session: $c"
done
restart
re=$(ask "e flush")
[ "$(ask "d drop")" = ok ] || fail "session: d drop"
[ "$(ask "f connect")" = ok ] || fail "session: f connect"
rf=$(ask "f flush")
rf2=$(ask "f flush")
echo "a client died untold: E's flush $re, the next client's flush $rf, then $rf2"
[ "$re" = EIO ] || fail "E's flush after the loss: $re"
[ "$rf" = EIO ] || fail "D died unaware of its lost writes and the next client's flush said '$rf'"
[ "$rf2" = ok ] || fail "the next client's second flush: $rf2"
exec {SESS[1]}>&-
wait "$sess_pid" 2> /dev/null
gw_alive
gw_stop
echo pass
