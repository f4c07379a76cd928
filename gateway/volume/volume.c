#include "gateway/volume/volume.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/iov.h"
#include "gateway/base/log.h"
#include "gateway/volume/qos.h"

/* The owner's add: plain read (it is the only writer), relaxed store (so a
 * snapshot on another thread is not a data race). */
#define STAT_ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)
#define STAT_LD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

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
		uint64_t size = vol_size(v);
		if (io->offset > size || io->length > size - io->offset)
			return -ENOSPC;
		if ((io->op == VOL_READ || io->op == VOL_WRITE) &&
		    iov_length(io->iov, io->iovcnt) < io->length)
			return -EINVAL;
	}
	if (io->op == VOL_WRITE && io->sink && io->sink->filled && !v->ops->pipe_writes &&
	    pipe_sink_unsplice(io->sink, io->iov, io->iovcnt) < 0)
		return -EIO;
	if (io->op == VOL_WRITE && io->sink && io->sink->broken)
		return -EIO;
	if (io->op == VOL_WRITE_ZEROES && (io->flags & VOL_IO_FAST_ZERO) &&
	    (!(v->caps & VOL_CAP_FAST_ZERO) || (io->flags & VOL_IO_NO_HOLE)))
		return -ENOTSUP;
	io->vol = v;
	io->origin = r;
	io->err = 0;
	io->completed = false;
	io->start_ns = reactor_now_ns();
	if (io->op == VOL_FLUSH) {
		io->loss_at = __atomic_load_n(&v->loss_seq, __ATOMIC_ACQUIRE);
		io->loss_seen_at =
			__atomic_load_n(io->loss_seen ? io->loss_seen : &v->loss_anon, __ATOMIC_RELAXED);
	}
	if (r->id < v->nr_stats)
		STAT_ADD(v->stats[r->id].in_flight, 1);
	if (!qos_admit(v, r, io))
		return 0; /* queued: qos.c dispatches it when its turn comes */
	vol_dispatch(io);
	return 0;
}

void vol_dispatch(struct vol_io *io)
{
	io->in_submit = true;
	io->vol->ops->submit(io->vol, io);
	io->in_submit = false;
}

static uint64_t path_wait_total;

uint64_t vol_path_wait_total(void)
{
	return __atomic_load_n(&path_wait_total, __ATOMIC_RELAXED);
}

void vol_path_wait_add(struct volume *v, uint64_t n)
{
	if (!n || !v->path_wait)
		return;
	__atomic_add_fetch(v->path_wait, n, __ATOMIC_RELAXED);
	__atomic_add_fetch(&path_wait_total, n, __ATOMIC_RELAXED);
}

void vol_path_wait_sub(struct volume *v, uint64_t n)
{
	if (!n || !v->path_wait)
		return;
	__atomic_sub_fetch(v->path_wait, n, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&path_wait_total, n, __ATOMIC_RELAXED);
}

void vol_note_loss(struct volume *v)
{
	__atomic_add_fetch(&v->loss_seq, 1, __ATOMIC_RELEASE);
}

uint64_t vol_loss_sample(const struct volume *v)
{
	return __atomic_load_n(&v->loss_reported, __ATOMIC_ACQUIRE);
}

