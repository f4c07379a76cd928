#!/usr/bin/env bash
# Unit tests that need io_uring skip where the kernel refuses it, and
# tests/unit/run.sh reports SKIP, not FAIL: one unit binary run through
# run.sh with an LD_PRELOAD shim that makes io_uring setup answer EPERM
# (as kernel.io_uring_disabled=2 or a seccomp filter do) or ENOSYS (an
# old kernel).  Any other setup error must still fail.
set -u
: "${TOP:?run by tests/func/run.sh}" "${BUILD:?}"
. "$TOP/tests/lib/func.sh"
need cc
bin="$BUILD/tests/unit/test_watchdog"
[ -x "$bin" ] || skip "no $bin (make unit-bins)"
tmp_dir gw-unitskip
cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$tmp/no_io_uring.so" \
	"$TOP/tests/lib/no_io_uring.c" || fail "cannot build the shim"
mkdir -p "$tmp/b/tests/unit"
ln -s "$bin" "$tmp/b/tests/unit/"
# The shim is about io_uring's setup: a suite forcing epoll
# (run.sh BUILD SUITE epoll) would never reach it.
unset NVMF_GATEWAY_REACTOR_BACKEND
# An ASan build's runtime must come first unless told otherwise.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"

# runit [ENV...]: run.sh on the one binary; its result line in $res.
runit() {
	env "$@" "$TOP/tests/unit/run.sh" "$tmp/b" > "$tmp/out" 2>&1
	rs=$?
	res=$(cat "$tmp/b/results/unit.res")
	echo "[$*] run.sh exit $rs: $res"
}

runit
case $res in
"PASS test_watchdog"*) ;;
"SKIP test_watchdog"*) skip "this host has no io_uring itself: $res" ;;
*) cat "$tmp/out"; fail "without the shim: $res" ;;
esac

runit LD_PRELOAD="$tmp/no_io_uring.so"
[ $rs = 0 ] || fail "run.sh exit $rs for a skipped binary"
[ "$res" = "SKIP test_watchdog: io_uring is unavailable on this host (Operation not permitted)" ] ||
	{ cat "$tmp/out"; fail "EPERM: want SKIP, got '$res'"; }

runit LD_PRELOAD="$tmp/no_io_uring.so" NO_IO_URING_ERRNO=38
[ $rs = 0 ] && [ "${res%% *}" = SKIP ] || { cat "$tmp/out"; fail "ENOSYS: want SKIP, got '$res'"; }

# ENOMEM (say, a locked-memory limit) is no refusal: the tests must fail.
runit LD_PRELOAD="$tmp/no_io_uring.so" NO_IO_URING_ERRNO=12
[ $rs != 0 ] && [ "${res%% *}" = FAIL ] || { cat "$tmp/out"; fail "ENOMEM: want FAIL, got '$res'"; }
echo "unit skip: OK"
