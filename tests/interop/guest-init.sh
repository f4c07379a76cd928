#!/bin/busybox sh
# /init of the test guest's initramfs (built in by kernel.sh).  Loads the
# modules, makes the host's root filesystem (9p, read-only) the guest's root
# with writable /tmp, /run and the shared folder, brings up the network and
# hands over to the guest agent, which vm.sh starts from the host checkout.
# Kernel command line (set by vm_start): vmshare=DIR vmagent=FILE [vmkeep=DIR]
set -u
/bin/busybox --install -s /bin
export PATH=/bin

# Nothing is there to clean up when setup fails: say why and power off.
fail() {
	echo "init: $*"
	poweroff -f
}

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev

while read -r m; do
	insmod "/modules/$m" || echo "init: insmod $m failed"
done < /modules/order

share='' agent='' keep=''
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	vmshare=*) share=${arg#*=} ;;
	vmagent=*) agent=${arg#*=} ;;
	vmkeep=*) keep=${arg#*=} ;;
	esac
done
[ -n "$share" ] && [ -n "$agent" ] || fail "vmshare= and vmagent= are needed"

r=/newroot
# msize: bigger 9p messages, fewer round trips through the emulated virtio.
opts=trans=virtio,version=9p2000.L,msize=262144
mount -t 9p -o "$opts,ro" hostroot "$r" || fail "cannot mount the host root"
# A checkout under /tmp would vanish under the guest's /tmp: set it aside first.
case "$keep" in
/tmp/* | /run/*)
	mkdir -p /keep && mount --bind "$r$keep" /keep || fail "cannot keep $keep"
	;;
*) keep= ;;
esac
mount -t proc proc "$r/proc"
mount -t sysfs sys "$r/sys"
mount -t devtmpfs dev "$r/dev"
mkdir -p "$r/dev/pts" "$r/dev/shm"
mount -t devpts devpts "$r/dev/pts"
mount -t tmpfs shm "$r/dev/shm"
mount -t configfs configfs "$r/sys/kernel/config"
mount -t tmpfs tmp "$r/tmp"
mount -t tmpfs run "$r/run"
if [ -n "$keep" ]; then
	mkdir -p "$r$keep" && mount --move /keep "$r$keep" || fail "cannot keep $keep"
fi
# The share is mounted at its host path, so both sides use the same names.
mkdir -p "$r$share" 2> /dev/null
mount -t 9p -o "$opts" share "$r$share" || fail "cannot mount the share on $share"

ip link set lo up
# Only the static IPv4 address: no IPv6 autoconfiguration from qemu's router.
echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0 || fail "no eth0"

# The agent becomes PID 1: it must never exit (the kernel would panic).
exec chroot "$r" /bin/bash "$agent" "$share"
