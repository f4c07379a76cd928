#!/usr/bin/env bash
# gateway.poll_us (and `nbd --poll-us`): the reactors busy-poll after each
# completion.  Data through an export with the window on is exact (fio
# verify over the NVMe/TCP hop, both reactor backends through run.sh);
# status says the window is on and what it did (hits while I/O ran); and
# once the I/O stops the gateway sleeps: its CPU over 3 s of idling is a
# small fraction of what one spinning thread would burn.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq fio nbdcopy
HZ=$(getconf CLK_TCK)

# cpu_ticks: utime+stime of the gateway, in clock ticks.
cpu_ticks() { local f; f=$(sed 's/^.*) //' "/proc/$GW_PID/stat") && set -- $f && echo $((${12} + ${13})); }
# idle_check WHAT: the gateway's CPU over 3 s without I/O stays under 0.5 s
# (a thread spinning all along takes 3 s; a sleeping gateway ~0).
idle_check() {
	local c0 c1
	sleep 0.5 # the window (0.1 ms) and the last replies are over
	c0=$(cpu_ticks) || fail "no /proc/$GW_PID/stat"
	sleep 3
	c1=$(cpu_ticks)
	echo "$1: $((c1 - c0)) ticks of CPU in 3 s idle (HZ $HZ)"
	[ $((c1 - c0)) -lt $((HZ / 2)) ] || fail "$1: $((c1 - c0)) ticks in 3 s idle: still spinning"
}

target_start nqn.2014-08.org.nvmf-gateway:poll:64M
cat > "$tmp/gw.conf" << EOF
gateway = { reactors = 2; poll_us = 100; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "t"; subnqn = "nqn.2014-08.org.nvmf-gateway:poll";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "a"; target = "t"; nbd = { listen = "unix:$tmp/a.sock"; }; } );
EOF
gw_start run "$tmp/gw.conf"
grep -q 'busy-poll 100 us after each completion' "$tmp/gw.log" || fail "no busy-poll line at start"
[ "$(st .poll_us)" = 100 ] || fail "status poll_us $(st .poll_us), want 100"

uri="nbd+unix:///a?socket=$tmp/a.sock"
fio --name=v --ioengine=nbd --uri="$uri" --rw=randrw --bs=4k-64k --iodepth=8 --size=32M \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --verify_state_save=0 --output="$tmp/fio.txt" ||
	{ cat "$tmp/fio.txt"; fail "fio verify through the export with poll_us on"; }
fio --name=q --ioengine=nbd --uri="$uri" --rw=randread --bs=4k --iodepth=1 --size=32M \
	--number_ios=2000 --output="$tmp/fio1.txt" || fail "fio QD1"
"$GW" status -s "$ctl" -o json > "$tmp/status.json"
jq .busy_poll "$tmp/status.json"
jq -e '.busy_poll.hits > 0' "$tmp/status.json" > /dev/null || fail "no spin took a completion"
"$GW" status -s "$ctl" | grep -E '^busy poll: 100 us after each completion; [0-9]+ spins ended with one' ||
	fail "status table: no busy poll line"
idle_check "run, poll_us = 100"
gw_stop

# Off by default: no line, and status says 0.
sed -i 's/ poll_us = 100;//' "$tmp/gw.conf"
gw_start run "$tmp/gw.conf"
[ "$(st .poll_us)" = 0 ] || fail "status poll_us $(st .poll_us) by default"
! grep -q 'busy-poll' "$tmp/gw.log" || fail "busy-poll line without poll_us"
"$GW" status -s "$ctl" | grep -q '^busy poll' && fail "busy poll line without poll_us"
gw_stop

# The one-shot exporter takes --poll-us too.
gw_start nbd --poll-us 100 -t tcp -a 127.0.0.1 -s "$port" -n nqn.2014-08.org.nvmf-gateway:poll \
	"unix:$tmp/n.sock"
head -c 8M /dev/urandom > "$tmp/in"
nbdcopy "$tmp/in" "nbd+unix:///?socket=$tmp/n.sock" || fail "nbdcopy in (nbd --poll-us)"
nbdcopy "nbd+unix:///?socket=$tmp/n.sock" "$tmp/out" || fail "nbdcopy out (nbd --poll-us)"
cmp -n 8388608 "$tmp/in" "$tmp/out" || fail "read back differs (nbd --poll-us)"
idle_check "nbd --poll-us 100"
gw_stop
"$GW" nbd --poll-us 1001 --mem 1M "unix:$tmp/x.sock" 2> "$tmp/err" && fail "--poll-us 1001 accepted"
grep -q "poll-us '1001': expected 0 to 1000" "$tmp/err" || { cat "$tmp/err"; fail "--poll-us range message"; }
echo "PASS"
