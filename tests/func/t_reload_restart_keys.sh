#!/usr/bin/env bash
# A reload that changes keys only a restart applies (gateway.reactors,
# gateway.nbd_interface) keeps the targets and exports that merely inherit
# a default from them (a target's nr_io_queues and an export's
# nbd.connections come from reactors, its nbd.interface from
# nbd_interface): the reply names the keys in restart_needed and counts
# nothing as changed; the target keeps its controller (same cntlid, no
# reconnect) and the export its listener.  Before, the defaults were
# resolved against the new file's keys, so the reload reconnected the
# target and re-added every export ("2 changed"): for a /dev/nbdN export a
# disconnect under its users.  export-add, which loads the file the same
# way, took the target as "not what the file says now".  An export's own
# nbd.interface still applies at the reload.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq

target_start nqn.2014-08.org.nvmf-gateway:rk-a:16M:512:2

# conf GATEWAY_KEYS EXPORTS
conf() {
	cat > "$tmp/gw.conf.new" << EOF
gateway = { $1 state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:rk-a";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( $2 );
EOF
	mv "$tmp/gw.conf.new" "$tmp/gw.conf"
}
EA="{ name = \"a\"; target = \"ta\"; nsid = 1; nbd = { listen = \"unix:$tmp/a.sock\"; }; }"
EB="{ name = \"b\"; target = \"ta\"; nsid = 2; nbd = { listen = \"unix:$tmp/b.sock\"; }; }"

conf 'reactors = 1;' "$EA"
gw_start run "$tmp/gw.conf"
cntlid=$(st '.targets[0].paths[0].cntlid')
[ "$cntlid" -gt 0 ] || fail "no cntlid for ta"
[ -S "$tmp/a.sock" ] || fail "no socket for a"
ino=$(stat -c %i "$tmp/a.sock")

# reactors 1 -> 2 and nbd_interface auto -> ioctl: nothing runs differently
conf 'reactors = 2; nbd_interface = "ioctl";' "$EA"
"$GW" reload -s "$ctl" -o json > "$tmp/reload1.json" || fail "reload 1: $(cat "$tmp/reload1.json")"
cat "$tmp/reload1.json"
jq -e '.added == 0 and .removed == 0 and .changed == 0 and .kept == 2' "$tmp/reload1.json" \
	> /dev/null || fail "reload 1 changed what inherits a restart-only key"
jq -e '.restart_needed | test("reactors") and test("nbd_interface")' "$tmp/reload1.json" \
	> /dev/null || fail "reload 1 does not say reactors and nbd_interface need a restart"
[ "$(st '.targets[0].paths[0].cntlid')" = "$cntlid" ] || fail "ta's cntlid changed"
[ "$(st '.targets[0].paths[0].reconnects')" = 0 ] || fail "ta reconnected"
[ "$(stat -c %i "$tmp/a.sock")" = "$ino" ] || fail "a's listener was made again"
[ "$(grep -c 'export a: NBD on' "$tmp/gw.log")" = 1 ] || fail "export a was started again"

# export-add under the same file: its target is the running one
conf 'reactors = 2; nbd_interface = "ioctl";' "$EA, $EB"
"$GW" export-add -s "$ctl" b > "$tmp/add.txt" 2>&1 || fail "export-add b: $(cat "$tmp/add.txt")"
[ -S "$tmp/b.sock" ] || fail "no socket for b"

# back to the running values: nothing to restart for, nothing changes
conf 'reactors = 1;' "$EA, $EB"
"$GW" reload -s "$ctl" -o json > "$tmp/reload2.json" || fail "reload 2: $(cat "$tmp/reload2.json")"
cat "$tmp/reload2.json"
jq -e '.changed == 0 and .kept == 3 and (has("restart_needed") | not)' "$tmp/reload2.json" \
	> /dev/null || fail "reload 2"

# an export's own nbd.interface is the export's key: it applies now
EA_IOCTL="{ name = \"a\"; target = \"ta\"; nsid = 1; nbd = { listen = \"unix:$tmp/a.sock\"; interface = \"ioctl\"; }; }"
conf 'reactors = 1;' "$EA_IOCTL, $EB"
"$GW" reload -s "$ctl" -o json > "$tmp/reload3.json" || fail "reload 3: $(cat "$tmp/reload3.json")"
cat "$tmp/reload3.json"
jq -e '.changed == 1 and .kept == 2' "$tmp/reload3.json" > /dev/null ||
	fail "reload 3: a's own nbd.interface did not change it"
[ "$(st '.targets[0].paths[0].cntlid')" = "$cntlid" ] || fail "ta's cntlid changed at reload 3"

gw_stop
echo "reload with restart-only keys: OK"
