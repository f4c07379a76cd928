/* The discovery log page checked, diffed and its referrals bounded (see
 * discovery_log.h).  Every byte here came from the peer. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transports/discovery_log.h"
#include "transports/nvme_spec.h"

#define HDR sizeof(struct nvmf_disc_log_hdr)
#define REC sizeof(struct nvmf_disc_log_entry)

/* A fixed-size text field into dst (dstlen with its NUL): the text ends at
 * the first NUL, or at the field's end when NUL-terminated is not
 * required; trailing spaces are padding (the spec allows space-padded
 * addresses).  Printable ASCII only, no inner space, not empty. */
static bool take_field(char *dst, size_t dstlen, const char *src, size_t srclen,
		       bool need_nul)
{
	size_t n = strnlen(src, srclen);

	if (need_nul && n == srclen)
		return false;
	while (n && src[n - 1] == ' ')
		n--;
	if (!n || n >= dstlen)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];
		if (c <= 0x20 || c >= 0x7f)
			return false;
	}
	memcpy(dst, src, n);
	dst[n] = 0;
	return true;
}

static bool port_ok(const char *s, uint16_t *out)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5)
		return false;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (!v || v > 65535)
		return false;
	if (out)
		*out = (uint16_t)v;
	return true;
}

/* traddr as 16 bytes (IPv4 mapped), by the entry's address family. */
static bool addr_bytes(uint8_t adrfam, const char *traddr, uint8_t out[16])
{
	struct in_addr a4;

	memset(out, 0, 16);
	switch (adrfam) {
	case NVMF_ADRFAM_IPV4:
		if (inet_pton(AF_INET, traddr, &a4) != 1)
			return false;
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &a4, 4);
		return true;
	case NVMF_ADRFAM_IPV6:
	case NVMF_ADRFAM_IB: /* a GID is written as an IPv6 address */
		return inet_pton(AF_INET6, traddr, out) == 1;
	default:
		return false;
	}
}

static bool record_ok(const struct nvmf_disc_log_entry *r, struct dlog_entry *e)
{
	uint8_t a[16];

	memset(e, 0, sizeof(*e));
	if (r->trtype != NVMF_TRTYPE_TCP && r->trtype != NVMF_TRTYPE_RDMA)
		return false;
	if (r->adrfam != NVMF_ADRFAM_IPV4 && r->adrfam != NVMF_ADRFAM_IPV6 &&
	    !(r->adrfam == NVMF_ADRFAM_IB && r->trtype == NVMF_TRTYPE_RDMA))
		return false;
	if (r->subtype != NVMF_SUBTYPE_DISCOVERY_REF && r->subtype != NVMF_SUBTYPE_NVME &&
	    r->subtype != NVMF_SUBTYPE_DISCOVERY_CUR)
		return false;
	if (!take_field(e->trsvcid, sizeof(e->trsvcid), r->trsvcid, sizeof(r->trsvcid), false) ||
	    !port_ok(e->trsvcid, NULL))
		return false;
	if (!take_field(e->traddr, sizeof(e->traddr), r->traddr, sizeof(r->traddr), false) ||
	    !addr_bytes(r->adrfam, e->traddr, a))
		return false;
	/* An NQN is NUL-terminated within its field (NVMe Base 4.5). */
	if (!take_field(e->subnqn, sizeof(e->subnqn), r->subnqn, sizeof(r->subnqn), true))
		return false;
	/* A referral names a discovery subsystem, an NVM entry must not. */
	bool disc_nqn = !strcmp(e->subnqn, NVME_DISC_SUBSYS_NQN);
	if (r->subtype == NVMF_SUBTYPE_NVME && disc_nqn)
		return false;
	e->trtype = r->trtype;
	e->adrfam = r->adrfam;
	e->subtype = r->subtype;
	e->treq = r->treq;
	e->sectype = r->trtype == NVMF_TRTYPE_TCP ? r->tsas[0] : 0;
	e->portid = r->portid;
	e->cntlid = r->cntlid;
	return true;
}

bool dlog_same_path(const struct dlog_entry *a, const struct dlog_entry *b)
{
	return a->trtype == b->trtype && a->subtype == b->subtype &&
	       !strcmp(a->subnqn, b->subnqn) && !strcmp(a->traddr, b->traddr) &&
	       !strcmp(a->trsvcid, b->trsvcid);
}

int dlog_parse(struct dlog *out, const uint8_t *buf, size_t len, const char **why)
{
	const struct nvmf_disc_log_hdr *h = (const void *)buf;
	const char *dummy;

	if (!why)
		why = &dummy;
	memset(out, 0, sizeof(*out));
	if (len < HDR) {
		*why = "shorter than its header";
		return -EPROTO;
	}
	if (h->recfmt != 0) {
		*why = "unknown record format";
		return -EPROTO;
	}
	if (h->numrec > DLOG_MAX_RECORDS) {
		*why = "more records than a target has";
		return -EPROTO;
	}
	if (len < HDR + h->numrec * REC) {
		*why = "fewer bytes than its records";
		return -EPROTO;
	}
	out->genctr = h->genctr;
	if (!h->numrec)
		return 0;
	out->e = calloc((size_t)h->numrec, sizeof(*out->e));
	if (!out->e) {
		*why = "out of memory";
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < h->numrec; i++) {
		struct nvmf_disc_log_entry r;
		struct dlog_entry *e = &out->e[out->nr];

		memcpy(&r, buf + HDR + i * REC, sizeof(r)); /* buf need not be aligned */
		if (!record_ok(&r, e)) {
			out->skipped++;
			continue;
		}
		bool dup = false;
		for (uint32_t j = 0; j < out->nr && !dup; j++)
			dup = dlog_same_path(&out->e[j], e);
		if (dup)
			out->dups++;
		else
			out->nr++;
	}
	return 0;
}

