#!/usr/bin/env bash
# A namespace detached from one path's controller only (Namespace
# Attachment; the test target's ns-detach): that path is left out for the
# export, writes it acknowledged are still flushed (through the path that
# shows the namespace), and I/O goes on.  The test target keeps one
# namespace per ANA group, so here the detached path has no usable group
# and the flush is rerouted by ANA as before; the case where a shared
# group keeps it usable (nvmet's default group 1), which sent every flush
# to the detached path and failed it, is unit test flush_of_path_left_out.
set -u
. "$TOP/tests/func/live/lib.sh"

A=nqn.2026-01.io.nvmf-gateway:flushdetach
tgt_start a "" --vwc -s 0 -s 0 --subsys "$A:32M"
p1=$(sed -n 1p "$tmp/a.ready") p2=$(sed -n 2p "$tmp/a.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = ( { name = "t1"; subnqn = "$A"; multipath = "round-robin";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p1"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$p2"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 30; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
NVMF_GATEWAY_LOG=info SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
S="$tmp/e1.sock"
# Round-robin: writes acknowledged on both paths.
for i in 1 2 3 4 5 6; do
	[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "write $i"
done
p2io=$(ctl a stats | grep -o 'port2_io=[0-9]*')
echo "before the detach: $p2io"
[ "${p2io#port2_io=}" -gt 0 ] || fail "no write went through path 1"
ctl a ns-detach "$A" 1 2 > /dev/null
gw_wait 'path 1 of target t1: nsid 1: removed; this path is not used for it' 1 30 > /dev/null ||
	fail "path 1 was not left out after the detach"
for i in 1 2; do
	r=$("$NBDPY" "$LIO" flush "$S" 20)
	echo "flush $i with nsid 1 detached from path 1: $r"
	[ "$r" = ok ] || fail "flush $i says '$r', want ok through path 0"
done
[ "$("$NBDPY" "$LIO" write "$S" 10)" = ok ] || fail "a write after the detach"
! grep -q 'invariant broken\|ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log" ||
	fail "invariant or sanitizer report"
gw_alive
gw_stop_within 30
echo pass
