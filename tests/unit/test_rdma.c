/* NVMe/RDMA transport: the parts that need no RDMA device. */
#include "transports/rdma/rdma_internal.h"

#include <check.h>
#include <infiniband/verbs.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/reactor.h"
#include "unit_skip.h"

static uint16_t le16_at(const void *p, size_t off)
{
	const uint8_t *b = (const uint8_t *)p + off;
	return (uint16_t)(b[0] | b[1] << 8);
}

START_TEST(cm_req_admin)
{
	struct nvme_rdma_cm_req r;

	memset(&r, 0xaa, sizeof(r));
	rdma_cm_req_init(&r, 0, 32, 7);
	/* Wire offsets of the RDMA transport binding, byte by byte. */
	ck_assert_uint_eq(le16_at(&r, 0), 0); /* recfmt 1.0 */
	ck_assert_uint_eq(le16_at(&r, 2), 0); /* qid */
	ck_assert_uint_eq(le16_at(&r, 4), 32); /* hrqsize, 1's based */
	ck_assert_uint_eq(le16_at(&r, 6), 31); /* hsqsize, 0's based */
	ck_assert_uint_eq(le16_at(&r, 8), 0); /* no cntlid for the admin queue */
	for (size_t i = 10; i < sizeof(r); i++)
		ck_assert_uint_eq(((uint8_t *)&r)[i], 0);
}
END_TEST

START_TEST(cm_req_io)
{
	struct nvme_rdma_cm_req r;

	rdma_cm_req_init(&r, 3, 128, 0x1234);
	ck_assert_uint_eq(le16_at(&r, 2), 3);
	ck_assert_uint_eq(le16_at(&r, 4), 128);
	ck_assert_uint_eq(le16_at(&r, 6), 127);
	ck_assert_uint_eq(le16_at(&r, 8), 0x1234);
}
END_TEST

START_TEST(reject_nvme_status)
{
	char buf[160];
	uint8_t pd[148] = { 0, 0, 3, 0 }; /* recfmt 0, sts 3 (invalid QID) */

	int err = rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, sizeof(pd), buf, sizeof(buf));
	ck_assert_int_eq(err, -ECONNREFUSED);
	ck_assert_msg(strstr(buf, "NVMe/RDMA status 3 (invalid queue ID)"), "%s", buf);

	pd[2] = NVME_RDMA_CM_NO_RSC;
	err = rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, 4, buf, sizeof(buf));
	ck_assert_int_eq(err, -EBUSY);
	ck_assert_msg(strstr(buf, "no resources"), "%s", buf);

	pd[2] = 0x77;
	rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, 4, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "status 119 (unknown status)"), "%s", buf);
}
END_TEST

START_TEST(reject_other)
{
	char buf[160];
	uint8_t pd[2] = { 0 };

	/* Too short to hold a status: said so, not read past the end. */
	ck_assert_int_eq(rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, sizeof(pd), buf,
					      sizeof(buf)),
			 -ECONNREFUSED);
	ck_assert_msg(strstr(buf, "without an NVMe/RDMA status"), "%s", buf);
	rdma_reject_describe(RDMA_REJ_INVALID_SERVICE_ID, NULL, 0, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "no NVMe/RDMA listener"), "%s", buf);
	rdma_reject_describe(5, NULL, 0, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "reject reason 5"), "%s", buf);
	for (uint16_t s = 1; s <= 9; s++)
		ck_assert_str_ne(rdma_cm_status_str(s), "unknown status");
}
END_TEST

START_TEST(sgl_keyed)
{
	struct nvme_sqe sqe;
	const uint8_t *d = (const uint8_t *)&sqe.dptr;

	memset(&sqe, 0xee, sizeof(sqe));
	rdma_sgl_keyed(&sqe, 0x1122334455667788ull, 0xabcdef, 0xdeadbeef);
	/* addr (8, LE), length (3, LE), key (4, LE), type */
	const uint8_t want[16] = { 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
				   0xef, 0xcd, 0xab, 0xef, 0xbe, 0xad, 0xde, 0x40 };
	ck_assert_mem_eq(d, want, 16);
	/* The rest of the SQE is untouched. */
	ck_assert_uint_eq(sqe.cdw10, 0xeeeeeeee);
	ck_assert_uint_eq(sqe.mptr, 0xeeeeeeeeeeeeeeeeull);
}
END_TEST

