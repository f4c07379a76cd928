/* NVMe/TCP over TLS 1.3 with a configured PSK, the host's side: OpenSSL on
 * BIOs over our own buffers (a read BIO over tls->in, a memory write BIO),
 * so that the reactor (io_uring or epoll) keeps doing the socket I/O.  The
 * handshake runs between the TCP connect and the ICReq,
 * under the connect timeout; then every PDU byte is sealed into tls->out
 * and opened from tls->in.  See tcp_internal.h for the send FIFO. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "transports/ctrl.h"
#include "transports/tcp/tcp_internal.h"

/* A TLS 1.3 record adds its header (5), the content type (1) and the AEAD
 * tag (16); a record is sealed only when tls->out has room for it whole,
 * so the write BIO is always drained and never grows past one record. */
#define TLS_REC_MAX 16384u
#define TLS_REC_ROOM (TLS_REC_MAX + 64u)
/* Pieces shorter than this are gathered into one record rather than each
 * sealed as its own (a 72-byte capsule would cost a record each). */
#define TLS_GATHER_MAX 2048u

struct tcp_tls_bufs {
	struct tcp_tls t;
	uint8_t gather[TLS_REC_MAX];
};

static SSL_CTX *client_ctx;
static BIO_METHOD *in_method;
static pthread_once_t client_ctx_once = PTHREAD_ONCE_INIT;

/* The read BIO is a window [in_off, in_len) over tls->in, where the socket
 * receive lands: OpenSSL copies what it needs of a record straight out of
 * it (a memory BIO took a copy of every receive first). */
static int in_read(BIO *b, char *buf, size_t len, size_t *got)
{
	struct tcp_tls *t = BIO_get_data(b);
	size_t have = t->in_len - t->in_off;

	BIO_clear_retry_flags(b);
	*got = 0;
	if (!have) {
		/* Empty is "try again", as for a memory BIO: WANT_READ. */
		BIO_set_retry_read(b);
		return 0;
	}
	if (len > have)
		len = have;
	memcpy(buf, t->in + t->in_off, len);
	t->in_off += (uint32_t)len;
	*got = len;
	return 1;
}

static long in_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	const struct tcp_tls *t = BIO_get_data(b);

	(void)num;
	(void)ptr;
	switch (cmd) {
	case BIO_CTRL_PENDING:
		return (long)(t->in_len - t->in_off);
	case BIO_CTRL_FLUSH:
		return 1;
	default:
		return 0; /* not at EOF, no kTLS, nothing else supported */
	}
}

static void client_ctx_init(void)
{
	int type = BIO_get_new_index();

	client_ctx = SSL_CTX_new(TLS_client_method());
	if (client_ctx)
		SSL_CTX_set_session_cache_mode(client_ctx, SSL_SESS_CACHE_OFF);
	if (type > 0 && (in_method = BIO_meth_new(type | BIO_TYPE_SOURCE_SINK, "nvmf tcp in")) &&
	    (!BIO_meth_set_read_ex(in_method, in_read) || !BIO_meth_set_ctrl(in_method, in_ctrl))) {
		BIO_meth_free(in_method);
		in_method = NULL;
	}
}

static BIO *in_bio_new(struct tcp_tls *t)
{
	BIO *b = in_method ? BIO_new(in_method) : NULL;

	if (b) {
		BIO_set_data(b, t);
		BIO_set_init(b, 1);
	}
	return b;
}

int tcp_tls_init(struct tcp_queue *tq)
{
	struct tcp_tls_bufs *b;

	if (!tq->opts.tls)
		return 0;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->t.out = malloc(TCP_TLS_OUT_SIZE);
	b->t.in = malloc(TCP_TLS_IN_SIZE);
	if (!b->t.out || !b->t.in) {
		free(b->t.out);
		free(b->t.in);
		free(b);
		return -ENOMEM;
	}
	tq->tls = &b->t;
	return 0;
}

static void tls_drop_ssl(struct tcp_tls *t)
{
	SSL_free(t->ssl);
	t->ssl = NULL;
	t->rbio = t->wbio = NULL;
	nvmf_tls_psk_clear(&t->psk);
}

void tcp_tls_free(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;

	if (!t)
		return;
	tls_drop_ssl(t);
	free(t->out);
	free(t->in);
	free(container_of(t, struct tcp_tls_bufs, t));
	tq->tls = NULL;
}

#define TLS_WBIO_MAX (16u << 10)
#define TLS_CTL_MAX (64u << 10) /* about 2400 key updates */

/* Moves what the write BIO holds into tls->out, as far as it fits. */
static void out_fill(struct tcp_tls *t)
{
	size_t pend = BIO_ctrl_pending(t->wbio), room = TCP_TLS_OUT_SIZE - t->out_len;
	size_t n = pend < room ? pend : room;

	if (n && BIO_read(t->wbio, t->out + t->out_len, (int)n) == (int)n)
		t->out_len += (uint32_t)n;
}

