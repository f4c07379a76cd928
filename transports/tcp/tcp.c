/* NVMe/TCP transport: connection set-up (TCP connect, ICReq/ICResp), the
 * send path (capsules, H2CData for R2Ts, batched into one sendmsg) and the
 * receive loop feeding tcp_rx.c.  All on the queue's reactor. */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/invariant.h"
#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "transports/crc32c.h"
#include "transports/tcp/tcp_internal.h"

static const uint8_t zero_pad[128];

static struct tcp_queue *tq_of(struct nvmf_queue *q) { return q->tp; }

static void tcp_send_kick(struct tcp_queue *tq);

/* ---- quiescing ---- */

static void quiesce_run(struct reactor_msg *m)
{
	struct tcp_queue *tq = container_of(m, struct tcp_queue, quiesce_msg);

	tq->quiesce_queued = false;
	if (tq->fd >= 0) {
		/* Those commands complete with an error now and may be sent
		 * again down another path.  A graceful close would leave their
		 * capsules and data in the send queue, delivered when a downed
		 * link comes back, after the retry: an old write landing over
		 * a newer one.  A zero linger drops them and resets. */
		if (tq->abort_close) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };
			setsockopt(tq->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		close(tq->fd);
		tq->fd = -1;
	}
	tq->conn = TCP_CONN_IDLE;
	/* No send can touch the requests any more: they leave the send list
	 * and the last batch before they complete, free for a later use. */
	while (!list_empty(&tq->sendq)) {
		struct tcp_send_item *it = container_of(tq->sendq.next, struct tcp_send_item, link);
		list_del(&it->link);
		it->queued = false;
	}
	for (unsigned i = 0; i < tq->batch_cnt; i++)
		tq->batch[i]->in_batch = false;
	tq->batch_cnt = 0;
	/* What a cut splice left in the pipe is of no use to anyone. */
	pipe_sink_close_counted(&tq->tx_pipe);
	tq->tx_splicing = false;
	tq->tx_pipe_ok = tq->sock_nonblock = false;
	nvmf_queue_transport_quiesced(tq->q);
}

/* Once closing and nothing of ours is left in the ring, the requests may
 * be completed: no send or receive can touch their buffers any more. */
static void maybe_quiesced(struct tcp_queue *tq)
{
	if (tq->conn != TCP_CONN_CLOSING || tq->ops_in_flight || tq->quiesce_queued)
		return;
	tq->quiesce_queued = true;
	reactor_defer(tq->q->r, &tq->quiesce_msg);
}

static void tcp_queue_shutdown(struct nvmf_queue *q)
{
	struct tcp_queue *tq = tq_of(q);

	if (tq->conn == TCP_CONN_CLOSING)
		return;
	tq->conn = TCP_CONN_CLOSING;
	tq->abort_close = q->nr_in_flight > 0;
	reactor_timer_cancel(&tq->connect_timer);
	if (tq->connect_pending)
		reactor_cancel(q->r, &tq->connect_op);
	/* Wakes a pending recv (returns 0) and fails a pending send; unless
	 * a TermReq waits for that send, which then gets a bounded time to
	 * finish (send_done, term_timeout). */
	if (tq->fd >= 0) {
		if (tq->term_deferred && tq->send_pending) {
			shutdown(tq->fd, SHUT_RD);
			reactor_timer_arm(q->r, &tq->term_timer,
					  (uint64_t)TCP_TERM_WAIT_MS * NSEC_PER_MSEC);
		} else {
			tq->term_deferred = false;
			/* An orderly end says so: the target then tells a
			 * closed session from a cut one. */
			if (tq->tls && !tq->abort_close && !tq->send_pending)
				tcp_tls_close_notify(tq);
			shutdown(tq->fd, SHUT_RDWR);
		}
	}
	maybe_quiesced(tq);
}

static void splice_step(struct tcp_queue *tq);

static void tx_retry(struct reactor_timer *t)
{
	struct tcp_queue *tq = container_of(t, struct tcp_queue, tx_retry_timer);

	tq->ops_in_flight--;
	splice_step(tq); /* after term_timeout the socket is shut: it ends */
}

static void term_timeout(struct reactor_timer *t)
{
	struct tcp_queue *tq = container_of(t, struct tcp_queue, term_timer);

	log_debug("%s: send still in flight after %u ms: closing without a TermReq",
		  tq->q->name, TCP_TERM_WAIT_MS);
	tq->term_deferred = false;
	if (tq->fd >= 0)
		shutdown(tq->fd, SHUT_RDWR);
}

/* The send in flight when the queue started closing was reaped: the
 * deferred TermReq goes out if that send ended on a PDU boundary. */
static void closing_send_reaped(struct tcp_queue *tq, int res)
{
	if (!tq->term_deferred)
		return;
	tq->term_deferred = false;
	reactor_timer_cancel(&tq->term_timer);
	if (tq->tls) {
		/* On a PDU boundary: the batch all sealed and all sent. */
		if (res > 0 && tq->siov_first == tq->siov_cnt &&
		    tq->tls->out_sent + (uint32_t)res == tq->tls->out_len) {
			tq->tls->out_sent = tq->tls->out_len = 0;
			tcp_send_term(tq);
		}
	} else if (res > 0 && tq->siov_first + iov_advance(tq->siov + tq->siov_first,
							    tq->siov_cnt - tq->siov_first,
							    (size_t)res) == tq->siov_cnt) {
		tcp_send_term(tq);
	}
	if (tq->fd >= 0)
		shutdown(tq->fd, SHUT_RDWR);
}

/* ---- send path ---- */

static void item_queue(struct tcp_queue *tq, struct tcp_send_item *it)
{
	/* An item is on the send list or in the batch being sent, not both. */
	INVARIANT(!(it->queued && it->in_batch), "a send item both queued and in a batch");
	if (it->queued || it->in_batch)
		return;
	INVARIANT(it->req && it->req->in_flight, "send of a request not in flight");
	it->queued = true;
	list_add_tail(&tq->sendq, &it->link);
}