START_TEST(sgl_inline_and_null)
{
	struct nvme_sqe sqe;
	const uint8_t *d = (const uint8_t *)&sqe.dptr;

	memset(&sqe, 0xee, sizeof(sqe));
	rdma_sgl_inline(&sqe, 4096);
	const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0x01 };
	ck_assert_mem_eq(d, want, 16);

	rdma_sgl_null(&sqe);
	const uint8_t null[16] = { [15] = 0x40 };
	ck_assert_mem_eq(d, null, 16);
}
END_TEST

static struct nvme_cqe cqe_with(uint16_t cid, uint16_t status)
{
	struct nvme_cqe c;
	memset(&c, 0, sizeof(c));
	c.cid = cid;
	c.status = status;
	return c;
}

START_TEST(bookkeeping_resp)
{
	struct rdma_req rr = { 0 };
	struct nvme_cqe c = cqe_with(5, 0x4);

	/* Nothing posted (or still waiting for a send WR): a response is a
	 * protocol error, not a completion. */
	ck_assert_int_eq(rdma_req_resp(&rr, &c), -EPROTO);
	rdma_req_start(&rr);
	ck_assert_int_eq(rdma_req_resp(&rr, &c), 1);
	ck_assert_uint_eq(rr.resp.cid, 5);
	ck_assert_uint_eq(rr.resp.status, 0x4);
	/* A second response is never a second completion. */
	ck_assert_int_eq(rdma_req_resp(&rr, &c), -EPROTO);
	/* A reused slot starts over. */
	rdma_req_start(&rr);
	ck_assert_int_eq(rdma_req_resp(&rr, &c), 1);
}
END_TEST

START_TEST(sendq_signals_every_interval)
{
	struct rdma_sendq sq = { 0 };
	uint32_t seq;
	bool sig;

	ck_assert_int_eq(rdma_sendq_init(&sq, 12, 4), 0);
	for (uint32_t i = 0; i < 8; i++) {
		ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), 0);
		ck_assert_uint_eq(seq, i);
		ck_assert_msg(sig == (i % 4 == 3), "send %u signalled %d", i, sig);
	}
	ck_assert_uint_eq(rdma_sendq_used(&sq), 8);
	/* The completion of send 3 proves 0..3 done. */
	ck_assert_int_eq(rdma_sendq_complete(&sq, 3), 4);
	ck_assert_uint_eq(rdma_sendq_used(&sq), 4);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 7), 4);
	ck_assert_uint_eq(rdma_sendq_used(&sq), 0);
	ck_assert_uint_eq(sq.nr_signalled, 2);
	rdma_sendq_free(&sq);
}
END_TEST

START_TEST(sendq_last_free_wr_signalled)
{
	struct rdma_sendq sq = { 0 };
	uint32_t seq;
	bool sig;

	ck_assert_int_eq(rdma_sendq_init(&sq, 6, 4), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), 0);
	ck_assert(sig); /* 3: the interval */
	ck_assert_int_eq(rdma_sendq_complete(&sq, 0), -EPROTO); /* unsignalled */
	ck_assert_int_eq(rdma_sendq_complete(&sq, 3), 4);
	/* 4..9: 7 by the interval, then 9 because it takes the last free WR,
	 * though only two unsignalled sends follow 7. */
	for (uint32_t i = 4; i < 10; i++) {
		ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), 0);
		ck_assert_uint_eq(seq, i);
		ck_assert_msg(sig == (i == 7 || i == 9), "send %u signalled %d", i, sig);
	}
	ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), -EAGAIN);
	ck_assert_uint_eq(rdma_sendq_used(&sq), 6);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 7), 4);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 9), 2);
	/* The interval counts from the last signalled send. */
	for (uint32_t i = 10; i < 14; i++) {
		ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), 0);
		ck_assert_msg(sig == (i == 13), "send %u signalled %d", i, sig);
	}
	rdma_sendq_free(&sq);
}
END_TEST