static void out_flush(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;

	if (tq->send_pending || t->out_sent >= t->out_len || tq->fd < 0)
		return;
	reactor_send(tq->q->r, &tq->send_op, tq->fd, t->out + t->out_sent,
		     t->out_len - t->out_sent, MSG_NOSIGNAL);
	tq->send_pending = true;
	tq->ops_in_flight++;
}

/* What the waiting and status lines say: a key the peer does not take,
 * else a TLS protocol failure. */
static int tls_errno(void)
{
	switch (ERR_GET_REASON(ERR_peek_error())) {
	case SSL_R_BINDER_DOES_NOT_VERIFY:
	case SSL_R_DIGEST_CHECK_FAILED:
	case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
	case SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER:
	case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
		return -EKEYREJECTED;
	default:
		return -EPROTO;
	}
}

static void tls_fail(struct tcp_queue *tq, const char *what)
{
	char why[256];
	int err = tls_errno();

	nvmf_queue_transport_error(tq->q, err, "TLS %s with %s:%s failed: %s", what,
				   tq->opts.traddr, tq->opts.trsvcid,
				   nvmf_tls_ssl_why(why, sizeof(why)));
}

static void hs_step(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;
	int r, e;

	ERR_clear_error();
	r = SSL_do_handshake(t->ssl);
	e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
	out_fill(t);
	if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ) {
		tls_fail(tq, "handshake");
		return;
	}
	out_flush(tq);
	if (e == SSL_ERROR_WANT_READ) {
		tcp_tls_recv_arm(tq);
		return;
	}
	if (!nvmf_tls_ssl_psk_used(t->ssl)) {
		nvmf_queue_transport_error(tq->q, -EACCES,
					   "TLS handshake with %s:%s was not authenticated by the PSK",
					   tq->opts.traddr, tq->opts.trsvcid);
		return;
	}
	log_info("%s: TLS up with %s:%s (%s, %s, identity '%s')", tq->q->name, tq->opts.traddr,
		 tq->opts.trsvcid, SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl),
		 t->psk.identity);
	tcp_send_icreq(tq);
}

void tcp_tls_start(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;
	const struct nvmf_ctrl *c = tq->q->ctrl;
	int ret;

	tls_drop_ssl(t);
	t->out_sent = t->out_len = 0;
	t->in_off = t->in_len = 0;
	t->ctl_bytes = 0;
	t->rx_parked = false;
	pthread_once(&client_ctx_once, client_ctx_init);
	if (!c) {
		nvmf_queue_transport_error(tq->q, -EINVAL, "TLS needs the controller's NQNs");
		return;
	}
	ret = nvmf_tls_derive(&tq->opts.tls_key, c->opts.hostnqn, c->opts.subnqn, 0,
			      (enum nvmf_tls_kdf)tq->opts.tls_kdf, &t->psk);
	if (ret < 0) {
		nvmf_queue_transport_error(tq->q, ret, "TLS: no PSK for host %s and subsystem %s: %s",
					   c->opts.hostnqn, c->opts.subnqn, strerror(-ret));
		return;
	}
	ERR_clear_error();
	if (!client_ctx || !(t->ssl = SSL_new(client_ctx)) || !(t->rbio = in_bio_new(t)) ||
	    !(t->wbio = BIO_new(BIO_s_mem()))) {
		BIO_free(t->rbio);
		t->rbio = NULL;
		tls_fail(tq, "set-up");
		return;
	}
	SSL_set_bio(t->ssl, t->rbio, t->wbio);
	if (nvmf_tls_ssl_setup(t->ssl, &t->psk) < 0) {
		tls_fail(tq, "set-up");
		return;
	}
	SSL_set_connect_state(t->ssl);
	tq->conn = TCP_CONN_TLS;
	hs_step(tq);
}

/* The next piece of plaintext to seal: the head iovec (or up to a record
 * of it) when it is large, else the small ones after it gathered. */
static bool seal_one(struct tcp_queue *tq, uint32_t room)
{
	struct tcp_tls_bufs *b = container_of(tq->tls, struct tcp_tls_bufs, t);
	struct iovec *v = tq->siov + tq->siov_first;
	unsigned left = tq->siov_cnt - tq->siov_first;
	const void *src = v->iov_base;
	size_t n = v->iov_len, w = 0;

	if (room > TLS_REC_MAX)
		room = TLS_REC_MAX;
	if (n >= TLS_GATHER_MAX) {
		if (n > room)
			n = room;
	} else {
		n = 0;
		for (unsigned i = 0; i < left && n < room; i++) {
			size_t k = v[i].iov_len;
			if (k >= TLS_GATHER_MAX && n)
				break;
			if (k > room - n)
				k = room - n;
			memcpy(b->gather + n, v[i].iov_base, k);
			n += k;
		}
		src = b->gather;
	}
	if (!n) {
		tq->siov_first += iov_advance(v, left, 0);
		return true;
	}
	/* The write BIO is memory: a write is taken whole or fails. */
	if (!SSL_write_ex(tq->tls->ssl, src, n, &w) || w != n)
		return false;
	tq->siov_first += iov_advance(v, left, n);
	return true;
}

