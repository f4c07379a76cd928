#!/usr/bin/env bash
# Unix sockets only for those allowed: an NBD listener and the control
# socket get the mode, owner and group of their access group before anyone
# can connect; a peer whose uid and groups (primary or supplementary) are
# not in allow_users/allow_groups is closed at once with one log line
# naming its uid, gid and pid, and the gateway goes on serving the others.
# A reload that changes the rules restarts that listener with them.
# The clients of other uids run through setpriv; the test runs as root.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq setpriv
[ "$(id -u)" = 0 ] || skip "needs root (clients of other uids through setpriv)"
probe="/usr/bin/python3 $TOP/tests/func/access/probe.py"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
nogroup=$(getent group 65534 | cut -d: -f1)
[ -n "$nogroup" ] || skip "no group 65534"

target_start nqn.2014-08.org.nvmf-gateway:acc-unix:16M
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$ctl";
  control_access = { mode = "0660"; group = 65534; allow_users = [ 0 ]; }; };
targets = ( { name = "t"; subnqn = "nqn.2014-08.org.nvmf-gateway:acc-unix";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = (
  { name = "a"; target = "t"; nbd = { listen = "unix:$tmp/a.sock";
      access = { mode = "0666"; owner = "nobody"; group = "$nogroup";
                 allow_users = [ "root" ]; allow_groups = [ 4242 ]; }; }; },
  { name = "b"; target = "t"; nbd = { listen = "unix:$tmp/b.sock"; }; } );
CONF
gw_start run "$tmp/gw.conf"
chmod 755 "$tmp"

# The files: as configured, and owner-only where nothing is said.
[ "$(stat -c '%a %u %g' "$tmp/a.sock")" = "666 65534 65534" ] ||
	fail "a.sock: $(stat -c '%a %u %g' "$tmp/a.sock"), want 666 65534 65534"
[ "$(stat -c '%a %u %g' "$tmp/b.sock")" = "600 0 0" ] ||
	fail "b.sock: $(stat -c '%a %u %g' "$tmp/b.sock"), want 600 0 0"
[ "$(stat -c '%a %u %g' "$ctl")" = "660 0 65534" ] ||
	fail "control: $(stat -c '%a %u %g' "$ctl"), want 660 0 65534"
echo "modes, owners, groups as configured"

# The mode alone keeps nobody out of b.sock (the kernel refuses).
out=$(as_nobody $probe "unix:$tmp/b.sock")
[ "${out#cannot connect}" != "$out" ] || fail "nobody reached the 0600 b.sock: $out"

# Root is on the list; nobody is not, and is told nothing.
[ "$($probe "unix:$tmp/a.sock")" = served ] || fail "root not served on a.sock"
out=$(as_nobody $probe "unix:$tmp/a.sock")
[ "$out" = closed ] || fail "nobody on a.sock: $out, want closed"
refused() { grep -c "nbd server unix:$tmp/a.sock: refused uid 65534 gid 65534 pid [0-9]*: neither its uid nor its groups are in allow_users/allow_groups" "$tmp/gw.log"; }
wait_for 10 '[ "$(refused)" = 1 ]' || fail "want one refusal line, got $(refused)"
echo "nobody refused, one line"

# A supplementary group on the list lets it in (SO_PEERGROUPS).
out=$(setpriv --reuid=65534 --regid=65534 --groups=4242 $probe "unix:$tmp/a.sock")
[ "$out" = served ] || fail "nobody with group 4242: $out, want served"

# The control socket: group nogroup may open it (0660), but only uid 0 is
# allowed to talk.
out=$(as_nobody $probe "unix:$ctl" '{"cmd":"status"}')
[ "$out" = closed ] || fail "nobody on the control socket: $out, want closed"
wait_for 10 'grep -q "control $ctl: refused uid 65534 gid 65534 pid [0-9]*: " "$tmp/gw.log"' ||
	fail "no refusal line for the control socket"
[ "$(grep -c ": refused " "$tmp/gw.log")" = 2 ] || fail "want exactly two refusal lines"

# The gateway goes on: root still served, status still answers.
[ "$($probe "unix:$tmp/a.sock")" = served ] || fail "root not served after the refusals"
[ "$(st .exports_running)" = 2 ] || fail "exports not running after the refusals"

# A reload with other rules for a (nobody's uid now on the list) restarts
# its listener with them; b is left alone.
sed -i 's|allow_users = \[ "root" \]|allow_users = [ "root", "nobody" ]|' "$tmp/gw.conf"
"$GW" reload -s "$ctl" > "$tmp/reload.txt" || fail "reload: $(cat "$tmp/reload.txt")"
cat "$tmp/reload.txt"
grep -q '1 changed' "$tmp/reload.txt" || fail "the access change was not seen as a change"
wait_for 10 '[ "$(as_nobody $probe "unix:$tmp/a.sock")" = served ]' ||
	fail "nobody not served after the reload allowed it"
[ "$(stat -c '%a %u %g' "$tmp/a.sock")" = "666 65534 65534" ] || fail "a.sock after reload"
gw_stop

# Without CAP_FOWNER, as under the shipped unit (CAP_CHOWN, not FOWNER):
# the owner is given all the same, since the mode is set before the file
# becomes nobody's (chmod of another user's file takes CAP_FOWNER).
# Before, a.sock's export failed with "Operation not permitted".
SOCKS="$tmp/a.sock $tmp/b.sock" gw_start run "$tmp/gw.conf" "setpriv --bounding-set=-fowner"
[ "$(stat -c '%a %u %g' "$tmp/a.sock")" = "666 65534 65534" ] ||
	fail "a.sock without CAP_FOWNER: $(stat -c '%a %u %g' "$tmp/a.sock")"
[ "$($probe "unix:$tmp/a.sock")" = served ] || fail "root not served without CAP_FOWNER"
gw_stop
echo "unix access: OK"
