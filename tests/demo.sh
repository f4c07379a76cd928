#!/usr/bin/env bash
# make demo: a local Linux NVMe/TCP target (nvmet in a qemu guest, reached
# on 127.0.0.1:14420) and the gateway on this host against it: discover, a
# short verified benchmark, then the daemon with one export served both as
# an NBD socket and as a FUSE file, used by real clients.
set -eu
build="${1:-build}"
top="$(cd "$(dirname "$0")/.." && pwd)"
export VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
. "$top/tests/interop/vm.sh"
cd "$top"
GW="$top/$build/nvmf-gateway"
# The first free port from 14420 (a test run's VM may hold 14420).
port=${DEMO_PORT:-14420}
if [ -z "${DEMO_PORT:-}" ]; then
	while (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null; do port=$((port + 1)); done
fi
nqn=nqn.2014-08.org.nvmf-gateway:demo
state=$(mktemp -d /tmp/nvmf-demo.XXXXXX)
gwpid=
cleanup() {
	set +e
	[ -n "$gwpid" ] && kill -TERM "$gwpid" 2> /dev/null && wait "$gwpid" 2> /dev/null
	mountpoint -q "$state/mnt" && umount "$state/mnt"
	vm_stop
}
trap cleanup EXIT
echo "== starting the Linux NVMe/TCP target in a VM (127.0.0.1:$port)"
vm_start "$state/vm" "$port:4420" > "$state/boot.log" 2>&1 || { cat "$state/boot.log"; exit 1; }
vm_exec ". tests/interop/nvmet.sh && nvmet_subsys $nqn 256M 512 &&
	nvmet_port 1 tcp 10.0.2.15 4420 && nvmet_link $nqn 1" > /dev/null
export NVMF_GATEWAY_STATE_DIR="$state/gw-state"
echo "== nvmf-gateway discover -t tcp -a 127.0.0.1 -s $port"
"$GW" discover -t tcp -a 127.0.0.1 -s "$port"
echo
echo "== nvmf-gateway bench -t tcp -a 127.0.0.1 -s $port -n $nqn -w randrw -b 4k -d 16 -T 5 --verify"
"$GW" bench -t tcp -a 127.0.0.1 -s "$port" -n "$nqn" -w randrw -b 4k -d 16 -T 5 --verify
echo

sock="$state/disk0.sock"
uri="nbd+unix:///disk0?socket=$sock"
cat > "$state/gw.conf" << EOF
gateway = { reactors = 2; state_dir = "$state/gw-state"; };
targets = ( { name = "demo"; subnqn = "$nqn";
              paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } ); } );
exports = ( { name = "disk0"; target = "demo"; nsid = 1;
              nbd = { listen = "unix:$sock"; }; fuse = true; } );
fuse = { mountpoint = "$state/fuse"; };
EOF
mkdir -p "$state/fuse" "$state/mnt"
echo "== nvmf-gateway run -f -c $state/gw.conf   (NBD socket + FUSE file)"
cat "$state/gw.conf"
"$GW" run -f -c "$state/gw.conf" &
gwpid=$!
for _ in $(seq 300); do
	[ -S "$sock" ] && [ -e "$state/fuse/disk0" ] && break
	kill -0 "$gwpid" || { echo "demo: the gateway exited"; exit 1; }
	sleep 0.1
done
echo
echo "== NBD: nbdinfo $uri"
nbdinfo "$uri"
echo
echo "== NBD: nbdcopy 16 MiB of random data in; FUSE: read it back from $state/fuse/disk0"
head -c 16M /dev/urandom > "$state/data"
nbdcopy "$state/data" "$uri"
ls -l "$state/fuse"
cmp -n 16777216 "$state/data" "$state/fuse/disk0" && echo "same bytes through NBD and FUSE"
echo
echo "== FUSE: losetup + mkfs.ext4 + mount on the file, write, fsck"
loop=$(losetup --find --show "$state/fuse/disk0")
mkfs.ext4 -q -F "$loop"
mount "$loop" "$state/mnt"
cp "$state/data" "$state/mnt/data" && sync
sha256sum "$state/mnt/data"
umount "$state/mnt"
fsck.ext4 -fn "$loop" > /dev/null && echo "fsck: clean"
losetup -d "$loop"
echo
echo "== NBD sees the filesystem written through FUSE (ext4 magic 0xef53 at byte 1080)"
# nbdsh runs Debian's python3, where python3-libnbd lives.
magic=$(PATH=/usr/bin:$PATH nbdsh -u "$uri" -c 'print(h.pread(512, 1024)[56:58][::-1].hex())')
echo "magic: 0x$magic"
[ "$magic" = ef53 ]
kill -TERM "$gwpid"
wait "$gwpid"
gwpid=
echo
echo "demo: OK"
