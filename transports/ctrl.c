/* Controller bring-up, keep-alive and shutdown, in the order the NVMe over
 * Fabrics specification gives: admin Connect, CAP/VS, CC.EN and CSTS.RDY
 * within CAP.TO, Identify, queue count, namespaces, I/O queue Connects.
 * Every step is one admin command whose completion starts the next; the
 * step timer bounds each wait. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "transports/ctrl.h"
#include "transports/status.h"

#define ADMIN_QUEUE_SIZE 32
#define DEFAULT_STEP_TIMEOUT_MS 10000u
#define DEFAULT_MAX_XFER (256u * 1024)
#define SHUTDOWN_TIMEOUT_MS 5000u

/* Names from switches with no default: -Wswitch names a state or step
 * added without one. */
const char *nvmf_ctrl_state_name(enum nvmf_ctrl_state s)
{
	switch (s) {
	case NVMF_CTRL_NEW: return "new";
	case NVMF_CTRL_CONNECTING: return "connecting";
	case NVMF_CTRL_LIVE: return "live";
	case NVMF_CTRL_RESETTING: return "resetting";
	case NVMF_CTRL_DELETING: return "deleting";
	case NVMF_CTRL_DEAD: return "dead";
	}
	return "?";
}

static const char *step_name(enum nvmf_init_step s)
{
	switch (s) {
	case INIT_NONE: return "none";
	case INIT_ADMIN_CONNECT: return "admin queue connect";
	case INIT_GET_CAP: return "property get CAP";
	case INIT_GET_VS: return "property get VS";
	case INIT_SET_CC: return "property set CC.EN";
	case INIT_WAIT_RDY: return "waiting for CSTS.RDY";
	case INIT_IDENTIFY_CTRL: return "identify controller";
	case INIT_SET_NUM_QUEUES: return "set features number of queues";
	case INIT_NS_LIST: return "identify active namespace list";
	case INIT_IDENTIFY_NS: return "identify namespace";
	case INIT_ANA_LOG: return "get log page ANA";
	case INIT_AEN_CONFIG: return "set features asynchronous event configuration";
	case INIT_IO_QUEUES: return "I/O queue connect";
	case INIT_DONE: return "done";
	}
	return "?";
}

static bool ctrl_transition_ok(enum nvmf_ctrl_state from, enum nvmf_ctrl_state to)
{
	switch (to) {
	case NVMF_CTRL_CONNECTING:
		/* From DEAD only when the operator asks for it again. */
		return from == NVMF_CTRL_NEW || from == NVMF_CTRL_RESETTING ||
		       from == NVMF_CTRL_DEAD;
	case NVMF_CTRL_LIVE:
		return from == NVMF_CTRL_CONNECTING;
	case NVMF_CTRL_RESETTING:
		return from == NVMF_CTRL_LIVE;
	case NVMF_CTRL_DELETING:
		return from != NVMF_CTRL_DELETING && from != NVMF_CTRL_DEAD;
	case NVMF_CTRL_DEAD:
		return from != NVMF_CTRL_DEAD;
	case NVMF_CTRL_NEW:
		return false;
	}
	return false;
}

bool nvmf_ctrl_set_state(struct nvmf_ctrl *c, enum nvmf_ctrl_state s)
{
	if (!ctrl_transition_ok(c->state, s)) {
		log_err("ctrl %s: illegal state change %s -> %s refused", c->opts.name,
			nvmf_ctrl_state_name(c->state), nvmf_ctrl_state_name(s));
		return false;
	}
	log_info("ctrl %s: %s -> %s", c->opts.name, nvmf_ctrl_state_name(c->state),
		 nvmf_ctrl_state_name(s));
	c->state = s;
	return true;
}

struct nvmf_ns *nvmf_ctrl_find_ns(struct nvmf_ctrl *c, uint32_t nsid)
{
	for (unsigned i = 0; i < c->nr_ns; i++)
		if (c->ns[i].nsid == nsid)
			return &c->ns[i];
	return NULL;
}

/* ---- Fabrics Connect (any queue) ---- */

static void describe_connect_error(struct nvmf_queue *q, const struct nvme_cqe *cqe,
				   char *buf, size_t len)
{
	uint16_t st = (uint16_t)(cqe->status >> 1);
	struct nvmf_ctrl *c = q->ctrl;
	char sbuf[96];

	nvme_status_fmt(st, sbuf, sizeof(sbuf));
	/* Command-specific codes mean other things for Connect than for I/O. */
	if (NVME_STATUS_SCT(st) == NVME_SCT_CMD_SPECIFIC && NVME_STATUS_SC(st) >= 0x80 &&
	    NVME_STATUS_SC(st) <= 0x84) {
		static const char *const names[] = { "Connect Incompatible Format",
						     "Connect Controller Busy",
						     "Connect Invalid Parameters",
						     "Connect Restart Discovery",
						     "Connect Invalid Host" };
		snprintf(sbuf, sizeof(sbuf), "%s (sct 0x1 sc 0x%02x%s)",
			 names[NVME_STATUS_SC(st) - 0x80], NVME_STATUS_SC(st),
			 NVME_STATUS_DNR(st) ? ", dnr" : "");
	}
	if (NVME_STATUS_SCT(st) == NVME_SCT_CMD_SPECIFIC &&
	    NVME_STATUS_SC(st) == NVMF_SC_CONNECT_INVALID_PARAM && (cqe->result.dw0 >> 16)) {
		switch (cqe->result.dw0 & 0xffff) {
		case offsetof(struct nvmf_connect_data, subsysnqn):
			snprintf(buf, len, "target has no subsystem %s (or not on this port): %s",
				 c->opts.subnqn, sbuf);
			return;
		case offsetof(struct nvmf_connect_data, hostnqn):
			snprintf(buf, len, "target refused host NQN %s: %s", c->opts.hostnqn, sbuf);
			return;
		case offsetof(struct nvmf_connect_data, cntlid):
			snprintf(buf, len, "target refused controller ID %u: %s", c->cntlid, sbuf);
			return;
		}
	}
	if (NVME_STATUS_SCT(st) == NVME_SCT_CMD_SPECIFIC &&
	    NVME_STATUS_SC(st) == NVMF_SC_CONNECT_INVALID_HOST) {
		snprintf(buf, len, "host %s is not allowed to connect to %s: %s", c->opts.hostnqn,
			 c->opts.subnqn, sbuf);
		return;
	}
	snprintf(buf, len, "connect rejected: %s", sbuf);
}

static void queue_live(struct nvmf_queue *q)
{
	/* A queue closed meanwhile reports through its quiesce instead. */
	if (!nvmf_queue_set_state(q, NVMF_Q_LIVE))
		return;
	nvmf_queue_cb cb = q->connect_cb;
	q->connect_cb = NULL;
	cb(q, 0);
}

static void queue_authenticated(struct nvmf_queue *q, int err)
{
	if (err) {
		/* The reason was logged by the transaction. */
		nvmf_queue_shutdown(q, err);
		return;
	}
	queue_live(q);
}

