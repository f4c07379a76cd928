/* DH-HMAC-CHAP's building blocks: the secret format, its transform, the
 * response HMACs and the FFDHE exchange (NVMe base spec 2.0, 8.13.5). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/dh.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>

#include "transports/auth/auth.h"
#include "transports/nvme_spec.h"

static const EVP_MD *hash_md(uint8_t hashid)
{
	switch (hashid) {
	case NVMF_DHCHAP_SHA256: return EVP_sha256();
	case NVMF_DHCHAP_SHA384: return EVP_sha384();
	case NVMF_DHCHAP_SHA512: return EVP_sha512();
	default: return NULL;
	}
}

size_t nvmf_dhchap_hash_len(uint8_t hashid)
{
	switch (hashid) {
	case NVMF_DHCHAP_SHA256: return 32;
	case NVMF_DHCHAP_SHA384: return 48;
	case NVMF_DHCHAP_SHA512: return 64;
	default: return 0;
	}
}

const char *nvmf_dhchap_hash_name(uint8_t hashid)
{
	switch (hashid) {
	case NVMF_DHCHAP_SHA256: return "sha256";
	case NVMF_DHCHAP_SHA384: return "sha384";
	case NVMF_DHCHAP_SHA512: return "sha512";
	default: return "unknown";
	}
}

static const char *const dh_names[] = {
	[NVMF_DHCHAP_DH_NULL] = "null",	     [NVMF_DHCHAP_DH_2048] = "ffdhe2048",
	[NVMF_DHCHAP_DH_3072] = "ffdhe3072", [NVMF_DHCHAP_DH_4096] = "ffdhe4096",
	[NVMF_DHCHAP_DH_6144] = "ffdhe6144", [NVMF_DHCHAP_DH_8192] = "ffdhe8192",
};

const char *nvmf_dhchap_dhgroup_name(uint8_t dhgid)
{
	return dhgid <= NVMF_DHCHAP_DH_8192 ? dh_names[dhgid] : "unknown";
}

int nvmf_dh_group_bytes(uint8_t dhgid)
{
	static const int bytes[] = { 0, 256, 384, 512, 768, 1024 };

	return dhgid <= NVMF_DHCHAP_DH_8192 ? bytes[dhgid] : -1;
}

/* ---- the secret ---- */

static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1u));
	}
	return ~crc;
}

