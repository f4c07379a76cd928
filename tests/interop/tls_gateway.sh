# Sourced by tls_kernel.sh in its gateway mode (tls_kernel.sh TLSROOT PORT
# gateway, GW=the gateway's binary), once nvmet's TLS-only port, the key in
# .nvme and tlshd are up.  The gateway's own NVMe/TCP TLS (OpenSSL, no tlshd
# on its side) against nvmet 6.12 through tlshd/GnuTLS:
#   - discover over TLS shows TREQ required;
#   - bench --verify over TLS, small and large blocks;
#   - data the gateway writes reads back the same through the kernel's TLS
#     host, and data the kernel writes reads back the same through the
#     daemon's NBD export of a tls = true target (nbdinfo, nbdsh);
#   - a wrong key and a plaintext connect: one clear error line each.
# The key is nvme-cli's (check-tls-key --insert: the compat derivation, the
# gateway's default tls_kdf).
disc=nqn.2014-08.org.nvmexpress.discovery

# gw_err WANT CMD...: CMD fails with exit 1 in bounded time and one error line
# that says WANT.
gw_err() {
	local want=$1 out r
	shift
	out=$(timeout 90 "$@" 2>&1)
	r=$?
	echo "$out"
	echo "rc=$r"
	[ $r = 1 ] || fail "exit $r, want 1: $*"
	[ "$(printf '%s\n' "$out" | grep -c 'error:')" = 1 ] || fail "want one error line: $*"
	printf '%s\n' "$out" | grep -q -- "$want" || fail "no '$want' in the error: $*"
}

