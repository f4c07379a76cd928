/* The FUSE file data path: each read, write, fsync and fallocate is a
 * request that runs its volume I/O in phases (lock, read the partial edge
 * blocks, write) and replies from the last completion. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fs_priv.h"
#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"

enum req_kind { RQ_READ, RQ_WRITE, RQ_FSYNC, RQ_ZERO };

struct req;

struct slot {
	struct vol_io io;
	struct iovec iov;
	struct req *q;
	bool busy;
};

struct seg {
	enum vol_op op;
	uint32_t flags;
	uint64_t off, len;
	uint8_t *buf;
};

struct req {
	struct list_node link;
	struct fusefs *fs;
	struct fnode *n;
	fuse_req_t req;
	enum req_kind kind;
	uint64_t off, len; /* the caller's byte range, clamped to the file */
	uint32_t wflags; /* VOL_IO_FUA */
	bool flush_after; /* O_DSYNC on a volume without FUA */
	uint64_t *loss_seen; /* the open file's (struct fhandle) */
	enum vol_op zero_op; /* RQ_ZERO: for the whole blocks */
	unsigned zero_flags; /* and its flags (VOL_IO_NO_HOLE for a zero range) */
	struct rmw_plan plan;
	struct range_lock lk;
	bool locked;
	uint8_t *buf; /* the aligned span [plan.start, plan.end) */
	size_t cap;
	uint8_t *edge; /* head block, tail block */
	size_t edge_cap;
	/* A held write (write_defer): the /dev/fuse read buffer its data is
	 * in, and where in it; NULL once the data is in buf. */
	uint8_t *held_buf;
	const uint8_t *held_data;
	struct seg segs[3];
	unsigned nsegs, seg_i;
	uint64_t seg_pos;
	unsigned active;
	int err;
	void (*phase_done)(struct req *q);
	struct slot slots[REQ_SLOTS];
};

/* --- requests and their volume I/O --- */

/* Data buffers count in the process's budget, so that NBD connections
 * yield to FUSE when it is spent.  FUSE itself never waits for the budget
 * (the kernel may be writing back through it to free memory): what it
 * holds is bounded by its own FUSE_MAX_INFLIGHT requests, each at most
 * FUSEFS_MAX_IO, and at most FREE_REQS_MAX kept, given back when idle or
 * when another waits for the budget. */
static int buf_reserve(uint8_t **p, size_t *cap, size_t need)
{
	void *nb;

	if (*cap >= need)
		return 0;
	if (posix_memalign(&nb, 4096, need))
		return -ENOMEM;
	free(*p);
	membudget_give(membudget_global(), *cap);
	membudget_charge(membudget_global(), need);
	*p = nb;
	*cap = need;
	return 0;
}

static void req_bufs_free(struct req *q)
{
	membudget_give(membudget_global(), q->cap + q->edge_cap);
	free(q->buf);
	free(q->edge);
	q->buf = q->edge = NULL;
	q->cap = q->edge_cap = 0;
}

static void req_free(struct req *q)
{
	req_bufs_free(q);
	free(q);
}

/* A request from the cache (or a new one), set up for freq on n; it holds
 * nothing yet. */
static struct req *req_alloc(struct fusefs *fs, fuse_req_t freq, struct fnode *n)
{
	struct list_node *l = list_pop(&fs->free_reqs);
	struct req *q;

	if (l) {
		INVARIANT(fs->nr_free > 0, "FUSE free request count out of step with its list");
		fs->nr_free--;
		q = container_of(l, struct req, link);
	} else {
		q = calloc(1, sizeof(*q));
		if (!q)
			return NULL;
		list_init(&q->link);
	}
	q->fs = fs;
	q->n = n;
	q->req = freq;
	q->wflags = 0;
	q->flush_after = false;
	q->loss_seen = NULL;
	q->locked = false;
	q->nsegs = q->seg_i = 0;
	q->seg_pos = 0;
	q->active = 0;
	q->err = 0;
	q->phase_done = NULL;
	q->held_buf = NULL;
	q->held_data = NULL;
	return q;
}

