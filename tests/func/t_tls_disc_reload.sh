#!/usr/bin/env bash
# An auto_export policy's TLS applied by reload: the test target lists its
# subsystem only on a TLS-required port.  A policy without a key makes the
# target but connects nothing (one error line that names the policy as the
# place to fix, status wait_reason); a reload that gives the policy tls
# and its key makes the target again, and its export serves verified I/O
# over TLS.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"

P=nqn.2026-01.io.nvmf-gateway:tlsrl-vol
H=nqn.2026-01.io.nvmf-gateway:tls-host
tls_genkey "$tmp/psk.key"
p1=$(free_port) p2=$(free_port)
while [ "$p2" = "$p1" ]; do p2=$(free_port); done
tgt_start t "" -s "$p1" -s "$p2" --subsys "$P:16M" --tls-key "$tmp/psk.key" --plain-port 1
ctl t disc-port 1 hide > /dev/null
conf() {
	cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
auto_export = ( { subnqn = "$P"; nsid = 1; name = "vol"; $1
    nbd = { listen = "unix:$tmp/vol.sock"; }; } );
CONF
}
st() { "$GW" status -s "$tmp/gw.control" -o json; }
conf ""
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
gw_wait "target tlsrl-vol: subsystem $P port 127.0.0.1:$p2 requires TLS (TREQ) and the target has no TLS key: not connecting to it; set tls = true and tls_key_file on its auto_export policy" 1 30 > /dev/null ||
	{ cat "$tmp/gw.log"; fail "no error line naming the policy"; }
for _ in $(seq 1 100); do
	st | jq -e '.targets[0].wait_reason // "" | test("requires TLS")' > /dev/null && break
	sleep 0.1
done
st | jq -e '.targets[0].wait_reason | test("requires TLS")' > /dev/null ||
	fail "status: $(st | jq -c .targets)"
[ -S "$tmp/vol.sock" ] && fail "export vol served without a path"
grep -q "ctrl tlsrl-vol" "$tmp/gw.log" && fail "a connect to the TLS-only port"

conf "tls = true; tls_key_file = \"$tmp/psk.key\";"
"$GW" reload -s "$tmp/gw.control" > "$tmp/reload.out" 2>&1 || fail "reload: $(cat "$tmp/reload.out")"
gw_wait "target tlsrl-vol (discovered $P): removed: its policy's TLS settings changed" 1 20 > /dev/null ||
	{ cat "$tmp/gw.log"; fail "the reload did not remake the target"; }
gw_wait "export vol: serving" 1 30 > /dev/null || { cat "$tmp/gw.log"; fail "export vol not served"; }
"$NBDPY" "$IO" verify "$tmp/vol.sock" 1 > "$tmp/v.out" 2>&1 ||
	{ cat "$tmp/v.out"; fail "verified I/O through export vol"; }
grep -q "TLS PSK identity 'NVMe0R01 $H $P'" "$tmp/tgt-t.log" || fail "no TLS at the target"
cat "$tmp/gw.log"
gw_stop
echo pass
