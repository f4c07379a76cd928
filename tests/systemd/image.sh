#!/usr/bin/env bash
# image.sh BUILD STATE_DIR: writes STATE_DIR/root.img (ext4, made with
# mkfs.ext4 -d: nothing is mounted on the host) and STATE_DIR/initrd.img for
# a guest whose init is systemd:
#   - the Debian 12 root of rootfs.sh (cached), copied;
#   - the modules the guest loads itself (udev, modules-load.d, modprobe),
#     from the interop suite's kernel version, with their modules.dep;
#   - nvmf-gateway, from SYSD_DEB (a .deb, installed with dpkg in a chroot
#     of the copy) or else `make install DESTDIR=` of BUILD;
#   - the test units and scripts (tests/systemd/guest/), the interop
#     agent that runs the host's commands, and the gateway configuration.
# The initramfs only loads virtio_blk and ext4, mounts /dev/vda and
# switch_roots to /sbin/init.
# Env: SYSD_CACHE (default /var/tmp/nvmf-gateway-sysd), VM_CACHE (the
#   interop kernel cache, default /var/tmp/nvmf-gateway-vm), SYSD_DEB.
set -u -o pipefail
build=${1:?usage: image.sh BUILD STATE_DIR}
st=${2:?usage: image.sh BUILD STATE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cache=${SYSD_CACHE:-/var/tmp/nvmf-gateway-sysd}
VM_CACHE=${VM_CACHE:-/var/tmp/nvmf-gateway-vm}
die() { echo "image.sh: $*" >&2; exit 1; }

# The guest's own modules (their dependencies come from modprobe).
GUEST_MODULES=(nbd nvmet nvmet-tcp nvme-tcp loop fuse dm_mod configfs 9p
	9pnet_virtio virtio_net sch_netem rdma_rxe rdma_ucm ib_uverbs
	crc32_generic crc32c_generic ext4 virtio_blk)
ROOT_MODULES=(virtio_blk ext4 crc32c_generic)

mkdir -p "$st" && st=$(cd "$st" && pwd) || die "cannot create $st"
"$top/tests/interop/kernel.sh" "$VM_CACHE" > /dev/null || die "kernel.sh failed"
ver=$(cat "$VM_CACHE/version")
out=$("$here/rootfs.sh" "$cache") || die "rootfs.sh failed"
base=$(sed -n 1p <<< "$out")
kroot=$(sed -n 2p <<< "$out")
[ -d "$base" ] && [ -d "$kroot/lib/modules/$ver" ] || die "no root or modules ($out)"
[ -s "$kroot/lib/modules/$ver/modules.dep" ] || depmod -b "$kroot" "$ver" || die "depmod failed"

# deps NAME...: the module files NAME needs, in load order (builtins skipped).
deps() {
	local m
	mkdir -p "$cache/noconf"
	for m; do
		modprobe -C "$cache/noconf" -d "$kroot" -S "$ver" --show-depends "$m" ||
			die "module $m not in $ver"
	done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }'
}

# The initramfs, cached by what goes into it.
isum=$( { cat "$here/initrd-init.sh" /bin/busybox; deps "${ROOT_MODULES[@]}"; } | sha256sum | cut -c1-12)
if [ ! -s "$cache/initrd-$isum.img" ]; then
	t=$(mktemp -d /tmp/sysd-initrd.XXXXXX) || die "no scratch dir"
	mkdir -p "$t/bin" "$t/dev" "$t/proc" "$t/sys" "$t/newroot" "$t/modules"
	for f in $(deps "${ROOT_MODULES[@]}"); do
		m=$(basename "$f"); m=${m%.xz}
		case "$f" in
		*.xz) xz -dc "$f" > "$t/modules/$m" ;;
		*) cp "$f" "$t/modules/$m" ;;
		esac || die "cannot unpack $f"
		echo "$m" >> "$t/modules/order"
	done
	cp /bin/busybox "$t/bin/busybox" && install -m 755 "$here/initrd-init.sh" "$t/init" &&
		(cd "$t" && find . | cpio -o -H newc --quiet | gzip -1) > "$cache/initrd-$isum.img.new" &&
		mv "$cache/initrd-$isum.img.new" "$cache/initrd-$isum.img" || die "cannot build the initramfs"
	rm -rf "$t"
fi
cp "$cache/initrd-$isum.img" "$st/initrd.img" || die "cannot copy the initramfs"

stage=$st/stage
rm -rf "$stage"
cp -a "$base" "$stage" || die "cannot copy $base"
trap 'rm -rf "$stage"' EXIT