void dlog_free(struct dlog *l)
{
	free(l->e);
	memset(l, 0, sizeof(*l));
}

static bool listed(const struct dlog *l, const struct dlog_entry *e)
{
	for (uint32_t i = 0; l && i < l->nr; i++)
		if (dlog_same_path(&l->e[i], e))
			return true;
	return false;
}

/* A subsystem this diff already announced as new, before index upto. */
static bool new_earlier(const struct dlog_action *act, size_t upto, const char *subnqn)
{
	for (size_t i = 0; i < upto; i++)
		if (act[i].kind == DLOG_NEW_TARGET && !strcmp(act[i].e->subnqn, subnqn))
			return true;
	return false;
}

/* A subsystem the old log listed (on any port): its target exists, or is
 * on its way, even when known() cannot say so yet. */
static bool in_log(const struct dlog *l, const char *subnqn)
{
	for (uint32_t i = 0; l && i < l->nr; i++)
		if (l->e[i].subtype == NVMF_SUBTYPE_NVME && !strcmp(l->e[i].subnqn, subnqn))
			return true;
	return false;
}

size_t dlog_diff(const struct dlog *old, const struct dlog *new,
		 bool (*known)(void *ctx, const char *subnqn), void *ctx,
		 struct dlog_action *act)
{
	size_t n = 0;

	for (uint32_t i = 0; new && i < new->nr; i++) {
		const struct dlog_entry *e = &new->e[i];
		if (e->subtype == NVMF_SUBTYPE_DISCOVERY_CUR || listed(old, e))
			continue;
		if (e->subtype == NVMF_SUBTYPE_DISCOVERY_REF) {
			act[n++] = (struct dlog_action){ DLOG_REFERRAL, e };
			continue;
		}
		bool have = (known && known(ctx, e->subnqn)) || in_log(old, e->subnqn) ||
			    new_earlier(act, n, e->subnqn);
		act[n++] = (struct dlog_action){ have ? DLOG_ADD_PATH : DLOG_NEW_TARGET, e };
	}
	for (uint32_t i = 0; old && i < old->nr; i++) {
		const struct dlog_entry *e = &old->e[i];
		if (e->subtype == NVMF_SUBTYPE_DISCOVERY_CUR || listed(new, e))
			continue;
		act[n++] = (struct dlog_action){
			e->subtype == NVMF_SUBTYPE_DISCOVERY_REF ? DLOG_REFERRAL_GONE : DLOG_GONE, e
		};
	}
	return n;
}

static bool key_of(uint8_t trtype, uint8_t adrfam, const char *traddr, const char *trsvcid,
		   struct dlog_ctrl_key *k)
{
	memset(k, 0, sizeof(*k));
	k->trtype = trtype;
	return addr_bytes(adrfam, traddr, k->addr) && port_ok(trsvcid, &k->port);
}

static int find_key(const struct dlog_refs *r, const struct dlog_ctrl_key *k)
{
	for (unsigned i = 0; i < r->nr; i++)
		if (r->k[i].trtype == k->trtype && r->k[i].port == k->port &&
		    !memcmp(r->k[i].addr, k->addr, 16))
			return (int)i;
	return -1;
}

int dlog_refs_init(struct dlog_refs *r, uint8_t trtype, const char *traddr, const char *trsvcid)
{
	memset(r, 0, sizeof(*r));
	/* A configured address may be either family: try both. */
	if (!key_of(trtype, NVMF_ADRFAM_IPV4, traddr, trsvcid, &r->k[0]) &&
	    !key_of(trtype, NVMF_ADRFAM_IPV6, traddr, trsvcid, &r->k[0]))
		return -EINVAL;
	r->nr = 1;
	return 0;
}

enum dlog_ref_verdict dlog_refs_add(struct dlog_refs *r, unsigned parent_depth,
				    const struct dlog_entry *e)
{
	struct dlog_ctrl_key k;

	if (e->subtype != NVMF_SUBTYPE_DISCOVERY_REF ||
	    !key_of(e->trtype, e->adrfam, e->traddr, e->trsvcid, &k))
		return DLOG_REF_BAD;
	if (find_key(r, &k) >= 0)
		return DLOG_REF_LOOP;
	if (parent_depth + 1 > DLOG_REFERRAL_DEPTH)
		return DLOG_REF_TOO_DEEP;
	if (r->nr >= DLOG_MAX_CTRLS)
		return DLOG_REF_FULL;
	k.depth = (uint8_t)(parent_depth + 1);
	r->k[r->nr++] = k;
	return DLOG_REF_FOLLOW;
}

void dlog_refs_remove(struct dlog_refs *r, const struct dlog_entry *e)
{
	struct dlog_ctrl_key k;

	if (!key_of(e->trtype, e->adrfam, e->traddr, e->trsvcid, &k))
		return;
	int i = find_key(r, &k);
	if (i <= 0) /* never the configured controller */
		return;
	r->k[i] = r->k[--r->nr];
}

const char *dlog_ref_verdict_name(enum dlog_ref_verdict v)
{
	switch (v) {
	case DLOG_REF_FOLLOW:
		return "follow";
	case DLOG_REF_LOOP:
		return "loop (already known)";
	case DLOG_REF_TOO_DEEP:
		return "too deep";
	case DLOG_REF_FULL:
		return "too many discovery controllers";
	case DLOG_REF_BAD:
		return "not a referral";
	}
	return "?";
}

const char *dlog_trtype_name(uint8_t trtype)
{
	return trtype == NVMF_TRTYPE_TCP ? "tcp" : trtype == NVMF_TRTYPE_RDMA ? "rdma" : "unknown";
}
