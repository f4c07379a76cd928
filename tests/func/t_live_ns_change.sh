#!/usr/bin/env bash
# Namespaces that change while exported (issue 19), on the in-tree target's
# ns-* knobs, which send the Namespace Attribute Changed event and fill the
# Changed Namespace List log as an array does:
# 1. grown while an NBD client and an open FUSE file use it: both keep
#    their connection/descriptor and data, a new NBD connection and the
#    held descriptor see the new size, the new blocks are usable; grown
#    again without an event, seen at the reconnect's re-identify;
# 2. the other namespace removed: its I/O fails with EIO, its export goes
#    away (socket gone), logged once; the grown export is unaffected;
# 3. shrunk, or reformatted to another block size: the export fails with
#    a message, I/O gets EIO;
# 4. another namespace behind the same NSID after a reconnect (NGUID/EUI-64
#    changed without an event): never served under the old export.
set -u
. "$TOP/tests/func/live/lib.sh"
need_root "mount (FUSE)"
[ -c /dev/fuse ] || skip "no /dev/fuse on this host"
need fusermount3
NSC="$TOP/tests/func/live/ns_client.py"

A=nqn.2026-01.io.nvmf-gateway:nschange-a
B=nqn.2026-01.io.nvmf-gateway:nschange-b
M=$((1024 * 1024))
tgt_start a "" -s 0 --subsys "$A:32M:512:3" --subsys "$B:32M"
port=$(head -1 "$tmp/a.ready")
mkdir -p "$tmp/fuse"
cleanup_fn unmount_lazy "$tmp/fuse"
cat > "$tmp/gw.conf" << CONF
gateway = { reactors = 2; state_dir = "$tmp/state"; };
targets = (
  { name = "t1"; subnqn = "$A";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; },
  { name = "t2"; subnqn = "$B";
    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
    keep_alive_tmo = 5; reconnect_delay = 1; ctrl_loss_tmo = 60; fast_io_fail_tmo = 3; } );
