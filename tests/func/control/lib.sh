# Shared by t_control.sh, t_reload.sh, t_export_add.sh: the in-tree test
# target on loopback, `nvmf-gateway run` with a control socket, and small
# helpers around the control clients.  Kills only the pids it started.
: "${GW:?run by tests/func/run.sh}" "${BUILD:?}" "${TOP:?}"
export PATH="/usr/bin:$PATH"
fail() { echo "FAIL: $*"; [ -n "${tmp:-}" ] && [ -f "$tmp/gw.log" ] && tail -40 "$tmp/gw.log"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need() {
	for t in "$@"; do
		command -v "$t" > /dev/null || skip "$t is not installed"
	done
}
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
tmp=$(mktemp -d /tmp/gw-ctl.XXXXXX)
ctl="$tmp/gw.control"
tpid='' gpid=''
cleanup() {
	[ -n "$gpid" ] && kill -TERM "$gpid" 2> /dev/null && wait "$gpid" 2> /dev/null
	mountpoint -q "$tmp/fuse" 2> /dev/null && umount -l "$tmp/fuse"
	[ -n "$tpid" ] && kill "$tpid" 2> /dev/null && wait "$tpid" 2> /dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# target_start SUBSYS_SPEC...: port in $port
target_start() {
	local args=() s
	for s in "$@"; do args+=(--subsys "$s"); done
	rm -f "$tmp/ready"
	"$T" -s "${port:-0}" "${args[@]}" --ready-file "$tmp/ready" >> "$tmp/target.log" 2>&1 &
	tpid=$!
	for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
	port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
	[ -n "$port" ] || fail "the test target did not start"
}

# gw_start: the daemon on $tmp/gw.conf; waits until the control socket
# answers status.
gw_start() {
	"$GW" check -c "$tmp/gw.conf" || fail "check of the starting configuration"
	"$GW" run -f -c "$tmp/gw.conf" > "$tmp/gw.log" 2>&1 &
	gpid=$!
	for _ in $(seq 200); do
		if [ -S "$ctl" ] && [ "$("$GW" status -s "$ctl" -o json 2> /dev/null |
			jq -r .state)" = running ]; then
			return 0
		fi
		kill -0 "$gpid" 2> /dev/null || fail "the gateway exited"
		sleep 0.1
	done
	fail "the gateway did not come up"
}

# gw_stop: SIGTERM, exit status 0 expected.
gw_stop() {
	local st=0
	kill -TERM "$gpid"
	wait "$gpid" || st=$?
	gpid=''
	[ $st -eq 0 ] || fail "gateway exit status $st after SIGTERM"
}

# st JQ_FILTER: a value from the status JSON.
st() { "$GW" status -s "$ctl" -o json | jq -r "$1"; }
# sts JQ_FILTER: a value from the stats JSON.
sts() { "$GW" stats -s "$ctl" -o json | jq -r "$1"; }

# raw LINE...: sends the lines on one connection, prints the reply lines.
raw() {
	python3 - "$ctl" "$@" << 'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rwb")
for line in sys.argv[2:]:
    f.write(line.encode() + b"\n")
    f.flush()
    print(f.readline().decode().rstrip("\n"))
PY
}

# wait_for SECONDS 'SHELL TEXT': polls until the text, evaluated anew
# each time (quote it: '"$(st .state)" = live'), succeeds.
wait_for() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do eval "$*" && return 0; sleep 0.1; done
	return 1
}
