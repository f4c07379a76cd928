/* Queues and their request pools: the part of the host core every
 * transport shares.  A request is on exactly one list: free or in flight,
 * or on none while its owner prepares it (got, not yet submitted); the
 * debug builds assert it at every move (INVARIANT), so a double put or a
 * double completion aborts there.
 * Completion runs done() exactly once; after a transport error, in-flight
 * requests are completed only once the transport says nothing refers to
 * them any more, so a late send or receive can never touch a reused one. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "transports/ctrl.h"
#include "transports/transport.h"

/* No default: -Wswitch names a state added without a name. */
const char *nvmf_queue_state_name(enum nvmf_queue_state s)
{
	switch (s) {
	case NVMF_Q_IDLE: return "idle";
	case NVMF_Q_CONNECTING: return "connecting";
	case NVMF_Q_FABRIC_CONNECT: return "fabric-connect";
	case NVMF_Q_LIVE: return "live";
	case NVMF_Q_DRAINING: return "draining";
	case NVMF_Q_DEAD: return "dead";
	}
	return "?";
}

/* Legal moves; anything else is a bug and is refused loudly. */
static bool queue_transition_ok(enum nvmf_queue_state from, enum nvmf_queue_state to)
{
	switch (to) {
	case NVMF_Q_CONNECTING:
		return from == NVMF_Q_IDLE || from == NVMF_Q_DEAD;
	case NVMF_Q_FABRIC_CONNECT:
		return from == NVMF_Q_CONNECTING;
	case NVMF_Q_LIVE:
		return from == NVMF_Q_FABRIC_CONNECT;
	case NVMF_Q_DRAINING:
		return from == NVMF_Q_CONNECTING || from == NVMF_Q_FABRIC_CONNECT ||
		       from == NVMF_Q_LIVE;
	case NVMF_Q_DEAD:
		return from == NVMF_Q_DRAINING || from == NVMF_Q_IDLE;
	case NVMF_Q_IDLE:
		return false;
	}
	return false;
}

bool nvmf_queue_set_state(struct nvmf_queue *q, enum nvmf_queue_state s)
{
	if (!queue_transition_ok(q->state, s)) {
		log_err("%s: illegal state change %s -> %s refused", q->name,
			nvmf_queue_state_name(q->state), nvmf_queue_state_name(s));
		return false;
	}
	log_debug("%s: %s -> %s", q->name, nvmf_queue_state_name(q->state),
		  nvmf_queue_state_name(s));
	q->state = s;
	return true;
}

static void queue_wake(struct reactor_msg *m);

/* One timer per queue, not per command, armed for the earliest deadline.
 * Every request expired at a fire is handled at that fire: with one at a
 * time, K stuck commands had their Aborts go out a grace period apart.
 * Requests are in flight in submit order, so past the first that has
 * neither expired nor been aborted none has. */
static void io_timer_fire(struct reactor_timer *t)
{
	struct nvmf_queue *q = container_of(t, struct nvmf_queue, io_timer);
	uint64_t now = reactor_now_ns(), tmo = (uint64_t)q->io_timeout_ms * NSEC_PER_MSEC;
	/* An I/O command that times out is aborted first (the Linux host
	 * resets at once; an Abort keeps the other commands going when the
	 * controller can do it); if it is still there a grace period later,
	 * the connection is closed and the controller reset. */
	uint64_t grace = tmo < 5 * NSEC_PER_SEC ? tmo : 5 * NSEC_PER_SEC;
	uint64_t next = UINT64_MAX;

	if (list_empty(&q->in_flight) || q->state == NVMF_Q_DRAINING || q->state == NVMF_Q_DEAD)
		return;
	for (struct list_node *n = q->in_flight.next; n != &q->in_flight; n = n->next) {
		struct nvmf_req *req = container_of(n, struct nvmf_req, link);
		uint64_t due = req->submit_ns + tmo + (req->abort_sent ? grace : 0);
		char st[200] = "";

		if (req->no_timeout)
			continue;
		if (now < due) {
			next = due < next ? due : next;
			if (!req->abort_sent)
				break;
			continue;
		}
		if (q->ops->req_state)
			q->ops->req_state(q, req, st, sizeof(st));
		req->timed_out = true;
		if (q->qid && q->ctrl && !req->abort_sent) {
			req->abort_sent = true;
			log_warn("%s: CID 0x%04x (opcode 0x%02x) timed out after %u ms%s%s%s; aborting it",
				 q->name, req->cid, req->sqe.opcode, q->io_timeout_ms, *st ? " (" : "",
				 st, *st ? ")" : "");
			nvmf_ctrl_abort(q->ctrl, q->qid, req->cid);
			next = due + grace < next ? due + grace : next;
			continue;
		}
		nvmf_queue_transport_error(q, -ETIMEDOUT,
					   "CID 0x%04x (opcode 0x%02x) timed out after %u ms%s%s%s",
					   req->cid, req->sqe.opcode, q->io_timeout_ms,
					   *st ? " (" : "", st, *st ? ")" : "");
		return;
	}
	if (next != UINT64_MAX) /* else re-armed by the next submit */
		reactor_timer_arm(q->r, &q->io_timer, next - now);
}