/* Its buffers: span bytes and two edge blocks; then it is in flight. */
static int req_hold(struct req *q, size_t span)
{
	struct fusefs *fs = q->fs;

	if (buf_reserve(&q->buf, &q->cap, span) < 0 ||
	    buf_reserve(&q->edge, &q->edge_cap, 2 * (size_t)q->n->vol->block_size) < 0)
		return -ENOMEM;
	fs->req_used_ns = reactor_now_ns();
	fs->inflight++;
	return 0;
}

static struct req *req_get(struct fusefs *fs, fuse_req_t freq, struct fnode *n, size_t span)
{
	struct req *q = req_alloc(fs, freq, n);

	if (!q)
		return NULL;
	if (req_hold(q, span) < 0) {
		req_free(q);
		return NULL;
	}
	n->inflight++;
	return q;
}

static void node_put(struct fusefs *fs, struct fnode *n)
{
	if (--n->inflight == 0 && n->gone)
		fusefs_node_released(fs, n);
}

/* After the reply: the request is gone, its memory reused. */
static void req_put(struct req *q)
{
	struct fusefs *fs = q->fs;
	struct fnode *n = q->n;

	/* In use, a request is on no list: a second put finds it on the free
	 * list (or freed, which ASan reports). */
	INVARIANT(list_empty(&q->link), "put of a FUSE request already free (double put)");
	INVARIANT(fs->inflight > 0 && n->inflight > 0, "put of a FUSE request not in flight");
	if (q->locked) {
		q->locked = false;
		range_unlock(&q->n->locks, &q->lk);
	}
	node_put(fs, n);
	if (fs->nr_free < FREE_REQS_MAX && q->cap <= 2 * FUSEFS_MAX_IO &&
	    !membudget_waiters(membudget_global())) {
		list_add_head(&fs->free_reqs, &q->link);
		fs->nr_free++;
		if (!fs->idle_timer.armed)
			reactor_timer_arm(fs->r, &fs->idle_timer, FUSE_IDLE_NS);
	} else {
		req_free(q);
	}
	fs->inflight--;
	fusefs_reads_resume(fs);
	fusefs_maybe_finish(fs);
}

/* Cached requests hold budget: with none taken for a whole period (a
 * burst is over), they go back, so that NBD clients waiting for buffers
 * are not kept waiting by an idle mount for as long as it lives.  Quiet
 * for a period, not for an instant (a client drains its queue before each
 * fsync): buffers freed and taken back at once are pages the kernel must
 * find again, on the data path (t_reclaim_nofault).  Quiet is about new
 * requests only: one in flight for long (waiting for a path) kept the
 * whole cache, up to 64 MiB, for as long. */
void fusefs_idle(struct reactor_timer *t)
{
	struct fusefs *fs = container_of(t, struct fusefs, idle_timer);
	uint64_t quiet = reactor_now_ns() - fs->req_used_ns;

	if (quiet < FUSE_IDLE_NS) {
		reactor_timer_arm(fs->r, &fs->idle_timer, FUSE_IDLE_NS - quiet);
		return;
	}
	if (fs->nr_free)
		log_debug("fuse %s: idle: %u cached requests back to the budget", fs->mountpoint,
			  fs->nr_free);
	fusefs_free_reqs(fs);
}

/* Someone began to wait for the budget (membudget's hook, on its own
 * thread): the cached requests go back now, on the mount's reactor, not
 * after the idle period or one by one as requests are answered.  The
 * hook's memory outlives the mount while its message is on the way. */
struct fusefs_reclaim {
	struct membudget_hook hook;
	struct reactor_msg msg;
	struct reactor *r;
	struct fusefs *fs; /* NULL: the mount is gone, the message frees this */
	int busy; /* atomic: the message is on its way */
};

