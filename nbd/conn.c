/* An NBD connection: its socket I/O through the reactor's ring, its
 * request pool, its state machine and how it ends.  The protocol itself
 * (handshake.c, transmit.c) sees a byte parser fed from here and a reply
 * queue drained from here. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/invariant.h"
#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"
#include "nbd/internal.h"

/* No default: -Wswitch names a state added without a name. */
static const char *state_name(enum nbd_conn_state s)
{
	switch (s) {
	case NBD_CONN_NEW: return "new";
	case NBD_CONN_GREETING: return "greeting";
	case NBD_CONN_OPTIONS: return "options";
	case NBD_CONN_TLS: return "tls handshake";
	case NBD_CONN_TRANSMISSION: return "transmission";
	case NBD_CONN_DRAINING: return "draining";
	case NBD_CONN_CLOSING: return "closing";
	case NBD_CONN_CLOSED: return "closed";
	}
	return "?";
}

#define S(x) (1u << NBD_CONN_##x)
static const unsigned legal_next[] = {
	[NBD_CONN_NEW] = S(GREETING) | S(TRANSMISSION) | S(CLOSING),
	[NBD_CONN_GREETING] = S(OPTIONS) | S(DRAINING) | S(CLOSING),
	[NBD_CONN_OPTIONS] = S(TLS) | S(TRANSMISSION) | S(DRAINING) | S(CLOSING),
	[NBD_CONN_TLS] = S(OPTIONS) | S(DRAINING) | S(CLOSING),
	[NBD_CONN_TRANSMISSION] = S(DRAINING) | S(CLOSING),
	[NBD_CONN_DRAINING] = S(CLOSING),
	[NBD_CONN_CLOSING] = S(CLOSED),
	[NBD_CONN_CLOSED] = 0,
};
#undef S

bool nbd_conn_set_state(struct nbd_conn *c, enum nbd_conn_state to)
{
	if (!(legal_next[c->state] & (1u << to))) {
		log_err("nbd %s: illegal state change %s -> %s", c->peer, state_name(c->state),
			state_name(to));
		return false;
	}
	log_debug("nbd %s: %s -> %s", c->peer, state_name(c->state), state_name(to));
	c->state = to;
	return true;
}

static void rx_done(struct reactor_op *op, int res, uint32_t flags);
static void budget_poll(struct reactor_timer *t);
static void housekeep(struct reactor_timer *t);
static void resume_done(struct reactor_op *op, int res, uint32_t flags);
static void tx_done(struct reactor_op *op, int res, uint32_t flags);
static void tx_splice_step(struct nbd_conn *c);
static void splice_sent(struct reactor_msg *m);

static void timer_fired(struct reactor_timer *t)
{
	struct nbd_conn *c = container_of(t, struct nbd_conn, timer);

	if (c->state == NBD_CONN_GREETING || c->state == NBD_CONN_OPTIONS ||
	    c->state == NBD_CONN_TLS)
		nbd_conn_fail(c, -ETIMEDOUT, "handshake not finished within %llu s",
			      (unsigned long long)(NBD_HANDSHAKE_TIMEOUT_NS / NSEC_PER_SEC));
	else if (c->state == NBD_CONN_DRAINING)
		nbd_conn_fail(c, -ETIMEDOUT, "%s not taken by the client within %llu s",
			      c->drain_ns == NBD_DRAIN_TIMEOUT_NS ? "replies" : "the last bytes",
			      (unsigned long long)(c->drain_ns / NSEC_PER_SEC));
}

struct nbd_conn *nbd_conn_alloc(int fd, const char *peer)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->reqs = calloc(NBD_MAX_INFLIGHT, sizeof(*c->reqs));
	c->rx = malloc(NBD_RXBUF_SIZE);
	if (!c->reqs || !c->rx) {
		free(c->reqs);
		free(c->rx);
		free(c);
		return NULL;
	}
	c->fd = fd;
	/* The stage times are only ever read by a debug line: without it, a
	 * request costs no clock reads for them. */
	c->stamps = log_enabled(LOG_LVL_DEBUG);
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	list_init(&c->free);
	list_init(&c->replyq);
	list_init(&c->sending);
	list_init(&c->srv_link);
	for (unsigned i = 0; i < NBD_MAX_INFLIGHT; i++) {
		c->reqs[i].c = c;
		list_add_tail(&c->free, &c->reqs[i].link);
	}
	c->rx_op.fn = rx_done;
	c->tx_op.fn = tx_done;
	c->resume_op.fn = resume_done;
	reactor_timer_init(&c->timer, timer_fired);
	reactor_timer_init(&c->poll_timer, budget_poll);
	reactor_timer_init(&c->house_timer, housekeep);
	c->buf_cap = membudget_conn_cap(membudget_global(), NBD_MAX_REQ_BUF);
	c->want = RX_NONE;
	return c;
}

static void budget_wait_end(struct nbd_conn *c)
{
	if (!c->budget_wait)
		return;
	c->budget_wait = false;
	membudget_wait_end(membudget_global());
	reactor_timer_cancel(&c->poll_timer);
}

static void buf_drop(struct nbd_conn *c, struct nbd_req *q)
{
	if (!q->buf)
		return;
	INVARIANT(!(c->rx_busy && c->rx_direct && c->cur == q),
		  "NBD buffer freed under the receive that fills it");
	free(q->buf);
	q->buf = NULL;
	membudget_give(membudget_global(), q->cap);
	c->buf_bytes -= q->cap;
	q->cap = 0;
}

