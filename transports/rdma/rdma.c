/* NVMe/RDMA transport (RoCEv2, iWARP or InfiniBand through rdma-core).
 *
 * Connection management with librdmacm and completions from one CQ per
 * queue, both through file descriptors that the reactor polls (reactor_poll_fd):
 * nothing here blocks or busy-polls.
 *
 * Memory: every request slot owns a capsule buffer (SQE + in-capsule data)
 * and a data buffer of max_xfer bytes, all registered once per connection.
 * The caller's iovecs are copied into (writes) or out of (reads) the data
 * buffer, so the HCA never sees caller memory: an MR per I/O or a
 * registration cache keyed by address (which goes stale when the caller
 * frees and reuses memory) are both avoided at the price of one copy.
 * It also makes teardown simple: once the QP is destroyed no caller buffer
 * can be touched, whatever was in flight.
 *
 * Capsule buffers are a separate ring in posting order (rdma_sendq.c), so
 * that sends need not all be signalled.
 *
 * Invalidation: the data MR is registered once for the connection and its
 * rkey is reused by every command, so the SGL descriptors never ask for
 * remote invalidation (sub-type 0, not "invalidate key") and a response
 * that invalidated a key anyway is a protocol error. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/invariant.h"
#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "transports/ctrl.h"
#include "transports/rdma/rdma_internal.h"

/* ---- pure helpers (unit tested) ---- */

void rdma_cm_req_init(struct nvme_rdma_cm_req *p, uint16_t qid, uint16_t qsize,
		      uint16_t cntlid)
{
	memset(p, 0, sizeof(*p));
	p->recfmt = NVME_RDMA_CM_FMT_1_0;
	p->qid = qid;
	p->hrqsize = qsize;
	p->hsqsize = (uint16_t)(qsize - 1);
	p->cntlid = qid ? cntlid : 0;
}

const char *rdma_cm_status_str(uint16_t sts)
{
	switch (sts) {
	case NVME_RDMA_CM_INVALID_LEN: return "invalid private data length";
	case NVME_RDMA_CM_INVALID_RECFMT: return "invalid record format";
	case NVME_RDMA_CM_INVALID_QID: return "invalid queue ID";
	case NVME_RDMA_CM_INVALID_HSQSIZE: return "invalid host SQ size";
	case NVME_RDMA_CM_INVALID_HRQSIZE: return "invalid host RQ size";
	case NVME_RDMA_CM_NO_RSC: return "no resources";
	case NVME_RDMA_CM_INVALID_IRD: return "invalid IRD";
	case NVME_RDMA_CM_INVALID_ORD: return "invalid ORD";
	case NVME_RDMA_CM_INVALID_CNTLID: return "invalid controller ID";
	}
	return "unknown status";
}

int rdma_reject_describe(int cm_status, const void *pdata, size_t len, char *buf,
			 size_t size)
{
	if (cm_status == RDMA_REJ_CONSUMER_DEFINED && pdata &&
	    len >= sizeof(struct nvme_rdma_cm_rej)) {
		struct nvme_rdma_cm_rej rej;
		memcpy(&rej, pdata, sizeof(rej));
		snprintf(buf, size, "target rejected the connection: NVMe/RDMA status %u (%s)",
			 rej.sts, rdma_cm_status_str(rej.sts));
		return rej.sts == NVME_RDMA_CM_NO_RSC ? -EBUSY : -ECONNREFUSED;
	}
	if (cm_status == RDMA_REJ_CONSUMER_DEFINED) {
		snprintf(buf, size, "target rejected the connection without an NVMe/RDMA status");
		return -ECONNREFUSED;
	}
	if (cm_status == RDMA_REJ_INVALID_SERVICE_ID) {
		snprintf(buf, size, "connection refused: no NVMe/RDMA listener on that port");
		return -ECONNREFUSED;
	}
	snprintf(buf, size, "connection rejected (RDMA CM reject reason %d)", cm_status);
	return -ECONNREFUSED;
}

void rdma_sgl_keyed(struct nvme_sqe *sqe, uint64_t addr, uint32_t len, uint32_t rkey)
{
	struct nvme_keyed_sgl_desc *d = (struct nvme_keyed_sgl_desc *)&sqe->dptr;

	d->addr = addr;
	d->length[0] = (uint8_t)len;
	d->length[1] = (uint8_t)(len >> 8);
	d->length[2] = (uint8_t)(len >> 16);
	d->key = rkey;
	d->type = NVME_SGL_KEYED_DATA_BLOCK;
}

void rdma_sgl_inline(struct nvme_sqe *sqe, uint32_t len)
{
	memset(&sqe->dptr, 0, sizeof(sqe->dptr));
	sqe->dptr.addr = 0; /* offset into the capsule's data: ICDOFF is 0 */
	sqe->dptr.length = len;
	sqe->dptr.type = NVME_SGL_DATA_BLOCK_OFFSET;
}

void rdma_sgl_null(struct nvme_sqe *sqe)
{
	memset(&sqe->dptr, 0, sizeof(sqe->dptr));
	sqe->dptr.type = NVME_SGL_KEYED_DATA_BLOCK;
}

void rdma_req_start(struct rdma_req *rr)
{
	rr->posted = true;
	rr->resp_ready = false;
}

