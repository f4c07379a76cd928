#!/usr/bin/env bash
# A target with all MP_MAX_PATHS (8) slots used takes a new port discovery
# lists into the slot of a deleted path, on the reactor backend
# NVMF_GATEWAY_REACTOR_BACKEND names:
# - target ta (paths from discovery) comes up on the 8 ports the test
#   target's log lists (port 9 is left out);
# - port 2 leaves the log and goes down: once its grace (ctrl_loss_tmo,
#   3 s here) is over its path is deleted;
# - port 9 is listed: it takes the deleted path's slot, connects and is
#   live, while a verify loop runs through it all without an error.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:slot-reuse
ports=() args=()
while [ ${#ports[@]} -lt 9 ]; do
	p=$(free_port)
	case " ${ports[*]} " in *" $p "*) continue ;; esac
	ports+=("$p")
	args+=(-s "$p")
done
p1=${ports[0]} p2=${ports[1]} p9=${ports[8]}
tgt_start t "" "${args[@]}" --subsys "$A:16M"
ctl t disc-port 9 hide > /dev/null

cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1; ctrl_loss_tmo = 3; } );
exports = ( { name = "e1"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF

st() { "$GW" status -s "$tmp/gw.control" -o json; }
states() { st | jq -r '[.targets[0].paths[] | .state] | join(",")'; }
idx_of() { st | jq -r --arg s "$1" '[.targets[0].paths[] | .trsvcid] | index($s)'; }

GW_CONTROL="$tmp/gw.control" SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
gw_wait "export e1: serving (its target was discovered)" 1 15 > /dev/null ||
	fail "e1 did not come up: $(st | jq -c .targets)"
wait_for 20 '[ "$(states)" = live,live,live,live,live,live,live,live ]' ||
	fail "ta does not have 8 live paths: $(st | jq -c '.targets[0].paths')"
i2=$(idx_of "$p2")
[ -n "$i2" ] && [ "$i2" != null ] || fail "no path for port 2: $(st | jq -c '.targets[0].paths')"

verify_start
sleep 1
ctl t disc-port 2 hide > /dev/null
gw_wait "target ta: path $i2: no longer listed by discovery; kept while its connection lasts" 1 15 \
	> /dev/null || fail "the unlisting was not applied"
ctl t port 2 down > /dev/null
gw_wait "target ta: path $i2 (tcp 127.0.0.1:$p2): .*deleting its controller" 1 30 > /dev/null ||
	fail "the lost unlisted path was not deleted: $(st | jq -c '.targets[0].paths')"

old_rc=$(st | jq -r ".targets[0].paths[$i2].reconnects")
[ "$old_rc" -gt 1 ] || fail "the deleted path made no reconnect attempts: $(st | jq -c ".targets[0].paths[$i2]")"
ctl t disc-port 9 show > /dev/null
gw_wait "target ta: path $i2 (tcp 127.0.0.1:$p2, deleted) gives its slot to a new address" 1 15 \
	> /dev/null || fail "port 9 did not take the deleted slot: $(st | jq -c '.targets[0].paths')"
gw_wait "target ta: path $i2 added: tcp 127.0.0.1:$p9" 1 5 > /dev/null ||
	fail "port 9 was not added as path $i2"
wait_for 15 '[ "$(states)" = live,live,live,live,live,live,live,live ]' ||
	fail "ta does not have 8 live paths again: $(st | jq -c '.targets[0].paths')"
[ "$(idx_of "$p9")" = "$i2" ] || fail "port 9 is not path $i2: $(st | jq -c '.targets[0].paths')"
# Its own first connect only, not the deleted path's $old_rc attempts.
[ "$(st | jq -r ".targets[0].paths[$i2].reconnects")" -le 1 ] ||
	fail "the new path kept the old one's counters: $(st | jq -c ".targets[0].paths[$i2]")"
sleep 1
verify_stop_ok
gw_alive
gw_stop
echo "discovery slot reuse: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
