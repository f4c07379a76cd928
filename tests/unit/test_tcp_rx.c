/* The NVMe/TCP receive path against a scripted controller: every
 * validation rule fails the connection with its own reason (the log line,
 * the queue's error, the H2C TermReq's FES) and completes what was in
 * flight exactly once; valid streams complete reads and writes however
 * they are split. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/unit/tcp_fixture.h"
#include "transports/crc32c.h"
#include "unit_skip.h"

#define BUFSZ (64 * 1024)

static struct tcp_fixture fx;
static uint8_t stream[BUFSZ];
static size_t slen;
static int log_fd = -1, saved_stderr = -1;

/* The reason is only in the log: capture stderr around the feed. */
static void log_begin(void)
{
	fflush(stderr);
	log_fd = memfd_create("log", 0);
	ck_assert_int_ge(log_fd, 0);
	saved_stderr = dup(2);
	dup2(log_fd, 2);
}

static char *log_end(void)
{
	static char text[8192];
	ssize_t n;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	n = pread(log_fd, text, sizeof(text) - 1, 0);
	close(log_fd);
	text[n > 0 ? n : 0] = 0;
	fputs(text, stderr);
	return text;
}

static void setup_plain(void) { ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, false, false), 0); }
static void setup_digest(void) { ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, true, true), 0); }
static void teardown(void) { tcpfx_fini(&fx); }

/* expect_failure's TermReq echoes these bytes of the offending header
 * when set (echo_len), else anything. */
static const void *echo_want;
static size_t echo_len;

/* Feeds the stream built so far, expecting the connection to fail. */
static void expect_failure(int want_err, const char *reason, int want_fes)
{
	uint8_t sent[BUFSZ];
	int ret;

	log_begin();
	ret = tcp_rx_consume(fx.tq, stream, (uint32_t)slen);
	const char *log = log_end();
	ck_assert_int_eq(ret, want_err);
	ck_assert_msg(strstr(log, reason), "log lacks '%s': %s", reason, log);
	ck_assert_msg(strstr(log, "closing the connection"), "no teardown logged: %s", log);
	ck_assert_int_eq(fx.q.state, NVMF_Q_DRAINING);
	ck_assert_int_eq(fx.q.error, want_err);
	ck_assert_int_eq(fx.tq->conn, TCP_CONN_CLOSING);
	/* Nothing is consumed once the queue is closing. */
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), -ECONNRESET);

	/* The last thing on the wire is the H2C TermReq, if one is due. */
	size_t n = tcpfx_peer_read(&fx, sent, sizeof(sent)), off = 0;
	const struct nvme_tcp_term *term = NULL;
	while (off + sizeof(struct nvme_tcp_hdr) <= n) {
		const struct nvme_tcp_hdr *h = (const void *)(sent + off);
		if (h->type == NVME_TCP_H2C_TERM)
			term = (const void *)h;
		ck_assert_uint_ge(h->plen, 8);
		off += h->plen;
	}
	ck_assert_uint_eq(off, n);
	if (want_fes < 0) {
		ck_assert_ptr_null(term);
	} else {
		ck_assert_ptr_nonnull(term);
		ck_assert_uint_eq(term->fes, (unsigned)want_fes);
		ck_assert_uint_ge(term->hdr.plen, sizeof(*term));
		if (echo_len) {
			ck_assert_uint_eq(term->hdr.plen, sizeof(*term) + echo_len);
			ck_assert(!memcmp(term + 1, echo_want, echo_len));
		}
	}
	echo_len = 0;
	ck_assert(tcpfx_settle(&fx));
	ck_assert_int_eq(fx.q.state, NVMF_Q_DEAD);
}

static void assert_done(const struct nvmf_req *req, unsigned slot, int err, uint16_t status)
{
	(void)req;
	ck_assert_uint_eq(fx.done_count[slot], 1);
	ck_assert_int_eq(fx.done_err[slot], err);
	if (!err)
		ck_assert_uint_eq(fx.done_status[slot], status);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

/* The owner frees the data buffer when its request completes, as the
 * NBD and FUSE front ends do: a later touch of it is a use-after-free. */
static void free_data(struct tcp_fixture *f, struct nvmf_req *req, int err)
{
	(void)f;
	(void)err;
	free(req->iov[0].iov_base);
}

/* What the host wrote on the socket: the PDU types in order, the H2C
 * TermReq's FES (or -1), and how many H2CData PDUs. */
static int wire_scan(unsigned *h2c_count)
{
	static uint8_t sent[BUFSZ];
	size_t n = tcpfx_peer_read(&fx, sent, sizeof(sent)), off = 0;
	int fes = -1;

	*h2c_count = 0;
	while (off + sizeof(struct nvme_tcp_hdr) <= n) {
		const struct nvme_tcp_hdr *h = (const void *)(sent + off);
		if (h->type == NVME_TCP_H2C_TERM)
			fes = ((const struct nvme_tcp_term *)h)->fes;
		if (h->type == NVME_TCP_H2C_DATA)
			(*h2c_count)++;
		ck_assert_uint_ge(h->plen, 8);
		off += h->plen;
	}
	ck_assert_uint_eq(off, n);
	return fes;
}

/* Feeds the stream while the command's send is still in flight, then lets
 * the reactor reap it; the target broke the protocol with the last PDU. */
static void expect_failure_send_in_flight(const char *reason, int want_fes)
{
	int ret;
	unsigned h2c;

	log_begin();
	ret = tcp_rx_consume(fx.tq, stream, (uint32_t)slen);
	/* Under ASan, the unfixed code dies here: the send completion
	 * finishes the request, its owner frees the buffer, and the queued
	 * H2CData is built from it. */
	bool settled = tcpfx_settle(&fx);
	const char *log = log_end();
	ck_assert(settled);
	ck_assert_int_eq(ret, -EPROTO);
	ck_assert_msg(strstr(log, reason), "log lacks '%s': %s", reason, log);
	ck_assert_int_eq(fx.q.state, NVMF_Q_DEAD);
	ck_assert_int_eq(fx.q.error, -EPROTO);
	ck_assert_int_eq(wire_scan(&h2c), want_fes);
	ck_assert_uint_eq(h2c, 0);
}

/* Issue 14, defect 3: error CapsuleResp for a write whose command send is
 * not reaped yet, then an R2T for the same CID. */
static void r2t_after_response(void)
{
	uint8_t *data = malloc(8192);
	struct nvmf_req *req;
	unsigned s;

	ck_assert_ptr_nonnull(data);
	fill(data, 8192, 5);
	fx.on_done = free_data;
	req = tcpfx_submit_nowait(&fx, true, data, 8192);
	s = tcpfx_slot(req);
	ck_assert(fx.tq->send_pending);
	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0x6);
	pdu_r2t(&fx, stream, &slen, req->cid, 0, 8192);
	expect_failure_send_in_flight("R2T for CID", NVME_TCP_FES_PDU_SEQ_ERR);
	ck_assert_uint_eq(fx.done_count[s], 1);
}

