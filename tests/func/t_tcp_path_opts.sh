#!/usr/bin/env bash
# The path options of the one-shot commands over NVMe/TCP against
# nvmf-test-target: -T/--tos sets IP_TOS on every queue's socket,
# -w/--host-traddr binds the source address (the target sees that peer),
# -f/--host-iface binds to the interface, and bad values fail at once with
# a message and exit 1.
set -u
. "$TOP/tests/target/helpers.sh"

A=nqn.2026-01.io.nvmf-gateway:path-opts
tgt_start --subsys "$A:16M"
log="$TGT_DIR/target.log"

# peer_seen ADDR: the target logged a connection from ADDR.
peer_seen() { grep -q "info: $1:[0-9]*: connected to port" "$log"; }
peer_seen 127.0.0.2 && fail "target log already names 127.0.0.2"

# bench: long forms (its -T and -w are time and workload).
have_strace=false
# LeakSanitizer cannot run under ptrace: the traced runs of an ASan build
# go without it (every other run here keeps it).
traced_env=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
command -v strace > /dev/null && strace -f -o /dev/null true 2> /dev/null && have_strace=true
if $have_strace; then
	timeout -s KILL 120 "${traced_env[@]}" strace -f -e trace=setsockopt,bind -o "$TGT_DIR/strace" \
		"$GW" bench -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" --tos 106 \
		--host-traddr 127.0.0.2 -w randrw -T 1 -b 4k -d 8 --verify --size 1M \
		> "$TGT_DIR/bench.out" 2>&1 || { cat "$TGT_DIR/bench.out"; fail "bench --tos --host-traddr"; }
	cat "$TGT_DIR/bench.out"
	grep -q ' 0 mismatches' "$TGT_DIR/bench.out" || fail "bench: no verify line"
	# One admin and one I/O queue: two sockets with TOS 106, bound to 127.0.0.2.
	n=$(grep -c 'IP_TOS, \[106\]' "$TGT_DIR/strace")
	[ "$n" = 2 ] || { cat "$TGT_DIR/strace"; fail "IP_TOS 106 set on $n sockets, want 2"; }
	n=$(grep -c 'bind(.*inet_addr("127.0.0.2")' "$TGT_DIR/strace")
	[ "$n" = 2 ] || { cat "$TGT_DIR/strace"; fail "bound to 127.0.0.2 $n times, want 2"; }
	echo "bench: IP_TOS 106 and source 127.0.0.2 on both queues"
else
	echo "strace missing or not permitted: TOS checked by the run only"
	gw_bench "$A" --tos 106 --host-traddr 127.0.0.2 -w randrw -T 1 -b 4k -d 8 --verify --size 1M
	[ "$BENCH_RC" = 0 ] || fail "bench --tos --host-traddr: exit $BENCH_RC"
fi
peer_seen 127.0.0.2 || fail "target did not see a connection from 127.0.0.2"

# discover: the nvme-cli short forms.
trace=()
$have_strace && trace=("${traced_env[@]}" strace -e trace=setsockopt -o "$TGT_DIR/strace.disc")
out=$(timeout 60 "${trace[@]}" "$GW" discover -t tcp -a 127.0.0.1 -s "$TGT_PORT" -T 40 \
	-w 127.0.0.3 -f lo) || fail "discover -T -w -f: $out"
if $have_strace; then
	grep -q 'SO_BINDTODEVICE, "lo"' "$TGT_DIR/strace.disc" &&
		grep -q 'IP_TOS, \[40\]' "$TGT_DIR/strace.disc" ||
		{ cat "$TGT_DIR/strace.disc"; fail "discover: no SO_BINDTODEVICE lo or IP_TOS 40"; }
fi
printf '%s\n' "$out" | grep -qxF "subnqn:  $A" || fail "discover: $A not listed"
peer_seen 127.0.0.3 || fail "discover: target did not see 127.0.0.3"
echo "discover -T 40 -w 127.0.0.3 -f lo: listed $A from 127.0.0.3"

# nbd: short forms too; up once the target sees its I/O queue's peer.
sock="$TGT_DIR/nbd.sock"
"$GW" nbd -t tcp -a 127.0.0.1 -s "$TGT_PORT" -n "$A" -T 8 -w 127.0.0.4 -f lo "unix:$sock" \
	> "$TGT_DIR/nbd.out" 2>&1 &
nbd_pid=$!
for _ in $(seq 1 200); do
	[ "$(grep -c "info: 127.0.0.4:[0-9]*: connected to port" "$log")" -ge 2 ] && break
	kill -0 "$nbd_pid" 2> /dev/null || { cat "$TGT_DIR/nbd.out"; fail "nbd exited"; }
	sleep 0.05
done
kill "$nbd_pid"
wait "$nbd_pid"
st=$?
[ "$(grep -c "info: 127.0.0.4:[0-9]*: connected to port" "$log")" -ge 2 ] ||
	{ cat "$TGT_DIR/nbd.out"; fail "nbd: admin and I/O queue not both from 127.0.0.4"; }
[ "$st" = 0 ] || { cat "$TGT_DIR/nbd.out"; fail "nbd: exit $st on SIGTERM"; }
echo "nbd -T 8 -w 127.0.0.4 -f lo: both queues from 127.0.0.4, clean exit"

# expect_err WANT CMD...: CMD exits 1 and says WANT.
expect_err() {
	local want=$1 out st
	shift
	out=$(timeout 60 "$@" 2>&1)
	st=$?
	echo "$* -> exit $st: $(printf '%s' "$out" | tail -1)"
	[ "$st" = 1 ] || fail "$*: exit $st, want 1"
	printf '%s\n' "$out" | grep -qF -- "$want" || fail "$*: no '$want' in: $out"
}
tcp=(-t tcp -a 127.0.0.1 -s "$TGT_PORT")
expect_err "--host-iface 'nosuch0': no such network interface" \
	"$GW" discover "${tcp[@]}" -f nosuch0
expect_err "--host-iface 'nosuch0': no such network interface" \
	"$GW" bench "${tcp[@]}" -n "$A" -f nosuch0 -T 1
expect_err "--host-iface 'nosuch0': no such network interface" \
	"$GW" nbd "${tcp[@]}" -n "$A" --host-iface nosuch0 "unix:$sock"
expect_err "--host-iface 'nosuch0': no such network interface" \
	"$GW" mount "${tcp[@]}" -n "$A" -f nosuch0 "$TGT_DIR"
expect_err "--tos '256': expected 0 to 255" "$GW" discover "${tcp[@]}" -T 256
expect_err "--tos 'x': expected 0 to 255" "$GW" mount "${tcp[@]}" -n "$A" -T x "$TGT_DIR"
expect_err "--tos '-1': expected 0 to 255" "$GW" bench "${tcp[@]}" -n "$A" --tos -1 -T 1
# A source address this host does not have, and one of the wrong family.
expect_err "bind to host_traddr 192.0.2.1" "$GW" discover "${tcp[@]}" -w 192.0.2.1
expect_err "host_traddr '::1' is not a numeric address of the same family" \
	"$GW" discover "${tcp[@]}" -w ::1

kill -0 "$TGT_PID" || fail "target died"
tgt_finish
echo pass