static void conn_release(struct nbd_conn *c)
{
	if (c->nr_rx_reqs && !c->tls) /* TLS records are received elsewhere */
		log_debug("nbd %s: %llu requests in %llu receives, %llu replies in %llu send batches",
			  c->peer, (unsigned long long)c->nr_rx_reqs,
			  (unsigned long long)c->nr_rx_calls,
			  (unsigned long long)c->nr_tx_replies,
			  (unsigned long long)c->nr_tx_calls);
	nbd_stage_log(c);
	budget_wait_end(c);
	reactor_timer_cancel(&c->house_timer);
	nbd_tls_conn_free(c);
	nbd_splice_free_all(c);
	for (unsigned i = 0; i < NBD_MAX_INFLIGHT; i++)
		buf_drop(c, &c->reqs[i]);
	free(c->reqs);
	free(c->rx);
	free(c->hs);
	free(c);
}

void nbd_conn_free_unstarted(struct nbd_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	conn_release(c);
}

void nbd_conn_run(struct nbd_conn *c)
{
	if (c->kernel) {
		nbd_conn_set_state(c, NBD_CONN_TRANSMISSION);
		c->want = RX_REQ_HDR;
		nbd_conn_rx_process(c);
		return;
	}
	nbd_hs_start(c);
	nbd_conn_rx_process(c);
}

/* ---- receive ---- */

/* True when plaintext came at once (TLS had it buffered): parse on. */
static bool rx_arm(struct nbd_conn *c)
{
	if (c->tls)
		return nbd_tls_rx_arm(c);
	if (c->rx_busy || c->state >= NBD_CONN_DRAINING)
		return false;
	if (c->want == RX_WRITE_DATA && c->cur->sink && c->rx_head == c->rx_tail) {
		/* Its payload is spliced when the socket has some. */
		c->rx_direct = false;
		c->rx_poll = true;
		c->nr_wr_polls++;
		reactor_poll_fd(c->r, &c->rx_op, c->fd, POLLIN);
	} else if (c->want == RX_WRITE_DATA && c->rx_head == c->rx_tail &&
	    c->cur->length - c->cur_got >= 4096) {
		/* A large payload goes straight into its buffer. */
		c->rx_direct = true;
		reactor_recv(c->r, &c->rx_op, c->fd, c->cur->buf + c->cur_got,
			     c->cur->length - c->cur_got, 0);
	} else {
		size_t room;
		nbd_rx_compact(c);
		c->rx_direct = false;
		room = NBD_RXBUF_SIZE - c->rx_tail;
		if (c->rx_hdr_only && c->want == RX_REQ_HDR) {
			size_t hdr = nbd_req_hdr_size(c), have = c->rx_tail - c->rx_head;
			if (have < hdr && hdr - have < room)
				room = hdr - have;
		}
		reactor_recv(c->r, &c->rx_op, c->fd, c->rx + c->rx_tail, room, 0);
	}
	c->rx_busy = true;
	return false;
}

/* Makes room for need contiguous bytes at rx_head; false if it must wait
 * for the receive in flight first. */
static bool rx_make_room(struct nbd_conn *c, size_t need)
{
	if (c->rx_head + need <= NBD_RXBUF_SIZE)
		return true;
	if (c->rx_busy)
		return false;
	memmove(c->rx, c->rx + c->rx_head, c->rx_tail - c->rx_head);
	c->rx_tail -= c->rx_head;
	c->rx_head = 0;
	return true;
}

static void rx_eof(struct nbd_conn *c)
{
	switch (c->state) {
	case NBD_CONN_GREETING:
	case NBD_CONN_OPTIONS:
		nbd_conn_fail(c, -ECONNRESET, "client hung up during the handshake");
		break;
	case NBD_CONN_TLS:
		nbd_conn_fail(c, -ECONNRESET, "client hung up during the TLS handshake");
		break;
	default:
		if (c->want == RX_REQ_HDR && c->rx_head == c->rx_tail)
			nbd_conn_fail(c, -ECONNRESET, "client hung up without NBD_CMD_DISC");
		else
			nbd_conn_fail(c, -ECONNRESET, "client hung up in the middle of a message");
	}
}

static void rx_payload_whole(struct nbd_conn *c)
{
	struct nbd_req *q = c->cur;

	c->cur = NULL;
	c->want = RX_REQ_HDR;
	nbd_tx_payload_done(c, q);
}

/* The stall rule's clock moves only with NBD_STALL_MIN_BYTES of progress. */
static void progress(uint64_t *stamp, uint64_t *window, size_t bytes)
{
	*window += bytes;
	if (*window >= NBD_STALL_MIN_BYTES) {
		*stamp = reactor_now_ns();
		*window = 0;
	}
}