/* The write's payload comes out of its pipe into req->iov, for a send
 * that takes it from memory; -EIO if the pipe does not hold it whole. */
static int unsplice_payload(struct nvmf_req *req)
{
	struct pipe_sink *s = req->sink;

	req->sink = NULL;
	if (s->broken || s->filled != req->data_len ||
	    pipe_sink_unsplice(s, req->iov, req->iovcnt) < 0)
		return -EIO;
	return 0;
}

/* The same once the command was accepted: a failure fails the queue. */
static int take_out_of_pipe(struct tcp_queue *tq, struct nvmf_req *req)
{
	if (unsplice_payload(req) == 0)
		return 0;
	nvmf_queue_transport_error(tq->q, -EIO, "CID 0x%04x: the write's payload is lost: its "
				   "pipe failed", req->cid);
	return -EIO;
}

static uint32_t h2c_pdo(const struct tcp_queue *tq)
{
	uint32_t hlen = sizeof(struct nvme_tcp_data) + (tq->hdgst ? NVME_TCP_DIGEST_LEN : 0);

	return (hlen + tq->cpda_bytes - 1) / tq->cpda_bytes * tq->cpda_bytes;
}

/* The whole payload in one H2CData PDU, header and padding small enough
 * to go in the pipe ahead of it: the only shape tee can produce, since it
 * always starts at the front of the caller's pipe. */
static bool h2c_from_pipe(const struct tcp_queue *tq, const struct nvmf_req *req)
{
	const struct tcp_req *tr = tcp_req_of((struct nvmf_req *)req);

	return req->sink && tq->tx_pipe_ok && req->sink->filled == req->data_len &&
	       !req->sink->broken && tr->h2c_off == 0 &&
	       tr->r2t_end == req->data_len && req->data_len <= tq->maxh2cdata &&
	       h2c_pdo(tq) <= PIPE_SINK_PREFIX_MAX;
}

int tcp_queue_h2c(struct tcp_queue *tq, struct nvmf_req *req)
{
	if (req->sink && !h2c_from_pipe(tq, req) && take_out_of_pipe(tq, req) < 0)
		return -EIO;
	/* If the last H2CData of the previous R2T is still being sent, the
	 * batch completion picks this one up (see send_done). */
	tcp_req_of(req)->heard = false;
	item_queue(tq, &tcp_req_of(req)->h2c_item);
	tcp_send_kick(tq);
	return 0;
}

void tcp_req_heard(struct tcp_queue *tq, struct nvmf_req *req)
{
	struct tcp_req *tr = tcp_req_of(req);

	tr->heard = true;
	if (tr->turn_ns) {
		if (tq->rx_now_ns > tr->turn_ns)
			tq->q->target_ns += tq->rx_now_ns - tr->turn_ns;
		tr->turn_ns = 0;
	}
}

