/* DH-HMAC-CHAP: the secret format, the transforms and the transaction.
 * Expected values are computed here from the specification's definitions
 * with OpenSSL's primitives directly (or come from nvme-cli), never from
 * the functions under test; the test plays the controller's side. */
#include "transports/auth/auth.h"
#include "transports/ctrl.h"
#include "transports/nvme_spec.h"
#include "transports/transport.h"
#include "unit_skip.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:test"
#define SUBNQN "nqn.2026-01.io.example:auth"

/* nvme gen-dhchap-key -s 000102..1f -m 0 */
static const char key00[] = "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";
/* nvme gen-dhchap-key -s 000102..1f -m 1 -n HOSTNQN: nvme-cli prints the
 * transformed secret, HMAC-SHA256(00..1f, HOSTNQN "NVMe-over-Fabrics"). */
static const char key01[] = "DHHC-1:01:WulleCBkG4oCs0iIC3Cit9gBDCLWiZ9PNXuhqytWkBIZkvGy:";
static const uint8_t key01_raw[32] = {
	0x5a, 0xe9, 0x65, 0x78, 0x20, 0x64, 0x1b, 0x8a, 0x02, 0xb3, 0x48, 0x88, 0x0b, 0x70, 0xa2, 0xb7,
	0xd8, 0x01, 0x0c, 0x22, 0xd6, 0x89, 0x9f, 0x4f, 0x35, 0x7b, 0xa1, 0xab, 0x2b, 0x56, 0x90, 0x12,
};
/* nvme gen-dhchap-key -m 2 and -m 3 -l 64 */
static const char key02[] =
	"DHHC-1:02:VVs4WFDR4he/PEdyN2aRGxyq3QQfAG0IjOrZpY5SEpy3sNO4KskXiBSsmbv1QV5qhB1o3g==:";
static const char key03[] = "DHHC-1:03:J+oVHfONDF0ApBm0X0txzRS+ssen0hflDlm4K8vI2PIuvziOe79rpJrbdGG"
			    "bkcZzjyv/OE3n8cySfs8+C5k/cQ454Ic=:";

static const EVP_MD *md_of(uint8_t h)
{
	return h == 1 ? EVP_sha256() : h == 2 ? EVP_sha384() : EVP_sha512();
}

static void ref_hmac(uint8_t h, const void *k, size_t kl, const void *d, size_t dl, uint8_t *out)
{
	unsigned ol = 0;
	ck_assert_ptr_nonnull(HMAC(md_of(h), k, (int)kl, d, dl, out, &ol));
}

/* The spec's response: HMAC(Kt, C || S || T || SC_C || role || NQN1 || 00h || NQN2). */
static void ref_response(uint8_t h, const uint8_t *kt, size_t ktl, const uint8_t *c, uint32_t seq,
			 uint16_t tid, const char *role, const char *a, const char *b, uint8_t *out)
{
	uint8_t m[1024];
	size_t hl = (size_t)EVP_MD_get_size(md_of(h)), o = 0;
	memcpy(m, c, hl);
	o += hl;
	uint8_t le[7] = { seq & 0xff, (seq >> 8) & 0xff, (seq >> 16) & 0xff, seq >> 24,
			  tid & 0xff, tid >> 8, 0 };
	memcpy(m + o, le, 7);
	o += 7;
	memcpy(m + o, role, strlen(role));
	o += strlen(role);
	memcpy(m + o, a, strlen(a));
	o += strlen(a);
	m[o++] = 0;
	memcpy(m + o, b, strlen(b));
	o += strlen(b);
	ref_hmac(h, kt, ktl, m, o, out);
}

static size_t ref_transform(const struct nvmf_dhchap_key *k, const char *nqn, uint8_t *out)
{
	char m[512];
	if (!k->hmac) {
		memcpy(out, k->key, k->len);
		return k->len;
	}
	snprintf(m, sizeof(m), "%sNVMe-over-Fabrics", nqn);
	ref_hmac(k->hmac, k->key, k->len, m, strlen(m), out);
	return (size_t)EVP_MD_get_size(md_of(k->hmac));
}

/* H(Ks) as HMAC key over the challenge. */
static void ref_augment(uint8_t h, const uint8_t *ks, size_t kl, const uint8_t *c, uint8_t *out)
{
	uint8_t hk[64];
	size_t hl = (size_t)EVP_MD_get_size(md_of(h));
	ck_assert(EVP_Digest(ks, kl, hk, NULL, md_of(h), NULL));
	ref_hmac(h, hk, hl, c, hl, out);
}

/* ---- the secret ---- */

START_TEST(key_parse_vectors)
{
	struct nvmf_dhchap_key k;
	const char *why = NULL;

	ck_assert_int_eq(nvmf_dhchap_key_parse(key00, &k, &why), 0);
	ck_assert_int_eq(k.hmac, 0);
	ck_assert_int_eq(k.len, 32);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(k.key[i], i);
	ck_assert_int_eq(nvmf_dhchap_key_parse(key01, &k, &why), 0);
	ck_assert_int_eq(k.hmac, 1);
	ck_assert_mem_eq(k.key, key01_raw, 32);
	ck_assert_int_eq(nvmf_dhchap_key_parse(key02, &k, &why), 0);
	ck_assert_int_eq(k.hmac, 2);
	ck_assert_int_eq(k.len, 48);
	ck_assert_int_eq(nvmf_dhchap_key_parse(key03, &k, &why), 0);
	ck_assert_int_eq(k.hmac, 3);
	ck_assert_int_eq(k.len, 64);
	/* The trailing ':' is optional, as for the kernel. */
	char nocolon[sizeof(key00)];
	memcpy(nocolon, key00, sizeof(key00));
	nocolon[strlen(nocolon) - 1] = 0;
	ck_assert_int_eq(nvmf_dhchap_key_parse(nocolon, &k, &why), 0);
}
END_TEST