static void reclaim_hook(struct membudget_hook *h)
{
	struct fusefs_reclaim *rc = container_of(h, struct fusefs_reclaim, hook);

	if (!__atomic_exchange_n(&rc->busy, 1, __ATOMIC_ACQ_REL))
		reactor_send_msg(rc->r, &rc->msg);
}

static void reclaim_msg(struct reactor_msg *m)
{
	struct fusefs_reclaim *rc = container_of(m, struct fusefs_reclaim, msg);
	struct fusefs *fs = rc->fs;

	if (!fs) {
		free(rc);
		return;
	}
	__atomic_store_n(&rc->busy, 0, __ATOMIC_RELEASE);
	if (!fs->nr_free || !membudget_waiters(membudget_global()))
		return;
	log_debug("fuse %s: %u cached requests back to the budget for a waiter", fs->mountpoint,
		  fs->nr_free);
	fusefs_free_reqs(fs);
}

int fusefs_reclaim_start(struct fusefs *fs)
{
	struct fusefs_reclaim *rc = calloc(1, sizeof(*rc));

	if (!rc)
		return -ENOMEM;
	rc->hook.fn = reclaim_hook;
	rc->msg.fn = reclaim_msg;
	rc->r = fs->r;
	rc->fs = fs;
	fs->reclaim = rc;
	membudget_hook_add(membudget_global(), &rc->hook);
	return 0;
}

void fusefs_reclaim_stop(struct fusefs *fs)
{
	struct fusefs_reclaim *rc = fs->reclaim;

	if (!rc)
		return;
	fs->reclaim = NULL;
	/* No hook runs from here on: busy is only cleared by the message,
	 * on this thread. */
	membudget_hook_del(membudget_global(), &rc->hook);
	if (__atomic_load_n(&rc->busy, __ATOMIC_ACQUIRE))
		rc->fs = NULL;
	else
		free(rc);
}

static void req_fail(struct req *q, int vol_err)
{
	int e = rmw_errno(vol_err);

	if (e == EIO)
		log_warn("fuse %s: %s at %llu+%llu failed: %s", q->n->name,
			 q->kind == RQ_READ ? "read" : q->kind == RQ_WRITE ? "write"
						 : q->kind == RQ_FSYNC ? "fsync" : "fallocate",
			 (unsigned long long)q->off, (unsigned long long)q->len,
			 strerror(-vol_err));
	fuse_reply_err(q->req, e);
	req_put(q);
}

static void pump(struct req *q);

static void slot_done(struct vol_io *io, int err)
{
	struct slot *s = io->ctx;
	struct req *q = s->q;

	s->busy = false;
	q->active--;
	if (err && !q->err)
		q->err = err;
	pump(q);
}

static uint64_t chunk_max(const struct volume *v)
{
	return rmw_chunk_max(v->max_io ? v->max_io : FUSEFS_MAX_IO, v->block_size);
}

/* Keeps up to REQ_SLOTS volume I/Os of the current segments in flight;
 * when all are done (or one failed and the rest drained) runs phase_done. */
