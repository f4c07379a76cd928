#!/usr/bin/env bash
# Discovery that keeps running (issue 19), against the test target's
# discovery subsystem, on the reactor backend NVMF_GATEWAY_REACTOR_BACKEND
# names (the suite's default, or epoll):
# - a subsystem the target adds to its log at run time (disc-show, with the
#   change event) is in `status` within seconds, by the gateway's clock,
#   and the hand-written export b of target tb, configured by subsystem
#   NQN without paths, comes up on the paths discovery found (both ports:
#   one multipath target) and serves;
# - a subsystem removed from the log keeps its live path: export a still
#   serves through it, and status says it is no longer listed;
# - a referral to the discovery controller itself, and a referral to a
#   second port whose log refers back (A -> B -> A), are not followed in
#   a loop: the log says so and the controller count stays 2;
# - the target restarted: the discovery controller reconnects by itself
#   and reads the new log (the subsystem it lost is no longer listed);
# - the daemon stops cleanly with the discovery controllers connected.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:disc-a
B=nqn.2026-01.io.nvmf-gateway:disc-b
C=nqn.2026-01.io.nvmf-gateway:disc-c
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
tgt_start t "" -s "$p1" -s "$p2" --subsys "$A:16M" --subsys "$B:16M" --subsys "$C:16M"
ctl t disc-hide "$B" > /dev/null
ctl t disc-hide "$C" > /dev/null

cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; } ); },
  { name = "tb"; subnqn = "$B"; reconnect_delay = 1; } );