static void fabric_connect_done(struct nvmf_req *req, int err)
{
	struct nvmf_queue *q = req->q;
	struct nvme_cqe cqe = req->cqe;
	uint16_t st = (uint16_t)(cqe.status >> 1);

	nvmf_req_put(req);
	free(q->connect_data);
	q->connect_data = NULL;
	if (err)
		return; /* the queue is already going down; connect_cb reports */
	if (st) {
		char why[1024];
		describe_connect_error(q, &cqe, why, sizeof(why));
		log_err("%s: %s", q->name, why);
		nvmf_queue_shutdown(q, nvme_status_to_errno(st));
		return;
	}
	if (q->qid == 0)
		q->ctrl->cntlid = cqe.result.u16;
	if (cqe.result.dw0 & NVMF_CONNECT_AUTHREQ_ASCR) {
		log_err("%s: the target requires a secure channel (TLS), which this gateway "
			"does not do",
			q->name);
		nvmf_queue_shutdown(q, -EACCES);
		return;
	}
	/* Every queue of an authenticating target authenticates on its own,
	 * so a reconnect authenticates again. */
	if (cqe.result.dw0 & NVMF_CONNECT_AUTHREQ_ATR) {
		nvmf_queue_authenticate(q, queue_authenticated);
		return;
	}
	int ret = nvmf_auth_check_unasked(q);
	if (ret < 0) {
		nvmf_queue_shutdown(q, ret);
		return;
	}
	queue_live(q);
}

void nvmf_fabric_connect(struct nvmf_queue *q)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct nvmf_req *req = nvmf_req_get(q);
	struct nvmf_connect_cmd *cmd;
	struct nvmf_connect_data *d;

	if (!req || !(d = calloc(1, sizeof(*d)))) {
		if (req)
			nvmf_req_put(req);
		nvmf_queue_transport_error(q, -ENOMEM, "no memory for Connect");
		return;
	}
	q->connect_data = d;
	memcpy(d->hostid, c->opts.hostid, sizeof(d->hostid));
	/* Admin: any controller (dynamic model); I/O: the one we got. */
	d->cntlid = q->qid == 0 ? 0xffff : c->cntlid;
	snprintf(d->subsysnqn, sizeof(d->subsysnqn), "%s", c->opts.subnqn);
	snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", c->opts.hostnqn);

	cmd = (struct nvmf_connect_cmd *)&req->sqe;
	cmd->opcode = NVME_FABRICS_COMMAND;
	cmd->fctype = NVMF_FCTYPE_CONNECT;
	cmd->recfmt = 0;
	cmd->qid = q->qid;
	cmd->sqsize = (uint16_t)(q->size - 1);
	cmd->kato = q->qid == 0 ? c->opts.kato_ms : 0;
	struct iovec iov = { d, sizeof(*d) };
	nvmf_req_set_data(req, &iov, 1, sizeof(*d), true);
	req->done = fabric_connect_done;
	nvmf_req_submit(req);
}

void nvmf_queue_connect(struct nvmf_queue *q, nvmf_queue_cb cb)
{
	int ret;

	/* A queue not idle or dead is connected, or being so, already: the
	 * caller's callback is the one it reports to. */
	if (!nvmf_queue_set_state(q, NVMF_Q_CONNECTING)) {
		cb(q, -EALREADY);
		return;
	}
	q->connect_cb = cb;
	ret = q->ops->queue_connect(q);
	if (ret < 0)
		nvmf_queue_shutdown(q, ret);
}

/* ---- admin commands ---- */

struct nvmf_req *nvmf_admin_req(struct nvmf_ctrl *c)
{
	struct nvmf_req *req = nvmf_req_get(&c->adminq);
	if (req)
		req->ctx = c;
	return req;
}

static void admin_data(struct nvmf_req *req, void *buf, uint32_t len, bool to_ctrl)
{
	struct iovec iov = { buf, len };
	nvmf_req_set_data(req, &iov, 1, len, to_ctrl);
}

static void prep_property_get(struct nvmf_req *req, uint32_t off, bool eight)
{
	struct nvmf_property_cmd *p = (struct nvmf_property_cmd *)&req->sqe;
	p->opcode = NVME_FABRICS_COMMAND;
	p->fctype = NVMF_FCTYPE_PROPERTY_GET;
	p->attrib = eight ? 1 : 0;
	p->offset = off;
}

static void prep_property_set(struct nvmf_req *req, uint32_t off, uint64_t val)
{
	struct nvmf_property_cmd *p = (struct nvmf_property_cmd *)&req->sqe;
	p->opcode = NVME_FABRICS_COMMAND;
	p->fctype = NVMF_FCTYPE_PROPERTY_SET;
	p->attrib = 0;
	p->offset = off;
	p->value = val;
}

static void prep_identify(struct nvmf_req *req, uint8_t cns, uint32_t nsid, void *buf)
{
	req->sqe.opcode = NVME_ADMIN_IDENTIFY;
	req->sqe.nsid = nsid;
	req->sqe.cdw10 = cns;
	admin_data(req, buf, 4096, false);
}

/* len bytes of log page lid from byte off: NUMDU/NUMDL and LPOU/LPOL. */
static void prep_get_log(struct nvmf_req *req, uint8_t lid, void *buf, uint32_t len,
			 uint64_t off)
{
	uint32_t numd = len / 4 - 1;

	req->sqe.opcode = NVME_ADMIN_GET_LOG_PAGE;
	req->sqe.nsid = 0xffffffff;
	req->sqe.cdw10 = lid | ((numd & 0xffff) << 16);
	req->sqe.cdw11 = numd >> 16;
	req->sqe.cdw12 = (uint32_t)off;
	req->sqe.cdw13 = (uint32_t)(off >> 32);
	admin_data(req, buf, len, false);
}

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
		if (!ns || ns->anagrpid == grpid)
			continue;
		log_notice("ctrl %s: nsid %u moved from ANA group %u to %u (ANA log page)",
			   c->opts.name, nsid, ns->anagrpid, grpid);
		ns->anagrpid = grpid;
		c->ana_regroups++;
		a->changed = true;
	}
	for (unsigned i = 0; i < c->nr_ns; i++) {
		struct nvmf_ns *ns = &c->ns[i];
		if (ns->anagrpid != grpid || ns->ana_state == state)
			continue;
		log_notice("ctrl %s: nsid %u (ANA group %u): %s -> %s", c->opts.name, ns->nsid,
			   grpid, nvme_ana_state_name(ns->ana_state), nvme_ana_state_name(state));
		ns->ana_state = state;
		a->changed = true;
	}
}

