/* One NVMe/TCP connection of the test target: the PDU receive state
 * machine (every field the host sends is checked before its payload is
 * placed) and the send ring (PDU headers live in the command slot, data is
 * sent from where it lies, so a read is never copied). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "tests/target/tgt.h"
#include "transports/crc32c.h"

#define RBUF_SIZE (64u * 1024)
#define DIRECT_MIN 4096u
#define TX_PER_CMD 8u

static const uint8_t zeros[128];

/* ---- slots ---- */

int conn_alloc_cmds(struct tgt_conn *c, unsigned n)
{
	c->cmds = calloc(n, sizeof(*c->cmds));
	/* Large enough to be mmap'd: pages of idle slots are never touched. */
	c->bufs = malloc((size_t)n * TGT_MAX_XFER);
	c->tx_size = n * TX_PER_CMD + 16;
	c->tx = calloc(c->tx_size, sizeof(*c->tx));
	if (!c->cmds || !c->bufs || !c->tx)
		return -ENOMEM;
	c->nr_cmds = n;
	list_init(&c->free_cmds);
	for (unsigned i = n; i-- > 0;) {
		struct tgt_cmd *cmd = &c->cmds[i];
		cmd->conn = c;
		cmd->idx = (uint16_t)i;
		cmd->buf = c->bufs + (size_t)i * TGT_MAX_XFER;
		list_init(&cmd->link);
		list_add_head(&c->free_cmds, &cmd->link);
	}
	return 0;
}

void cmd_free(struct tgt_cmd *cmd)
{
	cmd->state = CMD_FREE;
	cmd->conn->nr_busy--;
	list_add_head(&cmd->conn->free_cmds, &cmd->link);
}

/* ---- send ring ---- */

static unsigned tx_used(const struct tgt_conn *c)
{
	return (c->tx_tail + c->tx_size - c->tx_head) % c->tx_size;
}

static void tx_push(struct tgt_conn *c, const void *base, size_t len, struct tgt_cmd *release)
{
	if (!len && !release)
		return;
	if (tx_used(c) + 1 >= c->tx_size) {
		/* Sized for every slot's PDUs at once: cannot happen unless a
		 * bug queues PDUs twice. */
		log_err("%s: send ring full", c->peer);
		abort();
	}
	c->tx[c->tx_tail].iov.iov_base = (void *)base;
	c->tx[c->tx_tail].iov.iov_len = len;
	c->tx[c->tx_tail].release = release;
	c->tx_tail = (c->tx_tail + 1) % c->tx_size;
	if (!c->on_flushq) {
		c->on_flushq = true;
		list_add_tail(&T.flushq, &c->flink);
	}
}

/* Up to one record of the queued pieces, gathered.  A write OpenSSL must
 * retry gathers the same bytes again (the queue only grows behind them)
 * into the same buffer (one thread). */
static ssize_t tls_write_packed(struct tgt_conn *c, const struct iovec *iov, unsigned n)
{
	static uint8_t pack[16384];
	size_t len = 0;

	for (unsigned k = 0; k < n && len < sizeof(pack); k++) {
		size_t m = iov[k].iov_len < sizeof(pack) - len ? iov[k].iov_len : sizeof(pack) - len;
		memcpy(pack + len, iov[k].iov_base, m);
		len += m;
	}
	return tgt_tls_write(c, pack, len);
}