START_TEST(r2t_after_error_response_send_unreaped) { r2t_after_response(); }
END_TEST

START_TEST(r2t_after_error_response_send_unreaped_digests) { r2t_after_response(); }
END_TEST

/* The same for a read: C2HData after the response, send not reaped. */
START_TEST(c2h_after_error_response_send_unreaped)
{
	uint8_t *buf = malloc(4096), d[4096];
	struct nvmf_req *req;
	unsigned s;

	ck_assert_ptr_nonnull(buf);
	fill(d, sizeof(d), 6);
	fx.on_done = free_data;
	req = tcpfx_submit_nowait(&fx, false, buf, 4096);
	s = tcpfx_slot(req);
	ck_assert(fx.tq->send_pending);
	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0x6);
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, sizeof(d), NVME_TCP_F_DATA_LAST);
	expect_failure_send_in_flight("C2HData for CID", NVME_TCP_FES_PDU_SEQ_ERR);
	ck_assert_uint_eq(fx.done_count[s], 1);
}
END_TEST

/* Both orders of "response" and "send reaped" complete the request once,
 * and never before its send is reaped. */
START_TEST(response_before_send_reaped)
{
	uint8_t *data = malloc(512);
	struct nvmf_req *req;
	unsigned s, h2c;

	ck_assert_ptr_nonnull(data);
	fx.on_done = free_data;
	fx.q.in_capsule_max = 4096;
	req = tcpfx_submit_nowait(&fx, true, data, 512); /* in-capsule */
	s = tcpfx_slot(req);
	ck_assert(fx.tq->send_pending);
	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	ck_assert_uint_eq(fx.done_count[s], 0);
	ck_assert(tcpfx_settle(&fx));
	assert_done(req, s, 0, 0);
	ck_assert_int_eq(wire_scan(&h2c), -1);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}
END_TEST

/* Completions that waited for their batch's send are delivered after it is
 * reaped; a completion's owner submitting at once starts the next batch
 * from inside that loop.  Regression: the new batch overwrote the array
 * the loop walked, and the requests after the first in the old batch never
 * completed (a 1 MiB write split in 18 commands hung against nvmet until
 * its timeout). */
static uint8_t nest_data[8][512];
static bool nest_submitted;

static void submit_on_first_done(struct tcp_fixture *f, struct nvmf_req *req, int err)
{
	(void)req;
	(void)err;
	if (nest_submitted)
		return;
	nest_submitted = true;
	ck_assert_ptr_nonnull(tcpfx_submit_nowait(f, true, nest_data[6], 512));
}

START_TEST(completions_after_batch_reaped_with_nested_submit)
{
	struct nvmf_req *x, *batch[3], *later[2];
	unsigned tries;

	fx.q.in_capsule_max = 4096;
	nest_submitted = false;
	x = tcpfx_submit_nowait(&fx, true, nest_data[0], 512);
	ck_assert(fx.tq->send_pending);
	/* Queued behind x's send: they go out together as the next batch. */
	for (int i = 0; i < 3; i++)
		batch[i] = tcpfx_submit_nowait(&fx, true, nest_data[1 + i], 512);
	/* Reap x's send only: the batch of three is then in flight. */
	for (tries = 0; tries < 500 && !tcp_req_of(batch[0])->cmd_item.in_batch; tries++)
		reactor_poll(fx.r, 10 * NSEC_PER_MSEC);
	ck_assert(tcp_req_of(batch[2])->cmd_item.in_batch);
	ck_assert_uint_eq(fx.tq->batch_cnt, 3);
	/* The target answers all three before their send is reaped. */
	slen = 0;
	for (int i = 0; i < 3; i++)
		pdu_rsp(&fx, stream, &slen, batch[i]->cid, 0);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(fx.done_count[tcpfx_slot(batch[i])], 0);
	/* Two more wait on the send list: with the nested submit, the kick
	 * from inside the completion loop builds a batch of three. */
	for (int i = 0; i < 2; i++)
		later[i] = tcpfx_submit_nowait(&fx, true, nest_data[4 + i], 512);
	fx.on_done = submit_on_first_done;
	ck_assert(tcpfx_settle(&fx));
	ck_assert(nest_submitted);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(fx.done_count[tcpfx_slot(batch[i])], 1);
	for (int i = 0; i < 2; i++)
		ck_assert_uint_eq(fx.done_count[tcpfx_slot(later[i])], 0);
	(void)x;
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}
END_TEST

