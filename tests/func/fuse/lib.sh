# Shared by tests/func/t_fuse_*.sh, on top of tests/lib/func.sh (whose
# `gw_start mount ... "$MNT"` mounts the gateway): a private mountpoint,
# unmounted on exit after the gateway is stopped.  Sourced, not run.
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"
. "$TOP/tests/lib/func.sh"

fuse_require() {
	need_root "mount, losetup"
	[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
	need fusermount3
}

tmp_dir gw-fuse
T=$tmp
MNT="$T/mnt"
mkdir -p "$MNT"
cleanup_fn unmount_lazy "$MNT"
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