void conn_writable(struct tgt_conn *c)
{
	struct iovec iov[256];

	while (!c->closing && c->tx_head != c->tx_tail) {
		unsigned n = 0, i = c->tx_head;
		while (i != c->tx_tail && n < 256) {
			iov[n++] = c->tx[i].iov;
			i = (i + 1) % c->tx_size;
		}
		/* Under TLS one record per piece: simple, and a test tool;
		 * --tls-pack fills records across pieces as kernel TLS does,
		 * so a host sees a payload's end, its digest, the next
		 * header and data in one record. */
		ssize_t w;
		if (c->ssl && T.tls_pack)
			w = tls_write_packed(c, iov, n);
		else if (c->ssl)
			w = tgt_tls_write(c, iov[0].iov_base, iov[0].iov_len);
		else
			w = writev(c->fd, iov, (int)n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			conn_close(c, strerror(errno));
			return;
		}
		size_t left = (size_t)w;
		while (c->tx_head != c->tx_tail) {
			struct tgt_txe *e = &c->tx[c->tx_head];
			if (e->iov.iov_len > left) {
				e->iov.iov_base = (uint8_t *)e->iov.iov_base + left;
				e->iov.iov_len -= left;
				break;
			}
			left -= e->iov.iov_len;
			if (e->release)
				cmd_free(e->release);
			c->tx_head = (c->tx_head + 1) % c->tx_size;
		}
	}
	bool want = c->tx_head != c->tx_tail && !c->closing;
	if (want != c->want_out) {
		c->want_out = want;
		tgt_conn_arm(c);
	}
}

static void put_hdgst(struct tgt_conn *c, const void *hdr, size_t hlen, void *dst)
{
	uint32_t d = crc32c(hdr, hlen);
	if (T.f.corrupt_hdgst && (c->qid || !T.f.corrupt_io_only)) {
		T.f.corrupt_hdgst = false;
		d ^= 0x1;
		T.f.nr_injected++;
		log_notice("%s: fault: corrupting the header digest of a PDU of type 0x%02x",
			   c->peer, ((const struct nvme_tcp_hdr *)hdr)->type);
	}
	memcpy(dst, &d, 4);
}

static void pdu_hdr(struct tgt_conn *c, struct nvme_tcp_hdr *h, uint8_t type, uint8_t hlen)
{
	h->type = type;
	h->flags = c->hdgst ? NVME_TCP_F_HDGST : 0;
	h->hlen = hlen;
	h->pdo = 0;
	h->plen = (uint32_t)hlen + (c->hdgst ? 4 : 0);
}

void cmd_send_r2t(struct tgt_cmd *cmd)
{
	struct tgt_conn *c = cmd->conn;
	struct nvme_tcp_data *p = &cmd->r2t.pdu;
	uint32_t len = cmd->data_len - cmd->h2c_got;

	if (T.r2t_size && len > T.r2t_size)
		len = T.r2t_size;
	memset(p, 0, sizeof(*p));
	pdu_hdr(c, &p->hdr, NVME_TCP_R2T, sizeof(*p));
	p->cccid = cmd->sqe.cid;
	p->ttag = cmd->idx;
	p->offset = cmd->h2c_got;
	p->length = len;
	cmd->r2t_end = cmd->h2c_got + len;
	if (c->hdgst)
		put_hdgst(c, p, sizeof(*p), &cmd->r2t.hdgst);
	tx_push(c, &cmd->r2t, p->hdr.plen, NULL);
}

static void push_malformed(struct tgt_conn *c, const struct tgt_cmd *cmd)
{
	struct nvme_tcp_rsp *r = (void *)c->bad;
	int kind = T.f.malformed;
	const char *what = "?";

	T.f.malformed = BAD_NONE;
	T.f.nr_injected++;
	memset(c->bad, 0, sizeof(c->bad));
	pdu_hdr(c, &r->hdr, NVME_TCP_RSP, sizeof(*r));
	r->cqe.cid = cmd->sqe.cid;
	switch (kind) {
	case BAD_TYPE:
		r->hdr.type = 0x0a; /* reserved */
		what = "reserved PDU type 0x0a";
		break;
	case BAD_HLEN:
		r->hdr.hlen = 20;
		what = "CapsuleResp with hlen 20";
		break;
	case BAD_CID:
		r->cqe.cid = 0xfffe;
		what = "CapsuleResp for CID 0xfffe, not in flight";
		break;
	case BAD_PLEN:
		r->hdr.plen = 4096;
		what = "CapsuleResp with plen 4096";
		break;
	}
	if (c->hdgst)
		memcpy(c->bad + sizeof(*r), &(uint32_t){ crc32c(r, sizeof(*r)) }, 4);
	log_notice("%s: fault: sending a malformed PDU (%s)", c->peer, what);
	tx_push(c, c->bad, (size_t)sizeof(*r) + (c->hdgst ? 4 : 0), NULL);
}

