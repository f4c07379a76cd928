# Sourced by tests/func/t_tls_*.sh.
# tls_genkey FILE [HH]: a random configured PSK in the interchange format
# nvme gen-tls-key prints (NVMeTLSkey-1:HH:base64(key || CRC-32 LE):),
# HH 01 (32 bytes, SHA-256, default) or 02 (48 bytes, SHA-384), mode 0600.
tls_genkey() {
	(umask 077; python3 - "${2:-01}" > "$1" <<'PY'
import base64, os, struct, sys, zlib
hh = sys.argv[1]
k = os.urandom(32 if hh == "01" else 48)
print("NVMeTLSkey-1:%s:%s:" % (hh, base64.b64encode(k + struct.pack("<I", zlib.crc32(k))).decode()))
PY
	) || fail "cannot write a TLS key"
}