START_TEST(sendq_completion_errors)
{
	struct rdma_sendq sq = { 0 };
	uint32_t seq;
	bool sig;

	ck_assert_int_eq(rdma_sendq_init(&sq, 8, 2), 0);
	for (int i = 0; i < 6; i++) /* signalled: 1, 3, 5 */
		ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), 0);
	/* 3 before 1: the completion of 1 went missing. */
	ck_assert_int_eq(rdma_sendq_complete(&sq, 3), -EPROTO);
	/* Not posted yet. */
	ck_assert_int_eq(rdma_sendq_complete(&sq, 7), -EPROTO);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 1), 2);
	/* Seen twice. */
	ck_assert_int_eq(rdma_sendq_complete(&sq, 1), -EPROTO);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 3), 2);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 5), 2);
	ck_assert_int_eq(rdma_sendq_complete(&sq, 5), -EPROTO);
	ck_assert_uint_eq(rdma_sendq_used(&sq), 0);
	ck_assert_int_eq(rdma_sendq_init(&sq, 4, 5), -EINVAL);
	ck_assert_int_eq(rdma_sendq_init(&sq, 0, 1), -EINVAL);
	rdma_sendq_free(&sq);
	ck_assert_uint_eq(rdma_sendq_interval(1), 1);
	ck_assert_uint_eq(rdma_sendq_interval(127), 63);
}
END_TEST

START_TEST(sendq_wraps)
{
	struct rdma_sendq sq = { 0 };
	uint32_t seq, last = 0;
	bool sig;

	ck_assert_int_eq(rdma_sendq_init(&sq, 6, 3), 0);
	/* Sequence numbers wrap at 2^32; buffers and checks must not care. */
	sq.head = sq.tail = UINT32_MAX - 4;
	last = sq.tail - 1;
	for (int i = 0; i < 30; i++) {
		ck_assert_int_eq(rdma_sendq_post(&sq, &seq, &sig), 0);
		if (sig) {
			ck_assert_int_eq(rdma_sendq_complete(&sq, seq), (int)(seq - last));
			last = seq;
		}
	}
	ck_assert_uint_lt(sq.head, 100);
	rdma_sendq_free(&sq);

	/* Outstanding across the wrap, none completed yet: buffer seq % 6
	 * gave send 2^32 - 1 and send 5 the same buffer (2^32 % 6 = 4), and
	 * the in-order completions were refused as -EPROTO (a queue reset
	 * every 2^32 sends, and a capsule rewritten under the HCA). */
	uint32_t seqs[6];
	bool sigs[6], used[6] = { 0 };
	ck_assert_int_eq(rdma_sendq_init(&sq, 6, 3), 0);
	sq.head = sq.tail = UINT32_MAX - 2;
	for (int i = 0; i < 6; i++) {
		ck_assert_int_eq(rdma_sendq_post(&sq, &seqs[i], &sigs[i]), 0);
		uint32_t slot = rdma_sendq_slot(&sq, seqs[i]);
		ck_assert_uint_lt(slot, 6);
		ck_assert_msg(!used[slot], "send %u shares buffer %u", seqs[i], slot);
		used[slot] = true;
	}
	last = UINT32_MAX - 3;
	for (int i = 0; i < 6; i++)
		if (sigs[i]) {
			ck_assert_int_eq(rdma_sendq_complete(&sq, seqs[i]), (int)(seqs[i] - last));
			last = seqs[i];
		}
	ck_assert_uint_eq(rdma_sendq_used(&sq), 0);
	rdma_sendq_free(&sq);
}
END_TEST

/* A model of the HCA and the target: sends complete in posting order, a
 * signalled one makes a completion, responses come back in any order and
 * may overtake send completions.  Checks that no capsule buffer is written
 * while a send still using it is unproven, that every request completes
 * exactly once, and that nothing waits forever. */
