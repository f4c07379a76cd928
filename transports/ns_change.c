/* Namespaces that change while the controller is live: the Namespace
 * Attribute Changed event, the Changed Namespace List log that names the
 * namespaces (or, when it overflowed, the whole active list), and the
 * re-identify that brings the controller's table up to date.  What a change
 * means for an export is nvmf_ns_change_classify; the owner applies it from
 * ns_cb.  All of it runs on the controller's reactor (reactor 0). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "transports/ctrl_priv.h"
#include "transports/nvme_spec.h"
#include "transports/status.h"

#define NSC_WORK_MAX (2 * NVME_CHANGED_NS_MAX)

enum nvmf_ns_change nvmf_ns_change_classify(const struct nvmf_ns *old, const struct nvmf_ns *now)
{
	if (!old && !now)
		return NVMF_NS_SAME;
	if (!old)
		return NVMF_NS_ADDED;
	if (!now)
		return NVMF_NS_REMOVED;
	if (memcmp(old->nguid, now->nguid, sizeof(old->nguid)) ||
	    memcmp(old->eui64, now->eui64, sizeof(old->eui64)))
		return NVMF_NS_OTHER;
	/* Compared only when both are known: a list that failed to come
	 * (a transient error) says nothing. */
	if (nvmf_uuid_known(old->uuid) && nvmf_uuid_known(now->uuid) &&
	    memcmp(old->uuid, now->uuid, 16))
		return NVMF_NS_OTHER;
	if (old->lba_size != now->lba_size || old->lba_shift != now->lba_shift)
		return NVMF_NS_LBA_FORMAT;
	if (now->nsze < old->nsze)
		return NVMF_NS_SHRUNK;
	if (now->nsze > old->nsze)
		return NVMF_NS_GROWN;
	return NVMF_NS_SAME;
}

const char *nvmf_ns_change_name(enum nvmf_ns_change ch)
{
	switch (ch) {
	case NVMF_NS_SAME: return "unchanged";
	case NVMF_NS_GROWN: return "grown";
	case NVMF_NS_SHRUNK: return "shrunk";
	case NVMF_NS_LBA_FORMAT: return "LBA format changed";
	case NVMF_NS_OTHER: return "another namespace (NGUID, EUI-64 or UUID changed)";
	case NVMF_NS_REMOVED: return "removed";
	case NVMF_NS_ADDED: return "added";
	}
	return "?";
}

