/* libFuzzer harness for the NVMe/RDMA completion handler without a verbs
 * device: rdma_wc_process() (the decision part of rdma.c's handle_wc) on a
 * queue with a real request pool and send queue, fed made-up work
 * completions: any status, opcode, byte length, flags and wr_id, duplicates
 * of earlier ones, responses for any CID, before or after the command's
 * send completed.  The harness plays the rest of rdma.c (posting sends,
 * the backlog, completing requests) and checks, beyond the sanitizers:
 *   - a send completion is accepted only for the oldest outstanding
 *     signalled send, and frees exactly the sends up to it;
 *   - a response is accepted only for a request whose command was posted
 *     and that has no response yet, and for nothing else;
 *   - a capsule buffer is never handed out while its send is outstanding;
 *   - every request completes exactly once, on its response or when the
 *     queue fails.
 *
 * Input: a 3-byte header, then 8-byte completions.
 *   [0] queue size - 1 (2..32 entries, modulo), [1] send queue depth
 *   (1..32), [2] signalling interval (1..depth)
 *   per completion: [0] bits 0-1 kind (0 send, 1 receive, 2 raw wr_id,
 *   3 replay an earlier one), bit 2 failed status, bit 3 wrong opcode,
 *   bit 4 remote invalidation flag, bit 5 short capsule, bit 6 submit a
 *   new request first; [1] send offset from the oldest outstanding / slot;
 *   [2..3] CID: low bit 15 set = raw, else index of a request to answer;
 *   [4..5] status of the response; [6..7] raw wr_id low bits. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor.h"
#include "transports/rdma/rdma_internal.h"

#define MAX_Q 32
#define NR_RECV MAX_Q

static struct reactor reactor;
static struct nvmf_queue q;
static struct rdma_sendq sq;
static struct nvme_cqe rsp_buf[NR_RECV];
static unsigned done_count[MAX_Q];
static bool responded[MAX_Q]; /* the model: a response was accepted */
static struct nvmf_req *slot_req[MAX_Q];
static bool in_backlog[MAX_Q];
static struct list_node backlog;
static struct ibv_wc history[64];
static unsigned nr_history;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_rdma_cq: %s\n", what);
	abort();
}

static int fake_submit(struct nvmf_queue *fq, struct nvmf_req *req);
static void fake_shutdown(struct nvmf_queue *fq) { nvmf_queue_transport_quiesced(fq); }
static void fake_free(struct nvmf_queue *fq) { fq->tp = NULL; }

static const struct nvmf_transport_ops fake_ops = {
	.name = "rdma-model",
	.submit = fake_submit,
	.queue_shutdown = fake_shutdown,
	.queue_free = fake_free,
};

static struct nvmf_req *req_of_rr(struct rdma_req *rr)
{
	return (struct nvmf_req *)((unsigned char *)rr - offsetof(struct nvmf_req, tp));
}

/* rdma.c's post_send, without the verbs call. */
static int post(struct nvmf_req *req)
{
	uint32_t seq;
	bool sig;
	int ret = rdma_sendq_post(&sq, &seq, &sig);

	if (ret < 0)
		return ret;
	/* Capsule buffer rdma_sendq_slot(seq) is reused now: with at most
	 * depth sends outstanding, none of the others maps to it. */
	if (rdma_sendq_used(&sq) > sq.depth)
		fail("more sends outstanding than the queue is deep");
	rdma_req_start(rdma_req_of(req));
	return 0;
}

static int fake_submit(struct nvmf_queue *fq, struct nvmf_req *req)
{
	struct rdma_req *rr = rdma_req_of(req);

	(void)fq;
	rr->posted = false;
	if (list_empty(&backlog) && post(req) == 0)
		return 0;
	list_add_tail(&backlog, &rr->backlog);
	in_backlog[req->cid & NVMF_CID_IDX_MASK] = true;
	return 0;
}

