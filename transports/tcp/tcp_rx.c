/* NVMe/TCP receive: a byte-driven state machine over the PDU stream.
 *
 * It never trusts the target: every header field is checked against what
 * was negotiated and what is in flight before a byte of payload is placed,
 * and any violation fails the connection (never the process).  It works on
 * any split of the stream, so partial reads resume where they stopped, and
 * the fuzzer can drive it from a plain buffer. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "transports/crc32c.h"
#include "transports/tcp/tcp_internal.h"

void tcp_rx_reset(struct tcp_queue *tq)
{
	tq->rx_state = TCP_RX_HDR;
	tq->rhdr_len = 0;
	tq->rhdr_need = sizeof(struct nvme_tcp_hdr);
	tq->rx_req = NULL;
	tq->rx_pad_left = tq->rx_data_left = tq->rx_ddgst_len = 0;
}

/* The in-flight request with this CID whose command the socket already
 * has; a target that answers a command it cannot have seen is forging. */
static struct nvmf_req *find_sent_req(struct tcp_queue *tq, uint16_t cid)
{
	struct nvmf_req *req = nvmf_queue_find_req(tq->q, cid);

	return req && !tcp_req_of(req)->cmd_item.queued ? req : NULL;
}

/* The payload stops going to the caller's pipe: what is in it goes back to
 * the request's buffer, where the rest will land.  A later part of a split
 * read cannot take the pipe's head out (earlier parts are there): it only
 * stops, and the I/O joins the pipe to the buffer when all parts are in. */
static int sink_abandon(struct tcp_queue *tq, struct nvmf_req *req)
{
	struct pipe_sink *s = req->sink;
	int ret;

	/* Past c2h_off only by what a failed put left in it (consume). */
	INVARIANT(s->filled >= req->sink_off + tcp_req_of(req)->c2h_off,
		  "a pipe holds all of its payload received so far");
	req->sink = NULL;
	if (req->sink_off)
		return 0;
	ret = pipe_sink_unsplice(s, req->iov, req->iovcnt);
	if (ret < 0) {
		/* Bytes taken from the socket are lost: the command cannot
		 * complete, and only a new connection resynchronises. */
		nvmf_queue_transport_error(tq->q, ret, "CID 0x%04x: pipe failed: %s", req->cid,
					   strerror(-ret));
		return ret;
	}
	return 0;
}

static bool type_has_hdgst(uint8_t type)
{
	return type != NVME_TCP_ICRESP && type != NVME_TCP_C2H_TERM;
}

/* Expected hlen per PDU type a host may receive; 0 = not for a host. */
static uint8_t expected_hlen(uint8_t type)
{
	switch (type) {
	case NVME_TCP_ICRESP:
		return sizeof(struct nvme_tcp_icresp);
	case NVME_TCP_C2H_TERM:
		return sizeof(struct nvme_tcp_term);
	case NVME_TCP_RSP:
		return sizeof(struct nvme_tcp_rsp);
	case NVME_TCP_C2H_DATA:
	case NVME_TCP_R2T:
		return sizeof(struct nvme_tcp_data);
	default:
		return 0;
	}
}

/* Validates the 8-byte common header: type for the connection state,
 * hlen, plen bounds, digest flags as negotiated.  Sets rhdr_need. */
