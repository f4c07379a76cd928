/* The NVMe/TCP receive with a pipe (req->sink, gateway/base/pipe_sink.h):
 * the payload of a read goes from the socket into the pipe behind its
 * owner's prefix, or, whenever the receive cannot go on that way, wholly
 * into the buffer; never some of each.  Driven through the socket by the
 * queue's own receive loop, as in production. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/pipe_sink.h"
#include "tests/unit/tcp_fixture.h"
#include "tests/unit/unit_skip.h"
#include "transports/crc32c.h"

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

/* The target does not read: the splice fills the socket, waits for room
 * (POLLOUT) with the rest in the queue's pipe, the request not complete,
 * and finishes once the target reads. */
START_TEST(write_splice_waits_for_room)
{
	int small = 4096;

	wsetup(_i, false, false, 1 << 20, WLEN);
	ck_assert_int_eq(setsockopt(fx.tq->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	uint16_t cid = wsubmit(WLEN)->cid;
	unsigned s = cid & NVMF_CID_IDX_MASK;

	expect_cmd(cid, 0);
	send_r2t(cid, 0, WLEN);
	for (int i = 0; i < 20; i++)
		reactor_poll(fx.r, 2 * NSEC_PER_MSEC);
	ck_assert(fx.tq->tx_splicing);
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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
