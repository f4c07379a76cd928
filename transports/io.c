#include "transports/io.h"

#include <errno.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "transports/status.h"

#define WZ_MAX_BLOCKS 65536u /* NLB is 16 bits, 0's based */

static bool has_data(enum nvmf_io_op op) { return op == NVMF_IO_READ || op == NVMF_IO_WRITE; }

uint64_t nvmf_io_chunk(const struct nvmf_io *io, uint64_t off)
{
	uint64_t left = io->len - off, lba = io->ns->lba_size;

	if (io->op == NVMF_IO_FLUSH)
		return 0;
	if (io->op == NVMF_IO_WRITE_ZEROES)
		return left < (uint64_t)WZ_MAX_BLOCKS * lba ? left : (uint64_t)WZ_MAX_BLOCKS * lba;
	if (io->op == NVMF_IO_DISCARD)
		return left < (uint64_t)UINT32_MAX * lba ? left : (uint64_t)UINT32_MAX / lba * lba * lba;
	uint64_t n = left < io->max_xfer ? left : io->max_xfer;
	/* No more than the bytes the first NVMF_REQ_MAX_IOV pieces cover. */
	size_t o = (size_t)off, covered = 0;
	unsigned i = 0, used = 0;
	while (i < io->iovcnt && o >= io->iov[i].iov_len)
		o -= io->iov[i++].iov_len;
	for (; i < io->iovcnt && used < NVMF_REQ_MAX_IOV && covered < n; i++, used++, o = 0)
		covered += io->iov[i].iov_len - o;
	if (covered < n)
		n = covered;
	return n / lba * lba;
}

static void io_kick(struct nvmf_io *io);

static void io_req_done(struct nvmf_req *req, int err)
{
	struct nvmf_io *io = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);

	if (!err && st) {
		char sbuf[96];
		if (!io->status)
			io->status = st;
		err = nvme_status_to_errno(st);
		if (!err)
			err = -EIO; /* a status the table maps to success is still a failure */
		log_debug("%s: CID 0x%04x opcode 0x%02x: %s", req->q->name, req->cid,
			  req->sqe.opcode, nvme_status_fmt(st, sbuf, sizeof(sbuf)));
	}
	if (err && req->timed_out)
		io->timed_out = true;
	nvmf_req_put(req);
	if (err && !io->err)
		io->err = err;
	INVARIANT(io->outstanding > 0, "completion of a command the I/O did not send");
	io->outstanding--;
	/* Still waiting for a request from an earlier kick: it keeps its
	 * place in the queue's line, and its wake sends the rest.  One that
	 * failed sends nothing more: it leaves the line (else it would be
	 * woken after it completed) and ends once its commands are back. */
	if (io->waiting) {
		if (!io->err)
			return;
		list_del(&io->waiter.link);
		io->waiting = false;
	}
	if (!io->kicking)
		io_kick(io);
}

static void io_wake(struct nvmf_waiter *w)
{
	struct nvmf_io *io = container_of(w, struct nvmf_io, waiter);

	io->waiting = false;
	io_kick(io);
}

static void build(struct nvmf_io *io, struct nvmf_req *req, uint64_t off, uint64_t n)
{
	const struct nvmf_ns *ns = io->ns;
	uint64_t slba = (io->offset + off) >> ns->lba_shift;
	uint32_t nlb = (uint32_t)(n >> ns->lba_shift);
	struct nvme_sqe *sqe = &req->sqe;

	sqe->nsid = ns->nsid;
	switch (io->op) {
	case NVMF_IO_READ:
	case NVMF_IO_WRITE: {
		struct iovec sl[NVMF_REQ_MAX_IOV];
		int cnt = iov_slice(io->iov, io->iovcnt, off, n, sl, NVMF_REQ_MAX_IOV);
		sqe->opcode = io->op == NVMF_IO_READ ? NVME_CMD_READ : NVME_CMD_WRITE;
		nvmf_req_set_data(req, sl, (unsigned)cnt, (uint32_t)n, io->op == NVMF_IO_WRITE);
		sqe->cdw10 = (uint32_t)slba;
		sqe->cdw11 = (uint32_t)(slba >> 32);
		sqe->cdw12 = (nlb - 1) | ((io->flags & NVMF_IO_FUA) ? NVME_RW_FUA : 0);
		/* A write goes out of its pipe only as one command: its pipe
		 * is still full only when nvmf_io_submit found it could go
		 * whole.  A read split at MDTS gives every command the pipe
		 * with its place in the stream: the transport appends a part
		 * only when the parts before it are all there (io_pipe_settle
		 * takes care of the rest). */
		if (io->sink && !io->sink->broken && io->len <= UINT32_MAX &&
		    (io->op == NVMF_IO_READ || (off == 0 && n == io->len && io->sink->filled == n))) {
			req->sink = io->sink;
			req->sink_off = (uint32_t)off;
		}
		break;
	}
	case NVMF_IO_WRITE_ZEROES:
		sqe->opcode = NVME_CMD_WRITE_ZEROES;
		sqe->cdw10 = (uint32_t)slba;
		sqe->cdw11 = (uint32_t)(slba >> 32);
		sqe->cdw12 = (nlb - 1) | ((io->flags & NVMF_IO_NO_DEALLOC) ? 0 : NVME_WZ_DEAC) |
			     ((io->flags & NVMF_IO_FUA) ? NVME_RW_FUA : 0);
		break;
	case NVMF_IO_DISCARD: {
		req->dsm.cattr = 0;
		req->dsm.nlb = nlb;
		req->dsm.slba = slba;
		struct iovec iov = { &req->dsm, sizeof(req->dsm) };
		sqe->opcode = NVME_CMD_DSM;
		sqe->cdw10 = 0; /* one range */
		sqe->cdw11 = NVME_DSM_ATTR_DEALLOCATE;
		nvmf_req_set_data(req, &iov, 1, sizeof(req->dsm), true);
		break;
	}
	case NVMF_IO_FLUSH:
		sqe->opcode = NVME_CMD_FLUSH;
		break;
	}
}

