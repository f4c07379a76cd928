#!/usr/bin/env bash
# make deb: the package builds (dpkg-buildpackage) and lintian finds no
# error or warning; its contents and control data are what the README
# promises (dpkg-deb -c / -I); installed into a scratch root (dpkg --root,
# maintainer scripts run chrootless with DPKG_ROOT) the files land with the
# right modes, the unit waits for the admin's configuration, a changed
# conffile survives a reinstall, remove keeps the configuration and purge
# removes it with the state.
# The package is left at BUILD/deb/nvmf-gateway_VERSION_ARCH.deb.
# T_DEB_FILE=PATH checks that package instead of building one.
# func: alone (dpkg and make in the source tree; see run.sh)
set -u
: "${TOP:?run by tests/func/run.sh}" "${BUILD:?}"
. "$TOP/tests/lib/func.sh"
for c in dpkg-buildpackage dh lintian; do
	command -v $c > /dev/null || skip "no $c (tests/deps.sh deb installs it)"
done
tmp_dir gw-deb
build=${BUILD#"$TOP"/}
ver=$(cat "$TOP/VERSION")
arch=$(dpkg --print-architecture)
deb="$BUILD/deb/nvmf-gateway_${ver}_$arch.deb"

# 1. Build and lintian (make deb fails on a lintian error or warning; the
# output is checked too, so an override cannot hide one silently).  A
# package newer than every file of the tree is reused (make test builds it
# once); lintian runs on it again all the same.
newer=
[ -f "$deb" ] && newer=$(cd "$TOP" && find . \( -path './build*' -o -path ./.git \) -prune -o \
	-type f -newer "$deb" -print -quit)
if [ -n "${T_DEB_FILE:-}" ]; then
	# A given package (another build, or a broken one to see this test
	# fail): checked as it is, lintian on the .deb alone.
	deb=$T_DEB_FILE
	lintian --fail-on error,warning "$deb" > "$tmp/build.log" 2>&1; st=$?
	sed -i '1i lintian (given package)' "$tmp/build.log"
elif [ -f "$deb" ] && [ -z "$newer" ] && [ -z "${T_DEB_REBUILD:-}" ]; then
	echo "reusing $deb (no file of the tree is newer)"
	lintian --fail-on error,warning "${deb%.deb}.changes" > "$tmp/build.log" 2>&1; st=$?
	sed -i '1i lintian (reused package)' "$tmp/build.log"
else
	make -C "$TOP" --no-print-directory BUILD="$build" DEPS=true deb > "$tmp/build.log" 2>&1; st=$?
fi
tail -5 "$tmp/build.log"
[ $st = 0 ] || { grep -E '^(E|W):|error' "$tmp/build.log" | head -20; fail "make deb or lintian: exit $st"; }
[ -f "$deb" ] || fail "no $deb"
sed -n '/^lintian /,$p' "$tmp/build.log" | grep -E '^[EW]: ' && fail "lintian errors or warnings"
echo "1. $deb ($(stat -c %s "$deb") bytes), lintian clean"

# 2. Contents and control data.
dpkg-deb -c "$deb" | awk '{ print $1, $NF }' | sed 's|\./|/|' | sort -k2 > "$tmp/contents"
cat "$tmp/contents"
want() {	# want MODE PATH
	grep -qxF -- "$1 $2" "$tmp/contents" || fail "$2 not in the package with mode $1"
}
want -rwxr-xr-x /usr/bin/nvmf-gateway
want -rw-r--r-- /lib/systemd/system/nvmf-gateway.service
want -rw-r--r-- /lib/systemd/system/nvmf-gateway.service.d/configured.conf
want -rw-r--r-- /usr/share/man/man8/nvmf-gateway.8.gz
want -rw-r--r-- /usr/share/man/man5/nvmf-gateway.conf.5.gz
want -rw-r--r-- /usr/share/doc/nvmf-gateway/nvmf-gateway-nbd-only.conf
want -rw-r--r-- /usr/share/doc/nvmf-gateway/nvmf-gateway-fuse-host.conf
want -rw-r--r-- /usr/share/doc/nvmf-gateway/vm-host-ordering.conf
want -rw-r--r-- /usr/share/doc/nvmf-gateway/copyright
want -rw------- /etc/nvmf-gateway/nvmf-gateway.conf.example
want -rw-r--r-- /etc/modules-load.d/nvmf-gateway.conf
grep -q ' /etc/nvmf-gateway/nvmf-gateway.conf$' "$tmp/contents" &&
	fail "the package ships the real configuration: the service would start on the example"
dpkg-deb -I "$deb" > "$tmp/info"
grep -qx " Package: nvmf-gateway" "$tmp/info" || fail "package name"
grep -qx " Version: $ver" "$tmp/info" || fail "version is not VERSION ($ver)"
grep -q '^ Depends: .*libfuse3' "$tmp/info" || fail "no shlibs dependencies"
dpkg-deb -f "$deb" Depends
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles > "$tmp/conffiles"
sort "$tmp/conffiles" | diff -u - <(printf '%s\n' /etc/modules-load.d/nvmf-gateway.conf \
	/etc/nvmf-gateway/nvmf-gateway.conf.example) || fail "conffiles"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./prerm | grep -q "deb-systemd-invoke stop 'nvmf-gateway.service'" ||
	fail "prerm does not stop the service on remove"
# An upgrade must not restart the service (each /dev/nbdN it serves would
# be disconnected under its users): the postinst starts it on a new
# install only.
pi=$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst)
grep -q "deb-systemd-invoke.*'nvmf-gateway.service'" <<< "$pi" ||
	fail "postinst does not start the service on a new install"
