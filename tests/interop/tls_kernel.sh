#!/usr/bin/env bash
# tls_kernel.sh TLSROOT [PORT [MODE]]: runs IN the interop guest (as root, from the
# checkout).  NVMe/TCP TLS 1.3 with a configured PSK between nvmet and the
# kernel's own host, over loopback in the guest (TLS.md has the recipe):
#   - a subsystem that admits one host, on an nvmet port that requires TLS
#     1.3 (addr_tsas tls1.3, addr_treq required) on 127.0.0.1:PORT;
#   - a configured PSK made by nvme-cli (interchange format) and its retained
#     PSK inserted into the kernel's ".nvme" keyring (identity NVMe0R01 or
#     NVMe1R01 ... with a digest, see below);
#   - tlshd (ktls-utils) serving both handshakes, nvmet's and the host's;
#   - a plaintext connect is refused; a TLS connect works, and data written
#     through it reads back the same after a reconnect.
# TLSROOT is the Debian 13 root from tlsroot.sh (read-only here): tlshd and
# nvme-cli 2.x run chrooted in it; everything else comes from the guest.
# Prints what TLS.md records (the key, the identities, the logs); leaves
# nothing behind: the port, subsystem, keys and tlshd are removed at exit.
# MODE "gateway" (GW=the gateway's binary): the same target, key and tlshd,
# then the gateway's own TLS against them (tls_gateway.sh) in place of the
# kernel host's steps; it adds a plaintext port (PORT+1) to the same
# subsystem for the cost of TLS, and a SHA-384 key.
set -u
root=${1:?usage: tls_kernel.sh TLSROOT [PORT [kernel|gateway|discovery]]}
port=${2:-4430}
mode=${3:-kernel}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nvmet.sh"
subnqn=nqn.2014-08.org.nvmf-gateway:interop-tls
hostnqn=nqn.2014-08.org.nvmf-gateway:host-tls
pid=31 # the nvmet port id: the suite's own are 1 and 2
pid_plain=32 # gateway mode: a plaintext port on PORT+1 for the cost of TLS
work=/tmp/tls-kernel
tlshd_pid='' keyring='' gw_pid=''

step() { echo "=== [${SECONDS}s] $*"; }
fail() {
	# tlshd's side of a failure (nvmet's handshakes): its last lines.
	[ -n "$tlshd_pid" ] && grep -v -e '^DBG' -e 'ASSERT: ' "$work/tlshd.log" | tail -n 40
	echo "tls_kernel: FAIL: $*"
	exit 1
}

# in_root CMD...: CMD chrooted in TLSROOT, with the guest's /proc, /sys, /dev,
# /tmp and /run bound in a mount namespace of its own (the root itself is
# read-only and nothing is left mounted in it).  T=SECONDS: a time limit.
in_root() {
	${T:+timeout "$T"} unshare -m --propagation private sh -c '
		r=$1; shift
		for d in proc sys dev tmp run; do mount --rbind "/$d" "$r/$d" || exit 125; done
		exec chroot "$r" "$@"' in_root "$root" "$@"
}

# tlshd_stop_all: every tlshd of this guest gone, the parent and any child
# still in a handshake.  A child keeps the parent's netlink socket, joined
# to the handshake group; a tlshd left from an earlier case took the next
# case's handshakes (the new tlshd's children found them taken: "Try
# again") and logged them where that case did not look.  Only the suite
# runs tlshd in this guest.
tlshd_stop_all() {
	local left
	left=$(pgrep -x tlshd | tr '\n' ' ')
	[ -n "$left" ] || return 0
	echo "tlshd processes still here, stopped: $left"
	pkill -x tlshd 2> /dev/null
	for _ in $(seq 50); do
		pgrep -x tlshd > /dev/null || return 0
		sleep 0.1
	done
	pkill -9 -x tlshd 2> /dev/null
	sleep 0.2
}

# as_possessor CMD: a keyctl shell line with .nvme linked into a session
# keyring of its own: its psk keys grant read, revoke and the rest to a
# possessor only (perm 3b010000), not to root as such.
as_possessor() {
	in_root keyctl session - sh -c "keyctl link 0x$keyring @s > /dev/null && $1" 2> /dev/null
}