START_TEST(key_parse_errors)
{
	struct nvmf_dhchap_key k;
	const char *why = NULL;
	char bad[sizeof(key00)];

	/* One base64 character changed: the CRC catches it. */
	memcpy(bad, key00, sizeof(key00));
	bad[12] = bad[12] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(nvmf_dhchap_key_parse(bad, &k, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "CRC"));
	ck_assert_int_eq(k.len, 0);
	ck_assert_int_eq(nvmf_dhchap_key_parse("secret", &k, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "DHHC-1:"));
	ck_assert_int_eq(nvmf_dhchap_key_parse("DHHC-1:04:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", &k, &why), -EINVAL);
	/* 24 bytes: not a DH-HMAC-CHAP key length. */
	ck_assert_int_eq(nvmf_dhchap_key_parse("DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYX:", &k, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "32, 48 or 64"));
	ck_assert_int_eq(nvmf_dhchap_key_parse("DHHC-1:00:AAEC*wQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:", &k, &why), -EINVAL);
	ck_assert_int_eq(nvmf_dhchap_key_parse("DHHC-1:00:", &k, &why), -EINVAL);
}
END_TEST

START_TEST(transform_matches_nvme_cli)
{
	struct nvmf_dhchap_key k = { .hmac = 1, .len = 32 };
	uint8_t out[64];
	size_t n = 0;

	for (int i = 0; i < 32; i++)
		k.key[i] = (uint8_t)i;
	ck_assert_int_eq(nvmf_dhchap_transform_key(&k, HOSTNQN, out, &n), 0);
	ck_assert_uint_eq(n, 32);
	ck_assert_mem_eq(out, key01_raw, 32);
	/* 00: the key as it is. */
	k.hmac = 0;
	ck_assert_int_eq(nvmf_dhchap_transform_key(&k, HOSTNQN, out, &n), 0);
	ck_assert_mem_eq(out, k.key, 32);
	/* SHA-512 with a 64-byte key. */
	struct nvmf_dhchap_key k3;
	const char *why;
	uint8_t ref[64];
	ck_assert_int_eq(nvmf_dhchap_key_parse(key03, &k3, &why), 0);
	ck_assert_int_eq(nvmf_dhchap_transform_key(&k3, SUBNQN, out, &n), 0);
	ck_assert_uint_eq(n, ref_transform(&k3, SUBNQN, ref));
	ck_assert_mem_eq(out, ref, 64);
}
END_TEST

START_TEST(response_hmac)
{
	for (uint8_t h = 1; h <= 3; h++) {
		uint8_t kt[64], c[64], out[64], ref[64];
		size_t hl = nvmf_dhchap_hash_len(h);
		for (int i = 0; i < 64; i++) {
			kt[i] = (uint8_t)(0xa0 + i);
			c[i] = (uint8_t)(3 * i + 1);
		}
		ck_assert_int_eq(nvmf_dhchap_response(h, kt, hl, c, 0x01020304, 0x0506, 0, "HostHost",
						      HOSTNQN, SUBNQN, out), 0);
		ref_response(h, kt, hl, c, 0x01020304, 0x0506, "HostHost", HOSTNQN, SUBNQN, ref);
		ck_assert_mem_eq(out, ref, hl);
		ck_assert_int_eq(nvmf_dhchap_response(h, kt, hl, c, 7, 9, 0, "Controller", SUBNQN,
						      HOSTNQN, out), 0);
		ref_response(h, kt, hl, c, 7, 9, "Controller", SUBNQN, HOSTNQN, ref);
		ck_assert_mem_eq(out, ref, hl);
		/* The augmented challenge. */
		uint8_t ks[256];
		memset(ks, 0x5c, sizeof(ks));
		ck_assert_int_eq(nvmf_dhchap_augment(h, ks, sizeof(ks), c, out), 0);
		ref_augment(h, ks, sizeof(ks), c, ref);
		ck_assert_mem_eq(out, ref, hl);
	}
}
END_TEST

/* ---- Diffie-Hellman ---- */

START_TEST(dh_fixed_key_against_generator)
{
	static const uint8_t priv[32] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
					  0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xf0, 0x01,
					  0x12, 0x23, 0x34, 0x45, 0x56, 0x67, 0x78, 0x89,
					  0x9a, 0xab, 0xbc, 0xcd, 0xde, 0xef, 0xf1, 0x02 };
	uint8_t g[256] = { 0 }, pub[256], sec[256];
	struct nvmf_dh *dh;

	ck_assert_int_eq(nvmf_dh_new(NVMF_DHCHAP_DH_2048, priv, sizeof(priv), &dh), 0);
	ck_assert_int_eq(nvmf_dh_public(dh, pub, sizeof(pub)), 0);
	/* The peer value g = 2 (= g^1): the shared secret is g^x, our own
	 * public value, whatever x is. */
	g[255] = 2;
	ck_assert_int_eq(nvmf_dh_derive(dh, g, sizeof(g), sec, sizeof(sec)), 0);
	ck_assert_mem_eq(sec, pub, sizeof(pub));
	/* Out-of-range peer values are refused. */
	uint8_t one[256] = { 0 };
	one[255] = 1;
	ck_assert_int_eq(nvmf_dh_derive(dh, one, sizeof(one), sec, sizeof(sec)), -EPROTO);
	nvmf_dh_free(dh);
}
END_TEST

START_TEST(dh_two_sides_agree)
{
	for (uint8_t gid = NVMF_DHCHAP_DH_2048; gid <= NVMF_DHCHAP_DH_4096; gid++) {
		size_t n = (size_t)nvmf_dh_group_bytes(gid);
		uint8_t pa[1024], pb[1024], sa[1024], sb[1024];
		struct nvmf_dh *a, *b;
		ck_assert_int_eq(nvmf_dh_new(gid, NULL, 0, &a), 0);
		ck_assert_int_eq(nvmf_dh_new(gid, NULL, 0, &b), 0);
		ck_assert_int_eq(nvmf_dh_public(a, pa, n), 0);
		ck_assert_int_eq(nvmf_dh_public(b, pb, n), 0);
		ck_assert_int_eq(nvmf_dh_derive(a, pb, n, sa, n), 0);
		ck_assert_int_eq(nvmf_dh_derive(b, pa, n, sb, n), 0);
		ck_assert_mem_eq(sa, sb, n);
		ck_assert(memcmp(pa, pb, n) != 0);
		nvmf_dh_free(a);
		nvmf_dh_free(b);
	}
}
END_TEST