void tcp_tx_pipe_setup(struct tcp_queue *tq)
{
	struct sigaction sa;
	int fl;

	tq->tx_pipe_ok = tq->sock_nonblock = false;
	if (pipe_sink_disabled() || tq->tls || tq->ddgst || !reactor_nonblock_fd_ok(tq->q->r))
		return;
	if (sigaction(SIGPIPE, NULL, &sa) < 0 || sa.sa_handler != SIG_IGN)
		return; /* splice cannot say MSG_NOSIGNAL */
	fl = fcntl(tq->fd, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(tq->fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return;
	tq->sock_nonblock = true;
	tq->tx_pipe_ok = true;
}

static void req_finish_if_ready(struct tcp_queue *tq, struct nvmf_req *req)
{
	struct tcp_req *tr = tcp_req_of(req);

	(void)tq;
	if (!tr->resp_ready || tr->cmd_item.in_batch || tr->h2c_item.in_batch)
		return;
	/* Once completed, the owner may free the buffer and reuse the slot:
	 * nothing of ours may still point at it. */
	assert(!tr->cmd_item.queued && !tr->h2c_item.queued);
	tr->resp_ready = false;
	nvmf_req_complete(req, &tr->resp);
}

void tcp_req_respond(struct tcp_queue *tq, struct nvmf_req *req, const struct nvme_cqe *cqe)
{
	struct tcp_req *tr = tcp_req_of(req);

	tr->resp = *cqe;
	tr->resp_ready = true;
	/* An error response can overtake R2T data still queued: drop it. */
	if (tr->h2c_item.queued) {
		list_del(&tr->h2c_item.link);
		tr->h2c_item.queued = false;
	}
	req_finish_if_ready(tq, req);
}

static bool add_iov(struct tcp_queue *tq, const void *base, size_t len)
{
	if (!len)
		return true;
	if (tq->siov_cnt >= TCP_SEND_IOV)
		return false;
	tq->siov[tq->siov_cnt].iov_base = (void *)base;
	tq->siov[tq->siov_cnt].iov_len = len;
	tq->siov_cnt++;
	return true;
}

static uint32_t data_crc(const struct iovec *iov, int cnt)
{
	uint32_t crc = crc32c_init();
	for (int i = 0; i < cnt; i++)
		crc = crc32c_update(crc, iov[i].iov_base, iov[i].iov_len);
	return crc32c_final(crc);
}

/* Fills tr->h2c for the next len bytes of the active R2T; returns the
 * header's length with its digest. */
static uint32_t h2c_header(struct tcp_queue *tq, struct nvmf_req *req, uint32_t len)
{
	struct tcp_req *tr = tcp_req_of(req);
	uint32_t hlen = sizeof(tr->h2c.pdu) + (tq->hdgst ? NVME_TCP_DIGEST_LEN : 0);
	uint32_t pdo = h2c_pdo(tq);
	struct nvme_tcp_data *p = &tr->h2c.pdu;

	memset(p, 0, sizeof(*p));
	p->hdr.type = NVME_TCP_H2C_DATA;
	p->hdr.flags = (uint8_t)((tq->hdgst ? NVME_TCP_F_HDGST : 0) |
				 (tq->ddgst ? NVME_TCP_F_DDGST : 0) |
				 (tr->h2c_off + len == tr->r2t_end ? NVME_TCP_F_DATA_LAST : 0));
	p->hdr.hlen = sizeof(*p);
	p->hdr.pdo = (uint8_t)pdo;
	p->hdr.plen = pdo + len + (tq->ddgst ? NVME_TCP_DIGEST_LEN : 0);
	p->cccid = req->cid;
	p->ttag = tr->ttag;
	p->offset = tr->h2c_off;
	p->length = len;
	if (tq->hdgst)
		tr->h2c.hdgst = crc32c(p, sizeof(*p));
	return hlen;
}

/* Appends the iovecs of one item's PDU; false if they do not fit now. */
static bool build_item(struct tcp_queue *tq, struct tcp_send_item *it)
{
	struct nvmf_req *req = it->req;
	struct tcp_req *tr = tcp_req_of(req);
	struct iovec sl[NVMF_REQ_MAX_IOV];
	unsigned start = tq->siov_cnt;
	int cnt = 0;

	if (it->kind == TCP_ITEM_CMD) {
		if (tr->in_capsule)
			cnt = iov_slice(req->iov, req->iovcnt, 0, req->data_len, sl,
					NVMF_REQ_MAX_IOV);
		INVARIANT(cnt >= 0, "an in-capsule payload longer than its iovecs (tcp_submit checks)");
		if (start + 3u + (unsigned)cnt > TCP_SEND_IOV)
			return false;
		add_iov(tq, &tr->cmd, tr->cmd_hdr_len);
		add_iov(tq, zero_pad, tr->cmd_pad);
		for (int i = 0; i < cnt; i++)
			add_iov(tq, sl[i].iov_base, sl[i].iov_len);
		if (tr->in_capsule && tq->ddgst)
			add_iov(tq, &tr->cmd_ddgst, sizeof(tr->cmd_ddgst));
		return true;
	}

	INVARIANT(!req->sink, "an H2CData whose payload is in a pipe built from memory");
	/* One H2CData PDU of the active R2T, at most MAXH2CDATA. */
	uint32_t len = tr->r2t_end - tr->h2c_off;
	if (len > tq->maxh2cdata)
		len = tq->maxh2cdata;
	cnt = iov_slice(req->iov, req->iovcnt, tr->h2c_off, len, sl, NVMF_REQ_MAX_IOV);
	if (cnt < 0 || start + 3u + (unsigned)cnt > TCP_SEND_IOV)
		return false;
	uint32_t hlen = h2c_header(tq, req, len), pdo = h2c_pdo(tq);
	add_iov(tq, &tr->h2c, hlen);
	add_iov(tq, zero_pad, pdo - hlen);
	for (int i = 0; i < cnt; i++)
		add_iov(tq, sl[i].iov_base, sl[i].iov_len);
	if (tq->ddgst) {
		tr->h2c_ddgst = data_crc(sl, cnt);
		add_iov(tq, &tr->h2c_ddgst, sizeof(tr->h2c_ddgst));
	}
	tr->h2c_off += len;
	return true;
}

static void send_submit(struct tcp_queue *tq)
{
	if (tq->tls) {
		tcp_tls_seal_send(tq);
		return;
	}
	memset(&tq->smsg, 0, sizeof(tq->smsg));
	tq->smsg.msg_iov = tq->siov + tq->siov_first;
	tq->smsg.msg_iovlen = tq->siov_cnt - tq->siov_first;
	reactor_sendmsg(tq->q->r, &tq->send_op, tq->fd, &tq->smsg, MSG_NOSIGNAL);
	tq->send_pending = true;
	tq->ops_in_flight++;
}

/* ---- H2CData out of a pipe ---- */

static void batch_sent(struct tcp_queue *tq);

static void splice_finished(struct reactor_msg *m)
{
	struct tcp_queue *tq = container_of(m, struct tcp_queue, tx_splice_msg);

	tq->ops_in_flight--;
	tq->tx_splicing = false;
	tq->send_pending = false;
	if (tq->conn == TCP_CONN_CLOSING) {
		closing_send_reaped(tq, 1); /* the PDU went whole */
		maybe_quiesced(tq);
		return;
	}
	batch_sent(tq);
}

/* Sends what the socket takes of tx_pipe, then polls for room.  The end
 * is deferred: a completion's owner may submit at once, and a run of
 * splices the socket takes whole would otherwise recurse. */
static void splice_step(struct tcp_queue *tq)
{
	struct pipe_sink *b = &tq->tx_pipe;

	for (;;) {
		size_t held = (size_t)b->prefix_len + b->filled;
		if (!held)
			break;
		uint64_t before = b->nr_spliced;
		ssize_t r = pipe_sink_to_socket(b, tq->fd, held, false);
		tq->nr_tx_spliced_data += b->nr_spliced - before;
		if (r == -EAGAIN) {
			reactor_poll_fd(tq->q->r, &tq->send_op, tq->fd, POLLOUT);
			tq->ops_in_flight++;
			return;
		}
		if (r < 0) {
			tq->tx_splicing = false;
			tq->send_pending = false;
			if (tq->conn == TCP_CONN_CLOSING) {
				closing_send_reaped(tq, -EPIPE); /* cut inside the PDU */
				maybe_quiesced(tq);
				return;
			}
			nvmf_queue_transport_error(tq->q, (int)r, "send failed: %s",
						   strerror((int)-r));
			return;
		}
	}
	tq->tx_splice_msg.fn = splice_finished;
	tq->ops_in_flight++;
	reactor_defer(tq->q->r, &tq->tx_splice_msg);
}

/* Starts sending `it`, an H2CData whose payload is in its request's pipe:
 * true if it went (alone), false if it must go from memory after all (the
 * caller takes its payload out of the pipe). */
static bool splice_start(struct tcp_queue *tq, struct tcp_send_item *it)
{
	struct nvmf_req *req = it->req;
	struct tcp_req *tr = tcp_req_of(req);
	struct pipe_sink *b = &tq->tx_pipe;
	uint8_t pre[PIPE_SINK_PREFIX_MAX];
	uint32_t len = req->data_len, hlen, pdo = h2c_pdo(tq);
	int ret;

	INVARIANT(h2c_from_pipe(tq, req), "an H2CData from a pipe it cannot go from");
	/* Room for the payload's pages and the header's: the caller's pipe
	 * is at most NBD_SPLICE_PIPE_SIZE, a privileged process gets twice
	 * that, anyone else the same size (a short tee falls back). */
	if (!pipe_sink_is_open(b) && pipe_sink_open_counted(b, req->sink->cap * 2u) < 0)
		b->rfd = b->wfd = -1;
	hlen = h2c_header(tq, req, len);
	memcpy(pre, &tr->h2c, hlen);
	memset(pre + hlen, 0, pdo - hlen);
	ret = pipe_sink_is_open(b) ? pipe_sink_set_prefix(b, pre, pdo) : -EBADF;
	if (ret == 0)
		ret = pipe_sink_tee(b, req->sink);
	if (ret < 0) {
		if (pipe_sink_is_open(b) && pipe_sink_empty(b) < 0)
			pipe_sink_close_counted(b);
		b->broken = false;
		return false;
	}
	INVARIANT(it->queued && !it->in_batch, "a send list item not marked queued");
	list_del(&it->link);
	it->queued = false;
	it->in_batch = true;
	tq->siov_cnt = tq->siov_first = 0;
	tq->batch[0] = it;
	tq->batch_cnt = 1;
	tr->h2c_off += len;
	tq->nr_tx_batches++;
	tq->nr_tx_pdus++;
	tq->tx_splicing = true;
	tq->send_pending = true;
	splice_step(tq);
	return true;
}

static void tcp_send_kick(struct tcp_queue *tq)
{
	struct list_node *n;

	if (tq->send_pending || tq->conn != TCP_CONN_LIVE || list_empty(&tq->sendq))
		return;
	tq->siov_cnt = tq->siov_first = 0;
	tq->batch_cnt = 0;
	while ((n = tq->sendq.next) != &tq->sendq) {
		struct tcp_send_item *it = container_of(n, struct tcp_send_item, link);
		if (it->kind == TCP_ITEM_H2C && it->req->sink) {
			/* Alone in its send: the batch before it goes first. */
			if (tq->siov_cnt)
				break;
			if (splice_start(tq, it))
				return;
			if (take_out_of_pipe(tq, it->req) < 0)
				return;
		}
		if (!build_item(tq, it))
			break;
		INVARIANT(it->queued && !it->in_batch, "a send list item not marked queued");
		list_del(&it->link);
		it->queued = false;
		it->in_batch = true;
		tq->batch[tq->batch_cnt++] = it;
		if (tq->batch_cnt == TCP_SEND_IOV)
			break;
	}
	if (!tq->siov_cnt) {
		/* One PDU needs more iovecs than a batch has: the request's
		 * data is too fragmented, which the core never produces. */
		struct tcp_send_item *it = container_of(tq->sendq.next, struct tcp_send_item, link);
		nvmf_queue_transport_error(tq->q, -EINVAL, "CID 0x%04x: data in too many pieces",
					   it->req->cid);
		return;
	}
	tq->nr_tx_batches++;
	tq->nr_tx_pdus += tq->batch_cnt;
	send_submit(tq);
}

static void send_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct tcp_queue *tq = container_of(op, struct tcp_queue, send_op);

	(void)flags;
	tq->ops_in_flight--;
	if (tq->tx_splicing) {
		/* A poll for room: a splice says more than its events.  While
		 * a TermReq waits for this PDU (bounded by term_timer, which
		 * shuts the socket and so ends the wait) the PDU goes on, so
		 * that the TermReq can follow it; else it is cut. */
		if (tq->conn == TCP_CONN_CLOSING && tq->term_deferred && res > 0) {
			if (res & POLLOUT) {
				splice_step(tq);
			} else {
				reactor_timer_arm(tq->q->r, &tq->tx_retry_timer,
						  (uint64_t)TCP_TERM_RETRY_MS * NSEC_PER_MSEC);
				tq->ops_in_flight++;
			}
			return;
		}
		if (tq->conn == TCP_CONN_CLOSING) {
			tq->tx_splicing = false;
			tq->send_pending = false;
			closing_send_reaped(tq, -EPIPE); /* cut inside the PDU */
			maybe_quiesced(tq);
			return;
		}
		if (res < 0) {
			tq->tx_splicing = false;
			tq->send_pending = false;
			nvmf_queue_transport_error(tq->q, res, "send failed: %s", strerror(-res));
			return;
		}
		splice_step(tq);
		return;
	}
	tq->send_pending = false;
	if (tq->conn == TCP_CONN_CLOSING) {
		closing_send_reaped(tq, res);
		maybe_quiesced(tq);
		return;
	}
	if ((res == -EAGAIN || res == -EINTR) && tq->sock_nonblock) {
		/* The socket is O_NONBLOCK (tcp_tx_pipe_setup): a ring that
		 * hands that back instead of polling gets the send again. */
		send_submit(tq);
		return;
	}
	if (res <= 0) {
		nvmf_queue_transport_error(tq->q, res ? res : -EPIPE, "send failed: %s",
					   strerror(res ? -res : EPIPE));
		return;
	}
	if (tq->tls) {
		if (!tcp_tls_sent(tq, (uint32_t)res))
			return;
	} else {
		tq->siov_first += iov_advance(tq->siov + tq->siov_first,
					      tq->siov_cnt - tq->siov_first, (size_t)res);
		if (tq->siov_first < tq->siov_cnt) {
			send_submit(tq); /* short send: the rest, in order */
			return;
		}
	}
	if (tq->conn == TCP_CONN_ICREQ) {
		tcp_recv_arm(tq);
		return;
	}
	batch_sent(tq);
}

static void batch_sent(struct tcp_queue *tq)
{
	/* Whole batch in the socket: release its items, then completions that
	 * waited for their send to be reaped.  A completion's owner may submit
	 * at once, and that submit starts the next batch in tq->batch: the
	 * loop walks its own copy of the requests. */
	struct nvmf_req *done[TCP_SEND_IOV];
	unsigned cnt = tq->batch_cnt;
	uint64_t now = 0;
	tq->batch_cnt = 0;
	for (unsigned i = 0; i < cnt; i++) {
		struct tcp_send_item *it = tq->batch[i];
		struct tcp_req *tr = tcp_req_of(it->req);
		it->in_batch = false;
		done[i] = it->req;
		if (it->kind == TCP_ITEM_H2C && tr->h2c_off < tr->r2t_end && !tr->resp_ready) {
			item_queue(tq, it);
		} else if (!tr->heard && !tr->resp_ready && !tr->h2c_item.queued &&
			   !tr->h2c_item.in_batch) {
			/* All we had for it is in the socket: the target's turn.
			 * Stamped at the reap, not the submit, so that the
			 * send's own time is never counted as the target's; and
			 * not while its data waits to go out (an R2T handled
			 * before this reap), which is our time. */
			if (!now)
				now = reactor_now_ns();
			tr->turn_ns = now;
		}
	}
	for (unsigned i = 0; i < cnt; i++)
		req_finish_if_ready(tq, done[i]);
	tcp_send_kick(tq);
}

static int tcp_submit(struct nvmf_queue *q, struct nvmf_req *req)
{
	struct tcp_queue *tq = tq_of(q);
	struct tcp_req *tr = tcp_req_of(req);
	struct nvme_sqe *sqe = &req->sqe;
	uint32_t hd = tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;

	if (tq->conn != TCP_CONN_LIVE)
		return -ENOTCONN;
	/* A free slot is on no send list and in no send. */
	assert(!tr->cmd_item.queued && !tr->cmd_item.in_batch && !tr->h2c_item.queued &&
	       !tr->h2c_item.in_batch);
	tr->cmd_item.req = tr->h2c_item.req = req;
	tr->cmd_item.kind = TCP_ITEM_CMD;
	tr->h2c_item.kind = TCP_ITEM_H2C;
	tr->h2c_off = tr->r2t_end = tr->c2h_off = 0;
	tr->resp_ready = false;
	tr->turn_ns = 0;
	tr->heard = false;
	/* Fabrics commands may always use the admin queue's 8 KiB capsule. */
	uint32_t icmax = sqe->opcode == NVME_FABRICS_COMMAND ? NVME_TCP_ADMIN_CCSZ :
							       q->in_capsule_max;
	tr->in_capsule = req->host_to_ctrl && req->data_len && req->data_len <= icmax;
	/* A digest is computed over the bytes, and TLS seals them: both need
	 * them in memory, as does data in the capsule. */
	if (req->sink && req->host_to_ctrl &&
	    (!tq->tx_pipe_ok || tq->tls || tq->ddgst || tr->in_capsule) &&
	    unsplice_payload(req) < 0)
		return -EIO; /* before it was accepted: the caller's error */
	if (!req->host_to_ctrl && (tq->tls || tq->ddgst))
		req->sink = NULL;
	if (req->data_len) {
		sqe->dptr.length = req->data_len;
		sqe->dptr.addr = 0;
		sqe->dptr.type = tr->in_capsule ? NVME_SGL_DATA_BLOCK_OFFSET :
						  NVME_SGL_TRANSPORT_DATA_BLOCK;
	} else {
		memset(&sqe->dptr, 0, sizeof(sqe->dptr));
		sqe->dptr.type = NVME_SGL_TRANSPORT_DATA_BLOCK;
	}
	if (tr->in_capsule)
		tr->h2c_off = tr->r2t_end = req->data_len;

	struct nvme_tcp_cmd *p = &tr->cmd.pdu;
	uint32_t hlen = sizeof(*p) + hd;
	uint32_t pdo = 0, dlen = tr->in_capsule ? req->data_len : 0;
	if (dlen)
		pdo = (hlen + tq->cpda_bytes - 1) / tq->cpda_bytes * tq->cpda_bytes;
	p->hdr.type = NVME_TCP_CMD;
	p->hdr.flags = (uint8_t)((tq->hdgst ? NVME_TCP_F_HDGST : 0) |
				 (dlen && tq->ddgst ? NVME_TCP_F_DDGST : 0));
	p->hdr.hlen = sizeof(*p);
	p->hdr.pdo = (uint8_t)pdo;
	p->hdr.plen = (dlen ? pdo + dlen + (tq->ddgst ? NVME_TCP_DIGEST_LEN : 0) : hlen);
	p->sqe = *sqe;
	if (tq->hdgst)
		tr->cmd.hdgst = crc32c(p, sizeof(*p));
	tr->cmd_hdr_len = hlen;
	tr->cmd_pad = dlen ? pdo - hlen : 0;
	if (dlen && tq->ddgst) {
		struct iovec sl[NVMF_REQ_MAX_IOV];
		int cnt = iov_slice(req->iov, req->iovcnt, 0, dlen, sl, NVMF_REQ_MAX_IOV);
		if (cnt < 0)
			return -EINVAL;
		tr->cmd_ddgst = data_crc(sl, cnt);
	} else if (dlen && iov_length(req->iov, req->iovcnt) < dlen) {
		/* Checked here, digest or not: build_item cannot refuse it
		 * later (plen above already counts the data). */
		return -EINVAL;
	}
	item_queue(tq, &tr->cmd_item);
	tcp_send_kick(tq);
	return 0;
}

/* ---- receive loop ---- */

static void recv_done(struct reactor_op *op, int res, uint32_t flags);

void tcp_recv_arm(struct tcp_queue *tq)
{
	if (tq->recv_pending || tq->conn == TCP_CONN_CLOSING)
		return;
	if (tq->tls) {
		/* Ciphertext first: the socket cannot receive into the
		 * request, SSL_read opens large payloads there instead. */
		tcp_tls_recv_arm(tq);
		return;
	}
	if (tcp_rx_splice_wanted(tq)) {
		reactor_poll_fd(tq->q->r, &tq->recv_op, tq->fd, POLLIN);
		tq->rx_poll = true;
		tq->rx_direct = false;
		goto armed;
	}
	if (tq->rx_state == TCP_RX_DATA && tq->rx_data_left >= TCP_DIRECT_MIN && tq->rlen == 0) {
		struct nvmf_req *req = tq->rx_req;
		int cnt = iov_slice(req->iov, req->iovcnt, tcp_req_of(req)->c2h_off,
				    tq->rx_data_left, tq->riov, NVMF_REQ_MAX_IOV);
		if (cnt > 0) {
			/* In a stream, what follows the data up to the next
			 * C2HData header comes in the same read, staged. */
			uint32_t tail = tq->rx_stream_left > tq->rx_data_left ?
						tq->rx_stream_left - tq->rx_data_left : 0;
			if (tail) {
				tq->riov[cnt].iov_base = tq->rbuf;
				tq->riov[cnt++].iov_len = tail < TCP_RBUF_SIZE ? tail : TCP_RBUF_SIZE;
			}
			memset(&tq->rmsg, 0, sizeof(tq->rmsg));
			tq->rmsg.msg_iov = tq->riov;
			tq->rmsg.msg_iovlen = (size_t)cnt;
			reactor_recvmsg(tq->q->r, &tq->recv_op, tq->fd, &tq->rmsg, 0);
			tq->rx_direct = true;
			goto armed;
		}
	}
	tq->rx_direct = false;
	reactor_recv(tq->q->r, &tq->recv_op, tq->fd, tq->rbuf + tq->rlen,
		     tcp_rx_staged_len(tq, TCP_RBUF_SIZE - tq->rlen), 0);
armed:
	tq->recv_pending = true;
	tq->ops_in_flight++;
}

/* The first byte of a TLS alert record (content type 21). */
#define TLS_ALERT 0x15

static void recv_failed(struct tcp_queue *tq, int res)
{
	const char *hint = "";

	/* A port that requires TLS reads a plaintext ICReq as a broken
	 * ClientHello and drops the connection (nvmet resets it). */
	if (tq->conn == TCP_CONN_ICREQ && !tq->tls)
		hint = " before the ICResp: does the port require TLS? (tls = true)";
	else if (tq->conn == TCP_CONN_TLS)
		hint = " during the TLS handshake: does the port do TLS, with this key?";
	if (res == 0)
		nvmf_queue_transport_error(tq->q, -ECONNRESET, "target closed the connection%s",
					   hint);
	else
		nvmf_queue_transport_error(tq->q, res, "receive failed: %s%s", strerror(-res),
					   hint);
}

static void recv_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct tcp_queue *tq = container_of(op, struct tcp_queue, recv_op);
	int ret;

	(void)flags;
	tq->recv_pending = false;
	tq->ops_in_flight--;
	if (tq->conn == TCP_CONN_CLOSING) {
		maybe_quiesced(tq);
		return;
	}
	if (tq->rx_poll) {
		tq->rx_poll = false;
		if (res < 0) {
			recv_failed(tq, res);
			return;
		}
		if (tcp_rx_splice(tq, true) < 0 || tq->conn == TCP_CONN_CLOSING)
			return;
		tcp_recv_arm(tq);
		return;
	}
	if ((res == -EAGAIN || res == -EINTR) && tq->sock_nonblock) {
		tcp_recv_arm(tq); /* as for a send (send_done) */
		return;
	}
	if (res <= 0) {
		recv_failed(tq, res);
		return;
	}
	/* Every PDU of this read arrived by now: neither the completions
	 * run for the first ones nor TLS's record-by-record decryption may
	 * lengthen the target's turn of the later ones (tcp_req_heard). */
	tq->rx_now_ns = reactor_now_ns();
	if (tq->tls) {
		ret = tcp_tls_received(tq, (uint32_t)res);
	} else if (tq->conn == TCP_CONN_ICREQ && tq->rlen + (uint32_t)res >= 2 &&
		   tq->rbuf[0] == TLS_ALERT && tq->rbuf[1] == 3) {
		/* A PDU type of 21 is a TLS record: an alert. */
		nvmf_queue_transport_error(tq->q, -EPROTO,
					   "%s:%s answered the ICReq with a TLS alert: the port "
					   "requires TLS (set tls = true and tls_key_file)",
					   tq->opts.traddr, tq->opts.trsvcid);
		return;
	} else if (tq->rx_direct) {
		uint32_t n = (uint32_t)res, d = n < tq->rx_data_left ? n : tq->rx_data_left;
		ret = tcp_rx_direct_done(tq, d);
		if (ret >= 0 && n > d) {
			tq->rlen = n - d;
			ret = tcp_rx_consume(tq, tq->rbuf, tq->rlen);
			if (ret >= 0)
				tq->rlen = 0;
		}
	} else {
		tq->rlen += (uint32_t)res;
		ret = tcp_rx_consume(tq, tq->rbuf, tq->rlen);
		if (ret >= 0)
			tq->rlen = 0;
	}
	if (ret < 0 || tq->conn == TCP_CONN_CLOSING)
		return;
	/* The payload that follows a header is usually there already. */
	if (tcp_rx_splice_wanted(tq) &&
	    (tcp_rx_splice(tq, false) < 0 || tq->conn == TCP_CONN_CLOSING))
		return;
	tcp_recv_arm(tq);
}

