# Shared by tests/func/t_fuse_*.sh: start `nvmf-gateway mount --mem` on a
# private mountpoint, wait for the mount, and always stop exactly that
# process and unmount.  Sourced, not run.
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

fuse_require() {
	[ "$(id -u)" = 0 ] || skip "needs root (mount, losetup)"
	[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
	command -v fusermount3 > /dev/null || skip "fusermount3 not installed"
}

T=$(mktemp -d /tmp/gw-fuse.XXXXXX)
MNT="$T/mnt"
mkdir -p "$MNT"
GW_PID=

fuse_cleanup() {
	if [ -n "$GW_PID" ] && kill -0 "$GW_PID" 2> /dev/null; then
		kill "$GW_PID" 2> /dev/null
		for _ in $(seq 50); do kill -0 "$GW_PID" 2> /dev/null || break; sleep 0.1; done
		kill -9 "$GW_PID" 2> /dev/null
	fi
	if grep -qs " $MNT " /proc/mounts; then umount -l "$MNT" 2> /dev/null; fi
	rm -rf "$T"
}
trap fuse_cleanup EXIT

# gw_start ARGS...: the gateway in the background on $MNT, log in $T/gw.log.
gw_start() {
	"$GW" mount "$@" "$MNT" > "$T/gw.log" 2>&1 &
	GW_PID=$!
	gw_wait_mounted
}

gw_wait_mounted() {
	for _ in $(seq 200); do
		if grep -qs " $MNT fuse" /proc/mounts && ls "$MNT" > /dev/null 2>&1; then
			return 0
		fi
		kill -0 "$GW_PID" 2> /dev/null || { cat "$T/gw.log"; fail "gateway exited before mounting"; }
		sleep 0.1
	done
	cat "$T/gw.log"
	fail "no mount at $MNT after 20 s"
}

# gw_stop [SIGNAL]: SIGTERM (or SIGNAL), expect exit 0 and the mount gone.
gw_stop() {
	kill -"${1:-TERM}" "$GW_PID"
	wait "$GW_PID"; local st=$?
	GW_PID=
	cat "$T/gw.log"
	[ $st -eq 0 ] || fail "gateway exit $st after SIG${1:-TERM}"
	! grep -qs " $MNT " /proc/mounts || fail "still mounted after SIG${1:-TERM}"
}

# errno_of PYTHON-STATEMENTS: prints the errno name an OSError carried, or OK.
errno_of() {
	python3 - "$@" <<'PY'
import errno, os, sys
try:
    exec(sys.argv[1])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}
