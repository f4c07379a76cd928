# Sourced by tls_kernel.sh in its gateway mode (tls_kernel.sh TLSROOT PORT
# gateway, GW=the gateway's binary), once nvmet's TLS-only port, the key in
# .nvme and tlshd are up.  The gateway's own NVMe/TCP TLS (OpenSSL, no tlshd
# on its side) against nvmet 6.12 through tlshd/GnuTLS:
#   - discover over TLS shows TREQ required;
#   - bench --verify over TLS, small and large blocks;
#   - data the gateway writes reads back the same through the kernel's TLS
#     host, and data the kernel writes reads back the same through the
#     daemon's NBD export of a tls = true target (nbdinfo, nbdsh), and data
#     written through its FUSE file reads back through FUSE and NBD;
#   - ext4 on /dev/nbd0 attached over TLS (nbd_fs.sh);
#   - with TLS_RECORD=1, the cost of TLS: bench and the kernel's host's fio
#     over TLS and over a plaintext port to the same namespace, as a table
#     (not asserted: a benchmark, left out of the suite's runs for time);
#   - a wrong key and a plaintext connect: one clear error line each;
#   - a SHA-384 key (NVMeTLSkey-1:02:): TLS_AES_256_GCM_SHA384 if tlshd's
#     GnuTLS can check its binder, else that exact refusal (TLS.md).
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
	local K=$work/psk gwo r sock kdev conf fuse=$work/fuse
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
		exports = ( { name = "e1"; target = "t1"; nsid = 1; nbd = { listen = "unix:$sock"; };
		    fuse = true; } );
		fuse = { mountpoint = "$fuse"; };
	CONF
	cat "$conf"
	"$GW" check -c "$conf" || fail "check -c: the configuration is refused"
	mkdir -p "$fuse"
	"$GW" run -f -c "$conf" > "$work/gw.log" 2>&1 &
	gw_pid=$!
	for _ in $(seq 600); do
		[ -S "$sock" ] && nbdinfo --size "nbd+unix:///e1?socket=$sock" > "$work/size" 2> /dev/null && break
		kill -0 $gw_pid 2> /dev/null || { cat "$work/gw.log"; fail "the daemon exited"; }
		sleep 0.2
	done
	[ -s "$work/size" ] || { cat "$work/gw.log"; fail "no NBD export after 120 s"; }
	for _ in $(seq 300); do [ -f "$fuse/e1" ] && break; sleep 0.2; done
	[ "$(stat -c %s "$fuse/e1" 2> /dev/null)" = $((64 << 20)) ] ||
		{ cat "$work/gw.log"; fail "no 64 MiB FUSE file $fuse/e1"; }
	echo "nbdinfo --size: $(cat "$work/size")"
	[ "$(cat "$work/size")" = $((64 << 20)) ] || fail "the export's size is not 64 MiB"
	nbd_read 0 $((12 << 20)) > "$work/nbd-read" || fail "the NBD read (python3-libnbd)"
	# The FUSE file: 3000000 random bytes at 16 MiB + 4097 (not block
	# aligned: the export's read-modify-write), read back through FUSE
	# after the page cache is dropped and through NBD.
	head -c 3000000 /dev/urandom > "$work/rand"
	dd if="$work/rand" of="$fuse/e1" bs=64k oflag=seek_bytes seek=$(((16 << 20) + 4097)) \
		conv=notrunc,fsync status=none || fail "the write through the FUSE file"
	sync && echo 3 > /proc/sys/vm/drop_caches
	cmp -i 0:$(((16 << 20) + 4097)) -n 3000000 "$work/rand" "$fuse/e1" ||
		fail "the FUSE file does not read back what was written through it"
	# (libnbd asks for requests aligned to the export's 512-byte blocks)
	nbd_read $((16 << 20)) $((4 << 20)) | cmp -i 4097:0 -n 3000000 - "$work/rand" ||
		fail "NBD does not read what was written through the FUSE file"
	echo "FUSE: 3000000 bytes at 16 MiB + 4097, sha256 $(sha256sum < "$work/rand" | cut -c1-16)...," \
		"read back identical through FUSE and NBD"
	kill $gw_pid; wait $gw_pid
	gw_pid=
	mountpoint -q "$fuse" && fail "the FUSE file is still mounted after SIGTERM"
	grep -v '^DBG' "$work/gw.log" | tail -n 20
	head -c 2M "$work/nbd-read" | cmp - "$work/gw-written" ||
		fail "the first 2 MiB read through NBD differ from what the kernel read"
	tail -c 4M "$work/nbd-read" | cmp - "$work/pattern" ||
		fail "the kernel's 4 MiB read through NBD differ"
	echo "the same through both hosts: 0-2 MiB sha256 $(sha256sum < "$work/gw-written" | cut -c1-16)...," \
		"8-12 MiB sha256 $(sha256sum < "$work/pattern" | cut -c1-16)..."
	dmesg_new

	tls_ext4
	# About 20 s of bench in the TCG guest that asserts only that I/O was
	# done, which bench --verify above already proves: for the record only.
	if [ "${TLS_RECORD:-}" = 1 ]; then tls_cost; fi

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
	tls_sha384
	echo "tls_gateway: PASS"
}

