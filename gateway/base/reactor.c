#include "gateway/base/reactor.h"
#include "gateway/base/invariant.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor_epoll.h"
#include "gateway/base/thread_stack.h"

uint64_t reactor_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void mbox_arm(struct reactor *r);

static void mbox_drain(struct reactor *r)
{
	struct list_node batch, *n;

	list_init(&batch);
	pthread_mutex_lock(&r->mbox_lock);
	while ((n = list_pop(&r->mbox)))
		list_add_tail(&batch, n);
	pthread_mutex_unlock(&r->mbox_lock);
	while ((n = list_pop(&batch))) {
		struct reactor_msg *m = container_of(n, struct reactor_msg, link);
		m->fn(m);
	}
}

static void mbox_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct reactor *r = container_of(op, struct reactor, mbox_op);
	(void)flags;
	r->mbox_armed = false;
	/* Limited: a broken ring or epoll set fails the read again at once. */
	if (res < 0 && res != -EINTR && res != -ECANCELED)
		log_rl(ERR, "reactor %u: mailbox read failed: %s", r->id, strerror(-res));
	mbox_drain(r);
	if (!r->stop)
		mbox_arm(r);
}

static void mbox_arm(struct reactor *r)
{
	reactor_read(r, &r->mbox_op, r->mbox_fd, &r->mbox_val, sizeof(r->mbox_val));
	r->mbox_armed = true;
}

static enum reactor_backend_mode backend_mode = REACTOR_AUTO;
static unsigned poll_us_default;

void reactor_set_backend_mode(enum reactor_backend_mode mode) { backend_mode = mode; }

int reactor_parse_backend_mode(const char *s, enum reactor_backend_mode *out)
{
	if (!strcmp(s, "auto"))
		*out = REACTOR_AUTO;
	else if (!strcmp(s, "io_uring"))
		*out = REACTOR_FORCE_IO_URING;
	else if (!strcmp(s, "epoll"))
		*out = REACTOR_FORCE_EPOLL;
	else
		return -EINVAL;
	return 0;
}

const char *reactor_backend_mode_name(int mode)
{
	static const char *const names[] = { "auto", "io_uring", "epoll" };

	return mode >= 0 && mode < 3 ? names[mode] : "?";
}

/* *forced_by names what forced the mode, for the log and status. */
static enum reactor_backend_mode effective_mode(const char **forced_by)
{
	const char *env = getenv(REACTOR_BACKEND_ENV);
	enum reactor_backend_mode m;

	*forced_by = backend_mode == REACTOR_FORCE_EPOLL ? "reactor_backend = \"epoll\""
						       : "reactor_backend = \"io_uring\"";
	if (!env || !*env)
		return backend_mode;
	if (reactor_parse_backend_mode(env, &m) < 0) {
		log_warn("reactor: %s=%s: not auto, io_uring or epoll; ignored",
			 REACTOR_BACKEND_ENV, env);
		return backend_mode;
	}
	*forced_by = m == REACTOR_FORCE_EPOLL ? REACTOR_BACKEND_ENV "=epoll"
					      : REACTOR_BACKEND_ENV "=io_uring";
	return m;
}

const char *reactor_backend_name(const struct reactor *r)
{
	return r->backend == REACTOR_EPOLL ? "epoll" : "io_uring";
}

bool reactor_nonblock_fd_ok(const struct reactor *r)
{
#ifndef GW_NO_IO_URING
	/* Without fast poll a socket op on an O_NONBLOCK file may end in
	 * EAGAIN instead of waiting for the socket. */
	if (r->backend == REACTOR_IO_URING)
		return r->ring.features & IORING_FEAT_FAST_POLL;
#endif
	(void)r;
	return true;
}

