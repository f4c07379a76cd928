#include "gateway/base/reactor_epoll.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/base/log.h"

#define FD_CHUNK 64u
#define EP_EVENTS 64

/* Operations waiting on one descriptor, in submission order per direction:
 * the second /dev/fuse read never overtakes the first. */
struct reactor_fd {
	struct list_node in, out;
	uint32_t mask; /* what epoll has registered for it */
	bool dirty;
	/* Nothing waited on it at some point: it may have been closed (the
	 * kernel then drops it from the set) and its number reused, so the
	 * next interest is registered again rather than trusted to mask. */
	bool recheck;
};

int ep_init(struct reactor *r)
{
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epfd < 0)
		return -errno;
	list_init(&r->ready);
	return 0;
}

void ep_fini(struct reactor *r)
{
	for (unsigned i = 0; i < r->fdtab_chunks; i++)
		free(r->fdtab[i]);
	free(r->fdtab);
	free(r->dirty);
	close(r->epfd);
}

/* Grows in chunks so that the list heads inside never move.  Allocates
 * only when a descriptor higher than any before shows up. */
static struct reactor_fd *fd_slot(struct reactor *r, int fd)
{
	unsigned chunk = (unsigned)fd / FD_CHUNK;

	if (chunk >= r->fdtab_chunks) {
		unsigned n = chunk + 1 > 2 * r->fdtab_chunks ? chunk + 1 : 2 * r->fdtab_chunks;
		struct reactor_fd **t = realloc(r->fdtab, n * sizeof(*t));
		if (!t)
			abort();
		memset(t + r->fdtab_chunks, 0, (n - r->fdtab_chunks) * sizeof(*t));
		r->fdtab = t;
		r->fdtab_chunks = n;
	}
	if (!r->fdtab[chunk]) {
		struct reactor_fd *c = calloc(FD_CHUNK, sizeof(*c));
		if (!c)
			abort();
		for (unsigned i = 0; i < FD_CHUNK; i++) {
			list_init(&c[i].in);
			list_init(&c[i].out);
		}
		r->fdtab[chunk] = c;
	}
	return &r->fdtab[chunk][(unsigned)fd % FD_CHUNK];
}

static void mark_dirty(struct reactor *r, int fd, struct reactor_fd *f)
{
	if (f->dirty)
		return;
	if (r->nr_dirty == r->dirty_cap) {
		unsigned n = r->dirty_cap ? 2 * r->dirty_cap : 64;
		int *d = realloc(r->dirty, n * sizeof(*d));
		if (!d)
			abort();
		r->dirty = d;
		r->dirty_cap = n;
	}
	r->dirty[r->nr_dirty++] = fd;
	f->dirty = true;
}

/* What the first operation waiting for input needs to hear of (only it
 * is retried: the others are behind it).  A poll gets the events it asks
 * for and no others: level-triggered EPOLLIN for a poll that wants only
 * POLLERR/POLLHUP (the FUSE session's watch on a readable /dev/fuse) would
 * wake every pass and find nothing to complete, a spin.  EPOLLERR and
 * EPOLLHUP are reported whatever the mask: they are in it so that such a
 * poll still registers the descriptor. */
static uint32_t in_interest(struct reactor_fd *f)
{
	const struct reactor_op *op;

	if (list_empty(&f->in))
		return 0;
	op = container_of(f->in.next, struct reactor_op, link);
	if (op->kind != ROP_POLL)
		return EPOLLIN | EPOLLRDHUP;
	return (op->flags & POLLIN ? EPOLLIN : 0) | (op->flags & POLLPRI ? EPOLLPRI : 0) |
	       (op->flags & POLLRDHUP ? EPOLLRDHUP : 0) | EPOLLERR | EPOLLHUP;
}

/* Brings epoll's interest in line with the waiting operations, once per
 * pass: an operation that completes and is queued again in its callback
 * costs no epoll_ctl. */