# nbd_read OFFSET LENGTH: bytes of the daemon's NBD export e1 ($sock) on stdout.
nbd_read() {
	/usr/bin/python3 -c '
import sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
sys.stdout.buffer.write(h.pread(int(sys.argv[3]), int(sys.argv[2])))
h.shutdown()' "nbd+unix:///e1?socket=$sock" "$1" "$2"
}

# ext4 on /dev/nbd0 through the gateway's NBD command over TLS: the
# non-TLS case's script (mkfs, files, umount, fsck, remount, checksums,
# detach), pointed at the TLS port.
tls_ext4() {
	step "ext4 on /dev/nbd0 over TLS (nbd_fs.sh)"
	NBD_ADDR=127.0.0.1 NBD_PORT=$port NBD_LOGS=$work/nbd-logs \
		NBD_START_ARGS="-q $hostnqn --tls --tls-key-file $K --io-timeout 120000" \
		timeout 400 bash "$here/nbd_fs.sh" "$GW" "$subnqn" $((64 << 20)) ||
		fail "ext4 on /dev/nbd0 over TLS"
	grep -q 'TLS up with' "$work/nbd-logs/fs.log" || fail "the nbd command's log shows no TLS"
}

# The cost of TLS, side by side: the same subsystem on a plaintext port
# (PORT+1), the gateway's bench and, with TLS_RECORD=1, the kernel's host
# (fio, if there is one) at the same points and durations.  Informative: a slow machine
# fails nothing here, only a run that does no I/O at all.
tls_cost() {
	local secs=${TLS_BENCH_SECS:-2} pport=$((port + 1)) point w b d side a out kdev i m
	local rows=() fio
	step "the cost of TLS: plaintext port 127.0.0.1:$pport to the same subsystem"
	nvmet_port $pid_plain tcp 127.0.0.1 "$pport" || fail "plaintext port"
	nvmet_link "$subnqn" $pid_plain || fail "link to the plaintext port"
	local -A tls=([tls]="--tls --tls-key-file $K" [plain]="")
	local -A portof=([tls]=$port [plain]=$pport)
	for point in "randread 4k 32" "read 128k 8" "write 128k 8"; do
		set -- $point
		w=$1 b=$2 d=$3
		for side in tls plain; do
			# shellcheck disable=SC2086 # the TLS options, split
			out=$(timeout 120 "$GW" bench -t tcp -a 127.0.0.1 -s "${portof[$side]}" -q "$hostnqn" \
				${tls[$side]} -n "$subnqn" -w "$w" -b "$b" -d "$d" -T "$secs" --io-timeout 60000 2>&1)
			echo "$out"
			a=$(printf '%s\n' "$out" | awk '$1 == "IOPS" { print $2, $4 }')
			[ -n "$a" ] && [ "${a%% *}" != 0 ] || fail "bench $side $point did no I/O"
			rows+=("gateway $w $b qd$d $side $a")
		done
	done
	if fio=$(command -v fio); then
		for side in tls plain; do
			if [ $side = tls ]; then
				out=$(T=120 in_root nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$subnqn" \
					-q "$hostnqn" --tls -i 1 2>&1)
			else
				out=$(timeout 120 nvme connect -t tcp -a 127.0.0.1 -s "$pport" -n "$subnqn" \
					-q "$hostnqn" -i 1 2>&1)
			fi || fail "the kernel's $side connect: $out"
			kdev=$(nvme_host_dev "$subnqn") || fail "no block device ($side)"
			# One fio for the three points, one after the other (stonewall):
			# a fio start costs seconds in the TCG guest.
			(cd "$work" && timeout 120 "$fio" --output-format=json --filename="$kdev" --direct=1 \
				--ioengine=libaio --runtime="$secs" --time_based \
				--name=randread --rw=randread --bs=4k --iodepth=32 \
				--name=read --stonewall --rw=read --bs=128k --iodepth=8 \
				--name=write --stonewall --rw=write --bs=128k --iodepth=8) > "$work/fio.json" 2> "$work/fio.err" ||
				{ cat "$work/fio.err"; fail "fio over the kernel's $side connection"; }
			out=$(python3 -c '
import json, sys
for j in json.load(open(sys.argv[1]))["jobs"]:
    r = j["write"] if j["jobname"] == "write" else j["read"]
    qd = {"randread": "4k qd32", "read": "128k qd8", "write": "128k qd8"}[j["jobname"]]
    print("%s %s %.0f %.2f" % (j["jobname"], qd, r["iops"], r["bw"] / 1024.0))' "$work/fio.json") ||
				fail "fio's JSON"
			while read -r w b d i m; do
				echo "fio $side $w $b $d: IOPS $i MiB/s $m"
				[ "$i" != 0 ] || fail "fio $side $w did no I/O"
				rows+=("kernel $w $b $d $side $i $m")
			done <<< "$out"
			nvme disconnect -n "$subnqn" > /dev/null || fail "disconnect ($side)"
		done
	else
		echo "(no fio in the guest: the kernel host's figures are left out)"
	fi
	step "the cost of TLS ($secs s each, one I/O queue, TCG guest; TLS / plaintext)"
	printf '%s\n' "${rows[@]}" | awk '
		{ k = $1 " " $2 " " $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
		  iops[k, $5] = $6; mib[k, $5] = $7 }
		END {
			printf "%-8s %-9s %-5s %-5s %9s %10s %9s %10s %6s\n", "host", "workload", "bs", "qd",
				"IOPS tls", "IOPS plain", "MiB/s tls", "MiB/s plain", "ratio"
			for (i = 0; i < n; i++) {
				k = order[i]; split(k, f, " ")
				printf "%-8s %-9s %-5s %-5s %9s %10s %9s %10s %6.2f\n", f[1], f[2], f[3], f[4],
					iops[k, "tls"], iops[k, "plain"], mib[k, "tls"], mib[k, "plain"],
					(iops[k, "plain"] > 0 ? iops[k, "tls"] / iops[k, "plain"] : 0)
			}
		}' | tee "$work/cost.txt" | sed 's/^/TLS cost: /'
	rm -f "$NVMET/ports/$pid_plain/subsystems/$subnqn"
	rmdir "$NVMET/ports/$pid_plain" 2> /dev/null
}

# SHA-384: a 48-byte configured PSK (NVMeTLSkey-1:02:) from nvme-cli, in
# .nvme under NVMe0R02 (checked against tls_psk.py); the gateway offers it
# with TLS_AES_256_GCM_SHA384 and a SHA-384 binder (RFC 8446 4.2.11: the
# binder uses the PSK's hash).  tlshd can only check such a binder when
# GnuTLS has gnutls_psk_allocate_server_credentials2 (3.8.10 and later);
# without it GnuTLS computes every external PSK's binder with SHA-256, finds
# a mismatch and fails the handshake with -55 (GNUTLS_E_RECEIVED_ILLEGAL_
# PARAMETER, TLS.md).  So: with that function the bench must pass; without
# it the refusal must be that one (a clear error line from the gateway,
# -55 in tlshd's log), and nothing else.
tls_sha384() {
	local key2 ident2 kid2 out r n0
	step "SHA-384: an NVMeTLSkey-1:02: key in .nvme, bench --verify with TLS_AES_256_GCM_SHA384"
	key2=$(in_root nvme gen-tls-key --hmac=2 --subsysnqn="$subnqn" --hostnqn="$hostnqn" 2> "$work/gen2.err" |
		grep -o 'NVMeTLSkey-1:02:[^ ]*:' | head -n 1)
	[ -n "$key2" ] || { cat "$work/gen2.err"; fail "gen-tls-key --hmac=2 printed no 02 key"; }
	echo "interchange key: $key2"
	printf '%s\n' "$key2" > "$work/psk384" && chmod 600 "$work/psk384"
	in_root nvme check-tls-key --keydata="$key2" --subsysnqn="$subnqn" --hostnqn="$hostnqn" \
		--keyring=.nvme --insert 2>&1 || fail "check-tls-key --insert (02)"
	grep ' psk ' /proc/keys
	kid2=$(awk -v h="$hostnqn" -v s="$subnqn" '$8 == "psk" && $2 !~ /R/ && $9 == "NVMe0R02" && index($0, h " " s) { print $1; exit }' /proc/keys)
	[ -n "$kid2" ] || fail "no NVMe0R02 psk key in /proc/keys"
	as_possessor "keyctl pipe 0x$kid2" > "$work/retained384" || fail "cannot read key 0x$kid2"
	ident2="NVMe0R02 $hostnqn $subnqn"
	python3 "$here/tls_psk.py" "$key2" "$hostnqn" "$subnqn" \
		"$(od -An -v -tx1 "$work/retained384" | tr -d ' \n')" "$ident2" ||
		fail "the keyring's 48-byte PSK is not the one derived from the 02 key"
	n0=$(wc -l < "$work/tlshd.log")
	out=$(NVMF_GATEWAY_LOG=info timeout 300 "$GW" bench -t tcp -a 127.0.0.1 -s "$port" -q "$hostnqn" \
		--tls --tls-key-file "$work/psk384" -n "$subnqn" -w randrw -b 4k -d 16 -T 2 \
		--verify --size 4M --io-timeout 120000 2>&1)
	r=$?
	echo "$out"
	dmesg_new
	echo "--- tlshd on this handshake (its errors and choices):"
	tail -n +$((n0 + 1)) "$work/tlshd.log" | grep -E 'error|failed|successful|Selected cipher|selected PSK|PSK KE mode' |
		grep -v ASSERT | tee "$work/tlshd384.log"
	if grep -q gnutls_psk_allocate_server_credentials2 "$root/usr/sbin/tlshd"; then
		echo "tlshd uses gnutls_psk_allocate_server_credentials2: SHA-384 binders are checked"
		[ $r = 0 ] || fail "bench --verify with the SHA-384 key: exit $r"
		printf '%s\n' "$out" | grep -q ' 0 mismatches' || fail "bench SHA-384: no verify line"
		printf '%s\n' "$out" | grep -q "TLS up with .*TLS_AES_256_GCM_SHA384, identity '$ident2'" ||
			fail "the gateway's log shows no TLS_AES_256_GCM_SHA384 session with $ident2"
		return 0
	fi
	echo "tlshd ($(grep ktls-utils "$root/../versions" 2> /dev/null)) has no" \
		"gnutls_psk_allocate_server_credentials2 ($(grep libgnutls "$root/../versions" 2> /dev/null)):" \
		"its external PSK binders are SHA-256 only, a SHA-384 one cannot match"
	[ $r = 1 ] || fail "the SHA-384 handshake against this tlshd: exit $r, want the refusal (1)"
	[ "$(printf '%s\n' "$out" | grep -c 'error:')" = 1 ] || fail "SHA-384 refusal: want one error line"
	grep -q 'unhandled error -55' "$work/tlshd384.log" ||
		fail "tlshd did not refuse the SHA-384 binder with -55 (GNUTLS_E_RECEIVED_ILLEGAL_PARAMETER)"
	echo "SHA-384 against nvmet 6.12 + tlshd 1.0.0: refused by tlshd's GnuTLS (binder hash), as TLS.md says"
	# TLS_RECORD=1, for the record (not asserted, and left out for time):
	# the kernel's own host with the same NVMe0R02 key, tlshd on both ends.
	[ "${TLS_RECORD:-}" = 1 ] || return 0
	n0=$(wc -l < "$work/tlshd.log")
	out=$(T=90 in_root nvme connect -t tcp -a 127.0.0.1 -s "$port" -n "$subnqn" -q "$hostnqn" --tls -i 1 2>&1)
	echo "the kernel's host, --tls with NVMe0R02 in .nvme: rc=$?: $out"
	for c in /sys/class/nvme-subsystem/*/nvme*; do
		[ "$(cat "$c/subsysnqn" 2> /dev/null)" = "$subnqn" ] && [ -e "$c/tls_key" ] &&
			echo "$(basename "$c")/tls_key: $(cat "$c/tls_key")"
	done
	nvme disconnect -n "$subnqn" > /dev/null 2>&1
	tail -n +$((n0 + 1)) "$work/tlshd.log" | grep -E 'error|failed|successful|Selected cipher|selected PSK' |
		grep -v ASSERT
	dmesg_new
}
