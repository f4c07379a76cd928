/* Asymmetric Namespace Access: the ANA log page (parsed, read whole in
 * chunks, applied to the namespaces) and the asynchronous events that say
 * it changed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/ctrl_priv.h"
#include "transports/status.h"

/* ---- ANA ---- */

const char *nvme_ana_state_name(uint8_t state)
{
	switch (state) {
	case NVME_ANA_OPTIMIZED: return "optimized";
	case NVME_ANA_NON_OPTIMIZED: return "non-optimized";
	case NVME_ANA_INACCESSIBLE: return "inaccessible";
	case NVME_ANA_PERSISTENT_LOSS: return "persistent-loss";
	case NVME_ANA_CHANGE: return "change";
	default: return "unknown";
	}
}

/* One group descriptor of an ANA log page: its ID, state and the nnsids
 * namespace IDs listed with it (little-endian, possibly unaligned). */
typedef void (*ana_desc_fn)(void *arg, uint32_t grpid, uint8_t state, const uint8_t *nsids,
			    uint32_t nnsids);

static int ana_log_walk(const void *buf, size_t len, uint64_t *chgcnt, ana_desc_fn fn, void *arg)
{
	const uint8_t *p = buf;
	struct nvme_ana_log_hdr h;
	size_t off = sizeof(h);

	if (len < sizeof(h))
		return -EPROTO;
	memcpy(&h, p, sizeof(h));
	if (chgcnt)
		*chgcnt = h.chgcnt;
	for (unsigned i = 0; i < h.ngrps; i++) {
		struct nvme_ana_group_desc d;
		if (len - off < sizeof(d))
			return -EPROTO;
		memcpy(&d, p + off, sizeof(d));
		off += sizeof(d);
		if (d.nnsids > (len - off) / 4)
			return -EPROTO;
		fn(arg, d.grpid, d.state & 0xf, p + off, d.nnsids);
		off += (size_t)d.nnsids * 4;
	}
	return 0;
}

struct ana_parse_ctx {
	void (*fn)(void *arg, uint32_t grpid, uint8_t state);
	void *arg;
};

static void ana_parse_desc(void *arg, uint32_t grpid, uint8_t state, const uint8_t *nsids,
			   uint32_t nnsids)
{
	struct ana_parse_ctx *pc = arg;

	(void)nsids;
	(void)nnsids;
	pc->fn(pc->arg, grpid, state);
}

int nvmf_ana_log_parse(const void *buf, size_t len, uint64_t *chgcnt,
		       void (*fn)(void *arg, uint32_t grpid, uint8_t state), void *arg)
{
	struct ana_parse_ctx pc = { fn, arg };

	return ana_log_walk(buf, len, chgcnt, ana_parse_desc, &pc);
}

uint64_t nvmf_ana_log_need(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	struct nvme_ana_log_hdr h;
	uint64_t off = sizeof(h);

	if (len < sizeof(h))
		return sizeof(h);
	memcpy(&h, p, sizeof(h));
	for (unsigned i = 0; i < h.ngrps; i++) {
		struct nvme_ana_group_desc d;
		/* Each descriptor after this one takes at least its 32 bytes:
		 * a bound that lets the next read take them all at once. */
		uint64_t rest = (uint64_t)(h.ngrps - i - 1) * sizeof(d);
		if (len - off < sizeof(d))
			return off + sizeof(d) + rest;
		memcpy(&d, p + off, sizeof(d));
		/* 64-bit: a descriptor claiming 2^32 - 1 IDs cannot wrap. */
		uint64_t end = off + sizeof(d) + (uint64_t)d.nnsids * 4;
		if (end > len)
			return end + rest;
		off = end;
	}
	return off;
}

struct ana_apply_ctx {
	struct nvmf_ctrl *c;
	bool changed;
	uint8_t *placed; /* per table entry: a descriptor of this page listed it */
};

/* The namespace nsid of c's table, which is in ascending NSID order (as
 * the active namespace list is, see nvmf_ns_list_count), or NULL.  A
 * binary search: an ANA log page may list 200,000 NSIDs, and it is read
 * again every second while a path waits on it. */
