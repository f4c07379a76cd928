/* libFuzzer harness for the discovery log checks, diff and referral bound
 * (transports/discovery_log.c).  The input builds two versions of a log,
 * record by record from small tables (so that most records are nearly
 * valid) with input bytes written over any of their fields, and may cut
 * the buffer or lie in the header.  Checked:
 * - parsing reads only the bytes given (ASan: the buffer is exactly len);
 * - every kept entry has a supported transport, a terminated printable
 *   NQN of at most 223 bytes, a port 1-65535, and kept + skipped +
 *   repeats is the record count;
 * - the diff names every new NVM path once, every gone one once, each new
 *   subsystem as a new target at most once, and nothing else;
 * - a walk over the referrals of both logs, each controller's log being
 *   one of the two, ends, with the set bounded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/discovery_log.h"
#include "transports/nvme_spec.h"

#include "tests/fuzz/fuzz_check.h"

#define HDR sizeof(struct nvmf_disc_log_hdr)
#define REC sizeof(struct nvmf_disc_log_entry)
#define MAXREC 12

static const char *const addrs[] = { "127.0.0.1", "::1",  "10.0.0.1", "fe80::1",
				     "::ffff:127.0.0.1", "1.2.3", "" };
static const char *const ports[] = { "4420", "8009", "0", "65536", "4421", "12x" };
static const char *const nqns[] = { "nqn.a", "nqn.b", NVME_DISC_SUBSYS_NQN, "nqn.c" };
static const uint8_t trtypes[] = { NVMF_TRTYPE_TCP, NVMF_TRTYPE_RDMA, NVMF_TRTYPE_FC,
				   NVMF_TRTYPE_LOOP };

struct in {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* One log from the input: a malloc'd buffer of exactly *len bytes. */
static uint8_t *build(struct in *in, size_t *len)
{
	uint8_t flags = take(in);
	unsigned nr = take(in) % (MAXREC + 1);
	size_t full = HDR + nr * REC;
	uint8_t *b = calloc(1, full);
	struct nvmf_disc_log_hdr *h = (void *)b;

	check(b);
	h->genctr = take(in);
	h->numrec = nr;
	for (unsigned i = 0; i < nr; i++) {
		struct nvmf_disc_log_entry *e = (void *)(b + HDR + i * REC);
		uint8_t d[6];
		for (int k = 0; k < 6; k++)
			d[k] = take(in);
		e->trtype = d[0] < 240 ? trtypes[d[0] % 4] : d[0];
		e->adrfam = d[1] % 5;
		e->subtype = d[2] % 4;
		const char *a = addrs[d[3] % 7], *p = ports[d[4] % 6], *q = nqns[d[5] % 4];
		memcpy(e->traddr, a, strlen(a));
		memcpy(e->trsvcid, p, strlen(p));
		memcpy(e->subnqn, q, strlen(q));
		/* Input bytes over the record: count, offset, bytes. */
		unsigned spoil = take(in) % 4;
		for (unsigned s = 0; s < spoil; s++) {
			uint16_t off = (uint16_t)(take(in) | take(in) << 8) % REC;
			((uint8_t *)e)[off] = take(in);
		}
	}
	*len = full;
	if (flags & 1) /* a lying header */
		memcpy(&h->numrec, (uint8_t[8]){ take(in), take(in), 0, 0, 0, 0, 0, (flags & 2) ? 0x80 : 0 },
		       8);
	if (flags & 4)
		h->recfmt = take(in);
	if (flags & 8) /* a short buffer */
		*len = full - (take(in) % (full + 1));
	uint8_t *exact = malloc(*len ? *len : 1);
	check(exact);
	memcpy(exact, b, *len);
	free(b);
	return exact;
}

static void check_entries(const struct dlog *l, const uint8_t *buf)
{
	const struct nvmf_disc_log_hdr *h = (const void *)buf;

	check(l->nr + l->skipped + l->dups == h->numrec);
	for (uint32_t i = 0; i < l->nr; i++) {
		const struct dlog_entry *e = &l->e[i];
		check(e->trtype == NVMF_TRTYPE_TCP || e->trtype == NVMF_TRTYPE_RDMA);
		size_t n = strnlen(e->subnqn, sizeof(e->subnqn));
		check(n > 0 && n <= DLOG_NQN_MAX);
		for (size_t k = 0; k < n; k++)
			check(e->subnqn[k] > 0x20 && e->subnqn[k] < 0x7f);
		check(strnlen(e->traddr, sizeof(e->traddr)) < sizeof(e->traddr));
		long port = atol(e->trsvcid);
		check(port >= 1 && port <= 65535);
		for (uint32_t j = 0; j < i; j++)
			check(!dlog_same_path(&l->e[i], &l->e[j]));
	}
}

