#!/usr/bin/env bash
# Exports from a policy (issue 19, auto_export), against the test target's
# discovery subsystem and ns-* knobs, on the reactor backend
# NVMF_GATEWAY_REACTOR_BACKEND names (the suite's default, or epoll).  The
# daemon starts with only a discovery entry and a policy:
# - the subsystem the policy's glob matches becomes a target (paths from
#   discovery), its active namespace an NBD socket export that serves, and
#   status says it came from auto_export[0]; a subsystem the glob does not
#   match is left alone;
# - ns-add of a second namespace (Namespace Attribute Changed) makes a
#   second export appear, ns-remove takes it away again;
# - a reload of the unchanged file keeps the auto export; a reload without
#   the policy removes it and the discovered target;
# - then, restarted with a configured target too: hand-written exports
#   take precedence (a namespace exported by hand is not auto-exported; an
#   auto name that a hand-written export has is logged and skipped), the
#   other namespaces of the configured target are auto-exported.
set -u
. "$TOP/tests/func/resil/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:auto-a
X=nqn.2026-01.io.nvmf-gateway:other-x
C=nqn.2026-01.io.nvmf-gateway:auto-c
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
tgt_start t "" -s "$p1" -s "$p2" --subsys "$A:16M:512:2" --subsys "$X:16M" --subsys "$C:16M:512:4"
ctl t disc-hide "$C" > /dev/null
# nsid 2 is not there when the gateway comes: added later, with the event.
ctl t ns-remove "$A" 2 noaen > /dev/null

policy='auto_export = ( { subnqn = "nqn.2026-01.io.nvmf-gateway:auto-*"; name = "%n-%i";
    nbd = { listen = "unix:'"$tmp"'/%n-%i.sock"; }; } );'
conf() {
	cat << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
$1
CONF
}
conf "$policy" > "$tmp/gw.conf"

st() { "$GW" status -s "$tmp/gw.control" -o json; }
origin() { st | jq -r --arg n "$1" '[.exports[] | select(.name == $n) | .origin] | first // "none"'; }

GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
t0=$(gw_wait "discovery tcp:127.0.0.1:$p1: connected" 1 15) || fail "discovery did not connect"
gw_wait "target auto-a: made for discovered subsystem $A" 1 15 > /dev/null ||
	fail "no target made for $A"
at=$(gw_wait "export auto-a-1: serving nsid 1 of target auto-a (auto_export\[0\])" 1 20) ||
	fail "export auto-a-1 did not come up: $(st | jq -c '.targets, .exports')"
echo "auto-a-1 served $(echo "$at - $t0" | bc -l) s after discovery connected"
[ -S "$tmp/auto-a-1.sock" ] || fail "no socket for auto-a-1"
"$NBDPY" "$IO" verify "$tmp/auto-a-1.sock" 1 > /dev/null || fail "export auto-a-1 does not serve"
[ "$(origin auto-a-1)" = "auto_export[0]" ] || fail "origin: $(st | jq -c .exports)"
"$GW" status -s "$tmp/gw.control" > "$tmp/status.txt"
grep -Eq '^auto-a-1 +nbd +auto-a +1 +.* auto_export\[0\] ' "$tmp/status.txt" ||
	fail "human status: $(cat "$tmp/status.txt")"
[ "$(st | jq '[.exports[]] | length')" = 1 ] || fail "exports: $(st | jq -c .exports)"
# Both ports discovery lists: one multipath target, as a configured one.
[ "$(st | jq -c '[.targets[] | select(.name == "auto-a") | .origin, (.paths | length)]')" = \
	'["discovery",2]' ] || fail "target auto-a: $(st | jq -c .targets)"
[ "$(st | jq -r --arg n "$A" '[.discovered[] | select(.subnqn == $n) | .target] | unique | .[]')" = \
	auto-a ] || fail "discovered: $(st | jq -c .discovered)"
grep -q "made for discovered subsystem $X" "$tmp/gw.log" && fail "$X matched the policy"

# A namespace added at run time, then removed.
t1=$(mono)
ctl t ns-add "$A" 2 > /dev/null
at=$(gw_wait "export auto-a-2: serving nsid 2 of target auto-a (auto_export\[0\])" 1 30) ||
	fail "export auto-a-2 did not come up: $(st | jq -c .exports)"
ev=$(gw_at "auto_export\[0\]: nsid 2 of target auto-a")
echo "auto-a-2 serving at $at (started at $ev; ns-add sent at $t1)"
"$NBDPY" "$IO" verify "$tmp/auto-a-2.sock" 1 > /dev/null || fail "export auto-a-2 does not serve"
[ "$(origin auto-a-2)" = "auto_export[0]" ] || fail "origin 2: $(st | jq -c .exports)"
ctl t ns-remove "$A" 2 > /dev/null
gw_wait "export auto-a-2: removed" 1 30 > /dev/null || fail "export auto-a-2 was not taken down"
wait_for 5 test ! -S "$tmp/auto-a-2.sock" || fail "auto-a-2's socket is still there"
sleep 2
[ "$(origin auto-a-2)" = none ] || fail "auto-a-2 came back: $(st | jq -c .exports)"
"$NBDPY" "$IO" verify "$tmp/auto-a-1.sock" 1 > /dev/null || fail "auto-a-1 suffered from the removal"

