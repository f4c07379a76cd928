/* The transmission phase: request headers validated, turned into volume
 * I/O on the connection's reactor, and answered (simple, structured or
 * extended) in completion order. */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "nbd/internal.h"

uint16_t nbd_export_flags(const struct nbd_export *e)
{
	uint32_t caps = e->vol->caps;
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_CACHE;

	if (e->read_only || (caps & VOL_CAP_READ_ONLY))
		return f | NBD_FLAG_READ_ONLY;
	if (caps & VOL_CAP_FLUSH)
		f |= NBD_FLAG_SEND_FLUSH;
	if (caps & VOL_CAP_FUA)
		f |= NBD_FLAG_SEND_FUA;
	if (caps & VOL_CAP_TRIM)
		f |= NBD_FLAG_SEND_TRIM;
	if (caps & VOL_CAP_WRITE_ZEROES) {
		/* FAST_ZERO may be advertised when the answer is always a
		 * quick ENOTSUP; the volume layer gives exactly that when it
		 * cannot zero cheaply. */
		f |= NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_FAST_ZERO;
	}
	/* One NVMe Flush covers every write the controller completed before
	 * it, whichever queue carried it, so FLUSH and FUA on one connection
	 * are visible to all. */
	f |= NBD_FLAG_CAN_MULTI_CONN;
	return f;
}

uint16_t nbd_conn_tflags(const struct nbd_export *e, bool structured)
{
	/* Replies are never fragmented, so DF costs nothing once chunks exist. */
	return nbd_export_flags(e) | (structured ? NBD_FLAG_SEND_DF : 0);
}

uint32_t nbd_errno_to_wire(int err)
{
	switch (-err) {
	case 0: return 0;
	case EPERM:
	case EROFS:
	case EACCES: return NBD_EPERM;
	case ENOMEM: return NBD_ENOMEM;
	case EINVAL: return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG: return NBD_ENOSPC;
	case EOVERFLOW: return NBD_EOVERFLOW;
	case ENOTSUP: return NBD_ENOTSUP;
	case ESHUTDOWN: return NBD_ESHUTDOWN;
	default: return NBD_EIO;
	}
}

size_t nbd_req_hdr_size(const struct nbd_conn *c)
{
	return c->extended ? sizeof(struct nbd_request_ext) : sizeof(struct nbd_request);
}

static uint8_t *put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); return p + 2; }
static uint8_t *put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); return p + 4; }
static uint8_t *put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); return p + 8; }

/* A chunk header (structured or extended) for payload bytes after it. */
static uint8_t *put_chunk(const struct nbd_conn *c, const struct nbd_req *q, uint8_t *p,
			  uint16_t type, uint64_t payload)
{
	if (c->extended) {
		p = put32(p, NBD_EXTENDED_REPLY_MAGIC);
		p = put16(p, NBD_REPLY_FLAG_DONE);
		p = put16(p, type);
		p = put64(p, q->cookie);
		p = put64(p, q->offset);
		return put64(p, payload);
	}
	p = put32(p, NBD_STRUCTURED_REPLY_MAGIC);
	p = put16(p, NBD_REPLY_FLAG_DONE);
	p = put16(p, type);
	p = put64(p, q->cookie);
	return put32(p, (uint32_t)payload);
}