int nvmf_queue_init(struct nvmf_queue *q, struct nvmf_ctrl *ctrl, struct reactor *r,
		    uint16_t qid, uint16_t size, const struct nvmf_path_opts *opts)
{
	const struct nvmf_transport_ops *ops = nvmf_transport_find(opts->trtype);
	int ret;

	memset(q, 0, sizeof(*q));
	if (!ops)
		return -EPROTONOSUPPORT;
	if (size < 2 || size > NVMF_QUEUE_MAX_SIZE)
		return -EINVAL;
	q->ops = ops;
	q->ctrl = ctrl;
	q->r = r;
	q->qid = qid;
	q->size = size;
	q->state = NVMF_Q_IDLE;
	snprintf(q->name, sizeof(q->name), "ctrl %s q%u", ctrl ? ctrl->opts.name : "?", qid);
	list_init(&q->free_reqs);
	list_init(&q->in_flight);
	list_init(&q->waiters);
	q->wake_msg.fn = queue_wake;
	q->io_timeout_ms = ctrl && ctrl->opts.io_timeout_ms ? ctrl->opts.io_timeout_ms : 30000;
	reactor_timer_init(&q->io_timer, io_timer_fire);
	/* One request per SQ slot less one: a full SQ is never ambiguous. */
	unsigned nr = size - 1u;
	q->req_stride = (unsigned)((sizeof(struct nvmf_req) + ops->req_priv_size + 63) & ~63ul);
	q->req_mem = aligned_alloc(64, (size_t)q->req_stride * nr);
	q->by_idx = calloc(nr, sizeof(*q->by_idx));
	if (!q->req_mem || !q->by_idx) {
		free(q->req_mem);
		free(q->by_idx);
		return -ENOMEM;
	}
	memset(q->req_mem, 0, (size_t)q->req_stride * nr);
	for (unsigned i = 0; i < nr; i++) {
		struct nvmf_req *req = (struct nvmf_req *)(q->req_mem + (size_t)i * q->req_stride);
		req->q = q;
		req->cid = (uint16_t)i;
		q->by_idx[i] = req;
		list_init(&req->link);
		list_add_tail(&q->free_reqs, &req->link);
	}
	q->nr_free = nr;
	/* An admin queue: one request for the outstanding AER, one for the
	 * namespace change handling and one for the ANA log read (each one
	 * command at a time), never given to keep-alive or Abort, so that a
	 * busy queue never loses an event (the target sends the next only
	 * once the log was read).  With 31 requests that leaves 28. */
	if (qid == 0 && nr > 2 * NVMF_ADMIN_RESERVED)
		q->reserved = NVMF_ADMIN_RESERVED;
	ret = ops->queue_init(q, opts);
	if (ret < 0) {
		free(q->req_mem);
		free(q->by_idx);
		q->req_mem = NULL;
		q->by_idx = NULL;
	}
	return ret;
}

void nvmf_queue_free(struct nvmf_queue *q)
{
	if (!q->req_mem)
		return;
	reactor_timer_cancel(&q->io_timer);
	free(q->connect_data);
	q->connect_data = NULL;
	if (q->ops && q->tp)
		q->ops->queue_free(q);
	free(q->req_mem);
	free(q->by_idx);
	q->req_mem = NULL;
	q->by_idx = NULL;
}

