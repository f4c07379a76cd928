/* NVMe/TCP TLS PSKs: the interchange format and the configured-PSK
 * derivations.  The expected values were printed by tests/interop/tls_psk.py,
 * an independent implementation in Python whose compat derivation matched
 * what nvme-cli 2.13 put into the kernel's keyring (tests/interop/TLS.md):
 *   python3 tests/interop/tls_psk.py KEY HOSTNQN SUBNQN [x NVMe1]
 * The first key is TLS.md's, and its compat TLS PSK is the one nvme-cli
 * inserted there. */
#include "gateway/secret.h"
#include "transports/auth/auth.h"
#include "transports/auth/tls_psk.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define H "nqn.2014-08.org.nvmf-gateway:host-tls"
#define S "nqn.2014-08.org.nvmf-gateway:interop-tls"

static const char key_md[] = "NVMeTLSkey-1:01:lnEpsYW/SvBHXCB1ONxfEVQ4dxEZqwXelJ3gEfOJG0cnX1/l:";
/* 00..1f, and 40..6f: made with the CRC-32 and base64 of Python's binascii. */
static const char key_256[] = "NVMeTLSkey-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";
static const char key_384[] =
	"NVMeTLSkey-1:02:QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl9gYWJjZGVmZ2hpamtsbW5voBXMjQ==:";

struct vec {
	const char *key;
	int version;
	enum nvmf_tls_kdf kdf;
	const char *retained, *identity, *psk;
};

