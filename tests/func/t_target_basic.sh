#!/usr/bin/env bash
# The gateway's discover and bench --verify against nvmf-test-target: block
# sizes 512 B to 1 MiB, queue depths 1 to 32, digests off and on, 512 and
# 4096-byte namespaces, several namespaces per subsystem.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:target-a
B=nqn.2026-01.io.nvmf-gateway:target-b
tgt_start --subsys "$A:64M" --subsys "$B:32M:4096:3"

out=$(timeout 60 "$GW" discover -t tcp -a 127.0.0.1 -s "$TGT_PORT") || fail "discover: $out"
echo "$out"
for want in "subnqn:  $A" "subnqn:  $B" "subnqn:  nqn.2014-08.org.nvmexpress.discovery" \
	"subtype: current discovery subsystem" "trsvcid: $TGT_PORT"; do
	printf '%s\n' "$out" | grep -qxF "$want" || fail "discover: missing '$want'"
done
[ "$(printf '%s\n' "$out" | grep -c '^subnqn:')" = 3 ] || fail "discover: want 3 records"

n=0
for dg in "" "-g -G"; do
	for spec in "$A 1 512 1" "$A 1 512 32" "$A 1 4k 1" "$A 1 4k 32" "$A 1 1m 1" \
		"$A 1 1m 4" "$B 1 4k 32" "$B 3 4k 8" "$B 2 1m 2"; do
		set -- $spec
		gw_bench "$1" --nsid "$2" -w randrw -b "$3" -d "$4" -T 1 --verify --size 8M $dg
		[ "$BENCH_RC" = 0 ] || fail "bench $spec $dg: exit $BENCH_RC"
		grep -q ' 0 mismatches' "$TGT_DIR/bench.out" || fail "bench $spec $dg: no verify line"
		n=$((n + 1))
	done
done
echo "$n bench --verify runs passed"

# A namespace the subsystem does not have, and a subsystem the target does not.
gw_bench "$B" --nsid 4 -w randread -b 4k -T 1
[ "$BENCH_RC" = 1 ] && grep -q 'nsid 4 is not an active namespace' "$TGT_DIR/bench.out" ||
	fail "nsid 4 should be refused"
gw_bench nqn.2026-01.io.nvmf-gateway:none -w randread -b 4k -T 1
[ "$BENCH_RC" = 1 ] && grep -q 'target has no subsystem' "$TGT_DIR/bench.out" ||
	fail "unknown subsystem should be refused"
kill -0 "$TGT_PID" || fail "target died"
tgt_finish

# The other wire choices a target may make: C2HData with SUCCESS (no
# CapsuleResp), small MAXH2CDATA (several H2CData per R2T), several R2Ts
# per command; and a subsystem that admits one host only.
C=nqn.2026-01.io.nvmf-gateway:target-c
OK_HOST=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-4333-8444-555555555555
tgt_start --success always --maxh2cdata 8192 --r2t-size 16384 --subsys "$A:16M" \
	--subsys "$C:16M" --allow-host "$OK_HOST"
for dg in "" "-g -G"; do
	for spec in "4k 16" "128k 4" "1m 2"; do
		set -- $spec
		gw_bench "$A" -w randrw -b "$1" -d "$2" -T 1 --verify --size 8M $dg
		[ "$BENCH_RC" = 0 ] || fail "bench $spec $dg (SUCCESS, small MAXH2CDATA): exit $BENCH_RC"
	done
done
gw_bench "$C" -q "$OK_HOST" -w randrw -b 4k -T 1 --verify --size 4M
[ "$BENCH_RC" = 0 ] || fail "allowed host refused"
gw_bench "$C" -q nqn.2014-08.org.nvmexpress:uuid:99999999-2222-4333-8444-555555555555 \
	-w randread -b 4k -T 1
[ "$BENCH_RC" = 1 ] && grep -q 'is not allowed to connect' "$TGT_DIR/bench.out" ||
	fail "a host not allowed was let in"
grep -q "host .* is not allowed on $C" "$TGT_DIR/target.log" || fail "target did not log the refusal"
tgt_finish
echo pass
