# Shared by t_control.sh, t_reload.sh, t_export_add.sh and t_access_*.sh,
# on top of tests/lib/func.sh: the in-tree test target on loopback,
# `gw_start run "$tmp/gw.conf"` with a control socket, and small helpers
# around the control clients.  Kills only the pids it started.
: "${GW:?run by tests/func/run.sh}" "${BUILD:?}" "${TOP:?}"
export PATH="/usr/bin:$PATH"
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
tmp_dir gw-ctl
ctl="$tmp/gw.control"
GW_CONTROL=$ctl	# gw_start run waits until it answers "running"
tpid=''
cleanup_fn stop_var tpid
cleanup_fn unmount_lazy "$tmp/fuse"

# target_start SUBSYS_SPEC...: port in $port (T_ARGS: more target options)
target_start() {
	local args=() s
	for s in "$@"; do args+=(--subsys "$s"); done
	rm -f "$tmp/ready"
	"$T" -s "${port:-0}" "${args[@]}" ${T_ARGS[@]+"${T_ARGS[@]}"} --ready-file "$tmp/ready" >> "$tmp/target.log" 2>&1 &
	tpid=$!
	for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
	port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
	[ -n "$port" ] || fail "the test target did not start"
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
