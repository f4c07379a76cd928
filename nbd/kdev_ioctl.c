/* /dev/nbdN through the ioctl interface; see kdev_ioctl.h. */
#include "nbd/kdev_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/nbd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/thread_stack.h"

/* How long attach waits for the kernel to size the device once NBD_DO_IT
 * runs (it does so before it blocks; TCG guests are slow). */
#define DOIT_SIZE_WAIT_MS 10000
#define DOIT_POLL_MS 10

void kdev_doit_init(struct kdev_doit *t, struct reactor *r, void (*fn)(struct reactor_msg *))
{
	pthread_condattr_t ca;

	t->fd = -1;
	t->index = -1;
	t->r = r;
	t->msg.fn = fn;
	t->exited = false;
	t->started = false;
	t->err = 0;
	pthread_mutex_init(&t->mu, NULL);
	/* doit_wait's deadline is monotonic: a clock step must not stretch it. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cv, &ca);
	pthread_condattr_destroy(&ca);
}

void kdev_doit_fini(struct kdev_doit *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	pthread_cond_destroy(&t->cv);
	pthread_mutex_destroy(&t->mu);
}

static bool sys_read_u64(const char *path, unsigned long long *v)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "%llu", v) == 1;
	fclose(f);
	return ok;
}

bool kdev_ioctl_busy(const char *sysblock, int index)
{
	char path[256];
	unsigned long long size;

	snprintf(path, sizeof(path), "%s/nbd%d/size", sysblock, index);
	if (sys_read_u64(path, &size) && size)
		return true;
	snprintf(path, sizeof(path), "%s/nbd%d/pid", sysblock, index);
	return access(path, F_OK) == 0;
}

int kdev_ioctl_find_free(const char *sysblock, int from)
{
	char path[256];
	unsigned long long size;

	for (int i = from < 0 ? 0 : from; i < 4096; i++) {
		snprintf(path, sizeof(path), "%s/nbd%d/size", sysblock, i);
		if (!sys_read_u64(path, &size))
			break; /* devices are numbered from 0 without holes */
		if (!kdev_ioctl_busy(sysblock, i))
			return i;
	}
	log_err("nbd: no free /dev/nbdN (is the nbd module loaded? modprobe nbd)");
	return -ENODEV;
}

static int nbd_ioctl(const struct kdev_doit *t, unsigned long req, unsigned long arg,
		     const char *what)
{
	int err;

	if (ioctl(t->fd, req, arg) == 0)
		return 0;
	err = errno;
	log_err("nbd%d: ioctl %s: %s", t->index, what, strerror(err));
	return -err;
}

int kdev_ioctl_setup(struct kdev_doit *t, const char *sysblock, const char *dev_dir, uint64_t size,
		     uint32_t block_size, uint64_t flags, const int *kfds, unsigned n,
		     unsigned *taken)
{
	char path[256];
	int r;

	*taken = 0;
	/* NBD_CLEAR_SOCK below would cut another client's connections. */
	if (kdev_ioctl_busy(sysblock, t->index)) {
		log_err("nbd%d: in use by another client", t->index);
		return -EBUSY;
	}
	snprintf(path, sizeof(path), "%s/nbd%d", dev_dir, t->index);
	t->fd = open(path, O_RDWR | O_CLOEXEC);
	if (t->fd < 0) {
		r = -errno;
		log_err("nbd%d: cannot open %s: %s", t->index, path, strerror(errno));
		return r;
	}
	if (!block_size || size % block_size) {
		log_err("nbd%d: size %llu is not a multiple of the block size %u", t->index,
			(unsigned long long)size, block_size);
		return -EINVAL;
	}
	/* A device left configured by a dead client would refuse the
	 * sockets; one that is connected refuses this too (EBUSY). */
	r = nbd_ioctl(t, NBD_CLEAR_SOCK, 0, "NBD_CLEAR_SOCK");
	if (!r)
		r = nbd_ioctl(t, NBD_SET_BLKSIZE, block_size, "NBD_SET_BLKSIZE");
	if (!r)
		r = nbd_ioctl(t, NBD_SET_SIZE_BLOCKS, size / block_size, "NBD_SET_SIZE_BLOCKS");
	if (!r)
		r = nbd_ioctl(t, NBD_SET_FLAGS, flags, "NBD_SET_FLAGS");
	if (r)
		return r;
	for (unsigned i = 0; i < n; i++) {
		if (ioctl(t->fd, NBD_SET_SOCK, (unsigned long)kfds[i]) == 0) {
			(*taken)++;
			continue;
		}
		r = -errno;
		if (i == 0) {
			log_err("nbd%d: ioctl NBD_SET_SOCK: %s%s", t->index, strerror(-r),
				r == -EBUSY ? " (device in use)" : "");
			return r;
		}
		/* Before 4.10 the ioctl interface takes one socket. */
		log_notice("nbd%d: the kernel takes %u of %u connections (NBD_SET_SOCK: %s)",
			   t->index, i, n, strerror(-r));
		break;
	}
	/* As the netlink attach (nbd/kdev.h): none with one connection, said
	 * outright since the device keeps the last user's. */
	if (*taken == 1)
		nbd_ioctl(t, NBD_SET_TIMEOUT, 0, "NBD_SET_TIMEOUT");
	return 0;
}