void nbd_encode_reply(const struct nbd_conn *c, struct nbd_req *q)
{
	uint32_t werr = nbd_errno_to_wire(q->err);
	bool read = q->type == NBD_CMD_READ;
	uint8_t *p = q->hdr;

	q->data_len = 0;
	if (c->kernel || (!c->structured && !c->extended) ||
	    (!werr && !read && !c->extended)) {
		/* Structured replies still allow a simple one without data. */
		p = put32(p, NBD_SIMPLE_REPLY_MAGIC);
		p = put32(p, werr);
		p = put64(p, q->cookie);
		if (!werr && read)
			q->data_len = q->length;
	} else if (!werr && read && q->length) {
		p = put_chunk(c, q, p, NBD_REPLY_TYPE_OFFSET_DATA, 8 + q->length);
		p = put64(p, q->offset);
		q->data_len = q->length;
	} else if (!werr) {
		p = put_chunk(c, q, p, NBD_REPLY_TYPE_NONE, 0);
	} else {
		const char *msg = q->msg ? q->msg : strerror(-q->err);
		size_t ml = strnlen(msg, 64);
		bool at = q->err_at_offset;
		p = put_chunk(c, q, p, at ? NBD_REPLY_TYPE_ERROR_OFFSET : NBD_REPLY_TYPE_ERROR,
			      6 + ml + (at ? 8 : 0));
		p = put32(p, werr);
		p = put16(p, (uint16_t)ml);
		memcpy(p, msg, ml);
		p += ml;
		if (at)
			p = put64(p, q->offset);
	}
	q->hdr_len = (unsigned)(p - q->hdr);
}

static void reply(struct nbd_conn *c, struct nbd_req *q)
{
	/* A spliced reply's header went into its pipe at submission. */
	if (!q->spliced)
		nbd_encode_reply(c, q);
	nbd_stage_mark(c, q, NBD_STAGE_QUEUED);
	INVARIANT(list_empty(&q->link), "reply of an NBD slot already on a list");
	list_add_tail(&c->replyq, &q->link);
	nbd_conn_tx_kick_later(c);
}

static void fail_req(struct nbd_conn *c, struct nbd_req *q, int err, const char *msg)
{
	q->err = err;
	q->msg = msg;
	reply(c, q);
}

static void io_done(struct vol_io *io, int err)
{
	struct nbd_req *q = io->ctx;
	struct nbd_conn *c = q->c;

	c->inflight--;
	if (c->state >= NBD_CONN_CLOSING) {
		nbd_req_put(c, q);
		nbd_conn_maybe_finish(c);
		return;
	}
	nbd_splice_settle(c, q, &err);
	if (err) {
		q->err = err;
		if (q->type == NBD_CMD_FLUSH && err == -EIO)
			q->loss_upto = *c->loss_cursor;
		q->err_at_offset = q->type != NBD_CMD_FLUSH;
		q->msg = NULL;
		log_warn("nbd %s: %s of %llu bytes at %llu failed: %s", c->peer,
			 vol_op_name(io->op), (unsigned long long)q->length,
			 (unsigned long long)q->offset, strerror(-err));
	}
	reply(c, q);
}

static void execute(struct nbd_conn *c, struct nbd_req *q)
{
	struct volume *v = c->e->vol;
	struct vol_io *io = &q->io;
	int ret;

	io->flags = (q->flags & NBD_CMD_FLAG_FUA) ? VOL_IO_FUA : 0;
	io->offset = q->offset;
	io->length = q->length;
	io->iov = NULL;
	io->iovcnt = 0;
	io->sink = NULL;
	io->loss_seen = c->loss_cursor;
	switch (q->type) {
	case NBD_CMD_READ:
	case NBD_CMD_WRITE:
		io->op = q->type == NBD_CMD_READ ? VOL_READ : VOL_WRITE;
		q->iov.iov_base = q->buf;
		q->iov.iov_len = q->length;
		io->iov = &q->iov;
		io->iovcnt = 1;
		nbd_splice_prepare(c, q);
		break;
	case NBD_CMD_FLUSH:
		if (!(v->caps & VOL_CAP_FLUSH)) {
			reply(c, q); /* no volatile cache: nothing to do */
			return;
		}
		io->op = VOL_FLUSH;
		io->offset = io->length = 0;
		break;
	case NBD_CMD_TRIM:
		io->op = VOL_TRIM;
		break;
	case NBD_CMD_WRITE_ZEROES:
		io->op = VOL_WRITE_ZEROES;
		if (q->flags & NBD_CMD_FLAG_NO_HOLE)
			io->flags |= VOL_IO_NO_HOLE;
		if (q->flags & NBD_CMD_FLAG_FAST_ZERO)
			io->flags |= VOL_IO_FAST_ZERO;
		break;
	default: /* CACHE: a hint with nothing behind it */
		reply(c, q);
		return;
	}
	if (io->op != VOL_FLUSH && !q->length) {
		reply(c, q);
		return;
	}
	io->cb = io_done;
	io->ctx = q;
	c->inflight++;
	nbd_stage_mark(c, q, NBD_STAGE_VOLUME);
	ret = vol_submit(v, c->r, io);
	if (ret < 0) {
		c->inflight--;
		nbd_splice_release(c, q);
		fail_req(c, q, ret, ret == -ENOTSUP ? "cannot zero fast" : NULL);
	}
}

