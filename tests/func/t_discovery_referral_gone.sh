#!/usr/bin/env bash
# A referral that its discovery log no longer lists (issue 19, review):
# its discovery controller, and the one its own log referred to, stop
# (connections closed, gone from status), and the loop protection holds
# before and after: the chain t -> u -> v is followed, v's referral back
# to t is refused as a loop, and once t lists u again the chain is
# followed again (the stopped controllers' keys were forgotten), while
# the loop back to t is still refused.  Before the fix u and v kept
# running (and reconnecting) for ever.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:refgone-a
pt=$(free_port) pu=$(free_port) pv=$(free_port)
tgt_start t "" -s "$pt" --subsys "$A:16M"
tgt_start u "" -s "$pu"
tgt_start v "" -s "$pv"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pt"; reconnect_delay = 1; } );
CONF
st() { "$GW" status -s "$tmp/gw.control" -o json; }
nctrl() { st | jq '.discovery | length'; }
conns() { ctl "$1" stats | sed -n 's/.* conns=\([0-9]*\).*/\1/p'; }

ctl u disc-referral 127.0.0.1 "$pv" > /dev/null
ctl v disc-referral 127.0.0.1 "$pt" > /dev/null
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
wait_for 10 '[ "$(st | jq -r ".discovery[0].state")" = watching ]' ||
	fail "the discovery controller is not watching: $(st | jq -c .discovery)"
ctl t disc-referral 127.0.0.1 "$pu" > /dev/null
gw_wait "following referral to tcp 127.0.0.1:$pu (depth 1)" 1 15 > /dev/null ||
	fail "the referral to u was not followed"
gw_wait "following referral to tcp 127.0.0.1:$pv (depth 2)" 1 15 > /dev/null ||
	fail "u's referral to v was not followed"
gw_wait "discovery tcp:127.0.0.1:$pv: referral to tcp 127.0.0.1:$pt not followed: loop" 1 15 \
	> /dev/null || fail "v's referral back to t was not refused"
wait_for 10 '[ "$(nctrl)" = 3 ] && [ "$(conns u)" = 1 ] && [ "$(conns v)" = 1 ]' ||
	fail "not 3 controllers: $(st | jq -c .discovery), u conns $(conns u), v conns $(conns v)"

# t no longer refers to u: u and v stop, their connections close.
ctl t disc-referral-clear > /dev/null
gw_wait "discovery tcp:127.0.0.1:$pu: stopped: the discovery controller that referred to it no longer lists it" 1 15 \
	> /dev/null || fail "u was not stopped"
gw_wait "discovery tcp:127.0.0.1:$pv: stopped: the discovery controller that referred to it no longer lists it" 1 5 \
	> /dev/null || fail "v (u's referral) was not stopped"
wait_for 10 '[ "$(nctrl)" = 1 ] && [ "$(conns u)" = 0 ] && [ "$(conns v)" = 0 ]' ||
	fail "still running: $(st | jq -c .discovery), u conns $(conns u), v conns $(conns v)"
sleep 2 # two reconnect delays: nothing comes back by itself
[ "$(conns u)" = 0 ] && [ "$(conns v)" = 0 ] || fail "a stopped referral reconnected"

# Listed again: followed again, and the loop is still refused.
ctl t disc-referral 127.0.0.1 "$pu" > /dev/null
wait_for 15 '[ "$(grep -c "following referral to tcp 127.0.0.1:$pv (depth 2)" "$tmp/gw.log")" = 2 ]' ||
	fail "the chain was not followed again"
wait_for 15 '[ "$(grep -c "referral to tcp 127.0.0.1:$pt not followed: loop" "$tmp/gw.log")" = 2 ]' ||
	fail "v's referral back to t was not refused the second time"
wait_for 10 '[ "$(nctrl)" = 3 ]' || fail "controllers: $(st | jq -c .discovery)"
gw_alive
# Removed again and the daemon stopped at once, possibly while those
# controllers close: the stop waits for them too and ends cleanly.
ctl t disc-referral-clear > /dev/null
gw_stop
! grep -q 'invariant broken\|ERROR: AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/gw.log" ||
	fail "sanitizer report: $(grep -m3 'invariant broken\|AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/gw.log")"
echo pass
