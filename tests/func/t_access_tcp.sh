#!/usr/bin/env bash
# TCP listeners only for the addresses allowed: the NBD listener and the
# metrics endpoint take allow_from (CIDRs).  All loopback: the listeners
# bind 127.0.0.1 or ::1 (the metrics one as the v4-mapped ::ffff:127.0.0.1, so a
# v4 rule is matched against a v6 socket's peer), and the clients bind
# their source address, 127.0.0.2 (allowed) or 127.0.0.3 and 127.0.0.1
# (not).  Each refusal is one log line naming the address; the allowed
# client is served before and after.  A flood of refused connections is
# logged within a rate limit, per listener.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq
probe="/usr/bin/python3 $TOP/tests/func/access/probe.py"
nport=$(free_port) mport=$(free_port) v6port=$(free_port)

target_start nqn.2014-08.org.nvmf-gateway:acc-tcp:16M
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$ctl";
  metrics = "tcp:[::ffff:127.0.0.1]:$mport";
  metrics_access = { allow_from = [ "127.0.0.2/32", "::1" ]; }; };
targets = ( { name = "t"; subnqn = "nqn.2014-08.org.nvmf-gateway:acc-tcp";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "a"; target = "t"; nbd = { listen = "tcp:127.0.0.1:$nport";
      access = { allow_from = [ "10.0.0.0/8", "127.0.0.2" ]; }; }; },
  { name = "b"; target = "t"; nbd = { listen = "tcp:[::1]:$v6port";
      access = { allow_from = [ "fd00::/8" ]; }; }; } );
CONF
gw_start run "$tmp/gw.conf"

nbd="tcp:127.0.0.1:$nport" met="tcp:127.0.0.1:$mport"
http='GET /metrics HTTP/1.0'
[ "$($probe "$nbd" 127.0.0.2)" = served ] || fail "127.0.0.2 not served by NBD"
[ "$($probe "$met" 127.0.0.2 "$http")" = served ] || fail "127.0.0.2 not served by metrics"
for src in 127.0.0.3 127.0.0.1; do
	out=$($probe "$nbd" $src)
	[ "$out" = closed ] || fail "NBD from $src: $out, want closed"
	out=$($probe "$met" $src "$http")
	[ "$out" = closed ] || fail "metrics from $src: $out, want closed"
done
# IPv6: ::1 is not in fd00::/8.
out=$($probe "tcp:[::1]:$v6port")
[ "$out" = closed ] || fail "NBD on [::1] from ::1: $out, want closed"
n() { grep -c "$1 tcp:$2: refused $3:[0-9]*: its address is not in allow_from" "$tmp/gw.log"; }
wait_for 10 '[ "$(grep -c ": refused " "$tmp/gw.log")" = 5 ]' ||
	fail "want 5 refusal lines, got $(grep -c ": refused " "$tmp/gw.log")"
[ "$(n "nbd server" "127.0.0.1:$nport" 127.0.0.3)" = 1 ] || fail "no NBD line for 127.0.0.3"
[ "$(n "nbd server" "127.0.0.1:$nport" 127.0.0.1)" = 1 ] || fail "no NBD line for 127.0.0.1"
mspec="\\[::ffff:127.0.0.1\\]:$mport"
[ "$(grep -c "metrics tcp:$mspec: refused \\[::ffff:127.0.0.3\\]:[0-9]*: its address is not in allow_from" "$tmp/gw.log")" = 1 ] ||
	fail "no metrics line for 127.0.0.3"
grep ": refused " "$tmp/gw.log"
grep -q "nbd server tcp:\\[::1\\]:$v6port: refused \\[::1\\]:[0-9]*: its address is not in allow_from" "$tmp/gw.log" ||
	fail "no NBD line for ::1"
echo "refused: 127.0.0.3, 127.0.0.1 and ::1, one line each"

[ "$($probe "$nbd" 127.0.0.2)" = served ] || fail "127.0.0.2 not served after the refusals"
[ "$($probe "$met" 127.0.0.2 "$http")" = served ] || fail "metrics not served after the refusals"
[ "$(st .exports_running)" = 2 ] || fail "exports not running"

# A flood of refused connections costs a few lines, not one each (a
# listener's refusals are rate-limited: 10 per 10 s), and the limit is the
# listener's: the metrics endpoint's next refusal is still logged.
python3 - 127.0.0.1 "$nport" 127.0.0.3 60 << 'PY' || fail "the flood"
import socket, sys
host, port, src, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for _ in range(n):
    s = socket.socket()
    s.bind((src, 0))
    s.connect((host, port))
    s.settimeout(10)
    assert s.recv(1) == b"", "a refused connection got bytes"
    s.close()
PY
[ "$($probe "$met" 127.0.0.3 "$http")" = closed ] || fail "metrics from 127.0.0.3 not closed"
wait_for 10 '[ "$(grep -c "metrics tcp:$mspec: refused" "$tmp/gw.log")" = 3 ]' ||
	fail "the metrics refusal after the NBD flood was not logged"
flood=$(grep -c "nbd server tcp:127.0.0.1:$nport: refused" "$tmp/gw.log")
echo "62 refused NBD connections: $flood lines"
# 10 in the first 10 s; a host so slow that the flood spans a second
# interval logs up to 10 more.
[ "$flood" -ge 10 ] && [ "$flood" -le 20 ] || fail "$flood refusal lines for 62 refused connections"
[ "$($probe "$nbd" 127.0.0.2)" = served ] || fail "127.0.0.2 not served after the flood"

# A rule that does not fit its listener is an error of the file.
sed -i 's|allow_from = \[ "10.0.0.0/8", "127.0.0.2" \]|allow_users = [ 0 ]|' "$tmp/gw.conf"
out=$("$GW" check -c "$tmp/gw.conf" 2>&1) && fail "allow_users on a tcp: listener passed check"
echo "$out" | grep -q "exports\[0\].nbd.access: mode, owner, group, allow_users and allow_groups apply to unix: listeners only" ||
	fail "check: $out"
gw_stop
echo "tcp access: OK"
