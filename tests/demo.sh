#!/usr/bin/env bash
# make demo: a local Linux NVMe/TCP target (nvmet in a qemu guest, reached
# on 127.0.0.1:14420) and the gateway on this host against it: discover,
# then a short verified benchmark.
set -eu
build="${1:-build}"
top="$(cd "$(dirname "$0")/.." && pwd)"
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
. "$top/tests/interop/vm.sh"
cd "$top"
GW="$top/$build/nvmf-gateway"
port=${DEMO_PORT:-14420}
nqn=nqn.2014-08.org.nvmf-gateway:demo
state=$(mktemp -d /tmp/nvmf-demo.XXXXXX)
trap vm_stop EXIT
echo "== starting the Linux NVMe/TCP target in a VM (127.0.0.1:$port)"
vm_start "$state" "$port:4420" > "$state.boot.log" 2>&1 || { cat "$state.boot.log"; exit 1; }
vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn 256M 512 &&
	nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_link $nqn 1" > /dev/null
export NVMF_GATEWAY_STATE_DIR="$state/gw-state"
echo "== nvmf-gateway discover -t tcp -a 127.0.0.1 -s $port"
"$GW" discover -t tcp -a 127.0.0.1 -s "$port"
echo
echo "== nvmf-gateway bench -t tcp -a 127.0.0.1 -s $port -n $nqn -w randrw -b 4k -d 16 -T 5 --verify"
"$GW" bench -t tcp -a 127.0.0.1 -s "$port" -n "$nqn" -w randrw -b 4k -d 16 -T 5 --verify
echo
echo "demo: OK"
