/* The FUSE filesystem: session plumbing on the reactor, the directory, and
 * the file I/O requests (see fusefs.h). */
#define FUSE_USE_VERSION 34
#include "fuse/fusefs.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuse/rmw.h"
#include "gateway/log.h"

#define ROOT_INO FUSE_ROOT_ID
#define ATTR_TIMEOUT 1.0
/* Volume I/Os one request keeps in flight when it spans several max_io. */
#define REQ_SLOTS 4
#define FREE_REQS_MAX 64
/* A whole request plus the header libfuse and the kernel put before it. */
#define READ_BUF_SIZE (FUSEFS_MAX_IO + 64 * 1024)
/* Reads of /dev/fuse kept armed: requests the kernel queued together are
 * decoded in one batch, so their volume I/O overlaps. */
#define NR_READS 4

enum fusefs_state {
	FS_MOUNTED, /* serving */
	FS_DRAINING, /* no more reads; waiting for requests in flight */
	FS_DONE,
};

static const char *const state_names[] = {
	[FS_MOUNTED] = "mounted",
	[FS_DRAINING] = "draining",
	[FS_DONE] = "done",
};

/* One exported file.  Inode numbers are never reused, so that files can
 * be added and removed at runtime behind the kernel's cached entries. */
struct fnode {
	uint64_t ino;
	char name[NAME_MAX + 1];
	struct volume *vol;
	bool read_only;
	struct range_locks locks;
};

struct fusefs;

struct fuse_read {
	struct reactor_op op;
	struct fusefs *fs;
	uint8_t *buf;
	bool busy;
};

struct fusefs {
	struct reactor *r;
	struct fuse_session *se;
	char *mountpoint;
	struct fusefs_opts o;
	enum fusefs_state state;
	struct fnode *nodes;
	unsigned nr_nodes;
	struct timespec mtime;
	struct fuse_read reads[NR_READS];
	unsigned reading; /* reads armed */
	unsigned inflight; /* requests that hold volume I/O */
	/* counters, logged when stopping (the functional tests read them) */
	uint64_t st_rmw, st_waits, st_ios, st_fua, st_flushes;
	struct list_node free_reqs;
	unsigned nr_free;
	void (*stop_done)(void *);
	void *stop_arg;
	bool finishing;
	struct reactor_msg fin_msg;
};

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
	enum vol_op zero_op; /* RQ_ZERO: for the whole blocks */
	struct rmw_plan plan;
	struct range_lock lk;
	bool locked;
	uint8_t *buf; /* the aligned span [plan.start, plan.end) */
	size_t cap;
	uint8_t *edge; /* head block, tail block */
	size_t edge_cap;
	struct seg segs[3];
	unsigned nsegs, seg_i;
	uint64_t seg_pos;
	unsigned active;
	int err;
	void (*phase_done)(struct req *q);
	struct slot slots[REQ_SLOTS];
};

static void fs_set_state(struct fusefs *fs, enum fusefs_state to)
{
	bool ok = (fs->state == FS_MOUNTED && to == FS_DRAINING) ||
		  (fs->state == FS_DRAINING && to == FS_DONE);

	if (!ok) {
		log_err("fuse %s: illegal state change %s -> %s", fs->mountpoint,
			state_names[fs->state], state_names[to]);
		return;
	}
	log_debug("fuse %s: %s -> %s", fs->mountpoint, state_names[fs->state], state_names[to]);
	fs->state = to;
}

static struct fnode *node_of(struct fusefs *fs, fuse_ino_t ino)
{
	if (ino < ROOT_INO + 1 || ino - ROOT_INO - 1 >= fs->nr_nodes)
		return NULL;
	return &fs->nodes[ino - ROOT_INO - 1];
}

static void fill_attr(struct fusefs *fs, struct fnode *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_uid = fs->o.uid;
	st->st_gid = fs->o.gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	if (!n) {
		st->st_ino = ROOT_INO;
		st->st_mode = S_IFDIR | 0555; /* the file set is configuration */
		st->st_nlink = 2;
		st->st_blksize = 4096;
		return;
	}
	st->st_ino = n->ino;
	st->st_mode = S_IFREG | (n->read_only ? 0400 : 0600);
	st->st_nlink = 1;
	st->st_size = (off_t)n->vol->size;
	st->st_blksize = n->vol->pref_io ? n->vol->pref_io : n->vol->block_size;
	st->st_blocks = (blkcnt_t)(n->vol->size / 512);
}