START_TEST(sendq_model)
{
	enum { NREQ = 16, ROUNDS = 20000 };
	struct rdma_sendq sq = { 0 };
	uint32_t depth = NREQ + rdma_sendq_interval(NREQ);
	uint32_t hca[64], hca_n = 0; /* sends posted, completion not polled */
	bool hca_sig[64];
	int buf_owner[64]; /* capsule buffer -> send seq using it, -1 free */
	int waiting = 0, inflight = 0; /* requests */
	uint64_t done = 0, submitted = 0;
	unsigned rnd = 12345;

	ck_assert_int_eq(rdma_sendq_init(&sq, depth, rdma_sendq_interval(NREQ)), 0);
	/* Across the 2^32 wrap (depth 24 does not divide it). */
	sq.head = sq.tail = UINT32_MAX - ROUNDS / 4;
	for (unsigned i = 0; i < 64; i++)
		buf_owner[i] = -1;
	for (int round = 0; round < ROUNDS; round++) {
		rnd = rnd * 1103515245u + 12345u;
		unsigned r = rnd >> 16;
		if (r % 3 == 0 && inflight + waiting < NREQ) {
			waiting++; /* the core submits: it goes to the backlog */
			submitted++;
		}
		/* The backlog drains while WRs are free. */
		while (waiting) {
			uint32_t seq;
			bool sig;
			if (rdma_sendq_post(&sq, &seq, &sig) == -EAGAIN)
				break;
			uint32_t slot = rdma_sendq_slot(&sq, seq);
			ck_assert_int_eq(buf_owner[slot], -1);
			buf_owner[slot] = (int)seq;
			hca[hca_n] = seq;
			hca_sig[hca_n++] = sig;
			waiting--;
			inflight++;
		}
		if (r % 5 == 1 && inflight) { /* a response: the request is done */
			inflight--;
			done++;
		}
		if (r % 7 == 2 && hca_n) { /* the HCA finishes its oldest send */
			if (hca_sig[0]) {
				/* The buffers of the sends it proves done, before
				 * the tail moves. */
				uint32_t slots[64], k = 0;
				for (uint32_t s = sq.tail; s != hca[0] + 1; s++)
					slots[k++] = rdma_sendq_slot(&sq, s);
				int n = rdma_sendq_complete(&sq, hca[0]);
				ck_assert_int_eq(n, (int)k);
				k = 0;
				for (uint32_t s = hca[0] - (uint32_t)n + 1; s != hca[0] + 1; s++, k++) {
					ck_assert_int_eq(buf_owner[slots[k]], (int)s);
					buf_owner[slots[k]] = -1;
				}
			}
			memmove(hca, hca + 1, --hca_n * sizeof(hca[0]));
			memmove(hca_sig, hca_sig + 1, hca_n * sizeof(hca_sig[0]));
		}
		/* A full queue always has a signalled send outstanding. */
		if (rdma_sendq_used(&sq) == depth) {
			bool any = false;
			for (uint32_t i = 0; i < hca_n; i++)
				any |= hca_sig[i];
			ck_assert(any);
		}
	}
	ck_assert_uint_gt(done, ROUNDS / 10);
	ck_assert_uint_eq(done + (uint64_t)inflight + (uint64_t)waiting, submitted);
	ck_assert_uint_lt(sq.nr_signalled, submitted); /* moderation did something */
	rdma_sendq_free(&sq);
}
END_TEST

/* nvmet with inline_data_size 1000 advertises IOCCSZ 66 (1056 bytes of
 * capsule, 992 of data): the rounded 1088-byte buffer let 1024 bytes go
 * in-capsule (the I/O queue Connect's data), which the target's 1056-byte
 * receive buffer cannot take, and every I/O queue connect failed. */
START_TEST(capsule_size_not_rounded)
{
	static const uint32_t in[] = { 0, 992, 496, 1008, 1024, 8192, 65536 };
	uint32_t icmax, cap;

	for (unsigned i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		rdma_capsule_size(in[i], 32768, &icmax, &cap);
		ck_assert_uint_eq(icmax, in[i] < 32768 ? in[i] : 32768);
		ck_assert_uint_ge(cap, 64 + icmax);
		ck_assert_uint_eq(cap % 64, 0);
		ck_assert_uint_lt(cap, 64 + icmax + 64);
	}
	rdma_capsule_size(992, 32768, &icmax, &cap);
	ck_assert_uint_eq(cap, 1088);
	ck_assert(1024 > icmax); /* the Connect's 1024 bytes go keyed */
}
END_TEST