static struct nvmf_req *req_take(struct nvmf_queue *q, bool reserved)
{
	struct list_node *n;
	struct nvmf_req *req;

	if (q->nr_free <= (reserved ? 0 : q->reserved) || !(n = list_pop(&q->free_reqs)))
		return NULL;
	q->nr_free--;
	req = container_of(n, struct nvmf_req, link);
	INVARIANT(!req->in_flight, "a free request is not in flight");
	/* The slot's next generation in the CID's top bits: a late or forged
	 * response, or an Abort still on its way, for one of the slot's last
	 * 15 uses does not match this one.  Counted per slot, as Linux counts
	 * per tag: with one count per queue the next use of a slot had its
	 * last use's CID whenever a multiple of 16 takes came between. */
	unsigned idx = req->cid & NVMF_CID_IDX_MASK;
	unsigned gen = ((unsigned)req->cid >> NVMF_CID_IDX_BITS) + 1u;
	gen &= (1u << (16 - NVMF_CID_IDX_BITS)) - 1u;
	req->cid = (uint16_t)(idx | (gen << NVMF_CID_IDX_BITS));
	memset(&req->sqe, 0, sizeof(req->sqe));
	memset(&req->cqe, 0, sizeof(req->cqe));
	req->data_len = 0;
	req->iovcnt = 0;
	req->sink = NULL;
	req->sink_off = 0;
	req->host_to_ctrl = false;
	req->done = NULL;
	req->ctx = req->ctx2 = NULL;
	req->no_timeout = false;
	req->abort_sent = false;
	req->timed_out = false;
	return req;
}

struct nvmf_req *nvmf_req_get_waiter(struct nvmf_queue *q, struct nvmf_waiter *w)
{
	/* First come, first served: a waiter is woken only after the whole
	 * completion batch, and new submissions of the same batch took the
	 * slots it freed, so one I/O could wait for ever on a busy queue. */
	if (!list_empty(&q->waiters) && (!w || q->waking != w))
		return NULL;
	return req_take(q, false);
}

struct nvmf_req *nvmf_req_get(struct nvmf_queue *q)
{
	return nvmf_req_get_waiter(q, NULL);
}

struct nvmf_req *nvmf_req_get_reserved(struct nvmf_queue *q)
{
	return req_take(q, true);
}

static void queue_wake(struct reactor_msg *m)
{
	struct nvmf_queue *q = container_of(m, struct nvmf_queue, wake_msg);
	struct list_node *n;

	q->wake_pending = false;
	/* Each waiter takes what it needs and re-queues itself (at the
	 * tail) if that was not enough; stop once the pool is empty again. */
	while (q->nr_free > q->reserved && (n = list_pop(&q->waiters))) {
		struct nvmf_waiter *w = container_of(n, struct nvmf_waiter, link);
		q->waking = w;
		w->fn(w);
		q->waking = NULL;
	}
}

void nvmf_req_put(struct nvmf_req *req)
{
	struct nvmf_queue *q = req->q;

	/* Owned by the caller: on no list (a second put finds it on the
	 * free list) and not in flight. */
	INVARIANT(!req->in_flight, "put of a request in flight");
	INVARIANT(list_empty(&req->link), "put of a request already on a list (double put)");
	/* LIFO keeps the slots in use few and warm; but a slot whose command
	 * had an Abort sent goes last, so that the Abort, which may still be
	 * on its way to the controller, finds its CID idle for as long as
	 * the pool allows. */
	if (req->abort_sent)
		list_add_tail(&q->free_reqs, &req->link);
	else
		list_add_head(&q->free_reqs, &req->link);
	q->nr_free++;
	if (!list_empty(&q->waiters) && !q->wake_pending) {
		q->wake_pending = true;
		reactor_defer(q->r, &q->wake_msg);
	}
}

void nvmf_queue_wait(struct nvmf_queue *q, struct nvmf_waiter *w)
{
	list_add_tail(&q->waiters, &w->link);
}

void nvmf_req_set_data(struct nvmf_req *req, const struct iovec *iov, unsigned iovcnt,
		       uint32_t len, bool host_to_ctrl)
{
	req->iovcnt = iovcnt;
	memcpy(req->iov, iov, iovcnt * sizeof(*iov));
	req->data_len = len;
	req->host_to_ctrl = host_to_ctrl;
}