cleanup() {
	set +e
	nvme disconnect -n "$subnqn" > /dev/null 2>&1
	[ -n "$gw_pid" ] && kill "$gw_pid" 2> /dev/null && wait "$gw_pid" 2> /dev/null
	mountpoint -q "$work/fuse" && umount -l "$work/fuse"
	rm -f "$NVMET/ports/$pid_plain/subsystems/$subnqn"
	rmdir "$NVMET/ports/$pid_plain" 2> /dev/null
	[ -n "$tlshd_pid" ] && kill "$tlshd_pid" 2> /dev/null && wait "$tlshd_pid" 2> /dev/null
	tlshd_stop_all
	rm -f "$NVMET/ports/$pid/subsystems/$subnqn"
	rmdir "$NVMET/ports/$pid" 2> /dev/null
	rm -f "$NVMET/subsystems/$subnqn/allowed_hosts/$hostnqn"
	if [ -d "$NVMET/subsystems/$subnqn" ]; then
		echo 0 > "$NVMET/subsystems/$subnqn/namespaces/1/enable"
		rmdir "$NVMET/subsystems/$subnqn/namespaces/1" "$NVMET/subsystems/$subnqn"
	fi
	rmdir "$NVMET/hosts/$hostnqn" 2> /dev/null
	losetup -j "$NVMET_WORK/$subnqn.img" -n -O NAME | xargs -r losetup -d
	rm -f "$NVMET_WORK/$subnqn.img"
	# The PSKs this run inserted: the keyring's descriptions name both NQNs
	# (the gateway mode adds one for the discovery NQN).
	for k in $(awk -v h="$hostnqn" -v s="$subnqn" -v d=nqn.2014-08.org.nvmexpress.discovery \
		'$8 == "psk" && (index($0, h " " s) || index($0, h " " d)) { print $1 }' /proc/keys); do
		as_possessor "keyctl revoke 0x$k" > /dev/null
	done
}
trap cleanup EXIT

[ -x "$root/usr/sbin/tlshd" ] && [ -x "$root/usr/sbin/nvme" ] || fail "no tlshd or nvme in $root (tlsroot.sh)"
rm -rf "$work" && mkdir -p "$work" && chmod 700 "$work" || fail "no $work"
# dmesg_new: the kernel's lines since the last call (the ring is not cleared:
# the suite's failure reports read it too).
dmesg_seen=0
dmesg_new() {
	local n
	n=$(dmesg | wc -l)
	dmesg | tail -n +$((dmesg_seen + 1))
	dmesg_seen=$n
}
dmesg_new > /dev/null
# 4 MiB of 4 KiB blocks naming their number: what the kernel's host writes.
python3 -c "
import sys, hashlib
out = sys.stdout.buffer
for i in range(4 * 256):
    out.write(hashlib.sha256(b'tls-%d' % i).digest() * 128)
" > "$work/pattern" || fail "no pattern"

step "versions"
uname -r
cat "$root/../versions" 2> /dev/null
in_root nvme version
grep -E '^CONFIG_(TLS|NET_HANDSHAKE|NVME_TCP_TLS|NVME_TARGET_TCP_TLS)=' "/boot/config-$(uname -r)" 2> /dev/null
lsmod 2> /dev/null | grep -E '^(tls|nvme_keyring|nvmet_tcp|nvme_tcp) ' ||
	grep -E '^(tls|nvme_keyring|nvmet_tcp|nvme_tcp) ' /proc/modules
grep -q '^tls ' /proc/modules || fail "the tls module is not loaded (kernel.sh MODULES)"
keyring=$(awk '$9 == ".nvme:" { print $1 }' /proc/keys)
[ -n "$keyring" ] || fail "no .nvme keyring in /proc/keys (nvme-keyring not loaded?)"
echo "keyring .nvme: 0x$keyring"

step "target: $subnqn on 127.0.0.1:$port, TLS 1.3 required"
nvmet_subsys "$subnqn" 64M 512 "$hostnqn" || fail "subsystem"
nvmet_port $pid tcp 127.0.0.1 "$port" || fail "port"
_nvmet_set "$NVMET/ports/$pid/addr_tsas" tls1.3 || fail "addr_tsas"
_nvmet_set "$NVMET/ports/$pid/addr_treq" required || fail "addr_treq"
nvmet_link "$subnqn" $pid || fail "link"
for a in addr_trtype addr_traddr addr_trsvcid addr_tsas addr_treq; do
	echo "ports/$pid/$a: $(cat "$NVMET/ports/$pid/$a")"
done

step "configured PSK (interchange format) and the retained PSK in .nvme"
# nvme-cli 2.x: gen-tls-key makes a 32-byte configured PSK with SHA-256 as
# the PSK hash (-m 1: the key string's "01"), derives the retained PSK from
# it (HKDF, bound to the host NQN) and inserts that under the TLS PSK
# identity.  check-tls-key does the same from an existing key string,
# which is what the gateway will be given.
key=$(in_root nvme gen-tls-key --hmac=1 --subsysnqn="$subnqn" --hostnqn="$hostnqn" 2> "$work/gen.err") ||
	{ cat "$work/gen.err"; fail "gen-tls-key"; }
