#!/usr/bin/env bash
# Keep-alive runs while the I/O queues connect, not only once the
# controller is live: the target holds each I/O queue's Connect response
# 3 s (a delay fault; admin commands are not held) and the host asks for a
# 2 s KATO.  Before, the host sent no keep-alive until every I/O queue was
# up, the target ended the controller ("keep-alive timeout expired") and
# the bring-up failed.  Linux starts keep-alive at the same point, since
# authenticated I/O queue connects can together outlast KATO.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:kato-bringup
tgt_start --subsys "$A:16M"
ctl delay 3000 > /dev/null
gw_bench "$A" -k 2 -i 1 -w read -b 4k -d 1 -T 1 --size 1M --io-timeout 20000
grep -q "keep-alive timeout" "$TGT_DIR/target.log" &&
	fail "the target ended the controller: no keep-alive while the I/O queue connected"
[ "$BENCH_RC" = 0 ] || fail "bench exit $BENCH_RC"
grep -q "I/O queue connect" "$TGT_DIR/bench.out" && fail "the bring-up failed at the I/O queue connect"
ctl clear > /dev/null
tgt_finish
echo "PASS"