int rdma_req_resp(struct rdma_req *rr, const struct nvme_cqe *cqe)
{
	if (!rr->posted || rr->resp_ready)
		return -EPROTO;
	rr->resp = *cqe;
	rr->resp_ready = true;
	return 1;
}

int rdma_recv_check(unsigned wc_flags, uint32_t byte_len, uint32_t inv_rkey, char *why,
		    size_t size)
{
	if (byte_len < sizeof(struct nvme_cqe)) {
		snprintf(why, size, "response capsule of %u bytes", byte_len);
		return -EPROTO;
	}
	if (wc_flags & IBV_WC_WITH_INV) {
		snprintf(why, size,
			 "target sent a remote invalidation of rkey 0x%x that was never offered",
			 inv_rkey);
		return -EPROTO;
	}
	return 0;
}

static const char *wr_kind(uint64_t wr_id)
{
	return wr_id >> 32 == RDMA_WR_SEND ? "send" : "receive";
}

int rdma_wc_process(struct nvmf_queue *q, struct rdma_sendq *sq, unsigned nr_recv,
		    const struct nvme_cqe *rsp_buf, const struct ibv_wc *wc,
		    struct nvmf_req **req, unsigned *slot, char *why, size_t size)
{
	unsigned idx = (unsigned)wc->wr_id;
	int ret;

	*req = NULL;
	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(why, size, "%s completion failed: %s (vendor error 0x%x)",
			 wr_kind(wc->wr_id), ibv_wc_status_str(wc->status), wc->vendor_err);
		return -EIO;
	}
	if (wc->wr_id >> 32 == RDMA_WR_SEND) {
		uint32_t seq = (uint32_t)wc->wr_id;
		if (wc->opcode != IBV_WC_SEND || rdma_sendq_complete(sq, seq) < 0) {
			snprintf(why, size,
				 "unexpected send completion (opcode %d, send %u, oldest "
				 "outstanding %u)",
				 wc->opcode, seq, sq->tail);
			return -EIO;
		}
		return RDMA_WC_SENDS_FREED;
	}
	if (wc->wr_id >> 32 != RDMA_WR_RECV || wc->opcode != IBV_WC_RECV || idx >= nr_recv) {
		snprintf(why, size, "unexpected completion (opcode %d, slot %u)", wc->opcode, idx);
		return -EIO;
	}
	if ((ret = rdma_recv_check(wc->wc_flags, wc->byte_len, wc->invalidated_rkey, why, size)) <
	    0)
		return ret;
	const struct nvme_cqe *cqe = &rsp_buf[idx];
	struct nvmf_req *r = nvmf_queue_find_req(q, cqe->cid);
	if (!r) {
		snprintf(why, size, "response for CID 0x%04x not in flight", cqe->cid);
		return -EPROTO;
	}
	if (rdma_req_resp(rdma_req_of(r), cqe) < 0) {
		snprintf(why, size, "%s response for CID 0x%04x",
			 rdma_req_of(r)->posted ? "second" : "premature", cqe->cid);
		return -EPROTO;
	}
	*req = r;
	*slot = idx;
	return RDMA_WC_RESPONSE;
}

/* ---- the transport ---- */

#define RDMA_CQ_BATCH 32
#define RDMA_DEFAULT_SLOT (60u * 1024) /* this transport's largest command */
#define RDMA_ADMIN_SLOT (64u * 1024) /* admin data: identify, log page chunks */

enum rdma_conn_state {
	RDMA_CONN_IDLE,
	RDMA_CONN_ADDR, /* resolving the address */
	RDMA_CONN_ROUTE, /* resolving the route */
	RDMA_CONN_CONNECTING, /* rdma_connect sent */
	RDMA_CONN_LIVE,
	RDMA_CONN_CLOSING,
};

/* No default: -Wswitch names a state added without a name. */
static const char *conn_name(enum rdma_conn_state s)
{
	switch (s) {
	case RDMA_CONN_IDLE: return "idle";
	case RDMA_CONN_ADDR: return "resolving address";
	case RDMA_CONN_ROUTE: return "resolving route";
	case RDMA_CONN_CONNECTING: return "connecting";
	case RDMA_CONN_LIVE: return "live";
	case RDMA_CONN_CLOSING: return "closing";
	}
	return "?";
}

struct rdma_queue {
	struct nvmf_queue *q;
	struct nvmf_path_opts opts;
	enum rdma_conn_state conn;
	bool was_connected; /* rdma_connect issued: disconnect on teardown */

	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	bool qp_created;
	unsigned cq_events; /* to ack before the CQ is destroyed */

	struct ibv_mr *data_mr, *cap_mr, *rsp_mr;
	uint8_t *data_buf; /* nr_reqs slots of slot_size */
	uint8_t *cap_buf; /* sq.depth capsules of cap_size, in posting order */
	struct nvme_cqe *rsp_buf; /* nr_recv response capsules */
	uint32_t slot_size, cap_size;
	uint32_t icmax; /* in-capsule data up to this (cap_size is rounded up) */
	unsigned nr_reqs, nr_recv;
	struct rdma_sendq sq;
	struct list_node backlog; /* requests waiting for a free send WR */

	struct reactor_op cm_op, cq_op;
	bool cm_pending, cq_pending;
	unsigned ops_in_flight;
	struct reactor_timer connect_timer;
	struct reactor_msg quiesce_msg;
	bool quiesce_queued;

