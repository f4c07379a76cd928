#!/usr/bin/env bash
# The FUSE export against the real Linux target: boots the interop guest
# (nvmet, NVMe/TCP, 4 KiB and 512 B namespaces), mounts them on this host
# through the port forward, runs the fsx checker, the overlapping writers
# and fio verify on the files, then compares each file with the target's
# backing image read inside the guest (the cross-path check).
# Not part of `make func` (it boots a VM); run it as root under the lock:
#   flock /tmp/nvmf-vm.lock tests/func/fuse/target_check.sh [BUILD]
set -u
TOP=$(cd "$(dirname "$0")/../../.." && pwd)
GW="$TOP/${1:-build}/nvmf-gateway"
. "$TOP/tests/func/fuse/lib.sh"
. "$TOP/tests/interop/vm.sh"
fuse_require
port=$((20000 + $$ % 20000))
nqn4k=nqn.2026-01.io.nvmf-gateway:fuse4k
nqn512=nqn.2026-01.io.nvmf-gateway:fuse512
cleanup_fn vm_stop
cc -O2 -o "$T/overlap" "$TOP/tests/func/fuse/overlap.c" $(pkg-config --libs liburing) || fail "helper"

vm_start "$T/vm" "$port:4420" || fail "the guest did not boot"
vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn4k 64M 4096 &&
	nvmet_subsys $nqn512 64M 512 && nvmet_port 1 tcp 10.0.2.15 4420 &&
	nvmet_link $nqn4k 1 && nvmet_link $nqn512 1" || fail "target setup"

for nqn in $nqn4k $nqn512; do
	bs=4096; [ $nqn = $nqn512 ] && bs=512
	gw_start mount -t tcp -a 127.0.0.1 -s $port -n $nqn --name disk --max-xfer 64k "$MNT"
	F="$MNT/disk"
	stat -c '%n: %s bytes, st_blksize %o' "$F"
	python3 "$TOP/tests/func/fuse/fsx.py" "$F" 20000 7 $bs || fail "fsx on $nqn"
	"$T/overlap" "$F" $((1 << 20)) 3 5 || fail "overlap on $nqn"
	fio --verify_state_save=0 --name=v --filename="$F" --size=32M --rw=randwrite --bs=128k \
		--ioengine=io_uring --iodepth=16 --direct=1 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 > "$T/fio.log" 2>&1 || { cat "$T/fio.log"; fail "fio on $nqn"; }
	python3 -c "import os; fd = os.open('$F', os.O_RDWR); os.fsync(fd)"
	want=$(sha256sum < "$F" | cut -d' ' -f1)
	gw_stop
	got=$(vm_exec "sha256sum < /tmp/nvmet/$nqn.img" | cut -d' ' -f1)
	echo "$nqn: FUSE $want, target backing image $got"
	[ "$want" = "$got" ] || fail "$nqn: the target holds other bytes than the FUSE file showed"
done
echo "target_check: OK"
