#!/usr/bin/env bash
# NVMe/RDMA figures, side by side in one guest run (issue 5): the gateway's
# bench over rdma, fio (io_uring, O_DIRECT) on the kernel's own nvme-rdma
# block device, and the gateway's bench over tcp, all against the same
# nvmet namespace (a loop device over guest tmpfs) and soft-RoCE (rxe0).
# Prints a table and the ratios; figures from a TCG guest compare the three
# paths with each other, not with hardware.
#   flock /tmp/nvmf-vm.lock tests/bench/rdma.sh [BUILD] [SECONDS]
set -u
build="${1:-build}"
secs="${2:-5}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
. "$top/tests/interop/vm.sh"
cd "$top" || exit 1
GW="$top/$build/nvmf-gateway"
nqn=nqn.2014-08.org.nvmf-gateway:bench
state=$(mktemp -d /tmp/nvmf-bench.XXXXXX) || exit 1
trap vm_stop EXIT

vm_start "$state" || exit 1
VM_EXEC_TIMEOUT=120 vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn 512M 512 &&
	dd if=/dev/zero of=/tmp/nvmet/$nqn.img bs=1M count=512 conv=notrunc status=none &&
	nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_port 2 rdma 10.0.2.15 4420 &&
	nvmet_link $nqn 1 && nvmet_link $nqn 2 && ibv_devices | grep -q rxe0" || exit 1

# gw TRANSPORT WORKLOAD BS QD: IOPS and MiB/s of the gateway's bench.
gw() {
	VM_EXEC_TIMEOUT=120 vm_exec "$GW bench -t $1 -a 10.0.2.15 -s 4420 -n $nqn -w $2 -b $3 -d $4 \
		-T $secs -o json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["iops"], d["mibps"])'
}
# kfio WORKLOAD BS QD: the same through the kernel's nvme-rdma host.
kfio() {
	VM_EXEC_TIMEOUT=120 vm_exec ". tests/interop/nvmet.sh; dev=\$(nvme_host_dev $nqn) &&
		fio --name=k --filename=\$dev --ioengine=io_uring --direct=1 --rw=$1 --bs=$2 \
		--iodepth=$3 --runtime=$secs --time_based --size=256M --output-format=json" |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print(j["iops"], j["bw"]/1024)'
}

declare -A r
for t in "randread 4k 32" "read 128k 32"; do
	set -- $t
	r[rdma,$1]=$(gw rdma "$@") || exit 1
	r[tcp,$1]=$(gw tcp "$@") || exit 1
done
vm_exec "nvme connect -t rdma -a 10.0.2.15 -s 4420 -n $nqn > /dev/null" || exit 1
for t in "randread 4k 32" "read 128k 32"; do
	set -- $t
	r[kernel,$1]=$(kfio "$@") || exit 1
done
vm_exec "nvme disconnect -n $nqn > /dev/null"

python3 - "${r[rdma,randread]}" "${r[kernel,randread]}" "${r[tcp,randread]}" \
	"${r[rdma,read]}" "${r[kernel,read]}" "${r[tcp,read]}" <<'EOF'
import sys
v = [tuple(map(float, a.split())) for a in sys.argv[1:]]
iops = [x[0] for x in v[:3]]
mib = [x[1] for x in v[3:]]
print("                     gw-rdma   kernel-rdma(fio)   gw-tcp   gw-rdma/kernel  gw-rdma/gw-tcp")
print(f"4K randread QD32 IOPS {iops[0]:9.0f} {iops[1]:12.0f} {iops[2]:14.0f} {iops[0]/iops[1]:10.2f} {iops[0]/iops[2]:14.2f}")
print(f"128K read QD32 MiB/s  {mib[0]:9.1f} {mib[1]:12.1f} {mib[2]:14.1f} {mib[0]/mib[1]:10.2f} {mib[0]/mib[2]:14.2f}")
EOF