void vol_loss_session_end(struct volume *v, uint64_t seen)
{
	uint64_t rep = __atomic_load_n(&v->loss_reported, __ATOMIC_RELAXED);

	if (seen >= __atomic_load_n(&v->loss_seq, __ATOMIC_ACQUIRE))
		return;
	while (rep > seen && !__atomic_compare_exchange_n(&v->loss_reported, &rep, seen, false,
							  __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static void advance(uint64_t *at, uint64_t to)
{
	uint64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);

	while (cur < to &&
	       !__atomic_compare_exchange_n(at, &cur, to, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

/* A flush the backend completed: does it vouch for every write
 * acknowledged before it?  Not if a loss happened while it was in flight
 * (whatever it flushed, the lost writes were not among it), nor if its
 * session had not been told of an earlier loss when it was submitted.
 * Sessions may share a cursor across reactors (the kernel device's
 * sockets): compare-and-swap. */
static int flush_loss(struct volume *v, struct vol_io *io)
{
	uint64_t seq = __atomic_load_n(&v->loss_seq, __ATOMIC_ACQUIRE);
	uint64_t *cur = io->loss_seen ? io->loss_seen : &v->loss_anon;

	if (io->loss_seen_at >= io->loss_at && io->loss_at == seq)
		return 0;
	advance(cur, seq);
	advance(&v->loss_reported, seq);
	log_err("%s: flush fails: a path was reset%s with acknowledged writes not yet flushed; "
		"they may be lost",
		v->name, io->loss_at == seq ? "" : " while the flush was in flight");
	return -EIO;
}

static void run_cb(struct reactor_msg *m)
{
	struct vol_io *io = container_of(m, struct vol_io, msg);
	struct volume *v = io->vol;

	if (io->op == VOL_FLUSH && !io->err)
		io->err = flush_loss(v, io);

	if (io->origin->id < v->nr_stats) {
		struct vol_stats *st = &v->stats[io->origin->id];
		STAT_ADD(st->in_flight, -1);
		if (io->err) {
			STAT_ADD(st->errors, 1);
		} else if (io->op == VOL_READ) {
			STAT_ADD(st->reads, 1);
			STAT_ADD(st->read_bytes, io->length);
			hist_record_relaxed(&st->read_lat, reactor_now_ns() - io->start_ns);
		} else if (io->op == VOL_WRITE) {
			STAT_ADD(st->writes, 1);
			STAT_ADD(st->write_bytes, io->length);
			hist_record_relaxed(&st->write_lat, reactor_now_ns() - io->start_ns);
		} else if (io->op == VOL_FLUSH) {
			STAT_ADD(st->flushes, 1);
		}
	}
	io->cb(io, io->err);
}

void vol_complete(struct reactor *here, struct vol_io *io, int err)
{
	/* Exactly once per vol_submit: a second completion would run the
	 * exporter's callback on a request it may already have reused. */
	INVARIANT(!io->completed, "vol_io completed twice");
	io->completed = true;
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

void vol_count_retry(struct reactor *here, struct vol_io *io)
{
	struct volume *v = io->vol;

	if (here->id < v->nr_stats)
		STAT_ADD(v->stats[here->id].retries, 1);
}

static void to_us(const struct hist *h, struct vol_latency_us *o)
{
	o->p50 = hist_percentile(h, 50) / 1000;
	o->p95 = hist_percentile(h, 95) / 1000;
	o->p99 = hist_percentile(h, 99) / 1000;
	o->p999 = hist_percentile(h, 99.9) / 1000;
}

int vol_stats_snapshot(const struct volume *v, struct vol_stats_snap *out)
{
	if (!v || !out)
		return -EINVAL;
	memset(out, 0, offsetof(struct vol_stats_snap, read_lat));
	hist_init(&out->read_lat);
	hist_init(&out->write_lat);
	for (unsigned i = 0; i < v->nr_stats; i++) {
		const struct vol_stats *st = &v->stats[i];

		out->reads += STAT_LD(st->reads);
		out->writes += STAT_LD(st->writes);
		out->read_bytes += STAT_LD(st->read_bytes);
		out->write_bytes += STAT_LD(st->write_bytes);
		out->flushes += STAT_LD(st->flushes);
		out->errors += STAT_LD(st->errors);
		out->retries += STAT_LD(st->retries);
		out->in_flight += STAT_LD(st->in_flight);
		out->qos_delayed += STAT_LD(st->qos_delayed);
		out->qos_queued += STAT_LD(st->qos_queued);
		hist_merge_relaxed(&out->read_lat, &st->read_lat);
		hist_merge_relaxed(&out->write_lat, &st->write_lat);
	}
	/* in_flight cannot underflow: an I/O's submit and callback both
	 * count on its origin reactor, so each reactor's gauge is exact. */
	to_us(&out->read_lat, &out->read_us);
	to_us(&out->write_lat, &out->write_us);
	return 0;
}

void vol_drain(struct volume *v)
{
	if (!v)
		return;
	qos_drain(v);
	if (v->ops->drain)
		v->ops->drain(v);
}

void vol_destroy(struct volume *v)
{
	if (v) {
		qos_free(v);
		v->ops->destroy(v);
	}
}
