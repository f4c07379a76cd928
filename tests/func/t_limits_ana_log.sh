#!/usr/bin/env bash
# An ANA log page larger than 4 KiB (issue 14, defect 6): the target adds
# empty ANA groups (--ana-pad) so that the page outgrows the 4 KiB the
# gateway used to read, and bring-up failed for good ("malformed ANA log
# page").  It must be read whole: in one command when it fits a transfer,
# at increasing offsets when it does not (--max-xfer 4k), and a page
# claiming more than the 1 MiB cap is refused with a clear message.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:analog
export NVMF_GATEWAY_LOG=info # the ANA log reads are logged at info
bench_ok() { # bench_ok WHAT ARGS...: a verified 4k run must pass
	local what=$1
	shift
	gw_bench "$A" --nsid 2 -w randrw -b 4k -d 8 -T 1 --verify --size 4M "$@"
	[ "$BENCH_RC" = 0 ] || fail "$what: bench exit $BENCH_RC"
	grep -q ' 0 mismatches' "$TGT_DIR/bench.out" || fail "$what: no verify line"
}

# 300 empty groups, then 20 namespaces (groups 1..20): 16 + 300 * 32 +
# 20 * 36 = 10336 bytes, the real descriptors beyond the first 4 KiB.
tgt_start --ana-pad 300 --subsys "$A:8M:512:20"
bench_ok "10 KiB ANA log"
grep -q 'ANA log page is at least .* reading 12288 bytes in one command' "$TGT_DIR/bench.out" ||
	fail "the 10 KiB page was not read again whole in one command"
bench_ok "10 KiB ANA log, 4k transfers" --max-xfer 4k
grep -q 'reading 12288 bytes on, at increasing offsets' "$TGT_DIR/bench.out" ||
	fail "the 10 KiB page was not read in 4 KiB pieces"
# The ANA state of a namespace whose descriptor lies beyond the first
# 4 KiB is the one used: nsid 2 inaccessible is seen and fails the I/O.
ctl ana "$A" 2 inaccessible > /dev/null
gw_bench "$A" --nsid 2 -w randread -b 4k -d 1 -T 1 --max-xfer 4k
[ "$BENCH_RC" != 0 ] || fail "I/O to an inaccessible namespace succeeded"
grep -q 'nsid 2 (ANA group 2): optimized -> inaccessible' "$TGT_DIR/bench.out" ||
	fail "nsid 2's inaccessible state was not seen"
tgt_finish

# 40000 empty groups: 1.28 MB, more than the 1 MiB cap.
tgt_start --ana-pad 40000 --subsys "$A:8M:512:2"
gw_bench "$A" --nsid 1 -w randread -b 4k -d 1 -T 1
[ "$BENCH_RC" != 0 ] || fail "a 1.28 MB ANA log page was accepted"
grep -q 'ANA log page claims at least .* more than the 1048576 this host reads' \
	"$TGT_DIR/bench.out" || fail "no clear message for the oversized ANA log page"
tgt_finish
echo pass