/* ---- the transaction, against a controller played here ---- */

struct ctl {
	uint8_t hashid, dhgid;
	struct nvmf_dhchap_key hk, ck;
	struct nvmf_dh *dh;
	uint8_t c1[64];
	uint32_t s1;
	uint8_t skey[1024];
	size_t sklen;
};

static void put_challenge(struct nvmf_auth *a, struct ctl *t, uint16_t tid)
{
	struct nvmf_auth_challenge ch = { .auth_type = NVMF_AUTH_DHCHAP_MESSAGES,
					  .auth_id = NVMF_AUTH_MSG_CHALLENGE };
	size_t hl = nvmf_dhchap_hash_len(t->hashid);
	int gb = nvmf_dh_group_bytes(t->dhgid);

	ch.t_id = tid;
	ch.hl = (uint8_t)hl;
	ch.hashid = t->hashid;
	ch.dhgid = t->dhgid;
	ch.dhvlen = (uint16_t)gb;
	ch.seqnum = t->s1 = 0x1234abcd;
	for (size_t i = 0; i < hl; i++)
		t->c1[i] = (uint8_t)(0x40 + i);
	ck_assert_int_eq(a->state, NVMF_AUTH_RECV_CHALLENGE);
	ck_assert_uint_eq(a->len, NVMF_AUTH_BUF_SIZE);
	memcpy(a->buf, &ch, sizeof(ch));
	memcpy(a->buf + sizeof(ch), t->c1, hl);
	if (gb) {
		ck_assert_int_eq(nvmf_dh_new(t->dhgid, NULL, 0, &t->dh), 0);
		ck_assert_int_eq(nvmf_dh_public(t->dh, a->buf + sizeof(ch) + hl, (size_t)gb), 0);
	}
}

/* Checks the host's Reply as nvmet would; returns C2 and S2. */
static void check_reply(struct nvmf_auth *a, struct ctl *t, uint16_t tid, bool bidi,
			uint8_t *c2, uint32_t *s2)
{
	const struct nvmf_auth_reply *r = (const struct nvmf_auth_reply *)a->buf;
	size_t hl = nvmf_dhchap_hash_len(t->hashid);
	int gb = nvmf_dh_group_bytes(t->dhgid);
	uint8_t kt[64], chal[64], want[64];
	size_t ktl;

	ck_assert_int_eq(a->state, NVMF_AUTH_SEND_REPLY);
	ck_assert_uint_eq(a->len, sizeof(*r) + 2 * hl + (size_t)gb);
	ck_assert_int_eq(r->auth_type, NVMF_AUTH_DHCHAP_MESSAGES);
	ck_assert_int_eq(r->auth_id, NVMF_AUTH_MSG_REPLY);
	ck_assert_int_eq(r->t_id, tid);
	ck_assert_int_eq(r->hl, hl);
	ck_assert_int_eq(r->dhvlen, gb);
	ck_assert_int_eq(r->cvalid, bidi);
	ck_assert(bidi ? r->seqnum != 0 : r->seqnum == 0);
	t->sklen = 0;
	if (gb) {
		t->sklen = (size_t)gb;
		ck_assert_int_eq(nvmf_dh_derive(t->dh, a->buf + sizeof(*r) + 2 * hl, (size_t)gb,
						t->skey, t->sklen), 0);
	}
	ktl = ref_transform(&t->hk, HOSTNQN, kt);
	if (gb)
		ref_augment(t->hashid, t->skey, t->sklen, t->c1, chal);
	else
		memcpy(chal, t->c1, hl);
	ref_response(t->hashid, kt, ktl, chal, t->s1, tid, "HostHost", HOSTNQN, SUBNQN, want);
	ck_assert_mem_eq(a->buf + sizeof(*r), want, hl);
	memcpy(c2, a->buf + sizeof(*r) + hl, hl);
	*s2 = r->seqnum;
}

static void put_success1(struct nvmf_auth *a, struct ctl *t, uint16_t tid, bool bidi,
			 const uint8_t *c2, uint32_t s2, bool corrupt)
{
	struct nvmf_auth_success1 s = { .auth_type = NVMF_AUTH_DHCHAP_MESSAGES,
					.auth_id = NVMF_AUTH_MSG_SUCCESS1 };
	size_t hl = nvmf_dhchap_hash_len(t->hashid);
	uint8_t kt[64], chal[64], resp[64] = { 0 };

	s.t_id = tid;
	s.hl = (uint8_t)hl;
	s.rvalid = bidi;
	if (bidi) {
		size_t ktl = ref_transform(&t->ck, SUBNQN, kt);
		if (t->sklen)
			ref_augment(t->hashid, t->skey, t->sklen, c2, chal);
		else
			memcpy(chal, c2, hl);
		ref_response(t->hashid, kt, ktl, chal, s2, tid, "Controller", SUBNQN, HOSTNQN, resp);
		if (corrupt)
			resp[0] ^= 1;
	}
	ck_assert_int_eq(a->state, NVMF_AUTH_RECV_SUCCESS1);
	memcpy(a->buf, &s, sizeof(s));
	memcpy(a->buf + sizeof(s), resp, hl);
}

static struct nvmf_auth *start(struct ctl *t, const char *hkey, const char *ckey, uint16_t tid)
{
	struct nvmf_auth *a = calloc(1, sizeof(*a));
	const char *why;