	struct nvme_rdma_cm_req priv;
	struct sockaddr_storage dst, src;
	bool have_src;
	uint64_t nr_sends, nr_recvs;
};

static struct rdma_queue *rq_of(struct nvmf_queue *q) { return q->tp; }

static bool set_conn(struct rdma_queue *rq, enum rdma_conn_state s)
{
	/* Only CLOSING -> IDLE leaves CLOSING; nothing goes back to an
	 * earlier connection step. */
	bool ok = s == RDMA_CONN_CLOSING || (s == RDMA_CONN_IDLE && rq->conn == RDMA_CONN_CLOSING) ||
		  (rq->conn != RDMA_CONN_CLOSING && s > rq->conn);
	if (!ok) {
		log_err("%s: rdma: illegal connection state change %s -> %s refused", rq->q->name,
			conn_name(rq->conn), conn_name(s));
		return false;
	}
	log_debug("%s: rdma: %s -> %s", rq->q->name, conn_name(rq->conn), conn_name(s));
	rq->conn = s;
	return true;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* ---- teardown ---- */

static void free_verbs(struct rdma_queue *rq)
{
	if (rq->qp_created) {
		rdma_destroy_qp(rq->id);
		rq->qp_created = false;
	}
	if (rq->cq) {
		if (rq->cq_events)
			ibv_ack_cq_events(rq->cq, rq->cq_events);
		rq->cq_events = 0;
		ibv_destroy_cq(rq->cq);
		rq->cq = NULL;
	}
	if (rq->cc) {
		ibv_destroy_comp_channel(rq->cc);
		rq->cc = NULL;
	}
	struct ibv_mr **mrs[] = { &rq->data_mr, &rq->cap_mr, &rq->rsp_mr };
	for (unsigned i = 0; i < 3; i++) {
		if (*mrs[i]) {
			ibv_dereg_mr(*mrs[i]);
			*mrs[i] = NULL;
		}
	}
	/* Backlogged requests are in the core's in-flight list, which fails
	 * them once the queue is quiesced. */
	list_init(&rq->backlog);
	if (rq->nr_sends)
		log_debug("%s: rdma: %llu sends, %llu of them signalled, %llu responses", rq->q->name,
			  (unsigned long long)rq->nr_sends, (unsigned long long)rq->sq.nr_signalled,
			  (unsigned long long)rq->nr_recvs);
	rq->nr_sends = rq->nr_recvs = 0;
	rdma_sendq_free(&rq->sq);
	free(rq->data_buf);
	free(rq->cap_buf);
	free(rq->rsp_buf);
	rq->data_buf = rq->cap_buf = NULL;
	rq->rsp_buf = NULL;
	if (rq->pd) {
		ibv_dealloc_pd(rq->pd);
		rq->pd = NULL;
	}
}

static void free_all(struct rdma_queue *rq)
{
	if (rq->id && rq->was_connected)
		rdma_disconnect(rq->id); /* tells the target; flushes the QP */
	rq->was_connected = false;
	free_verbs(rq);
	if (rq->id) {
		rdma_destroy_id(rq->id);
		rq->id = NULL;
	}
	if (rq->ch) {
		rdma_destroy_event_channel(rq->ch);
		rq->ch = NULL;
	}
}

static void quiesce_run(struct reactor_msg *m)
{
	struct rdma_queue *rq = container_of(m, struct rdma_queue, quiesce_msg);

	rq->quiesce_queued = false;
	/* Destroying the QP is what guarantees no further DMA into our
	 * buffers; the caller's memory was never registered. */
	free_all(rq);
	set_conn(rq, RDMA_CONN_IDLE);
	nvmf_queue_transport_quiesced(rq->q);
}

static void maybe_quiesced(struct rdma_queue *rq)
{
	if (rq->conn != RDMA_CONN_CLOSING || rq->ops_in_flight || rq->quiesce_queued)
		return;
	rq->quiesce_queued = true;
	reactor_defer(rq->q->r, &rq->quiesce_msg);
}

static void rdma_queue_shutdown(struct nvmf_queue *q)
{
	struct rdma_queue *rq = rq_of(q);

	if (rq->conn == RDMA_CONN_CLOSING)
		return;
	set_conn(rq, RDMA_CONN_CLOSING);
	reactor_timer_cancel(&rq->connect_timer);
	struct reactor_op *ops[] = { rq->cm_pending ? &rq->cm_op : NULL,
				     rq->cq_pending ? &rq->cq_op : NULL };
	for (unsigned i = 0; i < 2; i++)
		if (ops[i])
			reactor_cancel(q->r, ops[i]);
	maybe_quiesced(rq);
}

/* ---- completions ---- */

static void cq_arm(struct rdma_queue *rq);

static void req_finish(struct rdma_queue *rq, struct nvmf_req *req)
{
	struct rdma_req *rr = rdma_req_of(req);
	unsigned idx = req->cid & NVMF_CID_IDX_MASK;

	rr->posted = false;
	/* Read data lands in the slot's buffer; the caller sees it only for
	 * a successful command. */
	if (req->data_len && !req->host_to_ctrl && !(rr->resp.status >> 1))
		iov_copy_to(req->iov, req->iovcnt, 0, rq->data_buf + (size_t)idx * rq->slot_size,
			    req->data_len);
	nvmf_req_complete(req, &rr->resp);
}

static int post_recv(struct rdma_queue *rq, unsigned idx)
{
	struct ibv_sge sge = { .addr = (uintptr_t)&rq->rsp_buf[idx],
			       .length = sizeof(struct nvme_cqe),
			       .lkey = rq->rsp_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = rdma_wr_id(RDMA_WR_RECV, idx), .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	return -ibv_post_recv(rq->id->qp, &wr, &bad);
}

static bool post_backlog(struct rdma_queue *rq);

/* One work completion; false once the queue has failed. */
static bool handle_wc(struct rdma_queue *rq, const struct ibv_wc *wc)
{
	struct nvmf_req *req;
	unsigned slot = 0;
	char why[160];
	int ret = rdma_wc_process(rq->q, &rq->sq, rq->nr_recv, rq->rsp_buf, wc, &req, &slot, why,
				  sizeof(why));

	if (ret < 0) {
		nvmf_queue_transport_error(rq->q, ret, "%s", why);
		return false;
	}
	if (ret == RDMA_WC_SENDS_FREED)
		return post_backlog(rq);
	/* The capsule is copied out (the request holds its response): the
	 * slot may take the next one. */
	ret = post_recv(rq, slot);
	if (ret) {
		nvmf_queue_transport_error(rq->q, ret, "cannot re-post a receive: %s",
					   strerror(-ret));
		return false;
	}
	rq->nr_recvs++;
	req_finish(rq, req);
	return true;
}

static void cq_drain(struct rdma_queue *rq)
{
	struct ibv_wc wc[RDMA_CQ_BATCH];
	int n = 0;

	while (rq->conn == RDMA_CONN_LIVE && (n = ibv_poll_cq(rq->cq, RDMA_CQ_BATCH, wc)) > 0) {
		for (int i = 0; i < n; i++)
			if (rq->conn != RDMA_CONN_LIVE || !handle_wc(rq, &wc[i]))
				return;
	}
	if (n < 0 && rq->conn == RDMA_CONN_LIVE)
		nvmf_queue_transport_error(rq->q, -EIO, "polling the completion queue failed");
}

static void cq_ready(struct reactor_op *op, int res, uint32_t flags)
{
	struct rdma_queue *rq = container_of(op, struct rdma_queue, cq_op);
	struct ibv_cq *cq;
	void *ctx;

	(void)flags;
	rq->cq_pending = false;
	rq->ops_in_flight--;
	if (rq->conn == RDMA_CONN_CLOSING) {
		maybe_quiesced(rq);
		return;
	}
	if (res < 0) {
		nvmf_queue_transport_error(rq->q, res, "polling the completion channel: %s",
					   strerror(-res));
		return;
	}
	while (ibv_get_cq_event(rq->cc, &cq, &ctx) == 0)
		rq->cq_events++;
	if (rq->cq_events >= 256) {
		ibv_ack_cq_events(rq->cq, rq->cq_events);
		rq->cq_events = 0;
	}
	/* Re-arm before draining: a completion that lands after the drain
	 * then raises a new event instead of being missed. */
	if (ibv_req_notify_cq(rq->cq, 0)) {
		nvmf_queue_transport_error(rq->q, -EIO, "cannot re-arm the completion queue");
		return;
	}
	/* Completions can also arrive before the connection is established
	 * (flushes of a failed connect): only a live queue consumes them. */
	cq_drain(rq);
	cq_arm(rq);
}

static void cq_arm(struct rdma_queue *rq)
{
	if (rq->cq_pending || rq->conn == RDMA_CONN_CLOSING)
		return;
	reactor_poll_fd(rq->q->r, &rq->cq_op, rq->cc->fd, POLLIN);
	rq->cq_pending = true;
	rq->ops_in_flight++;
}

/* ---- submission ---- */

/* Posts req's capsule if a send WR is free: 0, -EAGAIN, or another -errno
 * when the QP refused it. */
static int post_send(struct rdma_queue *rq, struct nvmf_req *req)
{
	struct rdma_req *rr = rdma_req_of(req);
	uint32_t seq, len = rr->in_capsule ? req->data_len : 0;
	bool sig;
	int ret = rdma_sendq_post(&rq->sq, &seq, &sig);

	if (ret < 0)
		return ret;
	uint8_t *cap = rq->cap_buf + (size_t)rdma_sendq_slot(&rq->sq, seq) * rq->cap_size;
	memcpy(cap, &req->sqe, sizeof(req->sqe));
	if (len)
		iov_copy_from(req->iov, req->iovcnt, 0, cap + sizeof(struct nvme_sqe), len);

	struct ibv_sge sge = { .addr = (uintptr_t)cap,
			       .length = (uint32_t)sizeof(struct nvme_sqe) + len,
			       .lkey = rq->cap_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = rdma_wr_id(RDMA_WR_SEND, seq), .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = sig ? IBV_SEND_SIGNALED : 0 }, *bad;
	rdma_req_start(rr);
	ret = ibv_post_send(rq->id->qp, &wr, &bad);
	if (ret) {
		rr->posted = false;
		return -ret;
	}
	rq->nr_sends++;
	return 0;
}

static struct nvmf_req *req_of_rr(struct rdma_req *rr)
{
	return (struct nvmf_req *)((unsigned char *)rr - offsetof(struct nvmf_req, tp));
}

/* Send WRs were freed: post what waited for them, in order.  False once
 * the queue has failed. */
static bool post_backlog(struct rdma_queue *rq)
{
	while (!list_empty(&rq->backlog)) {
		struct list_node *n = rq->backlog.next;
		struct nvmf_req *req = req_of_rr(container_of(n, struct rdma_req, backlog));
		INVARIANT(req->in_flight && !rdma_req_of(req)->posted,
			  "a backlogged request not in flight or already posted");
		int ret = post_send(rq, req);
		if (ret == -EAGAIN)
			return true;
		list_del(n);
		if (ret < 0) {
			nvmf_queue_transport_error(rq->q, ret, "posting a send failed: %s",
						   strerror(-ret));
			return false;
		}
	}
	return true;
}

static int rdma_submit(struct nvmf_queue *q, struct nvmf_req *req)
{
	struct rdma_queue *rq = rq_of(q);
	struct rdma_req *rr = rdma_req_of(req);
	unsigned idx = req->cid & NVMF_CID_IDX_MASK;
	uint8_t *data = rq->data_buf + (size_t)idx * rq->slot_size;
	uint32_t len = req->data_len;

	if (rq->conn != RDMA_CONN_LIVE)
		return -ENOTCONN;
	if (idx >= rq->nr_reqs)
		return -EINVAL;
	rr->posted = false;
	rr->in_capsule = req->host_to_ctrl && len && len <= rq->icmax;
	if (!len) {
		rdma_sgl_null(&req->sqe);
	} else if (rr->in_capsule) {
		rdma_sgl_inline(&req->sqe, len);
	} else {
		if (len > rq->slot_size) {
			log_err("%s: CID 0x%04x: %u bytes exceed the %u-byte data buffer", q->name,
				req->cid, len, rq->slot_size);
			return -EINVAL;
		}
		/* The slot's data buffer is free: its previous command got
		 * its response, which the target sends after its RDMA reads
		 * and writes. */
		if (req->host_to_ctrl)
			iov_copy_from(req->iov, req->iovcnt, 0, data, len);
		rdma_sgl_keyed(&req->sqe, (uintptr_t)data, len, rq->data_mr->rkey);
	}
	int ret = list_empty(&rq->backlog) ? post_send(rq, req) : -EAGAIN;
	if (ret == -EAGAIN) {
		list_add_tail(&rq->backlog, &rr->backlog);
	} else if (ret < 0) {
		/* Accepted: the request completes when the queue drains. */
		nvmf_queue_transport_error(q, ret, "posting a send failed: %s", strerror(-ret));
	}
	return 0;
}

/* ---- connection management ---- */

static void cm_arm(struct rdma_queue *rq);

static uint32_t slot_size_for(struct rdma_queue *rq)
{
	struct nvmf_ctrl *c = rq->q->ctrl;
	uint32_t s;

	if (rq->q->qid == 0)
		s = RDMA_ADMIN_SLOT;
	else
		s = c && c->max_xfer ? c->max_xfer : RDMA_DEFAULT_SLOT;
	return (s + 4095u) & ~4095u;
}

static int setup_verbs(struct rdma_queue *rq)
{
	struct nvmf_queue *q = rq->q;
	struct ibv_context *verbs = rq->id->verbs;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	int ret;

	rq->nr_reqs = q->size - 1u;
	rq->nr_recv = q->size;
	/* Room for one signalling interval of sends whose requests have
	 * completed but whose capsules are not yet proven sent, so that a
	 * full window of requests rarely waits for a send WR. */
	uint32_t interval = rdma_sendq_interval(rq->nr_reqs);
	uint32_t depth = rq->nr_reqs + interval;
	struct ibv_device_attr da;
	if (ibv_query_device(verbs, &da) == 0 && da.max_qp_wr > 0 &&
	    depth > (uint32_t)da.max_qp_wr)
		depth = (uint32_t)da.max_qp_wr;
	if (interval > depth)
		interval = depth;
	if ((ret = rdma_sendq_init(&rq->sq, depth, interval)) < 0)
		return ret;
	list_init(&rq->backlog);
	rq->slot_size = slot_size_for(rq);
	rdma_capsule_size(q->qid ? q->in_capsule_max : 0, rq->slot_size, &rq->icmax, &rq->cap_size);

	rq->pd = ibv_alloc_pd(verbs);
	rq->cc = ibv_create_comp_channel(verbs);
	if (!rq->pd || !rq->cc)
		return -ENOMEM;
	if ((ret = set_nonblock(rq->cc->fd)) < 0)
		return ret;
	rq->cq = ibv_create_cq(verbs, (int)(depth + rq->nr_recv), rq, rq->cc, 0);
	if (!rq->cq)
		return errno ? -errno : -ENOMEM;
	if (ibv_req_notify_cq(rq->cq, 0))
		return -EIO;
	struct ibv_qp_init_attr qpa = {
		.send_cq = rq->cq,
		.recv_cq = rq->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth, .max_recv_wr = rq->nr_recv,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(rq->id, rq->pd, &qpa))
		return -errno;
	rq->qp_created = true;

	size_t dsz = (size_t)rq->nr_reqs * rq->slot_size;
	size_t csz = (size_t)depth * rq->cap_size;
	size_t rsz = (((size_t)rq->nr_recv * sizeof(struct nvme_cqe)) + 4095) & ~(size_t)4095;
	rq->data_buf = aligned_alloc(4096, dsz);
	rq->cap_buf = aligned_alloc(4096, (csz + 4095) & ~(size_t)4095);
	rq->rsp_buf = aligned_alloc(4096, rsz);
	if (!rq->data_buf || !rq->cap_buf || !rq->rsp_buf)
		return -ENOMEM;
	memset(rq->cap_buf, 0, csz);
	/* The target may RDMA-read any byte of this region with a key we
	 * gave it: what the allocator left here (other exports' data, other
	 * controllers' secrets) must not be there to read. */
	memset(rq->data_buf, 0, dsz);
	rq->data_mr = ibv_reg_mr(rq->pd, rq->data_buf, dsz, access);
	rq->cap_mr = ibv_reg_mr(rq->pd, rq->cap_buf, csz, IBV_ACCESS_LOCAL_WRITE);
	rq->rsp_mr = ibv_reg_mr(rq->pd, rq->rsp_buf, rsz, IBV_ACCESS_LOCAL_WRITE);
	if (!rq->data_mr || !rq->cap_mr || !rq->rsp_mr)
		return errno ? -errno : -ENOMEM;
	for (unsigned i = 0; i < rq->nr_recv; i++)
		if ((ret = post_recv(rq, i)) < 0)
			return ret;
	log_debug("%s: rdma: %u slots of %u data bytes, %u capsules of %u bytes (one send in %u "
		  "signalled), %u receives",
		  q->name, rq->nr_reqs, rq->slot_size, depth, rq->cap_size, interval, rq->nr_recv);
	return 0;
}

static int start_connect(struct rdma_queue *rq)
{
	struct nvmf_queue *q = rq->q;
	struct ibv_device_attr da;
	int ret = setup_verbs(rq);

	if (ret < 0) {
		nvmf_queue_transport_error(q, ret, "setting up verbs resources on %s: %s",
					   ibv_get_device_name(rq->id->verbs->device),
					   strerror(-ret));
		return ret;
	}
	cq_arm(rq);
	uint8_t rd_atom = 16;
	if (ibv_query_device(rq->id->verbs, &da) == 0 && da.max_qp_rd_atom < rd_atom)
		rd_atom = (uint8_t)da.max_qp_rd_atom;
	rdma_cm_req_init(&rq->priv, q->qid, q->size, q->ctrl ? q->ctrl->cntlid : 0);
	struct rdma_conn_param cp = {
		.private_data = &rq->priv,
		.private_data_len = sizeof(rq->priv),
		/* The target RDMA-reads write data from us. */
		.responder_resources = rd_atom,
		.initiator_depth = 0,
		.flow_control = 1,
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(rq->id, &cp)) {
		ret = -errno;
		nvmf_queue_transport_error(q, ret, "rdma_connect to %s:%s: %s", rq->opts.traddr,
					   rq->opts.trsvcid, strerror(errno));
		return ret;
	}
	rq->was_connected = true;
	set_conn(rq, RDMA_CONN_CONNECTING);
	return 0;
}

static void established(struct rdma_queue *rq, const void *pdata, size_t len)
{
	struct nvme_rdma_cm_rep rep = { 0 };

	if (pdata && len >= 4)
		memcpy(&rep, pdata, len < sizeof(rep) ? len : sizeof(rep));
	if (pdata && len >= 4 && rep.recfmt != NVME_RDMA_CM_FMT_1_0) {
		nvmf_queue_transport_error(rq->q, -EPROTO, "target accepted with record format %u",
					   rep.recfmt);
		return;
	}
	if (pdata && len >= 4 && rep.crqsize && rep.crqsize < rq->nr_reqs)
		log_warn("%s: rdma: target's receive queue holds %u commands, fewer than the %u "
			 "asked",
			 rq->q->name, rep.crqsize, rq->nr_reqs);
	if (!set_conn(rq, RDMA_CONN_LIVE))
		return; /* closing meanwhile */
	reactor_timer_cancel(&rq->connect_timer);
	log_debug("%s: NVMe/RDMA up on %s (crqsize %u)", rq->q->name,
		  ibv_get_device_name(rq->id->verbs->device), rep.crqsize);
	nvmf_queue_transport_ready(rq->q);
	/* Completions that raced the ESTABLISHED event were left in the CQ. */
	if (rq->conn == RDMA_CONN_LIVE)
		cq_drain(rq);
}

static void handle_cm_event(struct rdma_queue *rq, enum rdma_cm_event_type type, int status,
			    const void *pdata, size_t plen)
{
	struct nvmf_queue *q = rq->q;
	const char *to = rq->opts.traddr, *port = rq->opts.trsvcid;
	unsigned tmo = rq->opts.connect_timeout_ms;
	char why[160];
	int err;

	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rq->conn != RDMA_CONN_ADDR)
			break;
		set_conn(rq, RDMA_CONN_ROUTE);
		if (rdma_resolve_route(rq->id, (int)tmo))
			nvmf_queue_transport_error(q, -errno, "resolving the route to %s: %s", to,
						   strerror(errno));
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
		nvmf_queue_transport_error(q, status ? status : -EHOSTUNREACH,
					   "no RDMA route to %s: %s (is an RDMA device bound to the "
					   "interface that reaches it?)",
					   to, strerror(status ? -status : EHOSTUNREACH));
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rq->conn != RDMA_CONN_ROUTE)
			break;
		start_connect(rq);
		return;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		nvmf_queue_transport_error(q, status ? status : -EHOSTUNREACH,
					   "resolving the RDMA route to %s failed: %s", to,
					   strerror(status ? -status : EHOSTUNREACH));
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rq->conn != RDMA_CONN_CONNECTING)
			break;
		established(rq, pdata, plen);
		return;
	case RDMA_CM_EVENT_REJECTED:
		err = rdma_reject_describe(status, pdata, plen, why, sizeof(why));
		nvmf_queue_transport_error(q, err, "%s:%s: %s", to, port, why);
		return;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		nvmf_queue_transport_error(q, -ECONNREFUSED, "cannot connect to %s:%s: %s (%d)", to,
					   port, rdma_event_str(type), status);
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		nvmf_queue_transport_error(q, -ECONNRESET, "target disconnected");
		return;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		nvmf_queue_transport_error(q, -ENODEV, "RDMA device removed");
		return;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		nvmf_queue_transport_error(q, -ENETRESET, "local address changed");
		return;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		nvmf_queue_transport_error(q, -ECONNRESET, "connection left time-wait");
		return;
	default:
		break;
	}
	log_debug("%s: rdma: ignoring %s (status %d) while %s", q->name, rdma_event_str(type),
		  status, conn_name(rq->conn));
}

