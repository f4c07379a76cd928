/* The NVMe/TCP receive with a pipe (req->sink, gateway/base/pipe_sink.h):
 * the payload of a read goes from the socket into the pipe behind its
 * owner's prefix, or, whenever the receive cannot go on that way, wholly
 * into the buffer; never some of each.  Driven through the socket by the
 * queue's own receive loop, as in production. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/pipe_sink.h"
#include "tests/unit/tcp_fixture.h"
#include "tests/unit/unit_skip.h"
#include "transports/crc32c.h"
#include "transports/io.h"

enum { N = 4, LEN = 128 * 1024 };

static struct tcp_fixture fx;
static struct pipe_sink sinks[N];
static uint8_t *bufs, *want, *wire;
static size_t wlen, woff;

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed + (i >> 12));
}

static void setup(bool digests, uint32_t pipe_cap)
{
	ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, digests, digests), 0);
	bufs = calloc(N, LEN);
	want = malloc((size_t)N * LEN);
	wire = malloc((size_t)N * (LEN + 1024));
	ck_assert(bufs && want && wire);
	fill(want, (size_t)N * LEN, 11);
	for (unsigned i = 0; i < N; i++) {
		char p[16];
		ck_assert_int_eq(pipe_sink_open(&sinks[i], pipe_cap), 0);
		snprintf(p, sizeof(p), "REPLY-HEADER-%02u", i);
		ck_assert_int_eq(pipe_sink_set_prefix(&sinks[i], p, 16), 0);
	}
	wlen = woff = 0;
}

static void teardown(void)
{
	tcpfx_fini(&fx);
	for (unsigned i = 0; i < N; i++)
		pipe_sink_close(&sinks[i]);
	free(bufs);
	free(want);
	free(wire);
}

static struct nvmf_req *submit(unsigned i)
{
	fx.sink = &sinks[i];
	struct nvmf_req *req = tcpfx_submit(&fx, false, bufs + (size_t)i * LEN, LEN);
	fx.sink = NULL;
	ck_assert_ptr_nonnull(req);
	return req;
}

/* Writes the wire to the socket in pieces of `chunk`, running the queue's
 * reactor in between, until stop() or no progress. */
static void feed(size_t chunk, bool (*stop)(struct nvmf_req **), struct nvmf_req **reqs)
{
	for (int idle = 0; idle < 300;) {
		if (stop(reqs))
			return;
		size_t n = wlen - woff < chunk ? wlen - woff : chunk;
		ssize_t w = n ? write(fx.peer, wire + woff, n) : 0;
		if (w > 0)
			woff += (size_t)w;
		reactor_poll(fx.r, 5 * NSEC_PER_MSEC);
		idle = w > 0 ? 0 : idle + 1;
	}
}

static bool all_done(struct nvmf_req **reqs)
{
	for (unsigned i = 0; i < N; i++)
		if (!fx.done_count[tcpfx_slot(reqs[i])])
			return false;
	return true;
}

/* What the pipe holds: its prefix, then `len` bytes equal to `data`. */
static void assert_pipe(struct pipe_sink *s, unsigned i, const uint8_t *data, size_t len)
{
	uint8_t *got = malloc(16 + len + 1);
	size_t n = 0;
	ssize_t r;
	char p[17];

	while (n < 16 + len + 1 && (r = read(s->rfd, got + n, 16 + len + 1 - n)) > 0)
		n += (size_t)r;
	ck_assert_uint_eq(n, 16 + len);
	snprintf(p, sizeof(p), "REPLY-HEADER-%02u", i);
	ck_assert_mem_eq(got, p, 16);
	if (len)
		ck_assert(memcmp(got + 16, data, len) == 0);
	free(got);
}

/* pieces: C2HData PDUs per command; chunk: bytes per write. */
static void run(unsigned pieces, bool success, size_t chunk)
{
	struct nvmf_req *reqs[N];

	for (unsigned i = 0; i < N; i++)
		reqs[i] = submit(i);
	for (unsigned i = 0; i < N; i++) {
		uint32_t per = LEN / pieces;
		for (unsigned k = 0; k < pieces; k++) {
			bool last = k + 1 == pieces;
			pdu_c2h(&fx, wire, &wlen, reqs[i]->cid, k * per,
				want + (size_t)i * LEN + k * per, per,
				(uint8_t)(last ? NVME_TCP_F_DATA_LAST |
						 (success ? NVME_TCP_F_DATA_SUCCESS : 0) :
					       0));
		}
		if (!success)
			pdu_rsp(&fx, wire, &wlen, reqs[i]->cid, 0);
	}
	tcp_recv_arm(fx.tq);
	feed(chunk, all_done, reqs);
	for (unsigned i = 0; i < N; i++) {
		unsigned s = tcpfx_slot(reqs[i]);
		ck_assert_uint_eq(fx.done_count[s], 1);
		ck_assert_int_eq(fx.done_err[s], 0);
		ck_assert_uint_eq(fx.done_status[s], 0);
	}
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}

/* Each command's payload is in its pipe behind the prefix, and its buffer
 * was not written; most of it came by splice, not through memory. */
static void assert_all_in_pipes(uint64_t min_spliced)
{
	static const uint8_t zero[LEN];

	for (unsigned i = 0; i < N; i++) {
		ck_assert_uint_eq(sinks[i].filled, LEN);
		ck_assert(memcmp(bufs + (size_t)i * LEN, zero, LEN) == 0);
		assert_pipe(&sinks[i], i, want + (size_t)i * LEN, LEN);
	}
	ck_assert_uint_ge(fx.tq->nr_rx_spliced_data, min_spliced);
}

START_TEST(spliced_whole)
{
	setup(false, 1 << 20);
	run(1, false, 1 << 20);
	assert_all_in_pipes((uint64_t)N * LEN / 2);
	teardown();
}
END_TEST

START_TEST(spliced_success_flag_small_writes)
{
	setup(false, 1 << 20);
	run(1, true, 3000);
	assert_all_in_pipes((uint64_t)N * LEN / 2);
	teardown();
}
END_TEST

START_TEST(spliced_in_pieces)
{
	setup(false, 1 << 20);
	run(2, false, 50000);
	assert_all_in_pipes((uint64_t)N * LEN / 2);
	teardown();
}
END_TEST

/* PDUs below the stream size are read staged: their bytes are put in the
 * pipe from memory, still all of them and in order. */
START_TEST(small_pdus_put_from_staging)
{
	setup(false, 1 << 20);
	run(16, false, 20000);
	assert_all_in_pipes(0);
	teardown();
}
END_TEST

/* Digests need the bytes: the pipe is not used, the buffer gets all, the
 * pipe keeps only its prefix. */
START_TEST(digests_use_the_buffer)
{
	setup(true, 1 << 20);
	run(2, false, 1 << 20);
	for (unsigned i = 0; i < N; i++) {
		ck_assert_uint_eq(sinks[i].filled, 0);
		assert_pipe(&sinks[i], i, NULL, 0);
	}
	ck_assert(memcmp(bufs, want, (size_t)N * LEN) == 0);
	ck_assert_uint_eq(fx.tq->nr_rx_spliced_data, 0);
	teardown();
}
END_TEST

/* A four-page pipe fills up in the first PDU: what was spliced into it
 * comes back to the buffer and the rest lands there too. */