#ifndef GW_NO_IO_URING
/* What the modules ask for, and the cancel that stops them. */
static const unsigned needed_opcodes[] = {
	IORING_OP_NOP,	   IORING_OP_READ,	  IORING_OP_SEND,    IORING_OP_RECV,
	IORING_OP_SENDMSG, IORING_OP_RECVMSG,	  IORING_OP_ACCEPT,  IORING_OP_CONNECT,
	IORING_OP_POLL_ADD, IORING_OP_ASYNC_CANCEL,
};

/* The CQ must hold every completion of a burst: sends, receives and
 * polls of all queues owned here. */
static int uring_setup(struct reactor *r, unsigned entries, unsigned flags)
{
	struct io_uring_params p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | flags;
	p.cq_entries = entries * 4;
	ret = io_uring_queue_init_params(entries, &r->ring, &p);
	r->cq_entries = p.cq_entries;
	return ret;
}

/* 0 with the ring ready, or -errno with *why saying why not. */
static int uring_init(struct reactor *r, unsigned entries, const char **why)
{
	struct io_uring_probe *probe;
	unsigned flags = 0;
	int ret;

	/* With the busy-poll window, COOP_TASKRUN and TASKRUN_FLAG (5.19+):
	 * a completion's task work does not interrupt the spinning thread,
	 * the kernel raises a flag that spin() reads and enters for; the
	 * interrupt to a running vCPU cost most of a QD1 round trip
	 * (78 -> 48 us here).  Without the
	 * window the ring stays as it was measured: the flags alone showed no
	 * gain at 4K QD32, and the reactor waits in the kernel anyway. */
	if (r->poll_ns)
		flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	ret = uring_setup(r, entries, flags);
	if (ret == -EINVAL && flags)
		ret = uring_setup(r, entries, 0); /* before 5.19 */
	if (ret < 0) {
		*why = ret == -ENOSYS ? "io_uring_setup: not in this kernel (ENOSYS)"
		     : ret == -EPERM || ret == -EACCES
			? "io_uring_setup refused (EPERM: kernel.io_uring_disabled or a seccomp filter)"
		     : ret == -EINVAL ? "io_uring_setup: no CQSIZE (EINVAL: kernel before 5.5)"
				      : "io_uring_setup failed";
		return ret;
	}
	/* The probe itself is 5.6+, like send, recv and the others. */
	probe = io_uring_get_probe_ring(&r->ring);
	for (unsigned i = 0; i < sizeof(needed_opcodes) / sizeof(needed_opcodes[0]); i++)
		if (!probe || !io_uring_opcode_supported(probe, (int)needed_opcodes[i])) {
			*why = "io_uring lacks an operation the gateway uses (kernel before 5.6)";
			ret = -EOPNOTSUPP;
			break;
		}
	if (probe)
		io_uring_free_probe(probe);
	if (ret < 0)
		io_uring_queue_exit(&r->ring);
	return ret;
}

#endif

static int backend_init(struct reactor *r, unsigned entries)
{
	const char *forced_by;
	enum reactor_backend_mode mode = effective_mode(&forced_by);
	const char *why = NULL;
	int ret = 0;

	r->epfd = -1;
	list_init(&r->ready);
#ifdef GW_NO_IO_URING
	(void)entries;
	why = "built without liburing";
	if (mode == REACTOR_FORCE_IO_URING) {
		log_err("reactor %u: %s, but %s", r->id, forced_by, why);
		return -ENOSYS;
	}
#else
	if (mode != REACTOR_FORCE_EPOLL) {
		ret = uring_init(r, entries, &why);
		if (ret == 0) {
			r->backend = REACTOR_IO_URING;
			r->backend_why = mode == REACTOR_FORCE_IO_URING
						 ? forced_by
						 : "io_uring has every operation";
			return 0;
		}
		if (mode == REACTOR_FORCE_IO_URING) {
			log_err("reactor %u: %s: %s; %s forbids epoll",
				r->id, why, strerror(-ret), forced_by);
			return ret;
		}
		/* A refusal or an old kernel.  Anything else (ENOMEM: a
		 * locked-memory limit) is a host problem to report, not to
		 * hide behind the slower backend. */
		if (ret != -ENOSYS && ret != -EPERM && ret != -EACCES && ret != -EINVAL &&
		    ret != -EOPNOTSUPP) {
			log_err("reactor %u: io_uring setup failed: %s", r->id, strerror(-ret));
			return ret;
		}
	}
#endif
	ret = ep_init(r);
	if (ret < 0) {
		log_err("reactor %u: epoll_create1: %s", r->id, strerror(-ret));
		return ret;
	}
	r->backend = REACTOR_EPOLL;
	r->backend_why = why ? why : forced_by;
	if (r->id == 0)
		log_notice("reactor: epoll backend (%s)", r->backend_why);
	return 0;
}