void conn_send_malformed(struct tgt_conn *c, int kind)
{
	struct tgt_cmd fake = { .sqe.cid = 0 };
	T.f.malformed = kind;
	push_malformed(c, &fake);
}

void cmd_send_completion(struct tgt_cmd *cmd)
{
	struct tgt_conn *c = cmd->conn;
	uint16_t st = (uint16_t)(cmd->cqe.status >> 1);
	bool data = !cmd->h2c && cmd->data_len && st == 0;
	bool success = false;

	if (c->closing)
		return;
	cmd->state = CMD_SENDING;
	if (T.f.malformed && c->qid && cmd->sqe.opcode != NVME_FABRICS_COMMAND)
		push_malformed(c, cmd);
	if (data) {
		struct nvme_tcp_data *p = &cmd->c2h.pdu;
		uint32_t hd = c->hdgst ? 4 : 0, dd = c->ddgst ? 4 : 0;
		uint32_t hl = sizeof(*p) + hd;
		uint32_t pdo = (hl + c->hpda_bytes - 1) / c->hpda_bytes * c->hpda_bytes;

		success = T.success_mode > 0 || (T.success_mode == 0 && c->sq_flow_off);
		memset(p, 0, sizeof(*p));
		pdu_hdr(c, &p->hdr, NVME_TCP_C2H_DATA, sizeof(*p));
		p->hdr.flags |= (uint8_t)(NVME_TCP_F_DATA_LAST | (c->ddgst ? NVME_TCP_F_DDGST : 0) |
					  (success ? NVME_TCP_F_DATA_SUCCESS : 0));
		p->hdr.pdo = (uint8_t)pdo;
		p->hdr.plen = pdo + cmd->data_len + dd;
		p->cccid = cmd->sqe.cid;
		p->offset = 0;
		p->length = cmd->data_len;
		if (c->hdgst)
			put_hdgst(c, p, sizeof(*p), &cmd->c2h.hdgst);
		tx_push(c, &cmd->c2h, hl, NULL);
		tx_push(c, zeros, pdo - hl, NULL);
		tx_push(c, cmd->c2h_src, cmd->data_len, success && !dd ? cmd : NULL);
		if (dd) {
			cmd->ddgst = crc32c(cmd->c2h_src, cmd->data_len);
			if (T.f.corrupt_ddgst && (c->qid || !T.f.corrupt_io_only)) {
				T.f.corrupt_ddgst = false;
				T.f.nr_injected++;
				cmd->ddgst ^= 0x1;
				log_notice("%s: fault: corrupting the data digest of CID 0x%04x",
					   c->peer, cmd->sqe.cid);
			}
			tx_push(c, &cmd->ddgst, 4, success ? cmd : NULL);
		}
	}
	if (success)
		return;
	struct nvme_tcp_rsp *r = &cmd->rsp.pdu;
	pdu_hdr(c, &r->hdr, NVME_TCP_RSP, sizeof(*r));
	r->cqe = cmd->cqe;
	if (c->hdgst)
		put_hdgst(c, r, sizeof(*r), &cmd->rsp.hdgst);
	tx_push(c, &cmd->rsp, r->hdr.plen, cmd);
}

/* ---- closing ---- */