# Modules: the files with their paths, then the guest's own modules.dep.
mdir=lib/modules/$ver
mkdir -p "$stage/$mdir"
cp "$kroot/$mdir"/modules.builtin "$kroot/$mdir"/modules.builtin.modinfo \
	"$kroot/$mdir"/modules.order "$stage/$mdir/" || die "no modules.builtin"
for f in $(deps "${GUEST_MODULES[@]}"); do
	rel=${f#"$kroot/"}
	mkdir -p "$stage/$(dirname "$rel")" || die "cannot copy $rel"
	# Decompressed here: xz under TCG made systemd-modules-load take 40 s.
	case "$rel" in
	*.xz) xz -dc "$f" > "$stage/${rel%.xz}" ;;
	*) cp "$f" "$stage/$rel" ;;
	esac || die "cannot copy $rel"
done
depmod -b "$stage" "$ver" || die "depmod in the image failed"

# The gateway.
if [ -n "${SYSD_DEB:-}" ]; then
	cp "$SYSD_DEB" "$stage/tmp/gw.deb" &&
		chroot "$stage" dpkg -i /tmp/gw.deb > "$st/dpkg.log" 2>&1 ||
		die "dpkg -i $SYSD_DEB failed: see $st/dpkg.log"
	rm -f "$stage/tmp/gw.deb"
	gwbin=/usr/bin/nvmf-gateway
else
	make -s -C "$top" BUILD="$build" DESTDIR="$stage" install > "$st/install.log" 2>&1 ||
		die "make install failed: see $st/install.log"
	# What the package adds (the nbd module at boot).
	echo nbd > "$stage/etc/modules-load.d/nvmf-gateway.conf"
	gwbin=/usr/local/bin/nvmf-gateway
fi
echo "$gwbin" > "$st/gwbin"

# Test files: scripts under /opt/sysd, units, configuration.
g=$stage/opt/sysd
mkdir -p "$g" && cp -r "$here/guest/." "$g/" && cp "$top/tests/interop/guest-agent.sh" \
	"$top/tests/interop/nvmet.sh" "$g/" && cp "$top/systemd/vm-host-ordering.conf" "$g/" ||
	die "cannot copy the test files"
mkdir -p "$stage/srv/sysd-share"
cp "$here/guest/test-agent.service" "$here/guest/test-nvmet.service" \
	"$here/guest/pve-guests.service" "$stage/etc/systemd/system/"
ln -sf /etc/systemd/system/test-agent.service "$stage/etc/systemd/system/multi-user.target.wants/"
ln -sf /etc/systemd/system/test-nvmet.service "$stage/etc/systemd/system/multi-user.target.wants/"
# No configuration yet, as after an install: case 1 writes it (from
# /opt/sysd/nvmf-gateway.conf) before `systemctl enable --now`.  The
# package's unit is enabled at install; with the file in the image it
# would already be running at boot.
rm -f "$stage/etc/nvmf-gateway/nvmf-gateway.conf"
# The share is mounted by test-agent.service, not fstab: a mount from fstab
# raced 9pnet_virtio's probe ("no channels available") and sent the boot to
# emergency mode.
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" > "$stage/etc/fstab"
echo sysd-guest > "$stage/etc/hostname"
printf '%s\n' 9pnet_virtio 9p configfs loop dm_mod > "$stage/etc/modules-load.d/sysd-test.conf"
# The target's own loop device must stay out of LVM's sight.
cat > "$stage/etc/lvm/lvm.conf" <<'LVM'
devices {
	global_filter = [ "a|^/dev/nbd|", "r|.*|" ]
	use_devicesfile = 0
}
LVM
# The journal of the previous boot is what case 6 reads.
mkdir -p "$stage/var/log/journal"
# Timers and services that would only load the 2 shared cores (nvme-cli's
# autoconnect has nothing to connect).
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer \
	dpkg-db-backup.timer systemd-tmpfiles-clean.timer e2scrub_reap.service \
	rdma-ndd.service nvmf-autoconnect.service \
	serial-getty@ttyS0.service getty@tty1.service; do
	ln -sf /dev/null "$stage/etc/systemd/system/$u"
done
echo root:sysd | chroot "$stage" chpasswd 2> /dev/null

rm -f "$st/root.img.new"
truncate -s 2G "$st/root.img.new" &&
	mkfs.ext4 -q -F -L sysd-root -d "$stage" "$st/root.img.new" > "$st/mkfs.log" 2>&1 &&
	mv "$st/root.img.new" "$st/root.img" || die "mkfs.ext4 -d failed: see $st/mkfs.log"
echo "image.sh: $st/root.img ($(du -sh --apparent-size "$stage" | cut -f1) of files), kernel $ver"
