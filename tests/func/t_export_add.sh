#!/usr/bin/env bash
# export-remove and export-add over the control socket: the export's NBD
# socket and FUSE file go and come back, its data is still there, the
# other export on the same target is untouched; refusals for unknown,
# running and out-of-date exports.  Then a target whose paths were given up
# (ctrl_loss_tmo over while the test target was down) comes back with a
# reload once the target is up again, and its export works again.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq nbdcopy nbdinfo python3

target_start nqn.2014-08.org.nvmf-gateway:ea-a:64M:512:2
cat > "$tmp/gw.conf" << EOF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:ea-a";
    reconnect_delay = 1; ctrl_loss_tmo = 3;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = (
  { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; },
  { name = "b"; target = "ta"; nsid = 2; nbd = { listen = "unix:$tmp/b.sock"; }; fuse = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
EOF
gw_start run "$tmp/gw.conf"
cntlid=$(st '.targets[0].paths[0].cntlid')

head -c 4M /dev/urandom > "$tmp/in"
nbdcopy "$tmp/in" "nbd+unix:///b?socket=$tmp/b.sock" || fail "write b"

"$GW" export-remove b -s "$ctl" | grep -qx ok || fail "export-remove b"
[ ! -S "$tmp/b.sock" ] || fail "b's socket is still there"
wait_for 3 test ! -e "$tmp/fuse/b" || fail "FUSE file b is still there"
st '.exports | map(.name) | join(",")' | grep -qx a || fail "exports after remove"
nbdinfo --size "nbd+unix:///a?socket=$tmp/a.sock" > /dev/null || fail "a after removing b"

"$GW" export-remove b -s "$ctl" 2> "$tmp/err" && fail "removing b twice"
grep -q 'no export named "b"' "$tmp/err" || fail "message: $(cat "$tmp/err")"
"$GW" export-add nosuch -s "$ctl" 2> "$tmp/err" && fail "adding an export not in the file"
grep -q 'has no export named "nosuch"' "$tmp/err" || fail "message: $(cat "$tmp/err")"
"$GW" export-add a -s "$ctl" 2> "$tmp/err" && fail "adding a running export"
grep -q 'running already' "$tmp/err" || fail "message: $(cat "$tmp/err")"

"$GW" export-add b -s "$ctl" | grep -qx ok || fail "export-add b"
[ -S "$tmp/b.sock" ] || fail "no socket for b after export-add"
# the kernel may keep the old entry for its 1 s entry timeout
fsize() { [ "$(stat -c %s "$tmp/fuse/b" 2> /dev/null)" = 67108864 ]; }
wait_for 5 fsize || { ls -la "$tmp/fuse"; stat "$tmp/fuse/b"; fail "FUSE file b after export-add"; }
nbdcopy "nbd+unix:///b?socket=$tmp/b.sock" "$tmp/out" || fail "read b"
cmp -n 4194304 "$tmp/in" "$tmp/out" || fail "b's data after export-add"
cmp -n 4194304 "$tmp/in" "$tmp/fuse/b" || fail "b's data through FUSE"
[ "$(st '.targets[0].paths[0].cntlid')" = "$cntlid" ] || fail "the target reconnected"
[ "$(st .exports_running)" = 2 ] || fail "exports running"

# export-add takes the file as it is now: a changed target is refused
sed 's/reconnect_delay = 1/reconnect_delay = 2/' "$tmp/gw.conf" > "$tmp/gw.conf.new"
cp "$tmp/gw.conf" "$tmp/gw.conf.good"
mv "$tmp/gw.conf.new" "$tmp/gw.conf"
"$GW" export-remove b -s "$ctl" > /dev/null || fail "export-remove b (2)"
"$GW" export-add b -s "$ctl" 2> "$tmp/err" && fail "export-add on a changed target"
grep -q 'apply the file with reload' "$tmp/err" || fail "message: $(cat "$tmp/err")"
mv "$tmp/gw.conf.good" "$tmp/gw.conf"
"$GW" export-add b -s "$ctl" | grep -qx ok || fail "export-add b (2)"

# ctrl_loss_tmo over: the target is given up; a reload after it is back
# re-attaches it, and the same export (same socket) works again.
kill "$tpid"
wait "$tpid" 2> /dev/null
tpid=''
wait_for 20 'test "$(st .targets[0].state)" = failed' || fail "target not failed: $(st '.targets[0].state')"
python3 - "$tmp/a.sock" << 'PY' && fail "I/O on a given-up target succeeded"
import nbd, sys
h = nbd.NBD()
h.connect_uri("nbd+unix:///a?socket=" + sys.argv[1])
h.pread(4096, 0)
PY
echo "given up: $(st '.targets[0].paths[0].state'), I/O fails"
target_start nqn.2014-08.org.nvmf-gateway:ea-a:64M:512:2
"$GW" reload -s "$ctl" > "$tmp/reload.txt" || fail "reload: $(cat "$tmp/reload.txt")"
cat "$tmp/reload.txt"
grep -q '1 re-attached' "$tmp/reload.txt" || fail "reload did not re-attach"
wait_for 20 'test "$(st .targets[0].state)" = live' || fail "target not live after reload"
nbdcopy "$tmp/in" "nbd+unix:///a?socket=$tmp/a.sock" || fail "write a after re-attach"
nbdcopy "nbd+unix:///a?socket=$tmp/a.sock" "$tmp/out2" || fail "read a after re-attach"
cmp -n 4194304 "$tmp/in" "$tmp/out2" || fail "a's data after re-attach"
echo "re-attached: $(st '.targets[0].state'), reconnects $(st '.targets[0].paths[0].reconnects')"

gw_stop
echo "export add/remove: OK"