static struct nvmf_ns *ns_lookup(struct nvmf_ctrl *c, uint32_t nsid)
{
	unsigned lo = 0, hi = c->nr_ns;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (c->ns[mid].nsid == nsid)
			return &c->ns[mid];
		if (c->ns[mid].nsid < nsid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void ana_group(void *arg, uint32_t grpid, uint8_t state, const uint8_t *nsids,
		      uint32_t nnsids)
{
	struct ana_apply_ctx *a = arg;
	struct nvmf_ctrl *c = a->c;

	/* The target may move a namespace to another group (unless ANACAP
	 * bit 6 says group IDs never change while attached; nvmet leaves it
	 * clear, and writing its namespaces/N/ana_grpid moves one).  Identify
	 * Namespace told the group at bring-up; the descriptors' NSID lists
	 * (empty only with RGO, which this host never asks for) tell it now.
	 * Without this a moved namespace kept the state of a group the
	 * target no longer reports, and the multipath snapshot, built from
	 * this table, would miss its real group until a reconnect. */
	for (uint32_t k = 0; grpid && k < nnsids; k++) {
		uint32_t nsid;
		memcpy(&nsid, nsids + (size_t)k * 4, 4);
		struct nvmf_ns *ns = ns_lookup(c, nsid);
		if (!ns)
			continue;
		/* A namespace is in one group.  Listed in two, the later
		 * one moved it back and forth at every read (a change, four
		 * lines and a regroup each time): the first one holds. */
		if (a->placed) {
			uint8_t *seen = &a->placed[ns - c->ns];
			if (*seen) {
				if (ns->anagrpid != grpid)
					ctrl_log(WARN, c, "ANA log page lists nsid %u in groups %u "
						 "and %u; group %u is kept", nsid, ns->anagrpid,
						 grpid, ns->anagrpid);
				continue;
			}
			*seen = 1;
		}
		if (ns->anagrpid == grpid)
			continue;
		ctrl_log(NOTICE, c, "nsid %u moved from ANA group %u to %u (ANA log page)",
			   nsid, ns->anagrpid, grpid);
		ns->anagrpid = grpid;
		c->ana_regroups++;
		a->changed = true;
	}
	for (unsigned i = 0; i < c->nr_ns; i++) {
		struct nvmf_ns *ns = &c->ns[i];
		if (ns->anagrpid != grpid || ns->ana_state == state)
			continue;
		ctrl_log(NOTICE, c, "nsid %u (ANA group %u): %s -> %s", ns->nsid,
			   grpid, nvme_ana_state_name(ns->ana_state), nvme_ana_state_name(state));
		ns->ana_state = state;
		a->changed = true;
	}
}

int nvmf_ctrl_ana_apply(struct nvmf_ctrl *c, const void *buf, size_t len)
{
	struct ana_apply_ctx a = { .c = c };
	/* Without memory the duplicate check goes, nothing else. */
	a.placed = c->nr_ns ? calloc(c->nr_ns, 1) : NULL;
	int ret = ana_log_walk(buf, len, &c->ana_chgcnt, ana_group, &a);

	free(a.placed);
	if (ret < 0)
		return ret;
	return a.changed;
}

/* ---- reading the whole ANA log page ----
 * The first command reads 4 KiB, which holds most pages.  When the
 * descriptors say the page is longer, the whole page is read again from
 * offset 0 in one command if it fits one transfer, as the Linux host reads
 * it (some targets, nvmet among them, ignore the offset for this page);
 * only a page larger than one transfer is read on in pieces at increasing
 * offsets.  Every length comes from descriptors already read and checked
 * against what was read, and the total is capped at NVMF_ANA_LOG_MAX. */

#define ANA_FIRST_READ 4096u

static uint32_t ana_chunk_max(const struct nvmf_ctrl *c)
{
	uint32_t n = c->max_xfer & ~(ANA_FIRST_READ - 1);
	return n < ANA_FIRST_READ ? ANA_FIRST_READ : n;
}

int nvmf_ana_next_read(size_t have, uint64_t need, uint32_t chunk, size_t *want,
		       bool *restart)
{
	if (need > NVMF_ANA_LOG_MAX)
		return -EMSGSIZE;
	/* Rounded up to pages, and at least doubled so that a long page
	 * takes a few rounds, not one per descriptor: a read past the end of
	 * a page returns zeroes, but a command starting past it fails, so a
	 * piece at an offset always starts below the length known. */
	size_t w = (need + ANA_FIRST_READ - 1) & ~(uint64_t)(ANA_FIRST_READ - 1);
	*restart = w <= chunk;
	if (*restart) {
		if (2 * have > w)
			w = 2 * have < chunk ? 2 * have : chunk;
	} else if (have + chunk > w) {
		w = have + chunk;
	}
	*want = w < NVMF_ANA_LOG_MAX ? w : NVMF_ANA_LOG_MAX;
	return 0;
}

static void ana_read_finish(struct nvmf_ctrl *c, int err)
{
	void (*then)(struct nvmf_ctrl *, int) = c->ana_then;

	c->ana_then = NULL;
	if (then)
		then(c, err);
}

static void ana_read_done(struct nvmf_req *req, int err);
static void ana_check_done(struct nvmf_req *req, int err);

/* After the last piece of a page read at offsets: its header again, so
 * that a change between pieces (two generations mixed) is seen, as the
 * specification advises (compare the Change Count). */
static int ana_check_start(struct nvmf_ctrl *c)
{
	struct nvmf_req *req = ctrl_admin_req_reserved(c);

	if (!req)
		return -EBUSY;
	req->done = ana_check_done;
	ctrl_prep_get_log(req, NVME_LOG_ANA, c->ana_chk, sizeof(c->ana_chk), 0);
	nvmf_req_submit(req);
	return 0;
}

static int ana_read_chunk(struct nvmf_ctrl *c)
{
	uint64_t len = c->ana_want - c->ana_have;
	struct nvmf_req *req;

	if (len > ana_chunk_max(c))
		len = ana_chunk_max(c);
	if (c->ana_want > c->ana_log_alloc) {
		/* Control path, once per size the target's page reaches. */
		size_t sz = (c->ana_want + 4095) & ~(size_t)4095;
		uint8_t *b = aligned_alloc(4096, sz);
		if (!b)
			return -ENOMEM;
		if (c->ana_have)
			memcpy(b, c->ana_log, c->ana_have);
		free(c->ana_log);
		c->ana_log = b;
		c->ana_log_alloc = sz;
	}
	if (!(req = ctrl_admin_req_reserved(c)))
		return -EBUSY;
	c->ana_chunk = (uint32_t)len;
	req->done = ana_read_done;
	ctrl_prep_get_log(req, NVME_LOG_ANA, c->ana_log + c->ana_have, (uint32_t)len, c->ana_have);
	nvmf_req_submit(req);
	return 0;
}

static void ana_read_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t chunk = ana_chunk_max(c);
	char sbuf[96];
	uint64_t need;

	nvmf_req_put(req);
	if (err) {
		ana_read_finish(c, err);
		return;
	}
	if (st) {
		ctrl_log(WARN, c, "reading the ANA log (bytes %zu to %zu) failed: %s",
			 c->ana_have, c->ana_have + c->ana_chunk,
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		ana_read_finish(c, nvme_status_to_errno(st) ?: -EIO);
		return;
	}
	c->ana_have += c->ana_chunk;
	if (c->ana_have < c->ana_want)
		goto more;
	need = nvmf_ana_log_need(c->ana_log, c->ana_have);
	if (need <= c->ana_have) {
		if (c->ana_pieces && (err = ana_check_start(c)) < 0)
			ana_read_finish(c, err);
		else if (!c->ana_pieces)
			ana_read_finish(c, 0);
		return;
	}
	bool restart;
	size_t want;
	if (nvmf_ana_next_read(c->ana_have, need, chunk, &want, &restart) < 0) {
		ctrl_log(ERR, c, "the ANA log page claims at least %llu bytes, more than the %u "
			"this host reads; refused",
			(unsigned long long)need, NVMF_ANA_LOG_MAX);
		ana_read_finish(c, -EMSGSIZE);
		return;
	}
	c->ana_want = want;
	if (restart)
		c->ana_have = 0; /* again, whole, in one command */
	else
		c->ana_pieces = true;
	ctrl_log(INFO, c, "the ANA log page is at least %llu bytes: reading %zu bytes%s",
		 (unsigned long long)need, c->ana_want,
		 c->ana_have ? " on, at increasing offsets" : " in one command");
more:
	if ((err = ana_read_chunk(c)) < 0)
		ana_read_finish(c, err);
}

static void ana_check_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	struct nvme_ana_log_hdr was, now;
	char sbuf[96];

	nvmf_req_put(req);
	if (err) {
		ana_read_finish(c, err);
		return;
	}
	if (st) {
		ctrl_log(WARN, c, "reading the ANA log header again failed: %s",
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		ana_read_finish(c, nvme_status_to_errno(st) ?: -EIO);
		return;
	}
	memcpy(&was, c->ana_log, sizeof(was));
	memcpy(&now, c->ana_chk, sizeof(now));
	if (now.chgcnt == was.chgcnt) {
		ana_read_finish(c, 0);
		return;
	}
	if (++c->ana_rereads > NVMF_ANA_REREADS) {
		ctrl_log(WARN, c, "the ANA log page changed while it was read in pieces, %u times "
			 "in a row (change count %llu -> %llu); states unchanged for now",
			 c->ana_rereads, (unsigned long long)was.chgcnt,
			 (unsigned long long)now.chgcnt);
		ana_read_finish(c, -EAGAIN);
		return;
	}
	ctrl_log(INFO, c, "the ANA log page changed while it was read in pieces (change count "
		 "%llu -> %llu); reading it again",
		 (unsigned long long)was.chgcnt, (unsigned long long)now.chgcnt);
	c->ana_pieces = false;
	c->ana_have = 0;
	c->ana_want = ANA_FIRST_READ;
	if ((err = ana_read_chunk(c)) < 0)
		ana_read_finish(c, err);
}

/* Reads the page into c->ana_log[0..c->ana_have); then(c, 0 or -errno). */
int ctrl_ana_read_start(struct nvmf_ctrl *c, void (*then)(struct nvmf_ctrl *, int))
{
	c->ana_then = then;
	c->ana_pieces = false;
	c->ana_rereads = 0;
	c->ana_have = 0;
	c->ana_want = ANA_FIRST_READ;
	return ana_read_chunk(c);
}

static int ana_grp_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct nvmf_ana_grp *)a)->grp, y = ((const struct nvmf_ana_grp *)b)->grp;
	return x < y ? -1 : x > y;
}