static void cm_ready(struct reactor_op *op, int res, uint32_t flags)
{
	struct rdma_queue *rq = container_of(op, struct rdma_queue, cm_op);
	struct rdma_cm_event *ev;

	(void)flags;
	rq->cm_pending = false;
	rq->ops_in_flight--;
	if (rq->conn == RDMA_CONN_CLOSING) {
		maybe_quiesced(rq);
		return;
	}
	if (res < 0) {
		nvmf_queue_transport_error(rq->q, res, "polling the RDMA CM channel: %s",
					   strerror(-res));
		return;
	}
	while (rq->conn != RDMA_CONN_CLOSING && rdma_get_cm_event(rq->ch, &ev) == 0) {
		/* Copy what is needed, then ack: destroying the id waits for
		 * every event to be acked. */
		enum rdma_cm_event_type type = ev->event;
		int status = ev->status;
		uint8_t pdata[64];
		size_t plen = ev->param.conn.private_data_len;
		if (plen > sizeof(pdata))
			plen = sizeof(pdata);
		if (plen && ev->param.conn.private_data)
			memcpy(pdata, ev->param.conn.private_data, plen);
		else
			plen = 0;
		rdma_ack_cm_event(ev);
		handle_cm_event(rq, type, status, plen ? pdata : NULL, plen);
	}
	cm_arm(rq);
}