void conn_close(struct tgt_conn *c, const char *why)
{
	if (c->closing)
		return;
	c->closing = true;
	log_info("%s: connection closed: %s", c->peer, why);
	shutdown(c->fd, SHUT_RDWR);
	list_del(&c->link);
	list_add_tail(&T.dead, &c->link);
	if (c->on_flushq) {
		list_del(&c->flink);
		c->on_flushq = false;
	}
	/* Delayed completions of this connection will never be sent. */
	for (unsigned i = 0; i < c->nr_cmds; i++)
		if (c->cmds[i].state == CMD_DELAYED)
			list_del(&c->cmds[i].link);
	nvme_conn_gone(c);
}

void conn_fatal(struct tgt_conn *c, uint16_t fes, uint32_t fei, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (c->closing)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("%s: protocol error: %s", c->peer, msg);
	if (fes) {
		/* Best effort, and only at a PDU boundary of the stream: a
		 * C2HTermReq echoing the offending header, written at once. */
		uint32_t echo = c->rhdr_len < NVME_TCP_TERM_MAX_DATA ? c->rhdr_len :
								       NVME_TCP_TERM_MAX_DATA;
		memset(&c->term, 0, sizeof(c->term));
		c->term.pdu.hdr.type = NVME_TCP_C2H_TERM;
		c->term.pdu.hdr.hlen = sizeof(c->term.pdu);
		c->term.pdu.hdr.plen = (uint32_t)sizeof(c->term.pdu) + echo;
		c->term.pdu.fes = fes;
		c->term.pdu.fei = fei;
		memcpy(c->term.data, c->rhdr, echo);
		if (c->tx_head == c->tx_tail) {
			ssize_t r = c->ssl ? (c->tls_up ? tgt_tls_write(c, &c->term,
								       c->term.pdu.hdr.plen) : 0)
					   : send(c->fd, &c->term, c->term.pdu.hdr.plen,
						  MSG_DONTWAIT | MSG_NOSIGNAL);
			(void)r;
		}
	}
	conn_close(c, msg);
}

struct tgt_conn *conn_new(int fd, unsigned port, const char *peer)
{
	struct tgt_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->port = port;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->rbuf = malloc(RBUF_SIZE);
	c->hpda_bytes = 4;
	c->rx = RX_HDR;
	c->rhdr_need = sizeof(struct nvme_tcp_hdr);
	list_init(&c->flink);
	/* Slots for the deepest queue a Connect may ask for: the queue's
	 * size is known only after the first capsule. */
	if (!c->rbuf || conn_alloc_cmds(c, TGT_MQES + 1) < 0 || tgt_tls_conn(c) < 0) {
		conn_free(c);
		return NULL;
	}
	return c;
}

void conn_free(struct tgt_conn *c)
{
	tgt_tls_free(c);
	if (c->fd >= 0)
		close(c->fd);
	free(c->rbuf);
	free(c->cmds);
	free(c->bufs);
	free(c->tx);
	free(c);
}

/* ---- receive ---- */

static void rx_reset(struct tgt_conn *c)
{
	c->rx = RX_HDR;
	c->rhdr_len = 0;
	c->rhdr_need = sizeof(struct nvme_tcp_hdr);
	c->rx_cmd = NULL;
	c->data_dst = NULL;
	c->pad_left = c->data_left = 0;
}

static uint8_t want_hlen(uint8_t type)
{
	switch (type) {
	case NVME_TCP_ICREQ:
		return sizeof(struct nvme_tcp_icreq);
	case NVME_TCP_H2C_TERM:
		return sizeof(struct nvme_tcp_term);
	case NVME_TCP_CMD:
		return sizeof(struct nvme_tcp_cmd);
	case NVME_TCP_H2C_DATA:
		return sizeof(struct nvme_tcp_data);
	}
	return 0;
}

static bool has_hdgst(uint8_t type)
{
	return type == NVME_TCP_CMD || type == NVME_TCP_H2C_DATA;
}

