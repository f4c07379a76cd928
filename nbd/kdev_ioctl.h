/* /dev/nbdN through the old ioctl interface (kernels without the "nbd"
 * generic netlink family, before 4.12), as nbd-client does it: the
 * sockets go in with NBD_SET_SOCK and a thread of its own blocks in
 * NBD_DO_IT for as long as the device is connected.
 *
 * That thread only waits: the kernel serves the device from its own
 * receive workers and our end of each socketpair stays on the reactor, as
 * with netlink.  It never completes I/O and touches no reactor state; its
 * last act is to post a message to the reactor.
 *
 * What the interface cannot do: the device dies with the process that
 * holds NBD_DO_IT, so there is no reattach after a gateway restart (that
 * is netlink's RECONFIGURE), and the size is fixed while connected (no
 * live resize). */
#ifndef NBD_KDEV_IOCTL_H
#define NBD_KDEV_IOCTL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gateway/base/reactor.h"

struct kdev_doit {
	int fd; /* /dev/nbdN, open from setup until the owner frees it */
	int index;
	struct reactor *r;
	struct reactor_msg msg; /* posted once NBD_DO_IT has returned */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool exited; /* under mu */
	int err; /* NBD_DO_IT's result, valid once exited */
	bool started; /* the thread runs: its message will come */
};

/* The first /dev/nbdN from N = from on under sysblock with no size and no
 * pid (not connected), or -ENODEV. */
int kdev_ioctl_find_free(const char *sysblock, int from);

/* Whether sysblock/nbdN is connected (a size or a pid), to anybody. */
bool kdev_ioctl_busy(const char *sysblock, int index);

/* Refuses a busy device, opens dev_dir/nbdN into t->fd and configures it: size, block size,
 * flags, the sockets.  *taken: how many of kfds the kernel accepted (a
 * kernel before 4.10 takes one).  -errno, logged, on failure (t->fd may
 * be open: the owner closes it). */
int kdev_ioctl_setup(struct kdev_doit *t, const char *sysblock, const char *dev_dir, uint64_t size,
		     uint32_t block_size, uint64_t flags, const int *kfds, unsigned n,
		     unsigned *taken);

/* After a failed setup, before NBD_DO_IT: the kernel lets go of the
 * sockets it took (NBD_CLEAR_SOCK). */
void kdev_ioctl_release(struct kdev_doit *t);

/* Starts the NBD_DO_IT thread (t->started) and waits (bounded) for the
 * kernel to size the device, so that the device is usable once attach
 * reports it.  -errno when the thread did not start or NBD_DO_IT returned
 * at once. */
int kdev_doit_start(struct kdev_doit *t);

/* From a helper thread: NBD_DISCONNECT (the kernel sends NBD_CMD_DISC on
 * the sockets), a bounded wait for NBD_DO_IT to return, NBD_CLEAR_SOCK to
 * force it if it did not; all logged.  0, or -ETIMEDOUT when NBD_DO_IT
 * still blocks (the owner must keep t until its message arrives). */
int kdev_doit_stop(struct kdev_doit *t, unsigned timeout_ms);

void kdev_doit_init(struct kdev_doit *t, struct reactor *r, void (*fn)(struct reactor_msg *));
void kdev_doit_fini(struct kdev_doit *t);

#endif