static const struct vec vecs[] = {
	{ key_md, 0, NVMF_TLS_KDF_RFC8446,
	  "03114fd1cc68dff9ad6d9dee212747bed110b8f52a511584fb0c9847fa13383e",
	  "NVMe0R01 " H " " S,
	  "4c04a5146521b849749ae3212d8cb321d3922b2e50461f856ad7f8ff0263ed0d" },
	{ key_md, 0, NVMF_TLS_KDF_COMPAT,
	  "96accad399d96db1f8eedebae4b3742c7de526a19bcbf202ac5191538f67d2e8",
	  "NVMe0R01 " H " " S,
	  "5ca92c6d0cb974f2f6ed740e95d5b36a974349fe3fed386cbfdcbd7966a4f1c2" },
	{ key_md, 1, NVMF_TLS_KDF_RFC8446,
	  "03114fd1cc68dff9ad6d9dee212747bed110b8f52a511584fb0c9847fa13383e",
	  "NVMe1R01 " H " " S " hThlw+YgWqNhzH4yDQxbQFHm9vDw0eUBTJC/fyH0tjo=",
	  "56857714d34e4765b8a21f024656a38cce82e609c55ce491efcef47185219072" },
	{ key_md, 1, NVMF_TLS_KDF_COMPAT,
	  "96accad399d96db1f8eedebae4b3742c7de526a19bcbf202ac5191538f67d2e8",
	  "NVMe1R01 " H " " S " Ppqd4dejdVUaD6A+j97Y8qP6v8d+toKA7rgvEk7Xw48=",
	  "21fc44eb912770dbe5df049ecd0d37263e3799220ef769a22ddbeaae3c2a9d12" },
	{ key_256, 0, NVMF_TLS_KDF_RFC8446,
	  "f6e303cdb79780cc6a02ac2f43bf11a1b8aaaec8cccc60330c75e56ed395f2e6",
	  "NVMe0R01 " H " " S,
	  "4f5cb6f55c8386ac645095fd96b655dad9cf05f69bfe4a5527e79aa0b4484bff" },
	{ key_256, 0, NVMF_TLS_KDF_COMPAT,
	  "a923960204912ec138fc517ade8c4e5fb98247f9e079539528bfb273eae07058",
	  "NVMe0R01 " H " " S,
	  "13f9e88cdec2afe4d441d2493b899b8dbd38bbed809560f775d2c8c1072ead2d" },
	{ key_256, 1, NVMF_TLS_KDF_RFC8446,
	  "f6e303cdb79780cc6a02ac2f43bf11a1b8aaaec8cccc60330c75e56ed395f2e6",
	  "NVMe1R01 " H " " S " DaSgQBVkVgFIC1bkpgOKYHiFVIXVB3CIEdccNudMerI=",
	  "29202b1058bfb7918a26e4a820c37c1224598230b626a387e804c3549cd46e58" },
	{ key_256, 1, NVMF_TLS_KDF_COMPAT,
	  "a923960204912ec138fc517ade8c4e5fb98247f9e079539528bfb273eae07058",
	  "NVMe1R01 " H " " S " nwOJeNHdOXAMcbi594rufzGocL9gWU7xKbWynl75vRk=",
	  "df618bd05dc81ff6803d4f5415ceb2ae32315770cd630de1ecfdc36ccc1df60e" },
	{ key_384, 0, NVMF_TLS_KDF_RFC8446,
	  "57a2c008651343f76e3a3c12fb84974ebaaffec6600f899c3f0278965721d44c"
	  "8e623b489b4ab7a1df9067564380ce55",
	  "NVMe0R02 " H " " S,
	  "c748110c86c302c4a7ab4864faeaa8fd2bfd2df42840db3612ef31fa8103bd5d"
	  "e23eb8cf8ba43149bc472e1416f48232" },
	{ key_384, 0, NVMF_TLS_KDF_COMPAT,
	  "ae852a77108ef58defb3c58cb2861af1c3c65bcc2b5bb960613e09b4491dfbee"
	  "1f26d873b6c066858da088ef27b0af3d",
	  "NVMe0R02 " H " " S,
	  "e1efe14e1847c5e2c55fe885e32574b710bc78c1761db940b772269eef9f931f"
	  "0bd8ebc7dddc5f03c9e6804ff06a9a1e" },
	{ key_384, 1, NVMF_TLS_KDF_RFC8446,
	  "57a2c008651343f76e3a3c12fb84974ebaaffec6600f899c3f0278965721d44c"
	  "8e623b489b4ab7a1df9067564380ce55",
	  "NVMe1R02 " H " " S
	  " qzDQpWamhcEmRBSAnh7mLT7pHMVHlieplAo53/78nHqEdrKHEdosR8iCcYe8Szzi",
	  "46e9bbae1d50513ff1f84913e4e129e009cab451c534dfa217fad1259f2dfe60"
	  "0a32ecb9b50542fcd8836ff83d2a0a40" },
	{ key_384, 1, NVMF_TLS_KDF_COMPAT,
	  "ae852a77108ef58defb3c58cb2861af1c3c65bcc2b5bb960613e09b4491dfbee"
	  "1f26d873b6c066858da088ef27b0af3d",
	  "NVMe1R02 " H " " S
	  " LF8iYqbpzcx3TtF/6Yg51uXMQcEBO1yvc+iFWFyGSolFM1e62R2LLIsPmLH0wXSw",
	  "ca02736726aa879c52aa1f84b7c0ed666c6c71b13cd72729671eeebf9c062bc1"
	  "3b182ed48360af01308137cb938ce331" },
};