key=$(printf '%s\n' "$key" | grep -o 'NVMeTLSkey-1:0[12]:[^ ]*:' | head -n 1)
[ -n "$key" ] || fail "gen-tls-key printed no interchange key"
echo "interchange key: $key"
printf '%s\n' "$key" > "$work/psk"
in_root nvme check-tls-key --keydata="$key" --subsysnqn="$subnqn" --hostnqn="$hostnqn" \
	--keyring=.nvme --insert > "$work/insert.out" 2>&1 ||
	{ cat "$work/insert.out"; fail "check-tls-key --insert"; }
cat "$work/insert.out"
echo "--- /proc/keys (psk and the .nvme keyring):"
grep -E ' psk |\.nvme' /proc/keys
# Revoked keys (flag R) are skipped: an earlier case in the same guest
# (tls-gateway's NVMe0R02 step) revokes its own, and the keyring lists it
# until the key collector has run.
ident=$(awk -v h="$hostnqn" -v s="$subnqn" '$8 == "psk" && $2 !~ /R/ && index($0, h " " s) { $1=$2=$3=$4=$5=$6=$7=$8=""; sub(/^ +/, ""); sub(/: [0-9]+$/, ""); print; exit }' /proc/keys)
[ -n "$ident" ] || fail "no psk key for $hostnqn $subnqn in /proc/keys"
echo "TLS PSK identity in the keyring: '$ident'"
# The key's payload, readable by a possessor only: a session keyring of its
# own with .nvme linked in makes this shell one.
kid=$(awk -v h="$hostnqn" -v s="$subnqn" '$8 == "psk" && $2 !~ /R/ && index($0, h " " s) { print $1; exit }' /proc/keys)
as_possessor "keyctl pipe 0x$kid" > "$work/retained" ||
	fail "cannot read key 0x$kid"
python3 "$here/tls_psk.py" "$key" "$hostnqn" "$subnqn" "$(od -An -v -tx1 "$work/retained" | tr -d ' \n')" "$ident" ||
	fail "the keyring's PSK is not the one derived from the interchange key"

step "tlshd"
cat "$root/etc/tlshd-nvmet.conf"
# tlshd serves handshakes once it has joined the handshake family's
# multicast group; a handshake asked for before that fails at once (nvmet:
# "failed to start TLS, err=-3").  Joined: a generic netlink socket (Eth 16
# in /proc/net/netlink) with groups, more of them than before it started.
groups() { awk '$2 == 16 && $4 != "00000000"' /proc/net/netlink | wc -l; }
tlshd_stop_all
g0=$(groups)
in_root /usr/sbin/tlshd -c /etc/tlshd-nvmet.conf -s > "$work/tlshd.log" 2>&1 &
tlshd_pid=$!
for _ in $(seq 600); do
	[ "$(groups)" -gt "$g0" ] && break
	kill -0 $tlshd_pid 2> /dev/null || { cat "$work/tlshd.log"; fail "tlshd exited"; }
	sleep 0.1
done
[ "$(groups)" -gt "$g0" ] || { cat /proc/net/netlink; fail "tlshd has not joined its multicast group after 60 s"; }
cat /proc/net/netlink

tlshd_end() {
	step "the handshakes as tlshd saw them"
	kill "$tlshd_pid" 2> /dev/null; wait "$tlshd_pid" 2> /dev/null; tlshd_pid=
	tlshd_stop_all
	# Less libnl's own debug lines and GnuTLS's internal assertion traces.
	grep -v -e '^DBG' -e 'ASSERT: ' "$work/tlshd.log"
	grep -q 'Handshake with .* was successful' "$work/tlshd.log" ||
		echo "(tlshd logged no 'Handshake ... was successful' line)"
}

# MODE "discovery": the daemon's discovery controller and an auto_export
# target over TLS (tls_discovery.sh).
if [ "$mode" = discovery ]; then
	. "$here/tls_discovery.sh"
	tls_discovery_steps
	tlshd_end
	grep -q 'Handshake with .* was successful' "$work/tlshd.log" || fail "tlshd saw no successful handshake"
	exit 0
fi

if [ "$mode" = gateway ]; then
	. "$here/tls_gateway.sh"
	tls_gateway_steps
	tlshd_end
	grep -q 'Handshake with .* was successful' "$work/tlshd.log" || fail "tlshd saw no successful handshake"
	exit 0
fi

