# Sourced by tests/interop/run.sh: the gateway on THIS host, reaching the
# guest's nvmet through the 127.0.0.1:$port forward (the way a legacy host
# reaches a remote array), with the FUSE file and the NBD socket used by
# this host's own clients.  Namespace: $nqn4k (4 KiB blocks, 256 MiB).

hx=$(mktemp -d /tmp/nvmf-host.XXXXXX)
hmnt=$hx/mnt hsock=$hx/nbd.sock
hconn=(-t tcp -a 127.0.0.1 -s "$port" -n "$nqn4k" --state-dir "$hx/state")
hmount_pid='' hnbd_pid=''

host_cleanup() {
	[ -n "$hnbd_pid" ] && kill -TERM "$hnbd_pid" 2> /dev/null && wait "$hnbd_pid"
	if [ -n "$hmount_pid" ]; then
		kill -TERM "$hmount_pid" 2> /dev/null && wait "$hmount_pid"
	fi
	mountpoint -q "$hmnt" && umount -l "$hmnt"
	hnbd_pid='' hmount_pid=''
}

t_host_start() {
	mkdir -p "$hmnt"
	"$GW" mount "${hconn[@]}" --name disk "$hmnt" > "$hx/mount.log" 2>&1 &
	hmount_pid=$!
	NVMF_GATEWAY_LOG=info "$GW" nbd "${hconn[@]}" --name disk --reactors 2 "unix:$hsock" \
		> "$hx/nbd.log" 2>&1 &
	hnbd_pid=$!
	for _ in $(seq 300); do
		[ -e "$hmnt/disk" ] && [ -S "$hsock" ] && break
		sleep 0.1
	done
	cat "$hx/mount.log" "$hx/nbd.log"
	[ "$(stat -c %s "$hmnt/disk")" = 268435456 ] && [ -S "$hsock" ]
}

# dd of a random file at unaligned offsets through FUSE, compared through
# FUSE and through NBD (the other export of the same namespace).
t_host_unaligned() (
	set -e
	head -c 3000000 /dev/urandom > "$hx/r"
	for off in 1 4095 4097 1048575 7340033; do
		dd if="$hx/r" of="$hmnt/disk" bs=64k oflag=seek_bytes seek="$off" \
			conv=notrunc,fsync status=none
		cmp -i 0:"$off" -n 3000000 "$hx/r" "$hmnt/disk"
	done
	nbdcopy "nbd+unix:///disk?socket=$hsock" "$hx/via-nbd"
	cmp -i 0:7340033 -n 3000000 "$hx/r" "$hx/via-nbd"
	echo "unaligned writes: identical through FUSE and NBD"
)

t_host_fio() (
	set -e
	cd "$hx"
	for eng in psync io_uring; do
		for bs in 4k 128k; do
			for direct in 0 1; do
				qd=1; [ $eng = io_uring ] && qd=16
				fio --name=f-$eng-$bs-$direct --filename="$hmnt/disk" --ioengine=$eng \
					--iodepth=$qd --direct=$direct --rw=randwrite --bs=$bs --size=4M \
					--offset=64M --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
					--output="$hx/fio.txt"
				grep -q 'err= 0' "$hx/fio.txt"
				echo "fio $eng bs $bs direct $direct QD $qd: verified"
			done
		done
	done
)

t_host_ext4() (
	set -e
	local loop m=$hx/ext4
	mkdir -p "$m"
	loop=$(losetup --find --show "$hmnt/disk")
	# A subshell: EXIT is its end (RETURN would not fire here).
	trap 'umount "$m" 2> /dev/null; losetup -d "$loop"' EXIT
	mkfs.ext4 -q -F -E nodiscard "$loop"
	mount "$loop" "$m"
	head -c 8M /dev/urandom > "$m/a"
	cp "$hx/r" "$m/b"
	(cd "$m" && sha256sum a b > "$hx/sum")
	umount "$m"
	fsck.ext4 -fn "$loop"
	mount "$loop" "$m"
	(cd "$m" && sha256sum -c "$hx/sum")
)

