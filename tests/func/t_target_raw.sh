#!/usr/bin/env bash
# nvmf-test-target against a minimal host written from the spec
# (tests/target/rawhost.py): Identify fields, properties, features, the ANA
# log and its AEN, lose-cache against Flush and FUA, DSM and Write Zeroes,
# range checks, bad PDUs answered with C2HTermReq, the keep-alive timeout.
set -u
. "$TOP/tests/target/helpers.sh"
need python3

A=nqn.2026-01.io.nvmf-gateway:raw
tgt_start --subsys "$A:16M:512:3"
python3 "$TOP/tests/target/rawhost.py" "$TGT_PORT" "$A" 3 "$TGT" "$TGT_CTL" ||
	fail "rawhost.py"
grep -q "keep-alive timeout (1000 ms) expired" "$TGT_DIR/target.log" || fail "no keep-alive log line"
grep -q "protocol error: header digest mismatch" "$TGT_DIR/target.log" || fail "no digest log line"
kill -0 "$TGT_PID" || fail "target died"
tgt_finish
echo pass
