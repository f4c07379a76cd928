#!/usr/bin/env bash
# Live reload while fio verifies an NBD export that the reload leaves
# alone: `nvmf-gateway reload` removes one export and its target (its
# socket and FUSE file go), adds another on the untouched target and
# another on a new target; SIGHUP applies a second change.  The untouched
# export's I/O has no error, its controller keeps its cntlid and has no
# reconnect.  An invalid file is refused with FILE:LINE and changes
# nothing.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq fio nbdinfo python3

target_start nqn.2014-08.org.nvmf-gateway:rl-a:64M nqn.2014-08.org.nvmf-gateway:rl-b:32M \
	nqn.2014-08.org.nvmf-gateway:rl-c:32M:4096:2

# conf EXPORTS TARGETS: the file with these export and target blocks.
conf() {
	cat > "$tmp/gw.conf.new" << EOF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( $2 );
exports = ( $1 );
fuse = { mountpoint = "$tmp/fuse"; };
EOF
	mv "$tmp/gw.conf.new" "$tmp/gw.conf"
}
tgt() { # tgt NAME SUBSYS
	echo "{ name = \"$1\"; subnqn = \"nqn.2014-08.org.nvmf-gateway:$2\";
    paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; trsvcid = \"$port\"; } ); }"
}
TA=$(tgt ta rl-a) TB=$(tgt tb rl-b) TC=$(tgt tc rl-c)
EA="{ name = \"a\"; target = \"ta\"; nbd = { listen = \"unix:$tmp/a.sock\"; }; }"
EB="{ name = \"b\"; target = \"tb\"; nbd = { listen = \"unix:$tmp/b.sock\"; }; fuse = true; }"
EA2="{ name = \"a2\"; target = \"ta\"; nsid = 1; read_only = true; fuse = true; }"
EC="{ name = \"c\"; target = \"tc\"; nsid = 2; nbd = { listen = \"unix:$tmp/c.sock\"; }; fuse = true; }"

conf "$EA, $EB" "$TA, $TB"
gw_start run "$tmp/gw.conf"
[ -e "$tmp/fuse/b" ] || fail "no FUSE file b at start"
cntlid=$(st '.targets[0].paths[0].cntlid')
[ "$cntlid" -gt 0 ] || fail "no cntlid for ta"

# fio with verify on a for the whole test
fio --name=verify --ioengine=nbd --uri="nbd+unix:///a?socket=$tmp/a.sock" --rw=randwrite \
	--bs=4k --iodepth=16 --size=32M --time_based --runtime=12 --verify=crc32c \
	--verify_backlog=256 --verify_fatal=1 --verify_state_save=0 \
	--output-format=json --output="$tmp/fio.json" > "$tmp/fio.out" 2>&1 &
fpid=$!
# fio writing, by the gateway's count (not a fixed sleep: on a loaded host
# fio took over 2 s to start)
wait_for 60 '[ "$(st .exports[0].writes)" -gt 0 ]' || fail "fio is not writing"
w0=$(st '.exports[0].writes')

