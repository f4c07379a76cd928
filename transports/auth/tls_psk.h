/* NVMe/TCP TLS 1.3 key material for the configured-PSK case (NVMe/TCP
 * transport specification, "TLS PSK and PSK identity derivation"): the
 * interchange format nvme-cli writes, the retained PSK, the PSK identity
 * and the TLS PSK that goes into the handshake as the external PSK.
 *
 * No I/O here.  A key file is read like a DH-HMAC-CHAP secret file, with
 * its owner and mode checks (gw_secret_read_file in gateway/secret.c), and
 * the line it gives is handed to nvmf_tls_key_parse. */
#ifndef TRANSPORTS_TLS_PSK_H
#define TRANSPORTS_TLS_PSK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/nvme_spec.h"

#define NVMF_TLS_PSK_MAX 48
/* base64 of a SHA-384 HMAC (64 characters) and its NUL. */
#define NVMF_TLS_DIGEST_SIZE 65
/* "NVMe1R02 " hostnqn " " subnqn " " digest, and the NUL. */
#define NVMF_TLS_IDENTITY_SIZE (9 + 2 * NVMF_NQN_SIZE + NVMF_TLS_DIGEST_SIZE)

/* The PSK hash of the interchange format's HH field. */
enum nvmf_tls_hash {
	NVMF_TLS_SHA256 = 1, /* 32-byte PSK, TLS_AES_128_GCM_SHA256 */
	NVMF_TLS_SHA384 = 2, /* 48-byte PSK, TLS_AES_256_GCM_SHA384 */
};

/* A configured PSK, from "NVMeTLSkey-1:HH:base64(PSK || CRC-32 LE):". */
struct nvmf_tls_key {
	uint8_t hash; /* enum nvmf_tls_hash; 0 = no key */
	uint8_t len; /* 32 or 48, as the hash says */
	uint8_t key[NVMF_TLS_PSK_MAX];
};

/* 0, or -EINVAL with *why saying what is wrong (never the key).  The
 * trailing ':' is required: nvme-cli always writes it, and a key without
 * it is more likely cut short than typed that way. */
int nvmf_tls_key_parse(const char *s, struct nvmf_tls_key *out, const char **why);

/* How HKDF-Expand-Label's info is encoded. */
enum nvmf_tls_kdf {
	/* RFC 8446 7.1's HkdfLabel: length (2 bytes, big endian), then the
	 * "tls13 " label and the context, each after a length byte. */
	NVMF_TLS_KDF_RFC8446,
	/* libnvme 1.x (nvme-cli up to 2.13, what Debian 13 ships, newer libnvme's
	 * "compat"): length little endian, "tls13 " label and context
	 * concatenated with no length bytes.  The PSK that
	 * nvme check-tls-key --insert puts into the kernel's keyring. */
	NVMF_TLS_KDF_COMPAT,
};

struct nvmf_tls_psk {
	uint8_t hash; /* enum nvmf_tls_hash */
	uint8_t len; /* bytes of retained and psk */
	uint8_t retained[NVMF_TLS_PSK_MAX];
	/* The handshake's external PSK, under identity. */
	uint8_t psk[NVMF_TLS_PSK_MAX];
	/* base64(HMAC(retained, hostnqn " " subnqn " NVMe-over-Fabrics")):
	 * the PSK digest of identity version 1. */
	char digest[NVMF_TLS_DIGEST_SIZE];
	/* "NVMe0RHH hostnqn subnqn" (version 0, the only one the 6.12 kernel
	 * looks up) or "NVMe1RHH hostnqn subnqn digest" (version 1). */
	char identity[NVMF_TLS_IDENTITY_SIZE];
};

/* From a configured PSK:
 *   retained = HKDF-Expand-Label(HKDF-Extract(0, key), "HostNQN", hostnqn, L)
 *   psk      = HKDF-Expand-Label(HKDF-Extract(0, retained), "nvme-tls-psk",
 *                                C, L)
 * with C the identity for version 0 and "HH digest" for version 1, and L
 * the key's length.  0; -EINVAL for a bad version, key or NQN (empty, too
 * long, or with a space, which would make the identity ambiguous);
 * -ENAMETOOLONG when RFC 8446's one length byte cannot hold the version 0
 * context (an identity over 255 bytes: long NQNs); -EIO from OpenSSL.
 * out is wiped on failure. */
int nvmf_tls_derive(const struct nvmf_tls_key *k, const char *hostnqn, const char *subnqn,
		    int version, enum nvmf_tls_kdf kdf, struct nvmf_tls_psk *out);

/* The TLS 1.3 cipher suite that goes with the PSK's hash (OpenSSL's name);
 * NULL when unknown. */
const char *nvmf_tls_cipher(uint8_t hash);
const char *nvmf_tls_kdf_name(enum nvmf_tls_kdf kdf);

/* Wipes the key material. */
void nvmf_tls_key_clear(struct nvmf_tls_key *k);
void nvmf_tls_psk_clear(struct nvmf_tls_psk *p);

/* ---- the handshake's side (tls_ssl.c) ---- */

struct ssl_st;

/* Sets ssl (either side, OpenSSL's SSL) up for NVMe/TCP: TLS 1.3 only,
 * the one cipher suite of p's hash, p->psk as the external PSK under
 * p->identity, no certificates, no session tickets.  A server accepts that
 * identity only: any other leaves it without a key, so the handshake
 * fails.  p must stay put until SSL_free.  0, or -EIO (OpenSSL's error
 * queue says why). */
int nvmf_tls_ssl_setup(struct ssl_st *ssl, const struct nvmf_tls_psk *p);

/* Whether a finished handshake was authenticated by the PSK, as NVMe/TCP
 * asks: resumed from it, with no certificate.  Checked once the handshake
 * is done, in case a server's certificate ever got past the client's
 * verification (nvmf_tls_ssl_setup refuses every chain). */
bool nvmf_tls_ssl_psk_used(const struct ssl_st *ssl);

/* One line for a failed handshake: OpenSSL's reason, with a hint when it
 * is the one a different key gives (the peer's binder or Finished did not
 * verify).  Drains the calling thread's OpenSSL error queue. */
const char *nvmf_tls_ssl_why(char *buf, size_t len);

#endif
