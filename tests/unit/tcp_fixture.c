/* See tcp_fixture.h.  The queue is built by the production constructors
 * (nvmf_queue_init, the TCP ops' queue_init); only the connection set-up
 * (connect + ICReq/ICResp) is skipped by setting the negotiated state
 * directly, and the socket is one end of a socketpair. */
#include "tests/unit/tcp_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/crc32c.h"

unsigned tcpfx_slot(const struct nvmf_req *req) { return req->cid & NVMF_CID_IDX_MASK; }

void tcpfx_done(struct nvmf_req *req, int err)
{
	struct tcp_fixture *f = req->ctx;
	unsigned s = tcpfx_slot(req);

	if (f->on_done)
		f->on_done(f, req, err);
	if (s < TCPFX_MAX_REQS) {
		f->done_count[s]++;
		f->done_err[s] = err;
		f->done_status[s] = (uint16_t)(req->cqe.status >> 1);
	}
	nvmf_req_put(req);
}

int tcpfx_init(struct tcp_fixture *f, struct reactor *r, uint16_t qsize, bool hdgst,
	       bool ddgst)
{
	struct nvmf_path_opts o = { .trtype = NVMF_TR_TCP, .tos = -1, .hdr_digest = hdgst,
				    .data_digest = ddgst };
	int sv[2], ret;

	memset(f, 0, sizeof(*f));
	f->peer = -1;
	if (qsize > TCPFX_MAX_REQS + 1)
		return -EINVAL;
	strcpy(o.traddr, "127.0.0.1");
	strcpy(o.trsvcid, "4420");
	f->r = r ? r : &f->own_r;
	if (!r && (ret = reactor_init(&f->own_r, 0, 64)) < 0)
		return ret;
	ret = nvmf_queue_init(&f->q, NULL, f->r, 1, qsize, &o);
	if (ret < 0) {
		if (!r)
			reactor_fini(&f->own_r);
		return ret;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		ret = -errno;
		nvmf_queue_free(&f->q);
		if (!r)
			reactor_fini(&f->own_r);
		return ret;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	f->peer = sv[1];
	f->tq = f->q.tp;
	f->tq->fd = sv[0];
	/* What a successful ICReq/ICResp exchange leaves behind. */
	f->tq->conn = TCP_CONN_LIVE;
	f->tq->hdgst = hdgst;
	f->tq->ddgst = ddgst;
	f->tq->cpda_bytes = 4;
	f->tq->maxh2cdata = 4096;
	tcp_rx_reset(f->tq);
	nvmf_queue_set_state(&f->q, NVMF_Q_CONNECTING);
	nvmf_queue_set_state(&f->q, NVMF_Q_FABRIC_CONNECT);
	nvmf_queue_set_state(&f->q, NVMF_Q_LIVE);
	return 0;
}

void tcpfx_drain(int fd, uint8_t *buf, size_t cap, size_t *len)
{
	uint8_t scratch[4096];

	for (;;) {
		bool room = *len < cap;
		ssize_t n = recv(fd, room ? buf + *len : scratch, room ? cap - *len : sizeof(scratch),
				 MSG_DONTWAIT);
		if (n <= 0)
			return;
		if (room)
			*len += (size_t)n;
	}
}

/* Moves what the host sent into f->sent, so that a full socket never
 * stalls the host's sends; beyond the buffer's size bytes are dropped. */
static void pull_peer(struct tcp_fixture *f)
{
	tcpfx_drain(f->peer, f->sent, sizeof(f->sent), &f->sent_len);
}

/* recv_ok: an armed receive counts as settled (it waits for the peer,
 * not for anything due), else the settle would wait out its whole bound
 * on every submit after the first one that armed it. */
static bool settle(struct tcp_fixture *f, bool recv_ok)
{
	/* Each step waits for a completion that is already due (a send to a
	 * local socket, deferred work): the bound is generous on purpose. */
	for (int i = 0; i < 500; i++) {
		unsigned ops = f->tq->ops_in_flight - (recv_ok && f->tq->recv_pending ? 1 : 0);
		if (!ops && !f->tq->quiesce_queued && list_empty(&f->r->deferred) &&
		    !f->r->pending_submit)
			return true;
		pull_peer(f);
		/* Only deferred work left: run it without waiting. */
		reactor_poll(f->r, ops || f->r->pending_submit ? 10 * NSEC_PER_MSEC : 0);
	}
	return false;
}

bool tcpfx_settle(struct tcp_fixture *f)
{
	return settle(f, false);
}

void tcpfx_fini(struct tcp_fixture *f)
{
	if (f->q.state != NVMF_Q_DEAD && f->q.state != NVMF_Q_DRAINING)
		nvmf_queue_shutdown(&f->q, -ECANCELED);
	tcpfx_settle(f);
	nvmf_queue_free(&f->q);
	if (f->peer >= 0)
		close(f->peer);
	if (f->r == &f->own_r) {
		/* Or the cancelled mailbox read re-arms itself until fini
		 * gives up. */
		reactor_stop(&f->own_r);
		reactor_fini(&f->own_r);
	}
}

struct nvmf_req *tcpfx_submit_nowait(struct tcp_fixture *f, bool write, void *buf,
				     uint32_t len)
{
	struct nvmf_req *req = nvmf_req_get(&f->q);
	struct iovec iov = { buf, len };

	if (!req)
		return NULL;
	req->sqe.opcode = write ? NVME_CMD_WRITE : NVME_CMD_READ;
	req->sqe.nsid = 1;
	nvmf_req_set_data(req, &iov, len ? 1 : 0, len, write);
	req->sink = write ? f->wsink : f->sink;
	req->sink_off = write || !f->sink ? 0 : f->sink_off;
	req->done = tcpfx_done;
	req->ctx = f;
	nvmf_req_submit(req);
	return req;
}

struct nvmf_req *tcpfx_submit(struct tcp_fixture *f, bool write, void *buf, uint32_t len)
{
	struct nvmf_req *req = tcpfx_submit_nowait(f, write, buf, len);

	if (req)
		settle(f, true);
	return req;
}

size_t tcpfx_peer_read(struct tcp_fixture *f, uint8_t *buf, size_t cap)
{
	size_t got;

	pull_peer(f);
	got = f->sent_len < cap ? f->sent_len : cap;
	memcpy(buf, f->sent, got);
	memmove(f->sent, f->sent + got, f->sent_len - got);
	f->sent_len -= got;
	return got;
}

static void put(uint8_t *buf, size_t *len, const void *p, size_t n)
{
	memcpy(buf + *len, p, n);
	*len += n;
}

static void put_hdr(const struct tcp_fixture *f, uint8_t *buf, size_t *len, const void *hdr,
		    size_t n)
{
	put(buf, len, hdr, n);
	if (f->tq->hdgst) {
		uint32_t d = crc32c(hdr, n);
		put(buf, len, &d, sizeof(d));
	}
}

void pdu_rsp(const struct tcp_fixture *f, uint8_t *buf, size_t *len, uint16_t cid,
	     uint16_t status)
{
	uint32_t hd = f->tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;
	struct nvme_tcp_rsp r = { .hdr = { .type = NVME_TCP_RSP,
					   .flags = hd ? NVME_TCP_F_HDGST : 0,
					   .hlen = sizeof(r),
					   .plen = (uint32_t)sizeof(r) + hd } };

	r.cqe.cid = cid;
	r.cqe.status = (uint16_t)(status << 1);
	put_hdr(f, buf, len, &r, sizeof(r));
}

void pdu_c2h(const struct tcp_fixture *f, uint8_t *buf, size_t *len, uint16_t cid,
	     uint32_t off, const void *data, uint32_t dlen, uint8_t flags)
{
	uint32_t hd = f->tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;
	uint32_t dd = f->tq->ddgst ? NVME_TCP_DIGEST_LEN : 0;
	struct nvme_tcp_data p = {
		.hdr = { .type = NVME_TCP_C2H_DATA,
			 .flags = (uint8_t)(flags | (hd ? NVME_TCP_F_HDGST : 0) |
					    (dd ? NVME_TCP_F_DDGST : 0)),
			 .hlen = sizeof(p),
			 .pdo = (uint8_t)(sizeof(p) + hd),
			 .plen = (uint32_t)sizeof(p) + hd + dlen + dd },
		.cccid = cid,
		.offset = off,
		.length = dlen,
	};

	put_hdr(f, buf, len, &p, sizeof(p));
	put(buf, len, data, dlen);
	if (dd) {
		uint32_t d = crc32c(data, dlen);
		put(buf, len, &d, sizeof(d));
	}
}

void pdu_r2t(const struct tcp_fixture *f, uint8_t *buf, size_t *len, uint16_t cid,
	     uint32_t off, uint32_t rlen)
{
	uint32_t hd = f->tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;
	struct nvme_tcp_data p = {
		.hdr = { .type = NVME_TCP_R2T,
			 .flags = hd ? NVME_TCP_F_HDGST : 0,
			 .hlen = sizeof(p),
			 .plen = (uint32_t)sizeof(p) + hd },
		.cccid = cid,
		.ttag = 0x55,
		.offset = off,
		.length = rlen,
	};

	put_hdr(f, buf, len, &p, sizeof(p));
}

void pdu_term(uint8_t *buf, size_t *len, uint16_t fes, uint32_t fei)
{
	struct nvme_tcp_term t = { .hdr = { .type = NVME_TCP_C2H_TERM,
					    .hlen = sizeof(t),
					    .plen = sizeof(t) },
				   .fes = fes,
				   .fei = fei };

	put(buf, len, &t, sizeof(t));
}
