#!/usr/bin/env python3
"""tls_psk.py KEY HOSTNQN SUBNQN [KEYRING_HEX [IDENTITY]]: the reference for
the NVMe/TCP TLS PSK derivations (configured-PSK case), checked in the guest
against what nvme-cli put in the kernel's ".nvme" keyring (TLS.md).

KEY is a PSK in interchange format, NVMeTLSkey-1:HH:base64(PSK || CRC-32
LE):, HH = 01 (SHA-256, 32-byte PSK) or 02 (SHA-384, 48 bytes).  Then
(NVMe/TCP transport specification, RFC 5869, RFC 8446 section 7.1):
    retained  = HKDF-Expand-Label(HKDF-Extract(0, PSK), "HostNQN", hostnqn, L)
    identity  = "NVMe0RHH hostnqn subnqn"                       (version 0)
              | "NVMe1RHH hostnqn subnqn digest"                (version 1)
      digest  = base64(HMAC(retained, hostnqn " " subnqn " NVMe-over-Fabrics"))
    TLS PSK   = HKDF-Expand-Label(HKDF-Extract(0, retained), "nvme-tls-psk",
                                  C, L), C = identity (v0) | "HH digest" (v1)
HKDF-Expand-Label's info is, per RFC 8446, L (2 bytes, big endian) ||
len || "tls13 " label || len || context.  libnvme before its fix (nvme-cli
2.13 in Debian 13 is such) builds a different info: L little endian, no
length bytes: "tls13 HostNQN" hostnqn, "tls13 nvme-tls-psk" C.  Both are
printed; with KEYRING_HEX (the payload of the keyring's psk key) it exits
1 unless one of them gives exactly that key, and says which.  IDENTITY
picks the version (default: 0; a description starting NVMe1 means 1).
KEYRING_HEX "rfc" or "compat": prints that derivation's TLS PSK in hex alone
(to put into a keyring with keyctl)."""
import base64, binascii, hashlib, hmac, sys


def expand(h, prk, info, length):
    out, t, i = b"", b"", 1
    while len(out) < length:
        t = hmac.new(prk, t + info + bytes([i]), h).digest()
        out += t
        i += 1
    return out[:length]


def info_rfc(label, context, length):
    full = b"tls13 " + label
    return length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context


def info_compat(label, context, length):
    return length.to_bytes(2, "little") + b"tls13 " + label + context


def derive(h, hh, psk, hostnqn, subnqn, version, info):
    n = len(psk)
    extract = lambda ikm: hmac.new(b"", ikm, h).digest()  # salt 0: empty key
    retained = expand(h, extract(psk), info(b"HostNQN", hostnqn, n), n)
    digest = base64.b64encode(
        hmac.new(retained, hostnqn + b" " + subnqn + b" NVMe-over-Fabrics", h).digest())
    if version == 0:
        ident = b"NVMe0R%02d %s %s" % (hh, hostnqn, subnqn)
        ctx = ident
    else:
        ident = b"NVMe1R%02d %s %s %s" % (hh, hostnqn, subnqn, digest)
        ctx = b"%02d %s" % (hh, digest)
    tls_psk = expand(h, extract(retained), info(b"nvme-tls-psk", ctx, n), n)
    return retained, ident.decode(), tls_psk


def main():
    key, hostnqn, subnqn = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
    got = sys.argv[4].strip().lower() if len(sys.argv) > 4 else None
    version = 1 if len(sys.argv) > 5 and sys.argv[5].startswith("NVMe1") else 0
    parts = key.split(":")
    if len(parts) != 4 or parts[0] != "NVMeTLSkey-1" or parts[3] != "":
        sys.exit("not an interchange key: " + key)
    hh = int(parts[1], 16)
    h = {1: hashlib.sha256, 2: hashlib.sha384}.get(hh)
    if h is None:
        sys.exit("PSK hash %02x: only 01 and 02 are derived here" % hh)
    raw = base64.b64decode(parts[2])
    psk, crc = raw[:-4], int.from_bytes(raw[-4:], "little")
    if len(psk) != h().digest_size or binascii.crc32(psk) != crc:
        sys.exit("bad length or CRC-32")
    if got in ("rfc", "compat"):
        print(derive(h, hh, psk, hostnqn, subnqn, version,
                     info_rfc if got == "rfc" else info_compat)[2].hex())
        return
    print("configured PSK: %d bytes, %s, CRC-32 ok" % (len(psk), h().name))
    found = None
    for name, info in (("RFC 8446 HkdfLabel", info_rfc), ("libnvme 1.x (compat)", info_compat)):
        retained, ident, tls_psk = derive(h, hh, psk, hostnqn, subnqn, version, info)
        print("%s:\n  retained PSK %s\n  identity     %s\n  TLS PSK      %s"
              % (name, retained.hex(), ident, tls_psk.hex()))
        if got == tls_psk.hex():
            found = name
    if got is not None:
        if found is None:
            print("the keyring holds %s: neither derivation gives it" % got)
            sys.exit(1)
        print("the keyring's PSK is the TLS PSK of the %s derivation" % found)


main()
