/* The FUSE filesystem: the session on the reactor, mount and unmount, the
 * directory and attributes (see fusefs.h; the file data path is io.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse/fs_priv.h"
#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"

/* No default: -Wswitch names a state added without a name. */
static const char *state_name(enum fusefs_state s)
{
	switch (s) {
	case FS_MOUNTED: return "mounted";
	case FS_DRAINING: return "draining";
	case FS_DONE: return "done";
	}
	return "?";
}

static void fs_set_state(struct fusefs *fs, enum fusefs_state to)
{
	bool ok = (fs->state == FS_MOUNTED && to == FS_DRAINING) ||
		  (fs->state == FS_DRAINING && to == FS_DONE);

	if (!ok) {
		log_err("fuse %s: illegal state change %s -> %s", fs->mountpoint,
			state_name(fs->state), state_name(to));
		return;
	}
	log_debug("fuse %s: %s -> %s", fs->mountpoint, state_name(fs->state), state_name(to));
	fs->state = to;
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
	uint64_t size = vol_size(n->vol);
	st->st_size = (off_t)size;
	st->st_blksize = n->vol->pref_io ? n->vol->pref_io : n->vol->block_size;
	st->st_blocks = (blkcnt_t)(size / 512);
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
	fs->init_seen = true; /* ready once libfuse has accepted and answered it */
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
		if (fs->nodes[i]->gone || strcmp(fs->nodes[i]->name, name))
			continue;
		memset(&e, 0, sizeof(e));
		e.ino = fs->nodes[i]->ino;
		e.generation = 1;
		e.attr_timeout = ATTR_TIMEOUT;
		e.entry_timeout = ATTR_TIMEOUT;
		fill_attr(fs, fs->nodes[i], &e.attr);
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
		if ((uint64_t)attr->st_size != vol_size(n->vol)) {
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
	struct fhandle *h = malloc(sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->flags = fi->flags;
	h->loss_seen = vol_loss_sample(n->vol);
	fi->direct_io = !!(fi->flags & O_DIRECT);
	fi->keep_cache = 0;
	fi->noflush = 1; /* close(2) has nothing to flush here */
	fi->fh = (uint64_t)(uintptr_t)h;
	if (fuse_reply_open(req, fi) < 0) {
		free(h); /* the open failed (interrupted, gone): no RELEASE will come */
		return;
	}
	list_add_tail(&fs->handles, &h->link);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fhandle *h = fhandle_of(fi);

	(void)ino;
	if (h) {
		list_del(&h->link);
		free(h);
	}
	fuse_reply_err(req, 0);
}

/* close(2): nothing is buffered here; durability is fsync's job. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
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
			struct fnode *n = fs->nodes[k - 2];
			if (n->gone)
				continue;
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
		if (!fs->nodes[i]->gone) {
			sv.f_blocks += (vol_size(fs->nodes[i]->vol) + 4095) / 4096;
			sv.f_files++;
		}
	sv.f_files++;
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
	.read = fusefs_op_read,
	.write = fusefs_op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = fusefs_op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.fallocate = fusefs_op_fallocate,
};

/* --- the session on the reactor --- */

static void session_gone(struct fusefs *fs, int res);
static void park_watch(struct fusefs *fs);
static void budget_park(struct fusefs *fs);
static void budget_unpark(struct fusefs *fs);
static void watch_done(struct reactor_op *op, int res, uint32_t flags);

static void read_arm(struct fuse_read *rd)
{
	struct fusefs *fs = rd->fs;

	reactor_read(fs->r, &rd->op, fuse_session_fd(fs->se), rd->buf, READ_BUF_SIZE);
	rd->busy = true;
	fs->reading++;
}

uint8_t *fusefs_read_take_buf(struct fusefs *fs, const void *data, size_t len)
{
	struct fuse_read *rd = fs->decoding;
	const uint8_t *d = data;
	uint8_t *b, *nb;

	/* libfuse hands a write the bytes inside the buffer it was given;
	 * anything else (a version that copies) is not ours to keep. */
	if (!rd || d < rd->buf || len > READ_BUF_SIZE ||
	    (size_t)(d - rd->buf) > READ_BUF_SIZE - len)
		return NULL;
	/* The read gets its new buffer now, so that it never waits for one:
	 * a mount whose reads all lost theirs to writes waiting for a dead
	 * target would stop serving its other files for as long (review). */
	if (fs->nr_read_bufs >= NR_READS + FUSE_MAX_HELD_BUFS ||
	    posix_memalign((void **)&nb, 4096, READ_BUF_SIZE))
		return NULL;
	fs->nr_read_bufs++;
	fs->st_held++;
	b = rd->buf;
	rd->buf = nb;
	return b;
}

void fusefs_read_buf_put(struct fusefs *fs, uint8_t *buf)
{
	INVARIANT(fs->nr_read_bufs > NR_READS, "FUSE read buffer count out of step");
	free(buf);
	fs->nr_read_bufs--;
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
		 * is free again when this returns.  A reply made meanwhile
		 * may resume parked reads: not this one. */
		rd->processing = true;
		fs->decoding = rd;
		fuse_session_process_buf(fs->se, &fb);
		fs->decoding = NULL;
		rd->processing = false;
		if (fs->init_seen && !fs->ready_sent && fs->state == FS_MOUNTED) {
			fs->ready_sent = true;
			if (fuse_session_exited(fs->se)) {
				/* libfuse refused the kernel's INIT */
				log_err("fuse %s: the kernel's INIT was refused", fs->mountpoint);
				res = -EPROTO;
				goto gone;
			}
			if (fs->o.on_ready)
				fs->o.on_ready(fs->o.arg);
		}
		if (fs->state != FS_MOUNTED) {
			fusefs_maybe_finish(fs);
		} else if (!rd->busy) {
			if (fusefs_may_read(fs)) {
				read_arm(rd);
			} else {
				park_watch(fs); /* req_put resumes it */
				budget_park(fs);
			}
		}
		return;
	}
	if (fs->state == FS_MOUNTED && (res == -EINTR || res == -EAGAIN || res == -ENOENT)) {
		read_arm(rd); /* an interrupted request, not the end */
		return;
	}
	if (fs->state != FS_MOUNTED) {
		fusefs_maybe_finish(fs); /* our own cancel, or the end meanwhile */
		return;
	}
gone:
	session_gone(fs, res);
}

static void session_gone(struct fusefs *fs, int res)
{
	budget_unpark(fs);
	if (res == 0 || res == -ENODEV)
		log_notice("fuse %s: unmounted", fs->mountpoint);
	else
		log_err("fuse %s: reading /dev/fuse failed: %s", fs->mountpoint, strerror(-res));
	fs_set_state(fs, FS_DRAINING);
	for (unsigned i = 0; i < NR_READS; i++)
		if (fs->reads[i].busy)
			reactor_cancel(fs->r, &fs->reads[i].op);
	if (fs->watching)
		reactor_cancel(fs->r, &fs->watch_op);
	if (fs->o.on_gone)
		fs->o.on_gone(fs->o.arg, res == -ENODEV ? 0 : res); /* last: may free fs */
}

/* Past FUSE_MAX_INFLIGHT requests holding buffers, and with the budget
 * spent too, no more requests are read: the kernel keeps them queued
 * (as a libfuse server at its thread limit does), and the mount waits for
 * its own requests, which always finish.  Below the budget the count
 * alone does not stop it: a mount whose one export waits for a path must
 * go on serving its other files while memory allows. */
bool fusefs_may_read(struct fusefs *fs)
{
	struct membudget *b = membudget_global();

	return fs->nr_deferred < FUSE_MAX_DEFERRED &&
	       (fs->inflight < FUSE_MAX_INFLIGHT || membudget_used(b) < b->limit);
}

/* Parked for the budget (not for the reads held back): a waiter for it,
 * so that NBD connections stop taking and give back what they cache, and
 * a look every FUSE_BUDGET_POLL_NS.  Before, only a request answered
 * resumed it: with those in flight waiting for a path, the mount stayed
 * parked after the budget had come back. */
static void budget_park(struct fusefs *fs)
{
	if (fs->budget_wait || fs->inflight < FUSE_MAX_INFLIGHT ||
	    fs->nr_deferred >= FUSE_MAX_DEFERRED)
		return;
	fs->budget_wait = true;
	membudget_wait_begin(membudget_global());
	reactor_timer_arm(fs->r, &fs->budget_timer, FUSE_BUDGET_POLL_NS);
}

static void budget_unpark(struct fusefs *fs)
{
	if (!fs->budget_wait)
		return;
	fs->budget_wait = false;
	membudget_wait_end(membudget_global());
	reactor_timer_cancel(&fs->budget_timer);
}

static void budget_poll(struct reactor_timer *t)
{
	struct fusefs *fs = container_of(t, struct fusefs, budget_timer);

	fusefs_reads_resume(fs);
	if (fs->budget_wait)
		reactor_timer_arm(fs->r, &fs->budget_timer, FUSE_BUDGET_POLL_NS);
}

/* With every read parked nothing would notice the connection's end (an
 * abort, an unmount): a poll for its error alone (no events asked: the
 * kernel reports POLLERR/POLLHUP regardless) does. */
static void park_watch(struct fusefs *fs)
{
	if (fs->reading || fs->watching || fs->state != FS_MOUNTED)
		return;
	fs->watching = true;
	reactor_poll_fd(fs->r, &fs->watch_op, fuse_session_fd(fs->se), 0);
}

static void watch_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct fusefs *fs = container_of(op, struct fusefs, watch_op);

	(void)flags;
	fs->watching = false;
	if (fs->state != FS_MOUNTED) {
		fusefs_maybe_finish(fs);
		return;
	}
	if (res == -ECANCELED || res == -EINTR) {
		/* Reads resumed; but the read armed then may have parked
		 * again while this cancel was on its way, and found the
		 * watch still on (review). */
		park_watch(fs);
		return;
	}
	if (res >= 0 && !(res & (POLLERR | POLLHUP | POLLNVAL))) {
		park_watch(fs); /* not the end: watch on while parked */
		return;
	}
	session_gone(fs, -ENODEV);
}