step "a plaintext connect to the TLS port is refused"
t0=$(date +%s%N)
out=$(timeout 120 nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$subnqn" -q "$hostnqn" 2>&1)
r=$?
echo "nvme-cli (host's, plaintext): rc=$r: $out"
echo "took $((($(date +%s%N) - t0) / 1000000)) ms"
dmesg_new
[ $r != 0 ] || fail "the plaintext connect was accepted"
nvme disconnect -n "$subnqn" > /dev/null 2>&1

step "a TLS connect (nvme-cli --tls, the kernel's host)"
out=$(T=120 in_root nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$subnqn" -q "$hostnqn" --tls -i 1 2>&1)
r=$?
echo "nvme-cli (trixie, --tls): rc=$r: $out"
dmesg_new
[ $r = 0 ] || { grep -v '^DBG' "$work/tlshd.log"; fail "the TLS connect failed"; }
dev=$(nvme_host_dev "$subnqn") || fail "no block device"
for c in /sys/class/nvme-subsystem/*/nvme*; do
	[ "$(cat "$c/subsysnqn" 2> /dev/null)" = "$subnqn" ] || continue
	for a in transport address tls_key tls_configured_key tls_keyring; do
		[ -e "$c/$a" ] && echo "$(basename "$c")/$a: $(cat "$c/$a")"
	done
done

step "I/O over TLS: write a pattern"
dd if="$work/pattern" of="$dev" oflag=direct bs=64k status=none || fail "write through $dev"
nvme disconnect -n "$subnqn" || fail "disconnect"

step "reconnect with the RFC 8446 derivation's TLS PSK under the same identity, put in by keyctl; read back"
# The keyring's payload is the TLS PSK itself (tlshd hands it to GnuTLS as
# is): a key derived elsewhere (tls_psk.py here, the gateway's own code
# later) works once it is in .nvme under the identity.  This one differs
# from nvme-cli 2.13's (see tls_psk.py), so the connect and the data prove
# that nvmet and the host use exactly what the keyring holds.
as_possessor "keyctl revoke 0x$kid" || fail "revoke 0x$kid"
python3 "$here/tls_psk.py" "$key" "$hostnqn" "$subnqn" rfc |
	python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read().strip()))" > "$work/rfc.bin"
[ "$(stat -c %s "$work/rfc.bin")" = 32 ] || fail "no 32-byte TLS PSK from tls_psk.py"
kid=$(as_possessor "keyctl padd psk '$ident' 0x$keyring < $work/rfc.bin") || fail "keyctl padd"
echo "inserted key $kid, /proc/keys:"; grep ' psk ' /proc/keys
out=$(T=120 in_root nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$subnqn" -q "$hostnqn" --tls -i 1 2>&1) ||
	fail "the TLS connect with the keyctl key: $out"
dev=$(nvme_host_dev "$subnqn") || fail "no block device with the keyctl key"
dd if="$dev" iflag=direct bs=64k count=64 status=none > "$work/back" || fail "read through $dev"
cmp "$work/pattern" "$work/back" || fail "the data read back differs"
echo "reconnected with the keyctl-inserted key; the 4 MiB written before read back identical"
nvme disconnect -n "$subnqn" > /dev/null
dmesg_new

# TLS_RECORD=1: not asserted, and left out of the suite's runs for time:
# nvme-cli's version 1 identity (TP 8018, with the PSK digest) and what the
# keyring then holds, compared with tls_psk.py (TLS.md has the result).
[ "${TLS_RECORD:-}" = 1 ] && {
step "for the record: the same key inserted with identity version 1"
in_root nvme check-tls-key --keydata="$key" --subsysnqn="$subnqn" --hostnqn="$hostnqn" \
	--keyring=.nvme --identity=1 --insert 2>&1
grep ' psk ' /proc/keys
kid1=$(awk '$8 == "psk" && $9 == "NVMe1R01" { print $1; exit }' /proc/keys)
if [ -n "$kid1" ]; then
	as_possessor "keyctl pipe 0x$kid1" > "$work/v1" &&
		python3 "$here/tls_psk.py" "$key" "$hostnqn" "$subnqn" "$(od -An -v -tx1 "$work/v1" | tr -d ' \n')" \
			"$(awk -v k="$kid1" '$1 == k { print $9 }' /proc/keys)"
fi
# What nvmet's side (tlshd, GnuTLS) does with an OpenSSL client, the
# gateway's library: the host's openssl s_client with the RFC 8446 TLS PSK
# still in .nvme, its default X25519 key share, then P-384, then with
# psk_ke allowed too.  Each ends after the handshake (stdin is empty).
psk=$(od -An -v -tx1 "$work/rfc.bin" | tr -d ' \n')
for opts in "" "-groups P-384" "-allow_no_dhe_kex"; do
	step "openssl s_client $opts"
	timeout 60 openssl s_client -connect 127.0.0.1:$port -tls1_3 -psk_identity "$ident" -psk "$psk" \
		-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384 $opts -trace < /dev/null 2>&1 |
		grep -E -i 'ClientHello|ServerHello|HelloRetry|EncryptedExtensions|Finished|NewSessionTicket|extension_type|NamedGroup|mode|selected_identity|alert|Cipher is|Server Temp Key|error' |
		grep -v -i 'signature' | head -n 60
	echo "rc=${PIPESTATUS[0]}"
done
}

tlshd_end
echo "tls_kernel: PASS"