static int check_common_header(struct tcp_queue *tq)
{
	const struct nvme_tcp_hdr *h = (const void *)tq->rhdr;
	uint8_t want = expected_hlen(h->type);
	uint32_t hd = (tq->hdgst && type_has_hdgst(h->type)) ? NVME_TCP_DIGEST_LEN : 0;

	if (!want)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 0,
					  "unexpected PDU type 0x%02x", h->type);
	if ((h->type == NVME_TCP_ICRESP) != (tq->conn == TCP_CONN_ICREQ) &&
	    h->type != NVME_TCP_C2H_TERM)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 0,
					  "PDU type 0x%02x out of sequence", h->type);
	if (h->hlen != want)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 2,
					  "PDU type 0x%02x with hlen %u, expected %u", h->type,
					  h->hlen, want);
	if (h->plen < (uint32_t)h->hlen + hd)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 4,
					  "PDU type 0x%02x: plen %u shorter than its header",
					  h->type, h->plen);
	if (type_has_hdgst(h->type) && !!(h->flags & NVME_TCP_F_HDGST) != tq->hdgst)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 1,
					  "PDU type 0x%02x: header digest flag %s negotiated",
					  h->type, tq->hdgst ? "missing, but" : "set, not");
	switch (h->type) {
	case NVME_TCP_ICRESP:
	case NVME_TCP_RSP:
	case NVME_TCP_R2T:
		if (h->plen != (uint32_t)h->hlen + hd || (h->flags & NVME_TCP_F_DDGST))
			return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 4,
						  "PDU type 0x%02x: plen %u, expected %u",
						  h->type, h->plen, h->hlen + hd);
		break;
	case NVME_TCP_C2H_TERM:
		if (h->plen > (uint32_t)h->hlen + 152)
			return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 4,
						  "C2HTermReq with plen %u", h->plen);
		break;
	case NVME_TCP_C2H_DATA:
		if (!!(h->flags & NVME_TCP_F_DDGST) != tq->ddgst)
			return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 1,
						  "C2HData: data digest flag %s negotiated",
						  tq->ddgst ? "missing, but" : "set, not");
		break;
	}
	tq->rhdr_need = (uint32_t)h->hlen + hd;
	return 0;
}

static int handle_term(struct tcp_queue *tq)
{
	const struct nvme_tcp_term *t = (const void *)tq->rhdr;
	static const char *const fes_names[] = {
		[1] = "invalid PDU header field", [2] = "PDU sequence error",
		[3] = "header digest error", [4] = "data transfer out of range",
		[5] = "data transfer limit exceeded", [6] = "unsupported parameter",
	};
	const char *why = t->fes < 7 && fes_names[t->fes] ? fes_names[t->fes] : "unknown";

	/* The target is closing: report and tear down without replying. */
	nvmf_queue_transport_error(tq->q, -ECONNRESET,
				   "target sent C2HTermReq: %s (fes 0x%x, fei 0x%x)", why,
				   t->fes, t->fei);
	return -ECONNRESET;
}

static int handle_rsp(struct tcp_queue *tq)
{
	const struct nvme_tcp_rsp *r = (const void *)tq->rhdr;
	struct nvmf_req *req = find_sent_req(tq, r->cqe.cid);
	struct tcp_req *tr;

	if (!req)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 20,
					  "CapsuleResp for CID 0x%04x not in flight", r->cqe.cid);
	tr = tcp_req_of(req);
	if (tr->resp_ready)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 20,
					  "second completion for CID 0x%04x", r->cqe.cid);
	/* A successful read whose data did not all arrive would hand the
	 * caller a buffer with stale bytes in it. */
	if (!req->host_to_ctrl && req->data_len && (r->cqe.status >> 1) == 0 &&
	    tr->c2h_off != req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 20,
					  "CID 0x%04x completed after %u of %u data bytes",
					  r->cqe.cid, tr->c2h_off, req->data_len);
	if (req->host_to_ctrl && (r->cqe.status >> 1) == 0 && !tr->in_capsule &&
	    tr->h2c_off != req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 20,
					  "CID 0x%04x completed after %u of %u bytes were sent",
					  r->cqe.cid, tr->h2c_off, req->data_len);
	tcp_req_heard(tq, req);
	tcp_req_respond(tq, req, &r->cqe);
	return 0;
}

