#!/usr/bin/env bash
# The NBD server on a Unix socket (RAM volume) against real clients:
# nbdinfo, nbdcopy, nbdsh, qemu-img, qemu-io, fio with multi-conn.
set -u
. "$TOP/tests/func/nbd/lib.sh"
need nbdinfo nbdcopy nbdsh qemu-img qemu-io fio
"$NBDPY" -c 'import nbd' 2> /dev/null || skip "python3-libnbd is not installed"

sock="$tmp/nbd.sock"
# Two reactors: connections alternate between them (multi-conn clients
# below use both).
NVMF_GATEWAY_LOG=info gw_start nbd --mem 64M --name disk --reactors 2 "unix:$sock"
uri="nbd+unix:///disk?socket=$sock"

# --list: one export, named.
list=$(nbdinfo --list "nbd+unix:///?socket=$sock") || fail "nbdinfo --list"
echo "$list"
echo "$list" | grep -q '^export="disk":' || fail "export not listed"

# Size, block sizes, flags.
info=$(nbdinfo "$uri") || fail "nbdinfo"
echo "$info"
for want in "export-size: 67108864" "block_size_minimum: 512" "block_size_preferred: 4096" \
	"block_size_maximum: 33554432" "can_flush: true" "can_fua: true" "can_trim: true" \
	"can_zero: true" "can_fast_zero: true" "can_multi_conn: true" "is_read_only: false" \
	"description: RAM volume"; do
	echo "$info" | grep -qF "$want" || fail "nbdinfo: missing '$want'"
done
# The default export "" is the same disk.
[ "$(nbdinfo --size "nbd+unix:///?socket=$sock")" = 67108864 ] || fail "default export size"

# nbdcopy a random 64 MiB in and out.
head -c 64M /dev/urandom > "$tmp/in.bin"
nbdcopy "$tmp/in.bin" "$uri" || fail "nbdcopy in"
nbdcopy "$uri" "$tmp/out.bin" || fail "nbdcopy out"
cmp "$tmp/in.bin" "$tmp/out.bin" || fail "nbdcopy round trip differs"
echo "nbdcopy 64 MiB in and out: identical"

# nbdsh: flush, FUA, trim, zero (+NO_HOLE, FAST_ZERO), errors.
out=$(nbdsh -u "$uri" -c "$(cat "$TOP/tests/func/nbd/io.py")" 2>&1) || { echo "$out"; fail "nbdsh io.py"; }
echo "$out"
echo "$out" | grep -q "^OK io 512" || fail "io.py did not finish"

# qemu-img: info, convert in and out, compare.
qemu-img info "$uri" | tee "$tmp/qi" || fail "qemu-img info"
grep -q "virtual size: 64 MiB" "$tmp/qi" || fail "qemu-img info size"
head -c 32M /dev/urandom > "$tmp/q.raw"
qemu-img convert -n -f raw -O raw "$tmp/q.raw" "$uri" || fail "qemu-img convert in"
qemu-img compare -f raw -F raw "$tmp/q.raw" "$uri" && fail "compare must see the size differ"
qemu-img convert -f raw -O raw "$uri" "$tmp/q.out" || fail "qemu-img convert out"
cmp -n 33554432 "$tmp/q.raw" "$tmp/q.out" || fail "qemu-img round trip differs"
qemu-img compare -f raw -F raw "$tmp/q.out" "$uri" || fail "qemu-img compare"
echo "qemu-img convert and compare: identical"

# qemu-io: aio writes, then aio reads that check the pattern.
qemu-io -f raw -c 'aio_write -P 0x5a 0 1M' -c 'aio_write -P 0xa5 1M 1M' -c aio_flush \
	-c 'aio_read -P 0x5a 0 1M' -c 'aio_read -P 0xa5 1M 1M' -c aio_flush "$uri" \
	> "$tmp/qio" 2>&1 || { cat "$tmp/qio"; fail "qemu-io"; }
cat "$tmp/qio"
grep -qi "pattern verification failed\|error" "$tmp/qio" && fail "qemu-io reports an error"
[ "$(grep -c '^read 1048576/1048576' "$tmp/qio")" -eq 2 ] || fail "qemu-io reads missing"

# fio, nbd engine, crc32c verify, 2 jobs (2 connections) at QD 1 and 32.
for qd in 1 32; do
	fio --name=nbd --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=$qd \
		--numjobs=2 --size=8M --offset_increment=16M --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
		--group_reporting --output-format=terse --terse-version=3 \
		> "$tmp/fio.$qd" 2>&1 || { cat "$tmp/fio.$qd"; fail "fio QD $qd"; }
	grep -qi "verify" "$tmp/fio.$qd" && { cat "$tmp/fio.$qd"; fail "fio QD $qd verify errors"; }
	# terse v3: field 5 is the error count.
	errs=$(cut -d';' -f5 "$tmp/fio.$qd" | tail -1)
	[ "$errs" = 0 ] || { cat "$tmp/fio.$qd"; fail "fio QD $qd: $errs errors"; }
	echo "fio QD $qd x 2 connections: verified, no errors"
done

grep -q "(reactor 1)" "$tmp/gw.log" || fail "no connection ran on the second reactor"
gw_stop
[ -e "$sock" ] && fail "socket file left behind"
echo "PASS"
