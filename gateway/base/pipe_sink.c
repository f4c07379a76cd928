/* See pipe_sink.h.  Each call is non-blocking on the pipe; the socket's own
 * mode is respected except that reads from it never ask for more than it
 * holds (FIONREAD), so a blocking socket (the io_uring reactor's) never
 * blocks a splice from it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "gateway/base/iov.h"
#include "gateway/base/pipe_sink.h"

bool pipe_sink_disabled(void)
{
	static int v = -1;

	if (__atomic_load_n(&v, __ATOMIC_RELAXED) < 0) {
		const char *e = getenv("NVMF_GATEWAY_NO_SPLICE");
		__atomic_store_n(&v, e && *e && strcmp(e, "0") != 0, __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&v, __ATOMIC_RELAXED);
}

int pipe_sink_open(struct pipe_sink *s, uint32_t cap)
{
	int fds[2];

	memset(s, 0, sizeof(*s));
	s->rfd = s->wfd = -1;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	s->rfd = fds[0];
	s->wfd = fds[1];
	/* Best effort: above pipe-max-size (1 MiB) only a privileged process
	 * gets its size, and past the user's pipe pages nobody does: then
	 * the largest that works, down to the default (64 KiB). */
	for (cap = cap > INT_MAX ? INT_MAX : cap; cap; cap = cap > 65536 ? cap / 2 : 0)
		if (fcntl(s->wfd, F_SETPIPE_SZ, (int)cap) >= 0)
			break;
	int sz = fcntl(s->wfd, F_GETPIPE_SZ);
	s->cap = sz > 0 ? (uint32_t)sz : 0;
	return 0;
}

bool pipe_sink_is_open(const struct pipe_sink *s)
{
	return s->rfd >= 0;
}

/* Pipes open through the budget, over all reactors.  Each holds two
 * descriptors: at most limit / 8 pipes (2048 descriptors at 64 busy NBD
 * connections otherwise, against a default limit of 1024). */
static unsigned long pipes_open;

static unsigned long pipes_max(void)
{
	static unsigned long max;
	struct rlimit rl;

	if (!__atomic_load_n(&max, __ATOMIC_RELAXED)) {
		unsigned long m = 8;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    rl.rlim_cur / 8 > m)
			m = (unsigned long)(rl.rlim_cur / 8);
		__atomic_store_n(&max, m, __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&max, __ATOMIC_RELAXED);
}

int pipe_sink_open_counted(struct pipe_sink *s, uint32_t cap)
{
	int ret;

	if (__atomic_add_fetch(&pipes_open, 1, __ATOMIC_RELAXED) > pipes_max()) {
		__atomic_sub_fetch(&pipes_open, 1, __ATOMIC_RELAXED);
		s->rfd = s->wfd = -1;
		return -EMFILE;
	}
	if ((ret = pipe_sink_open(s, cap)) < 0)
		__atomic_sub_fetch(&pipes_open, 1, __ATOMIC_RELAXED);
	return ret;
}

void pipe_sink_close_counted(struct pipe_sink *s)
{
	if (!pipe_sink_is_open(s))
		return;
	pipe_sink_close(s);
	__atomic_sub_fetch(&pipes_open, 1, __ATOMIC_RELAXED);
}

unsigned long pipe_sink_counted_open(void)
{
	return __atomic_load_n(&pipes_open, __ATOMIC_RELAXED);
}

void pipe_sink_close(struct pipe_sink *s)
{
	if (s->rfd >= 0)
		close(s->rfd);
	if (s->wfd >= 0)
		close(s->wfd);
	s->rfd = s->wfd = -1;
	s->filled = s->prefix_len = 0;
}

static int write_all(struct pipe_sink *s, const void *p, size_t len, size_t *done)
{
	*done = 0;
	while (*done < len) {
		ssize_t r = write(s->wfd, (const char *)p + *done, len - *done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN ? -ENOSPC : -errno;
		*done += (size_t)r;
	}
	return 0;
}

/* Reads exactly len bytes: the pipe holds them by the sink's invariant, so
 * a short read means it does not and the sink is broken. */
static int read_exact(struct pipe_sink *s, void *p, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = read(s->rfd, (char *)p + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			s->broken = true;
			return r < 0 && errno != EAGAIN ? -errno : -EIO;
		}
		got += (size_t)r;
	}
	return 0;
}

int pipe_sink_set_prefix(struct pipe_sink *s, const void *p, size_t len)
{
	size_t done;
	int ret;

	if (s->broken || s->prefix_len || s->filled || len > PIPE_SINK_PREFIX_MAX)
		return -EINVAL;
	ret = write_all(s, p, len, &done);
	if (ret < 0) {
		s->broken = true;
		return ret;
	}
	memcpy(s->prefix, p, len);
	s->prefix_len = (uint8_t)len;
	return 0;
}