int nvmf_key_decode_b64crc(const char *b64, size_t n, const uint8_t *lens, uint8_t *out,
			   size_t *klen, const char **why)
{
	/* The largest key (64 bytes) and its CRC, rounded up to whole base64
	 * groups. */
	uint8_t raw[72];
	size_t pad = 0, len;
	bool len_ok = false;
	int got;

	*klen = 0;
	if (n > 4 * (sizeof(raw) / 3))
		return -EMSGSIZE;
	if (n == 0 || n % 4 || memchr(b64, ':', n)) {
		*why = "the key is not valid base64";
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		char c = b64[i];
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (c >= '0' && c <= '9') || c == '+' || c == '/' ||
			  (c == '=' && i + 2 >= n);
		if (!ok) {
			*why = "the key is not valid base64";
			return -EINVAL;
		}
	}
	if (b64[n - 1] == '=')
		pad = (n > 1 && b64[n - 2] == '=') ? 2 : 1;
	got = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
	if (got < 0) {
		OPENSSL_cleanse(raw, sizeof(raw));
		*why = "the key is not valid base64";
		return -EINVAL;
	}
	got -= (int)pad;
	len = got >= 4 ? (size_t)got - 4 : 0;
	for (const uint8_t *l = lens; *l; l++)
		len_ok |= *l == len && got >= 4;
	/* The length first: a truncated key would fail its CRC too, and the
	 * length says more. */
	if (!len_ok) {
		OPENSSL_cleanse(raw, sizeof(raw));
		return -EMSGSIZE;
	}
	uint32_t want = crc32_ieee(raw, len);
	uint32_t have = (uint32_t)raw[len] | (uint32_t)raw[len + 1] << 8 |
			(uint32_t)raw[len + 2] << 16 | (uint32_t)raw[len + 3] << 24;
	if (want != have) {
		OPENSSL_cleanse(raw, sizeof(raw));
		*why = "the key's CRC-32 does not match (mistyped or truncated)";
		return -EINVAL;
	}
	memcpy(out, raw, len);
	*klen = len;
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

int nvmf_dhchap_key_parse(const char *s, struct nvmf_dhchap_key *out, const char **why)
{
	static const uint8_t lens[] = { 32, 48, 64, 0 };
	const char *b64;
	size_t n, klen;
	int ret;

	memset(out, 0, sizeof(*out));
	if (strncmp(s, "DHHC-1:", 7) != 0) {
		*why = "must start with \"DHHC-1:\"";
		return -EINVAL;
	}
	if (s[7] != '0' || s[8] < '0' || s[8] > '3' || s[9] != ':') {
		*why = "the transform must be 00, 01, 02 or 03 (DHHC-1:XX:...)";
		return -EINVAL;
	}
	b64 = s + 10;
	n = strlen(b64);
	/* nvme-cli ends the secret with ':'; the kernel accepts it missing. */
	if (n && b64[n - 1] == ':')
		n--;
	ret = nvmf_key_decode_b64crc(b64, n, lens, out->key, &klen, why);
	if (ret == -EMSGSIZE) {
		*why = "the key must be 32, 48 or 64 bytes (plus its CRC-32)";
		ret = -EINVAL;
	}
	if (ret < 0)
		return ret;
	out->hmac = (uint8_t)(s[8] - '0');
	out->len = (uint8_t)klen;
	return 0;
}

/* ---- HMACs ---- */

int nvmf_dhchap_hmac(uint8_t hashid, const void *key, size_t klen, const void *data,
		     size_t dlen, uint8_t *out)
{
	const EVP_MD *md = hash_md(hashid);
	unsigned int olen = 0;

	if (!md)
		return -EINVAL;
	if (!HMAC(md, key, (int)klen, data, dlen, out, &olen))
		return -EIO;
	return 0;
}

int nvmf_dhchap_transform_key(const struct nvmf_dhchap_key *k, const char *nqn,
			      uint8_t out[NVMF_DHCHAP_MAX_HASH], size_t *outlen)
{
	static const char tail[] = "NVMe-over-Fabrics";
	size_t n = strlen(nqn);
	uint8_t msg[NVMF_NQN_SIZE + sizeof(tail)];
	int ret;

	if (!k->len)
		return -ENOKEY;
	if (k->hmac == 0) {
		memcpy(out, k->key, k->len);
		*outlen = k->len;
		return 0;
	}
	if (n >= NVMF_NQN_SIZE)
		return -EINVAL;
	memcpy(msg, nqn, n);
	memcpy(msg + n, tail, sizeof(tail) - 1);
	ret = nvmf_dhchap_hmac(k->hmac, k->key, k->len, msg, n + sizeof(tail) - 1, out);
	if (!ret)
		*outlen = nvmf_dhchap_hash_len(k->hmac);
	return ret;
}

int nvmf_dhchap_augment(uint8_t hashid, const uint8_t *skey, size_t sklen,
			const uint8_t *chal, uint8_t *out)
{
	const EVP_MD *md = hash_md(hashid);
	uint8_t hk[EVP_MAX_MD_SIZE];
	size_t hl = nvmf_dhchap_hash_len(hashid);
	int ret;

	if (!md)
		return -EINVAL;
	if (!EVP_Digest(skey, sklen, hk, NULL, md, NULL))
		return -EIO;
	ret = nvmf_dhchap_hmac(hashid, hk, hl, chal, hl, out);
	OPENSSL_cleanse(hk, sizeof(hk));
	return ret;
}

int nvmf_dhchap_response(uint8_t hashid, const uint8_t *tkey, size_t tklen,
			 const uint8_t *chal, uint32_t seq, uint16_t tid, uint8_t sc_c,
			 const char *role, const char *nqn_a, const char *nqn_b, uint8_t *out)
{
	size_t hl = nvmf_dhchap_hash_len(hashid);
	size_t la = strlen(nqn_a), lb = strlen(nqn_b), lr = strlen(role);
	uint8_t msg[NVMF_DHCHAP_MAX_HASH + 7 + 16 + 2 * NVMF_NQN_SIZE + 1];
	size_t off = 0;

	if (!hl || la >= NVMF_NQN_SIZE || lb >= NVMF_NQN_SIZE || lr > 16)
		return -EINVAL;
	memcpy(msg, chal, hl);
	off = hl;
	/* Integers little-endian, as on the wire. */
	msg[off++] = (uint8_t)seq;
	msg[off++] = (uint8_t)(seq >> 8);
	msg[off++] = (uint8_t)(seq >> 16);
	msg[off++] = (uint8_t)(seq >> 24);
	msg[off++] = (uint8_t)tid;
	msg[off++] = (uint8_t)(tid >> 8);
	msg[off++] = sc_c;
	memcpy(msg + off, role, lr);
	off += lr;
	memcpy(msg + off, nqn_a, la);
	off += la;
	msg[off++] = 0;
	memcpy(msg + off, nqn_b, lb);
	off += lb;
	return nvmf_dhchap_hmac(hashid, tkey, tklen, msg, off, out);
}

/* ---- FFDHE ---- */

struct nvmf_dh {
	uint8_t dhgid;
	EVP_PKEY *key;
};

static EVP_PKEY *dh_from_params(uint8_t dhgid, const BIGNUM *priv, const BIGNUM *pub)
{
	OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	EVP_PKEY *pk = NULL;

	if (!b || !OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME,
						   dh_names[dhgid], 0) ||
	    (priv && !OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_PRIV_KEY, priv)) ||
	    !OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_PUB_KEY, pub) ||
	    !(params = OSSL_PARAM_BLD_to_param(b)) ||
	    !(ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL)) || EVP_PKEY_fromdata_init(ctx) <= 0 ||
	    EVP_PKEY_fromdata(ctx, &pk, priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) <= 0)
		pk = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(b);
	return pk;
}

