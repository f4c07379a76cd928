/* NVMe/TCP TLS PSKs: the interchange format and the configured-PSK
 * derivations, with HKDF from OpenSSL's EVP_KDF. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>

#include "transports/auth/auth.h"
#include "transports/auth/tls_psk.h"

static const EVP_MD *tls_md(uint8_t hash)
{
	switch (hash) {
	case NVMF_TLS_SHA256: return EVP_sha256();
	case NVMF_TLS_SHA384: return EVP_sha384();
	default: return NULL;
	}
}

static size_t tls_len(uint8_t hash)
{
	switch (hash) {
	case NVMF_TLS_SHA256: return 32;
	case NVMF_TLS_SHA384: return 48;
	default: return 0;
	}
}

const char *nvmf_tls_cipher(uint8_t hash)
{
	switch (hash) {
	case NVMF_TLS_SHA256: return "TLS_AES_128_GCM_SHA256";
	case NVMF_TLS_SHA384: return "TLS_AES_256_GCM_SHA384";
	default: return NULL;
	}
}

const char *nvmf_tls_kdf_name(enum nvmf_tls_kdf kdf)
{
	return kdf == NVMF_TLS_KDF_COMPAT ? "libnvme-compat" : "rfc8446";
}

void nvmf_tls_key_clear(struct nvmf_tls_key *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

void nvmf_tls_psk_clear(struct nvmf_tls_psk *p)
{
	OPENSSL_cleanse(p, sizeof(*p));
}

int nvmf_tls_key_parse(const char *s, struct nvmf_tls_key *out, const char **why)
{
	static const char prefix[] = "NVMeTLSkey-1:";
	static const uint8_t lens[] = { 32, 48, 0 };
	const size_t pl = sizeof(prefix) - 1;
	const char *b64;
	size_t n, klen;
	uint8_t hash;
	int ret;

	memset(out, 0, sizeof(*out));
	if (strncmp(s, prefix, pl) != 0) {
		*why = "must start with \"NVMeTLSkey-1:\"";
		return -EINVAL;
	}
	if (s[pl] != '0' || (s[pl + 1] != '1' && s[pl + 1] != '2') || s[pl + 2] != ':') {
		/* 00 (the PSK used untransformed) is valid in the format, but
		 * the specification's configured PSK always has a hash. */
		*why = "the PSK hash must be 01 (SHA-256) or 02 (SHA-384) (NVMeTLSkey-1:HH:...)";
		return -EINVAL;
	}
	hash = (uint8_t)(s[pl + 1] - '0');
	b64 = s + pl + 3;
	n = strlen(b64);
	if (!n || b64[n - 1] != ':') {
		*why = "the key must end with ':' (cut short?)";
		return -EINVAL;
	}
	n--;
	ret = nvmf_key_decode_b64crc(b64, n, lens, out->key, &klen, why);
	if (ret == -EMSGSIZE || (!ret && klen != tls_len(hash))) {
		*why = hash == NVMF_TLS_SHA256 ?
			       "a PSK with hash 01 (SHA-256) must be 32 bytes (plus its CRC-32)" :
			       "a PSK with hash 02 (SHA-384) must be 48 bytes (plus its CRC-32)";
		ret = -EINVAL;
	}
	if (ret < 0) {
		nvmf_tls_key_clear(out);
		return ret;
	}
	out->hash = hash;
	out->len = (uint8_t)klen;
	return 0;
}

/* HKDF-Expand-Label's info (RFC 8446 7.1, or libnvme 1.x's encoding) into
 * buf; its length, or -ENAMETOOLONG. */
static int label_info(enum nvmf_tls_kdf kdf, const char *label, const void *ctx, size_t clen,
		      size_t len, uint8_t *buf, size_t size)
{
	static const char tls13[] = "tls13 ";
	size_t ll = strlen(label), off = 0;

	if (2 + 1 + 6 + ll + 1 + clen > size)
		return -ENAMETOOLONG;
	if (kdf == NVMF_TLS_KDF_RFC8446) {
		if (6 + ll > 255 || clen > 255)
			return -ENAMETOOLONG;
		buf[off++] = (uint8_t)(len >> 8);
		buf[off++] = (uint8_t)len;
		buf[off++] = (uint8_t)(6 + ll);
	} else {
		buf[off++] = (uint8_t)len;
		buf[off++] = (uint8_t)(len >> 8);
	}
	memcpy(buf + off, tls13, 6);
	off += 6;
	memcpy(buf + off, label, ll);
	off += ll;
	if (kdf == NVMF_TLS_KDF_RFC8446)
		buf[off++] = (uint8_t)clen;
	memcpy(buf + off, ctx, clen);
	off += clen;
	return (int)off;
}