int nvmf_ctrl_ana_apply(struct nvmf_ctrl *c, const void *buf, size_t len)
{
	struct ana_apply_ctx a = { .c = c };
	int ret = ana_log_walk(buf, len, &c->ana_chgcnt, ana_group, &a);

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
	struct nvmf_req *req = nvmf_admin_req(c);

	if (!req)
		return -EBUSY;
	req->done = ana_check_done;
	prep_get_log(req, NVME_LOG_ANA, c->ana_chk, sizeof(c->ana_chk), 0);
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
	if (!(req = nvmf_admin_req(c)))
		return -EBUSY;
	c->ana_chunk = (uint32_t)len;
	req->done = ana_read_done;
	prep_get_log(req, NVME_LOG_ANA, c->ana_log + c->ana_have, (uint32_t)len, c->ana_have);
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
		log_warn("ctrl %s: reading the ANA log (bytes %zu to %zu) failed: %s", c->opts.name,
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
		log_err("ctrl %s: the ANA log page claims at least %llu bytes, more than the %u "
			"this host reads; refused",
			c->opts.name, (unsigned long long)need, NVMF_ANA_LOG_MAX);
		ana_read_finish(c, -EMSGSIZE);
		return;
	}
	c->ana_want = want;
	if (restart)
		c->ana_have = 0; /* again, whole, in one command */
	else
		c->ana_pieces = true;
	log_info("ctrl %s: the ANA log page is at least %llu bytes: reading %zu bytes%s",
		 c->opts.name, (unsigned long long)need, c->ana_want,
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
		log_warn("ctrl %s: reading the ANA log header again failed: %s", c->opts.name,
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
		log_warn("ctrl %s: the ANA log page changed while it was read in pieces, %u times "
			 "in a row (change count %llu -> %llu); states unchanged for now",
			 c->opts.name, c->ana_rereads, (unsigned long long)was.chgcnt,
			 (unsigned long long)now.chgcnt);
		ana_read_finish(c, -EAGAIN);
		return;
	}
	log_info("ctrl %s: the ANA log page changed while it was read in pieces (change count "
		 "%llu -> %llu); reading it again",
		 c->opts.name, (unsigned long long)was.chgcnt, (unsigned long long)now.chgcnt);
	c->ana_pieces = false;
	c->ana_have = 0;
	c->ana_want = ANA_FIRST_READ;
	if ((err = ana_read_chunk(c)) < 0)
		ana_read_finish(c, err);
}

/* Reads the page into c->ana_log[0..c->ana_have); then(c, 0 or -errno). */
static int ana_read_start(struct nvmf_ctrl *c, void (*then)(struct nvmf_ctrl *, int))
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
		log_warn("ctrl %s: malformed ANA log page; states unchanged", c->opts.name);
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
	if (ana_read_start(c, ana_refresh_read) < 0) {
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
static void aer_submit(struct nvmf_ctrl *c);

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
		log_warn("ctrl %s: asynchronous event request failed: %s; no more events",
			 c->opts.name, nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		return;
	}
	log_info("ctrl %s: asynchronous event type %u info 0x%02x", c->opts.name,
		 NVME_AER_TYPE(dw0), NVME_AER_INFO(dw0));
	if (NVME_AER_TYPE(dw0) == NVME_AER_TYPE_NOTICE &&
	    NVME_AER_INFO(dw0) == NVME_AER_NOTICE_ANA_CHANGE)
		ana_refresh_start(c);
	aer_submit(c);
}

static void aer_submit(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->aer_armed || !(req = nvmf_admin_req(c)))
		return;
	c->aer_armed = true;
	req->sqe.opcode = NVME_ADMIN_ASYNC_EVENT;
	req->no_timeout = true;
	req->done = aer_done;
	nvmf_req_submit(req);
}

/* ---- bring-up ---- */