# reload 1: b and tb go; a2 (on ta) and c (on a new tc) come
conf "$EA, $EA2, $EC" "$TA, $TC"
"$GW" reload -s "$ctl" > "$tmp/reload1.txt" || fail "reload: $(cat "$tmp/reload1.txt")"
cat "$tmp/reload1.txt"
grep -q '3 added, 2 removed, 0 changed, 2 kept' "$tmp/reload1.txt" || fail "reload 1 summary"
[ ! -S "$tmp/b.sock" ] || fail "b's socket is still there"
[ -S "$tmp/c.sock" ] || fail "no socket for c"
wait_for 3 test ! -e "$tmp/fuse/b" || fail "FUSE file b is still there"
[ "$(stat -c %s "$tmp/fuse/a2")" = 67108864 ] || fail "FUSE file a2"
[ "$(stat -c %a "$tmp/fuse/a2")" = 400 ] || fail "a2 is read-only"
[ "$(stat -c %s "$tmp/fuse/c")" = 33554432 ] || fail "FUSE file c"
[ "$(nbdinfo --size "nbd+unix:///c?socket=$tmp/c.sock")" = 33554432 ] || fail "nbdinfo c"
# a2 sees what fio writes on a: the same namespace, the same controllers
dd if="$tmp/fuse/a2" of=/dev/null bs=1M count=4 status=none || fail "read of a2"
st '.exports | map(.name) | join(",")' | grep -qx 'a,a2,c' || fail "exports after reload 1"
st '.targets | map(.name) | join(",")' | grep -qx 'ta,tc' || fail "targets after reload 1"
[ "$(st .reloads)" = 1 ] || fail "reload count"

# an invalid file: refused with FILE:LINE, nothing changes
cp "$tmp/gw.conf" "$tmp/gw.conf.good"
cat > "$tmp/gw.conf" << EOF
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( $TA );
exports = ( { name = "a"; target = "ta"; nbd = { listen = "unix:$tmp/a.sock"; }; },
  { name = "x"; target = "nosuch"; fuse = true; } );
EOF
"$GW" reload -s "$ctl" 2> "$tmp/err" && fail "an invalid file was accepted"
cat "$tmp/err"
grep -q "$tmp/gw.conf:[0-9]*: " "$tmp/err" || fail "no FILE:LINE in the error"
grep -q "nothing changed" "$tmp/err" || fail "the error does not say nothing changed"
grep -q "reload: $tmp/gw.conf:[0-9]*: " "$tmp/gw.log" || fail "FILE:LINE not logged"
st '.exports | map(.name) | join(",")' | grep -qx 'a,a2,c' || fail "the invalid file changed exports"
[ -S "$tmp/c.sock" ] || fail "the invalid file removed c"
mv "$tmp/gw.conf.good" "$tmp/gw.conf"

# reload 2 by SIGHUP: c goes with tc, b comes back with tb
conf "$EA, $EA2, $EB" "$TA, $TB"
kill -HUP "$GW_PID"
wait_for 20 test -S "$tmp/b.sock" || fail "SIGHUP did not bring b back"
wait_for 20 test ! -S "$tmp/c.sock" || fail "SIGHUP did not remove c"
wait_for 20 'test "$(st .reloads)" = 2' || fail "reload count after SIGHUP"
st '.exports | map(.name) | join(",")' | grep -qx 'a,a2,b' || fail "exports after SIGHUP"
[ -e "$tmp/fuse/b" ] || fail "FUSE file b after SIGHUP"

# the untouched export: its I/O never failed, its controller never moved
wait "$fpid"; frc=$?
cat "$tmp/fio.out"
[ $frc = 0 ] || { cat "$tmp/fio.json"; fail "fio on the untouched export failed"; }
jq -e '.jobs[0].error == 0 and .jobs[0].write.io_bytes > 0' "$tmp/fio.json" > /dev/null ||
	fail "fio reports an error"
echo "fio: $(jq -r '.jobs[0].write.iops | floor' "$tmp/fio.json") write IOPS, verify on, no error;" \
	"slowest write $(jq -r '.jobs[0].write.clat_ns.max / 1000000 | floor' "$tmp/fio.json") ms across two reloads"
"$GW" status -s "$ctl"
[ "$(st '.targets[0].name')" = ta ] || fail "ta moved"
[ "$(st '.targets[0].paths[0].cntlid')" = "$cntlid" ] || fail "ta's cntlid changed"
[ "$(st '.targets[0].paths[0].reconnects')" = 0 ] || fail "ta reconnected"
[ "$(st '.exports[0].errors')" = 0 ] || fail "errors on a"
[ "$(st '.exports[0].state')" = attached ] || fail "a is not attached"
w1=$(st '.exports[0].writes')
[ "$w1" -gt "$w0" ] || fail "a's counters restarted ($w0 -> $w1): not the same volume"
grep -q "reload: 2 added, 2 removed, 0 changed, 3 kept" "$tmp/gw.log" ||
	{ grep "reload:" "$tmp/gw.log"; fail "SIGHUP reload summary"; }

gw_stop
echo "reload: OK"