START_TEST(full_pipe_gives_back)
{
	setup(false, 16384);
	run(1, false, 1 << 20);
	ck_assert_uint_gt(fx.tq->nr_rx_spliced_data, 0);
	for (unsigned i = 0; i < N; i++) {
		ck_assert_uint_eq(sinks[i].filled, 0);
		assert_pipe(&sinks[i], i, NULL, 0);
	}
	ck_assert(memcmp(bufs, want, (size_t)N * LEN) == 0);
	teardown();
}
END_TEST

static bool some_spliced(struct nvmf_req **reqs)
{
	(void)reqs;
	return sinks[0].filled >= 32768;
}

/* The target goes away in the middle of a payload: the command fails, and
 * the pipe still holds its prefix plus exactly what it counts, so that the
 * owner can start over (pipe_sink_reset, as a retry on another path does). */
START_TEST(connection_lost_mid_payload)
{
	struct nvmf_req *reqs[N];

	setup(false, 1 << 20);
	reqs[0] = submit(0);
	pdu_c2h(&fx, wire, &wlen, reqs[0]->cid, 0, want, LEN, NVME_TCP_F_DATA_LAST);
	wlen = 24 + 65536; /* the header and half of the payload */
	tcp_recv_arm(fx.tq);
	feed(8192, some_spliced, reqs);
	ck_assert_uint_ge(sinks[0].filled, 32768);
	ck_assert_uint_lt(sinks[0].filled, LEN);
	close(fx.peer);
	fx.peer = -1;
	for (int i = 0; i < 100 && !fx.done_count[tcpfx_slot(reqs[0])]; i++)
		reactor_poll(fx.r, 5 * NSEC_PER_MSEC);
	ck_assert_uint_eq(fx.done_count[tcpfx_slot(reqs[0])], 1);
	ck_assert_int_ne(fx.done_err[tcpfx_slot(reqs[0])], 0);
	ck_assert(!sinks[0].broken);
	ck_assert_int_eq(pipe_sink_reset(&sinks[0]), 0);
	ck_assert_uint_eq(sinks[0].filled, 0);
	assert_pipe(&sinks[0], 0, NULL, 0);
	teardown();
}
END_TEST

/* ---- WRITE: the payload in the caller's pipe ----
 *
 * The test plays the target on the other end of the socket: it reads the
 * command capsule, sends R2Ts, reads the H2CData PDUs off the wire and
 * answers.  The payload must go out byte for byte whichever way it takes
 * (spliced from the queue's pipe, or from memory after being taken out),
 * and a payload sent by splice must still be in the caller's pipe for a
 * retry. */

enum { WLEN = 64 * 1024 };

static struct pipe_sink wpipe;
static uint8_t *wdata, *wbuf;
static uint8_t rx[256 * 1024]; /* what the target read and has not parsed */
static size_t rxlen;

/* backend: 0 io_uring, 1 epoll (the two wait differently for POLLOUT). */
static void wsetup(int backend, bool hdgst, bool ddgst, uint32_t maxh2c, uint32_t len)
{
	reactor_set_backend_mode(backend ? REACTOR_FORCE_EPOLL : REACTOR_FORCE_IO_URING);
	ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, hdgst, ddgst), 0);
	ck_assert_str_eq(reactor_backend_name(fx.r), backend ? "epoll" : "io_uring");
	fx.tq->maxh2cdata = maxh2c;
	/* splice() cannot say MSG_NOSIGNAL: the queue sends from a pipe only
	 * in a process that ignores SIGPIPE, as the daemon's main does.  The
	 * fixture skips the ICResp, where tcp_tx_pipe_setup runs. */
	signal(SIGPIPE, SIG_IGN);
	tcp_tx_pipe_setup(fx.tq);
	ck_assert(fx.tq->tx_pipe_ok == !ddgst);
	wdata = malloc(len);
	wbuf = calloc(1, len);
	ck_assert(wdata && wbuf);
	fill(wdata, len, 29);
	ck_assert_int_eq(pipe_sink_open(&wpipe, 256 * 1024), 0);
	ck_assert_int_eq(pipe_sink_put(&wpipe, wdata, len), 0);
	rxlen = 0;
}

static void wteardown(void)
{
	tcpfx_fini(&fx);
	pipe_sink_close(&wpipe);
	free(wdata);
	free(wbuf);
	reactor_set_backend_mode(REACTOR_AUTO);
}

static struct nvmf_req *wsubmit(uint32_t len)
{
	fx.wsink = &wpipe;
	struct nvmf_req *req = tcpfx_submit(&fx, true, wbuf, len);
	fx.wsink = NULL;
	ck_assert_ptr_nonnull(req);
	/* After the submit: tcpfx_settle waits for no op in flight, and an
	 * armed receive is one. */
	tcp_recv_arm(fx.tq);
	return req;
}

/* What the host sent: first what the fixture already pulled (its
 * settle), then the socket straight into rx: the fixture's buffer holds
 * less than two 64 KiB PDUs and drops the rest. */
static void pull(void)
{
	ck_assert_uint_le(fx.sent_len, sizeof(rx) - rxlen);
	memcpy(rx + rxlen, fx.sent, fx.sent_len);
	rxlen += fx.sent_len;
	fx.sent_len = 0;
	tcpfx_drain(fx.peer, rx, sizeof(rx), &rxlen);
}

/* The next whole PDU the host sent, running its reactor meanwhile;
 * *plen its length.  Fails the test if none comes. */
static const uint8_t *pdu_wait(size_t *plen)
{
	for (int i = 0; i < 1000; i++) {
		if (rxlen >= sizeof(struct nvme_tcp_hdr)) {
			struct nvme_tcp_hdr h;
			memcpy(&h, rx, sizeof(h));
			ck_assert_uint_le(h.plen, sizeof(rx));
			if (rxlen >= h.plen) {
				*plen = h.plen;
				return rx;
			}
		}
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
		pull();
	}
	ck_abort_msg("no whole PDU from the host (%zu bytes; splicing %d, its pipe %u+%u, "
		     "spliced %llu, ops %u, sendq %d)",
		     rxlen, fx.tq->tx_splicing, fx.tq->tx_pipe.prefix_len, fx.tq->tx_pipe.filled,
		     (unsigned long long)fx.tq->nr_tx_spliced_data, (unsigned)fx.tq->ops_in_flight,
		     !list_empty(&fx.tq->sendq));
	return NULL;
}

static void pdu_pop(size_t plen)
{
	memmove(rx, rx + plen, rxlen - plen);
	rxlen -= plen;
}

/* Nothing more on the wire than what was parsed. */
static void wire_quiet(void)
{
	for (int i = 0; i < 5; i++)
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
	pull();
	ck_assert_uint_eq(rxlen, 0);
}

/* The command capsule of opcode op, with `incap` bytes of in-capsule
 * data (0: none). */
static void expect_op(uint8_t op, uint16_t cid, uint32_t incap)
{
	size_t plen;
	const uint8_t *p = pdu_wait(&plen);
	struct nvme_tcp_cmd c;
	uint32_t hd = fx.tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;
	uint32_t dd = incap && fx.tq->ddgst ? NVME_TCP_DIGEST_LEN : 0;

	memcpy(&c, p, sizeof(c));
	ck_assert_uint_eq(c.hdr.type, NVME_TCP_CMD);
	ck_assert_uint_eq(c.sqe.opcode, op);
	ck_assert_uint_eq(c.sqe.cid, cid);
	ck_assert_uint_eq(c.sqe.dptr.length, incap ? incap : c.sqe.dptr.length);
	if (!incap) {
		ck_assert_uint_eq(plen, sizeof(c) + hd);
	} else {
		ck_assert_uint_eq(c.hdr.plen, c.hdr.pdo + incap + dd);
		ck_assert(memcmp(p + c.hdr.pdo, wdata, incap) == 0);
	}
	pdu_pop(plen);
}