static void init_fail(struct nvmf_ctrl *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void init_next(struct nvmf_ctrl *c);
static void ioq_connect_all(struct nvmf_ctrl *c);
static void ctrl_teardown(struct nvmf_ctrl *c, nvmf_ctrl_cb cb);

static void step_timeout(struct reactor_timer *t)
{
	struct nvmf_ctrl *c = container_of(t, struct nvmf_ctrl, step_timer);

	if (c->step == INIT_WAIT_RDY && reactor_now_ns() < c->deadline_ns) {
		init_next(c); /* poll CSTS again */
		return;
	}
	if (c->step == INIT_DONE && c->shutdown_cb)
		return; /* the shutdown's own wait handles it */
	init_fail(c, -ETIMEDOUT, "%s timed out", step_name(c->step));
}

static void arm_step(struct nvmf_ctrl *c, unsigned ms)
{
	c->deadline_ns = reactor_now_ns() + (uint64_t)ms * NSEC_PER_MSEC;
	reactor_timer_arm(c->r, &c->step_timer, (uint64_t)ms * NSEC_PER_MSEC);
}

static void init_failed_down(struct nvmf_ctrl *c, int err)
{
	nvmf_ctrl_cb cb = c->ready_cb;
	(void)err;
	c->ready_cb = NULL;
	if (cb)
		cb(c, c->error);
}

static void init_fail(struct nvmf_ctrl *c, int err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (c->state != NVMF_CTRL_CONNECTING)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_err("ctrl %s: bring-up failed at %s: %s", c->opts.name, step_name(c->step), msg);
	c->error = err ? err : -EIO;
	reactor_timer_cancel(&c->step_timer);
	/* A reconnect attempt that fails stays CONNECTING: the owner tries
	 * again or deletes the controller. */
	if (!c->reconnecting)
		nvmf_ctrl_set_state(c, NVMF_CTRL_DEAD);
	ctrl_teardown(c, init_failed_down);
}

uint32_t nvmf_pick_max_xfer(uint64_t cap_reg, uint8_t mdts, uint32_t opt_max)
{
	uint32_t cap = opt_max ? opt_max : DEFAULT_MAX_XFER;
	/* At most 2^27 (MPSMIN is 4 bits) shifted by less than 32: no
	 * overflow in 64 bits; 2^32 pages or more is no limit for us. */
	uint64_t mps = 4096ull << NVME_CAP_MPSMIN(cap_reg);

	if (mdts && mdts < 32 && (mps << mdts) < cap)
		cap = (uint32_t)(mps << mdts);
	/* Each command's data must fit the request's iovec array even when
	 * the caller's buffer is page-fragmented. */
	if (cap > (NVMF_REQ_MAX_IOV - 1) * 4096u)
		cap = (NVMF_REQ_MAX_IOV - 1) * 4096u;
	return cap;
}

uint32_t nvmf_in_capsule_max(uint32_t ioccsz)
{
	/* 16-byte units including the 64-byte command: 64-bit, so that a
	 * huge IOCCSZ cannot wrap into a small (or any) other value. */
	uint64_t b = (uint64_t)ioccsz * 16u;

	if (ioccsz < 4)
		return 0;
	return b - 64 > UINT32_MAX ? UINT32_MAX : (uint32_t)(b - 64);
}

int nvmf_ns_from_id(const char *name, uint32_t nsid, const struct nvme_id_ns *id,
		    struct nvmf_ns *ns)
{
	unsigned idx = NVME_NS_FLBAS_INDEX(id->flbas);

	if (id->nsze == 0)
		return 0; /* inactive after all */
	if (idx > id->nlbaf || id->lbaf[idx].ds < 9 || id->lbaf[idx].ds > 16) {
		log_warn("ctrl %s: nsid %u has an unusable LBA format (index %u, ds %u); skipped",
			 name, nsid, idx, idx < 64 ? id->lbaf[idx].ds : 0);
		return 0;
	}
	/* Sizes in bytes are signed 64-bit (off_t) further up: a size that
	 * does not fit would wrap into a small or negative one. */
	if (id->nsze > (uint64_t)INT64_MAX >> id->lbaf[idx].ds) {
		log_warn("ctrl %s: nsid %u claims %llu blocks of %u bytes, more than 2^63 bytes; "
			 "skipped",
			 name, nsid, (unsigned long long)id->nsze, 1u << id->lbaf[idx].ds);
		return 0;
	}
	if (id->lbaf[idx].ms && (id->flbas & 0x10) == 0)
		log_warn("ctrl %s: nsid %u has separate metadata, which is ignored", name, nsid);
	memset(ns, 0, sizeof(*ns));
	ns->nsid = nsid;
	ns->nsze = id->nsze;
	ns->lba_shift = id->lbaf[idx].ds;
	ns->lba_size = 1u << ns->lba_shift;
	ns->dlfeat = id->dlfeat;
	if ((id->nsfeat & NVME_NS_NSFEAT_OPTPERF) && id->npwg)
		ns->optimal_io = ((uint32_t)id->npwg + 1) * ns->lba_size;
	memcpy(ns->nguid, id->nguid, sizeof(ns->nguid));
	memcpy(ns->eui64, id->eui64, sizeof(ns->eui64));
	ns->anagrpid = id->anagrpid;
	ns->ana_state = NVME_ANA_OPTIMIZED;
	log_info("ctrl %s: nsid %u: %llu blocks of %u bytes (%.1f GiB)", name, nsid,
		 (unsigned long long)ns->nsze, ns->lba_size,
		 (double)(ns->nsze << ns->lba_shift) / (1024.0 * 1024 * 1024));
	return 1;
}

unsigned nvmf_ns_list_count(const char *name, const uint32_t *list, unsigned max)
{
	unsigned n;

	for (n = 0; n < max && list[n]; n++) {
		/* The list is in increasing order (NVMe base spec, Identify
		 * CNS 02h); a repeated ID would become two namespaces. */
		if (list[n] == 0xffffffff || (n && list[n] <= list[n - 1])) {
			log_warn("ctrl %s: active namespace list entry %u (nsid %u) is out of "
				 "order or invalid; the list is used up to there",
				 name, n, list[n]);
			break;
		}
	}
	return n;
}

static void parse_ns(struct nvmf_ctrl *c, uint32_t nsid, const struct nvme_id_ns *id)
{
	if (nvmf_ns_from_id(c->opts.name, nsid, id, &c->ns[c->nr_ns]) > 0)
		c->nr_ns++;
}

static void ana_init_read(struct nvmf_ctrl *c, int err)
{
	if (c->state != NVMF_CTRL_CONNECTING)
		return;
	if (err) {
		init_fail(c, err, "%s", err == -EMSGSIZE ? "ANA log page too large"
							: "ANA log page not read");
		return;
	}
	if (nvmf_ctrl_ana_apply(c, c->ana_log, c->ana_have) < 0) {
		init_fail(c, -EPROTO, "malformed ANA log page");
		return;
	}
	c->step = (c->id->oaes & NVME_CTRL_OAES_ANA_CHANGE) ? INIT_AEN_CONFIG : INIT_IO_QUEUES;
	init_next(c);
}

static void init_cmd_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	struct nvme_cqe cqe = req->cqe;
	uint16_t st = (uint16_t)(cqe.status >> 1);
	char sbuf[96];

	nvmf_req_put(req);
	if (c->state != NVMF_CTRL_CONNECTING)
		return;
	if (err) {
		init_fail(c, err, "admin queue lost: %s", strerror(-err));
		return;
	}
	if (st && c->step == INIT_AEN_CONFIG) {
		/* Without ANA change events the gateway still reads the log
		 * when an I/O reports an ANA state: slower, not wrong. */
		log_warn("ctrl %s: cannot enable ANA change events: %s", c->opts.name,
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		c->step = INIT_IO_QUEUES;
		init_next(c);
		return;
	}
	if (st) {
		init_fail(c, nvme_status_to_errno(st), "%s",
			  nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		return;
	}
	switch (c->step) {
	case INIT_GET_CAP:
		c->cap = cqe.result.u64;
		c->step = INIT_GET_VS;
		break;
	case INIT_GET_VS:
		c->vs = cqe.result.dw0;
		c->step = INIT_SET_CC;
		break;
	case INIT_SET_CC:
		c->step = INIT_WAIT_RDY;
		/* CAP.TO is in 500 ms units; 0 would be a broken target, give
		 * it the minimum rather than no time at all. */
		arm_step(c, (NVME_CAP_TO(c->cap) ? NVME_CAP_TO(c->cap) : 1) * 500u);
		break;
	case INIT_WAIT_RDY:
		if (cqe.result.dw0 & NVME_CSTS_CFS) {
			init_fail(c, -EIO, "controller fatal status (CSTS 0x%x)", cqe.result.dw0);
			return;
		}
		if (!(cqe.result.dw0 & NVME_CSTS_RDY)) {
			/* Not ready yet: ask again shortly, within CAP.TO. */
			uint64_t now = reactor_now_ns();
			if (now >= c->deadline_ns) {
				init_fail(c, -ETIMEDOUT, "CSTS.RDY not set within CAP.TO");
				return;
			}
			reactor_timer_arm(c->r, &c->step_timer, 10 * NSEC_PER_MSEC);
			return;
		}
		c->step = INIT_IDENTIFY_CTRL;
		break;
	case INIT_IDENTIFY_CTRL:
		c->ana = !c->opts.discovery && (c->id->cmic & NVME_CTRL_CMIC_ANA);
		c->max_xfer = nvmf_pick_max_xfer(c->cap, c->id->mdts, c->opts.max_xfer);
		if (c->vwc_before >= 0 && c->vwc_before != (int)(c->id->vwc & NVME_CTRL_VWC_PRESENT))
			/* The volume's flush capability was settled at export
			 * time from every path (vol_mp_create); say so when a
			 * controller changes its mind across a reconnect. */
			log_warn("ctrl %s: the volatile write cache is now %s (it was %s before "
				 "the reconnect)",
				 c->opts.name, (c->id->vwc & NVME_CTRL_VWC_PRESENT) ? "present" : "absent",
				 c->vwc_before ? "present" : "absent");
		c->vwc_before = c->id->vwc & NVME_CTRL_VWC_PRESENT;
		c->in_capsule_max = nvmf_in_capsule_max(c->id->ioccsz);
		log_info("ctrl %s: cntlid %u, NVMe %u.%u, model '%.40s', max transfer %u, "
			 "in-capsule %u, %u namespaces",
			 c->opts.name, c->cntlid, c->vs >> 16, (c->vs >> 8) & 0xff, c->id->mn,
			 c->max_xfer, c->in_capsule_max, c->id->nn);
		if (c->opts.discovery) {
			c->step = INIT_DONE;
			break;
		}
		c->step = INIT_SET_NUM_QUEUES;
		break;
	case INIT_SET_NUM_QUEUES: {
		unsigned nsq = (cqe.result.dw0 & 0xffff) + 1u, ncq = (cqe.result.dw0 >> 16) + 1u;
		unsigned n = c->opts.nr_io_queues;
		if (nsq < n)
			n = nsq;
		if (ncq < n)
			n = ncq;
		if (n < c->opts.nr_io_queues)
			log_notice("ctrl %s: controller allows %u I/O queues of %u asked", c->opts.name,
				   n, c->opts.nr_io_queues);
		c->nr_ioq = n;
		c->step = INIT_NS_LIST;
		break;
	}
	case INIT_NS_LIST:
		memcpy(c->ns_list, c->admin_buf, 4096);
		c->ns_list_len = nvmf_ns_list_count(c->opts.name, c->ns_list, 1024);
		c->ns_list_idx = 0;
		c->step = INIT_IDENTIFY_NS;
		break;
	case INIT_IDENTIFY_NS:
		parse_ns(c, c->ns_list[c->ns_list_idx], c->admin_buf);
		c->ns_list_idx++;
		break;
	case INIT_AEN_CONFIG:
		c->step = INIT_IO_QUEUES;
		break;
	default:
		init_fail(c, -EPROTO, "unexpected completion");
		return;
	}
	init_next(c);
}

static void init_live(struct nvmf_ctrl *c);

/* Issue the command of the current step. */
static void init_next(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->step == INIT_IDENTIFY_NS && c->ns_list_idx >= c->ns_list_len) {
		if (c->ns_list_idx == 1024)
			log_warn("ctrl %s: more than 1024 namespaces; only the first 1024 are used",
				 c->opts.name);
		c->step = c->ana ? INIT_ANA_LOG : INIT_IO_QUEUES;
	}
	if (c->step == INIT_IO_QUEUES) {
		ioq_connect_all(c);
		return;
	}
	if (c->step == INIT_DONE) {
		init_live(c);
		return;
	}
	if (c->step != INIT_WAIT_RDY)
		arm_step(c, DEFAULT_STEP_TIMEOUT_MS);
	if (c->step == INIT_ANA_LOG) {
		/* Possibly several commands, all within this step's timer. */
		int ret = ana_read_start(c, ana_init_read);
		if (ret < 0)
			init_fail(c, ret, "no free admin request");
		return;
	}
	req = nvmf_admin_req(c);
	if (!req) {
		init_fail(c, -EBUSY, "no free admin request");
		return;
	}
	req->done = init_cmd_done;
	switch (c->step) {
	case INIT_GET_CAP:
		prep_property_get(req, NVME_REG_CAP, true);
		break;
	case INIT_GET_VS:
		prep_property_get(req, NVME_REG_VS, false);
		break;
	case INIT_SET_CC:
		c->cc = NVME_CC_EN | NVME_CC_CSS_NVM | NVME_CC_MPS(12) | NVME_CC_IOSQES |
			NVME_CC_IOCQES;
		prep_property_set(req, NVME_REG_CC, c->cc);
		break;
	case INIT_WAIT_RDY:
		prep_property_get(req, NVME_REG_CSTS, false);
		break;
	case INIT_IDENTIFY_CTRL:
		prep_identify(req, NVME_ID_CNS_CTRL, 0, c->id);
		break;
	case INIT_SET_NUM_QUEUES:
		req->sqe.opcode = NVME_ADMIN_SET_FEATURES;
		req->sqe.cdw10 = NVME_FEAT_NUM_QUEUES;
		req->sqe.cdw11 = (c->opts.nr_io_queues - 1) | ((c->opts.nr_io_queues - 1) << 16);
		break;
	case INIT_NS_LIST:
		prep_identify(req, NVME_ID_CNS_NS_ACTIVE_LIST, 0, c->admin_buf);
		break;
	case INIT_IDENTIFY_NS:
		prep_identify(req, NVME_ID_CNS_NS, c->ns_list[c->ns_list_idx], c->admin_buf);
		break;
	case INIT_AEN_CONFIG:
		req->sqe.opcode = NVME_ADMIN_SET_FEATURES;
		req->sqe.cdw10 = NVME_FEAT_ASYNC_EVENT;
		req->sqe.cdw11 = NVME_AEN_CFG_ANA_CHANGE;
		break;
	default:
		nvmf_req_put(req);
		init_fail(c, -EPROTO, "bad step");
		return;
	}
	nvmf_req_submit(req);
}

/* ---- Abort (an I/O command timed out) ---- */

struct abort_msg {
	struct reactor_msg m;
	struct nvmf_ctrl *c;
	unsigned resets; /* the incarnation the command belonged to */
	uint16_t sqid, cid;
};

static void abort_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	bool not_aborted = req->cqe.result.dw0 & 1;
	uint32_t what = req->sqe.cdw10;
	char why[160], sbuf[96];

	nvmf_req_put(req);
	if (err || c->state != NVMF_CTRL_LIVE)
		return;
	if (!st && !not_aborted) {
		log_notice("ctrl %s: q%u CID 0x%04x aborted", c->opts.name, what & 0xffff, what >> 16);
		return;
	}
	snprintf(why, sizeof(why), "q%u CID 0x%04x timed out and could not be aborted (%s)",
		 what & 0xffff, what >> 16,
		 st ? nvme_status_fmt(st, sbuf, sizeof(sbuf)) : "not aborted");
	nvmf_ctrl_reset(c, -ETIMEDOUT, why);
}