static void cm_arm(struct rdma_queue *rq)
{
	if (rq->cm_pending || rq->conn == RDMA_CONN_CLOSING)
		return;
	reactor_poll_fd(rq->q->r, &rq->cm_op, rq->ch->fd, POLLIN);
	rq->cm_pending = true;
	rq->ops_in_flight++;
}

static void connect_timeout(struct reactor_timer *t)
{
	struct rdma_queue *rq = container_of(t, struct rdma_queue, connect_timer);

	nvmf_queue_transport_error(rq->q, -ETIMEDOUT,
				   "connecting to %s:%s timed out after %u ms (%s)", rq->opts.traddr,
				   rq->opts.trsvcid, rq->opts.connect_timeout_ms,
				   conn_name(rq->conn));
}

static int parse_addr(struct rdma_queue *rq, const char *host, const char *port, int family,
		      struct sockaddr_storage *out, const char *what)
{
	struct addrinfo hints = { .ai_family = family,
				  .ai_flags = AI_NUMERICHOST | (port ? AI_NUMERICSERV : 0) };
	struct addrinfo *ai;
	int ret = getaddrinfo(host, port, &hints, &ai);

	if (ret) {
		log_err("%s: %s '%s'%s%s: %s (numeric address expected)", rq->q->name, what, host,
			port ? " port " : "", port ? port : "", gai_strerror(ret));
		return -EINVAL;
	}
	memcpy(out, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

static int iface_addr(struct rdma_queue *rq, int family)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa) < 0)
		return -errno;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != family ||
		    strcmp(i->ifa_name, rq->opts.host_iface))
			continue;
		memcpy(&rq->src, i->ifa_addr,
		       family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
		rq->have_src = true;
		break;
	}
	freeifaddrs(ifa);
	if (!rq->have_src) {
		log_err("%s: host_iface %s has no %s address", rq->q->name, rq->opts.host_iface,
			family == AF_INET6 ? "IPv6" : "IPv4");
		return -EADDRNOTAVAIL;
	}
	return 0;
}