static void backend_fini(struct reactor *r)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_queue_exit(&r->ring);
		free(r->backlog);
		return;
	}
#endif
	ep_fini(r);
}

int reactor_init(struct reactor *r, unsigned id, unsigned entries)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->id = id;
	r->poll_ns = (uint64_t)poll_us_default * 1000u;
	list_init(&r->timers);
	list_init(&r->deferred);
	list_init(&r->mbox);
	pthread_mutex_init(&r->mbox_lock, NULL);
	ret = backend_init(r, entries);
	if (ret < 0) {
		pthread_mutex_destroy(&r->mbox_lock);
		return ret;
	}
	r->mbox_fd = eventfd(0, EFD_CLOEXEC);
	if (r->mbox_fd < 0) {
		ret = -errno;
		backend_fini(r);
		pthread_mutex_destroy(&r->mbox_lock);
		return ret;
	}
	r->mbox_op.fn = mbox_done;
	mbox_arm(r);
	return 0;
}

void reactor_fini(struct reactor *r)
{
	/* Its thread may be waiting in the ring or epoll set fini frees. */
	INVARIANT(!r->thread_running, "reactor_fini on a reactor whose thread was not joined");
	/* Reap what is still in flight so that no completion is left pointing
	 * at memory the owners are about to free. */
	/* Stopped, or the cancelled read's completion would arm another. */
	r->stop = true;
	if (r->mbox_armed) {
		reactor_cancel(r, &r->mbox_op);
		reactor_submit(r);
		uint64_t deadline = reactor_now_ns() + NSEC_PER_SEC;
		while (r->mbox_armed && reactor_now_ns() < deadline)
			reactor_poll(r, 10 * NSEC_PER_MSEC);
	}
	close(r->mbox_fd);
	backend_fini(r);
	pthread_mutex_destroy(&r->mbox_lock);
}

void reactor_test_fail_submits(struct reactor *r, unsigned n)
{
#ifndef GW_NO_IO_URING
	r->test_fail_submits = n;
#else
	(void)r;
	(void)n;
#endif
}

#ifndef GW_NO_IO_URING
/* refill: to make room in a full SQ, the submits the test seam fails. */
static int sq_submit(struct reactor *r, bool refill)
{
	int ret;

	if (refill && r->test_fail_submits) {
		r->test_fail_submits--;
		return -EBUSY;
	}
	ret = io_uring_submit(&r->ring);
	r->pending_submit = io_uring_sq_ready(&r->ring) + r->backlog_tail - r->backlog_head;
	return ret;
}

/* Moves the backlog, oldest first, into the SQ, handing the SQ to the
 * kernel whenever it fills; for an operation call (for_op), then returns a
 * free SQE for the new operation.  A submit that takes nothing ends it:
 * NULL, with *err the submit's answer, and what is left waits for the next
 * submit point. */
static struct io_uring_sqe *sq_refill(struct reactor *r, bool for_op, int *err)
{
	struct io_uring_sqe *sqe;
	int ret;

	for (;;) {
		if (r->backlog_head == r->backlog_tail) {
			r->backlog_head = r->backlog_tail = 0;
			if (!for_op)
				return NULL;
			if ((sqe = io_uring_get_sqe(&r->ring)))
				return sqe;
		} else if ((sqe = io_uring_get_sqe(&r->ring))) {
			*sqe = r->backlog[r->backlog_head++];
			continue;
		}
		ret = sq_submit(r, true);
		if (ret <= 0) {
			*err = ret;
			return NULL;
		}
	}
}