tls_gateway_steps() {
	local K=$work/psk gwo r sock kdev conf
	[ -x "${GW:-}" ] || fail "GW is not the gateway's binary: '${GW:-}'"
	chmod 600 "$K"
	local TLS=(-t tcp -a 127.0.0.1 -s "$port" -q "$hostnqn" --tls --tls-key-file "$K")

	step "gateway: discover over TLS"
	# The discovery controller is reached with the identity naming the
	# discovery NQN: nvmet's tlshd looks that up in .nvme too.
	in_root nvme check-tls-key --keydata="$key" --subsysnqn="$disc" --hostnqn="$hostnqn" \
		--keyring=.nvme --insert > "$work/insert-disc.out" 2>&1 ||
		{ cat "$work/insert-disc.out"; fail "check-tls-key --insert for $disc"; }
	cat "$work/insert-disc.out"
	gwo=$(timeout 120 "$GW" discover "${TLS[@]}" 2>&1)
	r=$?
	echo "$gwo"
	dmesg_new
	[ $r = 0 ] || fail "discover over TLS: exit $r"
	printf '%s\n' "$gwo" | grep -qxF "subnqn:  $subnqn" || fail "discover: no $subnqn"
	printf '%s\n' "$gwo" | grep -q '^treq: *required' || fail "discover: TREQ is not 'required'"

	step "gateway: bench --verify over TLS"
	for spec in "4k 16" "128k 4"; do
		set -- $spec
		timeout 300 "$GW" bench "${TLS[@]}" -n "$subnqn" -w randrw -b "$1" -d "$2" -T 2 \
			--verify --size 8M --io-timeout 120000 > "$work/bench.out" 2>&1
		r=$?
		cat "$work/bench.out"
		[ $r = 0 ] || fail "bench --verify over TLS, $spec: exit $r"
		grep -q ' 0 mismatches' "$work/bench.out" || fail "bench $spec: no verify line"
	done

	step "the gateway writes over TLS, the kernel's TLS host reads"
	# A sequential write stops at -T, not at the region's end: 2 MiB in 8 s
	# (a TCG guest did 5 MiB/s over TLS; 1 s covered 5.4 of 8 MiB once).
	timeout 300 "$GW" bench "${TLS[@]}" -n "$subnqn" -w write -b 64k -d 8 -T 8 --verify \
		--seed 4242 --size 2M --io-timeout 120000 > "$work/bench.out" 2>&1 ||
		{ cat "$work/bench.out"; fail "the gateway's pattern write"; }
	cat "$work/bench.out"
	out=$(T=120 in_root nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$subnqn" -q "$hostnqn" --tls -i 1 2>&1) ||
		fail "the kernel's TLS connect: $out"
	kdev=$(nvme_host_dev "$subnqn") || fail "no block device"
	dd if="$kdev" iflag=direct bs=1M count=2 status=none > "$work/gw-written" || fail "read through $kdev"
	python3 "$here/bench_pattern.py" "$work/gw-written" 512 4242 ||
		fail "the kernel did not read the gateway's pattern"

	step "the kernel writes over TLS, the daemon's NBD export of a tls = true target reads"
	# 4 MiB at 8 MiB, away from the gateway's 2 MiB.
	dd if="$work/pattern" of="$kdev" oflag=direct bs=64k seek=128 status=none || fail "write through $kdev"
	nvme disconnect -n "$subnqn" > /dev/null || fail "disconnect"
	sock=$work/e1.sock conf=$work/gw.conf
	cat > "$conf" <<- CONF
		gateway = { reactors = 1; state_dir = "$work/state"; hostnqn = "$hostnqn"; };
		targets = ( { name = "t1"; subnqn = "$subnqn";
		    paths = ( { transport = "tcp"; traddr = "127.0.0.1"; trsvcid = "$port"; } );
		    tls = true; tls_key_file = "$K"; io_timeout = 120; } );
		exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$sock"; }; } );
	CONF
	cat "$conf"
	"$GW" check -c "$conf" || fail "check -c: the configuration is refused"
	"$GW" run -f -c "$conf" > "$work/gw.log" 2>&1 &
	gw_pid=$!
	for _ in $(seq 600); do
		[ -S "$sock" ] && nbdinfo --size "nbd+unix:///e1?socket=$sock" > "$work/size" 2> /dev/null && break
		kill -0 $gw_pid 2> /dev/null || { cat "$work/gw.log"; fail "the daemon exited"; }
		sleep 0.2
	done
	[ -s "$work/size" ] || { cat "$work/gw.log"; fail "no NBD export after 120 s"; }
	echo "nbdinfo --size: $(cat "$work/size")"
	[ "$(cat "$work/size")" = $((64 << 20)) ] || fail "the export's size is not 64 MiB"
	/usr/bin/python3 -c '
import sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
sys.stdout.buffer.write(h.pread(12 << 20, 0))
h.shutdown()' "nbd+unix:///e1?socket=$sock" > "$work/nbd-read" || fail "the NBD read (python3-libnbd)"
	kill $gw_pid; wait $gw_pid
	grep -v '^DBG' "$work/gw.log" | tail -n 20
	head -c 2M "$work/nbd-read" | cmp - "$work/gw-written" ||
		fail "the first 2 MiB read through NBD differ from what the kernel read"
	tail -c 4M "$work/nbd-read" | cmp - "$work/pattern" ||
		fail "the kernel's 4 MiB read through NBD differ"
	echo "the same through both hosts: 0-2 MiB sha256 $(sha256sum < "$work/gw-written" | cut -c1-16)...," \
		"8-12 MiB sha256 $(sha256sum < "$work/pattern" | cut -c1-16)..."
	dmesg_new

	step "gateway: a wrong key is refused"
	in_root nvme gen-tls-key --hmac=1 --subsysnqn="$subnqn" --hostnqn="$hostnqn" 2> /dev/null |
		grep -o 'NVMeTLSkey-1:0[12]:[^ ]*:' | head -n 1 > "$work/wrong" && chmod 600 "$work/wrong"
	[ -s "$work/wrong" ] || fail "no second key"
	# nvmet's tlshd (GnuTLS) sends no alert for a binder made with another
	# key: the target just closes, and the gateway's line asks about the key
	# (an alert would say "different TLS key": either is clear).
	gw_err "TLS handshake with 127.0.0.1:$port failed: .*different TLS key\|closed the connection during the TLS handshake: does the port do TLS, with this key?" \
		"$GW" bench -t tcp -a 127.0.0.1 -s "$port" -q "$hostnqn" --tls --tls-key-file "$work/wrong" \
		-n "$subnqn" -T 1

	step "gateway: plaintext to the TLS-only port"
	gw_err "does the port require TLS" \
		"$GW" bench -t tcp -a 127.0.0.1 -s "$port" -q "$hostnqn" -n "$subnqn" -T 1
	dmesg_new

	step "gateway: tls_kdf rfc8446 against the RFC 8446 TLS PSK put into .nvme by keyctl"
	# nvmet uses whatever the keyring holds under the identity: with the
	# specification's derivation there, --tls-kdf rfc8446 connects and the
	# default (compat) is refused.
	as_possessor "keyctl revoke 0x$kid" || fail "revoke 0x$kid"
	python3 "$here/tls_psk.py" "$key" "$hostnqn" "$subnqn" rfc |
		python3 -c "import sys; sys.stdout.buffer.write(bytes.fromhex(sys.stdin.read().strip()))" > "$work/rfc.bin"
	[ "$(stat -c %s "$work/rfc.bin")" = 32 ] || fail "no 32-byte TLS PSK from tls_psk.py"
	kid=$(as_possessor "keyctl padd psk '$ident' 0x$keyring < $work/rfc.bin") || fail "keyctl padd"
	timeout 300 "$GW" bench "${TLS[@]}" --tls-kdf rfc8446 -n "$subnqn" -w randrw -b 4k -d 16 -T 2 \
		--verify --size 4M --io-timeout 120000 > "$work/bench.out" 2>&1
	r=$?
	cat "$work/bench.out"
	[ $r = 0 ] || fail "bench --tls-kdf rfc8446: exit $r"
	grep -q ' 0 mismatches' "$work/bench.out" || fail "bench rfc8446: no verify line"
	gw_err "closed the connection during the TLS handshake: does the port do TLS, with this key?\|different TLS key" \
		"$GW" bench "${TLS[@]}" -n "$subnqn" -T 1
	echo "tls_gateway: PASS"
}
