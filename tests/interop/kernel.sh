#!/usr/bin/env bash
# kernel.sh CACHE_DIR: makes sure CACHE_DIR holds what the test guest boots:
#   vmlinuz, modules/*.ko + modules/order (insmod order), initramfs.img.
# The host kernel has no loadable modules, so the guest runs a Debian 6.12
# kernel (nvmet TCP/RDMA, auth, ANA, rxe) taken from the apt archive.
# Idempotent: a complete cache is left alone; the initramfs alone is rebuilt
# when guest-init.sh or busybox changed, everything when MODULES changed.
# Env: VM_KERNEL_PKG forces a kernel package (e.g. to pin a version);
#   VM_KERNEL selects the series: 6.12 (default, Debian 12) or 5.10 (Debian
#   11's, the oldest Debian kernel deb.debian.org still serves; buster's 4.19
#   is gone from it and archive.debian.org is not reachable from here).  Give
#   each series its own CACHE_DIR (run.sh: INTEROP_KERNEL=5.10 uses
#   $VM_CACHE/k5.10).
set -u
cache=${1:?usage: kernel.sh CACHE_DIR}
here=$(cd "$(dirname "$0")" && pwd)

# What the tests load; their dependencies come from modprobe.  Some are built
# into Debian's kernel (fuse, virtio_pci): modprobe says so and they are skipped.
MODULES=(fuse dm_mod ext4 virtio_net virtio_pci configfs nvmet nvmet-tcp
	nvmet-rdma nvme-tcp nvme-rdma nvme-fabrics loop nbd null_blk rdma_rxe
	rdma_ucm ib_uverbs 9pnet_virtio 9p sch_netem crc32_generic crc32c_generic)
# Per series: the Debian suite, the package names, and the one checked by
# hand (the last one tried).
series=${VM_KERNEL:-6.12}
case "$series" in
6.12)
	SUITE=bookworm
	PKG_RE='^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$'
	KNOWN_GOOD=linux-image-6.12.107+deb12-amd64-unsigned
	;;
5.10)
	SUITE=bullseye
	PKG_RE='^linux-image-5\.10\.0-[0-9]+-amd64-unsigned$'
	KNOWN_GOOD=linux-image-5.10.0-46-amd64-unsigned
	;;
*)
	echo "kernel.sh: VM_KERNEL=$series: only 6.12 and 5.10 are known" >&2
	exit 1
	;;
esac
# 6.12 only (nvmet has TLS from 6.7; 5.10 has no tls module): kernel TLS,
# which tlshd hands the session keys to after an NVMe/TCP TLS handshake
# (TLS.md), and the AEAD templates of the TLS 1.3 cipher suites (gcm, its
# ghash, ccm; aes and ctr are built in).  The guest has no modprobe for the
# kernel to load them on demand: without gcm, tlshd's setsockopt fails ("The
# kernel does not support the requested algorithm").
[ "$series" = 6.12 ] && MODULES+=(tls gcm ghash_generic ccm)

die() { echo "kernel.sh: $*" >&2; exit 1; }

mkdir -p "$cache" || die "cannot create $cache"
cache=$(cd "$cache" && pwd)
# Two test runs may share the cache: build it under a lock.
exec 9> "$cache/.lock" && flock 9 || die "cannot lock $cache/.lock"

# 6.12's sum is the one caches made before VM_KERNEL existed had: they stay.
modules_sum=$( { [ "$series" = 6.12 ] || echo "$series"; printf '%s\n' "${MODULES[@]}"; } |
	sha256sum | cut -d' ' -f1)
initramfs_sum() {
	cat "$here/guest-init.sh" /bin/busybox "$cache/modules/order" "$cache/version" |
		sha256sum | cut -d' ' -f1
}

# apt options for the kernel download: none (the system's sources), or a
# private source list and package lists under the cache (private_apt).
APT_OPTS=()
listed() {
	apt-cache "${APT_OPTS[@]}" search --names-only "$PKG_RE" | cut -d' ' -f1 | sort -rV | head -n 2
}