static void sync_interest(struct reactor *r)
{
	for (unsigned i = 0; i < r->nr_dirty; i++) {
		int fd = r->dirty[i];
		struct reactor_fd *f = fd_slot(r, fd);
		uint32_t want = in_interest(f) | (list_empty(&f->out) ? 0 : EPOLLOUT);
		struct epoll_event ev = { .events = want, .data.fd = fd };

		f->dirty = false;
		if (want == f->mask && !(want && f->recheck))
			continue;
		f->recheck = false;
		/* The descriptor may have been closed (the kernel dropped it
		 * from the set) and its number reused since. */
		if (!want) {
			epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
		} else if (epoll_ctl(r->epfd, f->mask ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0) {
			int err = errno;
			if (err == ENOENT || err == EEXIST)
				err = epoll_ctl(r->epfd, err == ENOENT ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
						fd, &ev) < 0 ? errno : 0;
			if (err) {
				/* EPERM: a regular file.  Fail what waits on it
				 * rather than wait forever. */
				struct list_node *n;
				/* Limited: a broken epoll set fails every one. */
				log_rl(ERR, "reactor %u: epoll_ctl on fd %d: %s", r->id, fd,
				       strerror(err));
				while ((n = list_pop(&f->in)) || (n = list_pop(&f->out))) {
					struct reactor_op *op = container_of(n, struct reactor_op, link);
					op->kind = ROP_DONE;
					op->res = -err;
					list_add_tail(&r->ready, &op->link);
				}
				want = 0;
			}
		}
		f->mask = want;
	}
	r->nr_dirty = 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int neg(ssize_t ret) { return ret < 0 ? -errno : (int)ret; }

/* One non-blocking attempt: the result, or -EAGAIN to wait. */
static int try_op(struct reactor_op *op)
{
	int ret;

	do {
		switch (op->kind) {
		case ROP_RECV:
			ret = neg(recv(op->fd, op->buf, op->len, op->flags | MSG_DONTWAIT));
			break;
		case ROP_SEND:
			ret = neg(send(op->fd, op->buf, op->len, op->flags | MSG_DONTWAIT));
			break;
		case ROP_RECVMSG:
			ret = neg(recvmsg(op->fd, op->buf, op->flags | MSG_DONTWAIT));
			break;
		case ROP_SENDMSG:
			ret = neg(sendmsg(op->fd, op->buf, op->flags | MSG_DONTWAIT));
			break;
		case ROP_ACCEPT:
			ret = neg(accept4(op->fd, op->buf, op->aux, op->flags));
			break;
		case ROP_READ:
			ret = neg(read(op->fd, op->buf, op->len));
			break;
		case ROP_CONNECT: {
			int err = 0;
			socklen_t l = sizeof(err);
			if (getsockopt(op->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
				return -errno;
			if (err == EINPROGRESS || err == EALREADY)
				return -EAGAIN;
			return -err;
		}
		case ROP_POLL: {
			struct pollfd p = { .fd = op->fd, .events = (short)op->flags };
			ret = poll(&p, 1, 0);
			if (ret == 0)
				return -EAGAIN;
			ret = ret < 0 ? -errno : p.revents;
			break;
		}
		default:
			return op->res;
		}
	} while (ret == -EINTR);
	return ret == -EWOULDBLOCK ? -EAGAIN : ret;
}

static bool waits_for_output(const struct reactor_op *op)
{
	switch (op->kind) {
	case ROP_SEND:
	case ROP_SENDMSG:
	case ROP_CONNECT:
		return true;
	case ROP_POLL:
		return (op->flags & POLLOUT) && !(op->flags & POLLIN);
	default:
		return false;
	}
}

static void note_idle(struct reactor_fd *f)
{
	if (list_empty(&f->in) && list_empty(&f->out))
		f->recheck = true;
}

static void complete_later(struct reactor *r, struct reactor_op *op, int res)
{
	op->kind = ROP_DONE;
	op->res = res;
	list_add_tail(&r->ready, &op->link);
}

static void park_or_complete(struct reactor *r, struct reactor_op *op)
{
	struct reactor_fd *f = fd_slot(r, op->fd);
	struct list_node *q = waits_for_output(op) ? &f->out : &f->in;
	int res;

	op->queued = true;
	/* Behind an earlier operation in the same direction: keep the order. */
	if (!list_empty(q)) {
		list_add_tail(q, &op->link);
		return;
	}
	res = try_op(op);
	if (res != -EAGAIN) {
		complete_later(r, op, res);
		return;
	}
	list_add_tail(q, &op->link);
	mark_dirty(r, op->fd, f);
}

void ep_queue(struct reactor *r, struct reactor_op *op, enum reactor_op_kind kind, int fd,
	      void *buf, size_t len, void *aux, int flags)
{
	op->kind = (uint8_t)kind;
	op->fd = fd;
	op->buf = buf;
	op->len = len;
	op->aux = aux;
	op->flags = flags;
	op->res = 0;
	/* read(2) and accept(2) have no per-call MSG_DONTWAIT.  An operation
	 * already waiting on fd means it is the same open file, set before
	 * (the FUSE channel keeps several reads waiting). */
	if (kind == ROP_READ || kind == ROP_ACCEPT) {
		struct reactor_fd *f = fd_slot(r, fd);
		int ret = list_empty(&f->in) && list_empty(&f->out) ? set_nonblock(fd) : 0;
		if (ret < 0) {
			op->queued = true;
			complete_later(r, op, ret);
			return;
		}
	}
	park_or_complete(r, op);
}

void ep_connect(struct reactor *r, struct reactor_op *op, int fd,
		const struct sockaddr *addr, socklen_t addrlen)
{
	int ret = set_nonblock(fd);

	op->kind = ROP_CONNECT;
	op->fd = fd;
	op->queued = true;
	if (!ret)
		ret = connect(fd, addr, addrlen) < 0 ? -errno : 0;
	if (ret == -EINPROGRESS) {
		struct reactor_fd *f = fd_slot(r, fd);
		list_add_tail(&f->out, &op->link);
		mark_dirty(r, fd, f);
		return;
	}
	complete_later(r, op, ret);
}

void ep_nop(struct reactor *r, struct reactor_op *op)
{
	op->queued = true;
	complete_later(r, op, 0);
}

void ep_cancel(struct reactor *r, struct reactor_op *target)
{
	/* Done already: its result stands, as when io_uring's cancel races
	 * the completion. */
	if (!target->queued || target->kind == ROP_DONE)
		return;
	struct reactor_fd *f = fd_slot(r, target->fd);

	list_del(&target->link);
	note_idle(f);
	mark_dirty(r, target->fd, f);
	complete_later(r, target, -ECANCELED);
}

/* Everything at the head of q that no longer blocks becomes a completion. */
static void retry(struct reactor *r, struct reactor_fd *f, struct list_node *q)
{
	while (!list_empty(q)) {
		struct reactor_op *op = container_of(q->next, struct reactor_op, link);
		int res = try_op(op);
		if (res == -EAGAIN)
			return;
		list_del(&op->link);
		complete_later(r, op, res);
	}
	note_idle(f);
}

unsigned ep_wait_and_complete(struct reactor *r, uint64_t timeout_ns)
{
	unsigned count = 0;
	struct epoll_event ev[EP_EVENTS];
	struct list_node batch, *n;
	int ms, nev;

	sync_interest(r);
	if (!list_empty(&r->ready))
		timeout_ns = 0;
	if (timeout_ns == UINT64_MAX)
		ms = -1;
	else if (timeout_ns / NSEC_PER_MSEC >= INT_MAX)
		ms = INT_MAX;
	else /* rounded up: a timer must not wake the loop just before it is due */
		ms = (int)((timeout_ns + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
	nev = epoll_wait(r->epfd, ev, EP_EVENTS, ms);
	if (nev < 0 && errno != EINTR)
		reactor_wait_failed(r, "epoll_wait", errno);
	for (int i = 0; i < nev; i++) {
		int fd = ev[i].data.fd;
		struct reactor_fd *f = fd_slot(r, fd);
		uint32_t e = ev[i].events;

		if (e & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
			retry(r, f, &f->in);
		if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			retry(r, f, &f->out);
		/* Interest in what nothing waits for any more goes. */
		mark_dirty(r, fd, f);
	}
	/* Only what completed before this point: a callback that queues again
	 * (a burst's nop, a recv that finds data at once) runs next pass, after
	 * the other descriptors had their turn. */
	list_init(&batch);
	if (!list_empty(&r->ready)) {
		batch.next = r->ready.next;
		batch.prev = r->ready.prev;
		batch.next->prev = &batch;
		batch.prev->next = &batch;
		list_init(&r->ready);
	}
	while ((n = list_pop(&batch))) {
		struct reactor_op *op = container_of(n, struct reactor_op, link);
		op->queued = false;
		op->fn(op, op->res, 0);
		count++;
	}
	return count;
}