static void post_backlog(void)
{
	while (!list_empty(&backlog)) {
		struct list_node *n = backlog.next;
		struct nvmf_req *req = req_of_rr(container_of(n, struct rdma_req, backlog));
		if (post(req) < 0)
			return;
		list_del(n);
		in_backlog[req->cid & NVMF_CID_IDX_MASK] = false;
	}
}

static void req_done(struct nvmf_req *req, int err)
{
	unsigned idx = req->cid & NVMF_CID_IDX_MASK;

	(void)err;
	if (idx >= MAX_Q || slot_req[idx] != req)
		fail("completion of an unknown request");
	done_count[idx]++;
	if (done_count[idx] > 1)
		fail("request completed twice");
	/* Off the backlog if it never got a send WR (the queue failed). */
	if (in_backlog[idx]) {
		if (rdma_req_of(req)->posted)
			fail("a request both posted and waiting for a send WR");
		list_del(&rdma_req_of(req)->backlog);
		in_backlog[idx] = false;
	}
	slot_req[idx] = NULL;
	nvmf_req_put(req);
}

static void submit_one(void)
{
	struct nvmf_req *req = nvmf_req_get(&q);

	if (!req)
		return;
	unsigned idx = req->cid & NVMF_CID_IDX_MASK;
	if (idx >= MAX_Q)
		fail("slot index beyond the pool");
	slot_req[idx] = req;
	done_count[idx] = 0;
	responded[idx] = false;
	req->sqe.opcode = 0x02;
	req->done = req_done;
	nvmf_req_submit(req);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!getenv("FUZZ_VERBOSE"))
		log_set_level((enum log_level)(LOG_LVL_ERR - 1));
	if (reactor_init(&reactor, 0, 16) < 0)
		abort();
	return 0;
}

/* Whether seq is the oldest outstanding signalled send (no sentinel:
 * every 32-bit value is a sequence number near the wrap). */