/* Where an operation goes when the kernel takes no more for now. */
static struct io_uring_sqe *backlog_push(struct reactor *r, int err)
{
	struct io_uring_sqe *sqe;
	uint64_t now = reactor_now_ns();

	if (r->backlog_tail == r->backlog_cap) {
		if (r->backlog_head) {
			memmove(r->backlog, r->backlog + r->backlog_head,
				(r->backlog_tail - r->backlog_head) * sizeof(*r->backlog));
			r->backlog_tail -= r->backlog_head;
			r->backlog_head = 0;
		} else {
			unsigned cap = r->backlog_cap ? r->backlog_cap * 2 : 64;
			void *p = reallocarray(r->backlog, cap, sizeof(*r->backlog));
			/* Nowhere left to keep the operation, and its caller
			 * cannot be told: the one failure left to abort on. */
			if (!p) {
				log_err("reactor %u: SQ full (%s) and no memory for %u queued operations: aborting",
					r->id, strerror(err ? -err : EBUSY), cap);
				abort();
			}
			r->backlog = p;
			r->backlog_cap = cap;
		}
	}
	sqe = &r->backlog[r->backlog_tail++];
	memset(sqe, 0, sizeof(*sqe));
	r->backlog_unlogged++;
	if (!r->backlog_logged_ns || now - r->backlog_logged_ns >= 10 * NSEC_PER_SEC) {
		log_warn("reactor %u: SQ full and the kernel takes no more for now (io_uring_submit: %s): %lu operation(s) wait in user space for the next submit",
			 r->id, err ? strerror(-err) : "took none", r->backlog_unlogged);
		r->backlog_logged_ns = now;
		r->backlog_unlogged = 0;
	}
	return sqe;
}

/* An SQE ready to prepare.  When the SQ is full it is submitted first;
 * when the kernel refuses it (a mass of completions overflowed the CQ on a
 * kernel before 5.19: EBUSY; no memory: EAGAIN), the SQE is one of the
 * backlog's, and so is every one after it until the backlog drained, so
 * that operations reach the kernel in the order they were queued. */
static struct io_uring_sqe *reactor_sqe(struct reactor *r, struct reactor_op *op)
{
	struct io_uring_sqe *sqe = NULL;
	int err = 0;

	if (__builtin_expect(!r->backlog_tail, 1))
		sqe = io_uring_get_sqe(&r->ring);
	if (!sqe)
		sqe = sq_refill(r, true, &err);
	if (!sqe)
		sqe = backlog_push(r, err);
	io_uring_sqe_set_data(sqe, op);
	r->pending_submit++;
	return sqe;
}
#endif

void reactor_recv(struct reactor *r, struct reactor_op *op, int fd, void *buf,
		  size_t len, int flags)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_recv(reactor_sqe(r, op), fd, buf, len, flags);
		return;
	}
#endif
	ep_queue(r, op, ROP_RECV, fd, buf, len, NULL, flags);
}

void reactor_send(struct reactor *r, struct reactor_op *op, int fd, const void *buf,
		  size_t len, int flags)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_send(reactor_sqe(r, op), fd, buf, len, flags);
		return;
	}
#endif
	ep_queue(r, op, ROP_SEND, fd, (void *)buf, len, NULL, flags);
}

void reactor_recvmsg(struct reactor *r, struct reactor_op *op, int fd,
		     struct msghdr *msg, int flags)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_recvmsg(reactor_sqe(r, op), fd, msg, (unsigned)flags);
		return;
	}
#endif
	ep_queue(r, op, ROP_RECVMSG, fd, msg, 0, NULL, flags);
}

void reactor_sendmsg(struct reactor *r, struct reactor_op *op, int fd,
		     const struct msghdr *msg, int flags)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_sendmsg(reactor_sqe(r, op), fd, msg, (unsigned)flags);
		return;
	}
