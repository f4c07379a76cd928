# The functional tests' shell library: sourced first by every
# tests/func/t_*.sh (directly or through tests/func/*/lib.sh and
# tests/target/helpers.sh).  Sourced, not run.
#
# Exit statuses, as tests/func/run.sh reads them: 0 pass, 77 skip (the
# reason on the last line, as liburing's T_EXIT_SKIP and automake), anything
# else fail.  Cleanups are registered as they become needed and run in
# reverse order on any exit (nbdkit's tests/functions.sh does the same):
# a test ends only the processes it started, by their pids.
[ -n "${FUNC_SH:-}" ] && return 0
FUNC_SH=1

# --- outcomes ---------------------------------------------------------------
_fail_show=()
# fail_show CMD...: run CMD (e.g. a log tail) when the test fails, after
# the FAIL line, in the order registered.
fail_show() { _fail_show+=("$(printf '%q ' "$@")"); }
fail() {
	local c
	echo "FAIL: $*"
	for c in "${_fail_show[@]}"; do eval "$c"; done
	exit 1
}
skip() { echo "SKIP: $*"; exit 77; }
# need TOOL...: skips the test, naming the first TOOL not in PATH.
need() {
	local t
	for t in "$@"; do
		command -v "$t" > /dev/null || skip "$t is not installed"
	done
}
need_root() { [ "$(id -u)" = 0 ] || skip "needs root${1:+ ($1)}"; }

# --- cleanups ---------------------------------------------------------------
_cleanups=()
# cleanup_fn CMD...: runs CMD on exit; the last registered runs first.
cleanup_fn() { _cleanups+=("$(printf '%q ' "$@")"); }
_func_exit() {
	local i
	set +e
	for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[i]}"; done
}
trap _func_exit EXIT

# tmp_dir NAME: a private directory in $tmp, removed on exit.
tmp_dir() {
	tmp=$(mktemp -d "/tmp/$1.XXXXXX") || fail "mktemp"
	cleanup_fn rm -rf "$tmp"
}

# stop_pid PID [SECONDS]: SIGTERM, SIGKILL after SECONDS (default 15) if
# still there, then reaped.  For cleanups: a test's own stop checks the
# exit status (gw_stop).
stop_pid() {
	local pid=$1 n=$((${2:-15} * 10))
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2> /dev/null || { wait "$pid" 2> /dev/null; return 0; }
	for _ in $(seq "$n"); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2> /dev/null
	wait "$pid" 2> /dev/null
	return 0
}

# stop_var NAME [SECONDS]: stop_pid of the pid in variable NAME at the time
# this runs (for cleanup_fn, when the pid comes later or changes).
stop_var() { stop_pid "${!1:-}" "${2:-15}"; }

# unmount_lazy DIR: a lazy unmount of DIR if something is mounted there.
unmount_lazy() { ! grep -qs " $1 " /proc/mounts || umount -l "$1"; }
# fusectl_require: /sys/fs/fuse/connections usable (mounted here if need
# be, and unmounted at the end), or the test is skipped.
fusectl_require() {
	[ -d /sys/fs/fuse/connections ] || skip "no /sys/fs/fuse/connections"
	if ! mountpoint -q /sys/fs/fuse/connections; then
		mount -t fusectl fusectl /sys/fs/fuse/connections 2> /dev/null || skip "cannot mount fusectl"
		cleanup_fn umount /sys/fs/fuse/connections
	fi
}
# fuse_abort MNT: aborts MNT's FUSE connection.  Its number comes from
# mountinfo: a stat of the mount could wait behind the requests queued.
fuse_abort() {
	local conn
	conn=$(awk -v m="$1" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo | tail -1)
	[ -n "$conn" ] && echo 1 > "/sys/fs/fuse/connections/$conn/abort" ||
		fail "cannot abort the FUSE connection of $1 ('$conn')"
}

