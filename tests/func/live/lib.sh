# Shared by tests/func/t_live_*.sh, on top of resil/lib.sh: a one-command
# NBD client with a deadline, and an exit that does not hang when the
# daemon under test does (the defects these tests guard against made
# SIGTERM wait for ever on I/O that never completed).
. "$TOP/tests/func/resil/lib.sh"
LIO="$TOP/tests/func/live/io.py"

live_cleanup() {
	if [ -n "$GPID" ]; then
		kill -TERM "$GPID" 2> /dev/null
		for _ in $(seq 1 150); do
			kill -0 "$GPID" 2> /dev/null || break
			sleep 0.1
		done
		kill -KILL "$GPID" 2> /dev/null
		wait "$GPID" 2> /dev/null
		GPID=
	fi
	cleanup
}
trap live_cleanup EXIT

# gw_finish_within SECONDS: SIGTERM; the daemon must exit 0 within
# SECONDS (generous: the drain itself is bounded by the gateway).
gw_finish_within() {
	local st=0
	kill -TERM "$GPID"
	for _ in $(seq 1 $(($1 * 10))); do
		kill -0 "$GPID" 2> /dev/null || break
		sleep 0.1
	done
	kill -0 "$GPID" 2> /dev/null && fail "the gateway did not exit within $1 s of SIGTERM"
	wait "$GPID" || st=$?
	GPID=
	[ $st = 0 ] || fail "gateway exit status $st after SIGTERM"
}