t_host_qemu_img() (
	set -e
	qemu-img info -f raw "$hmnt/disk"
	qemu-img create -f qcow2 "$hx/src.qcow2" 16M > /dev/null
	qemu-io -f qcow2 -c 'write -P 0x5a 1M 2M' "$hx/src.qcow2" > /dev/null
	qemu-img convert -n -f qcow2 -O raw "$hx/src.qcow2" "$hmnt/disk"
	qemu-img convert -f raw -O qcow2 "$hmnt/disk" "$hx/back.qcow2"
	cmp -i $((1 << 20)):$((1 << 20)) -n $((2 << 20)) "$hmnt/disk" <(head -c 3M /dev/zero | tr '\0' 'Z')
	qemu-img compare -f raw -F qcow2 "nbd+unix:///disk?socket=$hsock" "$hx/back.qcow2"
	qemu-io -f raw -c 'aio_write -P 0x33 0 64k' -c 'aio_flush' -c 'aio_read -P 0x33 0 64k' \
		"nbd+unix:///disk?socket=$hsock" | grep -q 'read 65536/65536'
)

# Punch-hole and zero-range read back as zeroes (nvmet on a loop device
# reports deallocated blocks as zeroes or not: the FUSE export uses Write
# Zeroes when it does not, so zeroes either way), fsync is a Flush.
t_host_fallocate() (
	set -e
	head -c 1M /dev/urandom | dd of="$hmnt/disk" bs=1M seek=100 conv=notrunc,fsync status=none
	fallocate -p -o $((100 << 20)) -l 262144 "$hmnt/disk"
	fallocate -z -o $((100 << 20 | 262144)) -l 100000 "$hmnt/disk"
	cmp -n 362144 -i $((100 << 20)):0 "$hmnt/disk" /dev/zero
	sync "$hmnt/disk"
)

# The random-operation checker (fsx-style), seeded, against the real target.
# Nothing else may write the file meanwhile: an ext4 left mounted on a loop
# device over it (the ext4 case before its EXIT trap) goes on zeroing its
# inode tables in the background (ext4lazyinit, groups 16-31 at 128-136 MiB
# with 1 KiB blocks), which fsx reported as "byte 137367316 is 0".
t_host_fsx() {
	if losetup -j "$hmnt/disk" | grep -q .; then
		echo "a loop device still uses $hmnt/disk:"
		losetup -j "$hmnt/disk"
		return 1
	fi
	# A new seed each run (printed; INTEROP_FSX_SEED repeats one): 5000
	# operations a run over many runs explore more than one fixed 10000,
	# in half the time (the case took 93-135 s).
	local seed=${INTEROP_FSX_SEED:-$((RANDOM * 32768 + RANDOM))}
	echo "fsx seed $seed (INTEROP_FSX_SEED=$seed repeats it)"
	python3 "$top/tests/func/fuse/fsx.py" "$hmnt/disk" "${INTEROP_FSX_OPS:-5000}" "$seed" 4096
}

# nbdsh: flush, FUA, trim, write zeroes (NO_HOLE), structured replies and
# errors, on the NVMe namespace.
t_host_nbdsh() {
	PATH=/usr/bin:$PATH nbdsh -u "nbd+unix:///disk?socket=$hsock" -c '
import errno, os
assert h.get_size() == 256 << 20
assert h.get_structured_replies_negotiated()
for cap in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn"):
    assert getattr(h, cap)(), cap
assert h.get_block_size(nbd.SIZE_MINIMUM) == 4096
d = os.urandom(65536)
h.pwrite(d, 1 << 20, nbd.CMD_FLAG_FUA); assert h.pread(65536, 1 << 20) == d
h.flush()
h.zero(65536, 1 << 20, nbd.CMD_FLAG_NO_HOLE); assert h.pread(65536, 1 << 20) == bytes(65536)
h.pwrite(d, 2 << 20); h.trim(65536, 2 << 20)
for off, ln in ((1, 4096), (4096, 1), ((256 << 20) - 4096, 8192)):
    try:
        h.pread(ln, off)
        raise AssertionError("pread(%d, %d) succeeded" % (ln, off))
    except nbd.Error as e:
        assert e.errnum is not None
# FAST_ZERO (the flag is understood: can_fast_zero): either the range is
# zeroed, or the request fails at once with ENOTSUP and nothing changes
# (nvmet on a loop device cannot promise cheap zeroing).
h.pwrite(d, 3 << 20)
assert h.can_fast_zero()
fast = True
try:
    h.zero(65536, 3 << 20, nbd.CMD_FLAG_FAST_ZERO)
except nbd.Error as e:
    assert e.errnum == errno.ENOTSUP, e.errnum
    fast = False
assert h.pread(65536, 3 << 20) == (bytes(65536) if fast else d)
print("nbdsh on nvmet: OK, fast zero done:", fast)' &&
	nbdinfo --list "nbd+unix:///?socket=$hsock" | grep -q '^export="disk":'
}