# --- waiting ----------------------------------------------------------------
# wait_for SECONDS 'SHELL TEXT': polls until the text, evaluated anew each
# time (quote it: '"$(st .state)" = live'), succeeds; 1 if it never did.
# At least SECONDS: the count of tries, not the wall clock, runs out, so a
# loaded host gets more time, never less.
wait_for() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq "$n"); do eval "$*" && return 0; sleep 0.1; done
	return 1
}

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# --- the gateway under test -------------------------------------------------
# gw_start MODE ARGS...: `nvmf-gateway MODE` in the background, its pid in
# GW_PID, its log in $tmp/gw.log; returns once it serves, fails the test if
# it exits or does not come up (generous bounds: the host is shared).
#   nbd ARGS...        ready when it prints "serving export" ($tmp/gw.out)
#   mount ARGS... DIR  ready when DIR is a FUSE mount that answers
#   run CONF [PREFIX]  `check` first, then `run -f` (under PREFIX, e.g.
#                      "ip netns exec X"); ready when every path in $SOCKS
#                      is a socket and, with GW_CONTROL set, its status
#                      says running
GW_PID= GW_MNT=
_gw_cleanup_on=
gw_start() {
	local mode=$1
	shift
	[ -z "$GW_PID" ] || fail "gw_start: a gateway (pid $GW_PID) is still running"
	# Registered at the first start, so that it runs before the cleanups
	# of what the gateway uses (its directory, mounts, targets).
	[ -n "$_gw_cleanup_on" ] || { cleanup_fn gw_cleanup; _gw_cleanup_on=1; }
	# Emptied here, not only by the background start's redirection: the
	# wait below could otherwise read the previous run's "ready" line
	# before the new process has truncated the file.
	: > "$tmp/gw.out"
	: > "$tmp/gw.log"
	case $mode in
	nbd)
		"$GW" nbd "$@" > "$tmp/gw.out" 2> "$tmp/gw.log" &
		GW_PID=$!
		_gw_wait 'grep -q "serving export" "$tmp/gw.out"' ;;
	mount)
		local dir=${!#}
		GW_MNT=$dir
		"$GW" mount "$@" > "$tmp/gw.log" 2>&1 &
		GW_PID=$!
		# Its file listed, not only a mount in /proc/mounts: that may
		# still be the stale one the new gateway is about to clear,
		# and the bare directory lists fine in between.
		_gw_wait 'grep -qs " $dir fuse" /proc/mounts && [ -n "$(ls -A "$dir" 2> /dev/null)" ]' ;;
	run)
		local conf=$1 prefix=${2:-}
		"$GW" check -c "$conf" > /dev/null ||
			fail "config rejected: $("$GW" check -c "$conf" 2>&1)"
		$prefix "$GW" run -f -c "$conf" > "$tmp/gw.log" 2>&1 &
		GW_PID=$!
		_gw_wait _gw_run_ready ;;
	*) fail "gw_start: unknown mode '$mode'" ;;
	esac
}
_gw_run_ready() {
	local s
	for s in ${SOCKS:-}; do [ -S "$s" ] || return 1; done
	[ -z "${GW_CONTROL:-}" ] || [ "$("$GW" status -s "$GW_CONTROL" -o json 2> /dev/null |
		jq -r .state 2> /dev/null)" = running ]
}
# _gw_wait 'SHELL TEXT': up to 30 s of tries for the text while GW_PID lives.
_gw_wait() {
	for _ in $(seq 300); do
		eval "$1" && return 0
		kill -0 "$GW_PID" 2> /dev/null || fail "the gateway exited at start"
		sleep 0.1
	done
	fail "the gateway did not come up"
}
gw_alive() { kill -0 "$GW_PID" 2> /dev/null || fail "the gateway died"; }

# gw_stop [SIGNAL]: SIGTERM (or SIGNAL); the gateway must exit 0 on its own
# and, started by `gw_start mount`, leave no mount behind.
gw_stop() {
	local st=0 sig=${1:-TERM}
	kill -"$sig" "$GW_PID"
	wait "$GW_PID" || st=$?
	GW_PID=
	[ $st = 0 ] || fail "gateway exit status $st after SIG$sig"
	[ -z "$GW_MNT" ] || ! grep -qs " $GW_MNT " /proc/mounts || fail "still mounted after SIG$sig"
}

# gw_stop_within SECONDS: as gw_stop, and the exit must come within SECONDS
# (a daemon that hangs on exit fails the test instead of the suite's timeout).
gw_stop_within() {
	local st=0
	kill -TERM "$GW_PID"
	for _ in $(seq 1 $(($1 * 10))); do
		kill -0 "$GW_PID" 2> /dev/null || break
		sleep 0.1
	done
	kill -0 "$GW_PID" 2> /dev/null && fail "the gateway did not exit within $1 s of SIGTERM"
	wait "$GW_PID" || st=$?
	GW_PID=
	[ $st = 0 ] || fail "gateway exit status $st after SIGTERM"
}

# On exit: the gateway this test started, if still running.  Overridable
# bound (GW_STOP_WAIT seconds) before SIGKILL.
gw_cleanup() {
	stop_pid "$GW_PID" "${GW_STOP_WAIT:-15}"
	GW_PID=
}

# Log tail on failure, once a test has a gateway log.
_gw_log_tail() { [ -n "${tmp:-}" ] && [ -s "$tmp/gw.log" ] && { echo "--- gateway log"; tail -40 "$tmp/gw.log"; }; return 0; }
fail_show _gw_log_tail