static void expect_cmd(uint16_t cid, uint32_t incap) { expect_op(NVME_CMD_WRITE, cid, incap); }

static void send_r2t(uint16_t cid, uint32_t off, uint32_t len)
{
	uint8_t b[64];
	size_t n = 0;

	pdu_r2t(&fx, b, &n, cid, off, len);
	ck_assert_int_eq(write(fx.peer, b, n), (ssize_t)n);
}

/* Reads the H2CData PDUs that answer the R2T for [from, end), each at
 * most maxlen bytes, checking every header field and every payload byte
 * against wdata (digests as negotiated).  Returns how many PDUs. */
static unsigned expect_h2c(uint16_t cid, uint32_t from, uint32_t end, uint32_t maxlen)
{
	uint32_t hd = fx.tq->hdgst ? NVME_TCP_DIGEST_LEN : 0;
	uint32_t dd = fx.tq->ddgst ? NVME_TCP_DIGEST_LEN : 0;
	uint32_t pdo = ((uint32_t)sizeof(struct nvme_tcp_data) + hd + 3) / 4 * 4;
	unsigned n = 0;

	for (uint32_t off = from; off < end; n++) {
		size_t plen;
		const uint8_t *p = pdu_wait(&plen);
		struct nvme_tcp_data d;
		uint32_t len = end - off < maxlen ? end - off : maxlen;

		memcpy(&d, p, sizeof(d));
		ck_assert_uint_eq(d.hdr.type, NVME_TCP_H2C_DATA);
		ck_assert_uint_eq(d.hdr.flags, (hd ? NVME_TCP_F_HDGST : 0) |
						       (dd ? NVME_TCP_F_DDGST : 0) |
						       (off + len == end ? NVME_TCP_F_DATA_LAST : 0));
		ck_assert_uint_eq(d.hdr.hlen, sizeof(d));
		ck_assert_uint_eq(d.hdr.pdo, pdo);
		ck_assert_uint_eq(d.hdr.plen, pdo + len + dd);
		ck_assert_uint_eq(plen, pdo + len + dd);
		ck_assert_uint_eq(d.cccid, cid);
		ck_assert_uint_eq(d.ttag, 0x55);
		ck_assert_uint_eq(d.offset, off);
		ck_assert_uint_eq(d.length, len);
		if (hd) {
			uint32_t h;
			memcpy(&h, p + sizeof(d), sizeof(h));
			ck_assert_uint_eq(h, crc32c(p, sizeof(d)));
		}
		for (uint32_t i = (uint32_t)sizeof(d) + hd; i < pdo; i++)
			ck_assert_uint_eq(p[i], 0);
		ck_assert(memcmp(p + pdo, wdata + off, len) == 0);
		if (dd) {
			uint32_t g;
			memcpy(&g, p + pdo + len, sizeof(g));
			ck_assert_uint_eq(g, crc32c(wdata + off, len));
		}
		pdu_pop(plen);
		off += len;
	}
	return n;
}

