#include "gateway/volume.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/iov.h"
#include "gateway/log.h"

const char *vol_op_name(enum vol_op op)
{
	switch (op) {
	case VOL_READ: return "read";
	case VOL_WRITE: return "write";
	case VOL_FLUSH: return "flush";
	case VOL_WRITE_ZEROES: return "write-zeroes";
	case VOL_TRIM: return "trim";
	}
	return "?";
}

const char *vol_caps_str(uint32_t caps, char *buf, unsigned len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
		{ VOL_CAP_READ_ONLY, "read-only" }, { VOL_CAP_FLUSH, "flush" },
		{ VOL_CAP_FUA, "fua" },		    { VOL_CAP_TRIM, "trim" },
		{ VOL_CAP_WRITE_ZEROES, "write-zeroes" }, { VOL_CAP_FAST_ZERO, "fast-zero" },
	};
	unsigned used = 0;

	if (!len)
		return buf;
	buf[0] = 0;
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(caps & names[i].bit))
			continue;
		int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", names[i].name);
		if (n < 0 || (unsigned)n >= len - used)
			break;
		used += (unsigned)n;
	}
	if (!used)
		snprintf(buf, len, "none");
	return buf;
}

int vol_submit(struct volume *v, struct reactor *r, struct vol_io *io)
{
	uint64_t mask = v->block_size - 1;

	switch (io->op) {
	case VOL_READ:
		break;
	case VOL_WRITE:
	case VOL_WRITE_ZEROES:
	case VOL_TRIM:
		if (v->caps & VOL_CAP_READ_ONLY)
			return -EPERM;
		if (io->op == VOL_WRITE_ZEROES && !(v->caps & VOL_CAP_WRITE_ZEROES))
			return -EOPNOTSUPP;
		if (io->op == VOL_TRIM && !(v->caps & VOL_CAP_TRIM))
			return -EOPNOTSUPP;
		break;
	case VOL_FLUSH:
		break;
	default:
		return -EINVAL;
	}
	if (io->op != VOL_FLUSH) {
		if (!io->length || (io->offset | io->length) & mask)
			return -EINVAL;
		if (io->offset > v->size || io->length > v->size - io->offset)
			return -ENOSPC;
		if ((io->op == VOL_READ || io->op == VOL_WRITE) &&
		    iov_length(io->iov, io->iovcnt) < io->length)
			return -EINVAL;
	}
	if (io->op == VOL_WRITE_ZEROES && (io->flags & VOL_IO_FAST_ZERO) &&
	    (!(v->caps & VOL_CAP_FAST_ZERO) || (io->flags & VOL_IO_NO_HOLE)))
		return -ENOTSUP;
	io->vol = v;
	io->origin = r;
	io->err = 0;
	io->in_submit = true;
	v->ops->submit(v, io);
	io->in_submit = false;
	return 0;
}

static void run_cb(struct reactor_msg *m)
{
	struct vol_io *io = container_of(m, struct vol_io, msg);
	struct volume *v = io->vol;

	if (io->origin->id < v->nr_stats) {
		struct vol_stats *st = &v->stats[io->origin->id];
		if (io->err) {
			st->errors++;
		} else if (io->op == VOL_READ) {
			st->reads++;
			st->read_bytes += io->length;
		} else if (io->op == VOL_WRITE) {
			st->writes++;
			st->write_bytes += io->length;
		} else if (io->op == VOL_FLUSH) {
			st->flushes++;
		}
	}
	io->cb(io, io->err);
}

void vol_complete(struct reactor *here, struct vol_io *io, int err)
{
	io->err = err;
	io->msg.fn = run_cb;
	if (here != io->origin)
		reactor_send_msg(io->origin, &io->msg);
	else if (io->in_submit)
		reactor_defer(here, &io->msg);
	else
		run_cb(&io->msg);
}

void vol_forward(struct reactor *dst, struct vol_io *io, reactor_msg_fn fn)
{
	io->msg.fn = fn;
	reactor_send_msg(dst, &io->msg);
}

void vol_destroy(struct volume *v)
{
	if (v)
		v->ops->destroy(v);
}
