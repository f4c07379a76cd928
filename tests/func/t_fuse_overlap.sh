#!/usr/bin/env bash
# Concurrent unaligned writes that share blocks never lose each other's
# bytes: a helper keeps up to 128 O_DIRECT writes in flight through
# io_uring (FUSE async direct I/O, so the gateway sees them together), each
# a disjoint odd-sized stripe, and checks every byte after each round.
set -u
. "$TOP/tests/func/fuse/lib.sh"
fuse_require
command -v cc > /dev/null || skip "no C compiler for the helper"
cc -O2 -o "$T/overlap" "$TOP/tests/func/fuse/overlap.c" $(pkg-config --libs liburing) ||
	fail "cannot build the helper"

for geo in 16M:512 16M:4096; do
	gw_start mount --mem "$geo" --name disk "$MNT"
	"$T/overlap" "$MNT/disk" $((2 << 20)) 6 "${geo#*:}" || fail "bytes lost with $geo"
	gw_stop
	# informational: how often the range lock actually made a write wait
	grep -o '[0-9]* writes waited for an overlapping one' "$T/gw.log"
done
echo "overlap: OK"
