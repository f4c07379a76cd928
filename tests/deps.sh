#!/usr/bin/env bash
# Installs the Debian 12 packages that the build and every test suite need;
# "deps.sh deb" also what make deb needs (debhelper, lintian): make test
# and make deb ask for it; "deps.sh bench" the peers of make bench.
# A no-op when they are all present; needs root otherwise.
set -eu
pkgs=(
	build-essential pkg-config
	systemd man-db groff-base
	liburing-dev libconfig-dev check
	libfuse3-dev fuse3 libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils
	libnl-3-dev libnl-genl-3-dev libnl-route-3-dev
	clang libclang-rt-14-dev
	qemu-system-x86 qemu-utils busybox-static cpio kmod xz-utils
	nvme-cli fio iproute2 util-linux e2fsprogs python3 lvm2 strace
	libnbd-bin nbdkit python3-libnbd
	libssl-dev openssl valgrind
)
# make deb and its test (t_deb, so make test too); make demo does without.
[ "${1:-}" = deb ] && pkgs+=(dpkg-dev debhelper lintian)
# make bench: the peers it measures beside the gateway.
[ "${1:-}" = bench ] && pkgs+=(nbdfuse)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing ${missing[*]}; run 'make deps' as root" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# apt's own summary (how much it downloads) is kept; the per-package
# progress is not.
set -o pipefail
apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "${missing[@]}" 2>&1 |
	awk '/^(Need to get|After this operation|E:|W:)/ { print "deps: " $0 }'
