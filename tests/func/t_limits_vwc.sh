#!/usr/bin/env bash
# Flush is offered when any path has a volatile write cache (issue 14,
# defect 6).  Two targets serve the same namespace (same NQN, so the same
# NGUID): path 0 without a volatile write cache (--persist: write-through),
# path 1 with one (--persist --vwc).  The export must offer flush: writes that path 1
# acknowledged sit in its cache.  The gateway used to take the capability
# from the first live path only (path 0 here: no flush).
set -u
. "$TOP/tests/func/resil/lib.sh"

N=nqn.2026-01.io.nvmf-gateway:vwc
mkdir -p "$tmp/pa" "$tmp/pb"
tgt_start a "" -s 0 --persist "$tmp/pa" --subsys "$N:8M"
tgt_start b "" -s 0 --persist "$tmp/pb" --vwc --subsys "$N:8M"
pa=$(sed -n 1p "$tmp/a.ready") pb=$(sed -n 1p "$tmp/b.ready")
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; log_level = "info"; };
targets = ( { name = "t1"; subnqn = "$N"; multipath = "round-robin";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pa"; },
              { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$pb"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; } );
exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; } );
CONF
SOCKS="$tmp/e1.sock" gw_start run "$tmp/gw.conf"
line=$(grep 'e1: namespace 1 of t1' "$tmp/gw.log") || fail "no export line in the log"
echo "$line"
grep -q 'path 1 of target t1: nsid 1: .*not used' "$tmp/gw.log" &&
	fail "path 1 was refused: not the same namespace"
case "$line" in
*flush*) ;;
*) fail "no flush capability although path 1 has a volatile write cache" ;;
esac
"$NBDPY" -c "
import nbd, sys
h = nbd.NBD()
h.connect_unix('$tmp/e1.sock')
print('can_flush', h.can_flush())
sys.exit(0 if h.can_flush() else 1)
" || fail "the NBD export does not offer flush"
gw_alive
gw_stop
echo pass
