#!/usr/bin/env bash
# make install / uninstall into a DESTDIR: exactly the expected files in the
# usual places under PREFIX, the unit's ExecStart= pointing at the
# installed binary, the man pages readable by man(1), and a configuration
# already present is never overwritten (nor removed by uninstall).
# func: alone (dpkg and make in the source tree; see run.sh)
set -u
: "${TOP:?run by tests/func/run.sh}" "${BUILD:?}"
. "$TOP/tests/lib/func.sh"
tmp_dir gw-install
build=${BUILD#"$TOP"/}	# the Makefile's own relative form: nothing rebuilds
mk() { make -s -C "$TOP" BUILD="$build" "$@"; }

# 1. PREFIX=/usr into an empty DESTDIR.
d="$tmp/root"
mk install DESTDIR="$d" PREFIX=/usr || fail "make install"
(cd "$d" && find . -type f | sort) > "$tmp/files"
cat > "$tmp/want" << 'EOF'
./etc/nvmf-gateway/nvmf-gateway.conf
./usr/bin/nvmf-gateway
./usr/lib/systemd/system/nvmf-gateway.service
./usr/share/doc/nvmf-gateway/nvmf-gateway-fuse-host.conf
./usr/share/doc/nvmf-gateway/nvmf-gateway-nbd-only.conf
./usr/share/doc/nvmf-gateway/vm-host-ordering.conf
./usr/share/man/man5/nvmf-gateway.conf.5
./usr/share/man/man8/nvmf-gateway.8
EOF
diff -u "$tmp/want" "$tmp/files" || fail "installed file list"
[ -x "$d/usr/bin/nvmf-gateway" ] || fail "binary not executable"
"$d/usr/bin/nvmf-gateway" --version | grep -q '^nvmf-gateway ' || fail "installed binary does not run"
[ "$(stat -c %a "$d/etc/nvmf-gateway/nvmf-gateway.conf")" = 600 ] || fail "conf mode"
[ "$(stat -c %a "$d/usr/lib/systemd/system/nvmf-gateway.service")" = 644 ] || fail "unit mode"
u="$d/usr/lib/systemd/system/nvmf-gateway.service"
grep -qx 'ExecStart=/usr/bin/nvmf-gateway run -f -c /etc/nvmf-gateway/nvmf-gateway.conf' "$u" ||
	fail "ExecStart= not the installed binary"
grep -qx 'ExecStartPre=/usr/bin/nvmf-gateway check -c /etc/nvmf-gateway/nvmf-gateway.conf' "$u" ||
	fail "ExecStartPre= not the installed binary"
grep -q '/usr/local/bin' "$u" && fail "a /usr/local/bin path left in the unit"
"$d/usr/bin/nvmf-gateway" check -c "$d/etc/nvmf-gateway/nvmf-gateway.conf" > /dev/null ||
	fail "the installed example configuration does not check"
if command -v man > /dev/null; then
	MANPATH="$d/usr/share/man" man -w nvmf-gateway.conf > /dev/null 2>&1 ||
		fail "man does not find nvmf-gateway.conf(5) under MANDIR"
	MANPATH="$d/usr/share/man" man -w 8 nvmf-gateway > /dev/null 2>&1 ||
		fail "man does not find nvmf-gateway(8) under MANDIR"
fi

# 2. Again over an edited configuration: the conf stays, the rest is
# replaced.
echo '# edited by the admin' >> "$d/etc/nvmf-gateway/nvmf-gateway.conf"
chmod 0640 "$d/etc/nvmf-gateway/nvmf-gateway.conf"
sum=$(md5sum < "$d/etc/nvmf-gateway/nvmf-gateway.conf")
echo stale > "$d/usr/share/man/man8/nvmf-gateway.8"
mk install DESTDIR="$d" PREFIX=/usr || fail "second make install"
[ "$(md5sum < "$d/etc/nvmf-gateway/nvmf-gateway.conf")" = "$sum" ] || fail "conf overwritten"
[ "$(stat -c %a "$d/etc/nvmf-gateway/nvmf-gateway.conf")" = 640 ] || fail "conf mode changed"
cmp -s "$TOP/man/nvmf-gateway.8" "$d/usr/share/man/man8/nvmf-gateway.8" || fail "man page not replaced"

# 3. uninstall: only the configuration is left.
mk uninstall DESTDIR="$d" PREFIX=/usr || fail "make uninstall"
left=$(cd "$d" && find . -type f | sort)
[ "$left" = "./etc/nvmf-gateway/nvmf-gateway.conf" ] || { echo "$left"; fail "uninstall left files"; }

# 4. The defaults (PREFIX=/usr/local) and MANDIR, SYSCONFDIR of one's own.
d="$tmp/root2"
mk install DESTDIR="$d" MANDIR=/opt/man SYSCONFDIR=/opt/etc || fail "make install (defaults)"
for f in usr/local/bin/nvmf-gateway usr/local/lib/systemd/system/nvmf-gateway.service \
	opt/man/man8/nvmf-gateway.8 opt/man/man5/nvmf-gateway.conf.5 opt/etc/nvmf-gateway/nvmf-gateway.conf; do
	[ -f "$d/$f" ] || fail "missing $f"
done
grep -qx 'ExecStart=/usr/local/bin/nvmf-gateway run -f -c /opt/etc/nvmf-gateway/nvmf-gateway.conf' \
	"$d/usr/local/lib/systemd/system/nvmf-gateway.service" || fail "ExecStart= with SYSCONFDIR"
echo "install: OK"