/* ---- connection set-up ---- */

int tcp_ic_done(struct tcp_queue *tq, const struct nvme_tcp_icresp *ic)
{
	uint8_t asked = (uint8_t)((tq->opts.hdr_digest ? NVME_TCP_DIGEST_HDR : 0) |
				  (tq->opts.data_digest ? NVME_TCP_DIGEST_DATA : 0));

	if (ic->pfv != 0)
		return tcp_protocol_error(tq, NVME_TCP_FES_UNSUPPORTED_PARAM, 8,
					  "ICResp with PDU format version %u", ic->pfv);
	if (ic->cpda > 31)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 10,
					  "ICResp with CPDA %u", ic->cpda);
	if (ic->digest != asked)
		return tcp_protocol_error(tq, NVME_TCP_FES_UNSUPPORTED_PARAM, 11,
					  "target answered digests 0x%x to a request for 0x%x "
					  "(header digest %s, data digest %s)",
					  ic->digest, asked, tq->opts.hdr_digest ? "on" : "off",
					  tq->opts.data_digest ? "on" : "off");
	if (ic->maxdata < 4096 || ic->maxdata % 4)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 12,
					  "ICResp with MAXH2CDATA %u", ic->maxdata);
	tq->hdgst = tq->opts.hdr_digest;
	tq->ddgst = tq->opts.data_digest;
	tq->cpda_bytes = ((uint32_t)ic->cpda + 1) * 4;
	tq->maxh2cdata = ic->maxdata;
	tq->conn = TCP_CONN_LIVE;
	tcp_tx_pipe_setup(tq);
	reactor_timer_cancel(&tq->connect_timer);
	log_debug("%s: NVMe/TCP up: hdgst %d ddgst %d cpda %u maxh2cdata %u", tq->q->name,
		  tq->hdgst, tq->ddgst, tq->cpda_bytes, tq->maxh2cdata);
	nvmf_queue_transport_ready(tq->q);
	return 0;
}

