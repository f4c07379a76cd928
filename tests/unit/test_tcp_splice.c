/* The NVMe/TCP receive with a pipe (req->sink, gateway/base/pipe_sink.h):
 * the payload of a read goes from the socket into the pipe behind its
 * owner's prefix, or, whenever the receive cannot go on that way, wholly
 * into the buffer; never some of each.  Driven through the socket by the
 * queue's own receive loop, as in production. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/base/pipe_sink.h"
#include "tests/unit/tcp_fixture.h"
#include "tests/unit/unit_skip.h"

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
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
