/* A live NVMe/TCP host queue without a target: the unit tests and the
 * fuzzer play the controller by feeding PDUs to tcp_rx_consume() and read
 * what the host sent from the other end of a socketpair. */
#ifndef TESTS_TCP_FIXTURE_H
#define TESTS_TCP_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/base/reactor.h"
#include "transports/tcp/tcp_internal.h"

#define TCPFX_MAX_REQS 64

struct tcp_fixture {
	struct reactor own_r;
	struct reactor *r; /* own_r, or the caller's */
	struct nvmf_queue q;
	struct tcp_queue *tq;
	int peer; /* the "controller" end of the socketpair */
	/* Per pool slot: how often done() ran, and with which error. */
	unsigned done_count[TCPFX_MAX_REQS];
	int done_err[TCPFX_MAX_REQS];
	uint16_t done_status[TCPFX_MAX_REQS];
	/* Called first in each completion, as a request's owner would (e.g.
	 * to free the data buffer); NULL: nothing. */
	void (*on_done)(struct tcp_fixture *f, struct nvmf_req *req, int err);
	/* Given to each read submitted next (req->sink); NULL: none. */
	struct pipe_sink *sink;
	/* With sink: where that read's data starts in the pipe's stream
	 * (req->sink_off, as a later command of a read split at MDTS). */
	uint32_t sink_off;
	/* Given to each write submitted next (req->sink: its payload is in
	 * this pipe when filled == len); NULL: none. */
	struct pipe_sink *wsink;
	/* What the host sent, not read by the test yet. */
	uint8_t sent[128 * 1024];
	size_t sent_len;
};

/* A LIVE queue of qsize entries with the given digests, MAXH2CDATA 4096
 * and CPDA 0, on reactor r (NULL: a reactor of its own).  0 or -errno. */
int tcpfx_init(struct tcp_fixture *f, struct reactor *r, uint16_t qsize, bool hdgst,
	       bool ddgst);
/* Tears the queue down the production way and frees everything. */
void tcpfx_fini(struct tcp_fixture *f);
/* A read (write=false) or write of len bytes into/from buf, submitted and
 * its command handed to the socket.  NULL if the pool is empty. */
struct nvmf_req *tcpfx_submit(struct tcp_fixture *f, bool write, void *buf, uint32_t len);
/* The same, but the command's send is left in flight, not reaped: what
 * the target sees before the host's reactor runs again. */
/* The completion the fixture's requests get: counts it per slot. */
void tcpfx_done(struct nvmf_req *req, int err);
struct nvmf_req *tcpfx_submit_nowait(struct tcp_fixture *f, bool write, void *buf,
				     uint32_t len);
/* Runs the reactor until nothing of the queue's is pending: sends reaped,
 * deferred work done.  false if that did not happen (bounded). */
bool tcpfx_settle(struct tcp_fixture *f);
unsigned tcpfx_slot(const struct nvmf_req *req);
/* Reads what is waiting on fd into buf (cap bytes, *len used so far),
 * non-blocking; bytes beyond cap are read and dropped, so that a full
 * socket never stalls the host's sends. */
void tcpfx_drain(int fd, uint8_t *buf, size_t cap, size_t *len);
/* Bytes the host sent that the test has not read yet, non-blocking. */
size_t tcpfx_peer_read(struct tcp_fixture *f, uint8_t *buf, size_t cap);

/* PDU builders: append to buf at *len (digests as negotiated on f). */
void pdu_rsp(const struct tcp_fixture *f, uint8_t *buf, size_t *len, uint16_t cid,
	     uint16_t status);
void pdu_c2h(const struct tcp_fixture *f, uint8_t *buf, size_t *len, uint16_t cid,
	     uint32_t off, const void *data, uint32_t dlen, uint8_t flags);
void pdu_r2t(const struct tcp_fixture *f, uint8_t *buf, size_t *len, uint16_t cid,
	     uint32_t off, uint32_t rlen);
void pdu_term(uint8_t *buf, size_t *len, uint16_t fes, uint32_t fei);

#endif
