#!/usr/bin/env bash
# `nvmf-gateway run` under a stand-in for systemd: NOTIFY_SOCKET is a
# datagram socket of this test and WATCHDOG_USEC=400000.  The gateway sends
# READY=1 with a STATUS= line once its export serves, WATCHDOG=1 pings while
# it runs, and STOPPING=1 on SIGTERM; with WATCHDOG_PID naming another
# process it sends no pings at all.
set -u
: "${GW:?run by tests/func/run.sh}" "${BUILD:?}"
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
tmp=$(mktemp -d /tmp/gw-notify.XXXXXX)
tpid='' gpid='' lpid=''
cleanup_fn rm -rf "$tmp"
cleanup_fn stop_var lpid
cleanup_fn stop_var tpid
cleanup_fn stop_var gpid

"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:notify:16M \
	--ready-file "$tmp/ready" > "$tmp/target.log" 2>&1 &
tpid=$!
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
[ -n "$port" ] || fail "the test target did not start"

printf '%s\n' \
	"gateway = { reactors = 2; state_dir = \"$tmp/state\"; };" \
	"targets = ( { name = \"t\"; subnqn = \"nqn.2014-08.org.nvmf-gateway:notify\";" \
	"  paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; trsvcid = \"$port\"; } ); } );" \
	"exports = ( { name = \"a\"; target = \"t\"; nsid = 1; nbd = { listen = \"unix:$tmp/a.sock\"; }; } );" \
	> "$tmp/gw.conf"

# listen SOCKET OUT: every datagram as one line (newlines shown as '|').
listen() {
	python3 -u -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "w", buffering=1)
while True:
    out.write(s.recv(4096).decode().replace("\n", "|") + "\n")
' "$1" "$2" &
	lpid=$!
	for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done
	fail "the notify listener did not start"
}
wait_line() {	# wait_line FILE REGEX COUNT: up to 60 s
	for _ in $(seq 600); do
		[ "$(grep -cE "$2" "$1")" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

listen "$tmp/notify.sock" "$tmp/notify.txt"
NOTIFY_SOCKET="$tmp/notify.sock" WATCHDOG_USEC=400000 "$GW" run -f -c "$tmp/gw.conf" \
	> "$tmp/gw.log" 2>&1 &
gpid=$!
wait_line "$tmp/notify.txt" '^READY=1\|STATUS=1 of 1 exports running$' 1 ||
	fail "no READY=1 with STATUS="
[ -S "$tmp/a.sock" ] || fail "READY=1 before the export serves"
wait_line "$tmp/notify.txt" '^WATCHDOG=1$' 5 || fail "fewer than 5 WATCHDOG=1 pings"
kill -TERM "$gpid"
wait "$gpid"; st=$?
gpid=''
[ "$st" = 0 ] || fail "exit $st after SIGTERM"
wait_line "$tmp/notify.txt" '^STOPPING=1$' 1 || fail "no STOPPING=1"
sort "$tmp/notify.txt" | uniq -c
ready=$(grep -n '^READY=1' "$tmp/notify.txt" | head -1 | cut -d: -f1)
stopping=$(grep -n '^STOPPING=1' "$tmp/notify.txt" | head -1 | cut -d: -f1)
[ "$ready" -lt "$stopping" ] || fail "STOPPING=1 before READY=1"
kill "$lpid"; wait "$lpid" 2> /dev/null; lpid=''

# WATCHDOG_PID of another process: no pings, the rest as before.
rm -f "$tmp/notify.sock"
listen "$tmp/notify.sock" "$tmp/notify2.txt"
NOTIFY_SOCKET="$tmp/notify.sock" WATCHDOG_USEC=400000 WATCHDOG_PID=1 \
	"$GW" run -f -c "$tmp/gw.conf" > "$tmp/gw.log" 2>&1 &
gpid=$!
wait_line "$tmp/notify2.txt" '^READY=1' 1 || fail "no READY=1 (second run)"
# At a 100 ms tick, 1.5 s would hold about 15 pings if any were sent.
sleep 1.5
kill -TERM "$gpid"
wait "$gpid"; st=$?
gpid=''
[ "$st" = 0 ] || fail "exit $st after SIGTERM (second run)"
wait_line "$tmp/notify2.txt" '^STOPPING=1$' 1 || fail "no STOPPING=1 (second run)"
grep -q '^WATCHDOG=1' "$tmp/notify2.txt" && fail "pings although WATCHDOG_PID names another process"
echo "run notify: OK"