START_TEST(recv_check_invalidation)
{
	char why[128];

	ck_assert_int_eq(rdma_recv_check(0, sizeof(struct nvme_cqe), 0, why, sizeof(why)), 0);
	ck_assert_int_eq(rdma_recv_check(IBV_WC_GRH, 64, 0, why, sizeof(why)), 0);
	/* We register the data MR once and never offer its key for
	 * invalidation: a SEND with Invalidate fails the queue. */
	ck_assert_int_eq(rdma_recv_check(IBV_WC_WITH_INV, sizeof(struct nvme_cqe), 0x1234abcd, why,
					 sizeof(why)),
			 -EPROTO);
	ck_assert_msg(strstr(why, "rkey 0x1234abcd") && strstr(why, "never offered"), "%s", why);
	ck_assert_int_eq(rdma_recv_check(0, 15, 0, why, sizeof(why)), -EPROTO);
	ck_assert_msg(strstr(why, "15 bytes"), "%s", why);
}
END_TEST

START_TEST(wr_ids)
{
	uint64_t s = rdma_wr_id(RDMA_WR_SEND, 4095), r = rdma_wr_id(RDMA_WR_RECV, 0);

	ck_assert_uint_eq(s >> 32, RDMA_WR_SEND);
	ck_assert_uint_eq((uint32_t)s, 4095);
	ck_assert_uint_eq(r >> 32, RDMA_WR_RECV);
	ck_assert_uint_eq((uint32_t)r, 0);
}
END_TEST

START_TEST(ops_registered)
{
	enum nvmf_trtype t;
	const struct nvmf_transport_ops *ops;

	ck_assert_int_eq(nvmf_trtype_parse("rdma", &t), 0);
	ops = nvmf_transport_find(t);
	ck_assert_ptr_nonnull(ops);
	ck_assert_str_eq(ops->name, "rdma");
	ck_assert_uint_ge(ops->req_priv_size, sizeof(struct rdma_req));
	ck_assert_ptr_nonnull(ops->queue_init);
	ck_assert_ptr_nonnull(ops->queue_connect);
	ck_assert_ptr_nonnull(ops->submit);
	ck_assert_ptr_nonnull(ops->queue_shutdown);
	ck_assert_ptr_nonnull(ops->queue_free);
}
END_TEST

/* ---- the completion handler's decisions (rdma_wc_process) ---- */

static struct reactor wr;
static struct nvmf_queue wq;
static struct rdma_sendq wsq;
static struct nvme_cqe wrsp[4];
static unsigned wdone;

static int wc_submit(struct nvmf_queue *fq, struct nvmf_req *req)
{
	uint32_t seq;
	bool sig;

	(void)fq;
	if (rdma_sendq_post(&wsq, &seq, &sig) == 0)
		rdma_req_start(rdma_req_of(req));
	return 0;
}

static void wc_shutdown(struct nvmf_queue *fq) { nvmf_queue_transport_quiesced(fq); }
static void wc_free(struct nvmf_queue *fq) { fq->tp = NULL; }
static const struct nvmf_transport_ops wc_ops = {
	.name = "rdma-model",
	.submit = wc_submit,
	.queue_shutdown = wc_shutdown,
	.queue_free = wc_free,
};

static void wc_done(struct nvmf_req *req, int err)
{
	(void)err;
	wdone++;
	nvmf_req_put(req);
}

/* A live queue of 4 entries whose send queue is 2 deep, signalling every
 * second send: requests 0 and 1 are posted, 2 waits for a send WR. */
static void wc_setup(struct nvmf_req **r)
{
	struct nvmf_path_opts o = { .trtype = NVMF_TR_RDMA, .tos = -1 };

	ck_assert_int_eq(reactor_init(&wr, 0, 16), 0);
	ck_assert_int_eq(nvmf_queue_init(&wq, NULL, &wr, 1, 4, &o), 0);
	wq.ops->queue_free(&wq);
	wq.ops = &wc_ops;
	nvmf_queue_set_state(&wq, NVMF_Q_CONNECTING);
	nvmf_queue_set_state(&wq, NVMF_Q_FABRIC_CONNECT);
	nvmf_queue_set_state(&wq, NVMF_Q_LIVE);
	ck_assert_int_eq(rdma_sendq_init(&wsq, 2, 2), 0);
	wdone = 0;
	for (int i = 0; i < 3; i++) {
		r[i] = nvmf_req_get(&wq);
		r[i]->done = wc_done;
		nvmf_req_submit(r[i]);
	}
	ck_assert(rdma_req_of(r[0])->posted && rdma_req_of(r[1])->posted);
	ck_assert(!rdma_req_of(r[2])->posted);
}

