#!/bin/bash
# Case 2: `systemctl reload` adds an export (disk1 on /dev/nbd1), a second
# reload with the original configuration removes it; the main process and
# /dev/nbd0 are untouched.
. /opt/sysd/lib.sh
is_active || fail "the unit is not active"
pid=$(prop MainPID)
cp "$CONF" /run/sysd-conf.orig
# The exports list is the file's last statement: close disk0, add disk1.
{ sed '$d' /run/sysd-conf.orig
  echo '}, { name = "disk1"; target = "t1"; nsid = 1; nbd = { device = "/dev/nbd1"; }; } );'
} > /run/sysd-conf.2
grep -q disk1 /run/sysd-conf.2 || fail "cannot build the second configuration"
install -m 0600 /run/sysd-conf.2 "$CONF"
journal_mark c2
systemctl reload "$U" || fail "reload (add)"
wait_until 120 "/dev/nbd1 attached by the reload" attached nbd1
install -m 0600 /run/sysd-conf.orig "$CONF"
systemctl reload "$U" || fail "reload (remove)"
wait_until 120 "/dev/nbd1 detached by the reload" detached nbd1
journal_since c2 -u "$U" | grep -E 'nbd1|reload|Reload' | head -20
[ "$(prop MainPID)" = "$pid" ] || fail "the main process changed"
is_active || fail "the unit is no longer active"
attached nbd0 || fail "/dev/nbd0 lost by the reloads"
echo "reload added and removed disk1; MainPID $pid throughout"