static int rdma_queue_connect(struct nvmf_queue *q)
{
	struct rdma_queue *rq = rq_of(q);
	int nr_dev = 0, ret;

	/* Fail at once, and say why, on a machine without RDMA. */
	struct ibv_device **devs = ibv_get_device_list(&nr_dev);
	if (devs)
		ibv_free_device_list(devs);
	if (nr_dev <= 0) {
		log_err("%s: no RDMA device found (load the NIC's RDMA driver, or try soft-RoCE: "
			"rdma link add rxe0 type rxe netdev IFACE)",
			q->name);
		return -ENODEV;
	}
	rq->have_src = false;
	ret = parse_addr(rq, rq->opts.traddr, rq->opts.trsvcid, AF_UNSPEC, &rq->dst, "traddr");
	if (ret < 0)
		return ret;
	if (rq->opts.host_traddr[0]) {
		ret = parse_addr(rq, rq->opts.host_traddr, NULL, rq->dst.ss_family, &rq->src,
				 "host_traddr");
		if (ret < 0)
			return ret;
		rq->have_src = true;
	} else if (rq->opts.host_iface[0] && (ret = iface_addr(rq, rq->dst.ss_family)) < 0) {
		return ret;
	}

	rq->ch = rdma_create_event_channel();
	if (!rq->ch) {
		ret = -errno;
		log_err("%s: cannot open the RDMA CM (%s): is rdma_ucm loaded?", q->name,
			strerror(errno));
		return ret;
	}
	if ((ret = set_nonblock(rq->ch->fd)) < 0)
		return ret;
	if (rdma_create_id(rq->ch, &rq->id, rq, RDMA_PS_TCP)) {
		ret = -errno;
		log_err("%s: rdma_create_id: %s", q->name, strerror(errno));
		return ret;
	}
	if (rq->opts.tos >= 0) {
		uint8_t tos = (uint8_t)rq->opts.tos;
		if (rdma_set_option(rq->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof(tos)))
			log_warn("%s: cannot set TOS %d: %s", q->name, rq->opts.tos,
				 strerror(errno));
	}
	if (rq->opts.tos >= 0 || rq->have_src) {
		char a[INET6_ADDRSTRLEN] = "any";
		if (rq->have_src)
			getnameinfo((struct sockaddr *)&rq->src, sizeof(rq->src), a, sizeof(a), NULL,
				    0, NI_NUMERICHOST);
		log_debug("%s: rdma: TOS %d, source address %s", q->name, rq->opts.tos, a);
	}
	set_conn(rq, RDMA_CONN_ADDR);
	if (rdma_resolve_addr(rq->id, rq->have_src ? (struct sockaddr *)&rq->src : NULL,
			      (struct sockaddr *)&rq->dst, (int)rq->opts.connect_timeout_ms)) {
		ret = -errno;
		log_err("%s: no RDMA route to %s%s%s: %s", q->name, rq->opts.traddr,
			rq->have_src ? " from " : "", rq->have_src ? rq->opts.host_traddr : "",
			strerror(errno));
		return ret; /* the core shuts the queue down, which frees it all */
	}
	cm_arm(rq);
	reactor_timer_arm(q->r, &rq->connect_timer,
			  (uint64_t)rq->opts.connect_timeout_ms * NSEC_PER_MSEC);
	return 0;
}