/* A read's parts fill its pipe in order while they arrive in order.  One
 * that came early (the target may finish them in any order) went to the
 * buffer, and every part after it too: what the pipe holds then joins them
 * there, so that the payload ends wholly in one place, as the owner reads
 * it (pipe_sink.h). */
static void io_pipe_settle(struct nvmf_io *io)
{
	struct pipe_sink *s = io->sink;

	if (!s || io->op != NVMF_IO_READ || io->err || !s->filled)
		return;
	if (s->broken) {
		/* Bytes that went into it are lost: the attempt fails, and
		 * the next one goes without the pipe (nvmf_io_submit). */
		io->err = -EIO;
		return;
	}
	if (s->filled == io->len)
		return;
	INVARIANT(s->filled < io->len, "a read's pipe holds more than the read");
	io->pipe_joined = true;
	if (pipe_sink_unsplice(s, io->iov, io->iovcnt) < 0)
		io->err = -EIO; /* the bytes in the pipe are lost; a retry reads them again */
}

static void io_kick(struct nvmf_io *io)
{
	io->kicking = true;
	while (!io->err && (io->op == NVMF_IO_FLUSH ? !io->started : io->next < io->len)) {
		uint64_t n = nvmf_io_chunk(io, io->next);
		if (io->op != NVMF_IO_FLUSH && n == 0) {
			log_err("%s: I/O buffer too fragmented at offset %llu", io->q->name,
				(unsigned long long)(io->offset + io->next));
			io->err = -EINVAL;
			break;
		}
		struct nvmf_req *req = nvmf_req_get_waiter(io->q, &io->waiter);
		if (!req) {
			/* On the waiter list once at most: a second add corrupts it. */
			INVARIANT(!io->waiting, "an I/O on the queue's waiter list twice");
			io->waiter.fn = io_wake;
			io->waiting = true;
			nvmf_queue_wait(io->q, &io->waiter);
			io->kicking = false;
			return;
		}
		build(io, req, io->next, n);
		req->done = io_req_done;
		req->ctx = io;
		io->next += n;
		io->started = true;
		io->outstanding++;
		nvmf_req_submit(req);
	}
	io->kicking = false;
	if (io->outstanding == 0) {
		io_pipe_settle(io);
		io->cb(io, io->err);
	}
}

int nvmf_io_submit(struct nvmf_queue *q, const struct nvmf_ns *ns, uint32_t max_xfer,
		   struct nvmf_io *io)
{
	/* nsze grows while I/O runs (a resize stored by reactor 0). */
	uint64_t mask = ns->lba_size - 1,
		 size = __atomic_load_n(&ns->nsze, __ATOMIC_RELAXED) << ns->lba_shift;

	if (io->op != NVMF_IO_FLUSH) {
		if ((io->offset | io->len) & mask || !io->len || io->offset > size ||
		    io->len > size - io->offset)
			return -EINVAL;
		if (has_data(io->op) && iov_length(io->iov, io->iovcnt) < io->len)
			return -EINVAL;
	}
	io->q = q;
	io->ns = ns;
	io->max_xfer = max_xfer / ns->lba_size * ns->lba_size;
	if (!io->max_xfer)
		io->max_xfer = ns->lba_size;
	io->next = 0;
	io->outstanding = 0;
	io->err = 0;
	io->status = 0;
	io->timed_out = false;
	io->started = false;
	io->kicking = false;
	io->waiting = false;
	io->pipe_joined = false;
	/* An attempt after one that failed (another path) starts the pipe
	 * afresh, whether or not this one uses it: the owner reads `filled`
	 * as where the payload is.  A pipe that cannot be reset is broken,
	 * and the owner then takes the buffer. */
	if (io->sink && io->op == NVMF_IO_READ && io->sink->filled)
		(void)pipe_sink_reset(io->sink);
	/* A broken pipe keeps its count and cannot be reset: an attempt that
	 * kept it would fail at the end (io_pipe_settle), and the next one
	 * too, for ever.  This and later attempts read into the buffer; the
	 * owner sees `broken` and sends from there. */
	if (io->sink && io->op == NVMF_IO_READ && io->sink->broken)
		io->sink = NULL;
	/* A write's payload goes out of its pipe only as one command through
	 * a transport that can: otherwise it comes out into the buffer now,
	 * once (the pipe is then empty and later attempts use the buffer). */
	if (io->sink && io->op == NVMF_IO_WRITE && io->sink->filled &&
	    (!q->ops->pipe_writes || nvmf_io_chunk(io, 0) != io->len) &&
	    pipe_sink_unsplice(io->sink, io->iov, io->iovcnt) < 0)
		return -EIO;
	if (io->sink && io->op == NVMF_IO_WRITE && io->sink->broken)
		return -EIO; /* the payload is lost */
	io_kick(io);
	return 0;
}