#endif
	ep_queue(r, op, ROP_SENDMSG, fd, (void *)msg, 0, NULL, flags);
}

void reactor_accept(struct reactor *r, struct reactor_op *op, int fd,
		    struct sockaddr *addr, socklen_t *addrlen, int flags)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_accept(reactor_sqe(r, op), fd, addr, addrlen, flags);
		return;
	}
#endif
	ep_queue(r, op, ROP_ACCEPT, fd, addr, 0, addrlen, flags);
}

void reactor_connect(struct reactor *r, struct reactor_op *op, int fd,
		     const struct sockaddr *addr, socklen_t addrlen)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_connect(reactor_sqe(r, op), fd, addr, addrlen);
		return;
	}
#endif
	ep_connect(r, op, fd, addr, addrlen);
}

void reactor_read(struct reactor *r, struct reactor_op *op, int fd, void *buf,
		  size_t len)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		/* Offset 0 is ignored by the stream-like files this is for. */
		io_uring_prep_read(reactor_sqe(r, op), fd, buf, (unsigned)len, 0);
		return;
	}
#endif
	ep_queue(r, op, ROP_READ, fd, buf, len, NULL, 0);
}

void reactor_poll_fd(struct reactor *r, struct reactor_op *op, int fd,
		     unsigned events)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_poll_add(reactor_sqe(r, op), fd, events);
		return;
	}
#endif
	ep_queue(r, op, ROP_POLL, fd, NULL, 0, NULL, (int)events);
}

void reactor_nop(struct reactor *r, struct reactor_op *op)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_nop(reactor_sqe(r, op));
		return;
	}
#endif
	ep_nop(r, op);
}

void reactor_cancel(struct reactor *r, struct reactor_op *target)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING) {
		io_uring_prep_cancel(reactor_sqe(r, NULL), target, 0);
		return;
	}
#endif
	ep_cancel(r, target);
}

void reactor_submit(struct reactor *r)
{
#ifndef GW_NO_IO_URING
	int ret;

	if (r->backend == REACTOR_EPOLL)
		return;
	if (r->backlog_tail)
		(void)sq_refill(r, false, &ret);
	ret = sq_submit(r, false);
	/* Limited as a failing wait is: the ring that refuses a submit
	 * refuses the next one too. */
	if (ret < 0)
		log_rl(ERR, "reactor %u: io_uring_submit: %s", r->id, strerror(-ret));
#else
	(void)r;
#endif
}

void reactor_timer_init(struct reactor_timer *t, reactor_timer_fn fn)
{
	list_init(&t->link);
	t->fn = fn;
	t->armed = false;
	t->deadline_ns = 0;
}

void reactor_timer_arm(struct reactor *r, struct reactor_timer *t, uint64_t delay_ns)
{
	struct list_node *pos;

	reactor_timer_cancel(t);
	t->deadline_ns = reactor_now_ns() + delay_ns;
	t->armed = true;
	/* Most timers share a period, so the right place is near the tail. */
	for (pos = r->timers.prev; pos != &r->timers; pos = pos->prev) {
		struct reactor_timer *o = container_of(pos, struct reactor_timer, link);
		if (o->deadline_ns <= t->deadline_ns)
			break;
	}
	list_add_between(&t->link, pos, pos->next);
}

void reactor_timer_cancel(struct reactor_timer *t)
{
	if (t->armed) {
		list_del(&t->link);
		t->armed = false;
	}
}

static uint64_t run_timers(struct reactor *r)
{
	uint64_t now = reactor_now_ns();

	while (!list_empty(&r->timers)) {
		struct reactor_timer *t =
			container_of(r->timers.next, struct reactor_timer, link);
		if (t->deadline_ns > now)
			return t->deadline_ns - now;
		list_del(&t->link);
		t->armed = false;
		t->fn(t);
	}
	return UINT64_MAX;
}