grep -q '_dh_action=restart\|invoke restart .nvmf-gateway' <<< "$pi" &&
	fail "postinst restarts the service on upgrade"
echo "2. contents, modes, conffiles, dependencies, prerm stop and no restart on upgrade: ok"

# 3. The unit as installed: the binary of the package, the condition.
dpkg-deb -x "$deb" "$tmp/x"
u="$tmp/x/lib/systemd/system/nvmf-gateway.service"
grep -qx 'ExecStart=/usr/bin/nvmf-gateway run -f -c /etc/nvmf-gateway/nvmf-gateway.conf' "$u" ||
	fail "ExecStart= is not /usr/bin/nvmf-gateway"
grep -q /usr/local "$u" && fail "a /usr/local path in the packaged unit"
grep -qx 'ConditionPathExists=/etc/nvmf-gateway/nvmf-gateway.conf' \
	"$tmp/x/lib/systemd/system/nvmf-gateway.service.d/configured.conf" || fail "no ConditionPathExists on the real file"
grep -qx nbd "$tmp/x/etc/modules-load.d/nvmf-gateway.conf" || fail "modules-load.d does not name nbd"
"$tmp/x/usr/bin/nvmf-gateway" --version | grep -qx "nvmf-gateway $ver" || fail "packaged binary --version"
"$tmp/x/usr/bin/nvmf-gateway" check -c "$tmp/x/etc/nvmf-gateway/nvmf-gateway.conf.example" > /dev/null ||
	fail "the shipped example does not check"
if command -v systemd-analyze > /dev/null && systemd-analyze --version > /dev/null 2>&1; then
	# The unit and its drop-in merged, with the package's binary in place.
	mkdir -p "$tmp/u"
	{ sed "s|/usr/bin/nvmf-gateway|$tmp/x/usr/bin/nvmf-gateway|" "$u"
	  cat "$tmp/x/lib/systemd/system/nvmf-gateway.service.d/configured.conf"; } > "$tmp/u/nvmf-gateway.service"
	out=$(cd "$tmp/u" && MANPATH="$tmp/x/usr/share/man" systemd-analyze verify "$tmp/u/nvmf-gateway.service" 2>&1) ||
		{ echo "$out"; fail "systemd-analyze verify of the packaged unit"; }
	[ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify warns on the packaged unit"; }
fi
echo "3. unit: /usr/bin, conditioned on the admin's file; example checks; nbd in modules-load.d"

# 4. dpkg into a scratch root: install, keep a changed conffile, remove,
# purge.  Dependencies are the host's business (--force-depends).
R="$tmp/root"
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates"
: > "$R/var/lib/dpkg/status"; : > "$R/var/lib/dpkg/available"
dp() { dpkg --root="$R" --force-script-chrootless --force-depends --force-confold "$@"; }
dp -i "$deb" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i into a scratch root"; }
[ -x "$R/usr/bin/nvmf-gateway" ] || fail "binary not installed"
[ "$(stat -c %a "$R/etc/nvmf-gateway/nvmf-gateway.conf.example")" = 600 ] || fail "example not 0600"
[ -e "$R/etc/nvmf-gateway/nvmf-gateway.conf" ] && fail "install wrote the real configuration"
dpkg --root="$R" -s nvmf-gateway | grep -qx 'Status: install ok installed' || fail "not installed"
echo '# edited by the admin' >> "$R/etc/nvmf-gateway/nvmf-gateway.conf.example"
dp -i "$deb" > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i again"; }
tail -1 "$R/etc/nvmf-gateway/nvmf-gateway.conf.example" | grep -qx '# edited by the admin' ||
	fail "a reinstall overwrote the changed conffile"
# What the admin and the service leave behind.
cp -p "$R/etc/nvmf-gateway/nvmf-gateway.conf.example" "$R/etc/nvmf-gateway/nvmf-gateway.conf"
[ "$(stat -c %a "$R/etc/nvmf-gateway/nvmf-gateway.conf")" = 600 ] || fail "a copy of the example is not 0600"
mkdir -p "$R/var/lib/nvmf-gateway" "$R/run/nvmf-gateway"
echo nqn.2014-08.org.nvmexpress:uuid:test > "$R/var/lib/nvmf-gateway/hostnqn"
dp -r nvmf-gateway > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -r"; }
[ -e "$R/usr/bin/nvmf-gateway" ] && fail "remove left the binary"
[ -e "$R/etc/nvmf-gateway/nvmf-gateway.conf" ] || fail "remove deleted the admin's configuration"
[ -e "$R/etc/nvmf-gateway/nvmf-gateway.conf.example" ] || fail "remove deleted the conffile"
[ -e "$R/var/lib/nvmf-gateway/hostnqn" ] || fail "remove deleted the state"
dp -P nvmf-gateway > "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -P"; }
left=$(cd "$R" && find etc/nvmf-gateway etc/modules-load.d/nvmf-gateway.conf var/lib/nvmf-gateway \
	run/nvmf-gateway 2> /dev/null)
[ -z "$left" ] || fail "purge left: $left"
dpkg --root="$R" -s nvmf-gateway > /dev/null 2>&1 && fail "still known to dpkg after purge"
echo "4. scratch root: installed, conffile kept over a reinstall, remove keeps config and state, purge removes them"