static void pump(struct req *q)
{
	struct volume *v = q->n->vol;
	uint64_t cmax = chunk_max(v);

	while (!q->err && q->seg_i < q->nsegs && q->active < REQ_SLOTS) {
		struct seg *sg = &q->segs[q->seg_i];
		struct slot *s = NULL;
		for (unsigned i = 0; i < REQ_SLOTS; i++)
			if (!q->slots[i].busy) {
				s = &q->slots[i];
				break;
			}
		uint64_t n = sg->op == VOL_FLUSH ? 0 : sg->len - q->seg_pos;
		if (n > cmax)
			n = cmax;
		memset(&s->io, 0, offsetof(struct vol_io, vol));
		s->io.op = sg->op;
		s->io.flags = sg->flags;
		s->io.offset = sg->off + q->seg_pos;
		s->io.length = n;
		if (sg->op == VOL_READ || sg->op == VOL_WRITE) {
			s->iov.iov_base = sg->buf + q->seg_pos;
			s->iov.iov_len = n;
			s->io.iov = &s->iov;
			s->io.iovcnt = 1;
		}
		s->io.cb = slot_done;
		s->io.ctx = s;
		s->io.loss_seen = q->loss_seen;
		s->q = q;
		q->seg_pos += n;
		if (q->seg_pos >= sg->len) {
			q->seg_i++;
			q->seg_pos = 0;
		}
		int rc = vol_submit(v, q->fs->r, &s->io);
		if (rc < 0) {
			q->err = rc;
			break;
		}
		s->busy = true;
		q->active++;
		q->fs->st_ios++;
		q->fs->st_fua += !!(s->io.flags & VOL_IO_FUA);
		q->fs->st_flushes += s->io.op == VOL_FLUSH;
	}
	if (q->active)
		return;
	if (q->err) {
		req_fail(q, q->err);
		return;
	}
	q->phase_done(q);
}

static void add_seg(struct req *q, enum vol_op op, uint32_t flags, uint64_t off, uint64_t len,
		    uint8_t *buf)
{
	q->segs[q->nsegs++] = (struct seg){ op, flags, off, len, buf };
}

static void run_phase(struct req *q, void (*done)(struct req *q))
{
	q->seg_i = 0;
	q->seg_pos = 0;
	q->phase_done = done;
	pump(q);
}

/* Reads of the partial edge blocks into q->edge (head, then tail). */
static void add_edge_reads(struct req *q)
{
	uint32_t bs = q->n->vol->block_size;

	q->nsegs = 0;
	q->fs->st_rmw += rmw_edge_reads(&q->plan);
	if (q->plan.head_partial)
		add_seg(q, VOL_READ, 0, q->plan.start, bs, q->edge);
	if (q->plan.tail_partial)
		add_seg(q, VOL_READ, 0, q->plan.end - bs, bs, q->edge + bs);
}

/* read */

static void read_done(struct req *q)
{
	fuse_reply_buf(q->req, (const char *)q->buf + (q->off - q->plan.start), q->len);
	req_put(q);
}

static void read_start(struct req *q)
{
	/* No lock: like a block device, a read racing a write may see either
	 * side of it, but never a torn partial-block update of its own. */
	add_seg(q, VOL_READ, 0, q->plan.start, q->plan.end - q->plan.start, q->buf);
	run_phase(q, read_done);
}

static void write_begin(struct req *q, const void *data);

/* q waits on the deferred list, holding no budget buffer, until its
 * target's waiting I/O holds less (fusefs_deferred_fire); how: what that
 * means for it, for the first one's log line. */
static void defer_add(struct fusefs *fs, struct req *q, const char *how)
{
	req_bufs_free(q); /* a cached one's: not held while it waits */
	q->n->inflight++;
	list_add_tail(&fs->deferred, &q->link);
	if (fs->nr_deferred++ == 0)
		log_debug("fuse %s: %s: I/O waiting for a path holds %llu KiB of the buffer budget: %s",
			  fs->mountpoint, q->n->name,
			  (unsigned long long)(vol_path_wait_bytes(q->n->vol) >> 10), how);
	if (!fs->defer_timer.armed)
		reactor_timer_arm(fs->r, &fs->defer_timer, FUSE_DEFER_POLL_NS);
}

/* Such a read waits without a buffer, so that the files of other targets
 * on this mount (and the NBD clients) still get buffers.  Writes have
 * their data to keep: write_defer. */
static void read_defer(struct fusefs *fs, fuse_req_t freq, struct fnode *n, uint64_t off,
		       uint64_t len, const struct rmw_plan *p)
{
	struct req *q = req_alloc(fs, freq, n);

	if (!q) {
		fuse_reply_err(freq, ENOMEM);
		return;
	}
	q->kind = RQ_READ;
	q->off = off;
	q->len = len;
	q->plan = *p;
	defer_add(fs, q, "reads of it wait without a buffer");
}