static void req_finish(struct nvmf_req *req, int err)
{
	struct nvmf_queue *q = req->q;

	INVARIANT(req->in_flight && !list_empty(&req->link),
		  "completion of a request not in flight (double completion)");
	req->in_flight = false;
	list_del(&req->link);
	q->nr_in_flight--;
	q->nr_completed++;
	if (err)
		q->nr_errors++;
	req->done(req, err);
}

void nvmf_req_submit(struct nvmf_req *req)
{
	struct nvmf_queue *q = req->q;
	int ret;

	INVARIANT(!req->in_flight && list_empty(&req->link),
		  "submit of a request that is free or already in flight");
	req->sqe.cid = req->cid;
	req->sqe.flags |= NVME_CMD_FLAGS_SGL_METABUF;
	req->in_flight = true;
	req->submit_ns = reactor_now_ns();
	list_add_tail(&q->in_flight, &req->link);
	q->nr_in_flight++;
	if (!q->io_timer.armed)
		reactor_timer_arm(q->r, &q->io_timer, (uint64_t)q->io_timeout_ms * NSEC_PER_MSEC);
	q->nr_submitted++;
	bool can_send = q->state == NVMF_Q_LIVE ||
			(q->state == NVMF_Q_FABRIC_CONNECT && req->sqe.opcode == NVME_FABRICS_COMMAND);
	ret = can_send ? q->ops->submit(q, req) : -ENOTCONN;
	if (ret < 0)
		req_finish(req, ret);
}

struct nvmf_req *nvmf_queue_find_req(struct nvmf_queue *q, uint16_t cid)
{
	unsigned idx = cid & NVMF_CID_IDX_MASK;
	struct nvmf_req *req;

	if (idx >= (unsigned)q->size - 1u)
		return NULL;
	req = q->by_idx[idx];
	return req->in_flight && req->cid == cid ? req : NULL;
}

void nvmf_req_complete(struct nvmf_req *req, const struct nvme_cqe *cqe)
{
	req->cqe = *cqe;
	req_finish(req, 0);
}

void nvmf_queue_transport_ready(struct nvmf_queue *q)
{
	if (!nvmf_queue_set_state(q, NVMF_Q_FABRIC_CONNECT))
		return; /* closing meanwhile: the quiesce reports it */
	nvmf_fabric_connect(q);
}

void nvmf_queue_transport_error(struct nvmf_queue *q, int err, const char *why, ...)
{
	char msg[256];
	va_list ap;

	if (q->state == NVMF_Q_DRAINING || q->state == NVMF_Q_DEAD)
		return;
	va_start(ap, why);
	vsnprintf(msg, sizeof(msg), why, ap);
	va_end(ap);
	log_err("%s: %s; closing the connection", q->name, msg);
	nvmf_queue_shutdown(q, err);
}

void nvmf_queue_shutdown(struct nvmf_queue *q, int err)
{
	if (q->state == NVMF_Q_DRAINING || q->state == NVMF_Q_DEAD)
		return;
	if (q->state == NVMF_Q_IDLE) {
		nvmf_queue_set_state(q, NVMF_Q_DEAD);
		return;
	}
	if (!nvmf_queue_set_state(q, NVMF_Q_DRAINING))
		return;
	q->error = err ? err : -ECONNRESET;
	q->ops->queue_shutdown(q);
}

void nvmf_queue_transport_quiesced(struct nvmf_queue *q)
{
	struct list_node *n;
	bool was_connecting = q->connect_cb != NULL;

	nvmf_queue_set_state(q, NVMF_Q_DEAD);
	reactor_timer_cancel(&q->io_timer);
	/* Oldest first, as they were submitted. */
	while ((n = q->in_flight.next) != &q->in_flight)
		req_finish(container_of(n, struct nvmf_req, link), q->error);
	if (was_connecting) {
		nvmf_queue_cb cb = q->connect_cb;
		q->connect_cb = NULL;
		cb(q, q->error);
	} else if (q->down_cb) {
		q->down_cb(q, q->error);
	}
}
