#!/usr/bin/env bash
# A control reload (what systemctl reload runs) that comes while another
# change is being applied waits for it and is then applied and answered;
# it used to be refused ("another change is being applied"), so a
# `systemctl reload` failed whenever an auto_export batch, an export-add or
# a reload was under way.  Here: reload 1 adds a target whose test target
# answers every command 400 ms late (its connect takes seconds); reloads 2
# and 2b are sent while reload 1 runs.  All succeed, in order: 2 and 2b
# are one reload after reload 1 (it reads the file when it runs, later than
# both asked), and both get its answer; before that change the second
# waiting reload was refused ("another change is being applied").  Reloads
# waiting during a stop are refused with a reason, not left hanging.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq

target_start nqn.2014-08.org.nvmf-gateway:rq-a:16M
# The slow one, on a port of its own.
rm -f "$tmp/ready2"
"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:rq-b:16M \
	--subsys nqn.2014-08.org.nvmf-gateway:rq-c:16M --delay 400 --control "$tmp/t2.ctl" \
	--ready-file "$tmp/ready2" \
	>> "$tmp/target2.log" 2>&1 &
tpid2=$!
cleanup_fn stop_var tpid2
wait_for 10 test -s "$tmp/ready2" || fail "the slow target did not start"
port2=$(grep -o '[0-9]*$' "$tmp/ready2" | head -1)

tgt() { # tgt NAME SUBSYS PORT
	echo "{ name = \"$1\"; subnqn = \"nqn.2014-08.org.nvmf-gateway:$2\";
    paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; trsvcid = \"$3\"; } ); }"
}
conf() {
	cat > "$tmp/gw.conf.new" << EOF2
gateway = { reactors = 2; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( $2 );
exports = ( $1 );
EOF2
	mv "$tmp/gw.conf.new" "$tmp/gw.conf"
}
EA="{ name = \"a\"; target = \"ta\"; nbd = { listen = \"unix:$tmp/a.sock\"; }; }"
EB="{ name = \"b\"; target = \"tb\"; nbd = { listen = \"unix:$tmp/b.sock\"; }; }"
conf "$EA" "$(tgt ta rq-a "$port")"
gw_start run "$tmp/gw.conf"

conf "$EA, $EB" "$(tgt ta rq-a "$port"), $(tgt tb rq-b "$port2")"
# Slow enough that reloads 2 and 2b (two client starts) surely come while
# reload 1 runs, on a loaded host and under ASan too.
"$T" --ctl "$tmp/t2.ctl" delay 1500 | grep -q ok || fail "delay 1500"
"$GW" reload -s "$ctl" > "$tmp/r1.out" 2>&1 &
r1=$!
cleanup_fn stop_var r1
# reload 1 is applying (tb connecting, slowly) when reload 2 comes
wait_for 20 'st ".targets[].name" | grep -qx tb' || fail "reload 1 did not start tb"
grep -q 'reload: 2 added' "$tmp/gw.log" && fail "reload 1 was done too soon for this test"
"$GW" reload -s "$ctl" > "$tmp/r2.out" 2>&1 &
r2=$!
cleanup_fn stop_var r2
wait_for 20 'grep -q "reload: queued until the change being applied is done" "$tmp/gw.log"' ||
	fail "reload 2 was not queued"
"$GW" reload -s "$ctl" > "$tmp/r2b.out" 2>&1 || fail "reload 2b while reload 1 ran: $(cat "$tmp/r2b.out")"
wait "$r2" || fail "reload 2 while reload 1 ran: $(cat "$tmp/r2.out")"
wait "$r1" || fail "reload 1: $(cat "$tmp/r1.out")"
r1= r2=
cat "$tmp/r1.out" "$tmp/r2.out" "$tmp/r2b.out"
grep -q "reload: joins the reload already queued" "$tmp/gw.log" || fail "reload 2b did not join reload 2"
grep -q '2 added, 0 removed, 0 changed, 2 kept' "$tmp/r1.out" || fail "reload 1 summary"
grep -q '0 added, 0 removed, 0 changed, 4 kept' "$tmp/r2.out" || fail "reload 2 summary"
cmp -s "$tmp/r2.out" "$tmp/r2b.out" || fail "reloads 2 and 2b got different answers"
# 1, then one for 2 and 2b.
[ "$(st .reloads)" = 2 ] || fail "reloads: $(st .reloads)"
[ -S "$tmp/b.sock" ] || fail "no socket for b"

# During a stop: reload 3 (slow) runs, reload 4 is queued, SIGTERM comes.
# Reload 3 finishes, reload 4 is answered with the reason, the gateway exits.
EC="{ name = \"c\"; target = \"tc\"; nbd = { listen = \"unix:$tmp/c.sock\"; }; }"
# Slow, so that SIGTERM surely comes while reload 3 runs.
"$T" --ctl "$tmp/t2.ctl" delay 1500 | grep -q ok || fail "delay 1500"
conf "$EA, $EB, $EC" "$(tgt ta rq-a "$port"), $(tgt tb rq-b "$port2"), $(tgt tc rq-c "$port2")"
"$GW" reload -s "$ctl" > "$tmp/r3.out" 2>&1 &
r3=$!
cleanup_fn stop_var r3
wait_for 20 'st ".targets[].name" | grep -qx tc' || fail "reload 3 did not start tc"
"$GW" reload -s "$ctl" > "$tmp/r4.out" 2>&1 &
r4=$!
cleanup_fn stop_var r4
wait_for 20 '[ "$(grep -c "reload: queued until" "$tmp/gw.log")" = 2 ]' || fail "reload 4 was not queued"
"$GW" reload -s "$ctl" > "$tmp/r5.out" 2>&1 &
r5=$!
cleanup_fn stop_var r5
wait_for 20 '[ "$(grep -c "reload: joins the reload already queued" "$tmp/gw.log")" = 2 ]' ||
	fail "reload 5 did not join reload 4"
grep -q 'reload: 2 added, 0 removed, 0 changed, 4 kept' "$tmp/gw.log" &&
	fail "reload 3 was done too soon for this test"
gw_stop
wait "$r3" || fail "reload 3: $(cat "$tmp/r3.out")"
wait "$r4" && fail "reload 4 succeeded during the stop: $(cat "$tmp/r4.out")"
wait "$r5" && fail "reload 5 succeeded during the stop: $(cat "$tmp/r5.out")"
r3= r4= r5=
cat "$tmp/r4.out" "$tmp/r5.out"
grep -q 'the gateway is stopping' "$tmp/r4.out" || fail "reload 4's error: $(cat "$tmp/r4.out")"
grep -q 'the gateway is stopping' "$tmp/r5.out" || fail "reload 5's error: $(cat "$tmp/r5.out")"
! grep -q 'AddressSanitizer\|runtime error\|LeakSanitizer' "$tmp/gw.log" || fail "sanitizer report"
echo "reload queued: OK"