static void rx_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct nbd_conn *c = container_of(op, struct nbd_conn, rx_op);
	(void)flags;

	bool was_poll = c->rx_poll;

	/* Only a payload's progress is timed (housekeep's stall rule). */
	if (res > 0 && !c->kernel && c->want == RX_WRITE_DATA)
		progress(&c->rx_progress_ns, &c->rx_window, (size_t)res);
	c->rx_busy = false;
	c->rx_poll = false;
	if (c->state >= NBD_CONN_DRAINING) {
		/* The payload that drop_unstarted left to this receive. */
		if (c->cur) {
			c->rx_direct = false;
			nbd_req_put(c, c->cur);
			c->cur = NULL;
		}
		nbd_conn_maybe_finish(c);
		return;
	}
	if (was_poll) {
		int ret;
		if (res < 0) {
			nbd_conn_fail(c, res, "receive failed: %s", strerror(-res));
			return;
		}
		/* The parser may have moved on while the poll was out. */
		if (c->want == RX_WRITE_DATA && c->cur->sink) {
			ret = nbd_splice_rx(c, true);
			if (ret < 0)
				return;
			if (ret == 1) {
				rx_arm(c); /* the socket is empty: poll again */
				return;
			}
			if (c->cur_got == c->cur->length)
				rx_payload_whole(c);
		}
		nbd_conn_rx_process(c);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		if (c->tls)
			nbd_tls_rx_done(c, 0);
		else if (rx_arm(c))
			nbd_conn_rx_process(c);
		return;
	}
	if (res < 0) {
		nbd_conn_fail(c, res, "receive failed: %s", strerror(-res));
		return;
	}
	if (res == 0) {
		rx_eof(c);
		return;
	}
	if (c->tls) {
		nbd_tls_rx_done(c, (size_t)res);
		return;
	}
	if (c->rx_direct) {
		c->rx_direct = false;
		c->cur_got += (size_t)res;
		if (c->cur_got == c->cur->length) {
			struct nbd_req *q = c->cur;
			c->cur = NULL;
			c->want = RX_REQ_HDR;
			nbd_tx_payload_done(c, q);
		}
	} else {
		c->rx_tail += (size_t)res;
		c->nr_rx_calls += c->state == NBD_CONN_TRANSMISSION;
	}
	nbd_conn_rx_process(c);
}

static size_t need_bytes(struct nbd_conn *c)
{
	switch (c->want) {
	case RX_CLIENT_FLAGS: return 4;
	case RX_OPT_HDR: return sizeof(struct nbd_opt_hdr);
	case RX_OPT_DATA: return c->opt_len;
	case RX_REQ_HDR: return nbd_req_hdr_size(c);
	default: return 0;
	}
}

/* Parses what has been received, as far as the state allows, then asks
 * for more.  Parsing pauses (no receive armed) while the request pool or
 * the buffer budget is exhausted, and during option haggling while the
 * previous option's reply is still being sent. */
static void resume_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct nbd_conn *c = container_of(op, struct nbd_conn, resume_op);
	(void)res;
	(void)flags;

	c->resume_busy = false;
	if (c->state >= NBD_CONN_DRAINING)
		nbd_conn_maybe_finish(c);
	else
		nbd_conn_rx_process(c);
}

void nbd_conn_rx_process(struct nbd_conn *c)
{
	unsigned burst = 0;

	if (c->resume_busy)
		return; /* resume_done picks up from here */
	for (;;) {
		size_t avail, need;
		const uint8_t *p;
		int ret = 0;

		if (c->state >= NBD_CONN_DRAINING || c->want == RX_NONE)
			return;
		if (c->pending) {
			nbd_tx_resume_pending(c);
			if (c->pending)
				return;
			continue;
		}
		avail = c->rx_tail - c->rx_head;
		if (c->want == RX_WRITE_DATA) {
			struct nbd_req *q = c->cur;
			size_t n = q->length - c->cur_got;
			if (n > avail)
				n = avail;
			if (q->sink && n) {
				/* What came in with the header: into the pipe. */
				size_t got = c->cur_got;
				ret = nbd_splice_rx_put(c, c->rx + c->rx_head, n);
				if (ret < 0)
					return;
				n -= c->cur_got - got;
			}
			if (q->sink && c->cur_got < q->length && !c->rx_busy) {
				/* The rest is usually in the socket already (and
				 * no receive or poll of ours is reading it). */
				if (nbd_splice_rx(c, false) < 0)
					return;
			}
			memcpy(q->buf + c->cur_got, c->rx + c->rx_head, n);
			c->rx_head += n;
			c->cur_got += n;
			if (c->cur_got == q->length) {
				c->cur = NULL;
				c->want = RX_REQ_HDR;
				nbd_tx_payload_done(c, q);
				continue;
			}
			if (rx_arm(c))
				continue;
			return;
		}
		if (c->want == RX_SKIP) {
			size_t n = c->skip_left < avail ? (size_t)c->skip_left : avail;
			c->rx_head += n;
			c->skip_left -= n;
			if (c->skip_left) {
				if (rx_arm(c))
					continue;
				return;
			}
			if (c->state == NBD_CONN_OPTIONS) {
				c->want = RX_OPT_HDR;
				nbd_hs_opt_too_big(c);
			} else {
				struct nbd_req *q = c->cur;
				c->cur = NULL;
				c->want = RX_REQ_HDR;
				nbd_tx_payload_done(c, q);
			}
			continue;
		}
		if (c->want == RX_OPT_HDR && (c->hs_len || c->tx_busy))
			return; /* tx_done resumes */
		if (c->want == RX_REQ_HDR && list_empty(&c->free))
			return; /* a reply sent resumes */
		need = need_bytes(c);
		if (avail < need) {
			if (rx_make_room(c, need) && rx_arm(c))
				continue;
			return;
		}
		p = c->rx + c->rx_head;
		c->rx_head += need;
		switch (c->want) {
		case RX_CLIENT_FLAGS: ret = nbd_hs_client_flags(c, p); break;
		case RX_OPT_HDR: ret = nbd_hs_opt_hdr(c, p); break;
		case RX_OPT_DATA: ret = nbd_hs_opt_data(c, p); break;
		case RX_REQ_HDR:
			c->nr_rx_reqs++;
			ret = nbd_tx_request(c, p);
			if (ret == 0 && ++burst == NBD_RX_BURST) {
				/* A burst of requests from one client: go back to
				 * the ring (replies start to flow, other
				 * connections get their turn), then go on. */
				reactor_nop(c->r, &c->resume_op);
				c->resume_busy = true;
				return;
			}
			break;
		default: break;
		}
		if (ret < 0)
			return;
	}
}