/* Deferred reads whose target's waiting I/O now leaves room start, in
 * their order; the rest look again later.  Also while draining: their
 * volume's drain ends the wait. */
void fusefs_deferred_fire(struct reactor_timer *t)
{
	struct fusefs *fs = container_of(t, struct fusefs, defer_timer);
	struct list_node *l, *nx;
	struct list_node go;

	list_init(&go);
	uint64_t started = 0;
	unsigned n_started = 0;
	list_for_each_safe(l, nx, &fs->deferred) {
		struct req *q = container_of(l, struct req, link);
		uint64_t span = q->plan.end - q->plan.start;
		/* A file being removed (its volume drains) or a mount going
		 * away: started whatever the share, so that the drain's EIO
		 * ends them; held here they kept the removal waiting for the
		 * whole outage (review). */
		bool ending = q->n->gone || fs->state != FS_MOUNTED ||
			      __atomic_load_n(&q->n->vol->draining, __ATOMIC_ACQUIRE);
		/* The reads started at this fire count as waiting too (they
		 * park again if the path is still down), and no more start
		 * than the mount's in-flight bound allows, ending or not: one
		 * fire after a flap started all 256 at once, past the budget,
		 * and so did a removal (264 MiB of a 12 MiB budget for its
		 * drain; reviews).  The rest start at later fires, or at once
		 * when those end. */
		if (fs->inflight + n_started >= FUSE_MAX_INFLIGHT ||
		    (!ending && vol_path_wait_over(q->n->vol, started + span)))
			continue;
		started += span;
		n_started++;
		list_del(l);
		list_add_tail(&go, l);
	}
	/* Started once off the list: a start may end at once (a submit
	 * refused), and its put resumes reads.  Each counts as deferred until
	 * it starts: such an end must not find the mount with nothing left
	 * and free it under the rest (review). */
	while ((l = list_pop(&go))) {
		struct req *q = container_of(l, struct req, link);
		uint8_t *held = q->held_buf;

		fs->nr_deferred--;
		q->held_buf = NULL;
		if (req_hold(q, q->plan.end - q->plan.start) < 0) {
			fuse_reply_err(q->req, ENOMEM);
			node_put(fs, q->n);
			req_free(q);
		} else if (q->kind == RQ_WRITE) {
			write_begin(q, q->held_data); /* copies the data first */
		} else {
			read_start(q);
		}
		if (held)
			fusefs_read_buf_put(fs, held);
	}
	if (fs->nr_deferred)
		reactor_timer_arm(fs->r, &fs->defer_timer, FUSE_DEFER_POLL_NS);
	fusefs_reads_resume(fs);
	fusefs_maybe_finish(fs);
}

/* write */

static void write_replied(struct req *q)
{
	fuse_reply_write(q->req, q->len);
	req_put(q);
}

static void write_written(struct req *q)
{
	if (q->flush_after) {
		q->nsegs = 0;
		add_seg(q, VOL_FLUSH, 0, 0, 0, NULL);
		run_phase(q, write_replied);
		return;
	}
	write_replied(q);
}

/* The edges are read: keep their bytes outside the caller's range. */
static void write_merge(struct req *q)
{
	rmw_merge(&q->plan, q->off, q->len, q->n->vol->block_size, q->buf, q->edge);
	q->nsegs = 0;
	add_seg(q, VOL_WRITE, q->wflags, q->plan.start, q->plan.end - q->plan.start, q->buf);
	run_phase(q, write_written);
}

static void write_locked(struct req *q)
{
	add_edge_reads(q);
	run_phase(q, write_merge);
}

static void write_granted(struct range_lock *l)
{
	write_locked(container_of(l, struct req, lk));
}

/* The data into the request's buffer (the caller's is reused as soon as
 * this returns), then the range lock. */