	ck_assert_int_eq(nvmf_dhchap_key_parse(hkey, &t->hk, &why), 0);
	memset(&t->ck, 0, sizeof(t->ck));
	if (ckey)
		ck_assert_int_eq(nvmf_dhchap_key_parse(ckey, &t->ck, &why), 0);
	struct nvmf_auth_params p = { .name = "test q0", .hostnqn = HOSTNQN, .subnqn = SUBNQN,
				      .host_key = &t->hk, .ctrl_key = &t->ck, .tid = tid };
	ck_assert_int_eq(nvmf_auth_begin(a, &p), 0);
	return a;
}

static void run_ok(uint8_t hashid, uint8_t dhgid, const char *hkey, const char *ckey)
{
	struct ctl t = { .hashid = hashid, .dhgid = dhgid };
	uint16_t tid = 0x4242;
	struct nvmf_auth *a = start(&t, hkey, ckey, tid);
	const struct nvmf_auth_negotiate *n = (const void *)a->buf;
	uint8_t c2[64];
	uint32_t s2;

	ck_assert_int_eq(a->state, NVMF_AUTH_SEND_NEGOTIATE);
	ck_assert_uint_eq(a->len, 72);
	ck_assert_int_eq(n->auth_type, NVMF_AUTH_COMMON_MESSAGES);
	ck_assert_int_eq(n->auth_id, NVMF_AUTH_MSG_NEGOTIATE);
	ck_assert_int_eq(n->t_id, tid);
	ck_assert_int_eq(n->napd, 1);
	ck_assert_int_eq(n->proto[0].authid, 1);
	ck_assert_int_eq(n->proto[0].halen, 3);
	ck_assert_int_eq(n->proto[0].dhlen, 6);
	ck_assert_int_eq(n->proto[0].idlist[2], NVMF_DHCHAP_SHA512);
	ck_assert_int_eq(n->proto[0].idlist[35], NVMF_DHCHAP_DH_8192);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_challenge(a, &t, tid);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	check_reply(a, &t, tid, ckey != NULL, c2, &s2);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_success1(a, &t, tid, ckey != NULL, c2, s2, false);
	if (ckey) {
		ck_assert_int_eq(nvmf_auth_step(a), 1);
		ck_assert_int_eq(a->state, NVMF_AUTH_SEND_SUCCESS2);
		ck_assert_uint_eq(a->len, 16);
		ck_assert_int_eq(a->buf[1], NVMF_AUTH_MSG_SUCCESS2);
	}
	ck_assert_int_eq(nvmf_auth_step(a), 0);
	ck_assert_int_eq(a->state, NVMF_AUTH_DONE);
	nvmf_dh_free(t.dh);
	nvmf_auth_clear(a);
	free(a);
}

START_TEST(txn_sha256_null) { run_ok(NVMF_DHCHAP_SHA256, NVMF_DHCHAP_DH_NULL, key00, NULL); }
END_TEST
START_TEST(txn_sha384_2048) { run_ok(NVMF_DHCHAP_SHA384, NVMF_DHCHAP_DH_2048, key01, NULL); }
END_TEST
START_TEST(txn_sha512_4096_bidi) { run_ok(NVMF_DHCHAP_SHA512, NVMF_DHCHAP_DH_4096, key03, key02); }
END_TEST
START_TEST(txn_sha256_null_bidi) { run_ok(NVMF_DHCHAP_SHA256, NVMF_DHCHAP_DH_NULL, key02, key00); }
END_TEST

/* Advances to the challenge and lets mutate() spoil it: the host sends
 * Failure2 with exp, then the transaction ends with err. */
static void run_bad_challenge(void (*mutate)(struct nvmf_auth *a), uint8_t exp, int err)
{
	struct ctl t = { .hashid = NVMF_DHCHAP_SHA256, .dhgid = NVMF_DHCHAP_DH_2048 };
	struct nvmf_auth *a = start(&t, key00, NULL, 7);
	const struct nvmf_auth_failure *f = (const void *)a->buf;

	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_challenge(a, &t, 7);
	mutate(a);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	ck_assert_int_eq(a->state, NVMF_AUTH_SEND_FAILURE2);
	ck_assert_uint_eq(a->len, 8);
	ck_assert_int_eq(f->auth_type, NVMF_AUTH_COMMON_MESSAGES);
	ck_assert_int_eq(f->auth_id, NVMF_AUTH_MSG_FAILURE2);
	ck_assert_int_eq(f->t_id, 7);
	ck_assert_int_eq(f->rescode, 1);
	ck_assert_int_eq(f->rescode_exp, exp);
	ck_assert_int_eq(nvmf_auth_step(a), err);
	ck_assert_int_eq(a->state, NVMF_AUTH_FAILED);
	nvmf_dh_free(t.dh);
	nvmf_auth_clear(a);
	free(a);
}

static void m_hl(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->hl = 20; }
static void m_hash(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->hashid = 9; }
static void m_group(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->dhgid = 6; }
static void m_dhvlen(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->dhvlen = 4000; }
static void m_dhzero(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->dhvlen = 0; }
static void m_tid(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->t_id = 8; }
static void m_msg(struct nvmf_auth *a) { ((struct nvmf_auth_challenge *)a->buf)->auth_id = 3; }
static void m_dhval(struct nvmf_auth *a)
{
	/* The value 1: outside 2..p-2. */
	memset(a->buf + 16 + 32, 0, 256);
	a->buf[16 + 32 + 255] = 1;
}

START_TEST(challenge_malformed)
{
	run_bad_challenge(m_hl, NVMF_AUTH_FAIL_HASH_UNUSABLE, -EPROTO);
	run_bad_challenge(m_hash, NVMF_AUTH_FAIL_HASH_UNUSABLE, -EPROTO);
	run_bad_challenge(m_group, NVMF_AUTH_FAIL_DHGROUP_UNUSABLE, -EPROTO);
	run_bad_challenge(m_dhvlen, NVMF_AUTH_FAIL_INCORRECT_PAYLOAD, -EPROTO);
	run_bad_challenge(m_dhzero, NVMF_AUTH_FAIL_INCORRECT_PAYLOAD, -EPROTO);
	run_bad_challenge(m_tid, NVMF_AUTH_FAIL_INCORRECT_MESSAGE, -EPROTO);
	run_bad_challenge(m_msg, NVMF_AUTH_FAIL_INCORRECT_MESSAGE, -EPROTO);
	run_bad_challenge(m_dhval, NVMF_AUTH_FAIL_INCORRECT_PAYLOAD, -EPROTO);
}
END_TEST

