#!/usr/bin/env bash
# A reload applies a changed `discovery` list (issue 19), on the reactor
# backend NVMF_GATEWAY_REACTOR_BACKEND names:
# - the entry for port 1 is replaced by one for port 2: the new controller
#   connects and watches, the removed one is stopped (the target's log
#   sees its controller go), and target ta (paths from discovery) and its
#   export stay up: a verify loop runs through both reloads without error;
# - a reload of the same file leaves the controller alone: no reconnect.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:disc-reload
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
tgt_start t "" -s "$p1" -s "$p2" --subsys "$A:16M"

conf() {
	cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$1"; reconnect_delay = 1; } );
CONF
}
st() { "$GW" status -s "$tmp/gw.control" -o json; }
reload() {
	"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
	grep -q " 0 changed," "$tmp/reload.out" || fail "the reload changed a target or export: $(cat "$tmp/reload.out")"
}

conf "$p1"
GW_CONTROL="$tmp/gw.control" SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
gw_wait "export e1: serving (its target was discovered)" 1 15 > /dev/null ||
	fail "e1 did not come up: $(st | jq -c .targets)"
wait_for 10 '[ "$(st | jq -r ".discovery[0].state")" = watching ]' ||
	fail "the discovery controller is not watching: $(st | jq -c .discovery)"
verify_start

# Port 1's entry out, port 2's in.
conf "$p2"
reload
gw_wait "discovery tcp:127.0.0.1:$p2: new in the configuration (reload); connecting" 1 5 \
	> /dev/null || fail "the added entry was not started"
gw_wait "discovery tcp:127.0.0.1:$p1: stopped: no longer in the configuration" 1 5 \
	> /dev/null || fail "the removed entry was not stopped"
gw_wait "discovery tcp:127.0.0.1:$p2: connected\$" 1 15 > /dev/null || fail "the added controller did not connect"
wait_for 15 '[ "$(st | jq -c "[.discovery[] | .name + \" \" + .state]")" = "[\"tcp:127.0.0.1:$p2 watching\"]" ]' ||
	fail "controllers after the reload: $(st | jq -c .discovery)"
wait_for 10 'grep -q "of nqn.2014-08.org.nvmexpress.discovery deleted" "$tmp/tgt-t.log"' ||
	fail "the target did not see the removed controller go"
[ "$(st | jq -r '.targets[0].state')" = live ] || fail "ta is not live: $(st | jq -c '.targets[0]')"
[ "$(st | jq -r ".exports[0].state")" = attached ] || fail "e1 is not attached: $(st | jq -c '.exports[0]')"

# The same file again: the controller is left as it is.
reload
gw_wait "discovery tcp:127.0.0.1:$p2: unchanged by the reload; left as it is (watching)" 1 5 \
	> /dev/null || fail "no line for the unchanged entry"
sleep 1
[ "$(st | jq -r '.discovery[0].connects')" = 1 ] || fail "the unchanged controller reconnected: $(st | jq -c .discovery)"
[ "$(grep -c "discovery tcp:127.0.0.1:$p2: connected" "$tmp/gw.log")" = 1 ] || fail "a second connect line"
verify_stop_ok
gw_alive
gw_stop
echo "discovery reload: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
