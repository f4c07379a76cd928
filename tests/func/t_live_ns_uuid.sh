#!/usr/bin/env bash
# A target that names its namespaces by UUID alone, as Linux's target does
# by default (NGUID and EUI-64 zero; the UUID in the Namespace
# Identification Descriptor list, Identify CNS 03h).  Another namespace
# behind the same NSID, with the same size and block size, must not be
# served under the old export: at a reconnect, and at a namespace change
# event.  Before, the gateway never read the descriptor list, compared
# two zero NGUIDs, and served the other namespace's blocks (found by a
# hostile review).  nsid 1's first descriptor list fails (Command
# Interrupted): the export starts without its UUID and learns it at the
# next reconnect; before that was done (a review of the fix), a UUID missed
# once was never compared again.
set -u
. "$TOP/tests/func/live/lib.sh"
NSC="$TOP/tests/func/live/ns_client.py"
A=nqn.2026-01.io.nvmf-gateway:nsuuid
tgt_start a "" --uuid-only -s 0 --subsys "$A:32M:512:2"
port=$(head -1 "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; },
            { name = "e2"; target = "t1"; nsid = 2; nbd = { listen = "unix:$tmp/e2.sock"; }; } );
CONF
ctl a id-desc-fail 1 0x21 > /dev/null
NVMF_GATEWAY_LOG=info SOCKS="$tmp/e1.sock $tmp/e2.sock" gw_start run "$tmp/gw.conf"
rw_is() { local r; r=$("$NBDPY" "$NSC" rw "$1" "$2"); [ "$r" = "$3" ] || fail "I/O on $1 at $2: $r, want $3"; }
rw_is "$tmp/e1.sock" 0 ok
rw_is "$tmp/e2.sock" 0 ok
# 0. The UUID missed at the start is learnt at a reconnect.
grep -q 'the descriptor list of nsid 1 fails' "$tmp/tgt-a.log" || fail "the fault did not hit nsid 1's list"
ctl a drop > /dev/null
gw_wait 'e1: nsid 1: UUID learnt from path 0' 1 60 > /dev/null || fail "e1 did not learn its UUID"
rw_is "$tmp/e1.sock" 0 ok
# 1. Replaced without an event, seen at the reconnect.
ctl a ns-identity "$A" 1 noaen > /dev/null
ctl a drop > /dev/null
gw_wait 'e1: .*nsid 1: another namespace' 1 60 > /dev/null ||
	fail "the replaced namespace (a new UUID only) was not seen at the reconnect"
rw_is "$tmp/e1.sock" 0 EIO
# 2. Replaced with the event.
rw_is "$tmp/e2.sock" 0 ok
ctl a ns-identity "$A" 2 > /dev/null
gw_wait 'e2: .*nsid 2: another namespace' 1 30 > /dev/null ||
	fail "the replaced namespace (a new UUID only) was not seen at its event"
rw_is "$tmp/e2.sock" 0 EIO
gw_alive
gw_stop_within 30
echo pass