exports = (
  { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$tmp/e1.sock"; }; fuse = true; },
  { name = "e2"; target = "t1"; nsid = 2; nbd = { listen = "unix:$tmp/e2.sock"; }; },
  { name = "e3"; target = "t2"; nsid = 1; nbd = { listen = "unix:$tmp/e3.sock"; }; },
  { name = "e4"; target = "t1"; nsid = 3; nbd = { listen = "unix:$tmp/e4.sock"; }; } );
fuse = { mountpoint = "$tmp/fuse"; };
CONF
SOCKS="$tmp/e1.sock $tmp/e2.sock $tmp/e3.sock $tmp/e4.sock" gw_start run "$tmp/gw.conf"
wait_for 10 test -e "$tmp/fuse/e1" || fail "no FUSE file e1"
grep -q 'cannot enable asynchronous events' "$tmp/gw.log" && fail "AEN config refused"

size_is() { [ "$("$NBDPY" "$NSC" size "$1")" = "$2" ]; }
rw_is() {
	local r
	r=$("$NBDPY" "$NSC" rw "$1" "$2")
	echo "rw $1 at $2: $r"
	[ "$r" = "$3" ] || fail "rw $1 at $2: $r (want $3)"
}
size_is "$tmp/e1.sock" $((32 * M)) || fail "e1 does not start at 32 MiB"
[ "$(stat -c %s "$tmp/fuse/e1")" = $((32 * M)) ] || fail "FUSE e1 does not start at 32 MiB"

# 1. Grow nsid 1 to 64 MiB with a connection and a descriptor held.
"$NBDPY" "$NSC" hold "$tmp/e1.sock" "$tmp/stop" > "$tmp/hold.out" 2>&1 &
hpid=$!
"$NBDPY" "$NSC" fhold "$tmp/fuse/e1" "$tmp/stop" > "$tmp/fhold.out" 2>&1 &
fpid=$!
wait_for 20 grep -q ready "$tmp/hold.out" || fail "NBD holder: $(cat "$tmp/hold.out")"
wait_for 20 grep -q ready "$tmp/fhold.out" || fail "FUSE holder: $(cat "$tmp/fhold.out")"
ctl a ns-resize "$A" 1 64M > /dev/null
gw_wait 'export e1: now 67108864 bytes' 1 30 > /dev/null ||
	fail "the gateway did not follow the growth within 30 s"
size_is "$tmp/e1.sock" $((64 * M)) || fail "a new NBD connection to e1 is not given 64 MiB"
[ "$(stat -c %s "$tmp/fuse/e1")" = $((64 * M)) ] ||
	fail "FUSE e1 is $(stat -c %s "$tmp/fuse/e1") bytes after the growth"
rw_is "$tmp/e1.sock" $((48 * M)) ok
r=$(errno_py="import os; fd=os.open('$tmp/fuse/e1', os.O_RDWR); b=os.urandom(4096); os.pwrite(fd, b, $((60 * M))); print('ok' if os.pread(fd, 4096, $((60 * M))) == b else 'mismatch')" \
	python3 -c 'import os; exec(os.environ["errno_py"])' 2>&1)
[ "$r" = ok ] || fail "FUSE I/O in the new blocks: $r"
touch "$tmp/stop"
wait "$hpid" || fail "NBD holder: $(cat "$tmp/hold.out")"
wait "$fpid" || fail "FUSE holder: $(cat "$tmp/fhold.out")"
echo "NBD holder: $(tail -1 "$tmp/hold.out"); FUSE holder: $(tail -1 "$tmp/fhold.out")"
read -r _ _ fsz < <(tail -1 "$tmp/fhold.out")
[ "$fsz" = $((64 * M)) ] || fail "the held FUSE descriptor sees $fsz bytes, not 64 MiB"
rm -f "$tmp/stop"
# ... and grown with no event, seen by the re-identify of a reconnect
# (before issue 19 any size change there failed the export).
ctl a ns-resize "$A" 1 80M noaen > /dev/null
ctl a drop > /dev/null
gw_wait 'export e1: now 83886080 bytes' 1 60 > /dev/null ||
	fail "the growth was not seen at the reconnect"
size_is "$tmp/e1.sock" $((80 * M)) || fail "e1 is not 80 MiB after the reconnect"
rw_is "$tmp/e1.sock" $((79 * M)) ok

# 2. Remove nsid 2 while a client holds a connection to e2.
"$NBDPY" "$NSC" hold "$tmp/e2.sock" "$tmp/stop" > "$tmp/hold2.out" 2>&1 &
h2=$!
wait_for 20 grep -q ready "$tmp/hold2.out" || fail "e2 holder: $(cat "$tmp/hold2.out")"
"$NBDPY" "$NSC" hold "$tmp/e1.sock" "$tmp/stop" > "$tmp/hold1.out" 2>&1 &
h1=$!
wait_for 20 grep -q ready "$tmp/hold1.out" || fail "e1 holder: $(cat "$tmp/hold1.out")"
ctl a ns-remove "$A" 2 > /dev/null
gw_wait 'e2: nsid 2 .* was removed; its I/O fails with EIO' 1 30 > /dev/null ||
	fail "the gateway did not see nsid 2 go"
gw_wait 'export e2: removed' 1 30 > /dev/null || fail "export e2 was not taken down"
wait "$h2" && fail "e2's held connection went on without an error: $(cat "$tmp/hold2.out")"
echo "e2 holder: $(tail -1 "$tmp/hold2.out")"
wait_for 5 test ! -S "$tmp/e2.sock" || fail "e2's socket is still there"
[ "$(grep -c 'was removed; its I/O fails with EIO' "$tmp/gw.log")" = 1 ] ||
	fail "the removal is not logged exactly once"
touch "$tmp/stop"
wait "$h1" || fail "e1 suffered from e2's removal: $(cat "$tmp/hold1.out")"
rm -f "$tmp/stop"
rw_is "$tmp/e1.sock" 0 ok

# 3. Shrink nsid 1 below what e1 exports.
ctl a ns-resize "$A" 1 16M > /dev/null
gw_wait 'e1: .*nsid 1: shrunk .*failing the export rather than risking its data' 1 30 \
	> /dev/null || fail "no failure message for the shrunk namespace"
rw_is "$tmp/e1.sock" 0 EIO

# 3b. nsid 3 reformatted from 512- to 4096-byte blocks (same bytes).
rw_is "$tmp/e4.sock" 4096 ok
ctl a ns-format "$A" 3 4096 > /dev/null
gw_wait 'e4: .*nsid 3: LBA format changed .*failing the export' 1 30 > /dev/null ||
	fail "no failure message for the reformatted namespace"
rw_is "$tmp/e4.sock" 4096 EIO

# 4. Another namespace behind nsid 1 of B, seen at a reconnect.
rw_is "$tmp/e3.sock" 0 ok
ctl a ns-identity "$B" 1 noaen > /dev/null
ctl a drop > /dev/null
gw_wait 'e3: .*nsid 1: another namespace' 1 60 > /dev/null ||
	fail "the replaced namespace was not seen at the reconnect"
rw_is "$tmp/e3.sock" 0 EIO

! grep -q 'ERROR: AddressSanitizer\|runtime error' "$tmp/gw.log" || fail "sanitizer report"
gw_alive
gw_stop_within 30
echo pass
