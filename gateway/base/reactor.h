/* A reactor: one thread, one event loop (an io_uring, or epoll where
 * io_uring is missing or refused).  Everything a reactor owns (queues,
 * connections) is touched only from its thread; other threads talk to it by
 * message.  Operations are submitted with an embedded struct reactor_op
 * whose callback runs, on the reactor thread, when the operation completes. */
#ifndef GW_REACTOR_H
#define GW_REACTOR_H

/* Without liburing (NO_IO_URING=1, or make finds none) only the epoll
 * backend is built. */
#ifndef GW_NO_IO_URING
#include <liburing.h>
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "gateway/base/list.h"

struct reactor;
struct reactor_op;

/* res is the result of the operation: >= 0 or -errno. */
typedef void (*reactor_op_fn)(struct reactor_op *op, int res, uint32_t cqe_flags);

/* Beyond fn, only the epoll backend uses the fields: it keeps the request
 * here, where io_uring keeps it in the SQE. */
struct reactor_op {
	reactor_op_fn fn;
	struct list_node link;
	void *buf;
	void *aux;
	size_t len;
	int fd;
	int flags;
	int res;
	uint8_t kind;
	bool queued;
};

enum reactor_backend { REACTOR_IO_URING, REACTOR_EPOLL };
enum reactor_backend_mode { REACTOR_AUTO, REACTOR_FORCE_IO_URING, REACTOR_FORCE_EPOLL };

struct reactor_fd;

struct reactor_timer;
typedef void (*reactor_timer_fn)(struct reactor_timer *t);

/* Software timers, kept sorted; the ring wait is bounded by the earliest.
 * A handful per controller (keep-alive, deadlines); never one per I/O. */
struct reactor_timer {
	struct list_node link;
	uint64_t deadline_ns;
	reactor_timer_fn fn;
	bool armed;
};

/* Run fn(msg) on the destination reactor's thread. */
struct reactor_msg;
typedef void (*reactor_msg_fn)(struct reactor_msg *msg);
struct reactor_msg {
	struct list_node link;
	reactor_msg_fn fn;
};

struct reactor {
	unsigned id;
#ifndef GW_NO_IO_URING
	struct io_uring ring;
#endif
	struct list_node timers;
	struct list_node deferred; /* reactor_msg run after this batch */
	bool stop;
	pthread_t thread;
	bool thread_running; /* started by reactor_start_thread, not joined yet */
	/* Cross-thread mailbox: control-path messages only. */
	pthread_mutex_t mbox_lock;
	struct list_node mbox;
	int mbox_fd; /* eventfd */
	uint64_t mbox_val;
	struct reactor_op mbox_op;
	bool mbox_armed;
	unsigned pending_submit; /* queued, not yet handed to the kernel */
#ifndef GW_NO_IO_URING
	unsigned cq_entries;
	/* Operations queued while the SQ was full and the kernel would not
	 * take it (EBUSY: a kernel before 5.19 with an overflowed CQ; EAGAIN:
	 * no memory): prepared here instead, they go to the ring oldest first
	 * at the next submit.  Empty iff backlog_tail is 0. */
	struct io_uring_sqe *backlog;
	unsigned backlog_head, backlog_tail, backlog_cap;
	uint64_t backlog_logged_ns;
	unsigned long backlog_unlogged;
	unsigned test_fail_submits; /* reactor_test_fail_submits */
	/* The wait's bound.  Not on the stack: before 5.11 liburing bounds a
	 * wait with a timeout SQE pointing at it, which a failed enter leaves
	 * in the SQ for a later one to read. */
	struct __kernel_timespec wait_ts;
#endif
	enum reactor_backend backend;
	const char *backend_why; /* for the log and status */
	/* epoll backend */
	int epfd;
	struct list_node ready;	   /* completed, delivered on the next pass */
	struct reactor_fd **fdtab; /* chunks, never moved: lists live there */
	unsigned fdtab_chunks;
	int *dirty;		   /* fds whose interest may have changed */
	unsigned nr_dirty, dirty_cap;
	/* Busy-poll window (reactor_set_poll_us): after a pass that ran a
	 * completion the loop spins until busy_until_ns rather than sleeping,
	 * so that the next completion costs no wakeup. */
	uint64_t poll_ns;
	uint64_t busy_until_ns;
	/* Written by the reactor's thread only, read by status: relaxed
	 * atomics (reactor_spin_stats). */
	uint64_t nr_spin_hits;	 /* spins that ended with a completion */
	uint64_t nr_spin_misses; /* spins that ran the whole window and slept */
	uint64_t spin_ns;	 /* time spent spinning, for the CPU it costs */
	uint64_t nr_wait_failures; /* waits that failed: reactor_wait_failed */
};

/* The backend reactor_init() uses from now on: auto takes io_uring when the
 * kernel allows it and has the operations, epoll otherwise. */
void reactor_set_backend_mode(enum reactor_backend_mode mode);
/* "auto", "io_uring" or "epoll": 0, or -EINVAL. */
int reactor_parse_backend_mode(const char *s, enum reactor_backend_mode *out);
/* The name of an enum reactor_backend_mode, "?" past the last. */
const char *reactor_backend_mode_name(int mode);
/* NVMF_GATEWAY_REACTOR_BACKEND (auto|io_uring|epoll) in the environment
 * overrides the mode set here: for running a test suite on one backend. */
#define REACTOR_BACKEND_ENV "NVMF_GATEWAY_REACTOR_BACKEND"
const char *reactor_backend_name(const struct reactor *r);
/* Whether the ops above still wait properly on an O_NONBLOCK socket (the
 * epoll backend sets it itself; io_uring needs IORING_FEAT_FAST_POLL). */