void tcp_send_icreq(struct tcp_queue *tq)
{
	struct nvme_tcp_icreq *ic = &tq->icreq;

	memset(ic, 0, sizeof(*ic));
	ic->hdr.type = NVME_TCP_ICREQ;
	ic->hdr.hlen = sizeof(*ic);
	ic->hdr.plen = sizeof(*ic);
	ic->pfv = 0;
	ic->hpda = 0; /* no padding before C2H data: place it where it lands */
	ic->digest = (uint8_t)((tq->opts.hdr_digest ? NVME_TCP_DIGEST_HDR : 0) |
			       (tq->opts.data_digest ? NVME_TCP_DIGEST_DATA : 0));
	ic->maxr2t = 0; /* one R2T per command at a time */
	tq->conn = TCP_CONN_ICREQ;
	tq->siov_cnt = tq->siov_first = 0;
	tq->batch_cnt = 0;
	add_iov(tq, ic, sizeof(*ic));
	send_submit(tq);
}

static void connect_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct tcp_queue *tq = container_of(op, struct tcp_queue, connect_op);

	(void)flags;
	tq->connect_pending = false;
	tq->ops_in_flight--;
	if (tq->conn == TCP_CONN_CLOSING) {
		maybe_quiesced(tq);
		return;
	}
	if (res < 0) {
		nvmf_queue_transport_error(tq->q, res, "cannot connect to %s:%s: %s",
					   tq->opts.traddr, tq->opts.trsvcid, strerror(-res));
		return;
	}
	if (tq->tls)
		tcp_tls_start(tq);
	else
		tcp_send_icreq(tq);
}