static void run_deferred(struct reactor *r)
{
	struct list_node *n;
	/* New deferrals made while running go on the same list and run in
	 * this pass: each is bounded work, and order is kept. */
	while ((n = list_pop(&r->deferred))) {
		struct reactor_msg *m = container_of(n, struct reactor_msg, link);
		m->fn(m);
	}
}

#ifndef GW_NO_IO_URING
static struct io_uring_cqe *cq_first(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	unsigned head;

	io_uring_for_each_cqe(ring, head, cqe)
		return cqe;
	return NULL;
}

/* Runs the completions in the ring; returns how many ran a callback.
 * That is the busy window's measure of work: liburing's own timeouts and
 * the answers to cancels are not.
 *
 * Each CQE leaves the ring before its callback runs: a callback's
 * operations may complete at once (the SQ full, reactor_sqe submits), and
 * a CQ still full of the batch would send them to the overflow list, where
 * before 5.19 the next submit answers EBUSY until the kernel can flush it.
 * At most a CQ's worth per call, as when the batch was advanced at its end,
 * so that timers and deferred work get their turn. */
static unsigned uring_complete(struct reactor *r)
{
	struct io_uring_cqe *cqe;
	unsigned budget = r->cq_entries, ran = 0;

	while (budget-- && (cqe = cq_first(&r->ring))) {
		struct reactor_op *op = io_uring_cqe_get_data(cqe);
		uint64_t user_data = cqe->user_data;
		int res = cqe->res;
		uint32_t flags = cqe->flags;

		io_uring_cqe_seen(&r->ring, cqe);
		/* Before 5.11 (no IORING_FEAT_EXT_ARG) liburing bounds the
		 * wait with a timeout request of its own; one that outlived its
		 * wait completes here, among ours, and is no reactor_op (nor
		 * work that opens the busy-poll window). */
		if (op && user_data != LIBURING_UDATA_TIMEOUT) {
			op->fn(op, res, flags);
			ran++;
		}
	}
	return ran;
}

static unsigned uring_wait_and_complete(struct reactor *r, uint64_t timeout_ns)
{
	struct io_uring_cqe *cqe;
	int ret;

	/* What is still left after the refill goes on the next pass: not
	 * long from now, whatever else the wait is for. */
	if (r->backlog_tail) {
		(void)sq_refill(r, false, &ret);
		if (r->backlog_tail && timeout_ns > NSEC_PER_MSEC)
			timeout_ns = NSEC_PER_MSEC;
	}
	r->wait_ts.tv_sec = (long long)(timeout_ns / NSEC_PER_SEC);
	r->wait_ts.tv_nsec = (long long)(timeout_ns % NSEC_PER_SEC);
	ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1,
					       timeout_ns == UINT64_MAX ? NULL : &r->wait_ts, NULL);
	r->pending_submit = io_uring_sq_ready(&r->ring) + r->backlog_tail - r->backlog_head;
	if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EAGAIN &&
	    ret != -EBUSY)
		reactor_wait_failed(r, "io_uring_enter", -ret);
	return uring_complete(r);
}
#endif

/* Without the pause, a wait that keeps failing at once (a ring or epoll set
 * gone bad: EBADF, EFAULT, EOPNOTSUPP; memory short for longer than a
 * pass: ENOMEM) sent the reactor round its loop as fast as the system call
 * failed, a core at 100% and a log line each time, without end: seen with
 * a ring entered before it was enabled, whose gateway wrote its error line
 * in a loop until killed.  The pause bounds both (at most 100 waits a
 * second) and leaves the reactor running, its timers and any completion
 * the next wait brings, in case the cause passes. */
void reactor_wait_failed(struct reactor *r, const char *call, int err)
{
	struct timespec pause = { 0, REACTOR_WAIT_FAIL_PAUSE_MS * 1000000L };

	__atomic_store_n(&r->nr_wait_failures, r->nr_wait_failures + 1, __ATOMIC_RELAXED);
	log_rl(ERR, "reactor %u: %s: %s; waiting %d ms before the next pass", r->id, call,
	       strerror(err), REACTOR_WAIT_FAIL_PAUSE_MS);
	while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
		;
}