/* ---- send ---- */

int nbd_conn_hs_put(struct nbd_conn *c, const void *p, size_t n)
{
	if (c->hs_in_tx) {
		/* The ring is reading hs: parsing waits for it, so this is a bug. */
		log_err("nbd %s: handshake reply while the previous one is being sent", c->peer);
		return -EBUSY;
	}
	if (c->hs_len + n > c->hs_cap) {
		size_t cap = c->hs_cap ? c->hs_cap : 256;
		while (cap < c->hs_len + n)
			cap *= 2;
		uint8_t *nb = realloc(c->hs, cap);
		if (!nb)
			return -ENOMEM;
		c->hs = nb;
		c->hs_cap = cap;
	}
	memcpy(c->hs + c->hs_len, p, n);
	c->hs_len += n;
	return 0;
}

static void tx_submit(struct nbd_conn *c)
{
	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.msg_iov = c->txv + c->txv_first;
	c->msg.msg_iovlen = c->txv_cnt - c->txv_first;
	reactor_sendmsg(c->r, &c->tx_op, c->fd, &c->msg, MSG_NOSIGNAL);
	c->tx_busy = true;
	if (!c->tx_progress_ns) {
		c->tx_progress_ns = reactor_now_ns();
		c->tx_window = 0;
	}
}

void nbd_conn_tx_kick(struct nbd_conn *c)
{
	unsigned n = 0;
	struct list_node *ln;

	if (c->tx_busy || c->state >= NBD_CONN_CLOSING)
		return;
	if (c->hs_len) {
		c->txv[n].iov_base = c->hs;
		c->txv[n++].iov_len = c->hs_len;
		c->hs_in_tx = c->hs_len;
	}
	size_t bytes = 0;
	/* Many small replies share a sendmsg; big ones go a few at a time, so
	 * that the client gets data while the next batch is prepared. */
	while (n + 2 <= sizeof(c->txv) / sizeof(c->txv[0]) && bytes < NBD_TX_BATCH_BYTES &&
	       (ln = list_pop(&c->replyq))) {
		struct nbd_req *q = container_of(ln, struct nbd_req, link);
		if (q->spliced) {
			/* Its pipe goes out alone, after what is before it. */
			if (n) {
				list_add_head(&c->replyq, &q->link);
				break;
			}
			list_add_tail(&c->sending, &q->link);
			nbd_stage_mark(c, q, NBD_STAGE_SEND);
			c->nr_tx_replies++;
			c->nr_tx_calls++; /* a batch of its own */
			c->tx_splice = q;
			c->splice_left = (size_t)q->sink->prefix_len + q->sink->filled;
			if (!c->tx_progress_ns) {
				c->tx_progress_ns = reactor_now_ns();
				c->tx_window = 0;
			}
			tx_splice_step(c);
			return;
		}
		bytes += q->hdr_len + q->data_len;
		c->nr_tx_replies++;
		c->txv[n].iov_base = q->hdr;
		c->txv[n++].iov_len = q->hdr_len;
		if (q->data_len) {
			c->txv[n].iov_base = q->buf;
			c->txv[n++].iov_len = q->data_len;
		}
		nbd_stage_mark(c, q, NBD_STAGE_SEND);
		list_add_tail(&c->sending, &q->link);
	}
	if (c->tls) {
		int m = nbd_tls_seal(c, n);
		if (m < 0)
			return;
		n = (unsigned)m;
	}
	if (!n) {
		nbd_conn_maybe_finish(c);
		return;
	}
	c->txv_first = 0;
	c->txv_cnt = n;
	c->nr_tx_calls += !c->hs_in_tx;
	tx_submit(c);
}

static void kick_now(struct reactor_msg *m)
{
	struct nbd_conn *c = container_of(m, struct nbd_conn, kick_msg);

	c->kick_queued = false;
	nbd_conn_tx_kick(c);
}

void nbd_conn_tx_kick_later(struct nbd_conn *c)
{
	/* After this batch of completions, so that its replies share one
	 * sendmsg.  Queued before any finish (which needs the reply queue
	 * empty), so c is still alive when it runs. */
	if (c->kick_queued || c->tx_busy)
		return;
	c->kick_queued = true;
	c->kick_msg.fn = kick_now;
	reactor_defer(c->r, &c->kick_msg);
}

