#!/usr/bin/env bash
# The two reactor backends side by side, same binary, backend forced by
# NVMF_GATEWAY_REACTOR_BACKEND (issue 18), on this host:
#   engine: the gateway's `bench` (NVMe/TCP host) against nvmf-test-target
#           (a RAM target) on loopback;
#   nbd:    fio (nbd engine) against `nvmf-gateway nbd --mem` on a Unix socket.
# Points: 4K randread QD1 and QD32, 1 MiB read QD4.  Each point runs REPS
# times (default 3), the backends interleaved, so a load that comes and goes
# hits both alike; prints the median and the spread (min-max) of each and
# the ratio epoll/io_uring of the medians.  Not part of make test.
# Usage: tests/bench/backends.sh [BUILD]   env: RT seconds per run (5), REPS (3)
set -u
build="${1:-build}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
GW="$here/$build/nvmf-gateway"
TGT="$here/$build/nvmf-test-target"
RT=${RT:-5}
REPS=${REPS:-3}
for t in fio "$GW" "$TGT"; do
	command -v "$t" > /dev/null || { echo "backends: $t missing" >&2; exit 1; }
done
tmp=$(mktemp -d /dev/shm/gw-backends.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
nqn=nqn.2026-01.io.nvmf-gateway:backends

"$TGT" -a 127.0.0.1 -s 0 --ready-file "$tmp/port" --subsys "$nqn:1G:4096" > "$tmp/tgt.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do [ -s "$tmp/port" ] && break; sleep 0.05; done
port=$(head -1 "$tmp/port") || exit 1

# engine BACKEND RW BS QD -> "IOPS MiB/s p50us"
engine() {
	NVMF_GATEWAY_REACTOR_BACKEND=$1 "$GW" bench -t tcp -a 127.0.0.1 -s "$port" -n "$nqn" \
		-w "$2" -b "$3" -d "$4" -T "$RT" -o json > "$tmp/e.json" 2> "$tmp/e.err" ||
		{ cat "$tmp/e.err" >&2; echo "0 0 0"; return; }
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1]));
print("%.0f %.1f %.1f" % (j["iops"], j["mibps"], j["lat_us"]["p50"]))' "$tmp/e.json"
}

# nbd BACKEND RW BS QD -> "IOPS MiB/s p50us" (a fresh server per run)
nbd() {
	local sock="$tmp/n.sock" p
	rm -f "$sock"
	NVMF_GATEWAY_REACTOR_BACKEND=$1 "$GW" nbd --mem 1G --name d "unix:$sock" \
		> /dev/null 2> "$tmp/nbd.log" &
	p=$!
	for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
	grep -q "reactor: epoll backend" "$tmp/nbd.log"; local ep=$?
	{ [ "$1" = epoll ] && [ $ep = 0 ]; } || { [ "$1" = io_uring ] && [ $ep != 0 ]; } ||
		echo "backends: nbd server not on $1" >&2
	fio --name=b --ioengine=nbd --uri="nbd+unix:///d?socket=$sock" --rw="$2" --bs="$3" \
		--iodepth="$4" --size=1G --time_based --runtime="$RT" --output-format=json \
		--output="$tmp/f.json" > /dev/null 2>&1
	kill "$p"; wait "$p" 2> /dev/null
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["jobs"][0]["read"];
print("%.0f %.1f %.1f" % (r["iops"], r["bw"]/1024, r["clat_ns"]["percentile"]["50.000000"]/1e3))' "$tmp/f.json"
}

points=("randread 4k 1" "randread 4k 32" "read 1m 4")
echo "host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at start; RT=${RT}s x $REPS reps, interleaved"
: > "$tmp/all"
for rep in $(seq 1 "$REPS"); do
	for front in engine nbd; do
		for pt in "${points[@]}"; do
			set -- $pt
			for be in io_uring epoll; do
				r=$($front $be "$1" "$2" "$3")
				echo "$front $1-$2-qd$3 $be $rep $r" | tee -a "$tmp/all"
			done
		done
	done
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at end"
python3 - "$tmp/all" << 'PY'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    front, pt, be, rep, iops, mibs, p50 = line.split()
    rows.setdefault((front, pt), {}).setdefault(be, []).append((float(iops), float(mibs), float(p50)))
print()
print("%-6s %-18s %-9s %22s %22s %12s" % ("front", "point", "backend", "IOPS median [min-max]",
      "MiB/s median [min-max]", "p50 us (med)"))
for (front, pt), bes in rows.items():
    med = {}
    for be in ("io_uring", "epoll"):
        v = bes.get(be, [])
        if not v:
            continue
        io = [x[0] for x in v]; mb = [x[1] for x in v]; la = [x[2] for x in v]
        med[be] = statistics.median(io)
        print("%-6s %-18s %-9s %8.0f [%5.0f-%5.0f] %10.1f [%5.0f-%5.0f] %12.1f" % (front, pt, be,
              statistics.median(io), min(io), max(io), statistics.median(mb), min(mb), max(mb),
              statistics.median(la)))
    if med.get("io_uring"):
        print("%-6s %-18s epoll/io_uring IOPS: %.2f" % (front, pt, med["epoll"] / med["io_uring"]))
PY