static void connect_timeout(struct reactor_timer *t)
{
	struct tcp_queue *tq = container_of(t, struct tcp_queue, connect_timer);

	nvmf_queue_transport_error(tq->q, -ETIMEDOUT, "connecting to %s:%s timed out after %u ms%s",
				   tq->opts.traddr, tq->opts.trsvcid, tq->opts.connect_timeout_ms,
				   tq->conn == TCP_CONN_TLS ? " in the TLS handshake" : "");
}

static int resolve(struct tcp_queue *tq)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai;
	int ret = getaddrinfo(tq->opts.traddr, tq->opts.trsvcid, &hints, &ai);

	/* Numeric only: a name lookup would block the reactor. */
	if (ret) {
		log_err("%s: traddr '%s' trsvcid '%s': %s (numeric IPv4/IPv6 address and "
			"port expected)",
			tq->q->name, tq->opts.traddr, tq->opts.trsvcid, gai_strerror(ret));
		return -EINVAL;
	}
	memcpy(&tq->sa, ai->ai_addr, ai->ai_addrlen);
	tq->salen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int socket_setup(struct tcp_queue *tq)
{
	int one = 1, fd;

	fd = socket(tq->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (tq->opts.tos >= 0) {
		int tos = tq->opts.tos;
		if (tq->sa.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos));
		else
			setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	}
	if (tq->opts.host_iface[0] &&
	    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, tq->opts.host_iface,
		       (socklen_t)strlen(tq->opts.host_iface)) < 0) {
		int err = -errno;
		log_err("%s: host_iface %s: %s", tq->q->name, tq->opts.host_iface, strerror(errno));
		close(fd);
		return err;
	}
	if (tq->opts.host_traddr[0]) {
		struct addrinfo hints = { .ai_family = tq->sa.ss_family, .ai_flags = AI_NUMERICHOST };
		struct addrinfo *ai;
		if (getaddrinfo(tq->opts.host_traddr, NULL, &hints, &ai)) {
			log_err("%s: host_traddr '%s' is not a numeric address of the same family",
				tq->q->name, tq->opts.host_traddr);
			close(fd);
			return -EINVAL;
		}
		int r = bind(fd, ai->ai_addr, ai->ai_addrlen);
		int err = -errno;
		freeaddrinfo(ai);
		if (r < 0) {
			log_err("%s: bind to host_traddr %s: %s", tq->q->name,
				tq->opts.host_traddr, strerror(-err));
			close(fd);
			return err;
		}
	}
	tq->fd = fd;
	return 0;
}