/* The controller rejects the host's response: Failure1, no Failure2. */
START_TEST(failure1_from_controller)
{
	struct ctl t = { .hashid = NVMF_DHCHAP_SHA256, .dhgid = NVMF_DHCHAP_DH_NULL };
	struct nvmf_auth *a = start(&t, key00, NULL, 3);
	struct nvmf_auth_failure f = { .auth_type = NVMF_AUTH_COMMON_MESSAGES,
				       .auth_id = NVMF_AUTH_MSG_FAILURE1, .t_id = 3,
				       .rescode = 1, .rescode_exp = NVMF_AUTH_FAIL_FAILED };

	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_challenge(a, &t, 3);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	ck_assert_int_eq(a->state, NVMF_AUTH_RECV_SUCCESS1);
	memcpy(a->buf, &f, sizeof(f));
	ck_assert_int_eq(nvmf_auth_step(a), -EACCES);
	ck_assert_int_eq(a->state, NVMF_AUTH_FAILED);
	ck_assert_int_eq(nvmf_auth_step(a), -EINVAL); /* nothing more to do */
	nvmf_auth_clear(a);
	free(a);

	/* Failure1 in place of the challenge (e.g. no usable hash). */
	a = start(&t, key00, NULL, 4);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	f.t_id = 4;
	f.rescode_exp = NVMF_AUTH_FAIL_HASH_UNUSABLE;
	memcpy(a->buf, &f, sizeof(f));
	ck_assert_int_eq(nvmf_auth_step(a), -EACCES);
	nvmf_auth_clear(a);
	free(a);
}
END_TEST

/* Bidirectional: a controller that does not know the controller key. */
START_TEST(controller_response_wrong)
{
	struct ctl t = { .hashid = NVMF_DHCHAP_SHA384, .dhgid = NVMF_DHCHAP_DH_2048 };
	struct nvmf_auth *a = start(&t, key01, key02, 11);
	uint8_t c2[64];
	uint32_t s2;

	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_challenge(a, &t, 11);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	check_reply(a, &t, 11, true, c2, &s2);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_success1(a, &t, 11, true, c2, s2, true);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	ck_assert_int_eq(a->state, NVMF_AUTH_SEND_FAILURE2);
	ck_assert_int_eq(a->buf[1], NVMF_AUTH_MSG_FAILURE2);
	ck_assert_int_eq(a->buf[7], NVMF_AUTH_FAIL_FAILED);
	ck_assert_int_eq(nvmf_auth_step(a), -EACCES);
	/* Success1 without a response at all is refused the same way. */
	nvmf_dh_free(t.dh);
	t.dh = NULL;
	nvmf_auth_clear(a);
	free(a);
	a = start(&t, key01, key02, 12);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_challenge(a, &t, 12);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	check_reply(a, &t, 12, true, c2, &s2);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_success1(a, &t, 12, false, c2, s2, false);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	ck_assert_int_eq(a->state, NVMF_AUTH_SEND_FAILURE2);
	ck_assert_int_eq(nvmf_auth_step(a), -EACCES);
	nvmf_dh_free(t.dh);
	t.dh = NULL;
	nvmf_auth_clear(a);
	free(a);
	/* No controller key, yet Success1 carries a response (rvalid): an
	 * answer to a challenge never sent.  It was taken as success. */
	a = start(&t, key01, NULL, 13);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_challenge(a, &t, 13);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	check_reply(a, &t, 13, false, c2, &s2);
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	put_success1(a, &t, 13, false, c2, s2, false);
	((struct nvmf_auth_success1 *)a->buf)->rvalid = 1;
	ck_assert_int_eq(nvmf_auth_step(a), 1);
	ck_assert_int_eq(a->state, NVMF_AUTH_SEND_FAILURE2);
	ck_assert_int_eq(a->buf[7], NVMF_AUTH_FAIL_INCORRECT_MESSAGE);
	ck_assert_int_eq(nvmf_auth_step(a), -EPROTO);
	nvmf_dh_free(t.dh);
	nvmf_auth_clear(a);
	free(a);
}
END_TEST

START_TEST(no_host_key)
{
	struct nvmf_dhchap_key none = { 0 };
	struct nvmf_auth *a = calloc(1, sizeof(*a));
	struct nvmf_auth_params p = { .name = "test q0", .hostnqn = HOSTNQN, .subnqn = SUBNQN,
				      .host_key = &none, .ctrl_key = &none };

	ck_assert_int_eq(nvmf_auth_begin(a, &p), -ENOKEY);
	ck_assert_int_eq(a->state, NVMF_AUTH_FAILED);
	free(a);
}
END_TEST

/* ---- the glue: Authentication Send/Receive on a queue ---- */

static struct reactor gr;
static struct nvmf_ctrl gc;
static struct nvmf_queue gq;
static struct nvmf_req *gpending;
static unsigned gsubmits, gdone_count;
static int gdone_err;
static struct nvmf_auth_cmd gcmd;
static uint8_t gsent[NVMF_AUTH_BUF_SIZE];

static int glue_submit(struct nvmf_queue *fq, struct nvmf_req *req)
{
	(void)fq;
	ck_assert_ptr_null(gpending);
	gsubmits++;
	memcpy(&gcmd, &req->sqe, sizeof(gcmd));
	ck_assert_uint_eq(req->iovcnt, 1);
	if (gcmd.fctype != NVMF_FCTYPE_CONNECT)
		ck_assert_uint_eq(req->data_len, gcmd.len);
	if (req->host_to_ctrl)
		memcpy(gsent, req->iov[0].iov_base, req->data_len);
	gpending = req;
	return 0;
}

