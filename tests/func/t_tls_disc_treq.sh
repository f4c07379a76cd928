#!/usr/bin/env bash
# TREQ of the discovery log decides TLS on discovered paths (issue 21).
# The test target lists its port 2 as TLS "required", port 3 as "not
# required" (taking TLS and plaintext both, and logging which) and port 4
# (TLS only) as "not specified"; port 1
# (plaintext) carries the gateway's discovery controller and is left out of
# the log.  Targets configured without paths, and one an auto_export
# policy makes:
# - tn (no tls): port 2 is not connected at all, one error line names the
#   subsystem, port and fix; port 3 serves it in plaintext (port 4, "not
#   specified", follows its configuration: plaintext, refused);
# - tt (tls = true): ports 2, 3 and 4 over TLS: TREQ "not required" does
#   not switch off the TLS the target asks for (review: it did, so one
#   byte of a plaintext discovery log downgraded a keyed target);
# - tr (tls = "require"): port 3 over TLS too;
# - the policy's target (tls = true with its key): verified I/O, over TLS
#   on port 2;
# then, with port 3 hidden too, a target without a key waits: no connect
# to the TLS-only port over several fill scans, one error line, and status
# says why it waits.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"

P=nqn.2026-01.io.nvmf-gateway:treq
H=nqn.2026-01.io.nvmf-gateway:tls-host
tls_genkey "$tmp/psk.key"
p1=$(free_port) p2=$(free_port) p3=$(free_port) p4=$(free_port)
while [ "$p2" = "$p1" ]; do p2=$(free_port); done
while [ "$p3" = "$p1" ] || [ "$p3" = "$p2" ]; do p3=$(free_port); done
while [ "$p4" = "$p1" ] || [ "$p4" = "$p2" ] || [ "$p4" = "$p3" ]; do p4=$(free_port); done
tgt_start t "" -s "$p1" -s "$p2" -s "$p3" -s "$p4" --subsys "$P-n:16M" --subsys "$P-t:16M" \
	--subsys "$P-r:16M" --subsys "$P-auto:16M" --tls-key "$tmp/psk.key" --plain-port 1 \
	--port-treq 2:required --port-treq 3:not-required --port-treq 4:not-specified
ctl t disc-port 1 hide > /dev/null

out=$("$GW" discover -t tcp -a 127.0.0.1 -s "$p1" -q "$H" -o json) || fail "discover: $out"
[ "$(echo "$out" | jq -r --arg p "$p3" '[.records[] | select(.trsvcid == $p) | .treq | startswith("not required")] | all')" = true ] ||
	fail "port 3 is not listed as TREQ not required: $out"
[ "$(echo "$out" | jq -r --arg p "$p2" '[.records[] | select(.trsvcid == $p) | .sectype == "tls1.3"] | all')" = true ] ||
	fail "port 2's security type is not TLS 1.3: $out"