static unsigned backend_wait_and_complete(struct reactor *r, uint64_t timeout_ns)
{
#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING)
		return uring_wait_and_complete(r, timeout_ns);
#endif
	return ep_wait_and_complete(r, timeout_ns);
}

#ifndef GW_NO_IO_URING
#ifdef IORING_SQ_TASKRUN
#define SQ_NEEDS_ENTER (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN)
#else
#define SQ_NEEDS_ENTER IORING_SQ_CQ_OVERFLOW
#endif
#endif

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Polls without sleeping until a completion ran or until end_ns; returns
 * how many ran.  io_uring: what is queued goes to the kernel once, then
 * the ring is watched from user space, where completions arrive without a
 * system call (the kernel runs their task work when it interrupts this
 * thread).  epoll: epoll_wait with no timeout, in a loop. */
static unsigned spin(struct reactor *r, uint64_t end_ns)
{
	uint64_t start = reactor_now_ns(), now = start;
	unsigned n = 0;

#ifndef GW_NO_IO_URING
	if (r->backend == REACTOR_IO_URING && (io_uring_sq_ready(&r->ring) || r->backlog_tail)) {
		int ret;

		if (r->backlog_tail)
			(void)sq_refill(r, false, &ret);
		ret = sq_submit(r, false);
		/* As in the wait: EBUSY (a kernel before 5.19 with an
		 * overflowed CQ) and EAGAIN leave the SQEs for the next pass. */
		if (ret < 0 && ret != -EBUSY && ret != -EAGAIN && ret != -EINTR)
			log_rl(ERR, "reactor %u: io_uring_submit: %s", r->id, strerror(-ret));
	}
#endif
	while (now < end_ns && !r->stop) {
#ifndef GW_NO_IO_URING
		if (r->backend == REACTOR_IO_URING) {
			/* Completions only a system call hands over: an
			 * overflowed CQ (while its list is not empty every new
			 * completion goes there too) and task work the kernel
			 * only flags (the ring has COOP_TASKRUN | TASKRUN_FLAG
			 * whenever this window can run, where the kernel has
			 * them: uring_init).  A peek at an empty ring with the
			 * flag up enters the kernel for them (liburing 2.2 has
			 * no io_uring_get_events). */
			if (!io_uring_cq_ready(&r->ring) &&
			    (IO_URING_READ_ONCE(*r->ring.sq.kflags) & SQ_NEEDS_ENTER)) {
				struct io_uring_cqe *cqe;
				(void)io_uring_peek_cqe(&r->ring, &cqe);
			}
			if (io_uring_cq_ready(&r->ring))
				n = uring_complete(r);
			else
				cpu_relax();
		} else
#endif
			n = ep_wait_and_complete(r, 0);
		if (n)
			break;
		now = reactor_now_ns();
	}
	if (n)
		__atomic_store_n(&r->nr_spin_hits, r->nr_spin_hits + 1, __ATOMIC_RELAXED);
	else
		__atomic_store_n(&r->nr_spin_misses, r->nr_spin_misses + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&r->spin_ns, r->spin_ns + (now - start), __ATOMIC_RELAXED);
	return n;
}

void reactor_spin_stats(const struct reactor *r, struct reactor_spin_stats *out)
{
	out->hits = __atomic_load_n(&r->nr_spin_hits, __ATOMIC_RELAXED);
	out->misses = __atomic_load_n(&r->nr_spin_misses, __ATOMIC_RELAXED);
	out->spin_ns = __atomic_load_n(&r->spin_ns, __ATOMIC_RELAXED);
}

void reactor_set_poll_us(unsigned us)
{
	poll_us_default = us > REACTOR_MAX_POLL_US ? REACTOR_MAX_POLL_US : us;
}

