#!/usr/bin/env bash
# NBD over TLS against plaintext, side by side on this host: the gateway
# (--mem, 2 reactors) on a Unix socket, filled with the same random data,
# once with --tls require and a PSK (TLS 1.3, AES-128-GCM), once without.
# fio's nbd engine connects through libnbd's nbd_connect_uri, so an
# nbds+unix:// URI with tls-psk-file gives it TLS: 4K random read QD32
# IOPS and 1 MiB sequential read MiB/s; nbdcopy of the whole export to
# null: as a third point.  Prints the figures and the ratios TLS/plain.
# Not part of `make test`: numbers, not assertions.
# Usage: tests/bench/nbd_tls.sh [BUILD]   (RT seconds per fio run, SIZE MiB)
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
GW="$here/$build/nvmf-gateway"
RT="${RT:-10}"
SIZE="${SIZE:-1024}"
export PATH="/usr/bin:$PATH"
for t in fio nbdcopy openssl "$GW"; do
	command -v "$t" > /dev/null || { echo "bench: $t missing" >&2; exit 1; }
done

tmp=$(mktemp -d /dev/shm/nbd-tls-bench.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
sock="$tmp/s.sock"
psk="$tmp/keys.psk"
(umask 077; echo "bench:$(openssl rand -hex 32)" > "$psk")
head -c "${SIZE}M" /dev/urandom > "$tmp/fill.bin"

json_get() { # FILE EXPR over fio's JSON
	/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

declare -A IOPS SEQ COPY
run_one() { # NAME URI GATEWAY-ARGS...
	local name=$1 uri=$2
	shift 2
	rm -f "$sock"
	"$GW" nbd --mem "${SIZE}M" --name disk --reactors 2 "$@" "unix:$sock" > /dev/null 2>&1 &
	pid=$!
	for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
	nbdcopy "$tmp/fill.bin" "$uri" || { echo "bench: fill $name failed" >&2; exit 1; }
	fio --name=rr --ioengine=nbd --uri="$uri" --rw=randread --bs=4k --iodepth=32 \
		--size="${SIZE}M" --time_based --runtime="$RT" --output-format=json \
		--output="$tmp/rr.json" > /dev/null 2>&1 || { echo "bench: fio $name" >&2; exit 1; }
	IOPS[$name]=$(json_get "$tmp/rr.json" '"%.0f" % j["jobs"][0]["read"]["iops"]')
	fio --name=sr --ioengine=nbd --uri="$uri" --rw=read --bs=1M --iodepth=4 \
		--size="${SIZE}M" --time_based --runtime="$RT" --output-format=json \
		--output="$tmp/sr.json" > /dev/null 2>&1 || { echo "bench: fio $name" >&2; exit 1; }
	SEQ[$name]=$(json_get "$tmp/sr.json" '"%.0f" % (j["jobs"][0]["read"]["bw"] / 1024)')
	local t0 t1
	t0=$(date +%s.%N)
	nbdcopy --no-extents "$uri" null: || { echo "bench: nbdcopy $name failed" >&2; exit 1; }
	t1=$(date +%s.%N)
	COPY[$name]=$(/usr/bin/python3 -c "print('%.0f' % ($SIZE / ($t1 - $t0)))")
	printf '%-6s randread 4k QD32: %8s IOPS   read 1M: %6s MiB/s   nbdcopy->null: %6s MiB/s\n' \
		"$name" "${IOPS[$name]}" "${SEQ[$name]}" "${COPY[$name]}"
	kill "$pid"
	wait "$pid" 2>/dev/null
	pid=
}

run_one plain "nbd+unix:///disk?socket=$sock"
run_one tls "nbds+unix://bench@/disk?socket=$sock&tls-psk-file=$psk" --tls require --tls-psk-file "$psk"
ratio() { /usr/bin/python3 -c "print('%.2f' % ($1 / $2))"; }
echo "TLS/plain: randread 4k QD32 $(ratio "${IOPS[tls]}" "${IOPS[plain]}")," \
	"read 1M $(ratio "${SEQ[tls]}" "${SEQ[plain]}")," \
	"nbdcopy $(ratio "${COPY[tls]}" "${COPY[plain]}")"