/* --- requests and their volume I/O --- */

static void maybe_finish(struct fusefs *fs);

static int buf_reserve(uint8_t **p, size_t *cap, size_t need)
{
	void *nb;

	if (*cap >= need)
		return 0;
	if (posix_memalign(&nb, 4096, need))
		return -ENOMEM;
	free(*p);
	*p = nb;
	*cap = need;
	return 0;
}

static struct req *req_get(struct fusefs *fs, fuse_req_t freq, struct fnode *n, size_t span)
{
	struct list_node *l = list_pop(&fs->free_reqs);
	struct req *q;

	if (l) {
		fs->nr_free--;
		q = container_of(l, struct req, link);
	} else {
		q = calloc(1, sizeof(*q));
		if (!q)
			return NULL;
		list_init(&q->link);
	}
	if (buf_reserve(&q->buf, &q->cap, span) < 0 ||
	    buf_reserve(&q->edge, &q->edge_cap, 2 * (size_t)n->vol->block_size) < 0) {
		free(q->buf);
		free(q->edge);
		free(q);
		return NULL;
	}
	q->fs = fs;
	q->n = n;
	q->req = freq;
	q->wflags = 0;
	q->flush_after = false;
	q->locked = false;
	q->nsegs = q->seg_i = 0;
	q->seg_pos = 0;
	q->active = 0;
	q->err = 0;
	q->phase_done = NULL;
	fs->inflight++;
	return q;
}

