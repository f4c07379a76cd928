#!/usr/bin/env bash
# NVMe/TCP over TLS through `nvmf-gateway run`: kill -9 of the target
# during a verified write/read loop on the NBD export, then a restart on
# the same port: the path reconnects with a new handshake on every queue
# and I/O resumes with zero verify and I/O errors.  Digests on, so that
# they are checked under TLS too.  The namespace is kept in a file
# (write-through), so any block read back other than last written is the
# gateway's fault.
set -u
. "$TOP/tests/func/resil/lib.sh"
. "$TOP/tests/func/tls/key.sh"

N=nqn.2026-01.io.nvmf-gateway:tls-reconnect
H=nqn.2026-01.io.nvmf-gateway:tls-host
tls_genkey "$tmp/psk.key"
mkdir -p "$tmp/disk"
tgt_start a "" --persist "$tmp/disk" -s 0 --subsys "$N:64M" --tls-key "$tmp/psk.key"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; hostnqn = "$H"; };
targets = ( { name = "t1"; subnqn = "$N";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    tls = true; tls_key_file = "$tmp/psk.key"; hdr_digest = true; data_digest = true;
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"

# Until told to stop, not for a fixed time (t_resil_kill9's loop once
# ended before a slow round did).
verify_start
sleep 2
before=$(stat_field a port1_io)
[ "$before" -gt 0 ] || fail "no I/O reached the target before the kill"
hs1=$(grep -c "TLS up" "$tmp/tgt-a.log")
tgt_kill9 a
echo "target killed after $before I/O commands and $hs1 handshakes"
sleep 1
tgt_start a "" --persist "$tmp/disk" -s "$port" --subsys "$N:64M" --tls-key "$tmp/psk.key"
for _ in $(seq 1 600); do
	[ "$(stat_field a port1_io)" -gt 0 ] && break
	sleep 0.1
done
after=$(stat_field a port1_io)
echo "restarted target has seen $after I/O commands"
[ "$after" -gt 0 ] || fail "I/O did not resume within 60 s of the restart"
hs2=$(grep -c "TLS up" "$tmp/tgt-a.log")
# Admin queue and one I/O queue per reactor (2), each time.
[ "$hs1" -ge 3 ] && [ $((hs2 - hs1)) -ge 3 ] ||
	fail "want at least 3 handshakes before and 3 after the restart, saw $hs1 and $((hs2 - hs1))"
gw_alive
sleep 2 # verified I/O on the restarted target
verify_stop_ok
grep -q '"verify_errors": 0' "$tmp/verify.out" || fail "verify errors"
grep -q '"io_errors": 0' "$tmp/verify.out" || fail "I/O errors"
grep -q 'path 0 live again' "$tmp/gw.log" || fail "no reconnect logged"
grep -q "protocol error\|TLS receive" "$tmp/tgt-a.log" && fail "the target saw a bad PDU or record"
gw_stop
echo pass
