#!/usr/bin/env bash
# The control clients give up when the daemon does not answer: a daemon
# stopped with SIGSTOP (it accepts nothing and answers nothing) makes
# `reload -t 2` and `status -t 2` fail within their deadline, timed by
# the clients' own exit, with a message that says the gateway did not
# answer.  Once continued, the daemon serves again (the abandoned requests
# cost it nothing).  Before the fix the clients waited for ever (and had
# no -t).
set -u
. "$TOP/tests/func/control/lib.sh"
need jq

target_start nqn.2014-08.org.nvmf-gateway:cto-a:16M
cat > "$tmp/gw.conf" << EOF2
gateway = { reactors = 1; state_dir = "$tmp/state"; control = "$ctl"; };
targets = ( { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:cto-a";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "a"; target = "ta"; nbd = { listen = "unix:$tmp/a.sock"; }; } );
EOF2
gw_start run "$tmp/gw.conf"
"$GW" status -s "$ctl" -t 5 > /dev/null || fail "status -t 5 on a running gateway"

kill -STOP "$GW_PID"
cont() { kill -CONT "$GW_PID" 2> /dev/null; }
cleanup_fn cont
for cmd in reload status; do
	t0=$(date +%s%N)
	timeout 120 "$GW" $cmd -s "$ctl" -t 2 > "$tmp/$cmd.out" 2> "$tmp/$cmd.err"
	st=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	cat "$tmp/$cmd.err"
	echo "$cmd against a stopped gateway: status $st after $ms ms"
	[ "$st" = 124 ] && fail "$cmd -t 2 still waited after 120 s"
	[ "$st" != 0 ] || fail "$cmd succeeded against a stopped gateway"
	grep -q "did not answer within 2 s" "$tmp/$cmd.err" ||
		fail "$cmd: no clear message: $(cat "$tmp/$cmd.err")"
	# The deadline is kept, not cut short (generous bounds: shared host).
	[ "$ms" -ge 1900 ] && [ "$ms" -lt 30000 ] || fail "$cmd gave up after $ms ms (-t 2)"
done
"$GW" status -s "$ctl" -t 0.5 > /dev/null 2>&1 && fail "-t 0.5 taken (whole seconds)"
kill -CONT "$GW_PID"
# The daemon takes up what was left on its socket and serves on.
[ "$(st .state)" = running ] || fail "not running after SIGCONT"
"$GW" reload -s "$ctl" -t 60 > "$tmp/r.out" 2>&1 || fail "reload after SIGCONT: $(cat "$tmp/r.out")"
gw_alive
gw_stop
echo "control timeout: OK"