unsigned nvmf_ctrl_ana_groups(const struct nvmf_ctrl *c, struct nvmf_ana_grp *out)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nr_ns; i++)
		out[i] = (struct nvmf_ana_grp){ c->ns[i].anagrpid, c->ns[i].ana_state };
	if (c->nr_ns > 1)
		qsort(out, c->nr_ns, sizeof(*out), ana_grp_cmp);
	/* The namespaces of one group share its state (ana_group sets them
	 * together): the first of each group stands for it. */
	for (unsigned i = 0; i < c->nr_ns; i++)
		if (!n || out[i].grp != out[n - 1].grp)
			out[n++] = out[i];
	return n;
}

uint8_t nvmf_ana_grp_state(const struct nvmf_ana_grp *a, unsigned n, uint32_t grp)
{
	unsigned lo = 0, hi = n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (a[mid].grp == grp)
			return a[mid].state;
		if (a[mid].grp < grp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static void ana_refresh_start(struct nvmf_ctrl *c);

static void ana_refresh_read(struct nvmf_ctrl *c, int err)
{
	int ret = 0;

	c->ana_busy = false;
	if (c->state != NVMF_CTRL_LIVE)
		return; /* the queue is going down; read again after reconnect */
	if (err == -EBUSY || err == -ENOMEM)
		c->ana_again = true; /* no request for a piece: the next event retries */
	if (!err && (ret = nvmf_ctrl_ana_apply(c, c->ana_log, c->ana_have)) < 0)
		ctrl_log(WARN, c, "malformed ANA log page; states unchanged");
	if (ret > 0 && c->ana_cb)
		c->ana_cb(c);
	if (c->ana_again) {
		c->ana_again = false;
		ana_refresh_start(c);
	}
}

static void ana_refresh_start(struct nvmf_ctrl *c)
{
	if (c->ana_busy) {
		c->ana_again = true;
		return;
	}
	c->ana_busy = true;
	if (ctrl_ana_read_start(c, ana_refresh_read) < 0) {
		c->ana_busy = false;
		c->ana_then = NULL;
		c->ana_again = true; /* the next AEN or ANA status retries */
	}
}

void nvmf_ctrl_ana_refresh(struct nvmf_ctrl *c)
{
	if (c->ana && c->state == NVMF_CTRL_LIVE)
		ana_refresh_start(c);
}

/* One Asynchronous Event Request stays outstanding while LIVE. */

static void aer_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t dw0 = req->cqe.result.dw0;
	char sbuf[96];

	nvmf_req_put(req);
	c->aer_armed = false;
	if (err || c->state != NVMF_CTRL_LIVE)
		return; /* the queue is going down; re-armed after reconnect */
	if (st) {
		ctrl_log(WARN, c, "asynchronous event request failed: %s; no more events",
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		return;
	}
	ctrl_log(INFO, c, "asynchronous event type %u info 0x%02x",
		 NVME_AER_TYPE(dw0), NVME_AER_INFO(dw0));
	if (NVME_AER_TYPE(dw0) == NVME_AER_TYPE_NOTICE &&
	    NVME_AER_INFO(dw0) == NVME_AER_NOTICE_ANA_CHANGE)
		ana_refresh_start(c);
	if (NVME_AER_TYPE(dw0) == NVME_AER_TYPE_NOTICE &&
	    NVME_AER_INFO(dw0) == NVME_AER_NOTICE_NS_CHANGED)
		ctrl_ns_event(c);
	ctrl_aer_submit(c);
}

void ctrl_aer_submit(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->aer_armed)
		return;
	if (!(req = ctrl_admin_req_reserved(c))) {
		ctrl_log(ERR, c, "no admin request for the asynchronous event request; no events "
			 "until the next reconnect");
		return;
	}
	c->aer_armed = true;
	req->sqe.opcode = NVME_ADMIN_ASYNC_EVENT;
	req->no_timeout = true;
	req->done = aer_done;
	nvmf_req_submit(req);
}
