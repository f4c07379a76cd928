/* NVMe/RDMA transport internals: the parts of rdma.c that need no RDMA
 * device (private data, SGL descriptors, reject decoding, the per-request
 * completion bookkeeping), exposed so the unit tests can run them. */
#ifndef TRANSPORTS_RDMA_INTERNAL_H
#define TRANSPORTS_RDMA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "gateway/base/list.h"
#include "transports/transport.h"

/* A keyed SGL data block carries a 24-bit length. */
#define RDMA_KEYED_SGL_MAX_LEN ((1u << 24) - 1)

/* IB CM reject reasons that rdma_cm reports in event->status. */
#define RDMA_REJ_INVALID_SERVICE_ID 8 /* nobody listens on that port */
#define RDMA_REJ_CONSUMER_DEFINED 28 /* the target's NVMe/RDMA reject */

/* Per-request transport state (req->tp).  A request completes on its
 * response: the target sends it only after its RDMA reads or writes of the
 * request's data buffer are done, and the capsule buffer is not the
 * request's (see struct rdma_sendq). */
struct rdma_req {
	bool posted; /* send posted, response not yet seen */
	bool resp_ready;
	bool in_capsule;
	struct list_node backlog; /* waiting for a free send WR */
	struct nvme_cqe resp;
};

static inline struct rdma_req *rdma_req_of(struct nvmf_req *req)
{
	return (struct rdma_req *)req->tp;
}

/* Fills the private data of rdma_connect() for queue qid of qsize entries.
 * cntlid is sent for I/O queues only (0 for the admin queue). */
void rdma_cm_req_init(struct nvme_rdma_cm_req *p, uint16_t qid, uint16_t qsize,
		      uint16_t cntlid);

/* Describes a REJECTED event: cm_status is event->status, pdata/len the
 * reject's private data.  Returns the -errno the queue fails with. */
int rdma_reject_describe(int cm_status, const void *pdata, size_t len, char *buf,
			 size_t size);
const char *rdma_cm_status_str(uint16_t sts);

/* The command's data pointer: a keyed SGL data block the target reads or
 * writes with RDMA, in-capsule data at offset 0, or no data. */
void rdma_sgl_keyed(struct nvme_sqe *sqe, uint64_t addr, uint32_t len, uint32_t rkey);
void rdma_sgl_inline(struct nvme_sqe *sqe, uint32_t len);
void rdma_sgl_null(struct nvme_sqe *sqe);

/* Response bookkeeping: returns 1 when the request may complete,
 * -EPROTO for a response to a command that was not posted or a second
 * one. */
void rdma_req_start(struct rdma_req *rr);
int rdma_req_resp(struct rdma_req *rr, const struct nvme_cqe *cqe);

/* The send queue of one QP (rdma_sendq.c): capsule buffers are a ring of
 * depth entries in posting order, buffer rdma_sendq_slot for send seq.  At
 * most interval sends follow each other unsignalled. */
struct rdma_sendq {
	uint32_t depth, interval;
	uint32_t head; /* sequence number of the next send */
	uint32_t tail; /* oldest send not yet proven complete */
	uint32_t tail_slot; /* tail's buffer: not tail % depth, which jumps
			     * at 2^32 unless depth divides it */
	uint32_t unsignalled; /* sends since the last signalled one */
	uint8_t *signalled; /* per buffer: its send was posted signalled */
	uint64_t nr_signalled;
};

/* A queue's capsule: in-capsule data up to *icmax (the target's
 * in_capsule_max, 0 for none, within a data slot) in a send buffer of
 * *cap_size bytes. */
void rdma_capsule_size(uint32_t in_capsule_max, uint32_t slot_size, uint32_t *icmax,
		       uint32_t *cap_size);

/* The signalling interval for a queue of nr_reqs requests. */
uint32_t rdma_sendq_interval(uint32_t nr_reqs);
int rdma_sendq_init(struct rdma_sendq *sq, uint32_t depth, uint32_t interval);
void rdma_sendq_free(struct rdma_sendq *sq);
/* Takes the next send WR: its sequence number and whether to signal it;
 * -EAGAIN while all depth WRs are still in use. */
int rdma_sendq_post(struct rdma_sendq *sq, uint32_t *seq, bool *signal);
/* The signalled send seq completed, and with it every earlier send.
 * Returns the number of WRs freed, or -EPROTO when seq is not the oldest
 * outstanding signalled send (a doubled or a lost completion). */
int rdma_sendq_complete(struct rdma_sendq *sq, uint32_t seq);
static inline uint32_t rdma_sendq_used(const struct rdma_sendq *sq)
{
	return sq->head - sq->tail;
}
/* The buffer (and signalled flag) of an outstanding send seq, or of the
 * next one (head). */
static inline uint32_t rdma_sendq_slot(const struct rdma_sendq *sq, uint32_t seq)
{
	return (uint32_t)(((uint64_t)sq->tail_slot + (seq - sq->tail)) % sq->depth);
}

/* Checks a receive completion before its response capsule is used:
 * 0, or -EPROTO with the reason in why.  We never offer a key for remote
 * invalidation, so a SEND with Invalidate from the target is an error. */
int rdma_recv_check(unsigned wc_flags, uint32_t byte_len, uint32_t inv_rkey, char *why,
		    size_t size);

/* Work request ids: kind in the top half, slot index in the bottom. */
enum { RDMA_WR_SEND = 1, RDMA_WR_RECV = 2 };
static inline uint64_t rdma_wr_id(unsigned kind, unsigned idx)
{
	return (uint64_t)kind << 32 | idx;
}

/* What one work completion means for the queue, decided without a device
 * (the fuzzer feeds it made-up ones).  A send completion must be the
 * oldest outstanding signalled send of sq: its WRs are freed.  A receive
 * must be in one of nr_recv slots, hold a whole response capsule
 * (rsp_buf[*slot]) for a request of q whose command was posted and has no
 * response yet: the response is recorded in it, *req is set, and the
 * caller re-posts the slot and completes the request.  Anything else,
 * including a failed completion, is -errno with the reason in why: the
 * queue must fail. */
enum rdma_wc_kind { RDMA_WC_SENDS_FREED = 1, RDMA_WC_RESPONSE = 2 };
int rdma_wc_process(struct nvmf_queue *q, struct rdma_sendq *sq, unsigned nr_recv,
		    const struct nvme_cqe *rsp_buf, const struct ibv_wc *wc,
		    struct nvmf_req **req, unsigned *slot, char *why, size_t size);

#endif
