#!/usr/bin/env bash
# rootfs.sh CACHE_DIR: makes sure CACHE_DIR/base-SUM/ holds a Debian 12
# root (debootstrap) for the systemd guest, SUM being the hash of the
# package list, so a changed list builds a new root and
# an unchanged one is reused.  Prints the base directory on stdout.
# Also fetches the interop suite's kernel package (same version as
# /var/tmp/nvmf-gateway-vm/version) once, for virtio_blk and the modules
# that the guest loads itself (udev, modules-load.d).
set -u
cache=${1:?usage: rootfs.sh CACHE_DIR}
here=$(cd "$(dirname "$0")" && pwd)

# systemd as init, udev, the tools the cases use, and the gateway's
# runtime libraries (the Depends of its package).
PKGS=(systemd systemd-sysv udev dbus kmod iproute2 procps util-linux mount
	e2fsprogs lvm2 nvme-cli fio fuse3 rdma-core ibverbs-providers
	liburing2 libconfig9 libfuse3-3 libnl-3-200 libnl-genl-3-200
	libnl-route-3-200 libibverbs1 librdmacm1 libssl3)

die() { echo "rootfs.sh: $*" >&2; exit 1; }
mkdir -p "$cache" && cache=$(cd "$cache" && pwd) || die "cannot create $cache"
exec 9> "$cache/.lock" && flock 9 || die "cannot lock $cache/.lock"

sum=$(printf '%s\n' "${PKGS[@]}" | sha256sum | cut -c1-12)
base=$cache/base-$sum
if [ ! -e "$base/.complete" ]; then
	command -v debootstrap > /dev/null ||
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap > /dev/null ||
		die "no debootstrap"
	mirror=$(sed -n 's/^URIs: *//p;s/^deb \(http[^ ]*\) bookworm .*/\1/p' \
		/etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null | head -n 1)
	rm -rf "$base" "$base.tmp"
	echo "rootfs.sh: debootstrap into $base (log: $cache/debootstrap.log)" >&2
	# In two stages, so that dpkg in the second one skips its fsync of every
	# file (force-unsafe-io): the root is a throwaway, copied into an image,
	# and the fsyncs were most of debootstrap's time on a loaded disk.
	{
		debootstrap --foreign --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" \
			bookworm "$base.tmp" "${mirror:-http://deb.debian.org/debian}" &&
			mkdir -p "$base.tmp/etc/dpkg/dpkg.cfg.d" &&
			echo force-unsafe-io > "$base.tmp/etc/dpkg/dpkg.cfg.d/sysd-unsafe-io" &&
			chroot "$base.tmp" /debootstrap/debootstrap --second-stage &&
			rm -f "$base.tmp/etc/dpkg/dpkg.cfg.d/sysd-unsafe-io"
	} > "$cache/debootstrap.log" 2>&1 || die "debootstrap failed: see $cache/debootstrap.log"
	# Nothing of apt's download cache is needed in the image.
	rm -rf "$base.tmp"/var/cache/apt/archives/*.deb "$base.tmp"/var/lib/apt/lists/*
	mv "$base.tmp" "$base" && touch "$base/.complete" || die "cannot finish $base"
fi

ver=$(cat "${VM_CACHE:-/var/tmp/nvmf-gateway-vm}/version" 2> /dev/null) ||
	die "no kernel version in the interop cache (run tests/interop/kernel.sh)"
kroot=$cache/kernel-$ver
if [ ! -e "$kroot/.complete" ]; then
	rm -rf "$kroot" && mkdir -p "$kroot/deb" || die "cannot create $kroot"
	pkg=linux-image-$ver-unsigned
	(cd "$kroot/deb" && apt-get download -q -o APT::Sandbox::User=root "$pkg") >&2 ||
		die "cannot download $pkg"
	dpkg-deb -x "$kroot"/deb/*.deb "$kroot/root" && rm -rf "$kroot/deb" &&
		touch "$kroot/.complete" || die "cannot unpack $pkg"
fi
echo "$base"
echo "$kroot/root"
