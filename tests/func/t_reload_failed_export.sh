#!/usr/bin/env bash
# A reload whose changed or added exports cannot be started says so: the
# reply names them ("failed", an "error") and the client exits non-zero,
# so `systemctl reload` fails.  Here export b is moved to a TCP port that
# another process holds: its old listener is gone already and the new one
# cannot bind.  Before, the reply was {"ok":true,...} and the client
# exited 0.  The untouched export a keeps serving; a reload that moves b
# to a free port brings it back and succeeds.
set -u
. "$TOP/tests/func/control/lib.sh"
need jq python3

target_start nqn.2014-08.org.nvmf-gateway:rf-a:16M:512:2

# conf B_LISTEN
conf() {
	cat > "$tmp/gw.conf.new" << EOF
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:rf-a";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; },
            { name = "b"; target = "ta"; nsid = 2; nbd = { listen = "$1"; }; } );
EOF
	mv "$tmp/gw.conf.new" "$tmp/gw.conf"
}

conf "unix:$tmp/b.sock"
gw_start run "$tmp/gw.conf"
[ -S "$tmp/b.sock" ] || fail "no socket for b"

# a port held by someone else, for as long as the test runs
rm -f "$tmp/held"
python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1] + ".new", "w").write(str(s.getsockname()[1]))
__import__("os").rename(sys.argv[1] + ".new", sys.argv[1])
time.sleep(600)
' "$tmp/held" &
hpid=$!
cleanup_fn stop_var hpid
wait_for 20 test -s "$tmp/held" || fail "the port holder did not start"
held=$(cat "$tmp/held")

conf "tcp:127.0.0.1:$held"
rc=0
"$GW" reload -s "$ctl" > "$tmp/reload1.out" 2> "$tmp/reload1.err" || rc=$?
cat "$tmp/reload1.out" "$tmp/reload1.err"
[ "$rc" != 0 ] || fail "reload exited 0 with export b not started"
grep -q 'could not be started: b ' "$tmp/reload1.err" || fail "the error does not name b"
grep -q 'reload: 1 export could not be started: b' "$tmp/gw.log" || fail "the log does not name b"
[ "$(st '.exports | map(select(.name == "a"))[0].state')" = attached ] || fail "a is not attached"

# again (b is "unchanged but failed": started again, and fails again);
# the JSON reply: the counts, and which failed
"$GW" reload -s "$ctl" -o json > "$tmp/reload2.json" && fail "reload -o json exited 0"
cat "$tmp/reload2.json"
jq -e '.ok == false and .failed == ["b"] and .reattached == 1 and (.error | test("b"))' \
	"$tmp/reload2.json" > /dev/null || fail "reply of reload 2"

# a free port: b comes back, the reload succeeds
conf "unix:$tmp/b2.sock"
"$GW" reload -s "$ctl" -o json > "$tmp/reload3.json" || fail "reload 3: $(cat "$tmp/reload3.json")"
cat "$tmp/reload3.json"
jq -e '.ok == true and (has("failed") | not) and .exports_running == 2' "$tmp/reload3.json" \
	> /dev/null || fail "reply of reload 3"
[ -S "$tmp/b2.sock" ] || fail "no socket for b after reload 3"

gw_stop
echo "reload with an export that cannot start: OK"