void tcp_tls_seal_send(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;

	ERR_clear_error();
	while (tq->siov_first < tq->siov_cnt) {
		/* Skip emptied entries first, so that seal_one sees data. */
		if (!tq->siov[tq->siov_first].iov_len) {
			tq->siov_first++;
			continue;
		}
		if (BIO_ctrl_pending(t->wbio) || TCP_TLS_OUT_SIZE - t->out_len < TLS_REC_ROOM)
			break;
		if (!seal_one(tq, TCP_TLS_OUT_SIZE - t->out_len - (TLS_REC_ROOM - TLS_REC_MAX))) {
			tls_fail(tq, "send");
			return;
		}
		out_fill(t);
	}
	out_flush(tq);
}

bool tcp_tls_sent(struct tcp_queue *tq, uint32_t n)
{
	struct tcp_tls *t = tq->tls;

	t->out_sent += n;
	if (t->out_sent < t->out_len) {
		out_flush(tq); /* a short send, or bytes added meanwhile */
		return false;
	}
	t->out_sent = t->out_len = 0;
	out_fill(t);
	if (t->rx_parked && BIO_ctrl_pending(t->wbio) <= TLS_WBIO_MAX) {
		t->rx_parked = false;
		tcp_tls_recv_arm(tq);
	}
	if (tq->conn == TCP_CONN_TLS) {
		out_flush(tq);
		return false;
	}
	if (tq->siov_first < tq->siov_cnt) {
		tcp_tls_seal_send(tq);
		return false;
	}
	if (t->out_len) {
		out_flush(tq);
		return false;
	}
	return true;
}

void tcp_tls_recv_arm(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;

	if (tq->recv_pending || tq->conn == TCP_CONN_CLOSING)
		return;
	if (BIO_ctrl_pending(t->wbio) > TLS_WBIO_MAX) {
		t->rx_parked = true; /* tcp_tls_sent re-arms it */
		return;
	}
	/* OpenSSL reads until the window is empty before it wants more, so
	 * this is normally a reset; bytes it left are kept, moved to the
	 * front. */
	if (t->in_off) {
		memmove(t->in, t->in + t->in_off, t->in_len - t->in_off);
		t->in_len -= t->in_off;
		t->in_off = 0;
	}
	if (t->in_len == TCP_TLS_IN_SIZE) {
		nvmf_queue_transport_error(tq->q, -EPROTO,
					   "TLS: %u received bytes left unread by OpenSSL",
					   t->in_len);
		return;
	}
	tq->rx_direct = false;
	reactor_recv(tq->q->r, &tq->recv_op, tq->fd, t->in + t->in_len, TCP_TLS_IN_SIZE - t->in_len,
		     0);
	tq->recv_pending = true;
	tq->ops_in_flight++;
}

/* Where the next opened bytes of a C2HData payload go when they skip rbuf:
 * the rest of the request's buffer segment at c2h_off, at most the rest
 * of the payload.  NULL when they go through rbuf: the payload is small
 * (its bytes mostly came along with its header) or not being received. */
static uint8_t *rx_direct_seg(const struct tcp_queue *tq, uint32_t *len)
{
	const struct nvmf_req *req = tq->rx_req;
	size_t off;

	if (tq->rx_state != TCP_RX_DATA || !tq->rx_data_left ||
	    (tq->rx_data_left < TCP_DIRECT_MIN && !tq->rx_stream_left))
		return NULL;
	off = tcp_req_of(tq->rx_req)->c2h_off;
	for (unsigned i = 0; i < req->iovcnt; i++) {
		if (off < req->iov[i].iov_len) {
			size_t n = req->iov[i].iov_len - off;
			*len = n < tq->rx_data_left ? (uint32_t)n : tq->rx_data_left;
			return (uint8_t *)req->iov[i].iov_base + off;
		}
		off -= req->iov[i].iov_len;
	}
	return NULL;
}

/* Opens the next plaintext and hands it to the rx state machine: inside a
 * large C2HData payload SSL_read writes it straight into the request's
 * buffer (the data digest is computed over it there, as for a plaintext
 * direct receive), else into rbuf, no further than the next C2HData
 * header in a stream (tcp_rx_staged_len), so that its payload goes direct
 * too.  1 when bytes were consumed, 0 when SSL_read had none (*e says
 * why), -errno once the queue failed. */
