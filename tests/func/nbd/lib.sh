# Shared by tests/func/t_nbd_*.sh: start `nvmf-gateway nbd` in the
# background, wait until it serves, and kill exactly that pid on exit.
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
# Debian's python has the libnbd bindings (python3-libnbd); a pyenv or
# venv python3 first in PATH does not.
export PATH="/usr/bin:$PATH"
NBDPY=/usr/bin/python3

tmp=$(mktemp -d /tmp/nbd-func.XXXXXX)
gw_pid=
cleanup() {
	if [ -n "$gw_pid" ]; then
		kill "$gw_pid" 2>/dev/null
		wait "$gw_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

need() {
	for t in "$@"; do
		command -v "$t" > /dev/null || skip "$t is not installed"
	done
}

# gw_start ARGS...: the gateway in the background; its log in $tmp/gw.log.
gw_start() {
	"$GW" nbd "$@" > "$tmp/gw.out" 2> "$tmp/gw.log" &
	gw_pid=$!
	local i
	for i in $(seq 1 200); do
		grep -q "serving export" "$tmp/gw.out" 2>/dev/null && return 0
		kill -0 "$gw_pid" 2>/dev/null || { cat "$tmp/gw.log"; fail "gateway exited"; }
		sleep 0.05
	done
	cat "$tmp/gw.log"
	fail "gateway did not start serving"
}

# gw_stop: SIGTERM, and the gateway must exit 0 on its own.
gw_stop() {
	kill -TERM "$gw_pid"
	local st=0
	wait "$gw_pid" || st=$?
	gw_pid=
	[ $st -eq 0 ] || { tail -20 "$tmp/gw.log"; fail "gateway exit status $st after SIGTERM"; }
}

free_port() {
	"$NBDPY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# nbdinfo_field URI FIELD: the value nbdinfo prints for FIELD.
nbdinfo_field() {
	nbdinfo "$1" | sed -n "s/^[[:space:]]*$2: //p" | head -1
}