static int check_ch(struct tgt_conn *c)
{
	const struct nvme_tcp_hdr *h = (const void *)c->rhdr;
	uint8_t want = want_hlen(h->type);
	uint32_t hd = c->hdgst && has_hdgst(h->type) ? 4 : 0;

	if (!want) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 0, "PDU type 0x%02x is not for a target",
			   h->type);
		return -1;
	}
	if ((h->type == NVME_TCP_ICREQ) == c->ic_done && h->type != NVME_TCP_H2C_TERM) {
		conn_fatal(c, NVME_TCP_FES_PDU_SEQ_ERR, 0, "PDU type 0x%02x out of sequence (%s)",
			   h->type, c->ic_done ? "after ICReq" : "before ICReq");
		return -1;
	}
	if (h->hlen != want) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 2, "PDU type 0x%02x with hlen %u, want %u",
			   h->type, h->hlen, want);
		return -1;
	}
	if (has_hdgst(h->type) && !!(h->flags & NVME_TCP_F_HDGST) != c->hdgst) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 1,
			   "PDU type 0x%02x: header digest flag %s negotiated", h->type,
			   c->hdgst ? "missing, but" : "set, not");
		return -1;
	}
	if (h->plen < (uint32_t)h->hlen + hd) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 4, "PDU type 0x%02x: plen %u < header",
			   h->type, h->plen);
		return -1;
	}
	if (h->type == NVME_TCP_ICREQ && h->plen != want) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 4, "ICReq with plen %u", h->plen);
		return -1;
	}
	if (h->type == NVME_TCP_H2C_TERM && h->plen > (uint32_t)h->hlen + 152) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 4, "H2CTermReq with plen %u", h->plen);
		return -1;
	}
	c->rhdr_need = (uint32_t)h->hlen + hd;
	return 0;
}

/* Validates pdo/plen of a PDU that may carry data; returns the data length
 * or -1 after failing the connection. */
static int64_t data_span(struct tgt_conn *c, uint32_t *pad)
{
	const struct nvme_tcp_hdr *h = (const void *)c->rhdr;
	uint32_t hl = c->rhdr_need, dd = c->ddgst ? 4 : 0;

	if (h->plen == hl) {
		if (h->flags & NVME_TCP_F_DDGST) {
			conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 1,
				   "PDU type 0x%02x without data has the data digest flag", h->type);
			return -1;
		}
		*pad = 0;
		return 0;
	}
	if (!!(h->flags & NVME_TCP_F_DDGST) != c->ddgst) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 1,
			   "PDU type 0x%02x: data digest flag %s negotiated", h->type,
			   c->ddgst ? "missing, but" : "set, not");
		return -1;
	}
	/* CPDA 0: data starts at a 4-byte boundary after the header. */
	if (h->pdo < hl || h->pdo % 4 || (uint64_t)h->pdo + dd >= h->plen) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 3,
			   "PDU type 0x%02x: pdo %u with header %u and plen %u", h->type, h->pdo,
			   hl, h->plen);
		return -1;
	}
	*pad = h->pdo - hl;
	return (int64_t)h->plen - h->pdo - dd;
}

static void handle_icreq(struct tgt_conn *c)
{
	const struct nvme_tcp_icreq *ic = (const void *)c->rhdr;
	struct nvme_tcp_icresp *r = &c->icresp;

	if (ic->pfv != 0) {
		conn_fatal(c, NVME_TCP_FES_UNSUPPORTED_PARAM, 8, "ICReq with PFV %u", ic->pfv);
		return;
	}
	if (ic->hpda > 31) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 10, "ICReq with HPDA %u", ic->hpda);
		return;
	}
	if (ic->digest & ~3u) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 11, "ICReq with digest bits 0x%x",
			   ic->digest);
		return;
	}
	c->hdgst = ic->digest & NVME_TCP_DIGEST_HDR;
	c->ddgst = ic->digest & NVME_TCP_DIGEST_DATA;
	c->hpda_bytes = (uint8_t)((ic->hpda + 1u) * 4u);
	c->maxr2t = ic->maxr2t + 1;
	c->ic_done = true;
	memset(r, 0, sizeof(*r));
	r->hdr.type = NVME_TCP_ICRESP;
	r->hdr.hlen = sizeof(*r);
	r->hdr.plen = sizeof(*r);
	r->pfv = 0;
	r->cpda = 0;
	r->digest = ic->digest;
	r->maxdata = T.maxh2cdata;
	log_debug("%s: ICReq: hdgst %d ddgst %d hpda %u maxr2t %u", c->peer, c->hdgst, c->ddgst,
		  ic->hpda, c->maxr2t);
	tx_push(c, r, sizeof(*r), NULL);
}