/* ---- happy paths ---- */

static void read_c2h_then_rsp(void)
{
	static uint8_t buf[8192], want[8192];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	unsigned s = tcpfx_slot(req);
	uint16_t cid = req->cid;

	fill(want, sizeof(want), 3);
	slen = 0;
	pdu_c2h(&fx, stream, &slen, cid, 0, want, 4096, 0);
	pdu_c2h(&fx, stream, &slen, cid, 4096, want + 4096, 4096, NVME_TCP_F_DATA_LAST);
	pdu_rsp(&fx, stream, &slen, cid, 0);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	assert_done(req, s, 0, 0);
	ck_assert_mem_eq(buf, want, sizeof(buf));
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}

START_TEST(read_then_response) { read_c2h_then_rsp(); }
END_TEST

START_TEST(read_then_response_digests) { read_c2h_then_rsp(); }
END_TEST

START_TEST(read_success_flag)
{
	static uint8_t buf[4096], want[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	unsigned s = tcpfx_slot(req);

	fill(want, sizeof(want), 9);
	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, want, 4096,
		NVME_TCP_F_DATA_LAST | NVME_TCP_F_DATA_SUCCESS);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	assert_done(req, s, 0, 0);
	ck_assert_mem_eq(buf, want, sizeof(buf));
	/* The CID is free again: a response for it now is a forgery. */
	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	expect_failure(-EPROTO, "not in flight", NVME_TCP_FES_INVALID_PDU_HDR);
	ck_assert_uint_eq(fx.done_count[s], 1);
}
END_TEST

START_TEST(error_status_passed_up)
{
	static uint8_t buf[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	unsigned s = tcpfx_slot(req);

	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0x281); /* media: unrecovered read error */
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	assert_done(req, s, 0, 0x281);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}
END_TEST

/* A stream of large C2HData PDUs: once a header and a little data came
 * through the staging buffer and the rest went direct, the next staged
 * read stops at the end of the next C2HData header (this PDU's digest,
 * the next header), so that the next PDU's data goes direct as well; the
 * last PDU's read also takes its response.  Small PDUs read all there is. */
static void stream_reads_stop_at_next_header(void)
{
	enum { PDU = 36 * 1024 };
	static uint8_t buf[2 * PDU], want[2 * PDU], small[4096], s2[BUFSZ];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	unsigned s = tcpfx_slot(req);
	uint32_t hd = fx.tq->hdgst ? 4 : 0, dd = fx.tq->ddgst ? 4 : 0, hl = 24 + hd;
	size_t l2 = 0;

	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), 65536);
	fill(want, sizeof(want), 5);
	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, want, PDU, 0);
	/* The header and 1000 bytes of data staged, the rest direct. */
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, hl + 1000), (int)(hl + 1000));
	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), PDU - 1000 + dd + hl);
	memcpy(buf + 1000, want + 1000, PDU - 1000);
	ck_assert_int_eq(tcp_rx_direct_done(fx.tq, PDU - 1000), 0);
	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), dd + hl);
	/* Its digest and the next header, staged: the data direct. */
	pdu_c2h(&fx, s2, &l2, req->cid, PDU, want + PDU, PDU, NVME_TCP_F_DATA_LAST);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream + slen - dd, dd), (int)dd);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, s2, hl), (int)hl);
	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), PDU + dd + 24 + hd + hl);
	memcpy(buf + PDU, want + PDU, PDU);
	ck_assert_int_eq(tcp_rx_direct_done(fx.tq, PDU), 0);
	/* The last one's digest, its response and a header. */
	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), dd + 24 + hd + hl);
	pdu_rsp(&fx, s2, &l2, req->cid, 0);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, s2 + hl + PDU, dd + 24 + hd), (int)(dd + 24 + hd));
	assert_done(req, s, 0, 0);
	ck_assert_mem_eq(buf, want, sizeof(buf));
	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), hl);
	/* A small PDU ends the stream: read all there is again. */
	req = tcpfx_submit(&fx, false, small, sizeof(small));
	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, want, sizeof(small), NVME_TCP_F_DATA_LAST);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, hl), (int)hl);
	ck_assert_uint_eq(tcp_rx_staged_len(fx.tq, 65536), 65536);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}

/* The same through the socket (the queue's own receive loop, not fed by
 * hand): 768 KiB of reads in 128 KiB C2HData PDUs lands in the callers'
 * buffers with almost nothing copied out of the staging buffer: the first
 * read, before any PDU said a stream starts, and the under-4-KiB rests of
 * short direct reads.  Before, about half of every PDU was.  With SUCCESS
 * (no CapsuleResp) the stream ends at the next header just the same. */