/* After the reply: the request is gone, its memory reused. */
static void req_put(struct req *q)
{
	struct fusefs *fs = q->fs;

	if (q->locked) {
		q->locked = false;
		range_unlock(&q->n->locks, &q->lk);
	}
	if (fs->nr_free < FREE_REQS_MAX && q->cap <= 2 * FUSEFS_MAX_IO) {
		list_add_head(&fs->free_reqs, &q->link);
		fs->nr_free++;
	} else {
		free(q->buf);
		free(q->edge);
		free(q);
	}
	fs->inflight--;
	maybe_finish(fs);
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
	uint64_t m = v->max_io ? v->max_io : FUSEFS_MAX_IO;

	m &= ~(uint64_t)(v->block_size - 1);
	return m ? m : v->block_size;
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
	uint32_t bs = q->n->vol->block_size;
	uint64_t end = q->off + q->len;

	if (q->plan.head_partial) {
		memcpy(q->buf, q->edge, q->off - q->plan.start);
		if (q->plan.end - q->plan.start == bs && end < q->plan.end)
			memcpy(q->buf + (end - q->plan.start), q->edge + (end - q->plan.start),
			       q->plan.end - end);
	}
	if (q->plan.tail_partial) {
		uint64_t t = q->plan.end - bs;
		memcpy(q->buf + (end - q->plan.start), q->edge + bs + (end - t), q->plan.end - end);
	}
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

/* fallocate: zero range and punch hole */

static void zero_done(struct req *q)
{
	fuse_reply_err(q->req, 0);
	req_put(q);
}

static void zero_merge(struct req *q)
{
	uint32_t bs = q->n->vol->block_size;
	uint64_t end = q->off + q->len;

	q->nsegs = 0;
	if (q->plan.head_partial) {
		uint64_t e = end < q->plan.start + bs ? end : q->plan.start + bs;
		memset(q->edge + (q->off - q->plan.start), 0, e - q->off);
		add_seg(q, VOL_WRITE, 0, q->plan.start, bs, q->edge);
	}
	if (q->plan.tail_partial) {
		uint64_t t = q->plan.end - bs;
		memset(q->edge + bs, 0, end - t);
		add_seg(q, VOL_WRITE, 0, t, bs, q->edge + bs);
	}
	if (q->plan.inner_end > q->plan.inner_start)
		add_seg(q, q->zero_op, 0, q->plan.inner_start,
			q->plan.inner_end - q->plan.inner_start, NULL);
	run_phase(q, zero_done);
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

static void fsync_done(struct req *q)
{
	fuse_reply_err(q->req, 0);
	req_put(q);
}

/* --- the low-level operations --- */

static void op_init(void *ud, struct fuse_conn_info *c)
{
	struct fusefs *fs = ud;

	c->max_write = FUSEFS_MAX_IO;
	c->max_read = FUSEFS_MAX_IO; /* must repeat the max_read mount option */
	if (c->max_readahead > FUSEFS_MAX_IO)
		c->max_readahead = FUSEFS_MAX_IO;
	/* The page cache sees every write (no writeback cache) and is
	 * dropped at each open (keep_cache 0): another path (NBD) to the same
	 * namespace stays visible to the next open. */
	c->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
		     FUSE_CAP_SPLICE_MOVE | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_POSIX_LOCKS |
		     FUSE_CAP_FLOCK_LOCKS);
	if (c->capable & FUSE_CAP_ASYNC_DIO)
		c->want |= FUSE_CAP_ASYNC_DIO;
	if (c->capable & FUSE_CAP_ASYNC_READ)
		c->want |= FUSE_CAP_ASYNC_READ;
	log_info("fuse %s: kernel protocol %u.%u, max_write %u, max_readahead %u",
		 fs->mountpoint, c->proto_major, c->proto_minor, c->max_write, c->max_readahead);
	if (fs->o.on_ready)
		fs->o.on_ready(fs->o.arg);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fuse_entry_param e;

	if (parent != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	for (unsigned i = 0; i < fs->nr_nodes; i++) {
		if (strcmp(fs->nodes[i].name, name))
			continue;
		memset(&e, 0, sizeof(e));
		e.ino = fs->nodes[i].ino;
		e.generation = 1;
		e.attr_timeout = ATTR_TIMEOUT;
		e.entry_timeout = ATTR_TIMEOUT;
		fill_attr(fs, &fs->nodes[i], &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}
	fuse_reply_err(req, ENOENT);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct stat st;

	(void)fi;
	if (!n && ino != ROOT_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(fs, n, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

/* The size is the namespace's: truncating to it is a no-op, to anything
 * else impossible.  Owner and mode come from the configuration. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct stat st;

	(void)fi;
	if (!n && ino != ROOT_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!n) {
			fuse_reply_err(req, EISDIR);
			return;
		}
		if ((uint64_t)attr->st_size != n->vol->size) {
			fuse_reply_err(req, n->read_only ? EROFS : EINVAL);
			return;
		}
	}
	/* Times are synthetic: accepted and not kept, so touch(1) works. */
	fill_attr(fs, n, &st);
	fuse_reply_attr(req, &st, ATTR_TIMEOUT);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);

	if (!n) {
		fuse_reply_err(req, ino == ROOT_INO ? EISDIR : ENOENT);
		return;
	}
	if (n->read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->direct_io = !!(fi->flags & O_DIRECT);
	fi->keep_cache = 0;
	fi->noflush = 1; /* close(2) has nothing to flush here */
	fi->fh = (uint64_t)(unsigned)fi->flags;
	fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

/* close(2): nothing is buffered here; durability is fsync's job. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
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
	if ((uint64_t)off >= n->vol->size || !size) {
		fuse_reply_buf(req, NULL, 0); /* end of file */
		return;
	}
	uint64_t len = size;
	if (len > n->vol->size - (uint64_t)off)
		len = n->vol->size - (uint64_t)off;
	struct rmw_plan p;
	rmw_plan((uint64_t)off, len, n->vol->block_size, &p);
	q = req_get(fs, req, n, p.end - p.start);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->kind = RQ_READ;
	q->off = (uint64_t)off;
	q->len = len;
	q->plan = p;
	/* No lock: like a block device, a read racing a write may see either
	 * side of it, but never a torn partial-block update of its own. */
	add_seg(q, VOL_READ, 0, p.start, p.end - p.start, q->buf);
	run_phase(q, read_done);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
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
	if ((uint64_t)off >= n->vol->size) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	uint64_t len = size;
	if (len > n->vol->size - (uint64_t)off)
		len = n->vol->size - (uint64_t)off;
	struct rmw_plan p;
	rmw_plan((uint64_t)off, len, n->vol->block_size, &p);
	q = req_get(fs, req, n, p.end - p.start);
	if (!q) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	q->kind = RQ_WRITE;
	q->off = (uint64_t)off;
	q->len = len;
	q->plan = p;
	/* The request buffer is reused for the next request as soon as this
	 * returns: the data moves into the request now. */
	memcpy(q->buf + (q->off - p.start), buf, len);
	if ((fi->flags | (int)fi->fh) & (O_DSYNC | O_SYNC)) {
		if (n->vol->caps & VOL_CAP_FUA)
			q->wflags |= VOL_IO_FUA;
		else if (n->vol->caps & VOL_CAP_FLUSH)
			q->flush_after = true;
	}
	q->locked = true;
	if (range_lock(&n->locks, &q->lk, p.start, p.end, write_granted))
		write_locked(q);
	else
		fs->st_waits++;
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct fnode *n = node_of(fs, ino);
	struct req *q;

	(void)datasync;
	(void)fi;
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
	add_seg(q, VOL_FLUSH, 0, 0, 0, NULL);
	run_phase(q, fsync_done);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t length,
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
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > v->size) {
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
	if (end > v->size)
		end = v->size;
	if (start >= end) {
		fuse_reply_err(req, 0);
		return;
	}
	/* A hole must read back as zeroes: deallocate only where the volume
	 * says deallocated blocks read as zeroes, else write zeroes (which
	 * the target may still implement by deallocating). */
	if ((mode & FALLOC_FL_PUNCH_HOLE) && (v->caps & VOL_CAP_TRIM) &&
	    (v->caps & VOL_CAP_FAST_ZERO))
		zop = VOL_TRIM;
	else if (v->caps & VOL_CAP_WRITE_ZEROES)
		zop = VOL_WRITE_ZEROES;
	else {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
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
	q->locked = true;
	if (range_lock(&n->locks, &q->lk, p.start, p.end, zero_granted))
		zero_locked(q);
	else
		fs->st_waits++;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fusefs *fs = fuse_req_userdata(req);
	char *buf;
	size_t used = 0;

	(void)fi;
	if (ino != ROOT_INO) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Entry k (0 ".", 1 "..", then the files) carries offset k + 1. */
	for (off_t k = off; k < (off_t)fs->nr_nodes + 2; k++) {
		struct stat st = { 0 };
		const char *name;
		if (k < 2) {
			name = k ? ".." : ".";
			st.st_ino = ROOT_INO;
			st.st_mode = S_IFDIR;
		} else {
			struct fnode *n = &fs->nodes[k - 2];
			name = n->name;
			st.st_ino = n->ino;
			st.st_mode = S_IFREG;
		}
		size_t need = fuse_add_direntry(req, buf + used, size - used, name, &st, k + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fusefs *fs = fuse_req_userdata(req);
	struct statvfs sv = { 0 };

	(void)ino;
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	for (unsigned i = 0; i < fs->nr_nodes; i++)
		sv.f_blocks += (fs->nodes[i].vol->size + 4095) / 4096;
	sv.f_files = fs->nr_nodes + 1;
	sv.f_namemax = NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* The root directory's contents are configuration, not user data. */
static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EPERM);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	fuse_reply_err(req, EPERM);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	fuse_reply_err(req, EPERM);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	fuse_reply_err(req, EPERM);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	fuse_reply_err(req, EPERM);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	fuse_reply_err(req, EPERM);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	fuse_reply_err(req, EPERM);
}

static const struct fuse_lowlevel_ops fusefs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.create = op_create,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.fallocate = op_fallocate,
};

/* --- the session on the reactor --- */

static void read_arm(struct fuse_read *rd)
{
	struct fusefs *fs = rd->fs;
	struct io_uring_sqe *sqe = reactor_sqe(fs->r, &rd->op);

	io_uring_prep_read(sqe, fuse_session_fd(fs->se), rd->buf, READ_BUF_SIZE, 0);
	rd->busy = true;
	fs->reading++;
}

static void session_read_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct fuse_read *rd = container_of(op, struct fuse_read, op);
	struct fusefs *fs = rd->fs;

	(void)flags;
	rd->busy = false;
	fs->reading--;
	if (res > 0) {
		struct fuse_buf fb = { .size = (size_t)res, .mem = rd->buf };
		/* Handlers copy what they keep (write data), so the buffer
		 * is free again when this returns. */
		fuse_session_process_buf(fs->se, &fb);
		if (fs->state == FS_MOUNTED)
			read_arm(rd);
		else
			maybe_finish(fs);
		return;
	}
	if (fs->state == FS_MOUNTED && (res == -EINTR || res == -EAGAIN || res == -ENOENT)) {
		read_arm(rd); /* an interrupted request, not the end */
		return;
	}
	if (fs->state != FS_MOUNTED) {
		maybe_finish(fs); /* our own cancel, or the end meanwhile */
		return;
	}
	if (res == 0 || res == -ENODEV)
		log_notice("fuse %s: unmounted", fs->mountpoint);
	else
		log_err("fuse %s: reading /dev/fuse failed: %s", fs->mountpoint, strerror(-res));
	fs_set_state(fs, FS_DRAINING);
	for (unsigned i = 0; i < NR_READS; i++)
		if (fs->reads[i].busy) {
			struct io_uring_sqe *sqe = reactor_sqe(fs->r, NULL);
			io_uring_prep_cancel(sqe, &fs->reads[i].op, 0);
		}
	if (fs->o.on_gone)
		fs->o.on_gone(fs->o.arg); /* last: it may stop and free fs */
}

static void fs_free(struct fusefs *fs)
{
	struct list_node *l;

	while ((l = list_pop(&fs->free_reqs))) {
		struct req *q = container_of(l, struct req, link);
		free(q->buf);
		free(q->edge);
		free(q);
	}
	for (unsigned i = 0; i < NR_READS; i++)
		free(fs->reads[i].buf);
	free(fs->nodes);
	free(fs->mountpoint);
	free(fs);
}

static void fin(struct reactor_msg *m)
{
	struct fusefs *fs = container_of(m, struct fusefs, fin_msg);
	void (*done)(void *) = fs->stop_done;
	void *arg = fs->stop_arg;

	fs_set_state(fs, FS_DONE);
	/* Lazy: an open file (a loop device on it) must not keep us here;
	 * closing the fd then aborts the connection for such users. */
	fuse_session_unmount(fs->se);
	fuse_session_destroy(fs->se);
	log_notice("fuse %s: stopped; %llu volume I/Os, %llu partial-block edges read, "
		   "%llu writes waited for an overlapping one, %llu FUA writes, %llu flushes",
		   fs->mountpoint, (unsigned long long)fs->st_ios, (unsigned long long)fs->st_rmw,
		   (unsigned long long)fs->st_waits, (unsigned long long)fs->st_fua,
		   (unsigned long long)fs->st_flushes);
	fs_free(fs);
	if (done)
		done(arg);
}

static void maybe_finish(struct fusefs *fs)
{
	if (fs->state != FS_DRAINING || !fs->stop_done || fs->reading || fs->inflight ||
	    fs->finishing)
		return;
	fs->finishing = true;
	reactor_defer(fs->r, &fs->fin_msg);
}

void fusefs_stop(struct fusefs *fs, void (*done)(void *arg), void *arg)
{
	if (fs->stop_done)
		return; /* already stopping */
	fs->stop_done = done;
	fs->stop_arg = arg;
	if (fs->state == FS_MOUNTED)
		fs_set_state(fs, FS_DRAINING);
	for (unsigned i = 0; i < NR_READS; i++)
		if (fs->reads[i].busy) {
			struct io_uring_sqe *sqe = reactor_sqe(fs->r, NULL);
			io_uring_prep_cancel(sqe, &fs->reads[i].op, 0);
		}
	log_notice("fuse %s: stopping (%u requests in flight)", fs->mountpoint, fs->inflight);
	maybe_finish(fs);
}

/* A FUSE mount whose daemon died answers ENOTCONN to everything and keeps
 * the mountpoint unusable until someone unmounts it. */
static int clean_stale_mount(const char *mp)
{
	struct stat st;

	if (stat(mp, &st) == 0)
		goto check;
	if (errno != ENOTCONN) {
		log_err("fuse: mountpoint %s: %s", mp, strerror(errno));
		return -errno;
	}
	log_notice("fuse: %s is a stale mount of a crashed run (Transport endpoint is not "
		   "connected): unmounting it lazily",
		   mp);
	if (umount2(mp, MNT_DETACH) < 0) {
		int e = errno;
		log_err("fuse: cannot unmount the stale mount at %s: %s", mp, strerror(e));
		return -e;
	}
	if (stat(mp, &st) < 0) {
		log_err("fuse: mountpoint %s: %s", mp, strerror(errno));
		return -errno;
	}
check:
	if (!S_ISDIR(st.st_mode)) {
		log_err("fuse: mountpoint %s is not a directory", mp);
		return -ENOTDIR;
	}
	return 0;
}

static bool name_ok(const char *name)
{
	return name && *name && strlen(name) <= NAME_MAX && !strchr(name, '/') &&
	       strcmp(name, ".") && strcmp(name, "..");
}

int fusefs_start(struct reactor *r, const struct fusefs_opts *o, struct fusefs **out)
{
	struct fusefs *fs;
	char mopts[256];
	int ret = -ENOMEM;

	if (!o->mountpoint || !o->nr_files)
		return -EINVAL;
	for (unsigned i = 0; i < o->nr_files; i++) {
		if (!name_ok(o->files[i].name)) {
			log_err("fuse: bad file name '%s'", o->files[i].name ? o->files[i].name : "");
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(o->files[i].name, o->files[j].name)) {
				log_err("fuse: file name '%s' used twice", o->files[i].name);
				return -EINVAL;
			}
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->r = r;
	fs->o = *o;
	fs->o.files = NULL;
	list_init(&fs->free_reqs);
	for (unsigned i = 0; i < NR_READS; i++) {
		fs->reads[i].fs = fs;
		fs->reads[i].op.fn = session_read_done;
	}
	fs->fin_msg.fn = fin;
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	fs->mountpoint = realpath(o->mountpoint, NULL);
	if (!fs->mountpoint && errno == ENOTCONN) {
		/* realpath fails on a stale mount too: clean it up first */
		if ((ret = clean_stale_mount(o->mountpoint)) < 0)
			goto fail;
		fs->mountpoint = realpath(o->mountpoint, NULL);
	}
	if (!fs->mountpoint) {
		ret = -errno;
		log_err("fuse: mountpoint %s: %s", o->mountpoint, strerror(errno));
		goto fail;
	}
	if ((ret = clean_stale_mount(fs->mountpoint)) < 0)
		goto fail;
	ret = -ENOMEM;
	fs->nodes = calloc(o->nr_files, sizeof(*fs->nodes));
	if (!fs->nodes)
		goto fail;
	for (unsigned i = 0; i < NR_READS; i++)
		if (posix_memalign((void **)&fs->reads[i].buf, 4096, READ_BUF_SIZE))
			goto fail;
	fs->nr_nodes = o->nr_files;
	for (unsigned i = 0; i < o->nr_files; i++) {
		struct fnode *n = &fs->nodes[i];
		n->ino = ROOT_INO + 1 + i;
		snprintf(n->name, sizeof(n->name), "%s", o->files[i].name);
		n->vol = o->files[i].vol;
		n->read_only = o->files[i].read_only || (n->vol->caps & VOL_CAP_READ_ONLY);
		range_locks_init(&n->locks);
	}

	snprintf(mopts, sizeof(mopts),
		 "fsname=nvmf-gateway,subtype=nvmf-gateway,default_permissions,max_read=%u%s",
		 FUSEFS_MAX_IO, o->allow_other ? ",allow_other" : "");
	char *argv[] = { "nvmf-gateway", "-o", mopts, o->debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);
	fs->se = fuse_session_new(&args, &fusefs_ops, sizeof(fusefs_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		log_err("fuse: cannot create the session (options %s)", mopts);
		ret = -EINVAL;
		goto fail;
	}
	if (fuse_session_mount(fs->se, fs->mountpoint) != 0) {
		log_err("fuse: cannot mount on %s (is /dev/fuse there, and are we allowed?)",
			fs->mountpoint);
		fuse_session_destroy(fs->se);
		ret = -EIO;
		goto fail;
	}
	fs->state = FS_MOUNTED;
	log_notice("fuse %s: mounted, %u file%s", fs->mountpoint, fs->nr_nodes,
		   fs->nr_nodes == 1 ? "" : "s");
	for (unsigned i = 0; i < NR_READS; i++)
		read_arm(&fs->reads[i]);
	*out = fs;
	return 0;
fail:
	fs_free(fs);
	return ret;
}