/* sent: the replies went out whole (else the connection failed). */
static void release_sending(struct nbd_conn *c, bool sent)
{
	struct list_node *ln;
	uint64_t now = sent && c->stamps ? reactor_now_ns() : 0;

	while ((ln = list_pop(&c->sending))) {
		struct nbd_req *q = container_of(ln, struct nbd_req, link);
		if (sent && q->loss_upto > c->loss_sent)
			c->loss_sent = q->loss_upto;
		if (sent && !q->err && (q->type == NBD_CMD_READ || q->type == NBD_CMD_WRITE))
			nbd_stage_add(&c->stages[q->type == NBD_CMD_WRITE], q->t, now);
		nbd_req_put(c, q);
	}
	/* Only what this send carried: under TLS a send of TLS's own words
	 * (a key update's answer) carries none of hs, and a reply put
	 * meanwhile is still to go. */
	if (!sent || c->hs_in_tx >= c->hs_len) {
		c->hs_len = 0;
	} else if (c->hs_in_tx) {
		memmove(c->hs, c->hs + c->hs_in_tx, c->hs_len - c->hs_in_tx);
		c->hs_len -= c->hs_in_tx;
	}
	c->hs_in_tx = 0;
}

/* The replies in `sending` went out whole. */
static void tx_finished(struct nbd_conn *c)
{
	release_sending(c, true);
	c->tx_progress_ns = 0;
	if (c->tls_starting) {
		/* The STARTTLS ACK went out in plaintext: from here on, TLS. */
		c->tls_starting = false;
		nbd_tls_begin(c);
		return;
	}
	nbd_conn_tx_kick(c);
	nbd_conn_rx_process(c);
	nbd_conn_maybe_finish(c);
}

/* Sends what the socket takes of the spliced reply, then waits for room
 * (a poll in tx_op) or moves on. */
static void tx_splice_step(struct nbd_conn *c)
{
	struct nbd_req *q = c->tx_splice;

	while (c->splice_left) {
		ssize_t r = pipe_sink_to_socket(q->sink, c->fd, c->splice_left,
						!list_empty(&c->replyq));
		if (r == -EAGAIN) {
			reactor_poll_fd(c->r, &c->tx_op, c->fd, POLLOUT);
			c->tx_busy = true;
			return;
		}
		if (r < 0) {
			/* What is left in the pipe is not worth reading out. */
			q->sink->broken = true;
			c->tx_splice = NULL;
			release_sending(c, false);
			nbd_conn_fail(c, (int)r, "send failed: %s", strerror((int)-r));
			return;
		}
		c->splice_left -= (size_t)r;
		progress(&c->tx_progress_ns, &c->tx_window, (size_t)r);
	}
	/* Out whole.  Finished from the reactor's deferred queue, not from
	 * here: a run of spliced replies that the socket takes at once is
	 * then a loop of deferred steps, not a recursion through the kick,
	 * 128 replies deep on a 256 KiB stack.  Busy meanwhile, so that no
	 * other send starts and the connection is not freed under it. */
	c->tx_busy = true;
	c->splice_msg.fn = splice_sent;
	reactor_defer(c->r, &c->splice_msg);
}

static void splice_sent(struct reactor_msg *m)
{
	struct nbd_conn *c = container_of(m, struct nbd_conn, splice_msg);

	c->tx_busy = false;
	c->tx_splice = NULL;
	if (c->state >= NBD_CONN_CLOSING) {
		release_sending(c, true);
		nbd_conn_maybe_finish(c);
		return;
	}
	tx_finished(c);
}

static void tx_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct nbd_conn *c = container_of(op, struct nbd_conn, tx_op);
	(void)flags;

	c->tx_busy = false;
	if (c->state >= NBD_CONN_CLOSING) {
		c->tx_splice = NULL;
		release_sending(c, false); /* whole or not: unknown, so not */
		nbd_conn_maybe_finish(c);
		return;
	}
	if (c->tx_splice) {
		/* A poll for room: its events say nothing a splice will not. */
		if (res < 0) {
			c->tx_splice = NULL;
			release_sending(c, false);
			nbd_conn_fail(c, res, "send failed: %s", strerror(-res));
			return;
		}
		tx_splice_step(c);
		return;
	}
	if (res == -EINTR || res == -EAGAIN) {
		tx_submit(c);
		return;
	}
	if (res <= 0) {
		release_sending(c, false);
		nbd_conn_fail(c, res ? res : -EPIPE, "send failed: %s",
			      res ? strerror(-res) : "connection closed");
		return;
	}
	progress(&c->tx_progress_ns, &c->tx_window, (size_t)res);
	c->txv_first += iov_advance(c->txv + c->txv_first, c->txv_cnt - c->txv_first,
				    (size_t)res);
	if (c->txv_first < c->txv_cnt) {
		tx_submit(c);
		return;
	}
	if (c->tls) {
		/* The batch's plaintext stays held until all of it is sealed. */
		int m = nbd_tls_seal_more(c);
		if (m < 0)
			return;
		if (m) {
			c->txv_first = 0;
			c->txv_cnt = 1;
			tx_submit(c);
			return;
		}
	}
	tx_finished(c);
}

/* ---- requests and buffers ---- */

