#!/usr/bin/env bash
# Digests and protocol errors inside TLS: a corrupted header or data digest
# is caught under TLS as in plaintext (TLS does not replace them); a
# malformed PDU is a protocol error whose H2CTermReq reaches the target
# sealed (the target reads it through its TLS session); then a clean
# verified run on the same target.
set -u
. "$TOP/tests/target/helpers.sh"
. "$TOP/tests/func/tls/key.sh"

A=nqn.2026-01.io.nvmf-gateway:tls-faults
tls_genkey "$TGT_DIR/k"
tgt_start --subsys "$A:16M" --tls-key "$TGT_DIR/k"
TLS=(-q nqn.2026-01.io.nvmf-gateway:tls-host --tls --tls-key-file "$TGT_DIR/k")

expect_fail() { # WHAT PATTERN
	[ "$BENCH_RC" = 1 ] || fail "$1: bench exit $BENCH_RC, want 1"
	grep -q -- "$2" "$TGT_DIR/bench.out" || fail "$1: no '$2' in the gateway's output"
	echo "ok: $1"
}

ctl corrupt hdgst io
gw_bench "$A" "${TLS[@]}" -w randread -b 4k -d 4 -T 1 -g
expect_fail "corrupt header digest under TLS" "header digest mismatch"
ctl corrupt ddgst io
gw_bench "$A" "${TLS[@]}" -w randread -b 4k -d 4 -T 1 -G
expect_fail "corrupt data digest under TLS" "data digest mismatch"
# 128 KiB payloads are opened straight into the request's buffer; the
# digest is computed there and still checked.
ctl corrupt ddgst io
gw_bench "$A" "${TLS[@]}" -w randread -b 128k -d 4 -T 1 -G
expect_fail "corrupt data digest of a 128k read under TLS" "data digest mismatch"

# As in t_target_faults: the gateway resets the connection right after its
# TermReq (commands were in flight), which can discard it unread at the
# target; at least one of the four must arrive, opened by TLS.
for kind in "type:unexpected PDU type 0x0a" "hlen:with hlen 20" "cid:not in flight" \
	"plen:plen 4096"; do
	ctl malformed "${kind%%:*}"
	gw_bench "$A" "${TLS[@]}" -w randread -b 4k -d 4 -T 1
	expect_fail "malformed ${kind%%:*} under TLS" "protocol error: .*${kind#*:}"
done
grep "host sent H2CTermReq" "$TGT_DIR/target.log" ||
	fail "no TermReq reached the target through TLS"
grep -q "TLS receive" "$TGT_DIR/target.log" && fail "the target could not open a record"

ctl clear
gw_bench "$A" "${TLS[@]}" -w randrw -b 16k -d 16 -T 1 --verify -g -G
[ "$BENCH_RC" = 0 ] || fail "clean run after the faults: exit $BENCH_RC"
grep -q ' 0 mismatches' "$TGT_DIR/bench.out" || fail "no verify line"
tgt_finish
echo pass