bool reactor_nonblock_fd_ok(const struct reactor *r);

/* The busy-poll window reactor_init() gives reactors from now on: 0 (the
 * default) sleeps as soon as nothing is ready; N keeps polling for N
 * microseconds after the last completion, trading a core's time for the
 * wakeup latency of the next one.  At most 1 ms: a window longer than
 * the gap between two I/Os buys nothing, and every keep-alive of an idle
 * gateway opens one. */
#define REACTOR_MAX_POLL_US 1000u
void reactor_set_poll_us(unsigned us);
unsigned reactor_poll_us(void);
/* What the window did so far, from any thread. */
struct reactor_spin_stats {
	uint64_t hits, misses, spin_ns;
};
void reactor_spin_stats(const struct reactor *r, struct reactor_spin_stats *out);

int reactor_init(struct reactor *r, unsigned id, unsigned entries);
void reactor_fini(struct reactor *r);

/* Operations.  Each queues one operation whose completion calls op->fn on
 * this reactor's thread with the result (>= 0 or -errno, as the system call
 * would return it) and the completion flags (0 unless said).  They are what
 * a module asks of the reactor: no module prepares a submission entry of its
 * own, so that a second backend can stand behind the same calls.  On
 * io_uring each is one SQE, submitted with the next wait (or when the ring
 * is full): no copy, no system call of its own.  Buffers, iovecs, msghdr and
 * addresses stay owned by the caller until the completion.  op is in flight
 * from the call to its completion: never queue one op twice.  The epoll
 * backend tries each at once without blocking and otherwise waits for the
 * descriptor's readiness (it makes read and accept descriptors, and
 * connecting sockets, O_NONBLOCK); cqe_flags is always 0 there. */
void reactor_recv(struct reactor *r, struct reactor_op *op, int fd, void *buf,
		  size_t len, int flags);
void reactor_send(struct reactor *r, struct reactor_op *op, int fd, const void *buf,
		  size_t len, int flags);
void reactor_recvmsg(struct reactor *r, struct reactor_op *op, int fd,
		     struct msghdr *msg, int flags);
void reactor_sendmsg(struct reactor *r, struct reactor_op *op, int fd,
		     const struct msghdr *msg, int flags);
/* res is the new descriptor; addr and addrlen may be NULL.  flags as for
 * accept4 (SOCK_CLOEXEC, SOCK_NONBLOCK). */
void reactor_accept(struct reactor *r, struct reactor_op *op, int fd,
		    struct sockaddr *addr, socklen_t *addrlen, int flags);
/* res is 0 once connected. */
void reactor_connect(struct reactor *r, struct reactor_op *op, int fd,
		     const struct sockaddr *addr, socklen_t addrlen);
/* read(2) on a stream-like descriptor: eventfd, signalfd, /dev/fuse. */
void reactor_read(struct reactor *r, struct reactor_op *op, int fd, void *buf,
		  size_t len);
/* One-shot readiness: res is the poll(2) revents (POLLIN, POLLERR...). */
void reactor_poll_fd(struct reactor *r, struct reactor_op *op, int fd,
		     unsigned events);
/* Completes with res 0 on a later pass of the loop: lets a callback yield
 * after other ready completions ran. */
void reactor_nop(struct reactor *r, struct reactor_op *op);
/* Asks that target complete early (with -ECANCELED, or its own result if
 * it raced); the cancellation has no completion of its own.  target must
 * be in flight on this reactor. */
void reactor_cancel(struct reactor *r, struct reactor_op *target);
/* Hands what was queued to the kernel now rather than at the next wait:
 * for a cancellation made just before the reactor stops being run. */
void reactor_submit(struct reactor *r);

/* Tests only: the next n submits made to free a full SQ (by an operation
 * call such as reactor_recv, or while moving queued operations into the
 * ring) fail with -EBUSY without submitting, as a kernel before 5.19 with
 * an overflowed CQ answers.  The loop's own submit still submits. */
void reactor_test_fail_submits(struct reactor *r, unsigned n);

/* Runs until reactor_stop(), or once when once is true (for tests and
 * nested waits: process what is ready, waiting up to timeout_ns). */
void reactor_run(struct reactor *r);
void reactor_poll(struct reactor *r, uint64_t timeout_ns);
void reactor_stop(struct reactor *r);

/* PR_SET_IO_FLUSHER on the calling thread: 0 or -errno (-EINVAL before
 * Linux 5.6, -EPERM without CAP_SYS_RESOURCE). */
int reactor_thread_io_flusher(void);
/* Whether threads started from now on set it themselves. */
void reactor_io_flusher_for_new_threads(bool on);

/* Start the reactor on its own thread, named "gw-reactor-ID". */
int reactor_start_thread(struct reactor *r);
void reactor_join(struct reactor *r);

uint64_t reactor_now_ns(void);
void reactor_timer_init(struct reactor_timer *t, reactor_timer_fn fn);
void reactor_timer_arm(struct reactor *r, struct reactor_timer *t, uint64_t delay_ns);
void reactor_timer_cancel(struct reactor_timer *t);

/* From any thread. */
void reactor_send_msg(struct reactor *dst, struct reactor_msg *m);
/* From the reactor's own thread: run m after the current completions, so
 * that a callback never recurses into a deep chain of completions. */
void reactor_defer(struct reactor *r, struct reactor_msg *m);

#define NSEC_PER_SEC 1000000000ull
#define NSEC_PER_MSEC 1000000ull

#endif