tgt() { echo "{ name = \"$1\"; subnqn = \"$P-${1#t}\"; reconnect_delay = 1; $2 }"; }
key="tls_key_file = \"$tmp/psk.key\";"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; control = "$tmp/gw.control"; };
targets = ( $(tgt tn ""), $(tgt tt "tls = true; $key"), $(tgt tr "tls = \"require\"; $key") );
exports = ( { name = "n"; target = "tn"; nsid = 1; nbd = { listen = "unix:$tmp/n.sock"; }; },
  { name = "t"; target = "tt"; nsid = 1; nbd = { listen = "unix:$tmp/t.sock"; }; },
  { name = "r"; target = "tr"; nsid = 1; nbd = { listen = "unix:$tmp/r.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
auto_export = ( { subnqn = "$P-auto"; nsid = 1; name = "auto"; tls = true; $key
    nbd = { listen = "unix:$tmp/auto.sock"; }; } );
CONF
st() { "$GW" status -s "$tmp/gw.control" -o json; }
paths() { st | jq -c --arg n "$1" '[.targets[] | select(.name == $n) | .paths[] | .trsvcid] | sort'; }
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
for e in n t r auto; do
	gw_wait "export $e: serving" 1 30 > /dev/null ||
		{ cat "$tmp/gw.log"; fail "export $e not served"; }
	"$NBDPY" "$IO" verify "$tmp/$e.sock" 1 > "$tmp/v$e.out" 2>&1 ||
		{ cat "$tmp/v$e.out"; fail "verified I/O through export $e"; }
done
cat "$tmp/gw.log"
grep "connection from" "$tmp/tgt-t.log"
want() { [ "$(paths "$1")" = "$2" ] || fail "$1's paths: $(paths "$1"), want $2"; }
want tn "$(echo "[\"$p3\",\"$p4\"]" | jq -c sort)"
[ "$(st | jq -c --arg p "$p2" '[.discovered[] | select(.trsvcid == $p) | .treq] | unique')" = "[1]" ] ||
	fail "status: $(st | jq -c .discovered)"
want tt "$(echo "[\"$p2\",\"$p3\",\"$p4\"]" | jq -c sort)"
want tr "$(echo "[\"$p2\",\"$p3\",\"$p4\"]" | jq -c sort)"
[ "$(grep -c "target tn: subsystem $P-n port 127.0.0.1:$p2 requires TLS (TREQ) and the target has no TLS key: not connecting to it; set tls = true and tls_key_file" "$tmp/gw.log")" = 1 ] ||
	fail "want one error line for tn's TLS-only port"
grep -q "target tt: path .* 127.0.0.1:$p2 (TLS)" "$tmp/gw.log" || fail "tt's port 2 not over TLS"
grep -q "target tt: path .* 127.0.0.1:$p3 (TLS)" "$tmp/gw.log" || fail "tt's port 3 (not required) not over TLS"
grep -q "target tr: path .* 127.0.0.1:$p3 (TLS)" "$tmp/gw.log" || fail "tr's port 3 not over TLS"
grep -q "target tt: path .* 127.0.0.1:$p4 (TLS)" "$tmp/gw.log" || fail "tt's port 4 (not specified) not over TLS"
grep -q "target tn: path .* 127.0.0.1:$p4\$" "$tmp/gw.log" || fail "tn's port 4 (not specified) not plaintext"
grep -q "target treq-auto: path .* 127.0.0.1:$p2 (TLS)" "$tmp/gw.log" ||
	fail "the policy's target's port 2 not over TLS"
for s in r auto t; do
	grep -q "TLS PSK identity 'NVMe0R01 $H $P-$s'" "$tmp/tgt-t.log" || fail "$s: no TLS at the target"
done
grep -q "TLS PSK identity 'NVMe0R01 $H $P-n'" "$tmp/tgt-t.log" && fail "tn used TLS"
# Port 3: TLS for tt and tr, plaintext for tn (one connection each at least).
[ "$(grep -c "port 3: TLS connection" "$tmp/tgt-t.log")" -ge 2 ] || fail "no TLS on port 3"
[ "$(grep -c "port 3: plaintext connection" "$tmp/tgt-t.log")" -ge 1 ] || fail "no plaintext on port 3"
gw_stop

# Only the TLS-only port listed: a target without a key waits, connects
# nothing, says why.
ctl t disc-port 3 hide > /dev/null
ctl t disc-port 4 hide > /dev/null
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; hostnqn = "$H"; control = "$tmp/gw.control"; };
targets = ( $(tgt tn "") );
exports = ( { name = "n"; target = "tn"; nsid = 1; nbd = { listen = "unix:$tmp/n.sock"; }; } );
discovery = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; reconnect_delay = 1; } );
CONF
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
t0=$(gw_wait "target tn: subsystem $P-n port 127.0.0.1:$p2 requires TLS" 1 30) ||
	{ cat "$tmp/gw.log"; fail "no error line for the TLS-only port"; }
# The fill scan runs every second: wait for several by the gateway's clock
# (the status' waiting_s), then count.
for _ in $(seq 1 200); do
	w=$(st | jq -r '.targets[0].waiting_s // 0')
	[ "$(echo "$w >= 4" | bc)" = 1 ] && break
	sleep 0.1
done
st | jq -c '.targets[0]'
st | jq -e '.targets[0].wait_reason | test("requires TLS")' > /dev/null ||
	fail "status does not say why tn waits: $(st | jq -c '.targets[0]')"
[ "$(grep -c "target tn: .* requires TLS (TREQ)" "$tmp/gw.log")" = 1 ] || fail "the error line repeats"
n=$(grep -c "ctrl tn" "$tmp/gw.log")
[ "$n" = 0 ] || fail "$n connect lines for tn: a port that can only refuse was tried"
gw_alive
gw_stop

# The same with connect_loss_tmo: its export fails once that has passed
# (by the gateway's clock), as for a target never reached.
sed -i 's/targets = ( { name = "tn"; /targets = ( { name = "tn"; connect_loss_tmo = 2; /' "$tmp/gw.conf"
grep -q "connect_loss_tmo = 2" "$tmp/gw.conf" || fail "sed"
GW_CONTROL="$tmp/gw.control" gw_start run "$tmp/gw.conf"
t0=$(gw_wait "target tn: no paths configured; waiting for discovery" 1 30) || fail "tn does not wait"
t1=$(gw_wait "export n: target tn not reached within connect_loss_tmo (2 s); export failed" 1 60) ||
	{ cat "$tmp/gw.log"; fail "export n did not fail after connect_loss_tmo"; }
grep -q "target tn: discovery gave no usable path within connect_loss_tmo (2 s): port 127.0.0.1:$p2 requires TLS" "$tmp/gw.log" ||
	fail "no line saying why tn was not reached"
took=$(echo "$t1 - $t0" | bc -l)
echo "export n failed $took s after tn began to wait"
[ "$(echo "$took >= 1.9 && $took < 30" | bc)" = 1 ] || fail "failed after $took s, want 2 s (bounds 1.9..30)"
n=$(grep -c "ctrl tn" "$tmp/gw.log")
[ "$n" = 0 ] || fail "$n connect lines for tn"
gw_alive
gw_stop
echo pass