static void handle_term(struct tgt_conn *c)
{
	const struct nvme_tcp_term *t = (const void *)c->rhdr;
	char why[96];

	snprintf(why, sizeof(why), "host sent H2CTermReq (fes 0x%x, fei 0x%x)", t->fes, t->fei);
	log_notice("%s: %s", c->peer, why);
	conn_close(c, why);
}

static void handle_cmd(struct tgt_conn *c)
{
	const struct nvme_tcp_cmd *p = (const void *)c->rhdr;
	struct list_node *n;
	struct tgt_cmd *cmd;
	uint32_t pad;
	int64_t len = data_span(c, &pad);

	if (len < 0)
		return;
	if (len > (p->sqe.opcode == NVME_FABRICS_COMMAND || !c->qid ? NVME_TCP_ADMIN_CCSZ :
									  TGT_INCAPSULE)) {
		conn_fatal(c, NVME_TCP_FES_DATA_LIMIT_EXCEEDED, 4,
			   "capsule with %lld bytes of in-capsule data", (long long)len);
		return;
	}
	/* More commands than the queue has entries: the host broke the
	 * Connect's SQSIZE (responses not yet written still hold theirs). */
	n = list_pop(&c->free_cmds);
	if (n)
		c->nr_busy++;
	if (!n || (c->connected && c->nr_busy > c->qsize)) {
		conn_fatal(c, NVME_TCP_FES_PDU_SEQ_ERR, 0,
			   "command CID 0x%04x beyond the queue's %u entries", p->sqe.cid,
			   c->connected ? c->qsize : c->nr_cmds);
		if (n) {
			c->nr_busy--;
			list_add_head(&c->free_cmds, n);
		}
		return;
	}
	cmd = container_of(n, struct tgt_cmd, link);
	cmd->sqe = p->sqe;
	cmd->state = CMD_DATA_IN;
	cmd->h2c = false;
	cmd->data_len = cmd->h2c_got = cmd->r2t_end = 0;
	cmd->c2h_src = NULL;
	c->nr_cmds_rx++;
	T.nr_cmds_total++;
	if (c->qid)
		T.ports[c->port].nr_io_cmds++;
	if (c->connected && c->qsize)
		c->sqhd = (uint16_t)((c->sqhd + 1) % c->qsize);
	if (len) {
		c->rx_cmd = cmd;
		c->data_dst = cmd->buf;
		c->data_left = (uint32_t)len;
		c->pad_left = pad;
		c->rx_crc = crc32c_init();
		c->rx = pad ? RX_PAD : RX_DATA;
		return;
	}
	rx_reset(c);
	nvme_cmd_arrived(cmd, 0);
	faults_count_command();
}