/* The index of nsid in c's ascending table, or where it would go. */
static unsigned ns_slot(const struct nvmf_ctrl *c, uint32_t nsid)
{
	unsigned lo = 0, hi = c->nr_ns;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (c->ns[mid].nsid < nsid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The table stays in strictly ascending NSID order, within its 1024. */
static void ns_table_check(const struct nvmf_ctrl *c)
{
	if (!NVMF_INVARIANTS)
		return;
	INVARIANT(c->nr_ns <= NVME_CHANGED_NS_MAX, "namespace table within its size");
	for (unsigned i = 1; i < c->nr_ns; i++)
		INVARIANT(c->ns[i - 1].nsid < c->ns[i].nsid, "namespace table in NSID order");
}

static bool ns_update(struct nvmf_ctrl *c, uint32_t nsid, const struct nvmf_ns *ns);

bool nvmf_ctrl_ns_update(struct nvmf_ctrl *c, uint32_t nsid, const struct nvmf_ns *ns)
{
	bool ok = ns_update(c, nsid, ns);

	ns_table_check(c);
	return ok;
}

static bool ns_update(struct nvmf_ctrl *c, uint32_t nsid, const struct nvmf_ns *ns)
{
	unsigned i = ns_slot(c, nsid);
	bool found = i < c->nr_ns && c->ns[i].nsid == nsid;

	if (!ns) {
		if (found) {
			memmove(&c->ns[i], &c->ns[i + 1], (c->nr_ns - i - 1) * sizeof(*c->ns));
			c->nr_ns--;
		}
		return true;
	}
	if (found) {
		/* Identify does not tell the ANA state: the log page does, and
		 * a resize leaves it as it was. */
		uint8_t state = c->ns[i].ana_state;
		c->ns[i] = *ns;
		c->ns[i].ana_state = state;
		return true;
	}
	if (c->nr_ns >= NVME_CHANGED_NS_MAX)
		return false;
	memmove(&c->ns[i + 1], &c->ns[i], (c->nr_ns - i) * sizeof(*c->ns));
	c->ns[i] = *ns;
	c->nr_ns++;
	return true;
}

uint32_t ctrl_aen_config(const struct nvmf_ctrl *c)
{
	uint32_t cfg = 0;

	if (c->opts.discovery)
		return 0;
	if (c->ana && (c->id->oaes & NVME_CTRL_OAES_ANA_CHANGE))
		cfg |= NVME_AEN_CFG_ANA_CHANGE;
	if (c->id->oaes & NVME_CTRL_OAES_NS_ATTR)
		cfg |= NVME_AEN_CFG_NS_ATTR;
	return cfg;
}

static void nsc_retry_fire(struct reactor_timer *t)
{
	ctrl_ns_event(container_of(t, struct nvmf_ctrl, nsc_timer));
}

void ctrl_ns_change_init(struct nvmf_ctrl *c)
{
	reactor_timer_init(&c->nsc_timer, nsc_retry_fire);
	c->nsc_retry_ms = 0;
	c->nsc_retry_quiet = false;
	c->nsc_id_failed = c->nsc_rescan = false;
}

/* The log (or list) was not read: the target holds the next event back
 * until it is, so nothing else would bring the change in before a
 * reconnect. */
static void nsc_retry(struct nvmf_ctrl *c)
{
	if (c->state != NVMF_CTRL_LIVE)
		return; /* bring-up re-identifies */
	c->nsc_retry_ms = !c->nsc_retry_ms ? 1000 : c->nsc_retry_ms >= 15000 ? 30000
									     : 2 * c->nsc_retry_ms;
	/* Once at the 30 s ceiling the retries go on quietly: a target that
	 * keeps refusing the log would otherwise fill the log. */
	if (c->nsc_retry_ms < 30000 || !c->nsc_retry_quiet)
		ctrl_log(WARN, c, "namespace change: read again in %u s%s", c->nsc_retry_ms / 1000,
			 c->nsc_retry_ms == 30000 ? " (and every 30 s, not logged, until it works)"
						  : "");
	c->nsc_retry_quiet = c->nsc_retry_ms == 30000;
	reactor_timer_arm(c->r, &c->nsc_timer, (uint64_t)c->nsc_retry_ms * NSEC_PER_MSEC);
}

void ctrl_ns_change_free(struct nvmf_ctrl *c)
{
	reactor_timer_cancel(&c->nsc_timer);
	free(c->nsc_log);
	free(c->nsc_work);
	free(c->nsc_id);
	c->nsc_log = c->nsc_work = NULL;
	c->nsc_id = NULL;
}

static void nsc_next(struct nvmf_ctrl *c);
static void nsc_desc_done(struct nvmf_req *req, int err);

/* The event is handled (or given up: the next event, or the next
 * bring-up, re-identifies anyway). */
static void nsc_end(struct nvmf_ctrl *c, bool done)
{
	INVARIANT(c->nsc_busy && !c->nsc_inflight, "a namespace change ends once, when idle");
	c->nsc_busy = false;
	if (done && c->nsc_id_failed) {
		/* What was learnt is applied below; the namespaces whose
		 * Identify failed are asked again on the retry timer. */
		c->nsc_id_failed = false;
		c->nsc_rescan = true;
		nsc_retry(c);
	} else if (done) {
		/* A read that worked makes a pending retry moot: it would
		 * only read the log again and report a change that is none. */
		reactor_timer_cancel(&c->nsc_timer);
		c->nsc_retry_ms = 0;
		c->nsc_retry_quiet = false;
	}
	if (done) {
		c->ns_events++;
		if (c->ns_cb)
			c->ns_cb(c);
		/* A namespace new to the table has no ANA state yet. */
		if (c->ana)
			nvmf_ctrl_ana_refresh(c);
	}
	if (c->nsc_again && c->state == NVMF_CTRL_LIVE) {
		c->nsc_again = false;
		ctrl_ns_event(c);
	}
}

/* The event's next command, in the reserved admin request (one at a
 * time: the log, list and Identify buffers are each filled by one request
 * only); the caller prepares and submits it.  NULL only on a bug. */
static struct nvmf_req *nsc_req(struct nvmf_ctrl *c, void (*done)(struct nvmf_req *, int))
{
	struct nvmf_req *req;

	INVARIANT(c->nsc_busy && !c->nsc_inflight, "one namespace change command at a time");
	if (!(req = ctrl_admin_req_reserved(c))) {
		INVARIANT(false, "the namespace change's reserved admin request is free");
		ctrl_log(ERR, c, "namespace change: no admin request (a bug); re-identified at "
			 "the next reconnect");
		return NULL;
	}
	c->nsc_inflight++;
	req->done = done;
	return req;
}

/* 0, or the request's failure (logged); put in any case. */
static int nsc_req_result(struct nvmf_req *req, int err, const char *what)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	char sbuf[96];

	nvmf_req_put(req);
	INVARIANT(c->nsc_busy && c->nsc_inflight == 1, "a namespace change command completes once");
	c->nsc_inflight--;
	if (err || c->state != NVMF_CTRL_LIVE)
		return -ENOTCONN; /* the connection failed: bring-up re-identifies */
	if (st) {
		ctrl_log(WARN, c, "namespace change: %s failed: %s", what,
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		return nvme_status_to_errno(st) ?: -EIO;
	}
	return 0;
}

static void nsc_id_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t nsid = c->nsc_work[c->nsc_idx];
	struct nvmf_ns ns;

	nvmf_req_put(req);
	INVARIANT(c->nsc_busy && c->nsc_inflight == 1, "a namespace change command completes once");
	INVARIANT(c->nsc_idx < c->nsc_len && c->nsc_len <= NSC_WORK_MAX,
		  "the Identify is of the work list");
	c->nsc_inflight--;
	if (err || c->state != NVMF_CTRL_LIVE) {
		nsc_end(c, false);
		return;
	}
	/* Invalid Namespace, or zeroed data (nvmet's answer for an inactive
	 * NSID), mean: not there any more.  Any other status says nothing of
	 * the namespace (Command Interrupted, Namespace Not Ready, an internal
	 * error): it is left as it was, never taken for removed, which would
	 * take its exports down; the next event or reconnect asks again. */
	if (st && !(NVME_STATUS_SCT(st) == NVME_SCT_GENERIC && NVME_STATUS_SC(st) == 0x0b)) {
		char sbuf[96];
		ctrl_log(WARN, c, "namespace change: Identify of nsid %u failed: %s; left as it "
			 "was, asked again", nsid, nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		c->nsc_id_failed = true;
		c->nsc_idx++;
		nsc_next(c);
		return;
	}
	if (!st && nvmf_ns_from_id(c->opts.name, nsid, c->nsc_id, &ns) > 0) {
		ns.id_event = c->ns_events + 1; /* this event's, counted at its end */
		if (nvmf_ctrl_wants_descs(c)) {
			/* Its UUID before the table changes: the owner compares
			 * the whole identity at ns_cb. */
			struct nvmf_req *dreq = nsc_req(c, nsc_desc_done);
			if (!dreq) {
				nsc_end(c, false);
				return;
			}
			c->nsc_ns = ns;
			ctrl_prep_identify(dreq, NVME_ID_CNS_NS_DESC_LIST, nsid, c->nsc_id);
			nvmf_req_submit(dreq);
			return;
		}
		if (!nvmf_ctrl_ns_update(c, nsid, &ns))
			ctrl_log(WARN, c, "nsid %u: more than %u namespaces; not used", nsid,
				 NVME_CHANGED_NS_MAX);
	} else {
		if (nvmf_ctrl_find_ns(c, nsid))
			ctrl_log(NOTICE, c, "nsid %u is no longer active", nsid);
		nvmf_ctrl_ns_update(c, nsid, NULL);
	}
	c->nsc_idx++;
	nsc_next(c);
}

/* The descriptor list of the namespace nsc_id_done identified: its UUID,
 * then the table.  A failed list leaves the UUID unknown (zero), which no
 * comparison takes for a change. */
static void nsc_desc_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t nsid = c->nsc_ns.nsid;

	nvmf_req_put(req);
	INVARIANT(c->nsc_busy && c->nsc_inflight == 1, "a namespace change command completes once");
	c->nsc_inflight--;
	if (err || c->state != NVMF_CTRL_LIVE) {
		nsc_end(c, false);
		return;
	}
	if (!st)
		nvmf_ns_descs_uuid(c->nsc_id, 4096, c->nsc_ns.uuid);
	if (!nvmf_ctrl_ns_update(c, nsid, &c->nsc_ns))
		ctrl_log(WARN, c, "nsid %u: more than %u namespaces; not used", nsid,
			 NVME_CHANGED_NS_MAX);
	c->nsc_idx++;
	nsc_next(c);
}

static void nsc_next(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->nsc_idx >= c->nsc_len) {
		nsc_end(c, true);
		return;
	}
	if (!(req = nsc_req(c, nsc_id_done))) {
		nsc_end(c, false);
		return;
	}
	ctrl_prep_identify(req, NVME_ID_CNS_NS, c->nsc_work[c->nsc_idx], c->nsc_id);
	nvmf_req_submit(req);
}

