#!/usr/bin/env bash
# Side by side on this host, one server at a time, each over a Unix socket
# and filled with the same 1 GiB of random data:
#   the gateway (--mem 1G), nbdkit's memory plugin, qemu-nbd on a tmpfs file.
# fio (nbd engine): 4K random read QD32 IOPS, 1 MiB sequential read MiB/s;
# nbdcopy of the whole export to null: (extents off, so nobody skips holes).
# Prints the figures and the ratios gateway/nbdkit and gateway/qemu-nbd.
# Not part of `make test`: numbers, not assertions.  Usage: tests/bench/nbd.sh [BUILD]
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
GW="$here/$build/nvmf-gateway"
RT="${RT:-10}" # seconds per fio run
export PATH="/usr/bin:$PATH"
for t in fio nbdkit qemu-nbd nbdcopy "$GW"; do
	command -v "$t" > /dev/null || { echo "bench: $t missing" >&2; exit 1; }
done

tmp=$(mktemp -d /dev/shm/nbd-bench.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
sock="$tmp/s.sock"
head -c 1G /dev/urandom > "$tmp/fill.bin"

wait_sock() {
	for _ in $(seq 1 200); do
		[ -S "$sock" ] && return 0
		sleep 0.05
	done
	echo "bench: server did not start" >&2
	exit 1
}

json_get() { # FILE EXPR over fio's JSON
	/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

declare -A IOPS SEQ COPY
run_one() { # NAME URI
	local name=$1 uri=$2
	nbdcopy "$tmp/fill.bin" "$uri" || { echo "bench: fill $name failed" >&2; exit 1; }
	fio --name=rr --ioengine=nbd --uri="$uri" --rw=randread --bs=4k --iodepth=32 \
		--size=1G --time_based --runtime="$RT" --output-format=json --output="$tmp/rr.json" > /dev/null 2>&1
	IOPS[$name]=$(json_get "$tmp/rr.json" '"%.0f" % j["jobs"][0]["read"]["iops"]')
	fio --name=sr --ioengine=nbd --uri="$uri" --rw=read --bs=1M --iodepth=4 \
		--size=1G --time_based --runtime="$RT" --output-format=json --output="$tmp/sr.json" > /dev/null 2>&1
	SEQ[$name]=$(json_get "$tmp/sr.json" '"%.0f" % (j["jobs"][0]["read"]["bw"] / 1024)')
	local t0 t1
	t0=$(date +%s.%N)
	nbdcopy --no-extents "$uri" null: || { echo "bench: nbdcopy $name failed" >&2; exit 1; }
	t1=$(date +%s.%N)
	COPY[$name]=$(/usr/bin/python3 -c "print('%.0f' % (1024 / ($t1 - $t0)))")
	printf '%-10s randread 4k QD32: %8s IOPS   read 1M: %6s MiB/s   nbdcopy->null: %6s MiB/s\n' \
		"$name" "${IOPS[$name]}" "${SEQ[$name]}" "${COPY[$name]}"
	kill "$pid"
	wait "$pid" 2>/dev/null
	pid=
	rm -f "$sock"
}

"$GW" nbd --mem 1G "unix:$sock" > /dev/null 2> "$tmp/gw.log" &
pid=$!
wait_sock
run_one gateway "nbd+unix:///?socket=$sock"

nbdkit -f -U "$sock" memory 1G &
pid=$!
wait_sock
run_one nbdkit "nbd+unix:///?socket=$sock"

truncate -s 1G "$tmp/disk.img"
qemu-nbd -f raw -k "$sock" -e 4 -t "$tmp/disk.img" &
pid=$!
wait_sock
run_one qemu-nbd "nbd+unix:///?socket=$sock"
rm -f "$tmp/disk.img"

ratio() { /usr/bin/python3 -c "print('%.2f' % ($1 / $2))"; }
echo
printf 'ratio        randread IOPS   read 1M   nbdcopy\n'
for o in nbdkit qemu-nbd; do
	printf 'gateway/%-9s %8s %9s %9s\n' "$o" "$(ratio "${IOPS[gateway]}" "${IOPS[$o]}")" \
		"$(ratio "${SEQ[gateway]}" "${SEQ[$o]}")" "$(ratio "${COPY[gateway]}" "${COPY[$o]}")"
done
echo "(host: $(nproc) CPUs shared with other work; one run, expect some noise)"