static void hex(const char *s, uint8_t *out, size_t n)
{
	ck_assert_uint_eq(strlen(s), 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		ck_assert_int_eq(sscanf(s + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

START_TEST(parse_vectors)
{
	struct nvmf_tls_key k;
	const char *why = NULL;

	ck_assert_int_eq(nvmf_tls_key_parse(key_256, &k, &why), 0);
	ck_assert_int_eq(k.hash, NVMF_TLS_SHA256);
	ck_assert_int_eq(k.len, 32);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(k.key[i], i);
	ck_assert_int_eq(nvmf_tls_key_parse(key_384, &k, &why), 0);
	ck_assert_int_eq(k.hash, NVMF_TLS_SHA384);
	ck_assert_int_eq(k.len, 48);
	for (int i = 0; i < 48; i++)
		ck_assert_int_eq(k.key[i], 0x40 + i);
	ck_assert_str_eq(nvmf_tls_cipher(NVMF_TLS_SHA256), "TLS_AES_128_GCM_SHA256");
	ck_assert_str_eq(nvmf_tls_cipher(NVMF_TLS_SHA384), "TLS_AES_256_GCM_SHA384");
	ck_assert_ptr_null(nvmf_tls_cipher(3));
}
END_TEST

/* A malformed key: -EINVAL, a message containing want, and no key left. */
static void bad(const char *s, const char *want)
{
	struct nvmf_tls_key k;
	const char *why = NULL;

	memset(&k, 0xa5, sizeof(k));
	ck_assert_int_eq(nvmf_tls_key_parse(s, &k, &why), -EINVAL);
	ck_assert_ptr_nonnull(why);
	ck_assert_msg(strstr(why, want), "\"%s\": message \"%s\" lacks \"%s\"", s, why, want);
	ck_assert_int_eq(k.len, 0);
	ck_assert_int_eq(k.hash, 0);
	for (size_t i = 0; i < sizeof(k.key); i++)
		ck_assert_int_eq(k.key[i], 0);
}

START_TEST(parse_malformed)
{
	char s[sizeof(key_384)];

	/* One base64 character changed: the CRC catches it. */
	memcpy(s, key_256, sizeof(key_256));
	s[20] = s[20] == 'A' ? 'B' : 'A';
	bad(s, "CRC-32");
	memcpy(s, key_384, sizeof(key_384));
	s[30] = s[30] == 'A' ? 'B' : 'A';
	bad(s, "CRC-32");
	/* 24 bytes (+ CRC, valid): not a PSK length. */
	bad("NVMeTLSkey-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYX:", "32 bytes");
	/* A valid 48-byte key announced as SHA-256, and the other way round. */
	memcpy(s, key_384, sizeof(key_384));
	s[14] = '1';
	bad(s, "hash 01 (SHA-256) must be 32 bytes");
	memcpy(s, key_256, sizeof(key_256));
	s[14] = '2';
	bad(s, "hash 02 (SHA-384) must be 48 bytes");
	/* HH other than 01 and 02. */
	memcpy(s, key_256, sizeof(key_256));
	s[14] = '0';
	bad(s, "01 (SHA-256) or 02 (SHA-384)");
	memcpy(s, key_256, sizeof(key_256));
	s[14] = '3';
	bad(s, "01 (SHA-256) or 02 (SHA-384)");
	bad("NVMeTLSkey-1:1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", "PSK hash");
	/* The trailing colon missing. */
	memcpy(s, key_256, sizeof(key_256));
	s[strlen(s) - 1] = 0;
	bad(s, "end with ':'");
	/* Wrong prefix: a DH-HMAC-CHAP secret, or version 2. */
	bad("DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", "NVMeTLSkey-1:");
	bad("NVMeTLSkey-2:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", "NVMeTLSkey-1:");
	/* Not base64, a stray colon, nothing at all. */
	bad("NVMeTLSkey-1:01:AAEC*wQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", "base64");
	bad("NVMeTLSkey-1:01:AAECAwQFBgcICQoLDA0ODxAREhMU:FRYXGBkaGxwdHh+KfiaR:", "base64");
	bad("NVMeTLSkey-1:01::", "base64");
	bad("NVMeTLSkey-1:01:", "end with ':'");
	bad("", "NVMeTLSkey-1:");
	/* Far too long. */
	bad("NVMeTLSkey-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR"
	    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaRAAAA:",
	    "32 bytes");
}
END_TEST

START_TEST(derive_vectors)
{
	for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		const struct vec *v = &vecs[i];
		struct nvmf_tls_key k;
		struct nvmf_tls_psk p;
		uint8_t want[NVMF_TLS_PSK_MAX];
		const char *why = NULL;

		ck_assert_int_eq(nvmf_tls_key_parse(v->key, &k, &why), 0);
		ck_assert_int_eq(nvmf_tls_derive(&k, H, S, v->version, v->kdf, &p), 0);
		ck_assert_int_eq(p.hash, k.hash);
		ck_assert_int_eq(p.len, k.len);
		hex(v->retained, want, p.len);
		ck_assert_msg(!memcmp(p.retained, want, p.len), "vector %zu: retained PSK", i);
		ck_assert_str_eq(p.identity, v->identity);
		hex(v->psk, want, p.len);
		ck_assert_msg(!memcmp(p.psk, want, p.len), "vector %zu (%s, v%d): TLS PSK", i,
			      nvmf_tls_kdf_name(v->kdf), v->version);
		if (v->version == 1)
			ck_assert_str_eq(p.digest, strrchr(v->identity, ' ') + 1);
	}
}
END_TEST

START_TEST(derive_refuses)
{
	struct nvmf_tls_key k;
	struct nvmf_tls_psk p;
	const char *why = NULL;
	char longnqn[224];

	ck_assert_int_eq(nvmf_tls_key_parse(key_256, &k, &why), 0);
	ck_assert_int_eq(nvmf_tls_derive(&k, H, S, 2, NVMF_TLS_KDF_RFC8446, &p), -EINVAL);
	ck_assert_int_eq(nvmf_tls_derive(&k, "", S, 0, NVMF_TLS_KDF_RFC8446, &p), -EINVAL);
	ck_assert_int_eq(nvmf_tls_derive(&k, H, "nqn.a b", 0, NVMF_TLS_KDF_RFC8446, &p), -EINVAL);
	ck_assert_int_eq(nvmf_tls_derive(&k, H, S, 0, (enum nvmf_tls_kdf)7, &p), -EINVAL);
	/* 223-character NQNs (the most NVMe allows): the version 0 identity
	 * is longer than HkdfLabel's one-byte context length. */
	memset(longnqn, 'n', sizeof(longnqn) - 1);
	longnqn[sizeof(longnqn) - 1] = 0;
	ck_assert_int_eq(nvmf_tls_derive(&k, longnqn, longnqn, 0, NVMF_TLS_KDF_RFC8446, &p),
			 -ENAMETOOLONG);
	for (size_t i = 0; i < sizeof(p); i++)
		ck_assert_int_eq(((uint8_t *)&p)[i], 0);
	/* The compat encoding has no length bytes, and version 1's context
	 * is only the digest. */
	ck_assert_int_eq(nvmf_tls_derive(&k, longnqn, longnqn, 0, NVMF_TLS_KDF_COMPAT, &p), 0);
	ck_assert_int_eq(nvmf_tls_derive(&k, longnqn, longnqn, 1, NVMF_TLS_KDF_RFC8446, &p), 0);
	ck_assert_uint_eq(strlen(p.identity), 9 + 223 + 1 + 223 + 1 + 44);
	k.hash = 3;
	ck_assert_int_eq(nvmf_tls_derive(&k, H, S, 0, NVMF_TLS_KDF_RFC8446, &p), -EINVAL);
	memset(&k, 0, sizeof(k));
	ck_assert_int_eq(nvmf_tls_derive(&k, H, S, 0, NVMF_TLS_KDF_RFC8446, &p), -EINVAL);
}
END_TEST

/* The key file goes through the DH-HMAC-CHAP secret reader: a private file
 * as nvme gen-tls-key > FILE writes it is read; one others can read is
 * refused before its content is looked at. */
START_TEST(key_file_checks)
{
	char path[] = "/tmp/test_tls_psk.XXXXXX", buf[256], why[256];
	struct nvmf_tls_key k;
	const char *bwhy = NULL;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dprintf(fd, "%s\n", key_384), (int)strlen(key_384) + 1);
	close(fd);
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(gw_secret_read_file(path, buf, sizeof(buf), why, sizeof(why)), 0);
	ck_assert_int_eq(nvmf_tls_key_parse(buf, &k, &bwhy), 0);
	ck_assert_int_eq(k.len, 48);
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(gw_secret_read_file(path, buf, sizeof(buf), why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "readable by group or others"));
	unlink(path);
}
END_TEST


/* ---- the handshake, both sides in this process over a BIO pair ---- */

struct pair {
	SSL_CTX *cctx, *sctx;
	SSL *c, *s;
};

static void pair_new(struct pair *pr, const struct nvmf_tls_psk *cp, const struct nvmf_tls_psk *sp)
{
	BIO *cb = NULL, *sb = NULL;

	ck_assert_ptr_nonnull(pr->cctx = SSL_CTX_new(TLS_client_method()));
	ck_assert_ptr_nonnull(pr->sctx = SSL_CTX_new(TLS_server_method()));
	ck_assert_ptr_nonnull(pr->c = SSL_new(pr->cctx));
	ck_assert_ptr_nonnull(pr->s = SSL_new(pr->sctx));
	ck_assert_int_eq(nvmf_tls_ssl_setup(pr->c, cp), 0);
	ck_assert_int_eq(nvmf_tls_ssl_setup(pr->s, sp), 0);
	ck_assert_int_eq(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
	SSL_set_bio(pr->c, cb, cb);
	SSL_set_bio(pr->s, sb, sb);
	SSL_set_connect_state(pr->c);
	SSL_set_accept_state(pr->s);
}

/* Steps both sides until both are done (1) or one fails (0). */
static int pair_handshake(struct pair *pr)
{
	int cdone = 0, sdone = 0;

	for (int i = 0; i < 20 && !(cdone && sdone); i++) {
		if (!cdone) {
			int r = SSL_do_handshake(pr->c);
			if (r == 1)
				cdone = 1;
			else if (SSL_get_error(pr->c, r) != SSL_ERROR_WANT_READ)
				return 0;
		}
		if (!sdone) {
			int r = SSL_do_handshake(pr->s);
			if (r == 1)
				sdone = 1;
			else if (SSL_get_error(pr->s, r) != SSL_ERROR_WANT_READ)
				return 0;
		}
	}
	return cdone && sdone;
}

static void pair_free(struct pair *pr)
{
	SSL_free(pr->c);
	SSL_free(pr->s);
	SSL_CTX_free(pr->cctx);
	SSL_CTX_free(pr->sctx);
}

static void derive(const char *key, int version, struct nvmf_tls_psk *p)
{
	struct nvmf_tls_key k;
	const char *why = NULL;

	ck_assert_int_eq(nvmf_tls_key_parse(key, &k, &why), 0);
	ck_assert_int_eq(nvmf_tls_derive(&k, H, S, version, NVMF_TLS_KDF_RFC8446, p), 0);
}

START_TEST(handshake_same_key)
{
	static const char *const keys[] = { key_256, key_384 };
	static const char *const suites[] = { "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384" };
	struct nvmf_tls_psk p;
	struct pair pr;
	char buf[16];

	derive(keys[_i], 0, &p);
	pair_new(&pr, &p, &p);
	ck_assert_int_eq(pair_handshake(&pr), 1);
	ck_assert_str_eq(SSL_get_version(pr.c), "TLSv1.3");
	ck_assert_str_eq(SSL_CIPHER_get_name(SSL_get_current_cipher(pr.c)), suites[_i]);
	ck_assert_str_eq(SSL_CIPHER_get_name(SSL_get_current_cipher(pr.s)), suites[_i]);
	/* Records flow both ways under the handshake's keys. */
	ck_assert_int_eq(SSL_write(pr.c, "icreq", 5), 5);
	ck_assert_int_eq(SSL_read(pr.s, buf, sizeof(buf)), 5);
	ck_assert_mem_eq(buf, "icreq", 5);
	ck_assert_int_eq(SSL_write(pr.s, "icresp", 6), 6);
	ck_assert_int_eq(SSL_read(pr.c, buf, sizeof(buf)), 6);
	ck_assert_mem_eq(buf, "icresp", 6);
	/* No certificate was involved: the PSK authenticated the server. */
	ck_assert_ptr_null(SSL_get0_peer_certificate(pr.c));
	ck_assert(nvmf_tls_ssl_psk_used(pr.c));
	pair_free(&pr);
}
END_TEST

START_TEST(handshake_wrong_key)
{
	struct nvmf_tls_psk cp, sp;
	struct pair pr;
	char why[256];

	/* Same identity, a different key: the server cannot verify the
	 * client's binder. */
	derive(key_256, 0, &cp);
	derive(key_md, 0, &sp);
	ck_assert_str_eq(cp.identity, sp.identity);
	pair_new(&pr, &cp, &sp);
	ERR_clear_error();
	ck_assert_int_eq(pair_handshake(&pr), 0);
	nvmf_tls_ssl_why(why, sizeof(why));
	ck_assert_msg(strstr(why, "different TLS key"), "why: %s", why);
	pair_free(&pr);
}
END_TEST

START_TEST(handshake_wrong_identity)
{
	struct nvmf_tls_psk cp, sp;
	struct pair pr;
	char why[256];

	/* The same key under version 1's identity: the server knows only the
	 * version 0 one, and has no certificate to fall back on. */
	derive(key_256, 1, &cp);
	derive(key_256, 0, &sp);
	pair_new(&pr, &cp, &sp);
	ERR_clear_error();
	ck_assert_int_eq(pair_handshake(&pr), 0);
	ck_assert_ptr_nonnull(nvmf_tls_ssl_why(why, sizeof(why)));
	ck_assert_msg(strstr(why, "PSK identity"), "why: %s", why);
	pair_free(&pr);
}
END_TEST

/* A self-signed certificate and its key, for a server without the PSK. */
static void impostor_cert(SSL_CTX *ctx)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();

	ck_assert_ptr_nonnull(k);
	ck_assert_ptr_nonnull(x);
	ck_assert_int_eq(X509_set_version(x, 2), 1);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	ck_assert_int_eq(X509_set_pubkey(x, k), 1);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"impostor", -1, -1, 0);
	ck_assert_int_eq(X509_set_issuer_name(x, n), 1);
	ck_assert_int_gt(X509_sign(x, k, EVP_sha256()), 0);
	ck_assert_int_eq(SSL_CTX_use_certificate(ctx, x), 1);
	ck_assert_int_eq(SSL_CTX_use_PrivateKey(ctx, k), 1);
	X509_free(x);
	EVP_PKEY_free(k);
}

/* A server without the key that ignores the client's PSK and answers
 * with a certificate handshake: the client must refuse it.  It did not:
 * OpenSSL's client verifies nothing by default, and the handshake
 * completed with the impostor (reused 0, its certificate as the peer's). */
START_TEST(handshake_impostor_certificate)
{
	struct nvmf_tls_psk cp;
	struct pair pr;
	BIO *cb = NULL, *sb = NULL;
	char why[256];

	derive(key_256, 0, &cp);
	ck_assert_ptr_nonnull(pr.cctx = SSL_CTX_new(TLS_client_method()));
	ck_assert_ptr_nonnull(pr.sctx = SSL_CTX_new(TLS_server_method()));
	impostor_cert(pr.sctx);
	ck_assert_ptr_nonnull(pr.c = SSL_new(pr.cctx));
	ck_assert_ptr_nonnull(pr.s = SSL_new(pr.sctx));
	ck_assert_int_eq(nvmf_tls_ssl_setup(pr.c, &cp), 0);
	SSL_set_min_proto_version(pr.s, TLS1_3_VERSION);
	ck_assert_int_eq(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
	SSL_set_bio(pr.c, cb, cb);
	SSL_set_bio(pr.s, sb, sb);
	SSL_set_connect_state(pr.c);
	SSL_set_accept_state(pr.s);
	ERR_clear_error();
	ck_assert_int_eq(pair_handshake(&pr), 0);
	nvmf_tls_ssl_why(why, sizeof(why));
	ck_assert_msg(strstr(why, "certificate instead of using the PSK"), "why: %s", why);
	pair_free(&pr);

	/* The second line: were verification ever off, the finished
	 * handshake is still not the PSK's. */
	ck_assert_ptr_nonnull(pr.cctx = SSL_CTX_new(TLS_client_method()));
	ck_assert_ptr_nonnull(pr.sctx = SSL_CTX_new(TLS_server_method()));
	impostor_cert(pr.sctx);
	ck_assert_ptr_nonnull(pr.c = SSL_new(pr.cctx));
	ck_assert_ptr_nonnull(pr.s = SSL_new(pr.sctx));
	ck_assert_int_eq(nvmf_tls_ssl_setup(pr.c, &cp), 0);
	SSL_set_verify(pr.c, SSL_VERIFY_NONE, NULL);
	ck_assert_int_eq(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
	SSL_set_bio(pr.c, cb, cb);
	SSL_set_bio(pr.s, sb, sb);
	SSL_set_connect_state(pr.c);
	SSL_set_accept_state(pr.s);
	ck_assert_int_eq(pair_handshake(&pr), 1);
	ck_assert(!nvmf_tls_ssl_psk_used(pr.c));
	pair_free(&pr);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tls_psk");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, parse_vectors);
	tcase_add_test(tc, parse_malformed);
	tcase_add_test(tc, derive_vectors);
	tcase_add_test(tc, derive_refuses);
	tcase_add_test(tc, key_file_checks);
	tcase_add_loop_test(tc, handshake_same_key, 0, 2);
	tcase_add_test(tc, handshake_wrong_key);
	tcase_add_test(tc, handshake_wrong_identity);
	tcase_add_test(tc, handshake_impostor_certificate);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