static int tcp_queue_connect(struct nvmf_queue *q)
{
	struct tcp_queue *tq = tq_of(q);
	int ret;

	tcp_rx_reset(tq);
	tq->rlen = 0;
	tq->rx_stream_left = 0;
	tq->rx_poll = tq->rx_direct = false;
	list_init(&tq->sendq);
	ret = resolve(tq);
	if (ret < 0)
		return ret;
	ret = socket_setup(tq);
	if (ret < 0)
		return ret;
	tq->conn = TCP_CONN_CONNECTING;
	reactor_connect(q->r, &tq->connect_op, tq->fd, (struct sockaddr *)&tq->sa, tq->salen);
	tq->connect_pending = true;
	tq->ops_in_flight++;
	reactor_timer_arm(q->r, &tq->connect_timer,
			  (uint64_t)tq->opts.connect_timeout_ms * NSEC_PER_MSEC);
	return 0;
}

static int tcp_queue_init(struct nvmf_queue *q, const struct nvmf_path_opts *opts)
{
	struct tcp_queue *tq = calloc(1, sizeof(*tq));

	if (!tq)
		return -ENOMEM;
	tq->rbuf = malloc(TCP_RBUF_SIZE);
	if (!tq->rbuf) {
		free(tq);
		return -ENOMEM;
	}
	tq->q = q;
	tq->opts = *opts;
	if (!tq->opts.connect_timeout_ms)
		tq->opts.connect_timeout_ms = 10000;
	tq->fd = -1;
	tq->conn = TCP_CONN_IDLE;
	tq->cpda_bytes = 4;
	tq->maxh2cdata = 4096;
	tq->connect_op.fn = connect_done;
	tq->recv_op.fn = recv_done;
	tq->send_op.fn = send_done;
	tq->quiesce_msg.fn = quiesce_run;
	tq->tx_pipe.rfd = tq->tx_pipe.wfd = -1;
	reactor_timer_init(&tq->connect_timer, connect_timeout);
	reactor_timer_init(&tq->term_timer, term_timeout);
	reactor_timer_init(&tq->tx_retry_timer, tx_retry);
	list_init(&tq->sendq);
	tcp_rx_reset(tq);
	if (tcp_tls_init(tq) < 0) {
		free(tq->rbuf);
		free(tq);
		return -ENOMEM;
	}
	q->tp = tq;
	return 0;
}