static int handle_r2t(struct tcp_queue *tq)
{
	const struct nvme_tcp_data *p = (const void *)tq->rhdr;
	struct nvmf_req *req = find_sent_req(tq, p->cccid);
	struct tcp_req *tr;

	if (!req)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 8,
					  "R2T for CID 0x%04x not in flight", p->cccid);
	tr = tcp_req_of(req);
	/* The response may be waiting for the command's send to be reaped;
	 * data queued now would be built after the owner freed the buffer. */
	if (tr->resp_ready)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 8,
					  "R2T for CID 0x%04x after its response", p->cccid);
	if (!req->host_to_ctrl || tr->in_capsule || !req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 8,
					  "R2T for CID 0x%04x, which has no data to send",
					  p->cccid);
	if (tr->h2c_off != tr->r2t_end)
		return tcp_protocol_error(tq, NVME_TCP_FES_R2T_LIMIT_EXCEEDED, 8,
					  "R2T for CID 0x%04x while one is active (MAXR2T 1)",
					  p->cccid);
	if (p->length == 0 || p->offset != tr->h2c_off ||
	    (uint64_t)p->offset + p->length > req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_DATA_OUT_OF_RANGE, 12,
					  "R2T for CID 0x%04x asks [%u, +%u) of %u bytes, next %u",
					  p->cccid, p->offset, p->length, req->data_len,
					  tr->h2c_off);
	tcp_req_heard(tq, req);
	tr->ttag = p->ttag;
	tr->r2t_end = p->offset + p->length;
	return tcp_queue_h2c(tq, req);
}

static int start_c2h_data(struct tcp_queue *tq)
{
	const struct nvme_tcp_data *p = (const void *)tq->rhdr;
	const struct nvme_tcp_hdr *h = &p->hdr;
	struct nvmf_req *req = find_sent_req(tq, p->cccid);
	uint32_t dd = tq->ddgst ? NVME_TCP_DIGEST_LEN : 0;
	struct tcp_req *tr;

	if (!req)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 8,
					  "C2HData for CID 0x%04x not in flight", p->cccid);
	tr = tcp_req_of(req);
	if (tr->resp_ready)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 8,
					  "C2HData for CID 0x%04x after its response", p->cccid);
	if (req->host_to_ctrl || !req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 8,
					  "C2HData for CID 0x%04x, which expects no data",
					  p->cccid);
	if (h->pdo < tq->rhdr_need || h->pdo > h->plen)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 3,
					  "C2HData with PDO %u (header %u, plen %u)", h->pdo,
					  tq->rhdr_need, h->plen);
	if ((uint64_t)h->pdo + p->length + dd != h->plen)
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 4,
					  "C2HData plen %u does not match pdo %u + datal %u",
					  h->plen, h->pdo, p->length);
	if (p->length == 0 || p->offset != tr->c2h_off ||
	    (uint64_t)p->offset + p->length > req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_DATA_OUT_OF_RANGE, 12,
					  "C2HData for CID 0x%04x carries [%u, +%u) of %u bytes, next %u",
					  p->cccid, p->offset, p->length, req->data_len,
					  tr->c2h_off);
	if ((h->flags & NVME_TCP_F_DATA_SUCCESS) && !(h->flags & NVME_TCP_F_DATA_LAST))
		return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 1,
					  "C2HData with SUCCESS but without LAST_PDU");
	if ((h->flags & NVME_TCP_F_DATA_SUCCESS) && p->offset + p->length != req->data_len)
		return tcp_protocol_error(tq, NVME_TCP_FES_PDU_SEQ_ERR, 1,
					  "C2HData SUCCESS for CID 0x%04x before all %u bytes",
					  p->cccid, req->data_len);
	/* A part of a split read that arrives before the parts ahead of it
	 * (or after one of them gave up the pipe) goes to the buffer. */
	if (req->sink && req->sink->filled != req->sink_off + p->offset)
		req->sink = NULL;
	tcp_req_heard(tq, req);
	tq->rx_req = req;
	tq->rx_flags = h->flags;
	tq->rx_pad_left = h->pdo - tq->rhdr_need;
	tq->rx_data_left = p->length;
	tq->rx_crc = crc32c_init();
	tq->rx_state = tq->rx_pad_left ? TCP_RX_PAD : TCP_RX_DATA;
	tq->rx_stream_left = 0;
	if (p->length >= TCP_STREAM_MIN) {
		uint32_t hd = tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;
		tq->rx_stream_left = h->plen - tq->rhdr_need + (uint32_t)sizeof(struct nvme_tcp_data) + hd;
		if ((h->flags & NVME_TCP_F_DATA_LAST) && !(h->flags & NVME_TCP_F_DATA_SUCCESS))
			tq->rx_stream_left += (uint32_t)sizeof(struct nvme_tcp_rsp) + hd;
	}
	return 0;
}

