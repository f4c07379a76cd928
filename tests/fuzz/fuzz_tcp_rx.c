/* libFuzzer harness for the NVMe/TCP receive path: arbitrary bytes from a
 * "controller" into tcp_rx_consume() on a live queue with requests in
 * flight.  Beyond the sanitizers, it checks the engine's contract: the
 * stream is either consumed whole or the connection is failed, and every
 * request completes exactly once.
 *
 * Input: a 22-byte header, then the byte stream.
 *   [0]      bit 0 header digest, bit 1 data digest; bits 4-7: feed the
 *            stream in pieces of 1 << (n - 1) bytes (0: all at once);
 *            bit 2: scripted (below); bit 3 (not scripted): through the
 *            socket (below)
 *   [1]      number of requests (1..4, taken modulo)
 *   [2..21]  per request: 1 byte write (bit 0) and, for a read, a pipe
 *            (bit 1: req->sink, a 64 KiB pipe behind a 3-byte prefix),
 *            or (bit 2, before bit 1) a later part of the read before it,
 *            4 bytes LE data length (capped at 256 KiB; 0 = no data)
 * Request k gets CID k | (k + 1) << 12 (a fresh pool hands them out in
 * that order), which tests/fuzz/pcap2corpus.py relies on.
 *
 * Scripted (bit 2): the input also decides when the host's sends settle,
 * so that a PDU can arrive while the command it answers is still being
 * sent (issue 14 defect 3).  The requests are submitted without reaping
 * their sends, and the stream is a sequence of steps, each a control byte
 * and the piece it announces:
 *   bits 0-4  n: piece length n + 1 (n < 24) or 32 << (n - 24) bytes
 *   bits 5-7  before feeding: 0-3 nothing, 4-5 one non-blocking reactor
 *             pass (what is done is reaped), 6-7 settle everything.
 *
 * Socket (bit 3): the pieces are written into the controller's end of
 * the socketpair and the queue's own receive loop reads them (tcp.c's
 * tcp_recv_arm/recv_done), so that its shaping is fuzzed too: a staged
 * read sized by tcp_rx_staged_len, payload received straight into the
 * request's buffer with the stream's staged tail (tcp_rx_direct_done).
 * Beyond the contract above: bytes never sit unread in the host's socket
 * while its queue is live (a receive loop that stops would hang I/O).
 *
 * With a pipe, the payload goes wholly to the pipe or wholly to the buffer:
 * after a successful read the pipe counts 0 or all of it, and at the end
 * the pipe holds exactly the prefix and what it counts.
 *
 * Parts (bit 2): a read of nonzero length after a read with a pipe (of
 * nonzero length) shares that pipe as the next command of one read split
 * at MDTS (transports/io.c): req->sink_off is where its data starts in the
 * stream, and it appends only when the pipe holds exactly the parts before
 * it.  The pipe never counts more than the stream, at any point; once
 * every part succeeded, what it holds joins the parts' buffers as
 * io_pipe_settle does (pipe_sink_unsplice over their iovec), unless it
 * holds the whole stream. */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/pipe_sink.h"
#include "tests/unit/tcp_fixture.h"

#define NREQ 4
#define MAX_LEN (256u * 1024)
#define HDR_LEN (2 + NREQ * 5)

static struct reactor reactor;
static struct tcp_fixture fx;
static uint8_t bufs[NREQ][MAX_LEN];
static struct pipe_sink pipes[NREQ];
/* Per request: the pipe it appends to (-1: none), where its data starts
 * in that pipe's stream, its length; per pipe: the stream's length. */
static int pipe_of[NREQ];
static uint32_t part_off[NREQ], req_len[NREQ], stream_len[NREQ];
static unsigned cur_nreq;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* Every rejected input logs its reason: below ERR, unless asked. */
	if (!getenv("FUZZ_VERBOSE"))
		log_set_level((enum log_level)(LOG_LVL_ERR - 1));
	if (reactor_init(&reactor, 0, 64) < 0)
		abort();
	for (unsigned k = 0; k < NREQ; k++)
		if (pipe_sink_open(&pipes[k], 65536) < 0)
			abort();
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A pipe never counts more than its stream, at any point. */
static void check_streams(void)
{
	for (unsigned k = 0; k < cur_nreq; k++) {
		if (pipe_of[k] == (int)k && pipes[k].filled > stream_len[k]) {
			fprintf(stderr, "request %u: its pipe counts %u bytes of a %u-byte stream\n",
				k, pipes[k].filled, stream_len[k]);
			abort();
		}
	}
}

/* Nothing completes twice, at any point (not only at the end, where a
 * double completion could hide behind a reused slot). */