void fusefs_reads_resume(struct fusefs *fs)
{
	if (fs->state != FS_MOUNTED || fusefs_may_read(fs))
		budget_unpark(fs);
	for (unsigned i = 0; i < NR_READS && fs->state == FS_MOUNTED && fusefs_may_read(fs); i++)
		if (!fs->reads[i].busy && !fs->reads[i].processing)
			read_arm(&fs->reads[i]);
	if (fs->watching && fs->reading)
		reactor_cancel(fs->r, &fs->watch_op);
}

static void fs_free(struct fusefs *fs)
{
	struct list_node *l;

	fusefs_reclaim_stop(fs);
	reactor_timer_cancel(&fs->idle_timer);
	reactor_timer_cancel(&fs->defer_timer);
	budget_unpark(fs);
	while ((l = list_pop(&fs->handles)))
		free(container_of(l, struct fhandle, link));
	fusefs_free_reqs(fs);
	for (unsigned i = 0; i < NR_READS; i++)
		free(fs->reads[i].buf);
	for (unsigned i = 0; i < fs->nr_nodes; i++)
		free(fs->nodes[i]);
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
		   "%llu writes waited for an overlapping one, %llu writes held in their "
		   "request's buffer, %llu FUA writes, %llu flushes",
		   fs->mountpoint, (unsigned long long)fs->st_ios, (unsigned long long)fs->st_rmw,
		   (unsigned long long)fs->st_waits, (unsigned long long)fs->st_held,
		   (unsigned long long)fs->st_fua, (unsigned long long)fs->st_flushes);
	fs_free(fs);
	if (done)
		done(arg);
}