static int rdma_queue_init(struct nvmf_queue *q, const struct nvmf_path_opts *opts)
{
	struct rdma_queue *rq = calloc(1, sizeof(*rq));

	if (!rq)
		return -ENOMEM;
	rq->q = q;
	rq->opts = *opts;
	if (!rq->opts.connect_timeout_ms)
		rq->opts.connect_timeout_ms = 10000;
	rq->conn = RDMA_CONN_IDLE;
	rq->cm_op.fn = cm_ready;
	rq->cq_op.fn = cq_ready;
	rq->quiesce_msg.fn = quiesce_run;
	list_init(&rq->backlog);
	reactor_timer_init(&rq->connect_timer, connect_timeout);
	q->tp = rq;
	return 0;
}

static void rdma_queue_free(struct nvmf_queue *q)
{
	struct rdma_queue *rq = rq_of(q);

	reactor_timer_cancel(&rq->connect_timer);
	free_all(rq);
	free(rq);
	q->tp = NULL;
}

static void rdma_req_state(struct nvmf_queue *q, struct nvmf_req *req, char *buf, size_t len)
{
	struct rdma_queue *rq = rq_of(q);
	struct rdma_req *rr = rdma_req_of(req);

	snprintf(buf, len, "rdma: command %s, %s; queue: %u send WRs in flight, %s",
		 rr->posted ? "posted" : "waiting for a free send WR",
		 rr->resp_ready ? "response received, waiting for its send completion" :
				  "no response",
		 rdma_sendq_used(&rq->sq), list_empty(&rq->backlog) ? "no backlog" : "a backlog");
}

const struct nvmf_transport_ops nvmf_rdma_ops = {
	.name = "rdma",
	.req_priv_size = sizeof(struct rdma_req),
	/* Every slot owns a registered buffer of max_xfer bytes: keep them at
	 * the size they had when the core capped all commands at 60 KiB. */
	.max_xfer = RDMA_DEFAULT_SLOT,
	.queue_init = rdma_queue_init,
	.queue_connect = rdma_queue_connect,
	.submit = rdma_submit,
	.queue_shutdown = rdma_queue_shutdown,
	.queue_free = rdma_queue_free,
	.req_state = rdma_req_state,
};
