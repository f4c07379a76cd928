/* The FUSE export: one filesystem whose root holds one regular file per
 * exported volume, served by libfuse's low-level API inside the reactor.
 * The /dev/fuse session fd is read through the reactor (reactor_read), each
 * request is decoded by fuse_session_process_buf() on the reactor thread,
 * and every handler either replies at once or submits volume I/O and
 * replies from its callback: nothing blocks the loop.
 *
 * File contents are the volume's bytes; the size is the volume's (it grows
 * when the namespace does: fusefs_file_resized).  Reads and
 * writes take any offset and length (partial blocks by read-modify-write,
 * serialized against overlapping writes), writes past the end fail with
 * ENOSPC like a full block device, fsync is a volume flush, O_SYNC/O_DSYNC
 * writes are FUA, fallocate maps to trim / write zeroes. */
#ifndef GW_FUSEFS_H
#define GW_FUSEFS_H

#include <stdbool.h>
#include <sys/types.h>

#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"

/* The largest FUSE read/write the kernel is asked to send (max_write,
 * max_read, max_pages); requests are split below the volume's max_io. */
#define FUSEFS_MAX_IO (1u << 20)

struct fusefs;

struct fusefs_file {
	const char *name; /* a plain file name, no '/' */
	struct volume *vol;
	bool read_only;
};

struct fusefs_opts {
	const char *mountpoint;
	bool allow_other;
	bool debug; /* libfuse's request trace on stderr */
	uid_t uid;
	gid_t gid;
	const struct fusefs_file *files;
	unsigned nr_files;
	/* The kernel's INIT was answered: the mount is usable. */
	void (*on_ready)(void *arg);
	/* Unmounted from outside (umount, fusermount3 -u: err 0) or the
	 * session failed (-errno): the owner calls fusefs_stop() to drain and
	 * free. */
	void (*on_gone)(void *arg, int err);
	void *arg;
};

/* From the reactor's thread.  Cleans up a stale mount of a crashed run at
 * the mountpoint (lazy unmount, logged), mounts and starts serving. */
int fusefs_start(struct reactor *r, const struct fusefs_opts *o, struct fusefs **out);

/* From the reactor's thread, while mounted: one more file (a new inode
 * number; names must be unique).  0, -EEXIST, -EINVAL or -ENOMEM. */
int fusefs_add_file(struct fusefs *fs, const struct fusefs_file *f);
/* The file disappears from lookups and listings at once (the kernel may
 * show a cached entry for up to a second; I/O through it then fails with
 * ENOENT); done(arg) runs on the reactor once the requests that use it
 * are answered, after which its volume is no longer touched.  0 or
 * -ENOENT (done is not called). */
int fusefs_remove_file(struct fusefs *fs, const char *name, void (*done)(void *arg), void *arg);

/* From the reactor's thread, after the file's volume grew: the kernel
 * drops the size it cached (fuse_lowlevel_notify_inval_inode), so stat
 * and reads see the new size at once.  0, -ENOENT or -errno (logged). */
int fusefs_file_resized(struct fusefs *fs, const char *name);
/* Stops reading requests, lets the volume I/O in flight complete and
 * reply, unmounts (lazily), frees fs, then runs done(arg) on the reactor.
 * Requests the kernel still queues afterwards fail with ENOTCONN. */
void fusefs_stop(struct fusefs *fs, void (*done)(void *arg), void *arg);

#endif