static void glue_shutdown(struct nvmf_queue *fq) { nvmf_queue_transport_quiesced(fq); }
static void glue_free(struct nvmf_queue *fq) { fq->tp = NULL; }

static const struct nvmf_transport_ops glue_ops = {
	.name = "fake",
	.submit = glue_submit,
	.queue_shutdown = glue_shutdown,
	.queue_free = glue_free,
};

static void glue_done(struct nvmf_queue *fq, int err)
{
	ck_assert_ptr_eq(fq, &gq);
	gdone_count++;
	gdone_err = err;
}

/* A queue in FABRIC_CONNECT of a controller with the host key key00. */
static void glue_setup(void)
{
	struct nvmf_path_opts o = { .trtype = NVMF_TR_TCP, .tos = -1 };
	const char *why;

	memset(&gc, 0, sizeof(gc));
	snprintf(gc.opts.name, sizeof(gc.opts.name), "glue");
	snprintf(gc.opts.hostnqn, sizeof(gc.opts.hostnqn), "%s", HOSTNQN);
	snprintf(gc.opts.subnqn, sizeof(gc.opts.subnqn), "%s", SUBNQN);
	ck_assert_int_eq(nvmf_dhchap_key_parse(key00, &gc.opts.dhchap_key, &why), 0);
	ck_assert_int_eq(reactor_init(&gr, 0, 64), 0);
	ck_assert_int_eq(nvmf_queue_init(&gq, &gc, &gr, 0, 8, &o), 0);
	gq.ops->queue_free(&gq);
	gq.ops = &glue_ops;
	nvmf_queue_set_state(&gq, NVMF_Q_CONNECTING);
	nvmf_queue_set_state(&gq, NVMF_Q_FABRIC_CONNECT);
	gpending = NULL;
	gsubmits = gdone_count = 0;
	gdone_err = 1;
}

static void glue_teardown(void)
{
	nvmf_queue_free(&gq);
	reactor_stop(&gr);
	reactor_fini(&gr);
}

/* Completes the pending command with status, a Receive with msg. */
static void glue_complete(uint16_t status, const void *msg, size_t len)
{
	struct nvmf_req *req = gpending;
	struct nvme_cqe cqe = { .cid = req->cid, .status = (uint16_t)(status << 1) };

	ck_assert_ptr_nonnull(req);
	gpending = NULL;
	if (msg) {
		ck_assert(!req->host_to_ctrl);
		ck_assert_uint_le(len, req->data_len);
		memcpy(req->iov[0].iov_base, msg, len);
	}
	nvmf_req_complete(req, &cqe);
}

static void expect_cmd(uint8_t fctype, uint32_t len)
{
	ck_assert_ptr_nonnull(gpending);
	ck_assert_int_eq(gcmd.opcode, NVME_FABRICS_COMMAND);
	ck_assert_int_eq(gcmd.fctype, fctype);
	ck_assert_int_eq(gcmd.secp, 0xe9);
	ck_assert_int_eq(gcmd.spsp0, 1);
	ck_assert_int_eq(gcmd.spsp1, 1);
	ck_assert_uint_eq(gcmd.len, len);
}

static size_t null_challenge(uint8_t *buf, uint16_t tid)
{
	struct nvmf_auth_challenge ch = { .auth_type = NVMF_AUTH_DHCHAP_MESSAGES,
					  .auth_id = NVMF_AUTH_MSG_CHALLENGE, .t_id = tid,
					  .hl = 32, .hashid = NVMF_DHCHAP_SHA256,
					  .dhgid = NVMF_DHCHAP_DH_NULL, .seqnum = 77 };
	memcpy(buf, &ch, sizeof(ch));
	memset(buf + sizeof(ch), 0x33, 32);
	return sizeof(ch) + 32;
}

START_TEST(glue_success)
{
	uint8_t msg[256];
	uint16_t tid;

	nvmf_queue_authenticate(&gq, glue_done);
	expect_cmd(NVMF_FCTYPE_AUTH_SEND, 72);
	ck_assert_int_eq(gsent[1], NVMF_AUTH_MSG_NEGOTIATE);
	tid = (uint16_t)(gsent[4] | gsent[5] << 8);
	glue_complete(0, NULL, 0);
	expect_cmd(NVMF_FCTYPE_AUTH_RECV, NVMF_AUTH_BUF_SIZE);
	glue_complete(0, msg, null_challenge(msg, tid));
	expect_cmd(NVMF_FCTYPE_AUTH_SEND, 16 + 64);
	ck_assert_int_eq(gsent[1], NVMF_AUTH_MSG_REPLY);
	glue_complete(0, NULL, 0);
	expect_cmd(NVMF_FCTYPE_AUTH_RECV, NVMF_AUTH_BUF_SIZE);
	struct nvmf_auth_success1 s1 = { .auth_type = NVMF_AUTH_DHCHAP_MESSAGES,
					 .auth_id = NVMF_AUTH_MSG_SUCCESS1, .t_id = tid, .hl = 32 };
	ck_assert_uint_eq(gdone_count, 0);
	glue_complete(0, &s1, sizeof(s1));
	ck_assert_ptr_null(gpending);
	ck_assert_uint_eq(gsubmits, 4);
	ck_assert_uint_eq(gdone_count, 1);
	ck_assert_int_eq(gdone_err, 0);
	ck_assert_uint_eq(gq.nr_in_flight, 0);
	/* The controller now knows its key was accepted (a later close at
	 * the verdict is a lost connection, not a refusal). */
	ck_assert(gc.auth_ok);
}
END_TEST

/* The target refuses an Authentication Send: -EACCES, nothing more sent. */
START_TEST(glue_status_error)
{
	nvmf_queue_authenticate(&gq, glue_done);
	expect_cmd(NVMF_FCTYPE_AUTH_SEND, 72);
	glue_complete(0x0002 | 0x4000, NULL, 0); /* Invalid Field, DNR */
	ck_assert_ptr_null(gpending);
	ck_assert_uint_eq(gdone_count, 1);
	ck_assert_int_eq(gdone_err, -EACCES);
}
END_TEST

