#!/usr/bin/env bash
# `systemctl reload` after gateway.control was changed in the file: the
# daemon keeps its socket until a restart (control is a restart-only key),
# so `reload -c FILE` used to ask the file's new socket, where nobody
# listens, and failed without reloading.  The daemon records its socket in
# $RUNTIME_DIRECTORY (systemd sets it, and $MAINPID, for ExecReload); the
# reload run as systemd runs it asks there, says so, and the reply names
# control in restart_needed.  Without $MAINPID (an admin's shell), or with
# another process's, the file's socket is asked as before.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq

target_start nqn.2014-08.org.nvmf-gateway:cm-a:16M
mkdir -p "$tmp/run"
# conf CONTROL EXPORTS
conf() {
	cat > "$tmp/gw.conf.new" << EOF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$1"; };
targets = ( { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:cm-a";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( $2 );
EOF
	mv "$tmp/gw.conf.new" "$tmp/gw.conf"
}
EA="{ name = \"a\"; target = \"ta\"; nbd = { listen = \"unix:$tmp/a.sock\"; }; }"
EB="{ name = \"b\"; target = \"ta\"; nbd = { listen = \"unix:$tmp/b.sock\"; }; }"

conf "$ctl" "$EA"
export RUNTIME_DIRECTORY=$tmp/run
gw_start run "$tmp/gw.conf"
unset RUNTIME_DIRECTORY
rec=$tmp/run/control.path
[ "$(sed -n 1p "$rec")" = "$GW_PID" ] && [ "$(sed -n 2p "$rec")" = "$ctl" ] ||
	fail "the record: $(cat "$rec" 2>&1)"

conf "$tmp/moved.sock" "$EA, $EB"
# As an admin's shell runs it: the file's socket, which nobody serves.
out=$("$GW" reload -c "$tmp/gw.conf" 2>&1) && fail "reload reached a socket nobody serves: $out"
echo "$out"
echo "$out" | grep -q "cannot reach the gateway at $tmp/moved.sock" || fail "reload: $out"
# Another process's record is not taken.
out=$(RUNTIME_DIRECTORY=$tmp/run MAINPID=1 "$GW" reload -c "$tmp/gw.conf" 2>&1) &&
	fail "reload with another MAINPID: $out"
# As systemd runs ExecReload.
RUNTIME_DIRECTORY=$tmp/run MAINPID=$GW_PID "$GW" reload -c "$tmp/gw.conf" -o json \
	> "$tmp/reload.json" 2> "$tmp/reload.err" || fail "reload: $(cat "$tmp/reload.json" "$tmp/reload.err")"
cat "$tmp/reload.err" "$tmp/reload.json"
grep -q "the file's gateway.control is $tmp/moved.sock, the running gateway (pid $GW_PID) listens on $ctl until it restarts" \
	"$tmp/reload.err" || fail "no notice"
jq -e '.added == 1 and (.restart_needed | test("control"))' "$tmp/reload.json" > /dev/null ||
	fail "the reload did not add b or name control"
[ -S "$tmp/b.sock" ] || fail "no socket for b"
[ ! -e "$tmp/moved.sock" ] || fail "the daemon moved its socket"
gw_stop
echo "reload with a changed gateway.control: OK"
