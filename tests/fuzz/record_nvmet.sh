#!/usr/bin/env bash
# Rebuilds the seed corpus of fuzz_tcp_rx from real sessions with the Linux
# target: boots the interop guest, puts tcp_record.py between the gateway
# and nvmet (guest port 4430 -> 4420), runs discover and short benches
# (reads, R2T writes, 512 B and 4 KiB blocks, digests off and on), then
# rec2corpus.py turns the target's PDUs into seeds in
# tests/fuzz/corpus/tcp_rx/ (old seeds are replaced).  Boots the VM, so:
#   flock /tmp/nvmf-vm.lock tests/fuzz/record_nvmet.sh [BUILD]
set -u
build="${1:-build}"
top="$(cd "$(dirname "$0")/../.." && pwd)"
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
. "$top/tests/interop/vm.sh"
cd "$top" || exit 1
GW="$top/$build/nvmf-gateway"
[ -x "$GW" ] || { echo "record: build the gateway first ($GW)" >&2; exit 1; }
nqn512=nqn.2014-08.org.nvmf-gateway:rec-512
nqn4k=nqn.2014-08.org.nvmf-gateway:rec-4k
state=$(mktemp -d /tmp/nvmf-record.XXXXXX) || exit 1
trap 'vm_stop; rm -rf "$state"' EXIT

vm_start "$state" || exit 1
rec="$state/share/rec"
vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn512 64M 512 && nvmet_subsys $nqn4k 64M 4096 &&
	nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_link $nqn512 1 && nvmet_link $nqn4k 1" || exit 1
vm_exec "nohup python3 $top/tests/fuzz/tcp_record.py 10.0.2.15:4430 10.0.2.15:4420 $rec \
	> /tmp/rec.log 2>&1 & echo \$! > /tmp/rec.pid
	for i in \$(seq 100); do ss -ltn | grep -q ':4430 ' && exit 0; sleep 0.1; done
	cat /tmp/rec.log; exit 1" || exit 1

g() { VM_EXEC_TIMEOUT=120 vm_exec "export NVMF_GATEWAY_STATE_DIR=/tmp/gw-state; $GW $*"; }
b() { g bench -t tcp -a 10.0.2.15 -s 4430 -T 1 --size 4M "$@"; }
rc=0
g discover -t tcp -a 10.0.2.15 -s 4430 || rc=1
b -n $nqn512 -w randrw -b 4k -d 4 --verify || rc=1
b -n $nqn512 -w randrw -b 4k -d 4 --verify -g -G || rc=1
b -n $nqn512 -w randwrite -b 64k -d 2 --verify || rc=1
b -n $nqn512 -w read -b 128k -d 2 -g || rc=1
b -n $nqn4k -w randrw -b 16k -d 4 --verify -G || rc=1
b -n $nqn4k -w read -b 8k -d 1 -g -G || rc=1
vm_exec 'kill $(cat /tmp/rec.pid)'
[ $rc = 0 ] || { echo "record: a session failed; corpus left alone" >&2; exit 1; }
ls -l "$rec"
rm -rf tests/fuzz/corpus/tcp_rx
python3 tests/fuzz/rec2corpus.py "$rec" tests/fuzz/corpus/tcp_rx 60
