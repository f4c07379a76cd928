#!/usr/bin/env bash
# auto_export's memory of what it set aside has no fixed cap (it had 256):
# - 9 subsystems of 32 namespaces whose names the policy cannot use (its
#   name template gives more than 64 characters): each of the 288 is logged once, and only
#   once however many scans pass;
# - then one export of a subsystem it can use, removed by hand
#   (export-remove): not made again until a reload, although hundreds of
#   others were set aside before it.
# Before the fix the list was full after 256: the rest were neither logged
# nor remembered (tried again every second), and a removed export came back
# a second later.
set -u
. "$TOP/tests/func/resil/lib.sh"

long=$(printf 'x%.0s' $(seq 1 18))
args=()
for i in $(seq 1 9); do
	args+=(--subsys "nqn.2026-01.io.nvmf-gateway:many-$i-$long:64K:512:32")
done
G=nqn.2026-01.io.nvmf-gateway:many-good
p1=$(free_port)
tgt_start t "" -s "$p1" "${args[@]}" --subsys "$G:16M"

cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
auto_export = ( { subnqn = "nqn.2026-01.io.nvmf-gateway:many-*"; name = "%n-%n-%n-%i";
    nbd = { listen = "unix:$tmp/%i-%t.sock"; }; } );
CONF
st() { "$GW" status -s "$tmp/gw.control" -o json; }
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
gw_wait "export many-good-many-good-many-good-1: serving nsid 1" 1 60 > /dev/null ||
	fail "the good one did not come up: $(st | jq -c .exports)"
n() { grep -c 'auto_export\[0\]: nsid [0-9]* of target .*not exported' "$tmp/gw.log"; }
wait_for 60 test "$(n)" -ge 288 || fail "set aside and logged: $(n) of 288"
sleep 3 # three more scans: nothing is logged again
[ "$(n)" = 288 ] || fail "logged $(n) times for 288 namespaces"
grep -q "out of memory for the list" "$tmp/gw.log" && fail "the set-aside list could not grow"

"$GW" export-remove many-good-many-good-many-good-1 -s "$tmp/gw.control" | grep -qx ok || fail "export-remove"
gw_wait "export many-good-many-good-many-good-1: removed" 1 10 > /dev/null || fail "not removed"
sleep 3
[ "$(st | jq '[.exports[]] | length')" = 0 ] || fail "came back: $(st | jq -c .exports)"
grep -c "export many-good-many-good-many-good-1: serving" "$tmp/gw.log" | grep -qx 1 || fail "the good one served again"
! grep -q 'ERROR: AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/gw.log" || fail "sanitizer report"
gw_alive
gw_stop
echo "auto_export many skips: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
