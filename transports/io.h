/* Block I/O on one namespace through one queue: byte ranges in, NVMe
 * commands out, split at the controller's transfer limit and completed
 * once. */
#ifndef TRANSPORTS_IO_H
#define TRANSPORTS_IO_H

#include <stdint.h>
#include <sys/uio.h>

#include "transports/ctrl.h"

enum nvmf_io_op { NVMF_IO_READ, NVMF_IO_WRITE, NVMF_IO_FLUSH, NVMF_IO_WRITE_ZEROES,
		  NVMF_IO_DISCARD };
#define NVMF_IO_FUA (1u << 0)
#define NVMF_IO_NO_DEALLOC (1u << 1) /* write zeroes must not deallocate */

struct nvmf_io;
typedef void (*nvmf_io_cb)(struct nvmf_io *io, int err);

struct nvmf_io {
	enum nvmf_io_op op;
	uint32_t flags;
	uint64_t offset; /* bytes, LBA aligned */
	uint64_t len; /* bytes, LBA aligned */
	const struct iovec *iov;
	unsigned iovcnt;
	/* READ: the caller's pipe (see pipe_sink.h); at a callback without
	 * error the data is in the pipe if sink->filled == len and the pipe
	 * is not broken, else wholly in iov (after an error the pipe may hold
	 * any part of it).  An attempt never uses a broken pipe.  The
	 * commands of a read split at MDTS append their parts in order; if
	 * one comes early, the rest go to iov and what the pipe held joins
	 * them there at the end (pipe_joined).
	 * WRITE: the payload is in this pipe when sink->filled == len, else
	 * in iov; nvmf_io_submit takes it out into iov unless the I/O is one
	 * command on a transport that sends from pipes.  -EIO if it cannot. */
	struct pipe_sink *sink;
	nvmf_io_cb cb;
	void *ctx;
	/* Internal. */
	struct nvmf_queue *q;
	const struct nvmf_ns *ns;
	uint32_t max_xfer;
	uint64_t next;
	unsigned outstanding;
	int err;
	uint16_t status; /* the first NVMe status that failed a command, 0 if none */
	/* A command of this attempt was lost by the transport after its own
	 * io_timeout expired (status 0, err set): the attempt timed out, its
	 * connection did not merely go away under it. */
	bool timed_out;
	bool kicking;
	bool started;
	bool waiting; /* on the queue's waiter list */
	bool pipe_joined; /* a read's parts came out of order: the pipe's went to iov */
	struct nvmf_waiter waiter;
};

/* Plans the next command of an I/O: its byte length, at most max_xfer,
 * LBA aligned, and covering at most NVMF_REQ_MAX_IOV iovec pieces.  0 when
 * the buffer is too fragmented to make progress.  Exposed for tests. */
uint64_t nvmf_io_chunk(const struct nvmf_io *io, uint64_t off);

/* -EINVAL for a misaligned or out-of-range I/O (cb is not called);
 * otherwise 0 and cb runs exactly once on q's reactor. */
int nvmf_io_submit(struct nvmf_queue *q, const struct nvmf_ns *ns, uint32_t max_xfer,
		   struct nvmf_io *io);

#endif
