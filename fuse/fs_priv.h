/* Inside the FUSE export: the filesystem object shared by the session and
 * directory code (fs.c) and the file I/O requests (io.c). */
#ifndef GW_FUSE_FS_PRIV_H
#define GW_FUSE_FS_PRIV_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdint.h>
#include <time.h>

#include "fuse/fusefs.h"
#include "fuse/rmw.h"
#include "gateway/base/list.h"

#define ROOT_INO FUSE_ROOT_ID
#define ATTR_TIMEOUT 1.0
/* Volume I/Os one request keeps in flight when it spans several max_io. */
#define REQ_SLOTS 4
#define FREE_REQS_MAX 64
/* Requests holding data buffers at once (each up to FUSEFS_MAX_IO plus
 * two edge blocks) past which, when the buffer budget is spent too,
 * /dev/fuse is not read until one is answered (fusefs_may_read).  The
 * kernel bounds only background requests (max_background); a caller per
 * blocked thread is not bounded, and 192 threads of 1 MiB direct reads
 * took 193 MiB past an 8 MiB budget. */
#define FUSE_MAX_INFLIGHT 64
/* Cached requests go back (buffers to the budget) after this long with
 * no new request, as an idle NBD connection's do, and at once when
 * someone waits for the budget. */
#define FUSE_IDLE_NS (500 * NSEC_PER_MSEC)
/* Reads held back without a buffer while their target's I/O waiting for a
 * path holds its share of the budget (io.c read_defer) are looked at this
 * often; past this many held back, /dev/fuse is not read (each is a
 * request of about 2 KiB, outside the budget). */
#define FUSE_DEFER_POLL_NS (100 * NSEC_PER_MSEC)
#define FUSE_MAX_DEFERRED 256
/* A write whose target's waiting I/O holds its share of the budget keeps
 * the /dev/fuse read buffer its data came in (io.c write_defer), outside
 * the budget, and that read goes on with a new one: at most this many
 * such buffers per mount, past which such writes take budget buffers as
 * before: the kernel sends at most its background requests of them
 * (max_background, 12 by default) and one synchronous writer per file,
 * and past FUSE_MAX_INFLIGHT with the budget spent nothing is read. */
#define FUSE_MAX_HELD_BUFS 8
/* Reading parked with the budget spent looks again this often (the
 * buffers that free it come back on other threads). */
#define FUSE_BUDGET_POLL_NS (5 * NSEC_PER_MSEC)
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

/* One exported file.  Inode numbers are never reused, so that files can
 * be added and removed at runtime behind the kernel's cached entries. */
struct fnode {
	uint64_t ino;
	char name[NAME_MAX + 1];
	struct volume *vol;
	bool read_only;
	struct range_locks locks;
	/* Removed: no longer looked up or listed; freed (and removed() run)
	 * once the requests that hold it are answered. */
	bool gone;
	unsigned inflight;
	void (*removed)(void *arg);
	void *removed_arg;
};

/* One open(2) of a file (fuse_file_info.fh): its flags, and its cursor
 * of write losses reported (vol_note_loss), so that each open file hears
 * of a loss on its own fsync as it would of a writeback error. */
struct fhandle {
	struct list_node link; /* fusefs.handles: freed at the end if no RELEASE came */
	int flags;
	uint64_t loss_seen;
};

static inline struct fhandle *fhandle_of(const struct fuse_file_info *fi)
{
	return (struct fhandle *)(uintptr_t)fi->fh;
}

struct fusefs;

struct fuse_read {
	struct reactor_op op;
	struct fusefs *fs;
	uint8_t *buf; /* a new one when the last went with a held write */
	bool busy;
	bool processing; /* its buffer is being decoded: not to be armed */
};

struct fusefs {
	struct reactor *r;
	struct fuse_session *se;
	char *mountpoint;
	struct fusefs_opts o;
	enum fusefs_state state;
	struct fnode **nodes; /* each allocated alone: range locks point into it */
	unsigned nr_nodes, cap_nodes;
	uint64_t next_ino;
	struct timespec mtime;
	struct fuse_read reads[NR_READS];
	unsigned reading; /* reads armed */
	struct fuse_read *decoding; /* the read whose request is being decoded */
	unsigned nr_read_bufs; /* read buffers allocated: the reads' and the held writes' */
	struct reactor_op watch_op; /* the connection's end, while reads are parked */
	bool watching;
	bool init_seen, ready_sent;
	unsigned inflight; /* requests that hold volume I/O */
	struct list_node deferred; /* reads held back without a buffer (io.c) */
	unsigned nr_deferred;
	struct reactor_timer defer_timer;
	/* Reading parked with the budget spent: counted in its waiters, as a
	 * waiting NBD connection is, so that the others yield. */
	bool budget_wait;
	struct reactor_timer budget_timer;
	struct fusefs_reclaim *reclaim; /* io.c: a budget waiter empties the cache */
	/* counters, logged when stopping (the functional tests read them) */
	uint64_t st_rmw, st_waits, st_ios, st_fua, st_flushes, st_held;
	struct list_node free_reqs;
	struct reactor_timer idle_timer; /* gives free_reqs back when idle */
	uint64_t req_used_ns; /* a request last took a buffer (reactor_now_ns) */
	struct list_node handles; /* struct fhandle of the open files */
	unsigned nr_free;
	void (*stop_done)(void *);
	void *stop_arg;
	bool finishing;
	struct reactor_msg fin_msg;
};

/* A handful of files: a scan is cheaper than keeping an index. */
static inline struct fnode *node_of(struct fusefs *fs, fuse_ino_t ino)
{
	for (unsigned i = 0; i < fs->nr_nodes; i++)
		if (fs->nodes[i]->ino == ino && !fs->nodes[i]->gone)
			return fs->nodes[i];
	return NULL;
}

/* fs.c: a removed node's last request is answered. */
void fusefs_node_released(struct fusefs *fs, struct fnode *n);

/* fs.c: whether /dev/fuse is read now (FUSE_MAX_INFLIGHT, the budget);
 * reads left parked are armed again when a request is answered. */
bool fusefs_may_read(struct fusefs *fs);
void fusefs_reads_resume(struct fusefs *fs);
/* fs.c: the buffer of the read being decoded, which holds the request's
 * data, is the caller's from now on, to be given back with
 * fusefs_read_buf_put, and the read has a new one.  NULL (nothing taken):
 * the data is not in it, FUSE_MAX_HELD_BUFS are out, or no memory. */
uint8_t *fusefs_read_take_buf(struct fusefs *fs, const void *data, size_t len);
void fusefs_read_buf_put(struct fusefs *fs, uint8_t *buf);

/* fs.c: frees fs once it is draining and nothing is in flight. */
void fusefs_maybe_finish(struct fusefs *fs);

/* io.c: the file data operations, and the request pool's end. */
void fusefs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void fusefs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi);
void fusefs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fusefs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t length,
			 struct fuse_file_info *fi);
void fusefs_free_reqs(struct fusefs *fs);
void fusefs_idle(struct reactor_timer *t);
void fusefs_deferred_fire(struct reactor_timer *t);
int fusefs_reclaim_start(struct fusefs *fs);
void fusefs_reclaim_stop(struct fusefs *fs);

#endif
