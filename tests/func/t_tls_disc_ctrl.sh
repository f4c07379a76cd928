#!/usr/bin/env bash
# A persistent discovery controller over NVMe/TCP TLS (the test target's
# ports, its discovery subsystem included, all require TLS):
# - from a discovery_conf line in nvme-cli's spelling (--tls, the key
#   inline with --tls_key), it connects over TLS (the target saw the PSK
#   identity of the discovery NQN), and a target configured without paths
#   (tls = true) gets its path from that log and serves verified I/O;
#   status shows the discovery controller watching;
# - with the wrong key (a "discovery" list entry, tls_key_file): each
#   attempt fails with one line naming the key, retried with the backoff,
#   the daemon carries on, and status has the last error;
# - a reload that gives the entry the right key restarts the controller,
#   which then connects.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"

A=nqn.2026-01.io.nvmf-gateway:tlsdc-a
H=nqn.2026-01.io.nvmf-gateway:tls-host
D=nqn.2014-08.org.nvmexpress.discovery
tls_genkey "$tmp/psk.key"
tls_genkey "$tmp/wrong.key"
tgt_start t "" -s 0 --subsys "$A:16M" --tls-key "$tmp/psk.key"
p=$(head -1 "$tmp/t.ready")

(umask 077; echo "# nvme-cli's spelling
-t tcp -a 127.0.0.1 -s $p --tls --tls_key=$(cat "$tmp/psk.key")" > "$tmp/discovery.conf")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; control = "$tmp/gw.control"; };
targets = ( { name = "ta"; subnqn = "$A"; reconnect_delay = 1;
    tls = true; tls_key_file = "$tmp/psk.key"; } );
exports = ( { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; } );
discovery_conf = "$tmp/discovery.conf";
CONF
st() { "$GW" status -s "$tmp/gw.control" -o json; }
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
gw_wait "discovery tcp:127.0.0.1:$p: connected" 1 20 > /dev/null ||
	{ cat "$tmp/gw.log"; fail "the discovery controller did not connect over TLS"; }
grep -q "TLS PSK identity 'NVMe0R01 $H $D'" "$tmp/tgt-t.log" ||
	fail "the discovery controller did not use TLS"
gw_wait "export a: serving" 1 20 > /dev/null || { cat "$tmp/gw.log"; fail "export a not served"; }
"$NBDPY" "$IO" verify "$tmp/a.sock" 1 > "$tmp/va.out" 2>&1 ||
	{ cat "$tmp/va.out"; fail "verified I/O through export a"; }
grep -q "TLS PSK identity 'NVMe0R01 $H $A'" "$tmp/tgt-t.log" || fail "ta did not use TLS"
[ "$(st | jq -r '.discovery[0] | "\(.state) \(.tls)"')" = "watching true" ] || fail "status: $(st | jq -c .discovery)"
gw_stop

# The wrong key: refused, one line per attempt, retried.
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; control = "$tmp/gw.control"; };
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p"; reconnect_delay = 1;
    tls = true; tls_key_file = "$tmp/wrong.key"; } );
CONF
: > "$tmp/gw.log"
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
gw_wait "discovery tcp:127.0.0.1:$p: .*connecting again in" 2 30 > /dev/null ||
	{ cat "$tmp/gw.log"; fail "no second retry with the wrong key"; }
gw_alive
cat "$tmp/gw.log"
bad=$(grep -c "TLS handshake with 127.0.0.1:$p failed: .*different TLS key" "$tmp/gw.log")
[ "$bad" -ge 2 ] || fail "want the wrong key named at least twice (retried), saw $bad"
grep -q "discovery tcp:127.0.0.1:$p: connected" "$tmp/gw.log" && fail "connected with the wrong key"
st | jq -e '.discovery[0].last_error != null' > /dev/null || fail "status: $(st | jq -c .discovery)"
grep -q "NVMeTLSkey" "$tmp/gw.log" && fail "a key in the log"

# The right key by reload: the changed entry restarts and connects.
sed -i "s|$tmp/wrong.key|$tmp/psk.key|" "$tmp/gw.conf"
"$GW" reload -s "$tmp/gw.control" > /dev/null || fail "reload refused"
gw_wait "discovery tcp:127.0.0.1:$p: connected" 1 30 > /dev/null ||
	fail "the reloaded entry did not connect with the right key"
gw_stop
echo pass