static bool oldest_signalled(uint32_t seq)
{
	for (uint32_t s = sq.tail; s != sq.head; s++)
		if (sq.signalled[rdma_sendq_slot(&sq, s)])
			return s == seq;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nvmf_path_opts o = { .trtype = NVMF_TR_RDMA, .tos = -1 };

	if (size < 3)
		return -1;
	uint16_t qsize = (uint16_t)(data[0] % (MAX_Q - 1) + 2);
	uint32_t depth = data[1] % 32 + 1;
	uint32_t interval = data[2] % depth + 1;

	memset(slot_req, 0, sizeof(slot_req));
	memset(done_count, 0, sizeof(done_count));
	memset(in_backlog, 0, sizeof(in_backlog));
	nr_history = 0;
	list_init(&backlog);
	if (nvmf_queue_init(&q, NULL, &reactor, 1, qsize, &o) < 0)
		abort();
	q.ops->queue_free(&q);
	q.ops = &fake_ops;
	nvmf_queue_set_state(&q, NVMF_Q_CONNECTING);
	nvmf_queue_set_state(&q, NVMF_Q_FABRIC_CONNECT);
	nvmf_queue_set_state(&q, NVMF_Q_LIVE);
	if (rdma_sendq_init(&sq, depth, interval) < 0)
		abort();
	/* Sequence numbers wrap at 2^32 within an input's first few dozen
	 * sends: the buffer of a send must not depend on depth dividing it. */
	sq.head = sq.tail = UINT32_MAX - 40;
	for (unsigned i = 0; i < qsize - 1u; i++)
		submit_one();

	for (size_t off = 3; off + 8 <= size && q.state == NVMF_Q_LIVE; off += 8) {
		const uint8_t *c = data + off;
		struct ibv_wc wc = { 0 };
		unsigned kind = c[0] & 3;
		uint16_t cid = (uint16_t)(c[2] | c[3] << 8);

		if (c[0] & 0x40)
			submit_one();
		if (kind == 3 && nr_history) {
			wc = history[c[1] % nr_history];
		} else if (kind == 0) {
			uint32_t seq = sq.tail + c[1];
			wc.wr_id = rdma_wr_id(RDMA_WR_SEND, 0) | seq;
			wc.opcode = IBV_WC_SEND;
		} else if (kind == 1 || kind == 3) {
			unsigned slot = c[1] % NR_RECV;
			wc.wr_id = rdma_wr_id(RDMA_WR_RECV, slot);
			wc.opcode = IBV_WC_RECV;
			wc.byte_len = c[0] & 0x20 ? c[6] % 16 : sizeof(struct nvme_cqe);
			struct nvme_cqe *cqe = &rsp_buf[slot];
			memset(cqe, 0, sizeof(*cqe));
			if (cid & 0x8000) {
				cqe->cid = cid & 0x7fff;
			} else {
				struct nvmf_req *r = slot_req[cid % MAX_Q];
				cqe->cid = r ? r->cid : (uint16_t)(cid % MAX_Q);
			}
			cqe->status = (uint16_t)(c[4] | c[5] << 8);
		} else {
			wc.wr_id = (uint64_t)c[1] << 32 | (uint16_t)(c[6] | c[7] << 8);
			wc.opcode = (enum ibv_wc_opcode)c[4];
			wc.byte_len = c[5];
		}
		if (c[0] & 4)
			wc.status = (enum ibv_wc_status)(c[5] % 21 + 1);
		if (c[0] & 8)
			wc.opcode = (enum ibv_wc_opcode)(wc.opcode ^ 0x80);
		if (c[0] & 0x10)
			wc.wc_flags |= IBV_WC_WITH_INV;
		if (nr_history < 64)
			history[nr_history++] = wc;

		/* What the model expects before the handler runs. */
		uint32_t seq = (uint32_t)wc.wr_id, tail_before = sq.tail;
		bool send_ok = wc.status == IBV_WC_SUCCESS && wc.wr_id >> 32 == RDMA_WR_SEND &&
			       wc.opcode == IBV_WC_SEND && oldest_signalled(seq);
		struct nvmf_req *target = NULL;
		bool resp_ok = false;
		unsigned rslot = (unsigned)wc.wr_id;
		if (wc.status == IBV_WC_SUCCESS && wc.wr_id >> 32 == RDMA_WR_RECV &&
		    wc.opcode == IBV_WC_RECV && rslot < NR_RECV && wc.byte_len >= 16 &&
		    !(wc.wc_flags & IBV_WC_WITH_INV)) {
			target = nvmf_queue_find_req(&q, rsp_buf[rslot].cid);
			unsigned ti = rsp_buf[rslot].cid & NVMF_CID_IDX_MASK;
			resp_ok = target && rdma_req_of(target)->posted && !responded[ti];
		}

		struct nvmf_req *req;
		unsigned slot = 0;
		char why[160] = "";
		int ret = rdma_wc_process(&q, &sq, NR_RECV, rsp_buf, &wc, &req, &slot, why,
					  sizeof(why));
		if (ret == RDMA_WC_SENDS_FREED) {
			if (!send_ok || sq.tail != seq + 1 || sq.tail == tail_before)
				fail("send completion accepted against the model");
			post_backlog();
		} else if (ret == RDMA_WC_RESPONSE) {
			if (!resp_ok || req != target || slot != rslot)
				fail("response accepted against the model");
			unsigned ti = req->cid & NVMF_CID_IDX_MASK;
			responded[ti] = true;
			rdma_req_of(req)->posted = false;
			nvmf_req_complete(req, &rdma_req_of(req)->resp);
		} else if (ret < 0) {
			if (send_ok || resp_ok)
				fail("a valid completion refused");
			if (!why[0])
				fail("refused without a reason");
			nvmf_queue_transport_error(&q, ret, "%s", why);
		} else {
			fail("unknown result");
		}
	}
	if (q.state == NVMF_Q_LIVE)
		nvmf_queue_shutdown(&q, -ECANCELED);
	for (unsigned i = 0; i < MAX_Q; i++)
		if (slot_req[i])
			fail("a request never completed");
	nvmf_queue_free(&q);
	rdma_sendq_free(&sq);
	return 0;
}
