#!/usr/bin/env bash
# Two auto_export policies for one subsystem, one per nsid: nsid 2's says
# tls = "require" with a key, nsid 1's has no TLS.  One target serves both
# namespaces, and it is made with the strictest TLS of the policies that
# match, so nsid 2's export is never served in plaintext.  Before the fix
# (review) the first policy matching the subnqn decided: plaintext only.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"
P=nqn.2026-01.io.nvmf-gateway:strictest
H=nqn.2026-01.io.nvmf-gateway:tls-host
tls_genkey "$tmp/psk.key"
p1=$(free_port) p2=$(free_port)
while [ "$p2" = "$p1" ]; do p2=$(free_port); done
tgt_start t "" -s "$p1" -s "$p2" --subsys "$P:16M:512:2" --tls-key "$tmp/psk.key" --plain-port 1 \
	--port-treq 2:not-required
ctl t disc-port 1 hide > /dev/null
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
auto_export = ( { subnqn = "$P"; nsid = 1; name = "plain1"; nbd = { listen = "unix:$tmp/p1.sock"; }; },
  { subnqn = "$P"; nsid = 2; name = "secret2"; tls = "require"; tls_key_file = "$tmp/psk.key";
    nbd = { listen = "unix:$tmp/s2.sock"; }; } );
CONF
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
gw_wait "export secret2: serving" 1 30 > /dev/null || fail "secret2 not served"
"$NBDPY" "$IO" verify "$tmp/s2.sock" 1 > "$tmp/v.out" 2>&1 || { cat "$tmp/v.out"; fail "verified I/O on secret2"; }
grep -q "TLS PSK identity 'NVMe0R01 $H $P'" "$tmp/tgt-t.log" ||
	fail "secret2 (policy tls = \"require\") served without TLS: $(grep 'connection from' "$tmp/tgt-t.log")"
grep -q "port 2: plaintext connection" "$tmp/tgt-t.log" && fail "a plaintext connection to the subsystem"
gw_alive
gw_stop
echo pass