void nbd_req_put(struct nbd_conn *c, struct nbd_req *q)
{
	/* A slot is on one list at a time: free, replyq or sending; the
	 * putter holds it on none (a second put finds it on the free list). */
	INVARIANT(q->c == c, "put of an NBD slot to another connection");
	INVARIANT(list_empty(&q->link), "put of an NBD slot already on a list (double put)");
	q->err = 0;
	q->msg = NULL;
	q->err_at_offset = false;
	q->loss_upto = 0;
	nbd_splice_release(c, q);
	q->spliced = false;
	/* Someone waits for buffers: this one goes back to the budget now
	 * rather than stay warm here. */
	if (membudget_waiters(membudget_global()) || c->state >= NBD_CONN_CLOSING)
		buf_drop(c, q);
	/* LIFO: the slots in use stay few and keep their warm buffers. */
	list_add_head(&c->free, &q->link);
}

static bool buffers_will_return(const struct nbd_conn *c)
{
	return c->inflight || !list_empty(&c->replyq) || !list_empty(&c->sending);
}

static void drop_cached(struct nbd_conn *c)
{
	for (struct list_node *ln = c->free.next; ln != &c->free; ln = ln->next)
		buf_drop(c, container_of(ln, struct nbd_req, link));
}

static void budget_poll(struct reactor_timer *t)
{
	struct nbd_conn *c = container_of(t, struct nbd_conn, poll_timer);

	if (c->state < NBD_CONN_DRAINING && c->pending)
		nbd_conn_rx_process(c);
}

/* While the connection holds buffers: an idle one gives its cached
 * buffers back (they count in the budget), and one whose client has taken
 * less than NBD_STALL_MIN_BYTES of its replies in the stall time is cut
 * off when others wait for buffers: a client that does not read must not
 * keep the budget from the polite ones for longer than that. */
static void housekeep(struct reactor_timer *t)
{
	struct nbd_conn *c = container_of(t, struct nbd_conn, house_timer);
	struct membudget *b = membudget_global();

	if (c->state != NBD_CONN_TRANSMISSION)
		return;
	/* Others: this connection may be a waiter itself. */
	if (!c->kernel && c->tx_busy && c->tx_progress_ns &&
	    membudget_waiters(b) > (c->budget_wait ? 1u : 0u) &&
	    reactor_now_ns() - c->tx_progress_ns >= b->stall_ns) {
		nbd_conn_fail(c, -ETIMEDOUT,
			      "client took %llu reply bytes in %llu s (the least is %u KiB) while others "
			      "wait for buffers (holds %zu KiB of the %llu KiB budget)",
			      (unsigned long long)c->tx_window,
			      (unsigned long long)(b->stall_ns / NSEC_PER_SEC), NBD_STALL_MIN_BYTES >> 10,
			      c->buf_bytes >> 10, (unsigned long long)(b->limit >> 10));
		return;
	}
	/* The same for a write whose payload stopped or trickles: its whole
	 * buffer was taken at its header (buf_used_ns). */
	uint64_t rx_last = c->rx_progress_ns > c->buf_used_ns ? c->rx_progress_ns : c->buf_used_ns;
	if (!c->kernel && c->cur && c->want == RX_WRITE_DATA &&
	    membudget_waiters(b) > (c->budget_wait ? 1u : 0u) &&
	    reactor_now_ns() - rx_last >= b->stall_ns) {
		nbd_conn_fail(c, -ETIMEDOUT,
			      "client sent %llu bytes of a %llu-byte write's payload in %llu s (the least "
			      "is %u KiB) while others wait for buffers (holds %zu KiB of the %llu KiB budget)",
			      (unsigned long long)c->rx_window, (unsigned long long)c->cur->length,
			      (unsigned long long)(b->stall_ns / NSEC_PER_SEC), NBD_STALL_MIN_BYTES >> 10,
			      c->buf_bytes >> 10, (unsigned long long)(b->limit >> 10));
		return;
	}
	/* Quiet for a whole period, not for an instant (a client drains its
	 * queue before each flush): buffers freed and taken back at once are
	 * pages the kernel must find again, on the data path. */
	uint64_t quiet_ns = reactor_now_ns() - c->buf_used_ns;
	if (quiet_ns >= NBD_HOUSEKEEP_NS && !buffers_will_return(c) && !c->pending && !c->cur) {
		size_t held = c->buf_bytes;

		drop_cached(c);
		nbd_tls_idle(c);
		/* t_reclaim_nofault checks the rule by this line. */
		if (held)
			log_debug("nbd %s: no request for %llu ms: %zu KiB of cached buffers back "
				  "to the budget", c->peer,
				  (unsigned long long)(quiet_ns / NSEC_PER_MSEC), held >> 10);
	}
	if (c->buf_bytes)
		reactor_timer_arm(c->r, &c->house_timer, NBD_HOUSEKEEP_NS);
}

