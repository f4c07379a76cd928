#!/usr/bin/env bash
# systemd/nvmf-gateway.service: `systemd-analyze verify` accepts it (with
# ExecStart= pointing at the built binary and its man pages on MANPATH, so
# Documentation= is checked too), together with the VM ordering drop-in
# on a stand-in pve-guests.service; `systemd-analyze security --offline=yes`
# rates it at an exposure of 4.0 or lower, the NBD-only drop-in lower
# still, the FUSE-on-host drop-in (no mount namespace) at most 5.0.
set -u
: "${GW:?run by tests/func/run.sh}" "${TOP:?}"
. "$TOP/tests/lib/func.sh"
command -v systemd-analyze > /dev/null || skip "no systemd-analyze (package systemd)"
systemd-analyze --version > /dev/null 2>&1 || skip "systemd-analyze does not run here"
[ -x "$GW" ] || fail "no $GW"
tmp_dir gw-unit

sed "s|/usr/local/bin/nvmf-gateway|$GW|g" "$TOP/systemd/nvmf-gateway.service" > "$tmp/nvmf-gateway.service"
grep -q "ExecStart=$GW run" "$tmp/nvmf-gateway.service" || fail "ExecStart= not substituted"
# The drop-in appended as a second [Service] section means what it means
# in nvmf-gateway.service.d/ (empty assignments reset the lists alike).
{ cat "$tmp/nvmf-gateway.service"; cat "$TOP/systemd/nvmf-gateway-nbd-only.conf"; } > "$tmp/nvmf-gateway-nbd.service"
{ cat "$tmp/nvmf-gateway.service"; cat "$TOP/systemd/nvmf-gateway-fuse-host.conf"; } > "$tmp/nvmf-gateway-fuse.service"
printf '[Unit]\nDescription=stand-in\n[Service]\nType=oneshot\nExecStart=/bin/true\n' > "$tmp/pve-guests.service"
mkdir "$tmp/pve-guests.service.d"
cp "$TOP/systemd/vm-host-ordering.conf" "$tmp/pve-guests.service.d/nvmf-gateway.conf"

# man(1) wants section directories.
mkdir -p "$tmp/man/man8" "$tmp/man/man5"
ln -s "$TOP/man/nvmf-gateway.8" "$tmp/man/man8/"
ln -s "$TOP/man/nvmf-gateway.conf.5" "$tmp/man/man5/"
export MANPATH="$tmp/man"
for u in nvmf-gateway.service nvmf-gateway-nbd.service nvmf-gateway-fuse.service pve-guests.service; do
	out=$(cd "$tmp" && systemd-analyze verify "$tmp/$u" 2>&1); st=$?
	echo "verify $u: exit $st"
	[ -n "$out" ] && echo "$out"
	[ $st = 0 ] || fail "systemd-analyze verify $u: exit $st"
	[ -z "$out" ] || fail "systemd-analyze verify $u printed warnings"
done

exposure() {	# exposure UNITFILE -> the number of "Overall exposure level"
	systemd-analyze security --offline=yes "$1" > "$tmp/sec.txt" 2>&1
	sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p' "$tmp/sec.txt"
}
base=$(exposure "$tmp/nvmf-gateway.service")
grep '✗' "$tmp/sec.txt"
[ -n "$base" ] || { cat "$tmp/sec.txt"; fail "no exposure level in the output"; }
nbd=$(exposure "$tmp/nvmf-gateway-nbd.service")
[ -n "$nbd" ] || { cat "$tmp/sec.txt"; fail "no exposure level for the NBD-only unit"; }
fuse=$(exposure "$tmp/nvmf-gateway-fuse.service")
[ -n "$fuse" ] || { cat "$tmp/sec.txt"; fail "no exposure level for the FUSE-on-host unit"; }
echo "exposure: unit $base, NBD-only $nbd, FUSE-on-host $fuse"
awk -v e="$base" 'BEGIN { exit !(e + 0 <= 4.0) }' || fail "exposure $base > 4.0"
awk -v a="$nbd" -v b="$base" 'BEGIN { exit !(a + 0 < b + 0) }' || fail "NBD-only ($nbd) is not tighter than $base"
# The FUSE-on-host drop-in gives up the file-system confinement (so it
# must rate looser: its resets took effect) and nothing else.
awk -v a="$fuse" -v b="$base" 'BEGIN { exit !(a + 0 > b + 0 && a + 0 <= 5.0) }' ||
	fail "FUSE-on-host exposure $fuse: not above $base and at most 5.0"
echo "systemd unit: OK"