static EVP_PKEY *dh_generate(uint8_t dhgid)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL);
	EVP_PKEY *pk = NULL;
	OSSL_PARAM params[2] = {
		OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
						 (char *)dh_names[dhgid], 0),
		OSSL_PARAM_construct_end(),
	};

	if (!ctx || EVP_PKEY_keygen_init(ctx) <= 0 || !EVP_PKEY_CTX_set_params(ctx, params) ||
	    EVP_PKEY_generate(ctx, &pk) <= 0)
		pk = NULL;
	EVP_PKEY_CTX_free(ctx);
	return pk;
}

/* A given private key: its public value g^x mod p from the group's own
 * parameters, so the key pair is consistent. */
static EVP_PKEY *dh_with_priv(uint8_t dhgid, const uint8_t *priv, size_t privlen)
{
	EVP_PKEY *tmp = dh_generate(dhgid), *pk = NULL;
	BIGNUM *p = NULL, *g = NULL, *x = BN_bin2bn(priv, (int)privlen, NULL), *y = BN_new();
	BN_CTX *bctx = BN_CTX_new();

	if (tmp && x && y && bctx && EVP_PKEY_get_bn_param(tmp, OSSL_PKEY_PARAM_FFC_P, &p) &&
	    EVP_PKEY_get_bn_param(tmp, OSSL_PKEY_PARAM_FFC_G, &g) &&
	    BN_mod_exp(y, g, x, p, bctx))
		pk = dh_from_params(dhgid, x, y);
	EVP_PKEY_free(tmp);
	BN_clear_free(x);
	BN_free(y);
	BN_free(p);
	BN_free(g);
	BN_CTX_free(bctx);
	return pk;
}

int nvmf_dh_new(uint8_t dhgid, const uint8_t *priv, size_t privlen, struct nvmf_dh **out)
{
	struct nvmf_dh *dh;

	if (dhgid < NVMF_DHCHAP_DH_2048 || dhgid > NVMF_DHCHAP_DH_8192)
		return -EINVAL;
	if (!(dh = calloc(1, sizeof(*dh))))
		return -ENOMEM;
	dh->dhgid = dhgid;
	dh->key = priv ? dh_with_priv(dhgid, priv, privlen) : dh_generate(dhgid);
	if (!dh->key) {
		free(dh);
		return -EIO;
	}
	*out = dh;
	return 0;
}

int nvmf_dh_public(const struct nvmf_dh *dh, uint8_t *out, size_t len)
{
	BIGNUM *y = NULL;
	int ret = -EIO;

	if (EVP_PKEY_get_bn_param(dh->key, OSSL_PKEY_PARAM_PUB_KEY, &y) &&
	    BN_bn2binpad(y, out, (int)len) == (int)len)
		ret = 0;
	BN_free(y);
	return ret;
}

int nvmf_dh_derive(struct nvmf_dh *dh, const uint8_t *peer, size_t plen, uint8_t *out,
		   size_t len)
{
	BIGNUM *y = BN_bin2bn(peer, (int)plen, NULL);
	EVP_PKEY *pk = y ? dh_from_params(dh->dhgid, NULL, y) : NULL;
	EVP_PKEY_CTX *ctx = NULL;
	size_t olen = len;
	int ret = -EPROTO;

	if (!pk)
		goto out;
	ctx = EVP_PKEY_CTX_new_from_pkey(NULL, dh->key, NULL);
	/* Padded to the prime's size: the kernel's shared secret is, and the
	 * session key is hashed whole. */
	if (!ctx || EVP_PKEY_derive_init(ctx) <= 0 || EVP_PKEY_CTX_set_dh_pad(ctx, 1) <= 0)
		goto out;
	/* The peer's value is checked (1 < y < p-1, in the subgroup). */
	if (EVP_PKEY_derive_set_peer_ex(ctx, pk, 1) <= 0)
		goto out;
	if (EVP_PKEY_derive(ctx, out, &olen) <= 0 || olen != len)
		goto out;
	ret = 0;
out:
	EVP_PKEY_CTX_free(ctx);
	EVP_PKEY_free(pk);
	BN_free(y);
	return ret;
}

void nvmf_dh_free(struct nvmf_dh *dh)
{
	if (!dh)
		return;
	EVP_PKEY_free(dh->key);
	free(dh);
}