static void handle_h2c(struct tgt_conn *c)
{
	const struct nvme_tcp_data *p = (const void *)c->rhdr;
	struct tgt_cmd *cmd;
	uint32_t pad;
	int64_t len = data_span(c, &pad);

	if (len < 0)
		return;
	if (p->ttag >= c->nr_cmds || (cmd = &c->cmds[p->ttag])->state != CMD_DATA_IN ||
	    !cmd->h2c || cmd->sqe.cid != p->cccid || cmd->r2t_end == 0) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 10,
			   "H2CData for CID 0x%04x TTAG 0x%04x, which has no active R2T", p->cccid,
			   p->ttag);
		return;
	}
	if (len != p->length || !len || p->offset != cmd->h2c_got ||
	    (uint64_t)p->offset + p->length > cmd->r2t_end) {
		conn_fatal(c, NVME_TCP_FES_DATA_OUT_OF_RANGE, 12,
			   "H2CData for CID 0x%04x carries [%u, +%u) (PDU data %lld), R2T wants "
			   "[%u, %u)",
			   p->cccid, p->offset, p->length, (long long)len, cmd->h2c_got,
			   cmd->r2t_end);
		return;
	}
	if (p->length > T.maxh2cdata) {
		conn_fatal(c, NVME_TCP_FES_DATA_LIMIT_EXCEEDED, 16,
			   "H2CData of %u bytes, MAXH2CDATA is %u", p->length, T.maxh2cdata);
		return;
	}
	if (!!(p->hdr.flags & NVME_TCP_F_DATA_LAST) != (p->offset + p->length == cmd->r2t_end)) {
		conn_fatal(c, NVME_TCP_FES_INVALID_PDU_HDR, 1,
			   "H2CData for CID 0x%04x at [%u, +%u): LAST_PDU %s, R2T ends at %u",
			   p->cccid, p->offset, p->length,
			   p->hdr.flags & NVME_TCP_F_DATA_LAST ? "set" : "clear", cmd->r2t_end);
		return;
	}
	c->rx_cmd = cmd;
	c->data_dst = cmd->buf + p->offset;
	c->data_left = (uint32_t)len;
	c->pad_left = pad;
	c->rx_crc = crc32c_init();
	c->rx = pad ? RX_PAD : RX_DATA;
}

static void handle_header(struct tgt_conn *c)
{
	const struct nvme_tcp_hdr *h = (const void *)c->rhdr;

	if (c->hdgst && has_hdgst(h->type)) {
		uint32_t want, got = crc32c(c->rhdr, h->hlen);
		memcpy(&want, c->rhdr + h->hlen, 4);
		if (want != got) {
			conn_fatal(c, NVME_TCP_FES_HDR_DIGEST_ERR, 0,
				   "header digest mismatch on PDU type 0x%02x (got 0x%08x, "
				   "computed 0x%08x)",
				   h->type, want, got);
			return;
		}
	}
	switch (h->type) {
	case NVME_TCP_ICREQ:
		handle_icreq(c);
		rx_reset(c);
		return;
	case NVME_TCP_H2C_TERM:
		handle_term(c);
		return;
	case NVME_TCP_CMD:
		handle_cmd(c);
		return;
	case NVME_TCP_H2C_DATA:
		handle_h2c(c);
		return;
	}
}

/* The data of a PDU (and its digest) is in place. */
static void data_complete(struct tgt_conn *c)
{
	struct tgt_cmd *cmd = c->rx_cmd;
	const struct nvme_tcp_hdr *h = (const void *)c->rhdr;

	if (h->type == NVME_TCP_CMD) {
		uint32_t len = (uint32_t)(c->data_dst - cmd->buf);
		rx_reset(c);
		nvme_cmd_arrived(cmd, len);
		faults_count_command();
		return;
	}
	const struct nvme_tcp_data *p = (const void *)c->rhdr;
	cmd->h2c_got = p->offset + p->length;
	rx_reset(c);
	if (cmd->h2c_got == cmd->data_len) {
		cmd->r2t_end = 0;
		nvme_cmd_data_done(cmd);
	} else if (cmd->h2c_got == cmd->r2t_end) {
		cmd_send_r2t(cmd);
	}
}

static void data_done(struct tgt_conn *c)
{
	if (c->ddgst) {
		c->rx = RX_DDGST;
		c->ddgst_len = 0;
		return;
	}
	data_complete(c);
}