/* The target's answer completes the request, without error. */
static void respond(uint16_t cid)
{
	uint8_t b[64];
	size_t n = 0;
	unsigned s = cid & NVMF_CID_IDX_MASK;

	wire_quiet();
	pdu_rsp(&fx, b, &n, cid, 0);
	ck_assert_int_eq(write(fx.peer, b, n), (ssize_t)n);
	for (int i = 0; i < 200 && !fx.done_count[s]; i++)
		reactor_poll(fx.r, 5 * NSEC_PER_MSEC);
	ck_assert_uint_eq(fx.done_count[s], 1);
	ck_assert_int_eq(fx.done_err[s], 0);
	ck_assert_uint_eq(fx.done_status[s], 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}

/* The caller's pipe holds exactly the payload, for a retry (read back:
 * the sink's count is wrong afterwards, so only at the end). */
static void assert_wpipe_full(uint32_t len)
{
	uint8_t *got = malloc((size_t)len + 1);
	size_t n = 0;
	ssize_t r;

	ck_assert(!wpipe.broken);
	ck_assert_uint_eq(wpipe.prefix_len, 0);
	ck_assert_uint_eq(wpipe.filled, len);
	while (n < (size_t)len + 1 && (r = read(wpipe.rfd, got + n, len + 1 - n)) > 0)
		n += (size_t)r;
	ck_assert_uint_eq(n, len);
	ck_assert(memcmp(got, wdata, len) == 0);
	free(got);
}

/* A fallback: the payload came out into the buffer, the pipe is empty
 * and nothing went by splice. */
static void assert_taken_out(uint32_t len)
{
	uint8_t b;

	ck_assert(!wpipe.broken);
	ck_assert_uint_eq(wpipe.filled, 0);
	ck_assert_int_eq(read(wpipe.rfd, &b, 1), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert(memcmp(wbuf, wdata, len) == 0);
	ck_assert_uint_eq(fx.tq->nr_tx_spliced_data, 0);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* _i: bit 0 the backend, bit 1 header digest (the pad and digest ahead
 * of the payload in the pipe). */
START_TEST(write_spliced_whole)
{
	wsetup(_i & 1, _i & 2, false, 1 << 20, WLEN);
	uint16_t cid = wsubmit(WLEN)->cid;

	expect_cmd(cid, 0);
	send_r2t(cid, 0, WLEN);
	ck_assert_uint_eq(expect_h2c(cid, 0, WLEN, 1 << 20), 1);
	/* By splice: every byte, and the buffer was never written. */
	ck_assert_uint_eq(fx.tq->nr_tx_spliced_data, WLEN);
	ck_assert(all_zero(wbuf, WLEN));
	ck_assert_uint_eq(wpipe.filled, WLEN);
	respond(cid);
	ck_assert_uint_eq(fx.tq->tx_pipe.prefix_len + fx.tq->tx_pipe.filled, 0);
	ck_assert(!fx.tq->tx_splicing);
	assert_wpipe_full(WLEN);
	wteardown();
}
END_TEST

/* Two writes one after the other reuse the queue's pipe: the second's
 * header is not behind left-over bytes of the first. */
START_TEST(write_spliced_twice)
{
	wsetup(_i, false, false, 1 << 20, WLEN);
	for (int k = 0; k < 2; k++) {
		uint16_t cid = wsubmit(WLEN)->cid;
		expect_cmd(cid, 0);
		send_r2t(cid, 0, WLEN);
		ck_assert_uint_eq(expect_h2c(cid, 0, WLEN, 1 << 20), 1);
		respond(cid);
		ck_assert_uint_eq(fx.tq->nr_tx_spliced_data, (uint64_t)(k + 1) * WLEN);
		ck_assert_uint_eq(wpipe.filled, WLEN);
	}
	assert_wpipe_full(WLEN);
	wteardown();
}
END_TEST

/* (a) An R2T for half the data: tee cannot start in the middle of the
 * pipe, so the payload comes out into the buffer; the second R2T is
 * served from there. */
START_TEST(write_partial_r2t_takes_out)
{
	wsetup(_i, false, false, 1 << 20, WLEN);
	uint16_t cid = wsubmit(WLEN)->cid;

	expect_cmd(cid, 0);
	send_r2t(cid, 0, WLEN / 2);
	ck_assert_uint_eq(expect_h2c(cid, 0, WLEN / 2, 1 << 20), 1);
	ck_assert_uint_eq(wpipe.filled, 0);
	send_r2t(cid, WLEN / 2, WLEN / 2);
	ck_assert_uint_eq(expect_h2c(cid, WLEN / 2, WLEN, 1 << 20), 1);
	respond(cid);
	assert_taken_out(WLEN);
	wteardown();
}
END_TEST

/* (b) MAXH2CDATA below the payload: several PDUs, from memory. */
START_TEST(write_small_maxh2cdata_takes_out)
{
	wsetup(_i, false, false, 16384, WLEN);
	uint16_t cid = wsubmit(WLEN)->cid;

	expect_cmd(cid, 0);
	send_r2t(cid, 0, WLEN);
	ck_assert_uint_eq(expect_h2c(cid, 0, WLEN, 16384), WLEN / 16384);
	respond(cid);
	assert_taken_out(WLEN);
	wteardown();
}
END_TEST

/* (c) A data digest is computed over the bytes: they come out at submit
 * (the queue does not even set up its pipe). */
START_TEST(write_data_digest_takes_out)
{
	wsetup(_i, true, true, 1 << 20, WLEN);
	ck_assert_uint_eq(wpipe.filled, WLEN);
	uint16_t cid = wsubmit(WLEN)->cid;

	ck_assert_uint_eq(wpipe.filled, 0);
	expect_cmd(cid, 0);
	send_r2t(cid, 0, WLEN);
	ck_assert_uint_eq(expect_h2c(cid, 0, WLEN, 1 << 20), 1);
	respond(cid);
	assert_taken_out(WLEN);
	wteardown();
}
END_TEST

/* (d) Data small enough for the capsule goes in it, from memory. */
START_TEST(write_in_capsule_takes_out)
{
	wsetup(_i, false, false, 1 << 20, 4096);
	fx.q.in_capsule_max = 8192;
	uint16_t cid = wsubmit(4096)->cid;

	expect_cmd(cid, 4096);
	respond(cid);
	assert_taken_out(4096);
	wteardown();
}
END_TEST

/* A write of WLEN bytes whose spliced H2CData fills a 4 KiB send buffer
 * (the target does not read) and waits for room. */
static uint16_t wsplice_stalled(int backend)
{
	int small = 4096;

	wsetup(backend, false, false, 1 << 20, WLEN);
	ck_assert_int_eq(setsockopt(fx.tq->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	uint16_t cid = wsubmit(WLEN)->cid;

	expect_cmd(cid, 0);
	send_r2t(cid, 0, WLEN);
	for (int i = 0; i < 20; i++)
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
	ck_assert(fx.tq->tx_splicing);
	return cid;
}

/* The target errs: an R2T (into r2t, its length returned) for a CID not
 * in flight (another slot than cid's); the queue then leaves LIVE. */
static size_t send_bad_r2t(uint16_t cid, uint8_t *r2t)
{
	unsigned s = cid & NVMF_CID_IDX_MASK;
	uint16_t bad = (uint16_t)((cid & ~NVMF_CID_IDX_MASK) | ((s + 1) % 7));
	size_t rn = 0;

	pdu_r2t(&fx, r2t, &rn, bad, 0, 4096);
	ck_assert_int_eq(write(fx.peer, r2t, rn), (ssize_t)rn);
	for (int i = 0; i < 100 && fx.q.state == NVMF_Q_LIVE; i++)
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
	return rn;
}

/* The target does not read: the splice fills the socket, waits for room
 * (POLLOUT) with the rest in the queue's pipe, the request not complete,
 * and finishes once the target reads. */
START_TEST(write_splice_waits_for_room)
{
	uint16_t cid = wsplice_stalled(_i);
	unsigned s = cid & NVMF_CID_IDX_MASK;

	ck_assert_uint_gt(fx.tq->tx_pipe.filled, 0);
	ck_assert_uint_lt(fx.tq->nr_tx_spliced_data, WLEN);
	ck_assert_uint_eq(fx.done_count[s], 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	/* A command submitted meanwhile waits for the PDU to end: it must
	 * not land inside the payload on the wire. */
	static uint8_t rbuf[4096];
	struct nvmf_req *rd = tcpfx_submit_nowait(&fx, false, rbuf, sizeof(rbuf));
	ck_assert_ptr_nonnull(rd);
	uint16_t rcid = rd->cid;
	/* Now the target reads (pdu_wait), and the rest follows. */
	ck_assert_uint_eq(expect_h2c(cid, 0, WLEN, 1 << 20), 1);
	expect_op(NVME_CMD_READ, rcid, 0);
	/* The read ends with its data (SUCCESS: no response capsule). */
	static uint8_t c2h[4096 + 64];
	size_t cn = 0;
	pdu_c2h(&fx, c2h, &cn, rcid, 0, wdata, sizeof(rbuf),
		NVME_TCP_F_DATA_LAST | NVME_TCP_F_DATA_SUCCESS);
	ck_assert_int_eq(write(fx.peer, c2h, cn), (ssize_t)cn);
	respond(cid);
	ck_assert_uint_eq(fx.done_count[rcid & NVMF_CID_IDX_MASK], 1);
	ck_assert_int_eq(fx.done_err[rcid & NVMF_CID_IDX_MASK], 0);
	ck_assert(memcmp(rbuf, wdata, sizeof(rbuf)) == 0);
	ck_assert_uint_eq(fx.tq->nr_tx_spliced_data, WLEN);
	assert_wpipe_full(WLEN);
	wteardown();
}
END_TEST

/* A protocol error while the spliced H2CData waits for room (the target
 * does not read): the queue starts closing, but the PDU is not cut; it
 * goes out whole once the target reads, then the TermReq behind it (not
 * inside it), and the queue ends with the write failed (commit 5787f82,
 * review leftover F6). */
START_TEST(write_splice_protocol_error_term_follows)
{
	uint16_t cid = wsplice_stalled(_i);
	unsigned s = cid & NVMF_CID_IDX_MASK;

	ck_assert_uint_gt(fx.tq->tx_pipe.filled, 0);
	ck_assert_uint_lt(fx.tq->nr_tx_spliced_data, WLEN);
	ck_assert_uint_eq(fx.done_count[s], 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	uint8_t r2t[64];
	size_t rn = send_bad_r2t(cid, r2t);
	ck_assert_uint_eq(rn, sizeof(struct nvme_tcp_data));
	/* Closing, the TermReq waiting for the PDU, which waits for room;
	 * the write is not complete yet. */
	ck_assert_int_eq(fx.q.state, NVMF_Q_DRAINING);
	ck_assert_int_eq(fx.tq->conn, TCP_CONN_CLOSING);
	ck_assert(fx.tq->term_deferred);
	ck_assert(fx.tq->tx_splicing);
	ck_assert_uint_eq(fx.done_count[s], 0);
	/* Now the target reads: the whole H2CData, byte for byte... */
	ck_assert_uint_eq(expect_h2c(cid, 0, WLEN, 1 << 20), 1);
	ck_assert_uint_eq(fx.tq->nr_tx_spliced_data, WLEN);
	/* ...then a whole TermReq saying why, echoing the R2T's header. */
	size_t plen;
	const uint8_t *p = pdu_wait(&plen);
	struct nvme_tcp_term t;
	memcpy(&t, p, sizeof(t));
	ck_assert_uint_eq(t.hdr.type, NVME_TCP_H2C_TERM);
	ck_assert_uint_eq(t.hdr.hlen, sizeof(t));
	ck_assert_uint_eq(t.hdr.plen, sizeof(t) + rn);
	ck_assert_uint_eq(plen, sizeof(t) + rn);
	ck_assert_uint_eq(t.fes, NVME_TCP_FES_INVALID_PDU_HDR);
	ck_assert_uint_eq(t.fei, 8);
	ck_assert(memcmp(p + sizeof(t), r2t, rn) == 0);
	pdu_pop(plen);
	/* Nothing after it: the socket is shut (end of stream). */
	uint8_t b;
	ssize_t eof = -1;
	for (int i = 0; i < 200 && eof < 0; i++) {
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
		pull();
		ck_assert_uint_eq(rxlen, 0);
		eof = recv(fx.peer, &b, 1, MSG_DONTWAIT);
	}
	ck_assert_int_eq(eof, 0);
	/* The queue quiesces and the write fails with the protocol error. */
	for (int i = 0; i < 200 && !fx.done_count[s]; i++)
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
	ck_assert_uint_eq(fx.done_count[s], 1);
	ck_assert_int_eq(fx.done_err[s], -EPROTO);
	ck_assert_int_eq(fx.q.state, NVMF_Q_DEAD);
	ck_assert(tcpfx_settle(&fx));
	ck_assert_uint_eq(fx.tq->ops_in_flight, 0);
	ck_assert(!fx.tq->tx_splicing);
	ck_assert(!fx.tq->term_deferred);
	/* The caller's pipe still holds the payload (tee), for a retry. */
	assert_wpipe_full(WLEN);
	wteardown();
}
END_TEST

/* The same, but the target never reads: the PDU's wait is bounded by
 * term_timer (TCP_TERM_WAIT_MS), which shuts the socket; the PDU is cut,
 * no TermReq follows it, and the queue still ends, the write failed. */
START_TEST(write_splice_protocol_error_target_stuck)
{
	uint16_t cid = wsplice_stalled(_i);
	unsigned s = cid & NVMF_CID_IDX_MASK;

	uint8_t r2t[64];
	(void)send_bad_r2t(cid, r2t);
	ck_assert(fx.tq->term_deferred);
	/* Not reading: at most TCP_TERM_WAIT_MS, then the socket is shut
	 * (bounded by time: a poll may return early). */
	uint64_t t0 = reactor_now_ns(), waited;
	unsigned long polls = 0;
	while (fx.tq->tx_splicing && reactor_now_ns() - t0 < 3ull * TCP_TERM_WAIT_MS * NSEC_PER_MSEC) {
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
		polls++;
	}
	waited = reactor_now_ns() - t0;
	ck_assert(!fx.tq->tx_splicing);
	/* The wait sleeps: a poll of 2 ms returns ~TCP_TERM_WAIT_MS / 2
	 * times, not once per wake-up of a POLLOUT poll that POLLRDHUP (the
	 * SHUT_RD of tcp_queue_shutdown) completes at once (io_uring). */
	ck_assert_msg(polls < 5000, "the reactor spun %lu times in %llu ms waiting for room", polls,
		      (unsigned long long)(waited / NSEC_PER_MSEC));
	ck_assert_uint_ge(waited, (TCP_TERM_WAIT_MS - 100) * NSEC_PER_MSEC);
	ck_assert(!fx.tq->term_deferred);
	for (int i = 0; i < 200 && !fx.done_count[s]; i++)
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
	ck_assert_uint_eq(fx.done_count[s], 1);
	ck_assert_int_eq(fx.done_err[s], -EPROTO);
	ck_assert_int_eq(fx.q.state, NVMF_Q_DEAD);
	/* What the target reads now: a cut H2CData, then end of stream. */
	uint8_t b;
	ssize_t eof = -1;
	for (int i = 0; i < 200 && eof < 0; i++) {
		pull();
		eof = recv(fx.peer, &b, 1, MSG_DONTWAIT);
	}
	ck_assert_int_eq(eof, 0);
	ck_assert_uint_ge(rxlen, sizeof(struct nvme_tcp_data));
	ck_assert_uint_eq(rx[0], NVME_TCP_H2C_DATA);
	ck_assert_uint_lt(rxlen, sizeof(struct nvme_tcp_data) + WLEN);
	ck_assert(memcmp(rx + sizeof(struct nvme_tcp_data), wdata,
			 rxlen - sizeof(struct nvme_tcp_data)) == 0);
	ck_assert(tcpfx_settle(&fx));
	ck_assert_uint_eq(fx.tq->ops_in_flight, 0);
	rxlen = 0;
	wteardown();
}
END_TEST

/* Two writes in pipes, their R2Ts in one segment: each H2CData goes
 * alone and whole, one after the other, and both pipes stay full. */
START_TEST(write_two_spliced_back_to_back)
{
	struct pipe_sink second;

	wsetup(_i, false, false, 1 << 20, WLEN);
	ck_assert_int_eq(pipe_sink_open(&second, 256 * 1024), 0);
	ck_assert_int_eq(pipe_sink_put(&second, wdata, WLEN), 0);
	uint16_t c1 = wsubmit(WLEN)->cid;
	fx.wsink = &second;
	struct nvmf_req *r2 = tcpfx_submit(&fx, true, wbuf, WLEN);
	fx.wsink = NULL;
	ck_assert_ptr_nonnull(r2);
	uint16_t c2 = r2->cid;
	uint8_t b[128];
	size_t n = 0;

	expect_cmd(c1, 0);
	expect_cmd(c2, 0);
	pdu_r2t(&fx, b, &n, c1, 0, WLEN);
	pdu_r2t(&fx, b, &n, c2, 0, WLEN);
	ck_assert_int_eq(write(fx.peer, b, n), (ssize_t)n);
	ck_assert_uint_eq(expect_h2c(c1, 0, WLEN, 1 << 20), 1);
	ck_assert_uint_eq(expect_h2c(c2, 0, WLEN, 1 << 20), 1);
	respond(c2);
	respond(c1);
	ck_assert_uint_eq(fx.tq->nr_tx_spliced_data, 2u * WLEN);
	ck_assert(all_zero(wbuf, WLEN));
	ck_assert_uint_eq(second.filled, WLEN);
	pipe_sink_close(&second);
	assert_wpipe_full(WLEN);
	wteardown();
}
END_TEST

/* ---- READ split at MDTS: every command of one I/O shares its pipe ----
 *
 * nvmf_io_submit splits the read; each command carries the caller's pipe
 * and its place in the stream (req->sink_off).  The test plays the target:
 * it reads the command capsules, then answers with C2HData PDUs in the
 * order a scenario says.  A part appends to the pipe only when the pipe
 * holds exactly the parts before it; otherwise that command's data goes to
 * the buffer, and at the end what the pipe held joins it there
 * (io_pipe_settle): the payload is wholly in the pipe or wholly in the
 * buffer, byte for byte. */

enum { SCMDS_MAX = 4, SOFF = 8192 };

static const char sprefix[16] = "NBD-REPLY-HEADER";
static struct nvmf_ns sns;
static struct nvmf_io sio;
static struct iovec siov;
static struct pipe_sink spipe;
static uint8_t *sdata, *sbuf, *swire;
static size_t swlen, swoff;
static unsigned scb_count, sncmds;
static int scb_err;
static struct {
	uint16_t cid;
	uint32_t off, len; /* the command's part of the read */
} scmd[SCMDS_MAX];

static void sio_done(struct nvmf_io *io, int err)
{
	ck_assert_ptr_eq(io, &sio);
	scb_count++;
	scb_err = err;
}

/* A read of len bytes split in commands of max_xfer, its pipe of
 * pipe_cap bytes behind a 16-byte prefix; the capsules are read off the
 * wire (in submission order) into scmd[]. */
static void ssetup(int backend, uint32_t pipe_cap, uint32_t len, uint32_t max_xfer)
{
	unsigned want = (len + max_xfer - 1) / max_xfer;

	ck_assert_uint_le(want, SCMDS_MAX);
	reactor_set_backend_mode(backend ? REACTOR_FORCE_EPOLL : REACTOR_FORCE_IO_URING);
	ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, false, false), 0);
	ck_assert_str_eq(reactor_backend_name(fx.r), backend ? "epoll" : "io_uring");
	memset(&sns, 0, sizeof(sns));
	sns.nsid = 1;
	sns.lba_size = 512;
	sns.lba_shift = 9;
	sns.nsze = 1u << 16;
	sdata = malloc(len);
	sbuf = calloc(1, len);
	swire = malloc((size_t)len + 64 * 1024);
	ck_assert(sdata && sbuf && swire);
	fill(sdata, len, 41);
	swlen = swoff = 0;
	rxlen = 0;
	scb_count = 0;
	scb_err = 1;
	ck_assert_int_eq(pipe_sink_open(&spipe, pipe_cap), 0);
	ck_assert_int_eq(pipe_sink_set_prefix(&spipe, sprefix, sizeof(sprefix)), 0);
	memset(&sio, 0, sizeof(sio));
	siov = (struct iovec){ sbuf, len };
	sio.op = NVMF_IO_READ;
	sio.offset = SOFF;
	sio.len = len;
	sio.iov = &siov;
	sio.iovcnt = 1;
	sio.sink = &spipe;
	sio.cb = sio_done;
	ck_assert_int_eq(nvmf_io_submit(&fx.q, &sns, max_xfer, &sio), 0);
	ck_assert(tcpfx_settle(&fx));
	tcp_recv_arm(fx.tq);
	for (sncmds = 0; sncmds < want; sncmds++) {
		size_t plen;
		const uint8_t *p = pdu_wait(&plen);
		struct nvme_tcp_cmd c;
		memcpy(&c, p, sizeof(c));
		ck_assert_uint_eq(c.hdr.type, NVME_TCP_CMD);
		ck_assert_uint_eq(c.sqe.opcode, NVME_CMD_READ);
		scmd[sncmds].cid = c.sqe.cid;
		scmd[sncmds].off = (uint32_t)((c.sqe.cdw10 << 9) - SOFF);
		scmd[sncmds].len = c.sqe.dptr.length;
		ck_assert_uint_eq(scmd[sncmds].off, sncmds * max_xfer);
		ck_assert_uint_eq(scmd[sncmds].len, len - scmd[sncmds].off < max_xfer ?
							   len - scmd[sncmds].off : max_xfer);
		pdu_pop(plen);
	}
	wire_quiet();
	ck_assert_uint_eq(scb_count, 0);
}

static void steardown(void)
{
	tcpfx_fini(&fx);
	pipe_sink_close(&spipe);
	free(sdata);
	free(sbuf);
	free(swire);
	reactor_set_backend_mode(REACTOR_AUTO);
}

/* One step of a scenario: bytes [off, off + len) of command k's part; a
 * command's last step ends it, with SUCCESS (odd k) or a CapsuleResp. */
struct sstep {
	unsigned k;
	uint32_t off, len;
};

static void swire_add(const struct sstep *st)
{
	uint32_t end = scmd[st->k].len;
	bool last = st->off + st->len == end;
	bool succ = last && (st->k & 1);

	ck_assert_uint_le(st->off + st->len, end);
	pdu_c2h(&fx, swire, &swlen, scmd[st->k].cid, st->off, sdata + scmd[st->k].off + st->off,
		st->len,
		(uint8_t)((last ? NVME_TCP_F_DATA_LAST : 0) | (succ ? NVME_TCP_F_DATA_SUCCESS : 0)));
	if (last && !succ)
		pdu_rsp(&fx, swire, &swlen, scmd[st->k].cid, 0);
}

/* Command k's part in steps of `piece` bytes. */
static unsigned ssteps_of(struct sstep *st, unsigned k, uint32_t piece)
{
	unsigned n = 0;

	for (uint32_t o = 0; o < scmd[k].len; o += piece)
		st[n++] = (struct sstep){ k, o, scmd[k].len - o < piece ? scmd[k].len - o : piece };
	return n;
}

/* Writes what is on swire to the socket in pieces of `chunk`, running
 * the reactor, until stop() or no progress for a while. */
static void sfeed(size_t chunk, bool (*stop)(void))
{
	for (int idle = 0; idle < 200 && !stop();) {
		size_t n = swlen - swoff < chunk ? swlen - swoff : chunk;
		ssize_t w = n ? write(fx.peer, swire + swoff, n) : 0;
		if (w > 0)
			swoff += (size_t)w;
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
		idle = w > 0 ? 0 : idle + 1;
	}
}

static bool sio_finished(void) { return scb_count > 0; }
/* All written, read by the host and parsed up to a PDU's end. */
static bool swire_taken(void)
{
	int unread = 0;

	ck_assert_int_eq(ioctl(fx.tq->fd, FIONREAD, &unread), 0);
	return swoff == swlen && !unread && fx.tq->rlen == 0 && fx.tq->rx_state == TCP_RX_HDR;
}

/* The whole scenario on the wire, in pieces of chunk; the I/O completes
 * once, without error, the queue live. */
static void srun(const struct sstep *st, unsigned n, size_t chunk)
{
	for (unsigned i = 0; i < n; i++)
		swire_add(&st[i]);
	sfeed(chunk, sio_finished);
	ck_assert_uint_eq(swoff, swlen);
	ck_assert_uint_eq(scb_count, 1);
	ck_assert_int_eq(scb_err, 0);
	ck_assert_int_eq(sio.status, 0);
	ck_assert_uint_eq(sio.outstanding, 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	ck_assert(!spipe.broken);
}

/* The pipe holds the prefix then exactly `len` bytes of sdata (read
 * back: only at the end). */
static void assert_spipe(uint32_t len)
{
	size_t cap = sizeof(sprefix) + (size_t)len + 1, n = 0;
	uint8_t *got = malloc(cap);
	ssize_t r;

	ck_assert_uint_eq(spipe.prefix_len, sizeof(sprefix));
	ck_assert_uint_eq(spipe.filled, len);
	while (n < cap && (r = read(spipe.rfd, got + n, cap - n)) > 0)
		n += (size_t)r;
	ck_assert_uint_eq(n, sizeof(sprefix) + len);
	ck_assert(memcmp(got, sprefix, sizeof(sprefix)) == 0);
	ck_assert(memcmp(got + sizeof(sprefix), sdata, len) == 0);
	free(got);
}

/* Wholly in the pipe: filled == len, the buffer never written. */
static void assert_in_spipe(void)
{
	ck_assert(!sio.pipe_joined);
	ck_assert(all_zero(sbuf, sio.len));
	assert_spipe((uint32_t)sio.len);
}

/* Wholly in the buffer: what the pipe held joined it, the pipe keeps the
 * prefix alone. */
static void assert_in_sbuf(void)
{
	ck_assert(sio.pipe_joined);
	ck_assert(memcmp(sbuf, sdata, sio.len) == 0);
	assert_spipe(0);
}

/* _i: bit 0 the backend. */

/* (a) 4 commands of 64 KiB, their parts in order, two 32 KiB PDUs each
 * (a stream: spliced): all in the pipe, in order. */
START_TEST(split_read_in_order_fills_pipe)
{
	struct sstep st[16];
	unsigned n = 0;

	ssetup(_i & 1, 1 << 20, 4 * 65536, 65536);
	ck_assert_uint_eq(sncmds, 4);
	for (unsigned k = 0; k < 4; k++)
		n += ssteps_of(st + n, k, 32768);
	srun(st, n, 1 << 20);
	ck_assert_uint_ge(fx.tq->nr_rx_spliced_data, sio.len / 2);
	ck_assert_uint_eq(fx.tq->nr_rx_spliced_data + fx.tq->nr_rx_staged_data, sio.len);
	ck_assert_uint_eq(fx.tq->nr_rx_direct_data, 0);
	assert_in_spipe();
	steardown();
}
END_TEST

/* (a) The same with small PDUs (read staged, put into the pipe from
 * memory) written a few bytes at a time. */
START_TEST(split_read_in_order_small_pdus)
{
	struct sstep st[64];
	unsigned n = 0;

	ssetup(_i & 1, 1 << 20, 3 * 32768, 32768);
	ck_assert_uint_eq(sncmds, 3);
	for (unsigned k = 0; k < 3; k++)
		n += ssteps_of(st + n, k, 5000);
	srun(st, n, 3001);
	ck_assert_uint_gt(fx.tq->nr_rx_staged_data, 0);
	ck_assert_uint_eq(fx.tq->nr_rx_spliced_data + fx.tq->nr_rx_staged_data, sio.len);
	assert_in_spipe();
	steardown();
}
END_TEST

/* (b) The second part first, then the first, then the rest: the first
 * fills the pipe, the others go to the buffer, and the pipe's part joins
 * them there. */
START_TEST(split_read_second_first_joins)
{
	struct sstep st[16];
	unsigned n = 0;

	ssetup(_i & 1, 1 << 20, 4 * 65536, 65536);
	n += ssteps_of(st + n, 1, 32768);
	n += ssteps_of(st + n, 0, 32768);
	n += ssteps_of(st + n, 2, 32768);
	n += ssteps_of(st + n, 3, 32768);
	srun(st, n, 1 << 20);
	ck_assert_uint_gt(fx.tq->nr_rx_spliced_data, 0);
	assert_in_sbuf();
	steardown();
}
END_TEST

/* (b) The first part last: the later ones went to the buffer, the first
 * still finds the pipe empty and fills it, and joins them. */
START_TEST(split_read_first_last_in_buffer)
{
	struct sstep st[16];
	unsigned n = 0;

	ssetup(_i & 1, 1 << 20, 3 * 65536, 65536);
	n += ssteps_of(st + n, 2, 32768);
	n += ssteps_of(st + n, 1, 32768);
	n += ssteps_of(st + n, 0, 32768);
	srun(st, n, 1 << 20);
	assert_in_sbuf();
	steardown();
}
END_TEST

/* (c) PDUs of two commands interleaved: cmd 0's first half, cmd 1
 * whole, cmd 0's second half, then the rest.  _i bit 1: PDUs of 8 KiB
 * (staged) instead of 32 KiB (spliced). */
START_TEST(split_read_interleaved_joins)
{
	uint32_t piece = (_i & 2) ? 8192 : 32768;
	struct sstep a[16], st[64];
	unsigned n = 0, na;

	ssetup(_i & 1, 1 << 20, 4 * 65536, 65536);
	na = ssteps_of(a, 0, piece);
	for (unsigned i = 0; i < na / 2; i++)
		st[n++] = a[i];
	n += ssteps_of(st + n, 1, piece);
	for (unsigned i = na / 2; i < na; i++)
		st[n++] = a[i];
	n += ssteps_of(st + n, 2, piece);
	n += ssteps_of(st + n, 3, piece);
	srun(st, n, (_i & 2) ? 20000 : 1 << 20);
	assert_in_sbuf();
	steardown();
}
END_TEST

/* (c) A later part comes early and gives up the pipe, the parts before
 * it then come in order, interleaved: 0a 2a 0b 1a 2b 1b 3.  Commands 0 and
 * 1 fill the pipe (1 finds it holding exactly part 0), 2 and 3 go to the
 * buffer, and the pipe's 128 KiB join them. */
START_TEST(split_read_early_part_then_in_order)
{
	uint32_t piece = (_i & 2) ? 8192 : 32768;
	struct sstep c[SCMDS_MAX][16], st[64];
	unsigned nc[SCMDS_MAX], n = 0;

	ssetup(_i & 1, 1 << 20, 4 * 65536, 65536);
	for (unsigned k = 0; k < 4; k++)
		nc[k] = ssteps_of(c[k], k, piece);
	static const unsigned order[][2] = { { 0, 0 }, { 2, 0 }, { 0, 1 }, { 1, 0 },
					     { 2, 1 }, { 1, 1 } };
	/* Halves of each command: {k, which half}. */
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		unsigned k = order[i][0], h = order[i][1];
		for (unsigned j = h * nc[k] / 2; j < (h + 1) * nc[k] / 2; j++)
			st[n++] = c[k][j];
	}
	unsigned before3 = n;
	for (unsigned j = 0; j < nc[3]; j++)
		st[n++] = c[3][j];
	/* Up to the end of command 1: the pipe holds parts 0 and 1. */
	for (unsigned i = 0; i < before3; i++)
		swire_add(&st[i]);
	size_t upto = swlen;
	for (unsigned i = before3; i < n; i++)
		swire_add(&st[i]);
	size_t all = swlen;
	swlen = upto;
	sfeed(1 << 20, swire_taken);
	ck_assert_uint_eq(swoff, upto);
	ck_assert_uint_eq(scb_count, 0);
	ck_assert_uint_eq(spipe.filled, scmd[0].len + scmd[1].len);
	swlen = all;
	sfeed(1 << 20, sio_finished);
	ck_assert_uint_eq(scb_count, 1);
	ck_assert_int_eq(scb_err, 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	assert_in_sbuf();
	steardown();
}
END_TEST

/* (c) The parts in order, 4 PDUs each, every command's response after
 * the next command's data: a command still waiting for its completion
 * does not keep the next from appending. */
START_TEST(split_read_late_responses_fill_pipe)
{
	ssetup(_i & 1, 1 << 20, 4 * 32768, 32768);
	for (unsigned k = 0; k < 4; k++) {
		for (uint32_t o = 0; o < scmd[k].len; o += 8192)
			pdu_c2h(&fx, swire, &swlen, scmd[k].cid, o, sdata + scmd[k].off + o, 8192,
				o + 8192 == scmd[k].len ? NVME_TCP_F_DATA_LAST : 0);
		if (k)
			pdu_rsp(&fx, swire, &swlen, scmd[k - 1].cid, 0);
	}
	pdu_rsp(&fx, swire, &swlen, scmd[3].cid, 0);
	sfeed(7000, sio_finished);
	ck_assert_uint_eq(scb_count, 1);
	ck_assert_int_eq(scb_err, 0);
	assert_in_spipe();
	steardown();
}
END_TEST

/* (d) A 64 KiB pipe, 3 parts of 32 KiB in 8 KiB PDUs (put from memory,
 * which packs the pipe's pages): part 0 fits, part 1's last PDU finds the
 * pipe full after some of its bytes went in.  Command 1 (sink_off > 0)
 * only lets the pipe go, its bytes stay there; command 2 goes to the
 * buffer; the pipe's bytes join it at the end. */
START_TEST(split_read_pipe_fills_in_later_part)
{
	struct sstep st[16];
	unsigned n = 0;

	ssetup(_i & 1, 65536, 3 * 32768, 32768);
	ck_assert_uint_eq(spipe.cap, 65536);
	for (unsigned k = 0; k < 3; k++)
		n += ssteps_of(st + n, k, 8192);
	/* Parts 0 and 1 first: the pipe (16 pages, one for the prefix)
	 * cannot take both, it ends full with part 0 and some of part 1,
	 * which command 1 left there. */
	for (unsigned i = 0; i < 8; i++)
		swire_add(&st[i]);
	sfeed(1 << 20, swire_taken);
	ck_assert_uint_eq(scb_count, 0);
	ck_assert(!spipe.broken);
	ck_assert_uint_gt(spipe.filled, scmd[1].off);
	ck_assert_uint_lt(spipe.filled, scmd[2].off);
	for (unsigned i = 8; i < n; i++)
		swire_add(&st[i]);
	sfeed(1 << 20, sio_finished);
	ck_assert_uint_eq(scb_count, 1);
	ck_assert_int_eq(scb_err, 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	assert_in_sbuf();
	steardown();
}
END_TEST

/* (d) The same through splice: 4 parts of 32 KiB, whole PDUs, a 64 KiB
 * pipe.  Written 4 KiB at a time, the data after each header is spliced
 * and the socket's pages fill the pipe's slots during part 1, which
 * leaves its bytes there.  _i bit 1: all written at once (the first read
 * is staged and puts part 0 and some of part 1 from memory): wherever
 * the pipe fills, the payload ends exact in one place. */
START_TEST(split_read_pipe_fills_spliced)
{
	bool at_once = _i & 2;
	struct sstep st[16];
	unsigned n = 0;
	uint32_t mid;

	ssetup(_i & 1, 65536, 4 * 32768, 32768);
	for (unsigned k = 0; k < 4; k++)
		n += ssteps_of(st + n, k, 32768);
	for (unsigned i = 0; i < 2; i++)
		swire_add(&st[i]);
	sfeed(at_once ? 1 << 20 : 4096, swire_taken);
	ck_assert_uint_eq(scb_count, 0);
	ck_assert(!spipe.broken);
	mid = spipe.filled;
	if (!at_once) {
		ck_assert_uint_gt(fx.tq->nr_rx_spliced_data, 0);
		ck_assert_uint_gt(mid, scmd[1].off);
		ck_assert_uint_lt(mid, scmd[2].off);
	}
	for (unsigned i = 2; i < n; i++)
		swire_add(&st[i]);
	sfeed(at_once ? 1 << 20 : 4096, sio_finished);
	ck_assert_uint_eq(scb_count, 1);
	ck_assert_int_eq(scb_err, 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	if (mid) {
		assert_in_sbuf();
	} else {
		/* Part 0 gave its bytes back itself. */
		ck_assert(!sio.pipe_joined);
		ck_assert(memcmp(sbuf, sdata, sio.len) == 0);
		assert_spipe(0);
	}
	steardown();
}
END_TEST

/* (d) A 16 KiB pipe fills during part 0 (8 KiB PDUs, put from memory):
 * command 0 (sink_off 0) gives its bytes back itself, so that nothing
 * is left to join; the later parts find the pipe empty, not theirs, and go
 * to the buffer. */
START_TEST(split_read_pipe_fills_in_first_part)
{
	struct sstep st[16];
	unsigned n = 0;

	ssetup(_i & 1, 16384, 3 * 32768, 32768);
	for (unsigned k = 0; k < 3; k++)
		n += ssteps_of(st + n, k, 8192);
	for (unsigned i = 0; i < 4; i++)
		swire_add(&st[i]);
	sfeed(1 << 20, swire_taken);
	ck_assert_uint_eq(scb_count, 0);
	ck_assert(!spipe.broken);
	ck_assert_uint_eq(spipe.filled, 0);
	for (unsigned i = 4; i < n; i++)
		swire_add(&st[i]);
	sfeed(1 << 20, sio_finished);
	ck_assert_uint_eq(scb_count, 1);
	ck_assert_int_eq(scb_err, 0);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	ck_assert(!sio.pipe_joined);
	ck_assert(memcmp(sbuf, sdata, sio.len) == 0);
	assert_spipe(0);
	steardown();
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("tcp_splice");
	TCase *tc = tcase_create("splice");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, spliced_whole);
	tcase_add_test(tc, spliced_success_flag_small_writes);
	tcase_add_test(tc, spliced_in_pieces);
	tcase_add_test(tc, small_pdus_put_from_staging);
	tcase_add_test(tc, digests_use_the_buffer);
	tcase_add_test(tc, full_pipe_gives_back);
	tcase_add_test(tc, connection_lost_mid_payload);
	suite_add_tcase(s, tc);
	/* Loop index: the reactor backend (and more bits, see each test). */
	tc = tcase_create("write");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, write_spliced_whole, 0, 4);
	tcase_add_loop_test(tc, write_spliced_twice, 0, 2);
	tcase_add_loop_test(tc, write_two_spliced_back_to_back, 0, 2);
	tcase_add_loop_test(tc, write_partial_r2t_takes_out, 0, 2);
	tcase_add_loop_test(tc, write_small_maxh2cdata_takes_out, 0, 2);
	tcase_add_loop_test(tc, write_data_digest_takes_out, 0, 2);
	tcase_add_loop_test(tc, write_in_capsule_takes_out, 0, 2);
	tcase_add_loop_test(tc, write_splice_waits_for_room, 0, 2);
	tcase_add_loop_test(tc, write_splice_protocol_error_term_follows, 0, 2);
	tcase_add_loop_test(tc, write_splice_protocol_error_target_stuck, 0, 2);
	suite_add_tcase(s, tc);
	/* Loop index: bit 0 the reactor backend (more bits, see each test). */
	tc = tcase_create("split_read");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, split_read_in_order_fills_pipe, 0, 2);
	tcase_add_loop_test(tc, split_read_in_order_small_pdus, 0, 2);
	tcase_add_loop_test(tc, split_read_second_first_joins, 0, 2);
	tcase_add_loop_test(tc, split_read_first_last_in_buffer, 0, 2);
	tcase_add_loop_test(tc, split_read_interleaved_joins, 0, 4);
	tcase_add_loop_test(tc, split_read_early_part_then_in_order, 0, 4);
	tcase_add_loop_test(tc, split_read_late_responses_fill_pipe, 0, 2);
	tcase_add_loop_test(tc, split_read_pipe_fills_in_later_part, 0, 2);
	tcase_add_loop_test(tc, split_read_pipe_fills_spliced, 0, 4);
	tcase_add_loop_test(tc, split_read_pipe_fills_in_first_part, 0, 2);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