static bool in_list(const struct dlog *l, const struct dlog_entry *e)
{
	for (uint32_t i = 0; l && i < l->nr; i++)
		if (dlog_same_path(&l->e[i], e))
			return true;
	return false;
}

static bool known_c(void *ctx, const char *nqn)
{
	(void)ctx;
	return !strcmp(nqn, "nqn.c");
}

static void check_diff(const struct dlog *o, const struct dlog *n)
{
	struct dlog_action *act = calloc((o ? o->nr : 0) + n->nr + 1, sizeof(*act));
	check(act);
	size_t k = dlog_diff(o, n, known_c, NULL, act);
	check(k <= (o ? o->nr : 0) + n->nr);
	for (size_t i = 0; i < k; i++) {
		const struct dlog_entry *e = act[i].e;
		check(e->subtype != NVMF_SUBTYPE_DISCOVERY_CUR);
		switch (act[i].kind) {
		case DLOG_NEW_TARGET:
			check(strcmp(e->subnqn, "nqn.c"));
			for (size_t j = 0; j < i; j++)
				check(act[j].kind != DLOG_NEW_TARGET ||
				      strcmp(act[j].e->subnqn, e->subnqn));
			/* fall through */
		case DLOG_ADD_PATH:
			check(e->subtype == NVMF_SUBTYPE_NVME && !in_list(o, e) && in_list(n, e));
			break;
		case DLOG_REFERRAL:
			check(e->subtype == NVMF_SUBTYPE_DISCOVERY_REF && !in_list(o, e));
			break;
		case DLOG_GONE:
		case DLOG_REFERRAL_GONE:
			check(in_list(o, e) && !in_list(n, e));
			break;
		}
		for (size_t j = 0; j < i; j++)
			check(act[j].e != e);
	}
	/* Every new NVM path is named. */
	for (uint32_t i = 0; i < n->nr; i++) {
		if (n->e[i].subtype != NVMF_SUBTYPE_NVME || in_list(o, &n->e[i]))
			continue;
		bool named = false;
		for (size_t j = 0; j < k; j++)
			named |= act[j].e == &n->e[i];
		check(named);
	}
	free(act);
}

/* Every controller reached by a referral serves log (depth & 1), as a
 * target that lists itself or its neighbours would: the walk must end. */
static void walk_referrals(const struct dlog *logs[2])
{
	struct dlog_refs r;
	unsigned queue[DLOG_MAX_CTRLS], head = 0, tail = 0, steps = 0;

	check(dlog_refs_init(&r, NVMF_TRTYPE_TCP, "127.0.0.1", "8009") == 0);
	queue[tail++] = 0;
	while (head < tail) {
		unsigned depth = r.k[queue[head++]].depth;
		const struct dlog *l = logs[depth & 1];
		for (uint32_t i = 0; l && i < l->nr; i++) {
			check(++steps < 100000);
			if (dlog_refs_add(&r, depth, &l->e[i]) == DLOG_REF_FOLLOW) {
				check(tail < DLOG_MAX_CTRLS);
				check(r.k[r.nr - 1].depth <= DLOG_REFERRAL_DEPTH);
				queue[tail++] = r.nr - 1;
			}
		}
	}
	check(r.nr <= DLOG_MAX_CTRLS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	uint8_t *b[2];
	size_t len[2];
	struct dlog l[2];
	bool ok[2];

	for (int i = 0; i < 2; i++) {
		const char *why = NULL;
		b[i] = build(&in, &len[i]);
		int rc = dlog_parse(&l[i], b[i], len[i], &why);
		ok[i] = rc == 0;
		if (ok[i])
			check_entries(&l[i], b[i]);
		else
			check(why && why[0] && l[i].nr == 0 && !l[i].e);
	}
	if (ok[1])
		check_diff(ok[0] ? &l[0] : NULL, &l[1]);
	const struct dlog *logs[2] = { ok[0] ? &l[0] : NULL, ok[1] ? &l[1] : NULL };
	walk_referrals(logs);
	for (int i = 0; i < 2; i++) {
		dlog_free(&l[i]);
		free(b[i]);
	}
	return 0;
}