static void abort_start(struct reactor_msg *m)
{
	struct abort_msg *a = container_of(m, struct abort_msg, m);
	struct nvmf_ctrl *c = a->c;
	struct nvmf_req *req;

	if (c->state == NVMF_CTRL_LIVE && c->resets == a->resets) {
		if ((req = nvmf_admin_req(c))) {
			req->sqe.opcode = NVME_ADMIN_ABORT;
			req->sqe.cdw10 = a->sqid | ((uint32_t)a->cid << 16);
			req->done = abort_done;
			nvmf_req_submit(req);
		} else {
			nvmf_ctrl_reset(c, -ETIMEDOUT, "an I/O command timed out (no admin slot to abort it)");
		}
	}
	free(a);
}

void nvmf_ctrl_abort(struct nvmf_ctrl *c, uint16_t sqid, uint16_t cid)
{
	struct abort_msg *a = malloc(sizeof(*a));

	if (!a)
		return; /* the grace timer resets the connection instead */
	a->m.fn = abort_start;
	a->c = c;
	a->resets = c->resets;
	a->sqid = sqid;
	a->cid = cid;
	reactor_send_msg(c->r, &a->m);
}

/* ---- keep-alive ---- */

static void kato_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	char sbuf[96];

	nvmf_req_put(req);
	c->kato_outstanding = false;
	c->kato_missed = 0;
	if (!err && st)
		log_warn("ctrl %s: keep-alive failed: %s", c->opts.name,
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
}

