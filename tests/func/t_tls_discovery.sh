#!/usr/bin/env bash
# TREQ through discovery: the test target serves plaintext on port 1
# (--plain-port 1) and requires TLS on port 2.  discover shows TREQ
# "required" for port 2 only; the daemon's discovery controller (on the
# plaintext port) names the one path a plaintext target would be refused
# on, once, with the subsystem, and not the path of a target with tls;
# a target with tls = true serves over port 2 and one without over port 1.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"

A=nqn.2026-01.io.nvmf-gateway:tlsd-a
B=nqn.2026-01.io.nvmf-gateway:tlsd-b
H=nqn.2026-01.io.nvmf-gateway:tls-host
tls_genkey "$tmp/psk.key"
p1=$(free_port) p2=$(free_port)
[ "$p1" != "$p2" ] || p2=$(free_port)
tgt_start t "" -s "$p1" -s "$p2" --subsys "$A:16M" --subsys "$B:16M" --tls-key "$tmp/psk.key" \
	--plain-port 1

out=$("$GW" discover -t tcp -a 127.0.0.1 -s "$p1" -q "$H" -o json) || fail "discover: $out"
echo "$out" | jq -c '.records[] | [.subnqn, .trsvcid, .treq]' 2> /dev/null ||
	echo "$out"
[ "$(echo "$out" | jq -r --arg p "$p2" '[.records[] | select(.trsvcid == $p) | .treq | startswith("required")] | all')" = true ] ||
	fail "port 2 entries do not say TREQ required"
[ "$(echo "$out" | jq -r --arg p "$p1" '[.records[] | select(.trsvcid == $p) | .treq | startswith("not specified")] | all')" = true ] ||
	fail "port 1 entries do not say TREQ not specified"

cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    tls = true; tls_key_file = "$tmp/psk.key"; },
  { name = "tb"; subnqn = "$B"; reconnect_delay = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; } ); } );
exports = ( { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; },
  { name = "b"; target = "tb"; nsid = 1; nbd = { listen = "unix:$tmp/b.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF
SOCKS="$tmp/a.sock $tmp/b.sock" gw_start run "$tmp/gw.conf"
for e in a b; do
	"$NBDPY" "$IO" verify "$tmp/$e.sock" 1 > "$tmp/v$e.out" 2>&1 ||
		{ cat "$tmp/v$e.out"; fail "verified I/O through export $e"; }
done
for _ in $(seq 1 100); do
	grep -q "subsystem $B: port 127.0.0.1:$p2 requires TLS" "$tmp/gw.log" && break
	sleep 0.1
done
cat "$tmp/gw.log"
[ "$(grep -c "subsystem $B: port 127.0.0.1:$p2 requires TLS (TREQ), and its target has no tls = true" "$tmp/gw.log")" = 1 ] ||
	fail "want one line for $B's TLS-only path"
grep -q "subsystem $A: port .* requires TLS" "$tmp/gw.log" && fail "a line for $A, whose target has tls"
grep -q "subsystem .*: port 127.0.0.1:$p1 requires TLS" "$tmp/gw.log" && fail "a line for the plaintext port"
grep -q "TLS PSK identity 'NVMe0R01 $H $A'" "$tmp/tgt-t.log" || fail "ta did not use TLS"
gw_stop
echo pass
