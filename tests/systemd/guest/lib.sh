# lib.sh: sourced by the guest's case scripts (case*.sh).  Each case stops
# at its first failing step and names it; the host reports PASS/FAIL by the
# exit status.
set -u -o pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The agent keeps a descriptor open; LVM would warn on every call.
export LVM_SUPPRESS_FD_WARNINGS=1
U=nvmf-gateway.service
CONF=/etc/nvmf-gateway/nvmf-gateway.conf
MNT=/mnt/lv
VG=sysdvg
fail() { echo "FAILED: $*"; exit 1; }
prop() { systemctl show -p "$1" --value "$U"; }
nbd_size() { cat "/sys/block/$1/size"; }
# wait_until SECONDS WHAT CMD...: polls CMD every 0.2 s.
wait_until() {
	local limit=$1 what=$2 t0=$SECONDS
	shift 2
	until "$@"; do
		[ $((SECONDS - t0)) -lt "$limit" ] || fail "not within $limit s: $what"
		sleep 0.2
	done
	echo "ok after $((SECONDS - t0)) s: $what"
}
attached() { [ "$(nbd_size "$1")" -gt 0 ] && [ -e "/sys/block/$1/pid" ]; }
detached() { [ "$(nbd_size "$1")" = 0 ] && [ ! -e "/sys/block/$1/pid" ]; }
is_active() { [ "$(prop ActiveState)/$(prop SubState)" = active/running ]; }
# The gateway's journal since a cursor file was written (journal_mark).
journal_mark() { journalctl -q -n 0 --show-cursor | sed -n 's/^-- cursor: //p' > "/run/sysd-cursor.$1"; }
journal_since() { journalctl -q -o short-monotonic --after-cursor="$(cat "/run/sysd-cursor.$1")" "${@:2}"; }