static void kato_tick(struct reactor_timer *t)
{
	struct nvmf_ctrl *c = container_of(t, struct nvmf_ctrl, kato_timer);
	struct nvmf_req *req;

	if (c->state != NVMF_CTRL_LIVE || c->adminq.state != NVMF_Q_LIVE)
		return;
	/* Sent every KATO/2: one still unanswered after that long means the
	 * target will soon (or did) consider us gone. */
	if (c->kato_outstanding) {
		/* Sent every KATO/2; the target gives us KATO, so do we. */
		if (++c->kato_missed >= 2) {
			nvmf_queue_transport_error(&c->adminq, -ETIMEDOUT,
						   "keep-alive not answered in %u ms", c->opts.kato_ms);
			return;
		}
		reactor_timer_arm(c->r, &c->kato_timer,
				  (uint64_t)c->opts.kato_ms / 2 * NSEC_PER_MSEC);
		return;
	}
	req = nvmf_admin_req(c);
	if (req) {
		req->sqe.opcode = NVME_ADMIN_KEEP_ALIVE;
		req->done = kato_done;
		c->kato_outstanding = true;
		nvmf_req_submit(req);
	}
	reactor_timer_arm(c->r, &c->kato_timer, (uint64_t)c->opts.kato_ms / 2 * NSEC_PER_MSEC);
}

/* ---- I/O queues, possibly on other reactors ---- */

struct ioq_msg {
	struct reactor_msg m;
	struct nvmf_ctrl *c;
	unsigned idx;
	int err;
};

static void ioq_result(struct reactor_msg *m);

static void ioq_connected(struct nvmf_queue *q, int err)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct ioq_msg *rm = malloc(sizeof(*rm));
	if (!rm)
		abort(); /* control path, a few bytes: nothing sane to do */
	rm->m.fn = ioq_result;
	rm->c = c;
	rm->idx = (unsigned)(q - c->ioq);
	rm->err = err;
	reactor_send_msg(c->r, &rm->m);
}

static void ioq_down(struct nvmf_queue *q, int err);

static void ioq_start(struct reactor_msg *m)
{
	struct ioq_msg *msg = container_of(m, struct ioq_msg, m);
	struct nvmf_queue *q = &msg->c->ioq[msg->idx];

	free(msg);
	q->down_cb = ioq_down;
	nvmf_queue_connect(q, ioq_connected);
}

static void ctrl_failed(struct nvmf_ctrl *c, int err);

static void ioq_result(struct reactor_msg *m)
{
	struct ioq_msg *msg = container_of(m, struct ioq_msg, m);
	struct nvmf_ctrl *c = msg->c;
	int err = msg->err;

	free(msg);
	if (c->step == INIT_IO_QUEUES) {
		c->nr_ioq_pending--;
		if (err && !c->ioq_error)
			c->ioq_error = err;
		else if (!err)
			c->nr_ioq_connected++;
		if (c->nr_ioq_pending)
			return;
		if (c->ioq_error) {
			init_fail(c, c->ioq_error, "%u of %u I/O queues connected",
				  c->nr_ioq_connected, c->nr_ioq);
			return;
		}
		c->step = INIT_DONE;
		init_next(c);
		return;
	}
	/* A live I/O queue went down. */
	ctrl_failed(c, err);
}

static void ioq_down(struct nvmf_queue *q, int err)
{
	ioq_connected(q, err ? err : -ECONNRESET);
}

static void ioq_connect_all(struct nvmf_ctrl *c)
{
	unsigned qsize = c->opts.queue_size;

	if (!c->nr_ioq) {
		c->step = INIT_DONE;
		init_next(c);
		return;
	}
	if (qsize > NVME_CAP_MQES(c->cap) + 1u)
		qsize = NVME_CAP_MQES(c->cap) + 1u;
	if (qsize > NVMF_QUEUE_MAX_SIZE)
		qsize = NVMF_QUEUE_MAX_SIZE;
	c->ioq = calloc(c->nr_ioq, sizeof(*c->ioq));
	if (!c->ioq) {
		init_fail(c, -ENOMEM, "no memory for I/O queues");
		return;
	}
	arm_step(c, DEFAULT_STEP_TIMEOUT_MS + c->opts.path.connect_timeout_ms);
	c->nr_ioq_pending = c->nr_ioq;
	c->nr_ioq_connected = 0;
	c->ioq_error = 0;
	for (unsigned i = 0; i < c->nr_ioq; i++) {
		struct reactor *r = c->io_reactors ? c->io_reactors[i] : c->r;
		struct nvmf_queue *q = &c->ioq[i];
		int ret = nvmf_queue_init(q, c, r, (uint16_t)(i + 1), (uint16_t)qsize, &c->opts.path);
		if (ret < 0) {
			c->nr_ioq = i;
			c->nr_ioq_pending = 0;
			init_fail(c, ret, "I/O queue %u: %s", i + 1, strerror(-ret));
			return;
		}
		q->in_capsule_max = c->in_capsule_max;
	}
	for (unsigned i = 0; i < c->nr_ioq; i++) {
		struct ioq_msg *m = malloc(sizeof(*m));
		if (!m)
			abort();
		m->m.fn = ioq_start;
		m->c = c;
		m->idx = i;
		reactor_send_msg(c->ioq[i].r, &m->m);
	}
}

static void init_live(struct nvmf_ctrl *c)
{
	reactor_timer_cancel(&c->step_timer);
	/* Deleted while its queues connected: no keep-alive, no AER. */
	if (!nvmf_ctrl_set_state(c, NVMF_CTRL_LIVE))
		return;
	c->reconnecting = false;
	if (c->opts.kato_ms)
		reactor_timer_arm(c->r, &c->kato_timer,
				  (uint64_t)c->opts.kato_ms / 2 * NSEC_PER_MSEC);
	if (c->ana && (c->id->oaes & NVME_CTRL_OAES_ANA_CHANGE))
		aer_submit(c);
	nvmf_ctrl_cb cb = c->ready_cb;
	c->ready_cb = NULL;
	if (cb)
		cb(c, 0);
}

static void admin_connected(struct nvmf_queue *q, int err)
{
	struct nvmf_ctrl *c = q->ctrl;

	if (err) {
		/* The cause was logged where it was found. */
		if (c->state == NVMF_CTRL_CONNECTING) {
			c->error = err;
			reactor_timer_cancel(&c->step_timer);
			if (!c->reconnecting)
				nvmf_ctrl_set_state(c, NVMF_CTRL_DEAD);
			init_failed_down(c, err);
		}
		return;
	}
	c->step = INIT_GET_CAP;
	init_next(c);
}

