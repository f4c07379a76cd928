#!/usr/bin/env bash
# The NVMe/TCP engine against the kernel's own host, in one guest run: the
# Linux target (nvmet, a 4 KiB-block namespace on a loop device over tmpfs),
# then for each workload the gateway's `bench` and fio (io_uring, direct) on
# /dev/nvmeXn1 of `nvme connect -t tcp` to the same subsystem, one after
# the other, same queue depth and duration.  Prints them side by side with
# the ratio gateway/kernel.  Under TCG the absolute numbers say little;
# the ratio is the point.  Not part of make test; boots the VM, so:
#   flock /tmp/nvmf-vm.lock tests/bench/engine.sh [BUILD]
# Env: BENCH_TIME seconds per run (default 10).
set -u
build="${1:-build}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
T=${BENCH_TIME:-10}
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
. "$top/tests/interop/vm.sh"
cd "$top" || exit 1
GW="$top/$build/nvmf-gateway"
[ -x "$GW" ] || { echo "engine.sh: build the gateway first ($GW)" >&2; exit 1; }
nqn=nqn.2014-08.org.nvmf-gateway:bench
state=$(mktemp -d /tmp/nvmf-bench.XXXXXX) || exit 1
trap 'vm_stop; rm -rf "$state"' EXIT
out="$state/share/res"

vm_start "$state" > /dev/null || exit 1
mkdir -p "$out"
vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn 1G 4096 &&
	nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_link $nqn 1" || exit 1

# run NAME RW BS QD: gateway first, then the kernel host.
run() {
	local name=$1 rw=$2 bs=$3 qd=$4
	VM_EXEC_TIMEOUT=$((T + 120)) vm_exec "export NVMF_GATEWAY_STATE_DIR=/tmp/gw-state
		$GW bench -t tcp -a 10.0.2.15 -s 4420 -n $nqn -w $rw -b $bs -d $qd -T $T -o json \
			> $out/$name.gw.json" || return 1
	VM_EXEC_TIMEOUT=$((T + 120)) vm_exec ". tests/interop/nvmet.sh
		nvme connect -t tcp -a 10.0.2.15 -s 4420 -n $nqn > /dev/null || exit 1
		dev=\$(nvme_host_dev $nqn) || exit 1
		fio --name=$name --filename=\$dev --ioengine=io_uring --direct=1 --rw=$rw --bs=$bs \
			--iodepth=$qd --runtime=$T --time_based --output-format=json \
			> $out/$name.fio.json; r=\$?
		nvme disconnect -n $nqn > /dev/null; exit \$r" || return 1
}
rc=0
run 4k-randread-qd32 randread 4k 32 || rc=1
run 128k-read-qd8 read 128k 8 || rc=1
[ $rc = 0 ] || { echo "engine.sh: a run failed" >&2; exit 1; }

python3 - "$out" "$T" <<'PY'
import json, sys
out, T = sys.argv[1], sys.argv[2]
print(f"NVMe/TCP to nvmet in one TCG guest, {T} s per run; gateway bench vs fio io_uring direct on the kernel host")
print(f"{'workload':20} {'gw IOPS':>9} {'gw MiB/s':>9} {'gw p99us':>9} | {'kern IOPS':>9} {'kern MiB/s':>10} {'kern p99us':>10} | {'ratio':>5}")
for name in ("4k-randread-qd32", "128k-read-qd8"):
    g = json.load(open(f"{out}/{name}.gw.json"))
    f = json.load(open(f"{out}/{name}.fio.json"))["jobs"][0]["read"]
    k_iops, k_mibs = f["iops"], f["bw"] / 1024
    k_p99 = f["clat_ns"]["percentile"]["99.000000"] / 1000
    ratio = g["iops"] / k_iops if k_iops else float("nan")
    print(f"{name:20} {g['iops']:9.0f} {g['mibps']:9.1f} {g['lat_us']['p99']:9.0f} | "
          f"{k_iops:9.0f} {k_mibs:10.1f} {k_p99:10.0f} | {ratio:5.2f}")
PY
