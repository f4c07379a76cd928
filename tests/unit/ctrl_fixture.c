/* See ctrl_fixture.h.  The admin queue is built by the production
 * constructor (nvmf_queue_init with the controller, qid 0: its reserve as
 * in production); only the connection set-up (connect, ICReq/ICResp,
 * Fabrics Connect, the bring-up) is skipped by setting the state it leaves
 * behind, as tcp_fixture.c does for an I/O queue. */
#include "tests/unit/ctrl_fixture.h"
#include "tests/unit/tcp_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/ctrl_priv.h"

static void fx_ns_cb(struct nvmf_ctrl *c)
{
	struct ctrl_fixture *f = c->owner;

	f->ns_cb_calls++;
}

int ctrlfx_init(struct ctrl_fixture *f, const char *name)
{
	struct nvmf_ctrl *c = &f->c;
	int sv[2], ret;

	memset(f, 0, sizeof(*f));
	f->peer = -1;
	if ((ret = reactor_init(&f->r, 0, 64)) < 0)
		return ret;
	snprintf(c->opts.name, sizeof(c->opts.name), "%s", name);
	c->opts.path.trtype = NVMF_TR_TCP;
	c->opts.path.tos = -1;
	strcpy(c->opts.path.traddr, "127.0.0.1");
	strcpy(c->opts.path.trsvcid, "4420");
	c->r = &f->r;
	c->owner = f;
	c->ns_cb = fx_ns_cb;
	ctrl_ns_change_init(c);
	ctrl_kato_init(c); /* armed by a test only (opts.kato_ms 0) */
	list_init(&c->abort_wait);
	c->id = aligned_alloc(4096, sizeof(*c->id));
	c->ns = calloc(NVME_CHANGED_NS_MAX, sizeof(*c->ns));
	if (!c->id || !c->ns) {
		ret = -ENOMEM;
		goto fail;
	}
	memset(c->id, 0, sizeof(*c->id));
	c->id->oaes = NVME_CTRL_OAES_NS_ATTR;
	ret = nvmf_queue_init(&c->adminq, c, &f->r, 0, ADMIN_QUEUE_SIZE, &c->opts.path);
	if (ret < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		ret = -errno;
		nvmf_queue_free(&c->adminq);
		goto fail;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	f->peer = sv[1];
	f->tq = c->adminq.tp;
	f->tq->fd = sv[0];
	f->tq->conn = TCP_CONN_LIVE;
	f->tq->cpda_bytes = 4;
	f->tq->maxh2cdata = 4096;
	tcp_rx_reset(f->tq);
	nvmf_queue_set_state(&c->adminq, NVMF_Q_CONNECTING);
	nvmf_queue_set_state(&c->adminq, NVMF_Q_FABRIC_CONNECT);
	nvmf_queue_set_state(&c->adminq, NVMF_Q_LIVE);
	c->state = NVMF_CTRL_LIVE;
	return 0;
fail:
	free(c->id);
	free(c->ns);
	reactor_fini(&f->r);
	return ret;
}

static void pull_peer(struct ctrl_fixture *f)
{
	tcpfx_drain(f->peer, f->sent, sizeof(f->sent), &f->sent_len);
}

bool ctrlfx_settle(struct ctrl_fixture *f)
{
	for (int i = 0; i < 500; i++) {
		pull_peer(f);
		if (!f->tq->ops_in_flight && !f->tq->quiesce_queued && list_empty(&f->r.deferred) &&
		    !f->r.pending_submit)
			return true;
		reactor_poll(&f->r, f->tq->ops_in_flight || f->r.pending_submit ?
					    10 * NSEC_PER_MSEC : 0);
	}
	return false;
}

void ctrlfx_fini(struct ctrl_fixture *f)
{
	struct nvmf_ctrl *c = &f->c;

	/* The host's commands still outstanding complete with an error,
	 * their owners' callbacks seeing a controller no longer LIVE. */
	c->state = NVMF_CTRL_DEAD;
	if (c->adminq.state != NVMF_Q_DEAD && c->adminq.state != NVMF_Q_DRAINING)
		nvmf_queue_shutdown(&c->adminq, -ECANCELED);
	ctrlfx_settle(f);
	nvmf_queue_free(&c->adminq);
	ctrl_ns_change_free(c);
	free(c->id);
	free(c->ns);
	c->id = NULL;
	c->ns = NULL;
	if (f->peer >= 0)
		close(f->peer);
	f->peer = -1;
	reactor_stop(&f->r);
	reactor_fini(&f->r);
}

bool ctrlfx_next_cmd(struct ctrl_fixture *f, struct nvme_sqe *sqe)
{
	struct nvme_tcp_cmd cmd;

	ctrlfx_settle(f);
	if (f->sent_len < sizeof(cmd))
		return false;
	memcpy(&cmd, f->sent, sizeof(cmd));
	/* Admin commands here carry no in-capsule data: each is 72 bytes. */
	size_t plen = cmd.hdr.plen >= sizeof(cmd) && cmd.hdr.plen <= f->sent_len ? cmd.hdr.plen
										   : sizeof(cmd);
	memmove(f->sent, f->sent + plen, f->sent_len - plen);
	f->sent_len -= plen;
	*sqe = cmd.sqe;
	return true;
}

bool ctrlfx_wait_cmd(struct ctrl_fixture *f, struct nvme_sqe *sqe, unsigned ms)
{
	uint64_t end = reactor_now_ns() + (uint64_t)ms * NSEC_PER_MSEC;

	while (!ctrlfx_next_cmd(f, sqe)) {
		if (reactor_now_ns() >= end)
			return false;
		reactor_poll(&f->r, 10 * NSEC_PER_MSEC);
	}
	return true;
}

bool ctrlfx_reply(struct ctrl_fixture *f, uint16_t cid, const void *data, uint32_t len,
		  uint16_t status, uint32_t dw0)
{
	static uint8_t buf[sizeof(struct nvme_tcp_data) + 8192 + sizeof(struct nvme_tcp_rsp)];
	size_t n = 0;

	if (len > 8192)
		len = 8192;
	if (len) {
		struct nvme_tcp_data p = {
			.hdr = { .type = NVME_TCP_C2H_DATA,
				 .flags = NVME_TCP_F_DATA_LAST,
				 .hlen = sizeof(p),
				 .pdo = sizeof(p),
				 .plen = (uint32_t)sizeof(p) + len },
			.cccid = cid,
			.length = len,
		};
		memcpy(buf, &p, sizeof(p));
		memcpy(buf + sizeof(p), data, len);
		n = sizeof(p) + len;
	}
	struct nvme_tcp_rsp r = { .hdr = { .type = NVME_TCP_RSP,
					   .hlen = sizeof(r),
					   .plen = sizeof(r) } };
	r.cqe.cid = cid;
	r.cqe.status = (uint16_t)(status << 1);
	r.cqe.result.dw0 = dw0;
	memcpy(buf + n, &r, sizeof(r));
	n += sizeof(r);
	int ret = tcp_rx_consume(f->tq, buf, (uint32_t)n);
	ctrlfx_settle(f);
	return ret == (int)n;
}

void ctrlfx_arm_aer(struct ctrl_fixture *f)
{
	ctrl_aer_submit(&f->c);
	ctrlfx_settle(f);
}

void ctrlfx_id_ns(struct nvme_id_ns *id, uint64_t nsze, uint8_t ds, uint8_t tag)
{
	memset(id, 0, sizeof(*id));
	id->nsze = id->ncap = id->nuse = nsze;
	id->nlbaf = 0;
	id->flbas = 0;
	id->lbaf[0].ds = ds;
	memset(id->nguid, tag, sizeof(id->nguid));
	memset(id->eui64, tag, sizeof(id->eui64));
}