static void admin_down(struct nvmf_queue *q, int err)
{
	ctrl_failed(q->ctrl, err);
}

static int ctrl_start(struct nvmf_ctrl *c);

int nvmf_ctrl_connect(struct nvmf_ctrl *c, const struct nvmf_ctrl_opts *opts,
		      struct reactor *r, struct reactor **io_reactors, nvmf_ctrl_cb cb)
{
	int ret;

	/* The owner's hooks, set before connecting, survive the reset. */
	void *owner = c->owner;
	nvmf_ctrl_cb lost_cb = c->lost_cb;
	void (*ana_cb)(struct nvmf_ctrl *) = c->ana_cb;

	memset(c, 0, sizeof(*c));
	c->owner = owner;
	c->lost_cb = lost_cb;
	c->ana_cb = ana_cb;
	c->opts = *opts;
	if (!c->opts.path.connect_timeout_ms)
		c->opts.path.connect_timeout_ms = DEFAULT_STEP_TIMEOUT_MS;
	if (!c->opts.queue_size)
		c->opts.queue_size = 128;
	if (!c->opts.nr_io_queues)
		c->opts.nr_io_queues = 1;
	c->r = r;
	c->io_reactors = io_reactors;
	c->ready_cb = cb;
	c->state = NVMF_CTRL_NEW;
	reactor_timer_init(&c->step_timer, step_timeout);
	reactor_timer_init(&c->kato_timer, kato_tick);
	c->id = aligned_alloc(4096, sizeof(*c->id));
	c->admin_buf = aligned_alloc(4096, 4096);
	c->ns_list = aligned_alloc(4096, 4096);
	c->ns = calloc(1024, sizeof(*c->ns));
	if (!c->id || !c->admin_buf || !c->ns_list || !c->ns) {
		nvmf_ctrl_free(c);
		return -ENOMEM;
	}
	memset(c->id, 0, sizeof(*c->id));
	c->vwc_before = -1;
	ret = ctrl_start(c);
	if (ret < 0)
		nvmf_ctrl_free(c);
	return ret;
}

/* Admin queue up, then the bring-up steps. */
static int ctrl_start(struct nvmf_ctrl *c)
{
	int ret = nvmf_queue_init(&c->adminq, c, c->r, 0, ADMIN_QUEUE_SIZE, &c->opts.path);

	if (ret < 0) {
		log_err("ctrl %s: %s transport: %s", c->opts.name,
			nvmf_trtype_name(c->opts.path.trtype), strerror(-ret));
		return ret;
	}
	c->adminq.down_cb = admin_down;
	/* A reconnect attempt is CONNECTING already (nvmf_ctrl_reconnect). */
	if (c->state != NVMF_CTRL_CONNECTING && !nvmf_ctrl_set_state(c, NVMF_CTRL_CONNECTING))
		return -EBUSY;
	c->step = INIT_ADMIN_CONNECT;
	arm_step(c, DEFAULT_STEP_TIMEOUT_MS + c->opts.path.connect_timeout_ms);
	nvmf_queue_connect(&c->adminq, admin_connected);
	return 0;
}

static void release_queues(struct nvmf_ctrl *c)
{
	for (unsigned i = 0; c->ioq && i < c->nr_ioq; i++)
		nvmf_queue_free(&c->ioq[i]);
	free(c->ioq);
	c->ioq = NULL;
	c->nr_ioq = 0;
	nvmf_queue_free(&c->adminq);
}

int nvmf_ctrl_reconnect(struct nvmf_ctrl *c, nvmf_ctrl_cb cb)
{
	/* Never connected (NEW) or still closing: not yet.  A failed attempt
	 * stays CONNECTING and tries again; the table decides the rest. */
	if (c->teardown_running || c->state == NVMF_CTRL_NEW)
		return -EBUSY;
	if (c->state != NVMF_CTRL_CONNECTING && !nvmf_ctrl_set_state(c, NVMF_CTRL_CONNECTING))
		return -EBUSY;
	release_queues(c);
	c->error = 0;
	c->ioq_error = 0;
	c->nr_ns = 0;
	c->cntlid = 0;
	c->kato_outstanding = false;
	c->kato_missed = 0;
	c->aer_armed = false;
	c->ana_busy = c->ana_again = false;
	c->ana_then = NULL;
	c->ready_cb = cb;
	c->shutdown_cb = NULL;
	c->reconnecting = true;
	reactor_timer_init(&c->step_timer, step_timeout);
	return ctrl_start(c);
}

/* ---- failure and teardown ---- */

static void lost_done(struct nvmf_ctrl *c, int err)
{
	if (c->lost_cb && c->state == NVMF_CTRL_RESETTING)
		c->lost_cb(c, err);
}

/* A queue of a live controller failed, or the owner asked for a reset.
 * With an owner that recovers (lost_cb), the controller is RESETTING while
 * its queues close, then the owner decides; otherwise that is the end of
 * it: every queue goes down and in-flight I/O completes with the error. */
static void ctrl_failed(struct nvmf_ctrl *c, int err)
{
	if (c->state != NVMF_CTRL_LIVE)
		return;
	c->error = err;
	reactor_timer_cancel(&c->kato_timer);
	c->resets++;
	if (c->lost_cb) {
		log_err("ctrl %s: lost (%s); resetting", c->opts.name, strerror(-err));
		nvmf_ctrl_set_state(c, NVMF_CTRL_RESETTING);
		ctrl_teardown(c, lost_done);
		return;
	}
	log_err("ctrl %s: lost (%s); failing its I/O", c->opts.name, strerror(-err));
	nvmf_ctrl_set_state(c, NVMF_CTRL_DEAD);
	ctrl_teardown(c, NULL);
}

void nvmf_ctrl_reset(struct nvmf_ctrl *c, int err, const char *why)
{
	if (c->state != NVMF_CTRL_LIVE)
		return;
	log_notice("ctrl %s: reset: %s", c->opts.name, why);
	ctrl_failed(c, err);
}

/* Closing the I/O queues, each on its own reactor, then running then(c)
 * on c->r once every one is dead: shared by teardown and shutdown. */
struct ioq_close_msg {
	struct reactor_msg m;
	struct nvmf_ctrl *c;
	unsigned idx;
};

static void ioq_close_reply(struct reactor_msg *m)
{
	struct ioq_close_msg *t = container_of(m, struct ioq_close_msg, m);
	struct nvmf_ctrl *c = t->c;

	free(t);
	if (--c->nr_ioq_pending == 0)
		c->ioq_close_then(c);
}

static void send_close_reply(struct nvmf_ctrl *c, struct ioq_close_msg *t)
{
	if (!t && !(t = malloc(sizeof(*t))))
		abort(); /* control path, a few bytes: nothing sane to do */
	t->m.fn = ioq_close_reply;
	t->c = c;
	reactor_send_msg(c->r, &t->m);
}

static void ioq_closed(struct nvmf_queue *q, int err)
{
	(void)err;
	send_close_reply(q->ctrl, NULL);
}