static int open_some(struct tcp_queue *tq, int *e)
{
	struct tcp_tls *t = tq->tls;
	uint32_t want;
	uint8_t *dst = rx_direct_seg(tq, &want);
	size_t got;
	int ret;

	if (!dst) {
		dst = tq->rbuf;
		want = tcp_rx_staged_len(tq, TCP_RBUF_SIZE);
		/* Outside a stream a header is opened alone: the next PDU may
		 * be a large C2HData (after a response, or the first), and a
		 * longer read would copy the start of its payload through
		 * rbuf.  Under TLS a short read costs a memcpy, not a syscall. */
		if (!tq->rx_stream_left && tq->rx_state == TCP_RX_HDR &&
		    tq->rhdr_need > tq->rhdr_len)
			want = tq->rhdr_need - tq->rhdr_len;
		if (!want)
			want = TCP_RBUF_SIZE;
	}
	ERR_clear_error();
	if (!SSL_read_ex(t->ssl, dst, want, &got)) {
		*e = SSL_get_error(t->ssl, 0);
		return 0;
	}
	if (dst != tq->rbuf)
		ret = tcp_rx_direct_done(tq, (uint32_t)got);
	else
		ret = tcp_rx_consume(tq, tq->rbuf, (uint32_t)got);
	return ret < 0 ? ret : 1;
}

int tcp_tls_received(struct tcp_queue *tq, uint32_t n)
{
	struct tcp_tls *t = tq->tls;
	int e = SSL_ERROR_NONE;

	t->in_len += n; /* the read BIO hands it to OpenSSL from there */
	if (tq->conn == TCP_CONN_TLS) {
		hs_step(tq);
		if (tq->conn == TCP_CONN_CLOSING)
			return -ECONNREFUSED;
		/* Records behind the server's Finished are opened now: no
		 * new bytes may come to wake the receive for them. */
		if (tq->conn == TCP_CONN_TLS || !BIO_ctrl_pending(t->rbio))
			return 0;
	}
	size_t said = BIO_ctrl_pending(t->wbio);
	bool data = false;
	for (;;) {
		int ret = open_some(tq, &e);
		if (ret < 0)
			return ret;
		if (!ret)
			break;
		data = true;
		t->ctl_bytes = 0;
		if (tq->conn == TCP_CONN_CLOSING)
			return 0;
	}
	if (e == SSL_ERROR_WANT_READ) {
		/* SSL_read may have answered something (a key update). */
		size_t now = BIO_ctrl_pending(t->wbio);
		if (!data && now > said) {
			t->ctl_bytes += (uint32_t)(now - said);
			if (t->ctl_bytes > TLS_CTL_MAX) {
				nvmf_queue_transport_error(tq->q, -EPROTO,
							   "TLS: %s:%s made TLS answer %u bytes with no "
							   "data between (key update requests?)",
							   tq->opts.traddr, tq->opts.trsvcid,
							   t->ctl_bytes);
				return -EPROTO;
			}
		}
		out_fill(t);
		out_flush(tq);
		return 0;
	}
	if (e == SSL_ERROR_ZERO_RETURN) {
		nvmf_queue_transport_error(tq->q, -ECONNRESET,
					   "target closed the TLS session (close_notify)");
		return -ECONNRESET;
	}
	tls_fail(tq, "receive");
	return -EIO;
}

/* Only after the handshake, and only when the FIFO is empty: a record
 * written straight to the socket must not land inside ciphertext not yet
 * sent. */
static bool raw_write_ok(const struct tcp_queue *tq)
{
	const struct tcp_tls *t = tq->tls;

	return t->ssl && SSL_is_init_finished(t->ssl) && t->out_sent == t->out_len &&
	       !BIO_ctrl_pending(t->wbio) && tq->fd >= 0;
}

static void raw_send_out(struct tcp_queue *tq)
{
	struct tcp_tls *t = tq->tls;

	/* From out_sent: what lies before it is on the wire already. */
	out_fill(t);
	ssize_t r = send(tq->fd, t->out + t->out_sent, t->out_len - t->out_sent,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)r;
	t->out_sent = t->out_len = 0;
}

void tcp_tls_send_term(struct tcp_queue *tq)
{
	size_t w;

	if (!raw_write_ok(tq))
		return;
	ERR_clear_error();
	if (SSL_write_ex(tq->tls->ssl, &tq->term, tq->term.pdu.hdr.plen, &w))
		raw_send_out(tq);
}

void tcp_tls_close_notify(struct tcp_queue *tq)
{
	if (!raw_write_ok(tq))
		return;
	ERR_clear_error();
	if (SSL_shutdown(tq->tls->ssl) >= 0)
		raw_send_out(tq);
	ERR_clear_error();
}
