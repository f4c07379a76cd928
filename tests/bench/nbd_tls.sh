#!/usr/bin/env bash
# NBD over TLS against plaintext, side by side on this host: the gateway
# (--mem, 2 reactors) on a Unix socket, filled with the same random data,
# once with --nbd-tls require and a PSK (TLS 1.3, AES-128-GCM), once without.
# The client is nbdcopy (libnbd) to null:, one connection, no extents:
#   4K requests, 32 in flight (IOPS; a RAM volume: sequential or random
#   is the same work for the server), and 1 MiB requests, 4 in flight
#   (MiB/s).
# fio's nbd engine cannot do TLS (libnbd refuses tls-psk-file in the URI it
# is given: nbd_set_uri_allow_local_file), nor can qemu-img bench (no
# --object).  Prints the figures and the ratios TLS/plain; nbdkit with
# --tls=require, when installed, as a peer.
# Not part of `make test`: numbers, not assertions.
# Usage: tests/bench/nbd_tls.sh [BUILD]   (SIZE MiB per pass, default 1024)
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
GW="$here/$build/nvmf-gateway"
SIZE="${SIZE:-1024}"
export PATH="/usr/bin:$PATH"
for t in nbdcopy openssl "$GW"; do
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

declare -A IOPS SEQ
secs() { # ARGS...: wall seconds of nbdcopy ARGS
	local t0 t1
	t0=$(date +%s.%N)
	nbdcopy "$@" || { echo "bench: nbdcopy $* failed" >&2; exit 1; }
	t1=$(date +%s.%N)
	/usr/bin/python3 -c "print($t1 - $t0)"
}
run_one() { # NAME URI GATEWAY-ARGS... (NAME nbdkit: nbdkit's memory plugin)
	local name=$1 uri=$2 t
	shift 2
	rm -f "$sock"
	if [ "$name" = nbdkit ]; then
		nbdkit -f -U "$sock" "$@" -e disk memory "${SIZE}M" > /dev/null 2>&1 &
	else
		"$GW" nbd --mem "${SIZE}M" --name disk --reactors 2 "$@" "unix:$sock" > /dev/null 2>&1 &
	fi
	pid=$!
	for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
	nbdcopy "$tmp/fill.bin" "$uri" || { echo "bench: fill $name failed" >&2; exit 1; }
	t=$(secs --no-extents --connections=1 --request-size=4096 --requests=32 "$uri" null:)
	IOPS[$name]=$(/usr/bin/python3 -c "print('%.0f' % ($SIZE * 256 / $t))")
	t=$(secs --no-extents --connections=1 --request-size=1048576 --requests=4 "$uri" null:)
	SEQ[$name]=$(/usr/bin/python3 -c "print('%.0f' % ($SIZE / $t))")
	printf '%-6s read 4K QD32: %8s IOPS   read 1M QD4: %6s MiB/s\n' \
		"$name" "${IOPS[$name]}" "${SEQ[$name]}"
	kill "$pid"
	wait "$pid" 2>/dev/null
	pid=
}

run_one plain "nbd+unix:///disk?socket=$sock"
run_one tls "nbds+unix://bench@/disk?socket=$sock&tls-psk-file=$psk" --nbd-tls require --nbd-tls-psk-file "$psk"
# A peer for scale: nbdkit with TLS (GnuTLS) on the same host, if present.
command -v nbdkit > /dev/null &&
	run_one nbdkit "nbds+unix://bench@/disk?socket=$sock&tls-psk-file=$psk" --tls=require \
		--tls-psk="$psk"
ratio() { /usr/bin/python3 -c "print('%.2f' % ($1 / $2))"; }
echo "TLS/plain: read 4K QD32 $(ratio "${IOPS[tls]}" "${IOPS[plain]}")," \
	"read 1M QD4 $(ratio "${SEQ[tls]}" "${SEQ[plain]}")"