static void wc_teardown(void)
{
	nvmf_queue_shutdown(&wq, -ECANCELED);
	nvmf_queue_free(&wq);
	rdma_sendq_free(&wsq);
	reactor_stop(&wr);
	reactor_fini(&wr);
}

static int wc_recv(uint16_t cid, struct nvmf_req **req, char *why)
{
	struct ibv_wc wc = { .wr_id = rdma_wr_id(RDMA_WR_RECV, 1), .opcode = IBV_WC_RECV,
			     .byte_len = sizeof(struct nvme_cqe) };
	unsigned slot = 9;
	int ret;

	memset(&wrsp[1], 0, sizeof(wrsp[1]));
	wrsp[1].cid = cid;
	why[0] = 0;
	ret = rdma_wc_process(&wq, &wsq, 4, wrsp, &wc, req, &slot, why, 160);
	if (ret == RDMA_WC_RESPONSE)
		ck_assert_uint_eq(slot, 1);
	return ret;
}

/* A response overtaking its command's send completion is accepted, but
 * the capsule buffers stay taken until the send completion comes. */
START_TEST(wc_response_before_send_completion)
{
	struct nvmf_req *r[3], *req;
	char why[160];
	uint32_t seq;
	bool sig;

	wc_setup(r);
	ck_assert_int_eq(wc_recv(r[0]->cid, &req, why), RDMA_WC_RESPONSE);
	ck_assert_ptr_eq(req, r[0]);
	ck_assert_int_eq(rdma_sendq_post(&wsq, &seq, &sig), -EAGAIN);
	/* The same response again: a second one. */
	ck_assert_int_eq(wc_recv(r[0]->cid, &req, why), -EPROTO);
	ck_assert_msg(strstr(why, "second response"), "%s", why);
	struct ibv_wc wc = { .wr_id = rdma_wr_id(RDMA_WR_SEND, 1), .opcode = IBV_WC_SEND };
	unsigned slot;
	ck_assert_int_eq(rdma_wc_process(&wq, &wsq, 4, wrsp, &wc, &req, &slot, why, 160),
			 RDMA_WC_SENDS_FREED);
	ck_assert_uint_eq(rdma_sendq_used(&wsq), 0);
	/* The same send completion twice: refused. */
	ck_assert_int_eq(rdma_wc_process(&wq, &wsq, 4, wrsp, &wc, &req, &slot, why, 160), -EIO);
	wc_teardown();
}
END_TEST

/* A response for a CID not in flight, or for a command never posted. */
START_TEST(wc_response_not_in_flight)
{
	struct nvmf_req *r[3], *req;
	char why[160];

	wc_setup(r);
	ck_assert_int_eq(wc_recv((uint16_t)(r[0]->cid ^ 0x1000), &req, why), -EPROTO);
	ck_assert_msg(strstr(why, "not in flight"), "%s", why);
	ck_assert_int_eq(wc_recv(3, &req, why), -EPROTO);
	ck_assert_int_eq(wc_recv(r[2]->cid, &req, why), -EPROTO);
	ck_assert_msg(strstr(why, "premature response"), "%s", why);
	ck_assert_ptr_null(req);
	wc_teardown();
	ck_assert_uint_eq(wdone, 3);
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("rdma");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, cm_req_admin);
	tcase_add_test(tc, cm_req_io);
	tcase_add_test(tc, reject_nvme_status);
	tcase_add_test(tc, reject_other);
	tcase_add_test(tc, sgl_keyed);
	tcase_add_test(tc, sgl_inline_and_null);
	tcase_add_test(tc, bookkeeping_resp);
	tcase_add_test(tc, sendq_signals_every_interval);
	tcase_add_test(tc, sendq_last_free_wr_signalled);
	tcase_add_test(tc, sendq_completion_errors);
	tcase_add_test(tc, sendq_wraps);
	tcase_add_test(tc, sendq_model);
	tcase_add_test(tc, capsule_size_not_rounded);
	tcase_add_test(tc, recv_check_invalidation);
	tcase_add_test(tc, wr_ids);
	tcase_add_test(tc, ops_registered);
	tcase_add_test(tc, wc_response_before_send_completion);
	tcase_add_test(tc, wc_response_not_in_flight);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
