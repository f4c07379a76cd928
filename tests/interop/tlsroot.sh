#!/usr/bin/env bash
# tlsroot.sh CACHE_DIR: makes sure CACHE_DIR/root holds a small Debian 13
# (trixie) root with tlshd (ktls-utils), nvme-cli 2.x and keyutils, for the
# interop guest's NVMe/TCP TLS cases (TLS.md).  Debian 12 has no tlshd and
# its nvme-cli (2.3) has no TLS options; the guest chroots into this root
# for those programs only.  The root is read through the guest's read-only
# 9p share of the host root: nothing in it is written at run time.
# Idempotent: a root whose CACHE_DIR/root.sum matches this script's package
# list and tlshd configuration is left alone; otherwise it is built anew
# (debootstrap --variant=minbase, a few minutes, ~100 MB).
# CACHE_DIR/versions lists the packages' versions (for the logs).
set -u
cache=${1:?usage: tlsroot.sh CACHE_DIR}

SUITE=trixie
PKGS=(ktls-utils nvme-cli keyutils)
# tlshd's configuration: the kernel's NVMe keyring (nvme-keyring creates
# ".nvme"; nvmet and nvme-tcp look their PSKs up there) and the most
# verbose logs, which are what TLS.md records of the handshake.
TLSHD_CONF='[debug]
loglevel=7
tls=7
nl=7

[authenticate]
keyrings=.nvme

[authenticate.client]

[authenticate.server]
'

die() { echo "tlsroot.sh: $*" >&2; exit 1; }
mkdir -p "$cache" && cache=$(cd "$cache" && pwd) || die "cannot create $cache"
# Two test runs may share the cache: build it under a lock.
exec 9> "$cache/.lock" && flock 9 || die "cannot lock $cache/.lock"

sum=$( { echo "$SUITE"; printf '%s\n' "${PKGS[@]}"; printf '%s' "$TLSHD_CONF"; } |
	sha256sum | cut -d' ' -f1)
if [ -e "$cache/root/.complete" ] && [ "$(cat "$cache/root.sum" 2> /dev/null)" = "$sum" ]; then
	exit 0
fi

command -v debootstrap > /dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap > /dev/null ||
	die "no debootstrap"
# The same mirror as the system's bookworm sources (trixie is on it too).
mirror=$(sed -n 's/^URIs: *//p;s/^deb  *\(http[^ ]*\)  *bookworm .*/\1/p' \
	/etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null |
	grep -v -- '-security' | head -n 1)
mirror=${mirror%/}
tmp=$cache/root.tmp
rm -rf "$cache/root" "$cache/root.sum" "$tmp"
echo "tlsroot.sh: debootstrap $SUITE into $cache/root (log: $cache/debootstrap.log)" >&2
t0=$SECONDS
# Two stages, so that dpkg in the second skips its fsync of every file
# (force-unsafe-io): the root is a cache, rebuilt when in doubt.
{
	debootstrap --foreign --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" \
		"$SUITE" "$tmp" "${mirror:-http://deb.debian.org/debian}" &&
		mkdir -p "$tmp/etc/dpkg/dpkg.cfg.d" &&
		echo force-unsafe-io > "$tmp/etc/dpkg/dpkg.cfg.d/tlsroot-unsafe-io" &&
		chroot "$tmp" /debootstrap/debootstrap --second-stage &&
		rm -f "$tmp/etc/dpkg/dpkg.cfg.d/tlsroot-unsafe-io"
} > "$cache/debootstrap.log" 2>&1 || die "debootstrap failed: see $cache/debootstrap.log"
# Nothing of apt's cache, the documentation or the translations is used.
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/* \
	"$tmp"/usr/share/doc "$tmp"/usr/share/man "$tmp"/usr/share/info "$tmp"/usr/share/locale
[ -x "$tmp/usr/sbin/tlshd" ] && [ -x "$tmp/usr/sbin/nvme" ] && [ -x "$tmp/usr/bin/keyctl" ] ||
	die "the root lacks tlshd, nvme or keyctl"
printf '%s' "$TLSHD_CONF" > "$tmp/etc/tlshd-nvmet.conf" || die "cannot write tlshd's configuration"
chroot "$tmp" dpkg-query -W -f '${Package} ${Version}\n' "${PKGS[@]}" libgnutls30t64 > "$cache/versions" 2> /dev/null ||
	chroot "$tmp" dpkg-query -W -f '${Package} ${Version}\n' "${PKGS[@]}" > "$cache/versions"
touch "$tmp/.complete" && mv "$tmp" "$cache/root" && echo "$sum" > "$cache/root.sum" ||
	die "cannot finish $cache/root"
echo "tlsroot.sh: $SUITE root ready in $((SECONDS - t0)) s: $(tr '\n' ' ' < "$cache/versions")" >&2