# Debian 12's 6.12 kernels are in bookworm-updates and bookworm-security.  A
# minimal root (debootstrap, a container image) may list only "bookworm
# main": then the same mirror's three suites are read into a private list
# under the cache, leaving the system's apt configuration untouched.  5.10
# (bullseye, its newest build in bullseye-security) always comes this way.
private_apt() {
	local d="$cache/apt" mirror
	mirror=$(sed -n 's/^URIs: *//p; s/^deb  *\(http[^ ]*\)  *bookworm .*/\1/p' \
		/etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null |
		grep -v -- '-security' | head -n 1)
	mirror=${mirror%/}
	[ -n "$mirror" ] || return 1
	mkdir -p "$d/lists/partial" || return 1
	printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s-security %s-security main\n' \
		"$mirror" $SUITE "$mirror" $SUITE "$mirror" $SUITE > "$d/sources.list"
	APT_OPTS=(-o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o Dir::State::Lists="$d/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
	echo "kernel.sh: no $series kernel in this system's apt sources; reading $mirror" \
		"$SUITE, $SUITE-updates and $SUITE-security into $d" >&2
	apt-get "${APT_OPTS[@]}" update -qq >&2
}

# Kernel packages to try, best first: a forced one, the two newest of the
# series the archive lists, the known good one.  Sets APT_OPTS: not in a
# subshell.
kernel_candidates() {
	local found=
	if [ "$SUITE" = bookworm ]; then
		found=$(listed)
		# A fresh machine may never have fetched the package lists.
		[ -n "$found" ] || { apt-get update -qq >&2; found=$(listed); }
	fi
	[ -n "$found" ] || { private_apt && found=$(listed); }
	CANDIDATES=$(printf '%s\n' "${VM_KERNEL_PKG:-}" "$found" "$KNOWN_GOOD" | awk 'NF && !seen[$0]++')
}

# Downloads and unpacks a kernel, keeps vmlinuz and the needed modules
# (decompressed: busybox insmod takes plain .ko) with their insmod order.
# The build_* functions run in subshells: $tmp and its trap are their own.
build_kernel() {
	local pkg deb ver m kind path
	tmp=$(mktemp -d /tmp/nvmf-kernel.XXXXXX) || die "no scratch dir"
	trap 'rm -rf "$tmp"' EXIT
	kernel_candidates
	for pkg in $CANDIDATES; do
		# Sandbox user root: _apt cannot write into the scratch dir.
		(cd "$tmp" && apt-get download -q "${APT_OPTS[@]}" -o APT::Sandbox::User=root "$pkg") >&2 &&
			break
		echo "kernel.sh: could not download $pkg, trying the next one" >&2
	done
	deb=$(find "$tmp" -maxdepth 1 -name '*.deb' | head -n 1)
	[ -n "$deb" ] || die "no kernel package could be downloaded"
	echo "kernel.sh: unpacking $(basename "$deb")"
	dpkg-deb -x "$deb" "$tmp/root" || die "dpkg-deb -x failed"
	ver=$(ls "$tmp/root/lib/modules")
	depmod -b "$tmp/root" "$ver" || die "depmod failed"
	mkdir -p "$tmp/noconf" "$tmp/modules"
	# -C: an empty config, so the host's modprobe.d cannot add options.
	for m in "${MODULES[@]}"; do
		modprobe -C "$tmp/noconf" -d "$tmp/root" -S "$ver" --show-depends "$m" ||
			die "module $m not in $ver"
	done | awk '!seen[$1 $2]++ { print $1, $2 }' > "$tmp/deps"
	while read -r kind path; do
		if [ "$kind" = builtin ]; then
			echo "kernel.sh: $path is built in"
			continue
		fi
		m=$(basename "$path"); m=${m%.xz}
		case "$path" in
		*.ko.xz) xz -dc "$path" > "$tmp/modules/$m" ;;
		*.ko) cp "$path" "$tmp/modules/$m" ;;
		*) die "unexpected module file $path" ;;
		esac || die "cannot unpack $path"
		echo "$m" >> "$tmp/modules/order"
	done < "$tmp/deps"
	cp "$tmp/root/boot/vmlinuz-$ver" "$tmp/vmlinuz" || die "no vmlinuz in $pkg"
	rm -rf "$cache/modules" "$cache/initramfs.sum"
	mv "$tmp/modules" "$tmp/vmlinuz" "$cache/" &&
		echo "$ver" > "$cache/version" &&
		echo "$modules_sum" > "$cache/modules.sum" || die "cannot fill $cache"
	echo "kernel.sh: kernel $ver with $(wc -l < "$cache/modules/order") modules in $cache"
}

# busybox + modules + /init, as a gzip'ed newc cpio.
build_initramfs() {
	tmp=$(mktemp -d /tmp/nvmf-initramfs.XXXXXX) || die "no scratch dir"
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/bin" "$tmp/dev" "$tmp/proc" "$tmp/sys" "$tmp/newroot"
	cp /bin/busybox "$tmp/bin/busybox" && cp -r "$cache/modules" "$tmp/modules" &&
		install -m 755 "$here/guest-init.sh" "$tmp/init" || die "cannot stage initramfs"
	(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) > "$cache/initramfs.img.new" &&
		mv "$cache/initramfs.img.new" "$cache/initramfs.img" &&
		initramfs_sum > "$cache/initramfs.sum" || die "cannot write the initramfs"
	echo "kernel.sh: initramfs rebuilt"
}

# ldd fails on a static binary; the initramfs has no libc for a dynamic one.
[ -x /bin/busybox ] && ! ldd /bin/busybox > /dev/null 2>&1 ||
	die "/bin/busybox must be busybox-static (tests/deps.sh installs it)"
if [ ! -s "$cache/vmlinuz" ] || [ ! -s "$cache/modules/order" ] ||
	[ "$(cat "$cache/modules.sum" 2>/dev/null)" != "$modules_sum" ]; then
	(build_kernel) || exit 1
fi
if [ ! -s "$cache/initramfs.img" ] ||
	[ "$(cat "$cache/initramfs.sum" 2>/dev/null)" != "$(initramfs_sum)" ]; then
	(build_initramfs) || exit 1
fi
exit 0