int nbd_conn_ensure_buf(struct nbd_conn *c, struct nbd_req *q, size_t len)
{
	struct membudget *b = membudget_global();
	size_t want;

	c->buf_used_ns = reactor_now_ns();
	/* Asked first: a warm buffer taken from the cache would send the
	 * request to wait too, past the share (review). */
	bool over = vol_path_wait_over(c->e->vol, len);
	if (q->cap >= len && !over) {
		budget_wait_end(c);
		return 0;
	}
	/* Rounded up so that buffers are reused across nearby sizes. */
	want = len <= 4096 ? 4096 : (len + 65535) & ~(size_t)65535;
	buf_drop(c, q);
	if (over || vol_path_wait_over(c->e->vol, want)) {
		/* The volume's target is down and what waits for it holds its
		 * share: this request would only wait too.  Not a waiter for
		 * the budget (nobody need yield to it): it looks again now and
		 * then, and the clients of other targets get the buffers. */
		budget_wait_end(c);
		drop_cached(c);
		if (!c->path_wait) {
			c->path_wait = true;
			log_debug("nbd %s: I/O of %s waiting for a path holds %llu KiB of the buffer "
				  "budget: no more requests read until some is sent",
				  c->peer, c->e->vol->name,
				  (unsigned long long)(vol_path_wait_bytes(c->e->vol) >> 10));
		}
		reactor_timer_arm(c->r, &c->poll_timer, NBD_PATH_WAIT_POLL_NS);
		return -EAGAIN;
	}
	c->path_wait = false;
	if (c->buf_bytes + want > c->buf_cap) {
		drop_cached(c);
		/* Over this connection's share: its own replies make room. */
		if (c->buf_bytes + want > c->buf_cap && buffers_will_return(c))
			return -EAGAIN;
	}
	if (c->kernel) {
		/* The host's own block device never waits behind socket
		 * clients (a reclaim path may be writing through it): its
		 * buffers are charged, and the others yield to it.  Bounded
		 * by its per-connection share and the kernel's queue depth. */
		if (!membudget_take(b, want))
			membudget_charge(b, want);
	} else if (buffers_will_return(c) &&
		   membudget_waiters(b) > (c->budget_wait ? 1u : 0u)) {
		/* Others wait for the budget: a connection that holds buffers
		 * stops reading and lets them go first; its replies resume it. */
		return -EAGAIN;
	} else if (!membudget_take(b, want)) {
		drop_cached(c);
		if (!membudget_take(b, want)) {
			if (!c->budget_wait) {
				c->budget_wait = true;
				membudget_wait_begin(b);
				log_debug("nbd %s: waiting for %zu KiB of the buffer budget", c->peer,
					  want >> 10);
			}
			/* Others' buffers come back on other threads: look again
			 * soon (and at once when a reply of ours is sent). */
			reactor_timer_arm(c->r, &c->poll_timer, NBD_BUDGET_POLL_NS);
			return -EAGAIN;
		}
	}
	budget_wait_end(c);
	q->buf = malloc(want);
	if (!q->buf) {
		membudget_give(b, want);
		return -ENOMEM;
	}
	q->cap = want;
	c->buf_bytes += want;
	if (!c->house_timer.armed)
		reactor_timer_arm(c->r, &c->house_timer, NBD_HOUSEKEEP_NS);
	return 0;
}

/* ---- the end of a connection ---- */

static void drop_unstarted(struct nbd_conn *c)
{
	struct list_node *ln;

	if (c->pending) {
		nbd_req_put(c, c->pending);
		c->pending = NULL;
	}
	/* A receive still in flight lands in cur's own buffer: cur goes
	 * back when that receive ends (rx_done), not freed under it. */
	if (c->cur && !(c->rx_busy && c->rx_direct)) {
		nbd_req_put(c, c->cur);
		c->cur = NULL;
	}
	c->want = RX_NONE;
	budget_wait_end(c);
	if (c->state >= NBD_CONN_CLOSING)
		while ((ln = list_pop(&c->replyq)))
			nbd_req_put(c, container_of(ln, struct nbd_req, link));
}

static void finish_now(struct reactor_msg *m)
{
	struct nbd_conn *c = container_of(m, struct nbd_conn, fin_msg);
	void (*closed)(void *, int) = c->closed;
	void *arg = c->closed_arg;
	int err = c->close_err;

	/* Losses this client was not told of by a reply it was sent whole
	 * (it may reconnect and resend its flush): the next session hears. */
	if (c->loss_cursor && c->e && c->e->vol)
		vol_loss_session_end(c->e->vol, c->loss_sent);
	nbd_conn_set_state(c, NBD_CONN_CLOSED);
	reactor_timer_cancel(&c->timer);
	reactor_timer_cancel(&c->poll_timer);
	reactor_timer_cancel(&c->house_timer);
	close(c->fd);
	c->fd = -1;
	nbd_tls_conn_closing(c);
	if (closed)
		closed(arg, err);
	conn_release(c);
}

/* The end runs from the reactor's deferred list, never inside a callback
 * chain that still holds c. */
static void finish(struct nbd_conn *c)
{
	if (c->fin_queued)
		return;
	c->fin_queued = true;
	c->fin_msg.fn = finish_now;
	reactor_defer(c->r, &c->fin_msg);
}

void nbd_conn_maybe_finish(struct nbd_conn *c)
{
	if (c->state == NBD_CONN_DRAINING) {
		if (c->inflight || !list_empty(&c->replyq) || c->tx_busy || c->hs_len)
			return;
		nbd_conn_set_state(c, NBD_CONN_CLOSING);
		reactor_timer_cancel(&c->timer);
		shutdown(c->fd, SHUT_RDWR);
	}
	if (c->state == NBD_CONN_CLOSING && !c->inflight && !c->rx_busy && !c->tx_busy &&
	    !c->resume_busy)
		finish(c);
}