void kdev_ioctl_release(struct kdev_doit *t)
{
	if (t->fd >= 0 && ioctl(t->fd, NBD_CLEAR_SOCK) < 0)
		log_debug("nbd%d: ioctl NBD_CLEAR_SOCK: %s", t->index, strerror(errno));
}

static void *doit_thread(void *arg)
{
	struct kdev_doit *t = arg;
	sigset_t all;
	int err = 0;

	/* Signals belong to the reactor's thread; an interrupted NBD_DO_IT
	 * would tear the device down. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (ioctl(t->fd, NBD_DO_IT) < 0)
		err = -errno;
	/* Like nbd-client after NBD_DO_IT: leave the device free for the
	 * next user (both are no-ops where the kernel did it already). */
	ioctl(t->fd, NBD_CLEAR_QUE);
	ioctl(t->fd, NBD_CLEAR_SOCK);
	pthread_mutex_lock(&t->mu);
	t->err = err;
	t->exited = true;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
	/* The last touch of t on this thread. */
	reactor_send_msg(t->r, &t->msg);
	return NULL;
}

static bool doit_exited(struct kdev_doit *t)
{
	bool x;

	pthread_mutex_lock(&t->mu);
	x = t->exited;
	pthread_mutex_unlock(&t->mu);
	return x;
}

int kdev_doit_start(struct kdev_doit *t)
{
	struct timespec pause = { 0, DOIT_POLL_MS * 1000000L };
	pthread_attr_t attr;
	pthread_t th;
	uint64_t bytes = 0;
	int r;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = gw_thread_stack(&attr);
	if (!r)
		r = pthread_create(&th, &attr, doit_thread, t);
	pthread_attr_destroy(&attr);
	if (r) {
		log_err("nbd%d: cannot start the NBD_DO_IT thread: %s", t->index, strerror(r));
		return -r;
	}
	t->started = true;
	for (unsigned ms = 0; ms < DOIT_SIZE_WAIT_MS; ms += DOIT_POLL_MS) {
		if (ioctl(t->fd, BLKGETSIZE64, &bytes) == 0 && bytes)
			return 0;
		if (doit_exited(t))
			break;
		nanosleep(&pause, NULL);
	}
	if (doit_exited(t)) {
		log_err("nbd%d: NBD_DO_IT returned at once: %s", t->index,
			t->err ? strerror(-t->err) : "no error");
		return t->err ? t->err : -EIO;
	}
	log_warn("nbd%d: still no size %u ms after NBD_DO_IT", t->index, DOIT_SIZE_WAIT_MS);
	return 0;
}

/* Waits until NBD_DO_IT has returned or ms have passed. */
static bool doit_wait(struct kdev_doit *t, unsigned ms)
{
	struct timespec until;
	bool x;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&t->mu);
	while (!t->exited)
		if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT)
			break;
	x = t->exited;
	pthread_mutex_unlock(&t->mu);
	return x;
}

int kdev_doit_stop(struct kdev_doit *t, unsigned timeout_ms)
{
	struct timespec t0, t1;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!doit_exited(t) && ioctl(t->fd, NBD_DISCONNECT) < 0)
		log_warn("nbd%d: ioctl NBD_DISCONNECT: %s", t->index, strerror(errno));
	if (!doit_wait(t, timeout_ms)) {
		log_warn("nbd%d: NBD_DO_IT still running %u ms after NBD_DISCONNECT: "
			 "clearing the sockets", t->index, timeout_ms);
		if (ioctl(t->fd, NBD_CLEAR_SOCK) < 0)
			log_warn("nbd%d: ioctl NBD_CLEAR_SOCK: %s", t->index, strerror(errno));
		if (!doit_wait(t, timeout_ms)) {
			log_err("nbd%d: NBD_DO_IT does not return; the device stays busy",
				t->index);
			return -ETIMEDOUT;
		}
	}
	/* Frees the kernel's hold on the sockets and the queue. */
	if (ioctl(t->fd, NBD_CLEAR_SOCK) < 0)
		log_debug("nbd%d: ioctl NBD_CLEAR_SOCK: %s", t->index, strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	log_info("nbd%d: NBD_DO_IT returned %ld ms after NBD_DISCONNECT (%s)", t->index, ms,
		 t->err ? strerror(-t->err) : "clean");
	return 0;
}