static void stream_through_socket(bool success)
{
	enum { N = 6, PDU = 128 * 1024 };
	uint8_t *bufs = malloc((size_t)N * PDU), *want = malloc((size_t)N * PDU);
	uint8_t *wire = malloc((size_t)N * (PDU + 128));
	struct nvmf_req *req[N];
	size_t wlen = 0, woff = 0;

	ck_assert(bufs && want && wire);
	fill(want, (size_t)N * PDU, 7);
	for (unsigned i = 0; i < N; i++) {
		req[i] = tcpfx_submit(&fx, false, bufs + (size_t)i * PDU, PDU);
		ck_assert_ptr_nonnull(req[i]);
	}
	for (unsigned i = 0; i < N; i++) {
		pdu_c2h(&fx, wire, &wlen, req[i]->cid, 0, want + (size_t)i * PDU, PDU,
			(uint8_t)(NVME_TCP_F_DATA_LAST | (success ? NVME_TCP_F_DATA_SUCCESS : 0)));
		if (!success)
			pdu_rsp(&fx, wire, &wlen, req[i]->cid, 0);
	}
	tcp_recv_arm(fx.tq);
	/* Bounded by progress, not time: each pass moves bytes or completes. */
	for (int idle = 0; idle < 1000;) {
		bool all = true;
		for (unsigned i = 0; i < N; i++)
			all = all && fx.done_count[tcpfx_slot(req[i])];
		if (all)
			break;
		ssize_t w = woff < wlen ? write(fx.peer, wire + woff, wlen - woff) : 0;
		if (w > 0)
			woff += (size_t)w;
		reactor_poll(fx.r, 10 * NSEC_PER_MSEC);
		idle = w > 0 ? 0 : idle + 1;
	}
	for (unsigned i = 0; i < N; i++)
		assert_done(req[i], tcpfx_slot(req[i]), 0, 0);
	ck_assert(memcmp(bufs, want, (size_t)N * PDU) == 0);
	ck_assert_uint_eq(woff, wlen);
	ck_assert_msg(fx.tq->nr_rx_staged_data <= 65536 + N * 4096,
		      "%llu of %u data bytes copied from the staging buffer",
		      (unsigned long long)fx.tq->nr_rx_staged_data, N * PDU);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
	free(bufs);
	free(want);
	free(wire);
}

START_TEST(stream_socket) { stream_through_socket(false); }
END_TEST

START_TEST(stream_socket_success) { stream_through_socket(true); }
END_TEST

START_TEST(stream_socket_digests) { stream_through_socket(false); }
END_TEST

START_TEST(stream_reads) { stream_reads_stop_at_next_header(); }
END_TEST

START_TEST(stream_reads_digests) { stream_reads_stop_at_next_header(); }
END_TEST

/* Every split of a digest-protected read: header, digest, data, data
 * digest and response each resume after partial input. */
START_TEST(read_split_every_byte)
{
	static uint8_t buf[600], want[600];
	unsigned completed = 0;

	fill(want, sizeof(want), 1);
	for (size_t cut = 0;; cut++) {
		struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
		unsigned s = tcpfx_slot(req);
		unsigned before = fx.done_count[s];

		memset(buf, 0, sizeof(buf));
		slen = 0;
		pdu_c2h(&fx, stream, &slen, req->cid, 0, want, 100, 0);
		pdu_c2h(&fx, stream, &slen, req->cid, 100, want + 100, 500, NVME_TCP_F_DATA_LAST);
		pdu_rsp(&fx, stream, &slen, req->cid, 0);
		if (cut > slen)
			break;
		ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)cut), (int)cut);
		if (cut < slen)
			ck_assert_uint_eq(fx.done_count[s], before);
		ck_assert_int_eq(tcp_rx_consume(fx.tq, stream + cut, (uint32_t)(slen - cut)),
				 (int)(slen - cut));
		ck_assert_uint_eq(fx.done_count[s], before + 1);
		ck_assert_int_eq(fx.done_err[s], 0);
		ck_assert_mem_eq(buf, want, sizeof(buf));
		completed++;
	}
	/* And one byte at a time. */
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	unsigned s = tcpfx_slot(req), before = fx.done_count[s];
	memset(buf, 0, sizeof(buf));
	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, want, 600,
		NVME_TCP_F_DATA_LAST | NVME_TCP_F_DATA_SUCCESS);
	for (size_t i = 0; i < slen; i++)
		ck_assert_int_eq(tcp_rx_consume(fx.tq, stream + i, 1), 1);
	ck_assert_uint_eq(fx.done_count[s], before + 1);
	ck_assert_mem_eq(buf, want, sizeof(buf));
	ck_assert_uint_gt(completed, 600);
	ck_assert_int_eq(fx.q.state, NVMF_Q_LIVE);
}
END_TEST