void nbd_conn_fail(struct nbd_conn *c, int err, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	if (c->state >= NBD_CONN_CLOSING)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* Before transmission the peer is anyone who can connect: what it
	 * does wrong is logged within the rate limit (a client that got
	 * an export is not limited). */
	if (c->state < NBD_CONN_TRANSMISSION && (err == -ECONNRESET || err == -ESHUTDOWN))
		log_rl(NOTICE, "nbd %s: closing: %s", c->peer, why);
	else if (c->state < NBD_CONN_TRANSMISSION)
		log_rl(WARN, "nbd %s: closing: %s", c->peer, why);
	else if (err == -ECONNRESET || err == -ESHUTDOWN)
		log_notice("nbd %s: closing: %s", c->peer, why);
	else
		log_warn("nbd %s: closing: %s", c->peer, why);
	c->close_err = err;
	nbd_conn_set_state(c, NBD_CONN_CLOSING);
	drop_unstarted(c);
	reactor_timer_cancel(&c->timer);
	/* Wakes the receive (and a stuck send) in flight on the ring. */
	shutdown(c->fd, SHUT_RDWR);
	nbd_conn_maybe_finish(c);
}

static void drain_begin(struct nbd_conn *c, int err, uint64_t ns)
{
	c->close_err = err;
	nbd_conn_set_state(c, NBD_CONN_DRAINING);
	drop_unstarted(c);
	c->drain_ns = ns;
	reactor_timer_arm(c->r, &c->timer, ns);
	nbd_conn_tx_kick(c);
	nbd_conn_maybe_finish(c);
}

/* Stop reading, send what is queued, then close within ns; a connection
 * not started yet just closes.  Each connection's end is logged once:
 * orderly ends as notices, failures as warnings. */
static void end_after_send(struct nbd_conn *c, int err, const char *why, bool failure,
			   uint64_t ns)
{
	if (c->state >= NBD_CONN_DRAINING)
		return;
	if (c->state == NBD_CONN_NEW) {
		nbd_conn_fail(c, err, "%s", why);
		return;
	}
	if (failure)
		log_warn("nbd %s: closing: %s", c->peer, why);
	else
		log_notice("nbd %s: closing: %s", c->peer, why);
	drain_begin(c, err, ns);
}

void nbd_conn_drain(struct nbd_conn *c, int err, const char *why)
{
	end_after_send(c, err, why, false, NBD_DRAIN_TIMEOUT_NS);
}

void nbd_conn_fail_after_send(struct nbd_conn *c, int err, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	if (c->state >= NBD_CONN_DRAINING)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* Best effort, and short: a failed handshake must not hold the
	 * connection much past its own deadline. */
	end_after_send(c, err, why, true, NBD_LAST_WORDS_TIMEOUT_NS);
}

/* ---- the public ways in ---- */

static int start_common(struct reactor *r, int fd, void (*closed)(void *, int), void *arg,
			const char *peer, struct nbd_conn **out)
{
	struct nbd_conn *c = nbd_conn_alloc(fd, peer);

	if (!c)
		return -ENOMEM;
	c->r = r;
	c->closed = closed;
	c->closed_arg = arg;
	*out = c;
	return 0;
}

int nbd_conn_start_kernel(struct reactor *r, struct nbd_export *e, int fd,
			  void (*closed)(void *arg, int err), void *arg, struct nbd_conn **out)
{
	struct nbd_conn *c;
	char peer[64];
	int ret;

	if (!e || !e->vol || fd < 0)
		return -EINVAL;
	snprintf(peer, sizeof(peer), "%.40s/kernel-fd%d", e->name ? e->name : "", fd);
	ret = start_common(r, fd, closed, arg, peer, &c);
	if (ret < 0)
		return ret;
	c->kernel = true;
	c->e = e;
	c->loss_start = c->loss_seen = c->loss_sent = vol_loss_sample(e->vol);
	c->loss_cursor = &c->loss_seen;
	c->tflags = nbd_export_flags(e);
	*out = c;
	nbd_conn_run(c);
	return 0;
}

void nbd_conn_share_loss_cursor(struct nbd_conn *c, uint64_t *cursor)
{
	c->loss_cursor = cursor;
}

int nbd_conn_start_newstyle(struct reactor *r, struct nbd_export *const *exports,
			    unsigned nr_exports, int fd, const char *peer,
			    void (*closed)(void *arg, int err), void *arg, struct nbd_conn **out)
{
	return nbd_conn_start_newstyle_tls(r, exports, nr_exports, NULL, fd, peer, closed, arg,
					   out);
}

int nbd_conn_start_newstyle_tls(struct reactor *r, struct nbd_export *const *exports,
				unsigned nr_exports, const struct nbd_tls *tls, int fd,
				const char *peer, void (*closed)(void *arg, int err), void *arg,
				struct nbd_conn **out)
{
	struct nbd_conn *c;
	int ret;

	if (fd < 0)
		return -EINVAL;
	ret = start_common(r, fd, closed, arg, peer ? peer : "fd", &c);
	if (ret < 0)
		return ret;
	c->exports = exports;
	c->nr_exports = nr_exports;
	c->tls_cfg = tls;
	*out = c;
	nbd_conn_run(c);
	return 0;
}

void nbd_conn_close(struct nbd_conn *c)
{
	if (c->state == NBD_CONN_TRANSMISSION)
		nbd_conn_drain(c, -ESHUTDOWN, "closed by its owner");
	else
		nbd_conn_fail(c, -ESHUTDOWN, "closed by its owner");
}