static void check_once(unsigned nreq, const unsigned *slots)
{
	for (unsigned k = 0; k < nreq; k++) {
		if (fx.done_count[slots[k]] > 1) {
			fprintf(stderr, "request %u completed %u times\n", k,
				fx.done_count[slots[k]]);
			abort();
		}
	}
	check_streams();
}

/* A completed request's buffer is the owner's again: poison it, so that
 * the transport touching it later is a use-after-poison under ASan. */
static void poison_done(struct tcp_fixture *f, struct nvmf_req *req, int err)
{
	(void)f;
	(void)err;
	for (unsigned i = 0; i < (unsigned)req->iovcnt; i++)
		ASAN_POISON_MEMORY_REGION(req->iov[i].iov_base, req->iov[i].iov_len);
}

/* Bytes the host has not read from its socket yet (0 once the queue
 * failed: its socket may be closed). */
static int unread(void)
{
	int n = 0;
	if (fx.q.state != NVMF_Q_LIVE || fx.tq->fd < 0 || ioctl(fx.tq->fd, FIONREAD, &n) < 0)
		return 0;
	return n;
}

/* Through the socket: each piece written, then the reactor run until the
 * host has read everything or its queue failed. */
static void feed_socket(const uint8_t *s, size_t left, size_t piece, unsigned nreq,
			const unsigned *slots)
{
	uint8_t scratch[4096];

	tcp_recv_arm(fx.tq);
	while (left && fx.q.state == NVMF_Q_LIVE) {
		size_t n = left < piece ? left : piece;
		ssize_t w = send(fx.peer, s, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0)
			w = 0; /* the socket is full: the host reads some first */
		s += w;
		left -= (size_t)w;
		/* Bounded by progress: every pass the host reads or fails. */
		for (int idle = 0; fx.q.state == NVMF_Q_LIVE && unread() > 0; ) {
			int before = unread();
			reactor_poll(fx.r, idle ? NSEC_PER_MSEC : 0);
			tcpfx_peer_read(&fx, scratch, sizeof(scratch));
			idle = unread() < before ? 0 : idle + 1;
			if (idle > 2000) {
				fprintf(stderr, "%d bytes unread in the host's socket, its queue "
						"live, for 2000 reactor passes\n", unread());
				abort();
			}
		}
		check_once(nreq, slots);
	}
	/* As tcpfx_settle, but the armed receive stays armed. */
	for (int i = 0; i < 500 && fx.q.state == NVMF_Q_LIVE; i++) {
		if (fx.tq->ops_in_flight <= (unsigned)fx.tq->recv_pending &&
		    list_empty(&fx.r->deferred) && !fx.r->pending_submit)
			break;
		tcpfx_peer_read(&fx, scratch, sizeof(scratch));
		reactor_poll(fx.r, NSEC_PER_MSEC);
	}
	check_once(nreq, slots);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvmf_req *reqs[NREQ];
	unsigned nreq, slots[NREQ];

	if (size < HDR_LEN)
		return -1;
	if (tcpfx_init(&fx, &reactor, 16, data[0] & 1, data[0] & 2) < 0)
		abort();
	fx.on_done = poison_done;
	nreq = data[1] % NREQ + 1;
	cur_nreq = nreq;
	bool scripted = data[0] & 4;
	for (unsigned k = 0; k < nreq; k++) {
		const uint8_t *d = data + 2 + k * 5;
		uint32_t len = le32(d + 1);
		if (len > MAX_LEN)
			len %= MAX_LEN + 1;
		req_len[k] = len;
		pipe_of[k] = -1;
		part_off[k] = stream_len[k] = 0;
		fx.sink = NULL;
		fx.sink_off = 0;
		if ((d[0] & 5) == 4 && k && len && pipe_of[k - 1] >= 0 && req_len[k - 1]) {
			int h = pipe_of[k - 1];
			pipe_of[k] = h;
			part_off[k] = part_off[k - 1] + req_len[k - 1];
			stream_len[h] += len;
			fx.sink = &pipes[h];
			fx.sink_off = part_off[k];
		} else if ((d[0] & 3) == 2) {
			pipe_of[k] = (int)k;
			stream_len[k] = len;
			if (pipe_sink_empty(&pipes[k]) < 0) {
				pipe_sink_close(&pipes[k]);
				if (pipe_sink_open(&pipes[k], 65536) < 0)
					abort();
			}
			if (pipe_sink_set_prefix(&pipes[k], "PFX", 3) < 0)
				abort();
			fx.sink = &pipes[k];
		}
		reqs[k] = scripted ? tcpfx_submit_nowait(&fx, d[0] & 1, bufs[k], len) :
				     tcpfx_submit(&fx, d[0] & 1, bufs[k], len);
		fx.sink = NULL;
		fx.sink_off = 0;
		if (!reqs[k])
			abort();
		slots[k] = tcpfx_slot(reqs[k]);
	}

	const uint8_t *s = data + HDR_LEN;
	size_t left = size - HDR_LEN;
	unsigned shift = data[0] >> 4;
	size_t piece = shift ? (size_t)1 << (shift - 1) : left;
	bool sock = !scripted && (data[0] & 8);
	if (sock) {
		feed_socket(s, left, piece, nreq, slots);
		left = 0;
	}
	while (left && fx.q.state == NVMF_Q_LIVE) {
		uint32_t n = (uint32_t)(left < piece ? left : piece);
		if (scripted) {
			uint8_t ctl = *s++;
			unsigned ln = ctl & 31, act = ctl >> 5;
			left--;
			n = ln < 24 ? ln + 1 : 32u << (ln - 24);
			if (n > left)
				n = (uint32_t)left;
			if (act == 4 || act == 5)
				reactor_poll(fx.r, 0);
			else if (act >= 6)
				tcpfx_settle(&fx);
			if (fx.q.state != NVMF_Q_LIVE || !n)
				break;
		}
		int ret = tcp_rx_consume(fx.tq, s, n);
		if (ret < 0) {
			/* A rejection always takes the connection down. */
			if (fx.q.state != NVMF_Q_DRAINING || fx.tq->conn != TCP_CONN_CLOSING) {
				fprintf(stderr, "rx error %d without a teardown\n", ret);
				abort();
			}
			break;
		}
		if ((uint32_t)ret != n) {
			fprintf(stderr, "consumed %d of %u bytes on a live queue\n", ret, n);
			abort();
		}
		s += n;
		left -= n;
		/* As between two receives: sends reaped, deferred work run. */
		if (!scripted)
			tcpfx_settle(&fx);
		check_once(nreq, slots);
	}
	/* The input ends, the host's reactor goes on: what is in flight is
	 * reaped on the live queue before the teardown. */
	if (fx.q.state == NVMF_Q_LIVE && !sock) {
		tcpfx_settle(&fx);
		check_once(nreq, slots);
	}
	tcpfx_fini(&fx);
	for (unsigned k = 0; k < nreq; k++)
		ASAN_UNPOISON_MEMORY_REGION(bufs[k], MAX_LEN);
	for (unsigned k = 0; k < nreq; k++) {
		if (fx.done_count[slots[k]] != 1) {
			fprintf(stderr, "request %u completed %u times\n", k, fx.done_count[slots[k]]);
			abort();
		}
	}
	check_streams();
	for (unsigned k = 0; k < nreq; k++) {
		struct pipe_sink *p = &pipes[k];
		uint32_t len = stream_len[k];
		int held = -1;
		if (pipe_of[k] != (int)k)
			continue;
		if (p->broken) {
			fprintf(stderr, "request %u: a pipe operation failed\n", k);
			abort();
		}
		if (ioctl(p->rfd, FIONREAD, &held) < 0 || held != (int)(p->prefix_len + p->filled)) {
			fprintf(stderr, "request %u: its pipe holds %d bytes, counts %u + %u\n", k,
				held, p->prefix_len, p->filled);
			abort();
		}
		/* The parts' buffers, in stream order, and whether all of them
		 * succeeded. */
		struct iovec iov[NREQ];
		unsigned cnt = 0;
		bool ok = true;
		for (unsigned j = k; j < nreq && pipe_of[j] == (int)k; j++) {
			iov[cnt++] = (struct iovec){ bufs[j], req_len[j] };
			ok = ok && !fx.done_err[slots[j]] && !fx.done_status[slots[j]];
		}
		if (ok && cnt == 1 && p->filled && p->filled != len) {
			fprintf(stderr, "request %u: read done with %u of %u bytes in its pipe\n", k,
				p->filled, len);
			abort();
		}
		if (ok && cnt > 1 && p->filled && p->filled != len) {
			/* As io_pipe_settle: the pipe's part joins the buffers. */
			if (pipe_sink_unsplice(p, iov, cnt) < 0 || p->filled ||
			    ioctl(p->rfd, FIONREAD, &held) < 0 || held != (int)p->prefix_len) {
				fprintf(stderr, "request %u: the pipe's part of a split read did not "
						"join its buffers (%d bytes held)\n", k, held);
				abort();
			}
		}
		/* The prefix is still in front. */
		uint8_t head[3];
		if (p->prefix_len != 3 || read(p->rfd, head, 3) != 3 || memcmp(head, "PFX", 3)) {
			fprintf(stderr, "request %u: the pipe's prefix is gone\n", k);
			abort();
		}
		p->prefix_len = 0; /* read above: the next input empties the rest */
	}
	return 0;
}
