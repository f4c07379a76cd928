#!/usr/bin/env bash
# Reactor stacks under mlockall (issue 16): `run` with 8 reactors and a
# FUSE export (so the memory is locked) against the in-tree test target.
# Each reactor thread had the default 8 MiB stack (RLIMIT_STACK), all of it
# locked and resident.  Now a reactor's stack is 256 KiB
# (gateway/reactor.c): each reactor thread's stack mapping (found from its
# stack pointer) must be at most 1 MiB, after fio verify over FUSE and
# over the NBD socket on every reactor has run on the smaller stacks.
set -u
: "${GW:?run by tests/func/run.sh}" "${BUILD:?}" "${TOP:?}"
. "$TOP/tests/lib/func.sh"
T="$BUILD/nvmf-test-target"
[ -x "$T" ] || fail "no $T"
need_root "FUSE, so that the memory is locked"
[ -c /dev/fuse ] || skip "no /dev/fuse (FUSE makes the gateway lock its memory)"
need fusermount3 fio
REACTORS=8
tmp=$(mktemp -d /tmp/reclaim-stack.XXXXXX)
tpid='' gpid=''
cleanup_fn rm -rf "$tmp"
cleanup_fn stop_var tpid
cleanup_fn unmount_lazy "$tmp/fuse"
cleanup_fn stop_var gpid

"$T" -s 0 --subsys nqn.2014-08.org.nvmf-gateway:stack:64M --ready-file "$tmp/ready" \
	> "$tmp/target.log" 2>&1 &
tpid=$!
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
port=$(grep -o '[0-9]*$' "$tmp/ready" | head -1)
[ -n "$port" ] || fail "the test target did not start"
cat > "$tmp/gw.conf" << EOF
gateway = { reactors = $REACTORS; state_dir = "$tmp/state"; };
targets = (
  { name = "t"; subnqn = "nqn.2014-08.org.nvmf-gateway:stack";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = (
  { name = "a"; target = "t"; nsid = 1; nbd = { listen = "unix:$tmp/a.sock"; }; fuse = true; } );
fuse = { mountpoint = "$tmp/fuse"; };
EOF
"$GW" run -f -c "$tmp/gw.conf" > "$tmp/gw.log" 2>&1 &
gpid=$!
for _ in $(seq 300); do
	[ -S "$tmp/a.sock" ] && [ -e "$tmp/fuse/a" ] && grep -q 'reclaim: mlockall=' "$tmp/gw.log" && break
	kill -0 "$gpid" 2> /dev/null || { cat "$tmp/gw.log"; fail "the gateway exited"; }
	sleep 0.1
done
[ -e "$tmp/fuse/a" ] || { cat "$tmp/gw.log"; fail "the gateway did not come up"; }
grep 'reclaim: mlockall=' "$tmp/gw.log"
grep -q 'reclaim: mlockall=ok' "$tmp/gw.log" || skip "mlockall did not take effect here"
# stack_kib TASKDIR: the size of the mapping holding the thread's stack
# pointer (the thread waits in io_uring_enter; /proc/.../syscall has its sp).
stack_kib() {
	local sp a
	sp=$(awk '{ print $(NF - 1) }' "$1/syscall")
	[[ $sp == 0x* ]] || return 1
	sp=$((sp))
	while read -r a _; do
		if [ $sp -ge $((16#${a%-*})) ] && [ $sp -lt $((16#${a#*-})) ]; then
			echo $(((16#${a#*-} - 16#${a%-*}) / 1024))
			return 0
		fi
	done < "/proc/$gpid/maps"
	return 1
}
locked() { awk '$1 == "Locked:" { print $2 }' "/proc/$gpid/smaps_rollup"; }
fio --name=f --filename="$tmp/fuse/a" --ioengine=io_uring --direct=1 --rw=randwrite \
	--bssplit=4k/50:128k/50 --iodepth=8 --size=32M --verify=crc32c --verify_fatal=1 \
	--verify_state_save=0 --output="$tmp/fio.fuse" > /dev/null 2>&1 ||
	{ cat "$tmp/fio.fuse"; fail "fio verify over FUSE"; }
fio --name=n --ioengine=nbd --uri="nbd+unix:///a?socket=$tmp/a.sock" --rw=randwrite \
	--bssplit=4k/50:256k/50 --iodepth=16 --numjobs=$REACTORS --offset_increment=4M --size=4M \
	--verify=crc32c --verify_fatal=1 --verify_state_save=0 --output="$tmp/fio.nbd" \
	> /dev/null 2>&1 || { cat "$tmp/fio.nbd"; fail "fio verify over NBD"; }
kill -0 "$gpid" 2> /dev/null || { tail "$tmp/gw.log"; fail "the gateway died under I/O"; }
l=$(locked)
echo "locked and resident (smaps_rollup Locked) with $REACTORS reactors after I/O: $l kB;" \
	"VmLck $(awk '$1 == "VmLck:" { print $2 }' "/proc/$gpid/status") kB" \
	"(VmLck also counts malloc arenas' PROT_NONE reservations)"
[ "${l:-0}" -gt 0 ] || fail "nothing locked"
n=0
for t in /proc/$gpid/task/*; do
	grep -q '^gw-reactor-' "$t/comm" || continue
	k=$(stack_kib "$t") || fail "no stack mapping found for $(cat "$t/comm")"
	echo "$(cat "$t/comm"): stack mapping $k kB"
	[ "$k" -le 1024 ] || fail "$(cat "$t/comm") has a $k kB stack, all of it locked"
	n=$((n + 1))
done
[ $n = $((REACTORS - 1)) ] || fail "$n reactor stacks checked"
kill -TERM "$gpid"
wait "$gpid" || fail "the gateway's exit status"
gpid=