static void tcp_queue_free(struct nvmf_queue *q)
{
	struct tcp_queue *tq = tq_of(q);

	/* Shows whether large reads land in place (t_tls_bench checks it). */
	log_debug("%s: tcp: %llu PDUs received; read data %llu bytes direct, %llu copied from "
		  "the staging buffer, %llu spliced to a pipe%s",
		  q->name, (unsigned long long)tq->nr_pdus_rx,
		  (unsigned long long)tq->nr_rx_direct_data,
		  (unsigned long long)tq->nr_rx_staged_data,
		  (unsigned long long)tq->nr_rx_spliced_data, tq->tls ? " (TLS)" : "");
	/* How well sends are batched (commands per sendmsg). */
	log_debug("%s: tcp: %llu PDUs sent in %llu batches; write data %llu bytes spliced from "
		  "a pipe",
		  q->name, (unsigned long long)tq->nr_tx_pdus,
		  (unsigned long long)tq->nr_tx_batches,
		  (unsigned long long)tq->nr_tx_spliced_data);
	if (q->nr_completed)
		log_debug("%s: tcp: requests waited %.1f us each on the target (%llu completed)",
			  q->name, (double)q->target_ns / (double)q->nr_completed / 1e3,
			  (unsigned long long)q->nr_completed);
	pipe_sink_close_counted(&tq->tx_pipe);
	reactor_timer_cancel(&tq->connect_timer);
	reactor_timer_cancel(&tq->term_timer);
	reactor_timer_cancel(&tq->tx_retry_timer);
	if (tq->fd >= 0)
		close(tq->fd);
	tcp_tls_free(tq);
	free(tq->rbuf);
	/* The configured TLS PSK rides in the options copy. */
	explicit_bzero(&tq->opts.tls_key, sizeof(tq->opts.tls_key));
	free(tq);
	q->tp = NULL;
}

static const char *item_state(const struct tcp_send_item *it)
{
	return it->queued ? "queued" : it->in_batch ? "in the socket send" : "sent";
}

static void tcp_req_state(struct nvmf_queue *q, struct nvmf_req *req, char *buf, size_t len)
{
	struct tcp_queue *tq = tq_of(q);
	struct tcp_req *tr = tcp_req_of(req);
	int n = snprintf(buf, len, "tcp: command %s", item_state(&tr->cmd_item));

	if (n < 0 || (size_t)n >= len)
		return;
	if (req->host_to_ctrl && req->data_len && !tr->in_capsule)
		n += snprintf(buf + n, len - (size_t)n, ", data %u of %u sent (R2T to %u, H2CData %s)",
			      tr->h2c_off, req->data_len, tr->r2t_end, item_state(&tr->h2c_item));
	else if (!req->host_to_ctrl && req->data_len)
		n += snprintf(buf + n, len - (size_t)n, ", data %u of %u received", tr->c2h_off,
			      req->data_len);
	if (n < 0 || (size_t)n >= len)
		return;
	snprintf(buf + n, len - (size_t)n, ", %s; queue: %s, %llu PDUs received",
		 tr->resp_ready ? "response received, waiting for its send to be reaped" :
				  "no response",
		 tq->send_pending ? "a send in flight" : "no send in flight",
		 (unsigned long long)tq->nr_pdus_rx);
}

const struct nvmf_transport_ops nvmf_tcp_ops = {
	.name = "tcp",
	.req_priv_size = sizeof(struct tcp_req),
	.pipe_writes = true,
	.queue_init = tcp_queue_init,
	.queue_connect = tcp_queue_connect,
	.submit = tcp_submit,
	.queue_shutdown = tcp_queue_shutdown,
	.queue_free = tcp_queue_free,
	.req_state = tcp_req_state,
};