/* A target may pad before the data (PDO past the header). */
START_TEST(read_with_padding)
{
	static uint8_t buf[512], want[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	unsigned s = tcpfx_slot(req);
	struct nvme_tcp_data p = {
		.hdr = { .type = NVME_TCP_C2H_DATA,
			 .flags = NVME_TCP_F_DATA_LAST | NVME_TCP_F_DATA_SUCCESS,
			 .hlen = 24,
			 .pdo = 32,
			 .plen = 32 + 512 },
		.cccid = req->cid,
		.length = 512,
	};

	fill(want, sizeof(want), 5);
	slen = 0;
	memcpy(stream, &p, sizeof(p));
	memset(stream + 24, 0xee, 8);
	memcpy(stream + 32, want, 512);
	slen = 32 + 512;
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	assert_done(req, s, 0, 0);
	ck_assert_mem_eq(buf, want, sizeof(buf));
}
END_TEST

/* R2T -> H2CData split at MAXH2CDATA, then the response completes it. */
START_TEST(write_r2t)
{
	static uint8_t data[10000], sent[BUFSZ];
	struct nvmf_req *req;
	unsigned s;
	size_t n, off;
	uint32_t next = 0;

	fill(data, sizeof(data), 11);
	req = tcpfx_submit(&fx, true, data, sizeof(data));
	s = tcpfx_slot(req);
	n = tcpfx_peer_read(&fx, sent, sizeof(sent));
	ck_assert_uint_eq(n, sizeof(struct nvme_tcp_cmd) + (fx.tq->hdgst ? 4 : 0));
	ck_assert_uint_eq(((struct nvme_tcp_cmd *)sent)->sqe.cid, req->cid);
	slen = 0;
	pdu_r2t(&fx, stream, &slen, req->cid, 0, sizeof(data));
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	ck_assert(tcpfx_settle(&fx));
	n = tcpfx_peer_read(&fx, sent, sizeof(sent));
	for (off = 0; off < n;) {
		const struct nvme_tcp_data *h = (const void *)(sent + off);
		ck_assert_uint_eq(h->hdr.type, NVME_TCP_H2C_DATA);
		ck_assert_uint_eq(h->cccid, req->cid);
		ck_assert_uint_eq(h->ttag, 0x55);
		ck_assert_uint_eq(h->offset, next);
		ck_assert_uint_le(h->length, 4096);
		ck_assert_mem_eq(sent + off + h->hdr.pdo, data + next, h->length);
		ck_assert_int_eq(!!(h->hdr.flags & NVME_TCP_F_DATA_LAST),
				 next + h->length == sizeof(data));
		next += h->length;
		off += h->hdr.plen;
	}
	ck_assert_uint_eq(next, sizeof(data));
	ck_assert_uint_eq(fx.done_count[s], 0);
	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	assert_done(req, s, 0, 0);
}
END_TEST

/* A command that times out says where it stood on the wire: here the
 * data the R2T asked for was all sent and the answer never came, so the
 * target is the one to look at. */
START_TEST(timeout_says_where_the_command_stood)
{
	static uint8_t data[8192];
	struct nvmf_req *req;
	unsigned s;
	char *log;

	fx.q.io_timeout_ms = 100;
	req = tcpfx_submit(&fx, true, data, sizeof(data));
	s = tcpfx_slot(req);
	slen = 0;
	pdu_r2t(&fx, stream, &slen, req->cid, 0, 4096);
	ck_assert_int_eq(tcp_rx_consume(fx.tq, stream, (uint32_t)slen), (int)slen);
	ck_assert(tcpfx_settle(&fx));
	log_begin();
	for (int i = 0; i < 300 && fx.q.state == NVMF_Q_LIVE; i++)
		reactor_poll(fx.r, 10 * NSEC_PER_MSEC);
	ck_assert(tcpfx_settle(&fx));
	log = log_end();
	ck_assert_int_ne(fx.q.state, NVMF_Q_LIVE);
	ck_assert_ptr_nonnull(strstr(log, "timed out after 100 ms (tcp: command sent, data 4096 "
					  "of 8192 sent (R2T to 4096, H2CData sent), no response; "
					  "queue: no send in flight, 1 PDUs received)"));
	assert_done(req, s, -ETIMEDOUT, 0);
}
END_TEST

/* ---- violations ---- */

START_TEST(rsp_unknown_cid)
{
	static uint8_t buf[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_rsp(&fx, stream, &slen, 0x0fff, 0); /* index past the pool */
	expect_failure(-EPROTO, "CapsuleResp for CID 0x0fff not in flight",
		       NVME_TCP_FES_INVALID_PDU_HDR);
	/* What was in flight is completed once, with the error. */
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(rsp_free_slot_and_stale_generation)
{
	static uint8_t buf[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	uint16_t stale = (uint16_t)(req->cid ^ (1u << NVMF_CID_IDX_BITS));
	char why[64];

	slen = 0;
	pdu_rsp(&fx, stream, &slen, stale, 0);
	snprintf(why, sizeof(why), "CID 0x%04x not in flight", stale);
	expect_failure(-EPROTO, why, NVME_TCP_FES_INVALID_PDU_HDR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(rsp_never_used_slot)
{
	slen = 0;
	pdu_rsp(&fx, stream, &slen, 3, 0);
	expect_failure(-EPROTO, "CapsuleResp for CID 0x0003 not in flight",
		       NVME_TCP_FES_INVALID_PDU_HDR);
}
END_TEST

START_TEST(c2h_unknown_cid)
{
	static uint8_t buf[512], d[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, (uint16_t)(req->cid + 1), 0, d, 512, NVME_TCP_F_DATA_LAST);
	expect_failure(-EPROTO, "C2HData for CID", NVME_TCP_FES_INVALID_PDU_HDR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(c2h_beyond_length)
{
	static uint8_t buf[4096], d[8192];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, 0);
	pdu_c2h(&fx, stream, &slen, req->cid, 4096, d, 512, NVME_TCP_F_DATA_LAST);
	expect_failure(-EPROTO, "carries [4096, +512) of 4096 bytes",
		       NVME_TCP_FES_DATA_OUT_OF_RANGE);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(c2h_longer_than_command)
{
	static uint8_t buf[4096], d[8192];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 8192, NVME_TCP_F_DATA_LAST);
	expect_failure(-EPROTO, "carries [0, +8192) of 4096 bytes", NVME_TCP_FES_DATA_OUT_OF_RANGE);
}
END_TEST

START_TEST(c2h_for_write)
{
	static uint8_t buf[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, true, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, buf, 4096, NVME_TCP_F_DATA_LAST);
	expect_failure(-EPROTO, "which expects no data", NVME_TCP_FES_PDU_SEQ_ERR);
}
END_TEST

START_TEST(c2h_success_without_last)
{
	static uint8_t buf[4096], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, NVME_TCP_F_DATA_SUCCESS);
	expect_failure(-EPROTO, "SUCCESS but without LAST_PDU", NVME_TCP_FES_INVALID_PDU_HDR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(c2h_success_before_all_data)
{
	static uint8_t buf[8192], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096,
		NVME_TCP_F_DATA_SUCCESS | NVME_TCP_F_DATA_LAST);
	expect_failure(-EPROTO, "before all 8192 bytes", NVME_TCP_FES_PDU_SEQ_ERR);
}
END_TEST

START_TEST(rsp_before_all_data)
{
	static uint8_t buf[8192], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, 0);
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	expect_failure(-EPROTO, "completed after 4096 of 8192 data bytes", NVME_TCP_FES_PDU_SEQ_ERR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(data_digest_mismatch)
{
	static uint8_t buf[4096], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, NVME_TCP_F_DATA_LAST);
	stream[slen - 1] ^= 0x40; /* the data digest */
	/* No fatal error status exists for it: closed without a TermReq. */
	expect_failure(-EPROTO, "data digest mismatch", -1);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(data_corrupted_under_digest)
{
	static uint8_t buf[4096], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, NVME_TCP_F_DATA_LAST);
	stream[slen - 100] ^= 1; /* a payload byte */
	expect_failure(-EPROTO, "data digest mismatch", -1);
}
END_TEST

START_TEST(header_digest_mismatch)
{
	static uint8_t buf[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	stream[slen - 2] ^= 0x01;
	expect_failure(-EPROTO, "header digest mismatch", NVME_TCP_FES_HDR_DIGEST_ERR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(header_field_under_digest)
{
	static uint8_t buf[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	stream[8] ^= 0x01; /* CQE result, covered by the digest */
	expect_failure(-EPROTO, "header digest mismatch", NVME_TCP_FES_HDR_DIGEST_ERR);
}
END_TEST

START_TEST(digest_flag_not_negotiated)
{
	static uint8_t buf[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_rsp(&fx, stream, &slen, req->cid, 0);
	stream[1] |= NVME_TCP_F_HDGST;
	expect_failure(-EPROTO, "header digest flag set, not negotiated",
		       NVME_TCP_FES_INVALID_PDU_HDR);
}
END_TEST

static void rsp_with(uint8_t hlen, uint32_t plen, const char *why)
{
	static uint8_t buf[512];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));
	struct nvme_tcp_rsp r = { .hdr = { .type = NVME_TCP_RSP, .hlen = hlen, .plen = plen } };

	r.cqe.cid = req->cid;
	memcpy(stream, &r, sizeof(r));
	slen = sizeof(r);
	expect_failure(-EPROTO, why, NVME_TCP_FES_INVALID_PDU_HDR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}

START_TEST(plen_below_hlen) { rsp_with(24, 20, "plen 20 shorter than its header"); }
END_TEST

START_TEST(plen_zero) { rsp_with(24, 0, "plen 0 shorter than its header"); }
END_TEST

START_TEST(wrong_hlen) { rsp_with(16, 24, "with hlen 16, expected 24"); }
END_TEST

START_TEST(hlen_too_big) { rsp_with(200, 224, "with hlen 200, expected 24"); }
END_TEST

START_TEST(rsp_plen_too_long) { rsp_with(24, 28, "plen 28, expected 24"); }
END_TEST

START_TEST(c2h_plen_mismatch)
{
	static uint8_t buf[4096], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, NVME_TCP_F_DATA_LAST);
	((struct nvme_tcp_hdr *)stream)->plen -= 4;
	expect_failure(-EPROTO, "does not match pdo 24 + datal 4096", NVME_TCP_FES_INVALID_PDU_HDR);
}
END_TEST

START_TEST(c2h_pdo_inside_header)
{
	static uint8_t buf[4096], d[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_c2h(&fx, stream, &slen, req->cid, 0, d, 4096, NVME_TCP_F_DATA_LAST);
	((struct nvme_tcp_hdr *)stream)->pdo = 16;
	expect_failure(-EPROTO, "with PDO 16", NVME_TCP_FES_INVALID_PDU_HDR);
}
END_TEST

START_TEST(r2t_beyond_length)
{
	static uint8_t data[8192];
	struct nvmf_req *req = tcpfx_submit(&fx, true, data, sizeof(data));

	slen = 0;
	pdu_r2t(&fx, stream, &slen, req->cid, 0, 8192 + 512);
	expect_failure(-EPROTO, "asks [0, +8704) of 8192 bytes", NVME_TCP_FES_DATA_OUT_OF_RANGE);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(r2t_wrong_offset)
{
	static uint8_t data[8192];
	struct nvmf_req *req = tcpfx_submit(&fx, true, data, sizeof(data));

	slen = 0;
	pdu_r2t(&fx, stream, &slen, req->cid, 4096, 4096);
	expect_failure(-EPROTO, "asks [4096, +4096) of 8192 bytes, next 0",
		       NVME_TCP_FES_DATA_OUT_OF_RANGE);
}
END_TEST

START_TEST(r2t_for_read)
{
	static uint8_t buf[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_r2t(&fx, stream, &slen, req->cid, 0, 4096);
	expect_failure(-EPROTO, "which has no data to send", NVME_TCP_FES_PDU_SEQ_ERR);
	assert_done(req, tcpfx_slot(req), -EPROTO, 0);
}
END_TEST

START_TEST(r2t_while_active)
{
	static uint8_t data[16384];
	struct nvmf_req *req = tcpfx_submit(&fx, true, data, sizeof(data));

	/* Keep the first R2T's data from being sent: the second arrives
	 * while it is still active. */
	fx.tq->send_pending = true;
	slen = 0;
	pdu_r2t(&fx, stream, &slen, req->cid, 0, 8192);
	pdu_r2t(&fx, stream, &slen, req->cid, 8192, 8192);
	log_begin();
	int ret = tcp_rx_consume(fx.tq, stream, (uint32_t)slen);
	const char *log = log_end();
	fx.tq->send_pending = false;
	ck_assert_int_eq(ret, -EPROTO);
	ck_assert_ptr_nonnull(strstr(log, "while one is active"));
	ck_assert_int_eq(fx.q.state, NVMF_Q_DRAINING);
}
END_TEST

START_TEST(unknown_pdu_type)
{
	uint8_t types[] = { 0x0a, 0x7f, NVME_TCP_CMD, NVME_TCP_H2C_DATA, NVME_TCP_ICREQ,
			    NVME_TCP_H2C_TERM };

	for (unsigned i = 0; i < sizeof(types); i++) {
		struct nvme_tcp_hdr h = { .type = types[i], .hlen = 24, .plen = 24 };
		char why[64];

		tcpfx_fini(&fx);
		ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, false, false), 0);
		memcpy(stream, &h, sizeof(h));
		slen = sizeof(h);
		snprintf(why, sizeof(why), "unexpected PDU type 0x%02x", types[i]);
		expect_failure(-EPROTO, why, NVME_TCP_FES_INVALID_PDU_HDR);
	}
}
END_TEST

START_TEST(icresp_when_live)
{
	struct nvme_tcp_icresp ic = { .hdr = { .type = NVME_TCP_ICRESP, .hlen = 128, .plen = 128 } };

	memcpy(stream, &ic, sizeof(ic));
	slen = sizeof(ic);
	expect_failure(-EPROTO, "out of sequence", NVME_TCP_FES_PDU_SEQ_ERR);
}
END_TEST

/* An ICResp refused (each field the host checks): the TermReq says which
 * field and carries the ICResp, as the FEI points into it.  It went out
 * with no header once (the receive state was reset before the check). */
START_TEST(icresp_refused_echoed)
{
	static const struct {
		uint8_t pfv, cpda, digest;
		uint32_t maxdata;
		unsigned fes, fei;
		const char *why;
	} c[] = {
		{ 1, 0, 0, 8192, NVME_TCP_FES_UNSUPPORTED_PARAM, 8, "PDU format version 1" },
		{ 0, 32, 0, 8192, NVME_TCP_FES_INVALID_PDU_HDR, 10, "CPDA 32" },
		{ 0, 0, 1, 8192, NVME_TCP_FES_UNSUPPORTED_PARAM, 11, "answered digests 0x1" },
		{ 0, 0, 0, 1024, NVME_TCP_FES_INVALID_PDU_HDR, 12, "MAXH2CDATA 1024" },
	};
	for (unsigned i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		if (i)
			ck_assert_int_eq(tcpfx_init(&fx, NULL, 8, false, false), 0);
		struct nvme_tcp_icresp ic = { .hdr = { .type = NVME_TCP_ICRESP, .hlen = 128,
						       .plen = 128 },
					      .pfv = c[i].pfv, .cpda = c[i].cpda,
					      .digest = c[i].digest, .maxdata = c[i].maxdata };
		fx.tq->conn = TCP_CONN_ICREQ; /* the ICReq went out */
		memcpy(stream, &ic, sizeof(ic));
		slen = sizeof(ic);
		echo_want = &ic;
		echo_len = sizeof(ic);
		expect_failure(-EPROTO, c[i].why, (int)c[i].fes);
		if (i + 1 < sizeof(c) / sizeof(c[0]))
			tcpfx_fini(&fx);
	}
}
END_TEST

/* An in-capsule write whose iovecs hold less than its length (a caller's
 * bug, not the target's doing) is refused at submit, without a digest as
 * with one; it once went out as a capsule whose PDU length counted data
 * that was not there, and the target read the next PDUs as that data. */
START_TEST(in_capsule_short_iov_refused)
{
	static uint8_t buf[512];
	struct nvmf_req *req = nvmf_req_get(&fx.q);
	struct iovec iov = { buf, 100 };
	unsigned h2c;

	ck_assert_ptr_nonnull(req);
	fx.q.in_capsule_max = 4096;
	req->sqe.opcode = NVME_CMD_WRITE;
	req->sqe.nsid = 1;
	nvmf_req_set_data(req, &iov, 1, sizeof(buf), true);
	req->done = tcpfx_done;
	req->ctx = &fx;
	nvmf_req_submit(req);
	ck_assert(tcpfx_settle(&fx));
	ck_assert_uint_eq(fx.done_count[tcpfx_slot(req)], 1);
	ck_assert_int_eq(fx.done_err[tcpfx_slot(req)], -EINVAL);
	ck_assert_int_eq(wire_scan(&h2c), -1); /* every PDU on the wire whole */
}
END_TEST

START_TEST(term_from_controller)
{
	static uint8_t buf[4096];
	struct nvmf_req *req = tcpfx_submit(&fx, false, buf, sizeof(buf));

	slen = 0;
	pdu_term(stream, &slen, NVME_TCP_FES_DATA_OUT_OF_RANGE, 0x10);
	/* The target is closing: no TermReq goes back. */
	expect_failure(-ECONNRESET, "target sent C2HTermReq: data transfer out of range", -1);
	assert_done(req, tcpfx_slot(req), -ECONNRESET, 0);
}
END_TEST

START_TEST(term_plen_too_long)
{
	struct nvme_tcp_term t = { .hdr = { .type = NVME_TCP_C2H_TERM, .hlen = 24,
					    .plen = 24 + 153 } };

	memcpy(stream, &t, sizeof(t));
	slen = sizeof(t);
	expect_failure(-EPROTO, "C2HTermReq with plen 177", NVME_TCP_FES_INVALID_PDU_HDR);
}
END_TEST

/* A violation in the middle of a stream: what came before it counts, and
 * the rest of the in-flight requests fail once. */
START_TEST(violation_after_valid_pdus)
{
	static uint8_t b1[512], b2[512], d[512];
	struct nvmf_req *r1 = tcpfx_submit(&fx, false, b1, sizeof(b1));
	struct nvmf_req *r2 = tcpfx_submit(&fx, false, b2, sizeof(b2));
	unsigned s1 = tcpfx_slot(r1), s2 = tcpfx_slot(r2);

	fill(d, sizeof(d), 2);
	slen = 0;
	pdu_c2h(&fx, stream, &slen, r1->cid, 0, d, 512,
		NVME_TCP_F_DATA_LAST | NVME_TCP_F_DATA_SUCCESS);
	pdu_c2h(&fx, stream, &slen, r2->cid, 0, d, 512, NVME_TCP_F_DATA_SUCCESS);
	expect_failure(-EPROTO, "SUCCESS but without LAST_PDU", NVME_TCP_FES_INVALID_PDU_HDR);
	assert_done(r1, s1, 0, 0);
	ck_assert_mem_eq(b1, d, sizeof(d));
	assert_done(r2, s2, -EPROTO, 0);
}
END_TEST

static Suite *tcp_rx_suite(void)
{
	Suite *s = suite_create("tcp_rx");
	TCase *plain = tcase_create("plain"), *dig = tcase_create("digests");

	tcase_add_checked_fixture(plain, setup_plain, teardown);
	tcase_add_checked_fixture(dig, setup_digest, teardown);
	tcase_add_test(plain, read_then_response);
	tcase_add_test(dig, read_then_response_digests);
	tcase_add_test(plain, read_success_flag);
	tcase_add_test(plain, error_status_passed_up);
	tcase_add_test(dig, read_split_every_byte);
	tcase_add_test(plain, stream_reads);
	tcase_add_test(dig, stream_reads_digests);
	tcase_add_test(plain, stream_socket);
	tcase_add_test(plain, stream_socket_success);
	tcase_add_test(dig, stream_socket_digests);
	tcase_add_test(plain, read_with_padding);
	tcase_add_test(plain, write_r2t);
	tcase_add_test(plain, rsp_unknown_cid);
	tcase_add_test(plain, rsp_free_slot_and_stale_generation);
	tcase_add_test(plain, rsp_never_used_slot);
	tcase_add_test(plain, c2h_unknown_cid);
	tcase_add_test(plain, c2h_beyond_length);
	tcase_add_test(plain, c2h_longer_than_command);
	tcase_add_test(plain, c2h_for_write);
	tcase_add_test(plain, c2h_success_without_last);
	tcase_add_test(plain, c2h_success_before_all_data);
	tcase_add_test(plain, rsp_before_all_data);
	tcase_add_test(dig, data_digest_mismatch);
	tcase_add_test(dig, data_corrupted_under_digest);
	tcase_add_test(dig, header_digest_mismatch);
	tcase_add_test(dig, header_field_under_digest);
	tcase_add_test(plain, digest_flag_not_negotiated);
	tcase_add_test(plain, plen_below_hlen);
	tcase_add_test(plain, plen_zero);
	tcase_add_test(plain, wrong_hlen);
	tcase_add_test(plain, hlen_too_big);
	tcase_add_test(plain, rsp_plen_too_long);
	tcase_add_test(plain, c2h_plen_mismatch);
	tcase_add_test(plain, c2h_pdo_inside_header);
	tcase_add_test(plain, r2t_beyond_length);
	tcase_add_test(plain, r2t_wrong_offset);
	tcase_add_test(plain, r2t_for_read);
	tcase_add_test(plain, r2t_while_active);
	tcase_add_test(plain, unknown_pdu_type);
	tcase_add_test(plain, icresp_when_live);
	tcase_add_test(plain, icresp_refused_echoed);
	tcase_add_test(plain, in_capsule_short_iov_refused);
	tcase_add_test(plain, term_from_controller);
	tcase_add_test(plain, term_plen_too_long);
	tcase_add_test(plain, violation_after_valid_pdus);
	tcase_add_test(dig, write_r2t);
	tcase_add_test(plain, r2t_after_error_response_send_unreaped);
	tcase_add_test(dig, r2t_after_error_response_send_unreaped_digests);
	tcase_add_test(plain, c2h_after_error_response_send_unreaped);
	tcase_add_test(plain, response_before_send_reaped);
	tcase_add_test(plain, completions_after_batch_reaped_with_nested_submit);
	tcase_add_test(plain, timeout_says_where_the_command_stood);
	suite_add_tcase(s, plain);
	suite_add_tcase(s, dig);
	return s;
}

int main(void)
{
	unit_need_io_uring();
	SRunner *sr = srunner_create(tcp_rx_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