unsigned reactor_poll_us(void) { return poll_us_default; }

void reactor_poll(struct reactor *r, uint64_t timeout_ns)
{
	uint64_t next;
	unsigned n = 0;

	run_deferred(r);
	next = run_timers(r);
	if (next < timeout_ns)
		timeout_ns = next;
	/* Deferred work that stopped the reactor must not leave it waiting
	 * for a completion that may never come. */
	if (!list_empty(&r->deferred) || r->stop)
		timeout_ns = 0;
	/* Only while busy: a reactor that had nothing to do for a whole
	 * window sleeps, so an idle gateway costs no CPU either way. */
	if (r->poll_ns && timeout_ns) {
		uint64_t now = reactor_now_ns();
		if (now < r->busy_until_ns) {
			uint64_t window = r->busy_until_ns - now;
			n = spin(r, now + (timeout_ns < window ? timeout_ns : window));
			if (!n && timeout_ns != UINT64_MAX) {
				uint64_t spent = reactor_now_ns() - now;
				timeout_ns = spent < timeout_ns ? timeout_ns - spent : 0;
			}
			/* The spin saw a stop: no sleep after it either. */
			if (r->stop)
				timeout_ns = 0;
		}
	}
	if (!n)
		n = backend_wait_and_complete(r, timeout_ns);
	if (n && r->poll_ns)
		r->busy_until_ns = reactor_now_ns() + r->poll_ns;
	run_deferred(r);
	run_timers(r);
}

void reactor_run(struct reactor *r)
{
	while (!r->stop)
		reactor_poll(r, UINT64_MAX);
}

void reactor_stop(struct reactor *r) { r->stop = true; }

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

static atomic_bool io_flusher_wanted;

int reactor_thread_io_flusher(void)
{
	return prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0 ? -errno : 0;
}

void reactor_io_flusher_for_new_threads(bool on)
{
	atomic_store(&io_flusher_wanted, on);
}

static void *reactor_thread(void *arg)
{
	struct reactor *r = arg;
	char name[16];

	/* Seen in top -H, /proc/PID/task/N/comm and stack dumps. */
	snprintf(name, sizeof(name), "gw-reactor-%u", r->id);
	pthread_setname_np(pthread_self(), name);
	/* A thread started after reclaim_enable() (a reload's export) has
	 * not received the message the running ones did. */
	if (atomic_load(&io_flusher_wanted)) {
		int ret = reactor_thread_io_flusher();
		if (ret < 0)
			log_debug("reactor %u: PR_SET_IO_FLUSHER: %s", r->id, strerror(-ret));
	}
	reactor_run(r);
	return NULL;
}

int reactor_start_thread(struct reactor *r)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int ret = pthread_attr_init(&attr);

	if (ret)
		return -ret;
	/* Not the 8 MiB default: see thread_stack.h. */
	ret = gw_thread_stack(&attr);
	/* The thread starts with every signal blocked (it inherits the
	 * mask): SIGTERM or SIGINT sent to the process must reach the
	 * signalfd of the thread that owns it, never kill the process from
	 * a reactor that happens to be started before that mask is set. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!ret)
		ret = pthread_create(&r->thread, &attr, reactor_thread, r);
	r->thread_running = ret == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -ret;
}

void reactor_join(struct reactor *r)
{
	pthread_join(r->thread, NULL);
	r->thread_running = false;
}

void reactor_send_msg(struct reactor *dst, struct reactor_msg *m)
{
	uint64_t one = 1;

	pthread_mutex_lock(&dst->mbox_lock);
	list_add_tail(&dst->mbox, &m->link);
	pthread_mutex_unlock(&dst->mbox_lock);
	if (write(dst->mbox_fd, &one, sizeof(one)) < 0)
		log_err("reactor %u: mailbox wakeup failed: %s", dst->id, strerror(errno));
}

void reactor_defer(struct reactor *r, struct reactor_msg *m)
{
	list_add_tail(&r->deferred, &m->link);
}