/* HKDF-Expand(HKDF-Extract(salt 0, ikm), info, len): RFC 5869's zero salt
 * is what OpenSSL uses when none is given. */
static int hkdf(const EVP_MD *md, const uint8_t *ikm, size_t ilen, const uint8_t *info,
		size_t inlen, uint8_t *out, size_t len)
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, OSSL_KDF_NAME_HKDF, NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[4];
	int ret = -EIO;

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						     (char *)EVP_MD_get0_name(md), 0);
	params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ilen);
	params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, inlen);
	params[3] = OSSL_PARAM_construct_end();
	if (kctx && EVP_KDF_derive(kctx, out, len, params) > 0)
		ret = 0;
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return ret;
}

static int expand_label(enum nvmf_tls_kdf kdf, const EVP_MD *md, const uint8_t *secret,
			size_t len, const char *label, const void *ctx, size_t clen, uint8_t *out)
{
	uint8_t info[2 + 1 + 6 + 16 + 1 + NVMF_TLS_IDENTITY_SIZE];
	int n = label_info(kdf, label, ctx, clen, len, info, sizeof(info));

	if (n < 0)
		return n;
	return hkdf(md, secret, len, info, (size_t)n, out, len);
}

static bool nqn_ok(const char *nqn)
{
	size_t n = strlen(nqn);

	return n && n < NVMF_NQN_SIZE && !strchr(nqn, ' ');
}

/* base64(HMAC(retained, hostnqn " " subnqn " NVMe-over-Fabrics")). */
static int psk_digest(const EVP_MD *md, const struct nvmf_tls_psk *p, const char *hostnqn,
		      const char *subnqn, char *out)
{
	char msg[2 * NVMF_NQN_SIZE + 32];
	uint8_t mac[EVP_MAX_MD_SIZE];
	unsigned int mlen = 0;
	int n = snprintf(msg, sizeof(msg), "%s %s NVMe-over-Fabrics", hostnqn, subnqn);

	if (n < 0 || (size_t)n >= sizeof(msg))
		return -EINVAL;
	if (!HMAC(md, p->retained, (int)p->len, (const uint8_t *)msg, (size_t)n, mac, &mlen))
		return -EIO;
	EVP_EncodeBlock((unsigned char *)out, mac, (int)mlen);
	OPENSSL_cleanse(mac, sizeof(mac));
	return 0;
}

int nvmf_tls_derive(const struct nvmf_tls_key *k, const char *hostnqn, const char *subnqn,
		    int version, enum nvmf_tls_kdf kdf, struct nvmf_tls_psk *out)
{
	const EVP_MD *md = tls_md(k->hash);
	char ctx[NVMF_TLS_IDENTITY_SIZE];
	int n, ret;

	memset(out, 0, sizeof(*out));
	if (!md || k->len != tls_len(k->hash) || (version != 0 && version != 1) ||
	    (kdf != NVMF_TLS_KDF_RFC8446 && kdf != NVMF_TLS_KDF_COMPAT) || !nqn_ok(hostnqn) ||
	    !nqn_ok(subnqn))
		return -EINVAL;
	out->hash = k->hash;
	out->len = k->len;
	ret = expand_label(kdf, md, k->key, k->len, "HostNQN", hostnqn, strlen(hostnqn),
			   out->retained);
	if (!ret)
		ret = psk_digest(md, out, hostnqn, subnqn, out->digest);
	if (ret)
		goto fail;
	if (version == 0) {
		snprintf(out->identity, sizeof(out->identity), "NVMe0R%02u %s %s", k->hash, hostnqn,
			 subnqn);
		n = snprintf(ctx, sizeof(ctx), "%s", out->identity);
	} else {
		snprintf(out->identity, sizeof(out->identity), "NVMe1R%02u %s %s %s", k->hash,
			 hostnqn, subnqn, out->digest);
		n = snprintf(ctx, sizeof(ctx), "%02u %s", k->hash, out->digest);
	}
	ret = expand_label(kdf, md, out->retained, out->len, "nvme-tls-psk", ctx, (size_t)n,
			   out->psk);
	if (!ret)
		return 0;
fail:
	nvmf_tls_psk_clear(out);
	return ret;
}
