#!/bin/bash
# Case 2: `systemctl reload` adds an export (disk1 on /dev/nbd1), a second
# reload with the original configuration removes it; the main process and
# /dev/nbd0 are untouched.  `systemctl reload` returns once the change is
# applied (the device is there, or gone, when it returns), and fails for an
# invalid file, which changes nothing.
. /opt/sysd/lib.sh
is_active || fail "the unit is not active"
pid=$(prop MainPID)
cp "$CONF" /run/sysd-conf.orig
# The exports list is the file's last statement: close disk0, add disk1.
{ sed '$d' /run/sysd-conf.orig
  echo '}, { name = "disk1"; target = "t1"; nsid = 1; nbd = { device = "/dev/nbd1"; }; } );'
} > /run/sysd-conf.2
grep -q disk1 /run/sysd-conf.2 || fail "cannot build the second configuration"
journal_mark c2

# An invalid file: the reload fails, nothing changes.
{ cat /run/sysd-conf.2; echo 'exports = ( { name = "dup"; } );'; } > /run/sysd-conf.bad
install -m 0600 /run/sysd-conf.bad "$CONF"
if systemctl reload "$U"; then
	install -m 0600 /run/sysd-conf.orig "$CONF"
	fail "systemctl reload succeeded with an invalid configuration"
fi
echo "systemctl reload of an invalid file: failed, as it should"
is_active && [ "$(prop MainPID)" = "$pid" ] || fail "the invalid reload disturbed the service"
detached nbd1 || fail "the invalid file was partly applied (/dev/nbd1)"

install -m 0600 /run/sysd-conf.2 "$CONF"
systemctl reload "$U" || fail "reload (add)"
attached nbd1 || fail "systemctl reload returned before /dev/nbd1 was attached"
echo "/dev/nbd1 attached when systemctl reload returned"
install -m 0600 /run/sysd-conf.orig "$CONF"
systemctl reload "$U" || fail "reload (remove)"
# The kernel may take a moment to report the disconnect it was told of.
wait_until 30 "/dev/nbd1 detached by the reload" detached nbd1
journal_since c2 -u "$U" | grep -E 'nbd1|reload|Reload|invalid|error' | head -20
[ "$(prop MainPID)" = "$pid" ] || fail "the main process changed"
is_active || fail "the unit is no longer active"
attached nbd0 || fail "/dev/nbd0 lost by the reloads"
echo "reload added and removed disk1; MainPID $pid throughout"