/* The whole header (and its digest) is in rhdr. */
static int handle_header(struct tcp_queue *tq)
{
	const struct nvme_tcp_hdr *h = (const void *)tq->rhdr;

	if (tq->hdgst && type_has_hdgst(h->type)) {
		uint32_t want, got = crc32c(tq->rhdr, h->hlen);
		memcpy(&want, tq->rhdr + h->hlen, sizeof(want));
		if (want != got)
			return tcp_protocol_error(tq, NVME_TCP_FES_HDR_DIGEST_ERR, 0,
						  "header digest mismatch on PDU type 0x%02x "
						  "(got 0x%08x, computed 0x%08x)",
						  h->type, want, got);
	}
	tq->nr_pdus_rx++;
	switch (h->type) {
	case NVME_TCP_ICRESP: {
		/* Checked while the header is still ours: a refusal's TermReq
		 * echoes it (its FEI points into it). */
		int ret = tcp_ic_done(tq, (const void *)tq->rhdr);
		tcp_rx_reset(tq);
		return ret;
	}
	case NVME_TCP_C2H_TERM:
		return handle_term(tq);
	case NVME_TCP_RSP: {
		int ret = handle_rsp(tq);
		if (ret == 0)
			tcp_rx_reset(tq);
		return ret;
	}
	case NVME_TCP_R2T: {
		int ret = handle_r2t(tq);
		if (ret == 0)
			tcp_rx_reset(tq);
		return ret;
	}
	case NVME_TCP_C2H_DATA:
		return start_c2h_data(tq);
	}
	return tcp_protocol_error(tq, NVME_TCP_FES_INVALID_PDU_HDR, 0, "PDU type 0x%02x",
				  h->type);
}

/* The data of a C2HData PDU is all there (and its digest checked). */
static int finish_c2h_data(struct tcp_queue *tq)
{
	struct nvmf_req *req = tq->rx_req;
	uint8_t flags = tq->rx_flags;

	tcp_rx_reset(tq);
	if (flags & NVME_TCP_F_DATA_SUCCESS) {
		/* The target skipped the CapsuleResp: success is implied. */
		struct nvme_cqe cqe = { .cid = req->cid };
		tcp_req_respond(tq, req, &cqe);
	}
	return 0;
}

static int data_done(struct tcp_queue *tq)
{
	if (tq->ddgst) {
		tq->rx_state = TCP_RX_DDGST;
		tq->rx_ddgst_len = 0;
		return 0;
	}
	return finish_c2h_data(tq);
}

uint32_t tcp_rx_staged_len(const struct tcp_queue *tq, uint32_t room)
{
	uint32_t len = room;

	if (!tq->rx_stream_left)
		return len;
	if (tq->rx_stream_left < len)
		len = tq->rx_stream_left;
	if (tq->rx_state == TCP_RX_PAD && tq->rx_pad_left < len)
		len = tq->rx_pad_left; /* then the data goes direct */
	return len;
}

/* n more bytes of the stream were consumed (see rx_stream_left). */
static void stream_advance(struct tcp_queue *tq, uint32_t n)
{
	tq->rx_stream_left -= n < tq->rx_stream_left ? n : tq->rx_stream_left;
}