START_TEST(glue_failure1)
{
	struct nvmf_auth_failure f = { .auth_type = NVMF_AUTH_COMMON_MESSAGES,
				       .auth_id = NVMF_AUTH_MSG_FAILURE1, .rescode = 1,
				       .rescode_exp = NVMF_AUTH_FAIL_HASH_UNUSABLE };

	nvmf_queue_authenticate(&gq, glue_done);
	f.t_id = (uint16_t)(gsent[4] | gsent[5] << 8);
	glue_complete(0, NULL, 0);
	glue_complete(0, &f, sizeof(f));
	ck_assert_ptr_null(gpending);
	ck_assert_uint_eq(gsubmits, 2);
	ck_assert_uint_eq(gdone_count, 1);
	ck_assert_int_eq(gdone_err, -EACCES);
}
END_TEST

/* A malformed challenge: Failure2 goes out, then -EPROTO. */
START_TEST(glue_malformed)
{
	uint8_t msg[256];

	nvmf_queue_authenticate(&gq, glue_done);
	uint16_t tid = (uint16_t)(gsent[4] | gsent[5] << 8);
	glue_complete(0, NULL, 0);
	null_challenge(msg, tid);
	msg[6] = 48; /* hl for SHA-256 */
	glue_complete(0, msg, 64);
	expect_cmd(NVMF_FCTYPE_AUTH_SEND, 8);
	ck_assert_int_eq(gsent[1], NVMF_AUTH_MSG_FAILURE2);
	ck_assert_int_eq(gsent[7], NVMF_AUTH_FAIL_HASH_UNUSABLE);
	ck_assert_uint_eq(gdone_count, 0);
	glue_complete(0, NULL, 0);
	ck_assert_uint_eq(gdone_count, 1);
	ck_assert_int_eq(gdone_err, -EPROTO);
}
END_TEST

/* The connection drops mid-transaction: the queue's own teardown reports,
 * the transaction is freed without calling done (ASan checks the rest). */
START_TEST(glue_queue_lost)
{
	nvmf_queue_authenticate(&gq, glue_done);
	glue_complete(0, NULL, 0);
	ck_assert_ptr_nonnull(gpending);
	gpending = NULL;
	nvmf_queue_shutdown(&gq, -ECONNRESET);
	ck_assert_int_eq(gq.state, NVMF_Q_DEAD);
	ck_assert_uint_eq(gdone_count, 0);
	ck_assert_uint_eq(gq.nr_in_flight, 0);
}
END_TEST

static int gconnect_err;

static void glue_connect_cb(struct nvmf_queue *fq, int err)
{
	(void)fq;
	gconnect_err = err;
}

/* The connection closes while the verdict on the host's response is due
 * (nvmet on RDMA: its disconnect overtakes the Failure1): the queue's
 * connect_cb sees -EACCES, not a retryable reset. */
START_TEST(glue_closed_after_reply)
{
	uint8_t msg[256];

	gq.connect_cb = glue_connect_cb;
	gconnect_err = 1;
	nvmf_queue_authenticate(&gq, glue_done);
	uint16_t tid = (uint16_t)(gsent[4] | gsent[5] << 8);
	glue_complete(0, NULL, 0);
	glue_complete(0, msg, null_challenge(msg, tid));
	glue_complete(0, NULL, 0); /* the Reply was accepted */
	expect_cmd(NVMF_FCTYPE_AUTH_RECV, NVMF_AUTH_BUF_SIZE);
	gpending = NULL;
	nvmf_queue_shutdown(&gq, -ECONNRESET);
	ck_assert_uint_eq(gdone_count, 0);
	ck_assert_int_eq(gconnect_err, -EACCES);
}
END_TEST

/* The same close, on a controller whose key was accepted before (a path
 * that was live): a lost connection, retried.  It was -EACCES, and the
 * path was deleted for good over a network blip. */
START_TEST(glue_closed_after_reply_known_key)
{
	uint8_t msg[256];

	gc.auth_ok = true;
	gq.connect_cb = glue_connect_cb;
	gconnect_err = 1;
	nvmf_queue_authenticate(&gq, glue_done);
	uint16_t tid = (uint16_t)(gsent[4] | gsent[5] << 8);
	glue_complete(0, NULL, 0);
	glue_complete(0, msg, null_challenge(msg, tid));
	glue_complete(0, NULL, 0);
	expect_cmd(NVMF_FCTYPE_AUTH_RECV, NVMF_AUTH_BUF_SIZE);
	gpending = NULL;
	nvmf_queue_shutdown(&gq, -ECONNRESET);
	ck_assert_uint_eq(gdone_count, 0);
	ck_assert_int_eq(gconnect_err, -ECONNRESET);
}
END_TEST

/* A status that may pass next time (Command Interrupted, no DNR) is a
 * retry; with DNR the target refuses the protocol.  Both were -EACCES. */
START_TEST(glue_status_dnr_or_not)
{
	nvmf_queue_authenticate(&gq, glue_done);
	glue_complete(0x21, NULL, 0);
	ck_assert_uint_eq(gdone_count, 1);
	ck_assert_int_eq(gdone_err, -EIO);
	nvmf_queue_authenticate(&gq, glue_done);
	glue_complete((uint16_t)(0x4000 | 0x02), NULL, 0);
	ck_assert_uint_eq(gdone_count, 2);
	ck_assert_int_eq(gdone_err, -EACCES);
}
END_TEST

/* Closed earlier (waiting for the challenge): an ordinary lost connection. */
START_TEST(glue_closed_before_reply)
{
	gq.connect_cb = glue_connect_cb;
	gconnect_err = 1;
	nvmf_queue_authenticate(&gq, glue_done);
	glue_complete(0, NULL, 0);
	gpending = NULL;
	nvmf_queue_shutdown(&gq, -ECONNRESET);
	ck_assert_int_eq(gconnect_err, -ECONNRESET);
}
END_TEST