exports = ( { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; },
  { name = "b"; target = "tb"; nsid = 1; nbd = { listen = "unix:$tmp/b.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF

st() { "$GW" status -s "$tmp/gw.control" -o json; }
# listed NQN: the "listed" flag of the subsystem's path on port p1.
listed() { st | jq -r --arg n "$1" --arg p "$p1" \
	'[.discovered[] | select(.subnqn == $n and .trsvcid == $p) | .listed | tostring] | first // "none"'; }

GW_CONTROL="$tmp/gw.control" SOCKS="$tmp/a.sock" gw_start run "$tmp/gw.conf"
wait_for 10 '[ "$(st | jq -r ".discovery[0].state")" = watching ]' ||
	fail "the discovery controller is not watching: $(st | jq -c .discovery)"
[ "$(st | jq -r '.discovery[0].change_events')" = true ] || fail "change events not enabled"
[ "$(listed "$A")" = true ] || fail "$A not discovered: $(st | jq -c .discovered)"
[ "$(listed "$B")" = none ] || fail "$B discovered while hidden"
[ "$(st | jq -r '.targets[1].state')" = "waiting for target" ] || fail "tb is not waiting: $(st | jq -c .targets)"
[ "$(st | jq -r '.exports[1].state')" = "waiting for target" ] || fail "b is not waiting"
[ -e "$tmp/b.sock" ] && fail "b listens before its target is discovered"
gw_wait "target tb: no paths configured; waiting for discovery to list $B" 1 5 > /dev/null ||
	fail "no waiting line for tb"

# A subsystem added at run time: seen through the change event.
t0=$(gw_at 'discovery tcp:127.0.0.1:'"$p1"': connected')
ctl t disc-show "$B" > /dev/null
at=$(gw_wait "discovery tcp:127.0.0.1:$p1: subsystem $B: path tcp 127.0.0.1:$p1\$" 1 15) ||
	fail "the new subsystem was not seen"
echo "$B seen $(echo "$at - $t0" | bc -l) s after the controller connected"
[ "$(listed "$B")" = true ] || fail "$B not in status: $(st | jq -c .discovered)"
[ "$(st | jq -r '.discovery[0].events')" -ge 1 ] || fail "no event counted"
"$GW" status -s "$tmp/gw.control" > "$tmp/status.txt"
grep -q "^$B  *tcp  *127.0.0.1:$p1  *yes" "$tmp/status.txt" || fail "human status: $(cat "$tmp/status.txt")"
wait_for 15 '[ -S "$tmp/b.sock" ]' || fail "export b did not come up: $(st | jq -c '.targets[1]')"
gw_wait "export b: serving (its target was discovered)" 1 5 > /dev/null || fail "no serving line for b"
[ "$(st | jq '.targets[1].paths | length')" = 2 ] || fail "tb paths: $(st | jq -c '.targets[1].paths')"
"$NBDPY" "$IO" verify "$tmp/b.sock" 1 > /dev/null || fail "export b does not serve"
# A reload of the unchanged file keeps tb and b as they are: the paths
# discovery gave tb are not a change of the file (review: every reload
# stopped such a target and its exports).
"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
cat "$tmp/reload.out"
grep -q " 0 changed," "$tmp/reload.out" || fail "a reload of the unchanged file changed something"
grep -q "export b: removed\|target tb: removed" "$tmp/gw.log" && fail "a reload of the unchanged file took tb or b down"
[ "$(st | jq '.targets[1].paths | length')" = 2 ] || fail "tb lost its paths on reload: $(st | jq -c '.targets[1]')"
"$NBDPY" "$IO" verify "$tmp/b.sock" 1 > /dev/null || fail "export b does not serve after the reload"
# A subsystem nothing is configured for: reported, one new target.
ctl t disc-show "$C" > /dev/null
gw_wait "new subsystem $C at tcp 127.0.0.1:$p1; no target configured for it" 1 15 > /dev/null ||
	fail "the unconfigured subsystem was not reported"
gw_wait "subsystem $C: path tcp 127.0.0.1:$p2\$" 1 5 > /dev/null || fail "its second port"
[ "$(grep -c "new subsystem $C" "$tmp/gw.log")" = 1 ] || fail "$C announced twice"

# An entry removed: the live path stays, export a serves.
ctl t disc-hide "$A" > /dev/null
gw_wait "subsystem $A: path tcp 127.0.0.1:$p1 no longer listed; a live connection to it stays" 1 15 \
	> /dev/null || fail "the removal was not seen"
[ "$(listed "$A")" = false ] || fail "$A still listed: $(st | jq -c .discovered)"
[ "$(st | jq -r '.targets[0].state')" = live ] || fail "target ta is not live: $(st | jq -c .targets)"
"$NBDPY" "$IO" verify "$tmp/a.sock" 1 > /dev/null || fail "export a does not serve after the removal"
grep -q "ta/path0: live -> " "$tmp/gw.log" && fail "the path of ta was touched"

# Referral loops: to itself, and to port 2 whose log (the same target's)
# refers to both ports.
ctl t disc-referral 127.0.0.1 "$p1" > /dev/null
gw_wait "referral to tcp 127.0.0.1:$p1 not followed: loop" 1 15 > /dev/null ||
	fail "the self-referral was not refused"
ctl t disc-referral 127.0.0.1 "$p2" > /dev/null
gw_wait "following referral to tcp 127.0.0.1:$p2 (depth 1)" 1 15 > /dev/null ||
	fail "the referral to port 2 was not followed"
gw_wait "discovery tcp:127.0.0.1:$p2: referral to tcp 127.0.0.1:$p1 not followed: loop" 1 15 \
	> /dev/null || fail "the referral back was not refused"
sleep 1
[ "$(st | jq '.discovery | length')" = 2 ] || fail "controllers: $(st | jq -c .discovery)"
[ "$(grep -c 'following referral' "$tmp/gw.log")" = 1 ] || fail "a referral was followed twice"

# The target restarts (B only now): the controllers reconnect by themselves.
tgt_kill9 t
wait_for 15 '[ "$(st | jq -r ".discovery[0].state")" = "waiting to reconnect" ]' ||
	fail "the loss was not noticed: $(st | jq -c .discovery)"
tgt_start t "" -s "$p1" -s "$p2" --subsys "$B:16M"
wait_for 20 '[ "$(st | jq -r ".discovery[0].connects")" = 2 ] &&
	[ "$(st | jq -r ".discovery[0].state")" = watching ]' ||
	fail "the discovery controller did not reconnect: $(st | jq -c .discovery)"
gw_wait "discovery tcp:127.0.0.1:$p1: connected again" 1 5 > /dev/null || fail "no reconnect line"
[ "$(listed "$B")" = true ] || fail "$B not listed after the restart"
[ "$(listed "$A")" = false ] || fail "$A listed after the restart"
gw_alive
gw_stop
echo "persistent discovery: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