ssize_t pipe_sink_from_socket(struct pipe_sink *s, int fd, size_t len)
{
	int avail = 0;

	if (s->broken)
		return -EIO;
	if (ioctl(fd, FIONREAD, &avail) < 0)
		return -errno;
	if (avail <= 0)
		return -EAGAIN;
	if ((size_t)avail < len)
		len = (size_t)avail;
	for (;;) {
		ssize_t r = splice(fd, NULL, s->wfd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			/* The socket holds bytes, so EAGAIN is the pipe's. */
			return errno == EAGAIN ? -ENOSPC : -errno;
		if (r == 0)
			return -EAGAIN; /* urgent data or a race with a reset */
		s->filled += (uint32_t)r;
		return r;
	}
}

ssize_t pipe_sink_from_nb_socket(struct pipe_sink *s, int fd, size_t len)
{
	int avail = 0, tries = 0;

	if (s->broken)
		return -EIO;
	for (;;) {
		ssize_t r = splice(fd, NULL, s->wfd, NULL, len, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -EAGAIN; /* the end: the caller's receive reports it */
		if (r > 0) {
			s->filled += (uint32_t)r;
			return r;
		}
		if (errno != EAGAIN)
			return -errno;
		/* Either side may be the one that would block: ask.  Bytes
		 * there now may have come in after the splice found none (a
		 * sender in the middle of its message): try again before
		 * calling the pipe full. */
		if (ioctl(fd, FIONREAD, &avail) < 0)
			return -errno;
		if (avail <= 0)
			return -EAGAIN;
		if (++tries > 2)
			return -ENOSPC;
	}
}

int pipe_sink_put(struct pipe_sink *s, const void *buf, size_t len)
{
	size_t done;
	int ret;

	if (s->broken)
		return -EIO;
	ret = write_all(s, buf, len, &done);
	s->filled += (uint32_t)done;
	if (ret < 0 && ret != -ENOSPC)
		s->broken = true;
	return ret;
}

/* Drains the prefix and writes it back behind what is left: with an empty
 * payload left, the pipe is as it was before the producer began. */
static int requeue_prefix(struct pipe_sink *s)
{
	size_t done;
	int ret = write_all(s, s->prefix, s->prefix_len, &done);

	if (ret < 0)
		s->broken = true;
	return ret;
}

int pipe_sink_unsplice(struct pipe_sink *s, const struct iovec *iov, unsigned cnt)
{
	uint8_t head[PIPE_SINK_PREFIX_MAX];
	struct iovec sl[64];
	int n, ret;

	if (s->broken)
		return -EIO;
	if (!s->filled)
		return 0;
	if ((ret = read_exact(s, head, s->prefix_len)) < 0)
		return ret;
	n = iov_slice(iov, cnt, 0, s->filled, sl, 64);
	if (n < 0) {
		s->broken = true;
		return -EINVAL;
	}
	for (int i = 0; i < n; i++)
		if ((ret = read_exact(s, sl[i].iov_base, sl[i].iov_len)) < 0)
			return ret;
	s->filled = 0;
	return requeue_prefix(s);
}

/* A sink for dropped pipe pages: splicing to /dev/null releases them
 * without copying, where reading them out would copy every byte. */
static int null_fd(void)
{
	static int fd = -2;
	int cur = __atomic_load_n(&fd, __ATOMIC_ACQUIRE);

	if (cur == -2) {
		int nfd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		int expect = -2;
		if (!__atomic_compare_exchange_n(&fd, &expect, nfd, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE)) {
			if (nfd >= 0)
				close(nfd);
			return expect;
		}
		cur = nfd;
	}
	return cur;
}

static int discard(struct pipe_sink *s, size_t len)
{
	char scratch[4096];
	int nfd = null_fd();

	while (len && nfd >= 0) {
		ssize_t r = splice(s->rfd, NULL, nfd, NULL, len, SPLICE_F_NONBLOCK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* the copying way below says what is wrong */
		len -= (size_t)r;
	}
	while (len) {
		size_t n = len < sizeof(scratch) ? len : sizeof(scratch);
		int ret = read_exact(s, scratch, n);
		if (ret < 0)
			return ret;
		len -= n;
	}
	return 0;
}

int pipe_sink_reset(struct pipe_sink *s)
{
	int ret;

	if (s->broken)
		return -EIO;
	if (!s->filled)
		return 0;
	if ((ret = discard(s, (size_t)s->prefix_len + s->filled)) < 0)
		return ret;
	s->filled = 0;
	return requeue_prefix(s);
}

int pipe_sink_empty(struct pipe_sink *s)
{
	int ret;

	if (s->broken)
		return -EIO;
	ret = discard(s, (size_t)s->prefix_len + s->filled);
	s->prefix_len = 0;
	s->filled = 0;
	return ret;
}

int pipe_sink_tee(struct pipe_sink *dst, const struct pipe_sink *src)
{
	ssize_t r;

	if (dst->broken || src->broken)
		return -EIO;
	if (src->prefix_len)
		return -EINVAL;
	if (!src->filled)
		return 0;
	do
		r = tee(src->rfd, dst->wfd, src->filled, SPLICE_F_NONBLOCK);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno == EAGAIN ? -ENOSPC : -errno;
	dst->filled += (uint32_t)r;
	/* A second tee would duplicate the same first bytes again. */
	return (uint32_t)r == src->filled ? 0 : -ENOSPC;
}

ssize_t pipe_sink_to_socket(struct pipe_sink *s, int fd, size_t len, bool more)
{
	size_t held = (size_t)s->prefix_len + s->filled;

	if (s->broken)
		return -EIO;
	if (len > held)
		len = held;
	if (!len)
		return 0;
	for (;;) {
		ssize_t r = splice(s->rfd, NULL, fd, NULL, len,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {
			/* The pipe holds `held` bytes by the invariant. */
			s->broken = true;
			return -EIO;
		}
		size_t n = (size_t)r;
		size_t p = n < s->prefix_len ? n : s->prefix_len;
		s->prefix_len = (uint8_t)(s->prefix_len - p);
		if (p)
			memmove(s->prefix, s->prefix + p, s->prefix_len);
		s->filled -= (uint32_t)(n - p);
		s->nr_spliced += n - p;
		return r;
	}
}