static void consume(struct tgt_conn *c)
{
	while (c->roff < c->rlen && !c->closing) {
		uint32_t avail = c->rlen - c->roff, n;
		const uint8_t *b = c->rbuf + c->roff;

		switch (c->rx) {
		case RX_HDR:
			n = c->rhdr_need - c->rhdr_len;
			if (n > avail)
				n = avail;
			memcpy(c->rhdr + c->rhdr_len, b, n);
			c->rhdr_len += n;
			c->roff += n;
			if (c->rhdr_len < c->rhdr_need)
				break;
			if (c->rhdr_need == sizeof(struct nvme_tcp_hdr)) {
				if (check_ch(c) < 0)
					return;
				if (c->rhdr_len < c->rhdr_need)
					break;
			}
			handle_header(c);
			break;
		case RX_PAD:
			n = c->pad_left < avail ? c->pad_left : avail;
			c->pad_left -= n;
			c->roff += n;
			if (!c->pad_left)
				c->rx = RX_DATA;
			break;
		case RX_DATA:
			n = c->data_left < avail ? c->data_left : avail;
			memcpy(c->data_dst, b, n);
			if (c->ddgst)
				c->rx_crc = crc32c_update(c->rx_crc, b, n);
			c->data_dst += n;
			c->data_left -= n;
			c->roff += n;
			if (!c->data_left)
				data_done(c);
			break;
		case RX_DDGST:
			n = 4 - c->ddgst_len;
			if (n > avail)
				n = avail;
			memcpy(c->ddgst_buf + c->ddgst_len, b, n);
			c->ddgst_len += n;
			c->roff += n;
			if (c->ddgst_len == 4) {
				uint32_t want, got = crc32c_final(c->rx_crc);
				memcpy(&want, c->ddgst_buf, 4);
				if (want != got) {
					/* As the Linux target does: no fatal error
					 * status fits, so the connection just closes. */
					char why[128];
					snprintf(why, sizeof(why),
						 "data digest mismatch for CID 0x%04x (got 0x%08x, "
						 "computed 0x%08x)",
						 c->rx_cmd->sqe.cid, want, got);
					log_warn("%s: %s", c->peer, why);
					conn_close(c, why);
					return;
				}
				data_complete(c);
			}
			break;
		}
	}
}

void conn_readable(struct tgt_conn *c)
{
	if (c->tls_sniff) {
		int r = tgt_tls_sniff(c);
		if (r < 0) {
			c->tls_sniff = false;
			conn_close(c, "closed before its first byte");
		}
		if (r <= 0)
			return;
	}
	if (c->ssl && tgt_tls_handshake(c) <= 0)
		return;
	for (int loops = 0; loops < 16 && !c->closing; loops++) {
		ssize_t r;

		if (c->ssl) {
			if (c->roff == c->rlen)
				c->roff = c->rlen = 0;
			r = tgt_tls_read(c, c->rbuf + c->rlen, RBUF_SIZE - c->rlen);
			if (r > 0) {
				c->rlen += (uint32_t)r;
				consume(c);
				/* A record may be buffered in OpenSSL with nothing
				 * left in the socket to wake epoll. */
				loops = 0;
				continue;
			}
		} else if (c->rx == RX_DATA && c->roff == c->rlen && c->data_left >= DIRECT_MIN) {
			/* Large payload: straight into the slot's buffer. */
			r = read(c->fd, c->data_dst, c->data_left);
			if (r > 0) {
				if (c->ddgst)
					c->rx_crc = crc32c_update(c->rx_crc, c->data_dst, (size_t)r);
				c->data_dst += r;
				c->data_left -= (uint32_t)r;
				if (!c->data_left)
					data_done(c);
				continue;
			}
		} else {
			if (c->roff == c->rlen)
				c->roff = c->rlen = 0;
			r = read(c->fd, c->rbuf + c->rlen, RBUF_SIZE - c->rlen);
			if (r > 0) {
				c->rlen += (uint32_t)r;
				consume(c);
				continue;
			}
		}
		if (r == 0) {
			conn_close(c, "host closed the connection");
			return;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno != EINTR) {
			conn_close(c, strerror(errno));
			return;
		}
	}
}
