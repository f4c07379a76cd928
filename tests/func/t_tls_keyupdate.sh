#!/usr/bin/env bash
# A TLS target that reads nothing and floods key update requests (each
# obliges the host to answer): the answers the gateway cannot send piled
# up in its TLS write buffer without limit (found by review: RSS grew at
# the peer's rate, +8 MiB in this test).  Now its receive waits while
# 16 KiB of answers are unsent, and 64 KiB of answers with no data between
# them fail the queue with one line naming the cause.
set -u
. "$TOP/tests/target/helpers.sh"
. "$TOP/tests/func/tls/key.sh"

A=nqn.2026-01.io.nvmf-gateway:tls-ku
tls_genkey "$TGT_DIR/k"
tgt_start --subsys "$A:16M" --tls-key "$TGT_DIR/k" --tls-ku-flood 10
"$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" -q nqn.2026-01.io.nvmf-gateway:tls-host \
	--tls --tls-key-file "$TGT_DIR/k" --connect-timeout 30000 -w randread -b 4k -T 1 \
	> "$TGT_DIR/bench.out" 2>&1 &
bp=$!
rss0=
for _ in $(seq 1 150); do
	grep -q "127.0.0.1:$TGT_PORT made TLS answer [0-9]* bytes with no data between" \
		"$TGT_DIR/bench.out" && break
	r=$(awk '/^VmRSS/ {print $2}' "/proc/$bp/status" 2> /dev/null)
	[ -n "$rss0" ] || rss0=$r
	[ -n "$r" ] && rss=$r
	sleep 0.1
done
kill "$bp" 2> /dev/null
wait "$bp" 2> /dev/null
cat "$TGT_DIR/bench.out" | tail -5
grep -q "127.0.0.1:$TGT_PORT made TLS answer [0-9]* bytes with no data between" \
	"$TGT_DIR/bench.out" || fail "the key update flood was not cut (RSS ${rss0:-?} -> ${rss:-?} KiB)"
echo "cut; gateway RSS ${rss0:-?} -> ${rss:-?} KiB meanwhile"
# Under ASan the RSS is its shadow's and quarantine's: the cut is the check.
if ! ldd "$GW" | grep -q libasan; then
	[ -z "$rss0" ] || [ -z "${rss:-}" ] || [ $((rss - rss0)) -lt 8192 ] ||
		fail "RSS grew by $((rss - rss0)) KiB during the flood"
fi
grep -q "TLS key update flood" "$TGT_DIR/target.log" || fail "the target did not flood: test broken"
echo pass