/* -errno with q->msg set, or 0. */
static int validate(struct nbd_conn *c, struct nbd_req *q, uint64_t payload)
{
	const struct volume *v = c->e->vol;
	uint16_t tf = c->tflags, allowed;
	bool writes = false, ranged = true;

	switch (q->type) {
	case NBD_CMD_READ:
		allowed = (tf & NBD_FLAG_SEND_DF) ? NBD_CMD_FLAG_DF : 0;
		break;
	case NBD_CMD_WRITE:
		allowed = c->extended ? NBD_CMD_FLAG_PAYLOAD_LEN : 0;
		writes = true;
		break;
	case NBD_CMD_FLUSH:
		allowed = 0;
		ranged = false;
		break;
	case NBD_CMD_TRIM:
		allowed = 0;
		writes = true;
		if (!(tf & NBD_FLAG_SEND_TRIM) && !(tf & NBD_FLAG_READ_ONLY)) {
			q->msg = "trim is not supported";
			return -EINVAL;
		}
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed = NBD_CMD_FLAG_NO_HOLE |
			  ((tf & NBD_FLAG_SEND_FAST_ZERO) ? NBD_CMD_FLAG_FAST_ZERO : 0);
		writes = true;
		if (!(tf & NBD_FLAG_SEND_WRITE_ZEROES) && !(tf & NBD_FLAG_READ_ONLY)) {
			q->msg = "write zeroes is not supported";
			return -EINVAL;
		}
		break;
	case NBD_CMD_CACHE:
		allowed = 0;
		break;
	default:
		q->msg = "unknown command";
		return -EINVAL;
	}
	if (tf & NBD_FLAG_SEND_FUA)
		allowed |= NBD_CMD_FLAG_FUA;
	if (q->flags & ~allowed) {
		q->msg = "command flags not valid here";
		return -EINVAL;
	}
	if (c->extended && payload && q->type != NBD_CMD_WRITE) {
		q->msg = "unexpected payload";
		return -EINVAL;
	}
	if (c->extended && q->type == NBD_CMD_WRITE && !(q->flags & NBD_CMD_FLAG_PAYLOAD_LEN)) {
		q->msg = "write without NBD_CMD_FLAG_PAYLOAD_LEN";
		return -EINVAL;
	}
	if (writes && (tf & NBD_FLAG_READ_ONLY)) {
		q->msg = "the export is read-only";
		return -EPERM;
	}
	if (!ranged)
		return 0;
	if ((q->offset | q->length) & (v->block_size - 1)) {
		q->msg = "not aligned to the minimum block size";
		return -EINVAL;
	}
	uint64_t vsize = vol_size(v); /* read once: it may grow meanwhile */
	if (q->offset > vsize || q->length > vsize - q->offset) {
		q->msg = "beyond the end of the export";
		return (q->type == NBD_CMD_WRITE || q->type == NBD_CMD_WRITE_ZEROES) ? -ENOSPC :
										       -EINVAL;
	}
	if (q->type == NBD_CMD_READ && q->length > v->max_io) {
		q->msg = "read longer than the maximum payload";
		return -EINVAL;
	}
	return 0;
}

static void skip_payload(struct nbd_conn *c, struct nbd_req *q, uint64_t payload)
{
	c->cur = q;
	c->skip_left = payload;
	c->want = RX_SKIP;
}

