/* Send work requests of one NVMe/RDMA queue pair: which sends are
 * signalled, and when a capsule buffer may be written again.
 *
 * A send WR keeps its capsule buffer and its slot of the QP's send queue
 * until the HCA is done with it, and an unsignalled send never says when
 * that is.  An RC QP completes sends in order, so the completion of a
 * signalled send proves every earlier one done as well.  Capsule buffers
 * are therefore a ring in posting order, not tied to a request: a request
 * completes on its response alone, while its capsule buffer stays taken
 * until a later signalled completion frees it. */
#include <errno.h>
#include <stdlib.h>

#include "transports/rdma/rdma_internal.h"

uint32_t rdma_sendq_interval(uint32_t nr_reqs)
{
	return nr_reqs >= 2 ? nr_reqs / 2 : 1;
}

int rdma_sendq_init(struct rdma_sendq *sq, uint32_t depth, uint32_t interval)
{
	if (!depth || !interval || interval > depth)
		return -EINVAL;
	uint8_t *sig = calloc(depth, 1);
	if (!sig)
		return -ENOMEM;
	free(sq->signalled);
	*sq = (struct rdma_sendq){ .depth = depth, .interval = interval, .signalled = sig };
	return 0;
}

void rdma_sendq_free(struct rdma_sendq *sq)
{
	free(sq->signalled);
	*sq = (struct rdma_sendq){ 0 };
}

int rdma_sendq_post(struct rdma_sendq *sq, uint32_t *seq, bool *signal)
{
	uint32_t used = sq->head - sq->tail;

	if (used >= sq->depth)
		return -EAGAIN;
	/* Every interval-th send, and the one that takes the last free WR:
	 * a full queue then always has a completion coming that frees it. */
	bool sig = sq->unsignalled + 1 >= sq->interval || used + 1 == sq->depth;
	sq->signalled[rdma_sendq_slot(sq, sq->head)] = sig;
	sq->unsignalled = sig ? 0 : sq->unsignalled + 1;
	sq->nr_signalled += sig;
	*signal = sig;
	*seq = sq->head++;
	return 0;
}

int rdma_sendq_complete(struct rdma_sendq *sq, uint32_t seq)
{
	uint32_t n = seq - sq->tail + 1;

	/* seq must be outstanding, signalled, and the oldest signalled send:
	 * anything else is a completion seen twice or one that went missing. */
	if (!sq->depth || !n || n > sq->head - sq->tail || !sq->signalled[rdma_sendq_slot(sq, seq)])
		return -EPROTO;
	for (uint32_t s = sq->tail; s != seq; s++)
		if (sq->signalled[rdma_sendq_slot(sq, s)])
			return -EPROTO;
	sq->signalled[rdma_sendq_slot(sq, seq)] = 0;
	sq->tail = seq + 1;
	sq->tail_slot = (uint32_t)(((uint64_t)sq->tail_slot + n) % sq->depth);
	return (int)n;
}

void rdma_capsule_size(uint32_t in_capsule_max, uint32_t slot_size, uint32_t *icmax,
		       uint32_t *cap_size)
{
	uint32_t m = in_capsule_max < slot_size ? in_capsule_max : slot_size;

	/* The buffer is rounded up to 64 bytes; the data limit is not: a
	 * target's receive buffer holds IOCCSZ * 16 bytes exactly, and a
	 * longer send is a local length error that drops the QP. */
	*icmax = m;
	*cap_size = (uint32_t)((sizeof(struct nvme_sqe) + m + 63) & ~63u);
}