int tcp_rx_consume(struct tcp_queue *tq, const uint8_t *buf, uint32_t len)
{
	uint32_t off = 0;
	int ret;


	while (off < len) {
		uint32_t avail = len - off, n;

		if (tq->conn == TCP_CONN_CLOSING)
			return -ECONNRESET;
		switch (tq->rx_state) {
		case TCP_RX_HDR:
			n = tq->rhdr_need - tq->rhdr_len;
			if (n > avail)
				n = avail;
			memcpy(tq->rhdr + tq->rhdr_len, buf + off, n);
			tq->rhdr_len += n;
			off += n;
			stream_advance(tq, n);
			if (tq->rhdr_len < tq->rhdr_need)
				break;
			if (tq->rhdr_need == sizeof(struct nvme_tcp_hdr)) {
				ret = check_common_header(tq);
				if (ret < 0)
					return ret;
				if (tq->rhdr_len < tq->rhdr_need)
					break;
			}
			ret = handle_header(tq);
			if (ret < 0)
				return ret;
			break;
		case TCP_RX_PAD:
			n = tq->rx_pad_left < avail ? tq->rx_pad_left : avail;
			tq->rx_pad_left -= n;
			off += n;
			stream_advance(tq, n);
			if (!tq->rx_pad_left)
				tq->rx_state = TCP_RX_DATA;
			break;
		case TCP_RX_DATA: {
			struct nvmf_req *req = tq->rx_req;
			struct tcp_req *tr = tcp_req_of(req);
			n = tq->rx_data_left < avail ? tq->rx_data_left : avail;
			/* Bytes read with a header follow the rest into the pipe. */
			INVARIANT(!req->sink || req->sink->filled == req->sink_off + tr->c2h_off,
				  "a pipe holds all of its payload received so far");
			if (req->sink && pipe_sink_put(req->sink, buf + off, n) < 0 &&
			    (ret = sink_abandon(tq, req)) < 0)
				return ret;
			if (!req->sink)
				iov_copy_to(req->iov, req->iovcnt, tr->c2h_off, buf + off, n);
			tq->nr_rx_staged_data += n;
			if (tq->ddgst)
				tq->rx_crc = crc32c_update(tq->rx_crc, buf + off, n);
			tr->c2h_off += n;
			tq->rx_data_left -= n;
			off += n;
			stream_advance(tq, n);
			if (!tq->rx_data_left && (ret = data_done(tq)) < 0)
				return ret;
			break;
		}
		case TCP_RX_DDGST:
			n = NVME_TCP_DIGEST_LEN - tq->rx_ddgst_len;
			if (n > avail)
				n = avail;
			memcpy(tq->rx_ddgst + tq->rx_ddgst_len, buf + off, n);
			tq->rx_ddgst_len += n;
			off += n;
			stream_advance(tq, n);
			if (tq->rx_ddgst_len == NVME_TCP_DIGEST_LEN) {
				uint32_t want, got = crc32c_final(tq->rx_crc);
				memcpy(&want, tq->rx_ddgst, sizeof(want));
				if (want != got)
					return tcp_protocol_error(
						tq, 0, 0,
						"data digest mismatch for CID 0x%04x "
						"(got 0x%08x, computed 0x%08x)",
						tq->rx_req->cid, want, got);
				if ((ret = finish_c2h_data(tq)) < 0)
					return ret;
			}
			break;
		}
	}
	return (int)off;
}

/* n bytes of the payload landed outside the staging buffer (in the
 * request's buffer, or its pipe). */
static int payload_landed(struct tcp_queue *tq, struct tcp_req *tr, uint32_t n)
{
	tr->c2h_off += n;
	tq->rx_data_left -= n;
	stream_advance(tq, n);
	return tq->rx_data_left ? 0 : data_done(tq);
}

