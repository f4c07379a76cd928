#!/usr/bin/env bash
# -t rdma on a machine without an RDMA device fails at once: one line that
# names what is missing, exit 1 (bench and discover alike).
set -u
: "${GW:?run by tests/func/run.sh}"
. "$TOP/tests/lib/func.sh"

if [ -n "$(ls /sys/class/infiniband 2> /dev/null)" ]; then
	skip "this host has an RDMA device ($(ls /sys/class/infiniband | head -1))"
fi
for cmd in "bench -n nqn.2014-08.org.nvmf-gateway:x -T 1" "discover"; do
	out=$(timeout 20 "$GW" $cmd -t rdma -a 127.0.0.1 2>&1); st=$?
	echo "$out"
	# Where the epoll reactor runs (forced, or io_uring refused) the
	# start says so first: that line is not about RDMA.
	out=$(printf '%s\n' "$out" | grep -v 'notice: reactor: epoll backend (')
	[ $st -eq 1 ] || fail "$cmd: exit $st, expected 1"
	[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$cmd: not one line"
	case $out in *"no RDMA device found"*) ;; *) fail "$cmd: no 'no RDMA device found'" ;; esac
done
echo "both fail at once with the reason"
