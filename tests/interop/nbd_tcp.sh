#!/usr/bin/env bash
# nbd_tcp.sh GW NQN (in the guest): the gateway's NBD export over TCP on
# loopback, of a namespace of nvmet, read by libnbd (nbdsh), a real client
# on this host: 8 MiB written through the export, then read back in 1 MiB
# requests (four NVMe/TCP commands each at the default --max-xfer), and
# compared with what the kernel's own host reads from nvmet.  By default a
# TCP client on this host gets its read replies from memory (nbd/splice.c:
# the log says so, and no reply is spliced); with
# NVMF_GATEWAY_SPLICE_READS=all, as a remote client, out of pipes.  Exact
# both ways.
set -eu -o pipefail
GW=$1 nqn=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
log=/tmp/nbd-tcp.log
pid=
host_nqn=
cleanup() {
	local rc=$?
	set +e
	[ -z "$host_nqn" ] || nvme disconnect -n "$host_nqn" > /dev/null 2>&1
	[ -z "$pid" ] || { kill -TERM "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; }
	[ $rc = 0 ] && echo PASS || { tail -n 30 "$log"; echo "FAIL (exit $rc)"; }
	exit $rc
}
trap cleanup EXIT
cd /tmp
mib=$((1024 * 1024))
port=10839
uri="nbd://127.0.0.1:$port/"
head -c $((8 * mib)) /dev/urandom > /tmp/nbd-tcp-a

# run_export MODE: the export up (bounded wait for its listener), the
# data written and read back, the gateway stopped; MODE "" or "all".
run_export() {
	: > "$log"
	NVMF_GATEWAY_SPLICE_READS=$1 NVMF_GATEWAY_LOG=debug \
		"$GW" nbd -t tcp -a 10.0.2.15 -s 4420 -n "$nqn" "tcp:127.0.0.1:$port" >> "$log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		nbdsh -u "$uri" -c 'pass' 2> /dev/null && break
		kill -0 "$pid" || { echo "the gateway exited"; return 1; }
		sleep 0.2
	done
	nbdsh -u "$uri" -c 'pass'
	nbdsh -u "$uri" -c "h.pwrite(open('/tmp/nbd-tcp-a', 'rb').read(), $((64 * mib))); h.flush()"
	nbdsh -u "$uri" -c "import sys
for i in range(8):
    sys.stdout.buffer.write(h.pread($mib, $((64 * mib)) + i * $mib))" | cmp - /tmp/nbd-tcp-a
	kill -TERM "$pid"
	wait "$pid"
	pid=
}

# The default: replies from memory, exact, and the reason logged.
run_export ""
grep -q 'a TCP client on this host: read replies from memory' "$log" ||
	{ echo "no line says why the replies were not spliced"; exit 1; }
if grep -qE ': [1-9][0-9]* read replies spliced' "$log"; then
	echo "read replies spliced to a TCP client on this host by default"
	exit 1
fi
echo "default: 1 MiB reads over loopback TCP exact, replies from memory"

# As a remote client gets them: out of pipes, exact.
run_export all
spliced=$(grep -oE '[0-9]+ read replies spliced' "$log" | awk '{s += $1} END {print s + 0}')
echo "NVMF_GATEWAY_SPLICE_READS=all: $spliced read replies spliced"
[ "$spliced" -gt 0 ] || { echo "no read reply spliced with NVMF_GATEWAY_SPLICE_READS=all"; exit 1; }
grep -q 'a TCP client on this host' "$log" && { echo "=all still copied"; exit 1; }

# nvmet holds what the export wrote: the kernel's own host reads it.
nvme connect -t tcp -a 10.0.2.15 -s 4420 -n "$nqn" > /dev/null
host_nqn=$nqn
kdev=$(nvme_host_dev "$nqn")
dd if="$kdev" iflag=direct bs=1M skip=64 count=8 status=none | cmp - /tmp/nbd-tcp-a
echo "the kernel host reads the same 8 MiB from nvmet"
