#!/usr/bin/env bash
# One-shot `nbd` with --reactors 2 and -i 2: a connection's I/O is carried
# by an NVMe queue on its own reactor, never handed to reactor 0 and back.
# The hand-off is a cross-reactor message, and each message is an eventfd
# write(2) that wakes the other thread: on the old code 2.00 per I/O for
# the connection on reactor 1.  Counted with strace over both connections'
# reads (the count is the syscalls', not the clock's: load does not move it).
set -u
. "$TOP/tests/func/nbd/lib.sh"
need strace fio
T="$BUILD/nvmf-test-target"
tpid='' spid=''
cleanup_fn stop_var tpid
cleanup_fn stop_var spid
"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:local:64M:512 --ready-file "$tmp/ready" \
	> "$tmp/target.log" 2>&1 &
tpid=$!
wait_for 10 test -s "$tmp/ready" || fail "the test target did not start"
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
sock="$tmp/nbd.sock"
NVMF_GATEWAY_LOG=info gw_start nbd -t tcp -a 127.0.0.1 -s "$port" \
	-n nqn.2014-08.org.nvmf-gateway:local -i 2 --reactors 2 "unix:$sock"

strace -f -qq -e trace=write -o "$tmp/strace" -p "$GW_PID" &
spid=$!
sleep 1
# numjobs=2: two connections, one per reactor; 1000 reads each at QD1.
n=1000
fio --name=r --ioengine=nbd --uri="nbd+unix:///?socket=$sock" --rw=randread --bs=4k \
	--iodepth=1 --numjobs=2 --size=64M --number_ios=$n --output="$tmp/fio.txt" ||
	fail "fio: $(cat "$tmp/fio.txt")"
stop_var spid 2
grep -q 'connection from .*(reactor 1)' "$tmp/gw.log" || fail "no connection on reactor 1"
# Eventfd writes are 8 bytes; the log's writes to fd 2 are text.
wakes=$(grep -c 'write([0-9]*, "\\1\\0\\0\\0\\0\\0\\0\\0", 8)' "$tmp/strace")
echo "reads: $((2 * n)); cross-reactor wakeups: $wakes"
[ "$wakes" -le $((2 * n / 20)) ] || fail "$wakes cross-reactor wakeups for $((2 * n)) reads"
gw_stop
echo "reactor-local I/O: OK"