/* No key configured but the target asks: -EACCES at once. */
START_TEST(glue_no_key)
{
	memset(&gc.opts.dhchap_key, 0, sizeof(gc.opts.dhchap_key));
	nvmf_queue_authenticate(&gq, glue_done);
	ck_assert_uint_eq(gsubmits, 0);
	ck_assert_uint_eq(gdone_count, 1);
	ck_assert_int_eq(gdone_err, -EACCES);
}
END_TEST

/* ---- the Connect response: mutual authentication enforced ---- */

static int glog_fd = -1, gsaved_stderr = -1;

static void glog_begin(void)
{
	fflush(stderr);
	glog_fd = memfd_create("log", 0);
	ck_assert_int_ge(glog_fd, 0);
	gsaved_stderr = dup(2);
	dup2(glog_fd, 2);
}

static const char *glog_end(void)
{
	static char text[4096];
	ssize_t n;

	fflush(stderr);
	dup2(gsaved_stderr, 2);
	close(gsaved_stderr);
	n = pread(glog_fd, text, sizeof(text) - 1, 0);
	close(glog_fd);
	text[n > 0 ? n : 0] = 0;
	fputs(text, stderr);
	return text;
}

/* Sends the Connect on gq and answers it with status 0 and dw0. */
static const char *connect_answered(uint32_t dw0)
{
	struct nvmf_req *req;
	struct nvme_cqe cqe = { 0 };

	gq.connect_cb = glue_connect_cb;
	gconnect_err = 1;
	glog_begin();
	nvmf_fabric_connect(&gq);
	ck_assert_ptr_nonnull(gpending);
	ck_assert_int_eq(gcmd.fctype, NVMF_FCTYPE_CONNECT);
	req = gpending;
	gpending = NULL;
	cqe.cid = req->cid;
	cqe.result.dw0 = dw0;
	nvmf_req_complete(req, &cqe);
	return glog_end();
}

/* Issue 14, defect 4: a controller key is configured and the target never
 * asks to authenticate: an impostor.  Refused with -EACCES (no retry). */
START_TEST(connect_unauthenticated_with_ctrl_key)
{
	const char *why, *log;

	ck_assert_int_eq(nvmf_dhchap_key_parse(key02, &gc.opts.dhchap_ctrl_key, &why), 0);
	log = connect_answered(0x0001); /* cntlid 1, no ATR */
	ck_assert_int_eq(gconnect_err, -EACCES);
	ck_assert_int_eq(gq.state, NVMF_Q_DEAD);
	ck_assert_uint_eq(gsubmits, 1); /* nothing after the Connect */
	ck_assert_msg(strstr(log, "did not authenticate"), "log: %s", log);
	ck_assert_msg(strstr(log, "dhchap_ctrl_secret"), "log: %s", log);
}
END_TEST

/* Host key only: a target that does not ask is fine (one-way is optional). */
START_TEST(connect_unauthenticated_without_ctrl_key)
{
	connect_answered(0x0001);
	ck_assert_int_eq(gconnect_err, 0);
	ck_assert_int_eq(gq.state, NVMF_Q_LIVE);
	ck_assert_uint_eq(gsubmits, 1);
}
END_TEST

/* Controller key and ATR: the transaction starts with a Negotiate. */
START_TEST(connect_atr_with_ctrl_key_authenticates)
{
	const char *why;

	ck_assert_int_eq(nvmf_dhchap_key_parse(key02, &gc.opts.dhchap_ctrl_key, &why), 0);
	connect_answered(0x0001 | NVMF_CONNECT_AUTHREQ_ATR);
	ck_assert_int_eq(gconnect_err, 1);
	expect_cmd(NVMF_FCTYPE_AUTH_SEND, 72);
	ck_assert_int_eq(gsent[1], NVMF_AUTH_MSG_NEGOTIATE);
	ck_assert_int_eq(gq.state, NVMF_Q_FABRIC_CONNECT);
	gpending = NULL;
	nvmf_queue_shutdown(&gq, -ECONNRESET);
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, key_parse_vectors);
	tcase_add_test(tc, key_parse_errors);
	tcase_add_test(tc, transform_matches_nvme_cli);
	tcase_add_test(tc, response_hmac);
	tcase_add_test(tc, dh_fixed_key_against_generator);
	tcase_add_test(tc, dh_two_sides_agree);
	tcase_add_test(tc, txn_sha256_null);
	tcase_add_test(tc, txn_sha384_2048);
	tcase_add_test(tc, txn_sha512_4096_bidi);
	tcase_add_test(tc, txn_sha256_null_bidi);
	tcase_add_test(tc, challenge_malformed);
	tcase_add_test(tc, failure1_from_controller);
	tcase_add_test(tc, controller_response_wrong);
	tcase_add_test(tc, no_host_key);
	suite_add_tcase(s, tc);
	TCase *tg = tcase_create("queue");
	tcase_add_checked_fixture(tg, glue_setup, glue_teardown);
	tcase_add_test(tg, glue_success);
	tcase_add_test(tg, glue_status_error);
	tcase_add_test(tg, glue_failure1);
	tcase_add_test(tg, glue_malformed);
	tcase_add_test(tg, glue_queue_lost);
	tcase_add_test(tg, glue_closed_after_reply);
	tcase_add_test(tg, glue_closed_after_reply_known_key);
	tcase_add_test(tg, glue_status_dnr_or_not);
	tcase_add_test(tg, glue_closed_before_reply);
	tcase_add_test(tg, glue_no_key);
	tcase_add_test(tg, connect_unauthenticated_with_ctrl_key);
	tcase_add_test(tg, connect_unauthenticated_without_ctrl_key);
	tcase_add_test(tg, connect_atr_with_ctrl_key_authenticates);
	suite_add_tcase(s, tg);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