bool tcp_rx_splice_wanted(const struct tcp_queue *tq)
{
	return tq->rx_state == TCP_RX_DATA && tq->rlen == 0 && tq->rx_req && tq->rx_req->sink;
}

int tcp_rx_splice(struct tcp_queue *tq, bool after_poll)
{
	while (tcp_rx_splice_wanted(tq)) {
		struct nvmf_req *req = tq->rx_req;
		struct tcp_req *tr = tcp_req_of(req);
		INVARIANT(req->sink->filled == req->sink_off + tr->c2h_off,
			  "a pipe holds all of its payload received so far");
		ssize_t n = tq->sock_nonblock ?
				    pipe_sink_from_nb_socket(req->sink, tq->fd, tq->rx_data_left) :
				    pipe_sink_from_socket(req->sink, tq->fd, tq->rx_data_left);
		int ret;

		if (n == -EAGAIN && !after_poll)
			return 1;
		if (n <= 0) {
			/* The pipe is full, or the socket has news (an end, an
			 * error) that the ordinary receive reports. */
			if (n != -EAGAIN && n != -ENOSPC)
				log_debug("%s: splice: %s", tq->q->name, strerror((int)-n));
			return sink_abandon(tq, req);
		}
		after_poll = false;
		tq->nr_rx_spliced_data += (uint64_t)n;
		if ((ret = payload_landed(tq, tr, (uint32_t)n)) < 0)
			return ret;
		if (tq->conn == TCP_CONN_CLOSING)
			return -ECONNRESET;
	}
	return 0;
}

int tcp_rx_direct_done(struct tcp_queue *tq, uint32_t n)
{
	struct nvmf_req *req = tq->rx_req;
	struct tcp_req *tr = tcp_req_of(req);

	if (tq->ddgst) {
		struct iovec sl[NVMF_REQ_MAX_IOV];
		int cnt = iov_slice(req->iov, req->iovcnt, tr->c2h_off, n, sl, NVMF_REQ_MAX_IOV);
		for (int i = 0; i < cnt; i++)
			tq->rx_crc = crc32c_update(tq->rx_crc, sl[i].iov_base, sl[i].iov_len);
	}
	tq->nr_rx_direct_data += n;
	return payload_landed(tq, tr, n);
}

void tcp_send_term(struct tcp_queue *tq)
{
	if (tq->tls) {
		tcp_tls_send_term(tq);
		return;
	}
	ssize_t r = send(tq->fd, &tq->term, tq->term.pdu.hdr.plen, MSG_DONTWAIT | MSG_NOSIGNAL);

	(void)r;
}

int tcp_protocol_error(struct tcp_queue *tq, uint16_t fes, uint32_t fei, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Best effort: a TermReq tells the target why.  With a send in flight
	 * it waits for that send (see tcp_queue_shutdown), or it would land in
	 * the middle of another PDU.  A data digest error has no fatal error
	 * status of its own (fes 0): the connection is closed without one. */
	if (fes && tq->fd >= 0 && tq->conn != TCP_CONN_CLOSING && tq->conn != TCP_CONN_IDLE) {
		uint32_t echo = tq->rhdr_len < NVME_TCP_TERM_MAX_DATA ? tq->rhdr_len :
									NVME_TCP_TERM_MAX_DATA;
		memset(&tq->term, 0, sizeof(tq->term));
		tq->term.pdu.hdr.type = NVME_TCP_H2C_TERM;
		tq->term.pdu.hdr.hlen = sizeof(tq->term.pdu);
		tq->term.pdu.hdr.plen = (uint32_t)sizeof(tq->term.pdu) + echo;
		tq->term.pdu.fes = fes;
		tq->term.pdu.fei = fei;
		memcpy(tq->term.data, tq->rhdr, echo);
		if (tq->send_pending)
			tq->term_deferred = true;
		else
			tcp_send_term(tq);
	}
	nvmf_queue_transport_error(tq->q, -EPROTO, "protocol error: %s", msg);
	return -EPROTO;
}
