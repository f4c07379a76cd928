#!/usr/bin/env bash
# A discovery controller whose log loses entries: paths no longer listed
# are kept for status, the most recent 256 of them.  Before, every entry a
# log ever named stayed for the life of the process (and in every scan of
# the list), so a controller that invented new ports at each change grew
# the gateway's memory and reactor 0's work without bound (found by a
# hostile review).  300 subsystems on two ports, both ports hidden in turn:
# 600 paths unlisted, 256 kept.
set -u
. "$TOP/tests/func/resil/lib.sh"
need jq
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
args=()
for i in $(seq 300); do args+=(--subsys "nqn.2026-01.io.nvmf-gateway:unl-$i:64K"); done
tgt_start t "" -s "$p1" -s "$p2" "${args[@]}"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF
st() { "$GW" status -s "$tmp/gw.control" -o json; }
count() { st | jq "[.discovered[] | select(.listed == $1)] | length"; }
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
wait_for 30 '[ "$(count true)" = 600 ]' || fail "not all 600 paths listed: $(count true)"
ctl t disc-port 2 hide > /dev/null
wait_for 30 '[ "$(count true)" = 300 ]' || fail "port 2's paths still listed: $(count true)"
ctl t disc-port 1 hide > /dev/null
wait_for 30 '[ "$(count true)" = 0 ]' || fail "port 1's paths still listed: $(count true)"
echo "unlisted paths kept: $(count false) of 600 (bound 256)"
[ "$(count false)" = 256 ] || fail "$(count false) unlisted paths kept, want the 256 most recent"
# The most recent are port 1's.
[ "$(st | jq --arg p "$p1" '[.discovered[] | select(.trsvcid == $p)] | length')" = 256 ] ||
	fail "the paths kept are not the most recently unlisted"
ctl t disc-port 1 show > /dev/null
wait_for 30 '[ "$(count true)" = 300 ]' || fail "port 1's paths not listed again: $(count true)"
gw_alive
gw_stop_within 30
echo pass