# Reloads: unchanged keeps it; without the policy it goes with its target.
"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
grep -q "export auto-a-1: removed" "$tmp/gw.log" && fail "a reload of the unchanged file took auto-a-1 down"
[ "$(origin auto-a-1)" = "auto_export[0]" ] || fail "after reload: $(st | jq -c .exports)"
# A changed policy: its export is made again, the new way.
conf "${policy/nbd = /read_only = true; nbd = }" > "$tmp/gw.conf"
"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload 1: $(cat "$tmp/reload.out")"
gw_wait "reload: export auto-a-1 (auto_export): removed: its policy changed" 1 10 > /dev/null ||
	fail "a changed policy kept its export as it was"
gw_wait "export auto-a-1: serving nsid 1 of target auto-a" 2 10 > /dev/null ||
	fail "auto-a-1 was not made again: $(st | jq -c .exports)"
[ "$(st | jq -r '.exports[] | select(.name == "auto-a-1") | .read_only')" = true ] ||
	fail "auto-a-1 is not read-only now: $(st | jq -c .exports)"
conf "" > "$tmp/gw.conf"
"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload 2: $(cat "$tmp/reload.out")"
gw_wait "export auto-a-1: removed" 1 20 > /dev/null || fail "the policy went but auto-a-1 stays"
gw_wait "target auto-a: removed" 1 20 > /dev/null || fail "the discovered target stays"
[ "$(st | jq '[.exports[]] | length')" = 0 ] || fail "exports left: $(st | jq -c .exports)"
! grep -q 'ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log" || fail "sanitizer report"
gw_alive
gw_stop

# Hand-written exports first.  nsid 1 of C: by hand as c1; nsid 2: by hand
# under the name the policy would give nsid 3; nsid 3: skipped, logged;
# nsid 4: auto-exported on the configured target.
mv "$tmp/gw.log" "$tmp/gw1.log"
# With FUSE where the host has it: the policy's exports get a file too.
fuse=false fuse_conf=
if [ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && command -v fusermount3 > /dev/null; then
	fuse=true
	mkdir -p "$tmp/fuse"
	cleanup_fn unmount_lazy "$tmp/fuse"
	fuse_conf="fuse = { mountpoint = \"$tmp/fuse\"; };"
fi
conf "${policy/nbd = /fuse = $fuse; nbd = }
$fuse_conf
targets = ( { name = \"tc\"; subnqn = \"$C\"; reconnect_delay = 1;
    paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; trsvcid = \"$p1\"; } ); } );
exports = ( { name = \"c1\"; target = \"tc\"; nsid = 1; nbd = { listen = \"unix:$tmp/c1.sock\"; }; },
  { name = \"auto-c-3\"; target = \"tc\"; nsid = 2; nbd = { listen = \"unix:$tmp/c2.sock\"; }; } );" \
	> "$tmp/gw.conf"
ctl t ns-add "$A" 2 > /dev/null
ctl t disc-hide "$A" > /dev/null
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
gw_wait "auto_export\[0\]: nsid 3 of target tc would be export auto-c-3, a name another export has" \
	1 15 > /dev/null || fail "the name clash was not logged: $(st | jq -c .exports)"
gw_wait "export auto-c-4: serving nsid 4 of target tc (auto_export\[0\])" 1 15 > /dev/null ||
	fail "nsid 4 of the configured target was not auto-exported: $(st | jq -c .exports)"
"$NBDPY" "$IO" verify "$tmp/auto-c-4.sock" 1 > /dev/null || fail "export auto-c-4 does not serve"
if $fuse; then
	wait_for 10 test -e "$tmp/fuse/auto-c-4" || fail "no FUSE file for auto-c-4: $(ls "$tmp/fuse")"
	[ "$(stat -c %s "$tmp/fuse/auto-c-4")" = $((16 * 1024 * 1024)) ] || fail "FUSE auto-c-4 size"
	[ -e "$tmp/fuse/c1" ] && fail "hand-written c1 got a FUSE file"
	echo "FUSE: $(ls "$tmp/fuse" | tr '\n' ' ')"
fi
sleep 2
[ "$(grep -c "would be export auto-c-3" "$tmp/gw.log")" = 1 ] || fail "the clash is not logged once"
[ "$(st | jq -c '[.exports[] | [.name, .nsid, .origin]]')" = \
	'[["c1",1,"config"],["auto-c-3",2,"config"],["auto-c-4",4,"auto_export[0]"]]' ] || fail "exports: $(st | jq -c .exports)"
"$NBDPY" "$IO" verify "$tmp/c1.sock" 1 > /dev/null || fail "export c1 does not serve"
# export-remove of a policy export: not made again until a reload.
"$GW" export-remove auto-c-4 -s "$tmp/gw.control" | grep -qx ok || fail "export-remove auto-c-4"
gw_wait "export auto-c-4: removed" 1 10 > /dev/null || fail "auto-c-4 not removed"
sleep 2
[ "$(origin auto-c-4)" = none ] || fail "auto-c-4 came back after export-remove"
! $fuse || [ ! -e "$tmp/fuse/auto-c-4" ] || fail "auto-c-4's FUSE file stays"
"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
gw_wait "export auto-c-4: serving nsid 4 of target tc" 2 10 > /dev/null ||
	fail "auto-c-4 did not come back at the reload: $(st | jq -c .exports)"
gw_alive
gw_stop
! grep -q 'ERROR: AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/gw.log" "$tmp/gw1.log" ||
	fail "sanitizer report"
echo "auto_export: ok (${NVMF_GATEWAY_REACTOR_BACKEND:-default} backend)"