static void write_begin(struct req *q, const void *data)
{
	memcpy(q->buf + (q->off - q->plan.start), data, q->len);
	q->locked = true;
	if (range_lock(&q->n->locks, &q->lk, q->plan.start, q->plan.end, write_granted))
		write_locked(q);
	else
		q->fs->st_waits++;
}

/* A write to a target whose waiting I/O holds its share of the budget
 * waits with the deferred reads, in the /dev/fuse read buffer its data
 * came in (outside the budget; the read goes on with a new one, at most
 * FUSE_MAX_HELD_BUFS of them), and starts as they do, taking a buffer
 * then.  Before, such writes took budget buffers past the share, all of
 * it with enough writers, and the NBD clients of healthy targets waited
 * for the dead one's return.  Not held (*held false: FUSE_MAX_HELD_BUFS
 * out, no memory, or libfuse's bytes not in our buffer), it takes a
 * budget buffer now, as before.  NULL: no memory for the request. */
static struct req *write_defer(struct fusefs *fs, fuse_req_t freq, struct fnode *n,
			       const char *buf, uint64_t len, uint64_t span, bool *held)
{
	uint8_t *hb = fusefs_read_take_buf(fs, buf, len);
	struct req *q;

	*held = false;
	if (!hb)
		return req_get(fs, freq, n, span);
	if (!(q = req_alloc(fs, freq, n))) {
		fusefs_read_buf_put(fs, hb);
		return NULL;
	}
	q->held_buf = hb;
	q->held_data = (const uint8_t *)buf;
	*held = true;
	defer_add(fs, q, "writes to it wait in their request's buffer");
	return q;
}

/* fallocate: zero range and punch hole */

/* The last phase of fallocate and fsync: nothing to send back but success. */
static void reply_ok(struct req *q)
{
	fuse_reply_err(q->req, 0);
	req_put(q);
}

static void zero_merge(struct req *q)
{
	uint32_t bs = q->n->vol->block_size;

	rmw_zero_edges(&q->plan, q->off, q->len, bs, q->edge);
	q->nsegs = 0;
	if (q->plan.head_partial)
		add_seg(q, VOL_WRITE, 0, q->plan.start, bs, q->edge);
	if (q->plan.tail_partial)
		add_seg(q, VOL_WRITE, 0, q->plan.end - bs, bs, q->edge + bs);
	if (q->plan.inner_end > q->plan.inner_start)
		add_seg(q, q->zero_op, q->zero_flags, q->plan.inner_start,
			q->plan.inner_end - q->plan.inner_start, NULL);
	run_phase(q, reply_ok);
}

static void zero_locked(struct req *q)
{
	add_edge_reads(q);
	run_phase(q, zero_merge);
}

static void zero_granted(struct range_lock *l)
{
	zero_locked(container_of(l, struct req, lk));
}

void fusefs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct req *q;

	(void)fi;
	if (!n) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : ENOENT);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	uint64_t vsize = vol_size(n->vol); /* read once: it may grow meanwhile */
	if ((uint64_t)off >= vsize || !size) {
		fuse_reply_buf(req, NULL, 0); /* end of file */
		return;
	}
	uint64_t len = size;
	if (len > vsize - (uint64_t)off)
		len = vsize - (uint64_t)off;
	struct rmw_plan p;
	rmw_plan((uint64_t)off, len, n->vol->block_size, &p);
	if (vol_path_wait_over(n->vol, p.end - p.start)) {
		read_defer(fs, req, n, (uint64_t)off, len, &p);
		return;
	}
	q = req_get(fs, req, n, p.end - p.start);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->kind = RQ_READ;
	q->off = (uint64_t)off;
	q->len = len;
	q->plan = p;
	read_start(q);
}