static void ioq_close(struct reactor_msg *m)
{
	struct ioq_close_msg *t = container_of(m, struct ioq_close_msg, m);
	struct nvmf_queue *q = &t->c->ioq[t->idx];

	if (q->state == NVMF_Q_DEAD || q->state == NVMF_Q_IDLE) {
		if (q->state == NVMF_Q_IDLE)
			nvmf_queue_set_state(q, NVMF_Q_DEAD);
		send_close_reply(t->c, t);
		return;
	}
	free(t);
	q->connect_cb = NULL;
	q->down_cb = ioq_closed;
	if (q->state != NVMF_Q_DRAINING)
		nvmf_queue_shutdown(q, -ESHUTDOWN);
}

static void ioqs_close(struct nvmf_ctrl *c, void (*then)(struct nvmf_ctrl *c))
{
	c->ioq_close_then = then;
	c->nr_ioq_pending = c->ioq ? c->nr_ioq : 0;
	if (!c->nr_ioq_pending) {
		then(c);
		return;
	}
	for (unsigned i = 0; i < c->nr_ioq; i++) {
		struct ioq_close_msg *t = malloc(sizeof(*t));
		if (!t)
			abort();
		t->m.fn = ioq_close;
		t->c = c;
		t->idx = i;
		reactor_send_msg(c->ioq[i].r, &t->m);
	}
}

static void teardown_finish(struct nvmf_ctrl *c)
{
	c->teardown_running = false;
	nvmf_ctrl_cb cb = c->shutdown_cb;
	c->shutdown_cb = NULL;
	if (cb)
		cb(c, c->error);
}

static void admin_dead(struct nvmf_queue *q, int err)
{
	(void)err;
	q->ctrl->step = INIT_NONE;
	teardown_finish(q->ctrl);
}

static void teardown_admin(struct nvmf_ctrl *c)
{
	if (c->adminq.state == NVMF_Q_DEAD) {
		teardown_finish(c);
		return;
	}
	c->adminq.connect_cb = NULL;
	c->adminq.down_cb = admin_dead;
	if (c->adminq.state != NVMF_Q_DRAINING)
		nvmf_queue_shutdown(&c->adminq, -ESHUTDOWN);
}

/* Teardown: every I/O queue, then the admin queue, then cb.  On c->r. */
static void ctrl_teardown(struct nvmf_ctrl *c, nvmf_ctrl_cb cb)
{
	c->shutdown_cb = cb;
	c->teardown_running = true;
	reactor_timer_cancel(&c->kato_timer);
	ioqs_close(c, teardown_admin);
}

/* ---- orderly shutdown: I/O queues, CC.SHN, admin queue ---- */

static void shn_poll(struct nvmf_ctrl *c);

static void shn_cmd_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint32_t csts = req->cqe.result.dw0;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	bool was_set = ((struct nvmf_property_cmd *)&req->sqe)->fctype == NVMF_FCTYPE_PROPERTY_SET;

	nvmf_req_put(req);
	if (err || st) {
		log_warn("ctrl %s: shutdown notification failed; closing anyway", c->opts.name);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	if (!was_set && (csts & NVME_CSTS_SHST_MASK) == NVME_CSTS_SHST_CMPLT) {
		log_info("ctrl %s: shutdown complete", c->opts.name);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	if (reactor_now_ns() >= c->deadline_ns) {
		log_warn("ctrl %s: shutdown not complete after %u ms; closing anyway",
			 c->opts.name, SHUTDOWN_TIMEOUT_MS);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	shn_poll(c);
}

static void shn_poll_timer(struct reactor_timer *t)
{
	struct nvmf_ctrl *c = container_of(t, struct nvmf_ctrl, step_timer);
	struct nvmf_req *req = nvmf_admin_req(c);

	if (!req || c->adminq.state != NVMF_Q_LIVE) {
		if (req)
			nvmf_req_put(req);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	req->done = shn_cmd_done;
	prep_property_get(req, NVME_REG_CSTS, false);
	nvmf_req_submit(req);
}

static void shn_poll(struct nvmf_ctrl *c)
{
	reactor_timer_init(&c->step_timer, shn_poll_timer);
	reactor_timer_arm(c->r, &c->step_timer, 10 * NSEC_PER_MSEC);
}

/* The I/O queues are closed: tell the controller it is shutting down. */
static void shn_start(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->adminq.state != NVMF_Q_LIVE || !(req = nvmf_admin_req(c))) {
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	c->deadline_ns = reactor_now_ns() + SHUTDOWN_TIMEOUT_MS * NSEC_PER_MSEC;
	req->done = shn_cmd_done;
	prep_property_set(req, NVME_REG_CC, (c->cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL);
	nvmf_req_submit(req);
}

void nvmf_ctrl_shutdown(struct nvmf_ctrl *c, nvmf_ctrl_cb cb)
{
	c->lost_cb = NULL;
	c->ana_cb = NULL;
	if (c->state == NVMF_CTRL_RESETTING ||
	    (c->state == NVMF_CTRL_CONNECTING && c->reconnecting && !c->ready_cb)) {
		/* Being reset, or between two reconnect attempts: nothing to
		 * tell the controller; close what is left. */
		nvmf_ctrl_set_state(c, NVMF_CTRL_DELETING);
		c->shutdown_cb = cb;
		if (!c->teardown_running)
			teardown_admin(c);
		return;
	}
	if (c->state == NVMF_CTRL_DEAD || c->state == NVMF_CTRL_NEW) {
		/* Already torn down (or never up): just make sure it is quiet.
		 * A teardown still running (a lost controller's, started with
		 * no callback) reports to the new cb when its I/O queues and
		 * admin queue are closed: closing the admin queue now would
		 * let the owner free the controller under the I/O queues'
		 * close messages. */
		c->shutdown_cb = cb;
		if (!c->teardown_running)
			teardown_admin(c);
		return;
	}
	if (c->state == NVMF_CTRL_CONNECTING) {
		c->ready_cb = NULL;
		reactor_timer_cancel(&c->step_timer);
		nvmf_ctrl_set_state(c, NVMF_CTRL_DELETING);
		ctrl_teardown(c, cb);
		return;
	}
	nvmf_ctrl_set_state(c, NVMF_CTRL_DELETING);
	c->shutdown_cb = cb;
	reactor_timer_cancel(&c->kato_timer);
	c->step = INIT_DONE;
	ioqs_close(c, shn_start);
}

void nvmf_ctrl_free(struct nvmf_ctrl *c)
{
	reactor_timer_cancel(&c->step_timer);
	reactor_timer_cancel(&c->kato_timer);
	release_queues(c);
	free(c->id);
	free(c->admin_buf);
	free(c->ns_list);
	free(c->ns);
	free(c->ana_log);
	c->ana_log = NULL;
	c->ana_log_alloc = 0;
	c->id = NULL;
	c->admin_buf = NULL;
	c->ns_list = NULL;
	c->ns = NULL;
}