/* After an overflowed log: every active NSID and every one the table has
 * (those not active any more are found removed by their Identify). */
static void nsc_list_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	unsigned n, i = 0, j = 0, k = 0;

	if ((err = nsc_req_result(req, err, "reading the active namespace list")) < 0) {
		nsc_end(c, false);
		if (err != -ENOTCONN)
			nsc_retry(c);
		return;
	}
	n = nvmf_ns_list_count(c->opts.name, c->nsc_log, NVME_CHANGED_NS_MAX);
	while ((i < n || j < c->nr_ns) && k < NSC_WORK_MAX) {
		uint32_t a = i < n ? c->nsc_log[i] : UINT32_MAX;
		uint32_t b = j < c->nr_ns ? c->ns[j].nsid : UINT32_MAX;
		c->nsc_work[k++] = a < b ? a : b;
		i += a <= b;
		j += b <= a;
	}
	c->nsc_len = k;
	c->nsc_idx = 0;
	nsc_next(c);
}

static int nsid_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void nsc_log_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	unsigned n;

	if ((err = nsc_req_result(req, err, "reading the Changed Namespace List log")) < 0) {
		nsc_end(c, false);
		if (err != -ENOTCONN)
			nsc_retry(c);
		return;
	}
	if (c->nsc_log[0] == NVME_CHANGED_NS_OVERFLOW || c->nsc_rescan) {
		if (c->nsc_rescan)
			ctrl_log(INFO, c, "re-identifying every namespace (an Identify failed)");
		else
			ctrl_log(NOTICE, c, "more than %u namespaces changed; re-identifying every "
				 "one", NVME_CHANGED_NS_MAX);
		c->nsc_rescan = false;
		if (!(req = nsc_req(c, nsc_list_done))) {
			nsc_end(c, false);
			return;
		}
		ctrl_prep_identify(req, NVME_ID_CNS_NS_ACTIVE_LIST, 0, c->nsc_log);
		nvmf_req_submit(req);
		return;
	}
	/* The list ends at the first zero.  FFFFFFFFh past the first entry
	 * (the broadcast NSID: its Identify describes every namespace, and
	 * the table would gain a namespace FFFFFFFFh) and repeats are left
	 * out; the rest is identified in NSID order. */
	unsigned k = 0, odd = 0;
	for (n = 0; n < NVME_CHANGED_NS_MAX && c->nsc_log[n]; n++) {
		if (c->nsc_log[n] == NVME_CHANGED_NS_OVERFLOW)
			odd++;
		else
			c->nsc_work[k++] = c->nsc_log[n];
	}
	if (odd)
		ctrl_log(WARN, c, "the Changed Namespace List log lists NSID FFFFFFFFh %u time%s "
			 "after its first entry; left out", odd, odd == 1 ? "" : "s");
	qsort(c->nsc_work, k, sizeof(*c->nsc_work), nsid_cmp);
	n = k;
	k = 0;
	for (unsigned i = 0; i < n; i++)
		if (!k || c->nsc_work[k - 1] != c->nsc_work[i])
			c->nsc_work[k++] = c->nsc_work[i];
	ctrl_log(INFO, c, "namespace attributes changed: %u namespace%s to re-identify", k,
		 k == 1 ? "" : "s");
	c->nsc_len = k;
	c->nsc_idx = 0;
	nsc_next(c);
}

void ctrl_ns_event(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->state != NVMF_CTRL_LIVE)
		return;
	if (c->nsc_busy) {
		c->nsc_again = true;
		return;
	}
	if (!c->nsc_log) {
		/* Control path, once per controller. */
		c->nsc_log = aligned_alloc(4096, 4096);
		c->nsc_id = aligned_alloc(4096, 4096);
		c->nsc_work = calloc(NSC_WORK_MAX, sizeof(*c->nsc_work));
		if (!c->nsc_log || !c->nsc_id || !c->nsc_work) {
			ctrl_log(ERR, c, "namespace change: out of memory; not re-identified");
			ctrl_ns_change_free(c);
			return;
		}
	}
	c->nsc_busy = true;
	if (!(req = nsc_req(c, nsc_log_done))) {
		c->nsc_busy = false;
		return;
	}
	memset(c->nsc_log, 0, 4096);
	/* Reading the log also tells the target the event was seen: it sends
	 * the next one only after that. */
	ctrl_prep_get_log(req, NVME_LOG_CHANGED_NS, c->nsc_log, 4096, 0);
	nvmf_req_submit(req);
}
