#!/usr/bin/env bash
# `nvmf-gateway run` against the in-tree NVMe/TCP test target on loopback:
# two targets, two reactors, NBD on a Unix and a TCP socket, one FUSE mount
# holding both exports; data written one way is read the other; SIGTERM
# ends it cleanly; with every target dead it waits (no exit); -f off
# daemonizes.
set -u
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
tmp=$(mktemp -d /tmp/gw-run.XXXXXX)
tpid='' gpid=''
cleanup_fn rm -rf "$tmp"
cleanup_fn stop_var tpid
cleanup_fn unmount_lazy "$tmp/fuse"
cleanup_fn stop_var gpid

"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:run-a:64M \
	--subsys nqn.2014-08.org.nvmf-gateway:run-b:32M:4096 \
	--ready-file "$tmp/ready" > "$tmp/target.log" 2>&1 &
tpid=$!
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
[ -n "$port" ] || fail "the test target did not start"
# A free TCP port for the NBD server (bound by the kernel, then released).
nbdport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

conf() {	# conf FILE TARGET_PORT
	cat > "$1" << EOF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = (
  { name = "ta"; subnqn = "nqn.2014-08.org.nvmf-gateway:run-a";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$2"; } ); },
  { name = "tb"; subnqn = "nqn.2014-08.org.nvmf-gateway:run-b"; nr_io_queues = 1;
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$2"; } ); } );
exports = (
  { name = "a"; target = "ta"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; fuse = true; },
  { name = "b"; target = "tb"; nsid = 1; nbd = { listen = "tcp:127.0.0.1:$nbdport"; }; fuse = true;
    read_only = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
EOF
}
conf "$tmp/gw.conf" "$port"
"$GW" check -c "$tmp/gw.conf" || fail "check"

wait_up() {
	for _ in $(seq 200); do
		[ -S "$tmp/a.sock" ] && [ -e "$tmp/fuse/b" ] && return 0
		[ -n "$gpid" ] && ! kill -0 "$gpid" 2> /dev/null && return 1
		sleep 0.1
	done
	return 1
}

"$GW" run -f -c "$tmp/gw.conf" > "$tmp/gw.log" 2>&1 &
gpid=$!
wait_up || { cat "$tmp/gw.log"; fail "the gateway did not come up"; }
cat "$tmp/gw.log"
ls -l "$tmp/fuse"
[ "$(stat -c %s "$tmp/fuse/a")" = 67108864 ] || fail "FUSE size of a"
[ "$(stat -c %s "$tmp/fuse/b")" = 33554432 ] || fail "FUSE size of b"
[ "$(stat -c %a "$tmp/fuse/b")" = 400 ] || fail "read-only export's mode"

# NBD in, FUSE out; FUSE in, NBD out (the FUSE page cache must not hide it).
uri="nbd+unix:///a?socket=$tmp/a.sock"
head -c 32M /dev/urandom > "$tmp/r1"
head -c 8M /dev/urandom > "$tmp/r2"
nbdcopy "$tmp/r1" "$uri" || fail "nbdcopy into a"
cmp -n 33554432 "$tmp/r1" "$tmp/fuse/a" || fail "FUSE does not read what NBD wrote"
dd if="$tmp/r2" of="$tmp/fuse/a" bs=1M seek=40 conv=notrunc,fsync status=none || fail "FUSE write"
nbdcopy "$uri" "$tmp/back" || fail "nbdcopy out of a"
cmp -i 0:41943040 -n 8388608 "$tmp/r2" "$tmp/back" || fail "NBD does not read what FUSE wrote"
cmp -n 33554432 "$tmp/r1" "$tmp/back" || fail "NBD readback of the first 32 MiB"

# Multi-conn fio verify over both reactors.
fio --name=v --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=16 --numjobs=2 \
	--offset_increment=16M --size=8M --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
	--output="$tmp/fio.txt" || { cat "$tmp/fio.txt"; fail "fio over NBD"; }
grep -q 'err= 0' "$tmp/fio.txt" || fail "fio reported errors"

# The TCP export is read-only and has 4 KiB blocks.
info=$(nbdinfo "nbd://127.0.0.1:$nbdport/b") || fail "nbdinfo b"
echo "$info" | grep -q 'is_read_only: true' || fail "b not read-only over NBD"
echo "$info" | grep -q 'block_size_minimum: 4096' || fail "b's block size"
# b has one I/O queue for two reactors: nbdcopy's connections land on both,
# so half of them go through the forwarding path.
nbdcopy --connections=4 "nbd://127.0.0.1:$nbdport/b" "$tmp/bout" || fail "nbdcopy out of b"
cmp -n 33554432 /dev/zero "$tmp/bout" || fail "b does not read as zeroes"
if echo x | dd of="$tmp/fuse/b" conv=notrunc status=none 2> /dev/null; then
	fail "a write to the read-only FUSE file succeeded"
fi

kill -TERM "$gpid"
wait "$gpid"; st=$?
gpid=''
[ "$st" = 0 ] || fail "exit status $st after SIGTERM"
grep -q 'gateway: stopped' "$tmp/gw.log" || fail "no orderly stop"
mountpoint -q "$tmp/fuse" && fail "still mounted after the stop"
[ -e "$tmp/a.sock" ] && fail "socket left behind"

# Every target down: no longer an exit 1 (issue 19: at boot the array may
# come up after the host).  The daemon stays up, waiting with a logged
# reason, and stops cleanly on SIGTERM; t_wait_target covers the rest.
conf "$tmp/dead.conf" 1
"$GW" run -f -c "$tmp/dead.conf" > "$tmp/dead.log" 2>&1 &
gpid=$!
for _ in $(seq 300); do
	grep -q 'gateway: 0 of 2 exports running, 2 waiting for their target' "$tmp/dead.log" && break
	kill -0 "$gpid" 2> /dev/null || break
	sleep 0.1
done
cat "$tmp/dead.log"
kill -0 "$gpid" 2> /dev/null || fail "the gateway exited with every target down"
grep -q 'target ta: not reachable yet' "$tmp/dead.log" || fail "no reason logged"
kill -TERM "$gpid"
wait "$gpid"; st=$?
gpid=''
[ "$st" = 0 ] || fail "exit $st after SIGTERM while waiting"

# A bad file: FILE:LINE, exit 1, nothing started.
printf 'gateway = { reactors = 0; };\n' > "$tmp/bad.conf"
out=$("$GW" run -f -c "$tmp/bad.conf" 2>&1); st=$?
echo "$out"
[ "$st" = 1 ] && echo "$out" | grep -q "$tmp/bad.conf:1:" || fail "config error not reported"

# Without -f: the parent returns 0 once the exports serve.
"$GW" run -c "$tmp/gw.conf" > "$tmp/bg.log" 2>&1 || fail "daemonized start"
[ -S "$tmp/a.sock" ] && [ -e "$tmp/fuse/a" ] || fail "daemon not serving when the parent returned"
gpid=$(pgrep -f "nvmf-gateway run -c $tmp/gw.conf" | head -1)
[ -n "$gpid" ] || fail "no daemon process"
nbdinfo --size "$uri" | grep -qx 67108864 || fail "daemon's NBD export"
kill -TERM "$gpid"
for _ in $(seq 100); do kill -0 "$gpid" 2> /dev/null || break; sleep 0.1; done
kill -0 "$gpid" 2> /dev/null && fail "daemon did not stop"
gpid=''
echo "run daemon: OK"
