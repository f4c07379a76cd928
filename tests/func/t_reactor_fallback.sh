#!/usr/bin/env bash
# Where the kernel refuses io_uring (a seccomp filter here, as container
# runtimes install; kernel.io_uring_disabled answers the same EPERM), the
# gateway starts on its epoll backend, says so, and serves: an NBD export
# on a RAM volume, data copied in and out.  Forcing io_uring there fails
# the start with the reason instead.
set -u
: "${TOP:?run by tests/func/run.sh}" "${BUILD:?}"
. "$TOP/tests/lib/func.sh"
need cc nbdcopy nbdinfo ldd
ldd "$GW" | grep -q liburing || skip "built without liburing: epoll is all it has"
tmp_dir gw-fallback
cc -O2 -Wall -Wextra -Werror -o "$tmp/noring" "$TOP/tests/lib/seccomp_no_io_uring.c" ||
	fail "cannot build the seccomp helper"
"$tmp/noring" true || skip "seccomp filters are not allowed here"
real_gw=$GW
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$tmp/noring" "$real_gw" > "$tmp/gw"
chmod +x "$tmp/gw"
# The suite may force a backend; this test is about auto.
unset NVMF_GATEWAY_REACTOR_BACKEND

# io_uring forced under the filter: the start fails and says why.
if NVMF_GATEWAY_REACTOR_BACKEND=io_uring "$tmp/gw" nbd --mem 16M --name d \
	"unix:$tmp/forced.sock" > "$tmp/forced.out" 2> "$tmp/forced.log"; then
	fail "reactor_backend io_uring started under a filter refusing io_uring"
fi
cat "$tmp/forced.log"
grep -q 'io_uring_setup refused (EPERM' "$tmp/forced.log" ||
	fail "the forced io_uring start does not say why it failed"

GW=$tmp/gw
sock="$tmp/nbd.sock"
NVMF_GATEWAY_LOG=info gw_start nbd --mem 16M --name disk "unix:$sock"
grep 'epoll backend' "$tmp/gw.log"
grep -q 'reactor: epoll backend (io_uring_setup refused (EPERM' "$tmp/gw.log" ||
	fail "the log does not say that epoll runs and why"
uri="nbd+unix:///disk?socket=$sock"
[ "$(nbdinfo --size "$uri")" = 16777216 ] || fail "nbdinfo size"
head -c 16M /dev/urandom > "$tmp/in.bin"
nbdcopy "$tmp/in.bin" "$uri" || fail "nbdcopy in"
nbdcopy "$uri" "$tmp/out.bin" || fail "nbdcopy out"
cmp "$tmp/in.bin" "$tmp/out.bin" || fail "round trip differs"
gw_stop
echo "reactor fallback: OK"
