/* What every queue and the admin queue share on the wire of NVMe over
 * Fabrics: Connect (and the decoding of its errors), and the admin
 * commands' setup (property get/set, Identify, Get Log Page). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/ctrl_priv.h"
#include "transports/status.h"

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

struct nvmf_req *ctrl_admin_req_reserved(struct nvmf_ctrl *c)
{
	struct nvmf_req *req = nvmf_req_get_reserved(&c->adminq);
	if (req)
		req->ctx = c;
	return req;
}

static void admin_data(struct nvmf_req *req, void *buf, uint32_t len, bool to_ctrl)
{
	struct iovec iov = { buf, len };
	nvmf_req_set_data(req, &iov, 1, len, to_ctrl);
}

void ctrl_prep_property_get(struct nvmf_req *req, uint32_t off, bool eight)
{
	struct nvmf_property_cmd *p = (struct nvmf_property_cmd *)&req->sqe;
	p->opcode = NVME_FABRICS_COMMAND;
	p->fctype = NVMF_FCTYPE_PROPERTY_GET;
	p->attrib = eight ? 1 : 0;
	p->offset = off;
}

void ctrl_prep_property_set(struct nvmf_req *req, uint32_t off, uint64_t val)
{
	struct nvmf_property_cmd *p = (struct nvmf_property_cmd *)&req->sqe;
	p->opcode = NVME_FABRICS_COMMAND;
	p->fctype = NVMF_FCTYPE_PROPERTY_SET;
	p->attrib = 0;
	p->offset = off;
	p->value = val;
}

void ctrl_prep_identify(struct nvmf_req *req, uint8_t cns, uint32_t nsid, void *buf)
{
	req->sqe.opcode = NVME_ADMIN_IDENTIFY;
	req->sqe.nsid = nsid;
	req->sqe.cdw10 = cns;
	admin_data(req, buf, 4096, false);
}

/* len bytes of log page lid from byte off: NUMDU/NUMDL and LPOU/LPOL. */
void nvmf_prep_get_log(struct nvmf_req *req, uint8_t lid, uint32_t nsid, void *buf,
		       uint32_t len, uint64_t off)
{
	uint32_t numd = len / 4 - 1;

	req->sqe.opcode = NVME_ADMIN_GET_LOG_PAGE;
	req->sqe.nsid = nsid;
	req->sqe.cdw10 = lid | ((numd & 0xffff) << 16);
	req->sqe.cdw11 = numd >> 16;
	req->sqe.cdw12 = (uint32_t)off;
	req->sqe.cdw13 = (uint32_t)(off >> 32);
	admin_data(req, buf, len, false);
}

void ctrl_prep_get_log(struct nvmf_req *req, uint8_t lid, void *buf, uint32_t len,
			 uint64_t off)
{
	nvmf_prep_get_log(req, lid, 0xffffffff, buf, len, off);
}