void fusefs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct req *q;

	if (!n) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : ENOENT);
		return;
	}
	if (n->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!size) {
		fuse_reply_write(req, 0);
		return;
	}
	/* A fixed-size file: like a block device, a write that starts at or
	 * past the end fails with ENOSPC, one that crosses it is short. */
	uint64_t vsize = vol_size(n->vol); /* read once: it may grow meanwhile */
	if ((uint64_t)off >= vsize) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	uint64_t len = size;
	if (len > vsize - (uint64_t)off)
		len = vsize - (uint64_t)off;
	struct rmw_plan p;
	rmw_plan((uint64_t)off, len, n->vol->block_size, &p);
	bool held = false;
	if (vol_path_wait_over(n->vol, p.end - p.start))
		q = write_defer(fs, req, n, buf, len, p.end - p.start, &held);
	else
		q = req_get(fs, req, n, p.end - p.start);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->kind = RQ_WRITE;
	q->off = (uint64_t)off;
	q->len = len;
	q->plan = p;
	/* fi is the caller's: what the write needs of it is taken now. */
	q->loss_seen = fi->fh ? &fhandle_of(fi)->loss_seen : NULL;
	if ((fi->flags | (fi->fh ? fhandle_of(fi)->flags : 0)) & (O_DSYNC | O_SYNC)) {
		if (n->vol->caps & VOL_CAP_FUA)
			q->wflags |= VOL_IO_FUA;
		else if (n->vol->caps & VOL_CAP_FLUSH)
			q->flush_after = true;
	}
	if (!held)
		write_begin(q, buf);
}

void fusefs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct req *q;

	(void)datasync;
	if (!n) {
		fuse_reply_err(req, ino == ROOT_INO ? 0 : ENOENT);
		return;
	}
	q = req_get(fs, req, n, 0);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->kind = RQ_FSYNC;
	q->off = q->len = 0;
	q->loss_seen = fi && fi->fh ? &fhandle_of(fi)->loss_seen : NULL;
	add_seg(q, VOL_FLUSH, 0, 0, 0, NULL);
	run_phase(q, reply_ok);
}

void fusefs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t length,
			 struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct volume *v;
	struct req *q;
	enum vol_op zop;

	(void)fi;
	if (!n) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : ENOENT);
		return;
	}
	v = n->vol;
	if (off < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (n->read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	uint64_t start = (uint64_t)off, end = start + (uint64_t)length;
	if (end < start) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	/* Growing the file is impossible: the same answer as a full disk. */
	uint64_t vsize = vol_size(v); /* read once: it may grow meanwhile */
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > vsize) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))) {
		fuse_reply_err(req, 0); /* every byte is allocated already */
		return;
	}
	if ((mode & FALLOC_FL_PUNCH_HOLE) && (mode & FALLOC_FL_ZERO_RANGE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (end > vsize)
		end = vsize;
	if (start >= end) {
		fuse_reply_err(req, 0);
		return;
	}
	/* A hole must read back as zeroes, and a Dataset Management
	 * deallocate is only advice (the target may deallocate nothing, or
	 * skip ranges below its granularity): Write Zeroes, which lets the
	 * target deallocate, as Linux punches a block device.  A zero range
	 * keeps its blocks allocated (fallocate(2)): NO_HOLE, no DEAC. */
	if (!(v->caps & VOL_CAP_WRITE_ZEROES)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	zop = VOL_WRITE_ZEROES;
	struct rmw_plan p;
	rmw_plan(start, end - start, v->block_size, &p);
	q = req_get(fs, req, n, 0);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->kind = RQ_ZERO;
	q->off = start;
	q->len = end - start;
	q->plan = p;
	q->zero_op = zop;
	q->zero_flags = (mode & FALLOC_FL_PUNCH_HOLE) ? 0 : VOL_IO_NO_HOLE;
	q->locked = true;
	if (range_lock(&n->locks, &q->lk, p.start, p.end, zero_granted))
		zero_locked(q);
	else
		fs->st_waits++;
}

void fusefs_free_reqs(struct fusefs *fs)
{
	struct list_node *l;

	while ((l = list_pop(&fs->free_reqs))) {
		struct req *q = container_of(l, struct req, link);
		req_free(q);
	}
	fs->nr_free = 0;
}
