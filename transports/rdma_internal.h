/* NVMe/RDMA transport internals: the parts of rdma.c that need no RDMA
 * device (private data, SGL descriptors, reject decoding, the per-request
 * completion bookkeeping), exposed so the unit tests can run them. */
#ifndef TRANSPORTS_RDMA_INTERNAL_H
#define TRANSPORTS_RDMA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/transport.h"

/* A keyed SGL data block carries a 24-bit length. */
#define RDMA_KEYED_SGL_MAX_LEN ((1u << 24) - 1)

/* IB CM reject reasons that rdma_cm reports in event->status. */
#define RDMA_REJ_INVALID_SERVICE_ID 8 /* nobody listens on that port */
#define RDMA_REJ_CONSUMER_DEFINED 28 /* the target's NVMe/RDMA reject */

/* Per-request transport state (req->tp).  A request completes only when
 * both its send has completed (the capsule buffer is free again) and its
 * response has arrived, whichever comes first. */
struct rdma_req {
	bool posted; /* send posted, completion not yet seen */
	bool send_done;
	bool resp_ready;
	bool in_capsule;
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

/* Completion bookkeeping: each returns 1 when the request may complete
 * now, 0 when it waits for the other half, -EPROTO for a duplicate. */
void rdma_req_start(struct rdma_req *rr);
int rdma_req_send_done(struct rdma_req *rr);
int rdma_req_resp(struct rdma_req *rr, const struct nvme_cqe *cqe);

/* Work request ids: kind in the top half, slot index in the bottom. */
enum { RDMA_WR_SEND = 1, RDMA_WR_RECV = 2 };
static inline uint64_t rdma_wr_id(unsigned kind, unsigned idx)
{
	return (uint64_t)kind << 32 | idx;
}

#endif
