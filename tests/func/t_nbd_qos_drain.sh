#!/usr/bin/env bash
# SIGTERM while reads wait for QoS tokens: the drain sends them to the
# backend at once (they are answered, not failed), so the exit does not
# wait out the queue's token time.  40 reads at --qos-iops 1 hold 39 s of
# tokens: before the fix the gateway answered one a second and exited
# after ~38 s (minutes for a /dev/nbdN queue at a low bandwidth limit,
# past systemd's stop timeout).  Found by a hostile review.  How long the
# drain took is read from the gateway's own log stamps (the signal to the
# server's stop), not from a clock here: a busy host cannot fail it.
set -u
. "$TOP/tests/func/nbd/lib.sh"
sock="$tmp/nbd.sock"
N=40
NVMF_GATEWAY_LOG=info NVMF_GATEWAY_LOG_STAMP=1 gw_start nbd --mem 16M --qos-iops 1 "unix:$sock"
"$NBDPY" "$TOP/tests/func/nbd/qos_queue.py" "$sock" $N > "$tmp/client.out" 2>&1 &
cpid=$!
cleanup_fn stop_var cpid
wait_for 90 'grep -q QUEUED "$tmp/client.out"' || fail "the client did not queue its reads: $(cat "$tmp/client.out")"
kill -TERM "$GW_PID"
# Hang guard only (the old code took ~38 s): the verdict is the log's.
for _ in $(seq 900); do kill -0 "$GW_PID" 2> /dev/null || break; sleep 0.1; done
kill -0 "$GW_PID" 2> /dev/null && fail "the gateway still runs 90 s after SIGTERM"
st=0
wait "$GW_PID" || st=$?
GW_PID=
[ $st = 0 ] || fail "gateway exit status $st after SIGTERM"
wait_for 30 '! kill -0 $cpid 2> /dev/null' || fail "the client still runs after the gateway exit"
cpid=
echo "client: $(cat "$tmp/client.out")"
grep -q "answered $N of $N" "$tmp/client.out" || fail "not every queued read was answered"
stamp() { sed -n "s/^nvmf-gateway: \[\([0-9.]*\)\] .*$1.*/\1/p" "$tmp/gw.log" | head -1; }
t0=$(stamp 'signal received') t1=$(stamp 'nbd server .*: stopped')
[ -n "$t0" ] && [ -n "$t1" ] || fail "no signal or stop line in the log"
python3 -c '
import sys
dt = float(sys.argv[2]) - float(sys.argv[1])
print("drain: %.3f s from the signal to the server stop (the queue held %s s of tokens)" % (dt, sys.argv[3]))
sys.exit(0 if dt < 15 else 1)' "$t0" "$t1" $((N - 1)) ||
	fail "the drain waited for the QoS tokens"
echo pass