void fusefs_maybe_finish(struct fusefs *fs)
{
	if (fs->state != FS_DRAINING || !fs->stop_done || fs->reading || fs->inflight ||
	    fs->nr_deferred || fs->watching || fs->finishing)
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
		if (fs->reads[i].busy)
			reactor_cancel(fs->r, &fs->reads[i].op);
	/* Reading parked: its watch only ends with the connection, which
	 * fin unmounts after the watch is gone; left on, the stop waited for
	 * ever (review). */
	if (fs->watching)
		reactor_cancel(fs->r, &fs->watch_op);
	budget_unpark(fs);
	log_notice("fuse %s: stopping (%u requests in flight)", fs->mountpoint,
		   fs->inflight + fs->nr_deferred);
	fusefs_maybe_finish(fs);
}

/* A FUSE mount whose daemon died answers ENOTCONN to everything (or
 * ECONNABORTED, when the kernel saw the connection aborted) and keeps the
 * mountpoint unusable until someone unmounts it. */
static bool stale_errno(int e) { return e == ENOTCONN || e == ECONNABORTED; }

static int clean_stale_mount(const char *mp)
{
	struct stat st;

	if (stat(mp, &st) == 0)
		goto check;
	if (!stale_errno(errno)) {
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

static int node_add(struct fusefs *fs, const struct fusefs_file *f)
{
	struct fnode *n;

	if (fs->nr_nodes == fs->cap_nodes) {
		unsigned cap = fs->cap_nodes ? fs->cap_nodes * 2 : 8;
		struct fnode **p = realloc(fs->nodes, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		fs->nodes = p;
		fs->cap_nodes = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->ino = fs->next_ino++;
	snprintf(n->name, sizeof(n->name), "%s", f->name);
	n->vol = f->vol;
	n->read_only = f->read_only || (n->vol->caps & VOL_CAP_READ_ONLY);
	range_locks_init(&n->locks);
	fs->nodes[fs->nr_nodes++] = n;
	return 0;
}

static struct fnode *node_named(struct fusefs *fs, const char *name)
{
	for (unsigned i = 0; i < fs->nr_nodes; i++)
		if (!fs->nodes[i]->gone && !strcmp(fs->nodes[i]->name, name))
			return fs->nodes[i];
	return NULL;
}

int fusefs_add_file(struct fusefs *fs, const struct fusefs_file *f)
{
	int ret;

	if (fs->state != FS_MOUNTED)
		return -ESHUTDOWN;
	if (!name_ok(f->name) || !f->vol)
		return -EINVAL;
	if (node_named(fs, f->name))
		return -EEXIST;
	if ((ret = node_add(fs, f)) < 0)
		return ret;
	/* A new directory mtime, so that cached listings are read again. */
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	log_notice("fuse %s: file %s added", fs->mountpoint, f->name);
	return 0;
}

static void node_finish(struct reactor_msg *m)
{
	struct fnode_done {
		struct reactor_msg m;
		void (*fn)(void *);
		void *arg;
	} *d = container_of(m, struct fnode_done, m);

	d->fn(d->arg);
	free(d);
}

void fusefs_node_released(struct fusefs *fs, struct fnode *n)
{
	void (*fn)(void *) = n->removed;
	void *arg = n->removed_arg;

	for (unsigned i = 0; i < fs->nr_nodes; i++)
		if (fs->nodes[i] == n) {
			memmove(&fs->nodes[i], &fs->nodes[i + 1],
				(fs->nr_nodes - i - 1) * sizeof(*fs->nodes));
			fs->nr_nodes--;
			break;
		}
	log_notice("fuse %s: file %s removed", fs->mountpoint, n->name);
	free(n);
	if (!fn)
		return;
	/* Not from inside the request's reply path: the caller may destroy
	 * the volume that request just used. */
	struct fnode_done {
		struct reactor_msg m;
		void (*fn)(void *);
		void *arg;
	} *d = malloc(sizeof(*d));
	if (!d) {
		fn(arg);
		return;
	}
	d->m.fn = node_finish;
	d->fn = fn;
	d->arg = arg;
	reactor_defer(fs->r, &d->m);
}

int fusefs_remove_file(struct fusefs *fs, const char *name, void (*done)(void *arg), void *arg)
{
	struct fnode *n = node_named(fs, name);

	if (!n)
		return -ENOENT;
	n->gone = true;
	n->removed = done;
	n->removed_arg = arg;
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	log_info("fuse %s: removing file %s (%u requests in flight)", fs->mountpoint, name,
		 n->inflight);
	if (!n->inflight)
		fusefs_node_released(fs, n);
	return 0;
}

int fusefs_file_resized(struct fusefs *fs, const char *name)
{
	struct fnode *n = node_named(fs, name);
	int ret;

	if (!n)
		return -ENOENT;
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	/* Attributes only (offset -1): the bytes the kernel caches did not
	 * change, the size it caches for ATTR_TIMEOUT did.  -ENOENT: the
	 * kernel has not looked the file up, and will see the new size. */
	ret = fuse_lowlevel_notify_inval_inode(fs->se, n->ino, -1, 0);
	if (ret < 0 && ret != -ENOENT) {
		log_warn("fuse %s: %s: telling the kernel its new size failed: %s; it sees it "
			 "within %.0f s",
			 fs->mountpoint, name, strerror(-ret), ATTR_TIMEOUT);
		return ret;
	}
	log_info("fuse %s: %s is now %llu bytes", fs->mountpoint, name,
		 (unsigned long long)vol_size(n->vol));
	return 0;
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
	reactor_timer_init(&fs->idle_timer, fusefs_idle);
	list_init(&fs->deferred);
	reactor_timer_init(&fs->defer_timer, fusefs_deferred_fire);
	reactor_timer_init(&fs->budget_timer, budget_poll);
	fs->watch_op.fn = watch_done;
	list_init(&fs->handles);
	for (unsigned i = 0; i < NR_READS; i++) {
		fs->reads[i].fs = fs;
		fs->reads[i].op.fn = session_read_done;
	}
	fs->fin_msg.fn = fin;
	clock_gettime(CLOCK_REALTIME, &fs->mtime);
	fs->mountpoint = realpath(o->mountpoint, NULL);
	if (!fs->mountpoint && stale_errno(errno)) {
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
	for (unsigned i = 0; i < NR_READS; i++) {
		if (posix_memalign((void **)&fs->reads[i].buf, 4096, READ_BUF_SIZE)) {
			fs->reads[i].buf = NULL;
			goto fail;
		}
		fs->nr_read_bufs++;
	}
	fs->next_ino = ROOT_INO + 1;
	for (unsigned i = 0; i < o->nr_files; i++)
		if ((ret = node_add(fs, &o->files[i])) < 0)
			goto fail;
	if ((ret = fusefs_reclaim_start(fs)) < 0)
		goto fail;

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