/* Header accepted: get the buffer, then read the payload or execute. */
static void start(struct nbd_conn *c, struct nbd_req *q)
{
	bool write = q->type == NBD_CMD_WRITE;

	if ((write || q->type == NBD_CMD_READ) && q->length) {
		int ret = nbd_conn_ensure_buf(c, q, q->length);
		if (ret == -EAGAIN) {
			c->pending = q;
			return;
		}
		if (ret < 0) {
			q->err = ret;
			q->msg = "out of memory";
			if (write)
				skip_payload(c, q, q->length);
			else
				reply(c, q);
			return;
		}
		if (write) {
			c->cur = q;
			c->cur_got = 0;
			c->rx_window = 0; /* the stall clock starts at the header */
			c->want = RX_WRITE_DATA;
			nbd_splice_prepare_write(c, q);
			return;
		}
	}
	execute(c, q);
}

void nbd_tx_resume_pending(struct nbd_conn *c)
{
	struct nbd_req *q = c->pending;

	if (nbd_conn_ensure_buf(c, q, q->length) == -EAGAIN)
		return;
	c->pending = NULL;
	start(c, q);
}

void nbd_tx_payload_done(struct nbd_conn *c, struct nbd_req *q)
{
	if (q->err)
		reply(c, q);
	else
		execute(c, q);
}

int nbd_tx_request(struct nbd_conn *c, const uint8_t *p)
{
	struct nbd_req *q;
	uint64_t payload;
	uint32_t magic;

	memcpy(&magic, p, 4);
	magic = be32toh(magic);
	if (magic != (c->extended ? NBD_EXTENDED_REQUEST_MAGIC : NBD_REQUEST_MAGIC)) {
		nbd_conn_fail(c, -EPROTO, "bad request magic 0x%08x", magic);
		return -1;
	}
	c->rx_hdr_only = false; /* until this is a write that goes to a pipe */
	/* The receive side reads a header only with a free slot (conn.c). */
	INVARIANT(!list_empty(&c->free), "a request header read with no free slot");
	q = container_of(list_pop(&c->free), struct nbd_req, link);
	if (c->extended) {
		struct nbd_request_ext r;
		memcpy(&r, p, sizeof(r));
		q->flags = be16toh(r.flags);
		q->type = be16toh(r.type);
		q->cookie = be64toh(r.cookie);
		q->offset = be64toh(r.offset);
		q->length = be64toh(r.length);
		payload = (q->flags & NBD_CMD_FLAG_PAYLOAD_LEN) ? q->length : 0;
	} else {
		struct nbd_request r;
		memcpy(&r, p, sizeof(r));
		q->flags = be16toh(r.flags);
		q->type = be16toh(r.type);
		q->cookie = be64toh(r.cookie);
		q->offset = be64toh(r.offset);
		q->length = be32toh(r.length);
		payload = q->type == NBD_CMD_WRITE ? q->length : 0;
	}
	q->err = 0;
	q->msg = NULL;
	q->err_at_offset = false;
	q->loss_upto = 0;
	memset(q->t, 0, sizeof(q->t));
	nbd_stage_mark(c, q, NBD_STAGE_RECEIVE);
	if (q->type == NBD_CMD_DISC) {
		nbd_req_put(c, q);
		nbd_conn_drain(c, 0, "client sent NBD_CMD_DISC");
		return -1;
	}
	if (payload > c->e->vol->max_io) {
		if (payload > NBD_MAX_SKIP) {
			nbd_req_put(c, q);
			nbd_conn_fail(c, -EPROTO, "request with a %llu-byte payload",
				      (unsigned long long)payload);
			return -1;
		}
		q->err = -EINVAL;
		q->msg = "payload larger than the maximum";
	} else {
		q->err = validate(c, q, payload);
	}
	if (q->err) {
		log_debug("nbd %s: cmd %u flags 0x%x offset %llu length %llu rejected: %s", c->peer,
			 q->type, q->flags, (unsigned long long)q->offset,
			 (unsigned long long)q->length, q->msg);
		if (payload)
			skip_payload(c, q, payload);
		else
			reply(c, q);
		return 0;
	}
	start(c, q);
	return 0;
}