# fio's nbd engine with crc32c verify at QD 1 and 32, two connections
# (multi-conn: the connections land on both reactors).
t_host_fio_nbd() (
	set -e
	cd "$hx"
	for qd in 1 32; do
		fio --name=n$qd --ioengine=nbd --uri="nbd+unix:///disk?socket=$hsock" \
			--rw=randwrite --bs=4k --iodepth=$qd --numjobs=2 --offset_increment=8M \
			--offset=160M --size=2M --verify=crc32c --verify_fatal=1 \
			--verify_state_save=0 --output="$hx/fio-nbd.txt"
		grep -q 'err= 0' "$hx/fio-nbd.txt"
		echo "fio nbd QD $qd x 2 connections: verified"
	done
)

# A read-only NBD export of the same namespace refuses writes with EPERM.
t_host_nbd_ro() {
	local ro=$hx/ro.sock pid st
	"$GW" nbd "${hconn[@]}" --name ro --read-only "unix:$ro" > "$hx/ro.log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do [ -S "$ro" ] && break; sleep 0.1; done
	PATH=/usr/bin:$PATH nbdsh -u "nbd+unix:///ro?socket=$ro" -c '
import errno
assert h.is_read_only()
assert len(h.pread(4096, 0)) == 4096
h.set_strict_mode(0)  # send the write: the server must refuse it
try:
    h.pwrite(bytes(4096), 0)
    raise AssertionError("write to a read-only export succeeded")
except nbd.Error as e:
    assert e.errnum == errno.EPERM, e.errnum
print("read-only: OK")'; st=$?
	kill -TERM "$pid"; wait "$pid"
	return $st
}

# The NBD server on SIGTERM, the FUSE one by umount: both exit 0.  A mount
# that something still holds is reported, then ended by SIGTERM, so the
# suite never waits forever.
t_host_stop() {
	local st1 st2 um=0
	kill -TERM "$hnbd_pid"; wait "$hnbd_pid"; st1=$?
	if ! umount "$hmnt"; then
		um=1
		fuser -vm "$hmnt" 2>&1 | head
		kill -TERM "$hmount_pid"
	fi
	wait "$hmount_pid"; st2=$?
	hnbd_pid='' hmount_pid=''
	tail -3 "$hx/mount.log" "$hx/nbd.log"
	[ "$st1" = 0 ] && [ "$st2" = 0 ] && [ $um = 0 ] && ! mountpoint -q "$hmnt"
}

case_ host-start t_host_start
case_ host-fuse-unaligned-vs-nbd t_host_unaligned
case_ host-fuse-fio-verify t_host_fio
case_ host-fuse-ext4 t_host_ext4
case_ host-qemu-img t_host_qemu_img
case_ host-fuse-fallocate t_host_fallocate
case_ host-fuse-fsx t_host_fsx
case_ host-nbdsh t_host_nbdsh
case_ host-fio-nbd t_host_fio_nbd
case_ host-nbd-read-only t_host_nbd_ro
case_ host-stop t_host_stop
host_cleanup
losetup -j "$hmnt/disk" 2> /dev/null | cut -d: -f1 | xargs -r -n1 losetup -d
rm -rf "$hx"
