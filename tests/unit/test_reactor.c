/* The reactor's operations, each against descriptors of the test's own: the
 * contract a module relies on (results as the system call gives them,
 * completion on the reactor thread, cancellation), which every backend must
 * keep. */
#include "gateway/base/reactor.h"
#include "gateway/base/log.h"
#include "gateway/base/reactor_epoll.h"
#include "log_capture.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>


struct done {
	struct reactor_op op;
	int res;
	int calls;
};

static void done_fn(struct reactor_op *op, int res, uint32_t flags)
{
	struct done *d = container_of(op, struct done, op);
	(void)flags;
	d->res = res;
	d->calls++;
}

static void done_init(struct done *d)
{
	memset(d, 0, sizeof(*d));
	d->op.fn = done_fn;
}

/* Polls until d completed, bounded by the reactor's own clock. */
static void wait_done(struct reactor *r, struct done *d)
{
	uint64_t deadline = reactor_now_ns() + 10 * NSEC_PER_SEC;

	while (!d->calls && reactor_now_ns() < deadline)
		reactor_poll(r, 100 * NSEC_PER_MSEC);
	ck_assert_int_eq(d->calls, 1);
}

static struct reactor R;

static void setup_uring(void)
{
	reactor_set_backend_mode(REACTOR_FORCE_IO_URING);
	ck_assert_int_eq(reactor_init(&R, 0, 16), 0);
	ck_assert_str_eq(reactor_backend_name(&R), "io_uring");
}

static void setup_epoll(void)
{
	reactor_set_backend_mode(REACTOR_FORCE_EPOLL);
	ck_assert_int_eq(reactor_init(&R, 0, 16), 0);
	ck_assert_str_eq(reactor_backend_name(&R), "epoll");
}
static void teardown(void)
{
	reactor_fini(&R);
	reactor_set_poll_us(0);
}

/* The same contract with the busy-poll window on (poll_us): completions
 * picked up while spinning must behave exactly as those waited for. */
static void setup_uring_poll(void)
{
	reactor_set_poll_us(200);
	setup_uring();
}

static void setup_epoll_poll(void)
{
	reactor_set_poll_us(200);
	setup_epoll();
}



#ifndef GW_NO_IO_URING
/* Kernels before 5.11 (Debian 11's 5.10) have no IORING_FEAT_EXT_ARG:
 * liburing then bounds a wait with a timeout request of its own, whose
 * completion lands in the ring next to the reactor's. */
static void setup_uring_no_ext_arg(void)
{
	setup_uring();
	R.ring.features &= ~IORING_FEAT_EXT_ARG;
}

static void setup_uring_no_ext_arg_poll(void)
{
	reactor_set_poll_us(200);
	setup_uring_no_ext_arg();
}

/* Waits that end early (an operation completed) leave liburing's timeout
 * armed; it completes during a later pass, behind other completions. */
START_TEST(bounded_waits_between_operations)
{
	for (int i = 0; i < 200; i++) {
		struct done n;

		done_init(&n);
		reactor_nop(&R, &n.op);
		reactor_poll(&R, (uint64_t)(i % 3) * NSEC_PER_MSEC);
		if (i % 7 == 0)
			usleep(2000);
		wait_done(&R, &n);
		ck_assert_int_eq(n.res, 0);
	}
}
END_TEST
#endif

START_TEST(send_then_recv)
{
	int sv[2];
	char buf[16] = { 0 };
	struct done s, rv;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	done_init(&s);
	done_init(&rv);
	/* The receive is queued first: it must wait for the data. */
	reactor_recv(&R, &rv.op, sv[1], buf, sizeof(buf), 0);
	reactor_poll(&R, 0);
	ck_assert_int_eq(rv.calls, 0);
	reactor_send(&R, &s.op, sv[0], "hello", 5, MSG_NOSIGNAL);
	wait_done(&R, &s);
	ck_assert_int_eq(s.res, 5);
	wait_done(&R, &rv);
	ck_assert_int_eq(rv.res, 5);
	ck_assert_mem_eq(buf, "hello", 5);
	/* The peer's close reads as 0, a send to a closed peer as -EPIPE. */
	close(sv[0]);
	done_init(&rv);
	reactor_recv(&R, &rv.op, sv[1], buf, sizeof(buf), 0);
	wait_done(&R, &rv);
	ck_assert_int_eq(rv.res, 0);
	done_init(&s);
	reactor_send(&R, &s.op, sv[1], "x", 1, MSG_NOSIGNAL);
	wait_done(&R, &s);
	ck_assert_int_eq(s.res, -EPIPE);
	close(sv[1]);
}
END_TEST

START_TEST(sendmsg_recvmsg_iovecs)
{
	int sv[2];
	char a[3] = "abc", b[4] = "defg", x[2], y[5];
	struct iovec siov[2] = { { a, 3 }, { b, 4 } }, riov[2] = { { x, 2 }, { y, 5 } };
	struct msghdr sm = { .msg_iov = siov, .msg_iovlen = 2 };
	struct msghdr rm = { .msg_iov = riov, .msg_iovlen = 2 };
	struct done s, rv;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	done_init(&s);
	done_init(&rv);
	reactor_sendmsg(&R, &s.op, sv[0], &sm, MSG_NOSIGNAL);
	wait_done(&R, &s);
	ck_assert_int_eq(s.res, 7);
	reactor_recvmsg(&R, &rv.op, sv[1], &rm, 0);
	wait_done(&R, &rv);
	ck_assert_int_eq(rv.res, 7);
	ck_assert_mem_eq(x, "ab", 2);
	ck_assert_mem_eq(y, "cdefg", 5);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(accept_and_connect)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in peer;
	socklen_t salen = sizeof(sa), peerlen = sizeof(peer);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct done ac, co;

	ck_assert_int_ge(lfd, 0);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sa, &salen), 0);
	done_init(&ac);
	done_init(&co);
	reactor_accept(&R, &ac.op, lfd, (struct sockaddr *)&peer, &peerlen, SOCK_CLOEXEC);
	reactor_poll(&R, 0);
	ck_assert_int_eq(ac.calls, 0);
	reactor_connect(&R, &co.op, cfd, (struct sockaddr *)&sa, salen);
	wait_done(&R, &co);
	ck_assert_int_eq(co.res, 0);
	wait_done(&R, &ac);
	ck_assert_int_ge(ac.res, 0);
	ck_assert_int_eq(peerlen, sizeof(peer));
	ck_assert_int_eq(peer.sin_family, AF_INET);
	ck_assert_int_eq(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	close(ac.res);
	close(cfd);

	/* A refused connection is the errno of connect(2). */
	cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	close(lfd);
	done_init(&co);
	reactor_connect(&R, &co.op, cfd, (struct sockaddr *)&sa, salen);
	wait_done(&R, &co);
	ck_assert_int_eq(co.res, -ECONNREFUSED);
	close(cfd);
}
END_TEST

START_TEST(read_and_poll)
{
	int efd = eventfd(0, EFD_CLOEXEC);
	uint64_t v = 0, three = 3;
	struct done rd, pl;

	ck_assert_int_ge(efd, 0);
	done_init(&pl);
	reactor_poll_fd(&R, &pl.op, efd, POLLIN);
	reactor_poll(&R, 0);
	ck_assert_int_eq(pl.calls, 0);
	ck_assert_int_eq(write(efd, &three, sizeof(three)), (int)sizeof(three));
	wait_done(&R, &pl);
	ck_assert(pl.res & POLLIN);
	done_init(&rd);
	reactor_read(&R, &rd.op, efd, &v, sizeof(v));
	wait_done(&R, &rd);
	ck_assert_int_eq(rd.res, (int)sizeof(v));
	ck_assert_uint_eq(v, 3);
	close(efd);
}
END_TEST

START_TEST(nop_completes_on_a_later_pass)
{
	struct done n;

	done_init(&n);
	reactor_nop(&R, &n.op);
	ck_assert_int_eq(n.calls, 0);
	wait_done(&R, &n);
	ck_assert_int_eq(n.res, 0);
}
END_TEST

/* A wait that fails at once, pass after pass (here the backend's
 * descriptor swapped for /dev/null: io_uring_enter answers EOPNOTSUPP,
 * epoll_wait EINVAL): the reactor pauses between passes and its line is
 * rate-limited, then carries on once the wait works again.  Before, each
 * pass logged and went round at once: 30 passes took no time and wrote a
 * line each (on epoll three: the wait's, the mailbox read's, epoll_ctl's). */
START_TEST(failing_wait_pauses)
{
	int fd = R.epfd, saved, null = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct log_capture cap;
	static char buf[16384];
	uint64_t t0, spent, before = R.nr_wait_failures;
	unsigned lines = 0;
	struct done n;

#ifndef GW_NO_IO_URING
	if (R.backend == REACTOR_IO_URING)
		fd = R.ring.ring_fd;
#endif
	saved = dup(fd);
	ck_assert_int_ge(null, 0);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(null, fd), fd);
	log_capture_begin(&cap);
	t0 = reactor_now_ns();
	for (int i = 0; i < 30; i++)
		reactor_poll(&R, 0);
	spent = reactor_now_ns() - t0;
	log_capture_end(&cap, buf, sizeof(buf));
	ck_assert_int_eq(dup3(saved, fd, O_CLOEXEC), fd);
	close(saved);
	close(null);
	for (const char *p = buf; *p; p++)
		if ((p == buf || p[-1] == '\n') && *p != '\n')
			lines++;
	ck_assert_msg(R.nr_wait_failures - before >= 30, "%llu failed waits counted, want 30",
		      (unsigned long long)(R.nr_wait_failures - before));
	ck_assert_msg(spent >= 30ull * REACTOR_WAIT_FAIL_PAUSE_MS * NSEC_PER_MSEC,
		      "30 failing passes took %llu us: no pause", (unsigned long long)(spent / 1000));
	/* Every line of the reactor limited: the wait's, and on epoll the
	 * mailbox read's and epoll_ctl's (each its own call site). */
	unsigned sites = R.backend == REACTOR_EPOLL ? 3 : 1;
	ck_assert_msg(lines <= sites * LOG_RL_BURST, "%u lines for 30 failed waits:\n%s", lines, buf);
	/* In a forked case the limit's count starts afresh: the failure is
	 * said. */
	const char *ck_fork = getenv("CK_FORK");
	if (!ck_fork || strcmp(ck_fork, "no"))
		ck_assert_msg(strstr(buf, R.backend == REACTOR_EPOLL ? "reactor 0: epoll_wait: "
								     : "reactor 0: io_uring_enter: "),
			      "the failed wait not logged:\n%s", buf);
	/* The same reactor works again. */
	done_init(&n);
	reactor_nop(&R, &n.op);
	wait_done(&R, &n);
	ck_assert_int_eq(n.res, 0);
}
END_TEST

START_TEST(cancel_a_pending_recv)
{
	int sv[2];
	char buf[8];
	struct done rv;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	done_init(&rv);
	reactor_recv(&R, &rv.op, sv[1], buf, sizeof(buf), 0);
	reactor_poll(&R, 0);
	ck_assert_int_eq(rv.calls, 0);
	reactor_cancel(&R, &rv.op);
	reactor_submit(&R);
	wait_done(&R, &rv);
	ck_assert_int_eq(rv.res, -ECANCELED);
	/* Nothing more arrives for it, nor for the cancellation itself. */
	reactor_poll(&R, 10 * NSEC_PER_MSEC);
	ck_assert_int_eq(rv.calls, 1);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Two reads in flight on one descriptor (the FUSE channel keeps several):
 * each takes one message, and neither blocks the loop. */
START_TEST(two_reads_in_flight)
{
	int sv[2];
	char a[4], b[4];
	struct done ra, rb;
	uint64_t deadline = reactor_now_ns() + 10 * NSEC_PER_SEC;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	done_init(&ra);
	done_init(&rb);
	reactor_read(&R, &ra.op, sv[1], a, sizeof(a));
	reactor_read(&R, &rb.op, sv[1], b, sizeof(b));
	reactor_poll(&R, 0);
	ck_assert_int_eq(ra.calls + rb.calls, 0);
	ck_assert_int_eq(write(sv[0], "one", 4), 4);
	ck_assert_int_eq(write(sv[0], "two", 4), 4);
	while (ra.calls + rb.calls < 2 && reactor_now_ns() < deadline)
		reactor_poll(&R, 100 * NSEC_PER_MSEC);
	ck_assert_int_eq(ra.calls, 1);
	ck_assert_int_eq(rb.calls, 1);
	ck_assert_int_eq(ra.res, 4);
	ck_assert_int_eq(rb.res, 4);
	ck_assert(!strcmp(a, "one") ? !strcmp(b, "two") : !strcmp(a, "two") && !strcmp(b, "one"));
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* A descriptor closed while nothing waits on it, and its number handed to
 * a new socket: a receive on the new one must still see its data (epoll
 * dropped the old file from its set when it closed). */
START_TEST(reused_descriptor_number)
{
	int a[2], b[2];
	char buf[8];
	struct done rv;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
	done_init(&rv);
	reactor_recv(&R, &rv.op, a[1], buf, sizeof(buf), 0);
	reactor_poll(&R, 0);
	ck_assert_int_eq(write(a[0], "x", 1), 1);
	wait_done(&R, &rv);
	ck_assert_int_eq(rv.res, 1);
	close(a[0]);
	close(a[1]);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b), 0);
	ck_assert(b[0] == a[1] || b[1] == a[1]);
	int rfd = b[0] == a[1] ? b[0] : b[1], wfd = rfd == b[0] ? b[1] : b[0];
	done_init(&rv);
	reactor_recv(&R, &rv.op, rfd, buf, sizeof(buf), 0);
	reactor_poll(&R, 0);
	ck_assert_int_eq(rv.calls, 0);
	ck_assert_int_eq(write(wfd, "yz", 2), 2);
	wait_done(&R, &rv);
	ck_assert_int_eq(rv.res, 2);
	close(b[0]);
	close(b[1]);
}
END_TEST

struct tick {
	struct reactor_timer t;
	int fired;
};

static void tick_fn(struct reactor_timer *t)
{
	container_of(t, struct tick, t)->fired++;
}

START_TEST(timer_bounds_the_wait)
{
	struct tick k = { 0 };
	uint64_t t0 = reactor_now_ns(), deadline = t0 + 10 * NSEC_PER_SEC;

	reactor_timer_init(&k.t, tick_fn);
	reactor_timer_arm(&R, &k.t, 20 * NSEC_PER_MSEC);
	/* An unbounded wait must still return for the timer. */
	while (!k.fired && reactor_now_ns() < deadline)
		reactor_poll(&R, UINT64_MAX);
	ck_assert_int_eq(k.fired, 1);
	ck_assert_uint_ge(reactor_now_ns() - t0, 20 * NSEC_PER_MSEC);
}
END_TEST

struct hello {
	struct reactor_msg m;
	int ran;
};

static void hello_fn(struct reactor_msg *m)
{
	container_of(m, struct hello, m)->ran++;
}

START_TEST(message_wakes_the_reactor)
{
	struct hello h = { .m.fn = hello_fn };
	uint64_t deadline = reactor_now_ns() + 10 * NSEC_PER_SEC;

	reactor_send_msg(&R, &h.m);
	while (!h.ran && reactor_now_ns() < deadline)
		reactor_poll(&R, UINT64_MAX);
	ck_assert_int_eq(h.ran, 1);
}
END_TEST

/* A reactor finished without reactor_stop() (an error path, a test) must
 * not re-arm its mailbox read while reaping it: it would leave a read in
 * flight on the eventfd about to be closed, after a second of retrying. */
START_TEST(fini_reaps_the_mailbox)
{
	struct reactor r;

	ck_assert_int_eq(reactor_init(&r, 1, 8), 0);
	ck_assert_str_eq(reactor_backend_name(&r), reactor_backend_name(&R));
	reactor_poll(&r, 0);
	ck_assert(r.mbox_armed);
	reactor_fini(&r);
	ck_assert(!r.mbox_armed);
}
END_TEST

static void *poster(void *arg)
{
	reactor_send_msg(&R, arg);
	return NULL;
}

/* The cross-thread wakeup: a reactor blocked without a bound wakes for a
 * message posted by another thread. */
START_TEST(message_from_another_thread)
{
	struct hello h = { .m.fn = hello_fn };
	uint64_t deadline = reactor_now_ns() + 10 * NSEC_PER_SEC;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, poster, &h.m), 0);
	while (!h.ran && reactor_now_ns() < deadline)
		reactor_poll(&R, UINT64_MAX);
	pthread_join(t, NULL);
	ck_assert_int_eq(h.ran, 1);
}
END_TEST

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* Opens the window: a pass that ran a completion. */
static void one_completion(void)
{
	struct done n;

	done_init(&n);
	reactor_nop(&R, &n.op);
	wait_done(&R, &n);
}

static void *send_one(void *arg)
{
	ck_assert_int_eq(send(*(int *)arg, "x", 1, MSG_NOSIGNAL), 1);
	return NULL;
}

/* A completion that arrives inside the window is taken by the spin, not
 * by a wakeup.  The peer is another thread, so a busy host can delay it
 * past a window: one hit in twenty tries is the claim. */
START_TEST(spin_takes_a_completion)
{
	struct reactor_spin_stats st;
	int sv[2];
	char c;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	R.poll_ns = 100 * NSEC_PER_MSEC;
	for (int i = 0; i < 20; i++) {
		struct done rv;
		pthread_t t;

		done_init(&rv);
		reactor_recv(&R, &rv.op, sv[1], &c, 1, 0);
		one_completion();
		ck_assert_int_eq(pthread_create(&t, NULL, send_one, &sv[0]), 0);
		wait_done(&R, &rv);
		pthread_join(t, NULL);
		ck_assert_int_eq(rv.res, 1);
		reactor_spin_stats(&R, &st);
		if (st.hits)
			break;
	}
	ck_assert_uint_ge(st.hits, 1);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* After a window with nothing to do the reactor sleeps: the spin ends at
 * the window, the rest of the wait costs no CPU, and the next wait does
 * not spin at all (an idle gateway costs nothing, poll_us or not). */
START_TEST(idle_reactor_sleeps)
{
	struct reactor_spin_stats st0, st1, st2;
	uint64_t cpu0, cpu1, t0;

	R.poll_ns = 2 * NSEC_PER_MSEC;
	/* The window begins at the completion: a test thread preempted for
	 * longer than it before the poll (two unit binaries at once on a
	 * loaded host did it) finds it over and nothing spins, and one
	 * preempted for part of it spins only the rest (0.56 ms of the 2 in
	 * a clean make test).  Then again: a window that always ends early
	 * still fails after 20 tries. */
	for (int tries = 0;; tries++) {
		one_completion();
		reactor_spin_stats(&R, &st0);
		t0 = reactor_now_ns();
		cpu0 = thread_cpu_ns();
		reactor_poll(&R, 100 * NSEC_PER_MSEC);
		reactor_spin_stats(&R, &st1);
		if ((st1.misses == st0.misses + 1 && st1.spin_ns - st0.spin_ns >= NSEC_PER_MSEC) ||
		    tries == 20)
			break;
		if (st1.misses == st0.misses)
			ck_assert_uint_eq(st1.spin_ns, st0.spin_ns);
		else
			ck_assert_uint_eq(st1.misses, st0.misses + 1);
	}
	ck_assert_uint_eq(st1.misses, st0.misses + 1);
	ck_assert_uint_eq(st1.hits, st0.hits);
	/* To the window's end, which began at that completion. */
	ck_assert_uint_ge(st1.spin_ns - st0.spin_ns, NSEC_PER_MSEC);
	/* The wait went on, asleep, to its bound. */
	ck_assert_uint_ge(reactor_now_ns() - t0, 100 * NSEC_PER_MSEC);
	cpu1 = thread_cpu_ns();
	reactor_poll(&R, 200 * NSEC_PER_MSEC);
	reactor_spin_stats(&R, &st2);
	ck_assert_uint_eq(st2.misses, st1.misses);
	ck_assert_uint_eq(st2.spin_ns, st1.spin_ns);
	/* 200 ms asleep: far less than the time, whatever the host does. */
	ck_assert_uint_lt(thread_cpu_ns() - cpu1, 50 * NSEC_PER_MSEC);
	(void)cpu0;
}
END_TEST

/* A poll that asks for no events waits for POLLERR/POLLHUP alone (the
 * FUSE session's watch on /dev/fuse while its reads are parked, the
 * descriptor readable all along): readability must not wake the reactor.
 * io_uring's POLL_ADD with mask 0 sleeps; the epoll backend registered
 * EPOLLIN for every poll and spun (200k passes in 200 ms).  The hang-up
 * still ends it.  Bounds a busy host only makes easier: passes of a
 * 50 ms wait, and CPU time, over 200 ms. */
START_TEST(poll_for_errors_only_sleeps)
{
	int p[2];
	struct done pl;
	uint64_t cpu0, t0;
	unsigned passes = 0;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	done_init(&pl);
	reactor_poll_fd(&R, &pl.op, p[0], 0);
	t0 = reactor_now_ns();
	cpu0 = thread_cpu_ns();
	while (reactor_now_ns() - t0 < 200 * NSEC_PER_MSEC) {
		reactor_poll(&R, 50 * NSEC_PER_MSEC);
		passes++;
	}
	ck_assert_int_eq(pl.calls, 0);
	ck_assert_msg(passes < 100, "%u passes of a 50 ms wait in 200 ms: the reactor spins",
		      passes);
	ck_assert_uint_lt(thread_cpu_ns() - cpu0, 100 * NSEC_PER_MSEC);
	close(p[1]);
	wait_done(&R, &pl);
	ck_assert(pl.res & POLLHUP);
	close(p[0]);
}
END_TEST

/* A timer due inside the window ends the spin and runs in the same pass:
 * the window never delays a deadline. */
START_TEST(timer_ends_the_spin)
{
	struct tick k = { 0 };
	struct reactor_spin_stats st;

	R.poll_ns = 100 * NSEC_PER_MSEC;
	reactor_timer_init(&k.t, tick_fn);
	one_completion();
	reactor_timer_arm(&R, &k.t, 5 * NSEC_PER_MSEC);
	reactor_poll(&R, UINT64_MAX);
	ck_assert_int_eq(k.fired, 1);
	reactor_spin_stats(&R, &st);
	ck_assert_uint_ge(st.misses, 1);
}
END_TEST


/* A timer due inside the window runs on time: timer_ends_the_spin only
 * checks that it ran in the same pass, which it also does after a spin
 * that ignored it for the whole window. */
START_TEST(timer_on_time_in_window)
{
	struct tick k = { 0 };
	uint64_t t0;

	R.poll_ns = 200 * NSEC_PER_MSEC;
	reactor_timer_init(&k.t, tick_fn);
	one_completion();
	reactor_timer_arm(&R, &k.t, 5 * NSEC_PER_MSEC);
	t0 = reactor_now_ns();
	reactor_poll(&R, UINT64_MAX);
	ck_assert_int_eq(k.fired, 1);
	ck_assert_uint_lt(reactor_now_ns() - t0, 100 * NSEC_PER_MSEC);
}
END_TEST

/* What was queued before the pass goes to the kernel at the spin's start,
 * not at the window's end. */
START_TEST(queued_before_spin_runs_at_once)
{
	struct done n;
	uint64_t t0;

	R.poll_ns = 200 * NSEC_PER_MSEC;
	one_completion();
	done_init(&n);
	reactor_nop(&R, &n.op);
	t0 = reactor_now_ns();
	reactor_poll(&R, UINT64_MAX);
	ck_assert_int_eq(n.calls, 1);
	ck_assert_uint_lt(reactor_now_ns() - t0, 100 * NSEC_PER_MSEC);
}
END_TEST

static void *stop_later(void *arg)
{
	usleep(20000);
	/* As a stop_msg would, minus the wakeup: what the spin's own
	 * !r->stop check is there for. */
	__atomic_store_n(&((struct reactor *)arg)->stop, true, __ATOMIC_RELAXED);
	return NULL;
}

/* The spin checks r->stop and ends on it; the pass then must not sleep
 * for the rest of its bound (reactor_poll zeroes the wait for a stop seen
 * before it, not for one the spin saw). */
START_TEST(stop_seen_by_spin_ends_the_pass)
{
	pthread_t t;
	uint64_t t0;

	R.poll_ns = 500 * NSEC_PER_MSEC;
	one_completion();
	ck_assert_int_eq(pthread_create(&t, NULL, stop_later, &R), 0);
	t0 = reactor_now_ns();
	reactor_poll(&R, 2 * NSEC_PER_SEC);
	pthread_join(t, NULL);
	ck_assert(R.stop);
	ck_assert_uint_lt(reactor_now_ns() - t0, 400 * NSEC_PER_MSEC);
}
END_TEST

#ifndef GW_NO_IO_URING
/* More completions than the CQ holds (a burst: the kernel keeps the rest
 * on its overflow list, and while that list is not empty every new
 * completion goes there too).  Only io_uring_enter(GETEVENTS) moves them
 * to the ring: a spin that only watched the ring (and entered the kernel
 * only with SQEs to submit) was blind for the whole window. */
START_TEST(cq_overflow_not_stalled_by_spin)
{
	enum { N = 200 };
	static struct done d[N];
	unsigned done = 0;
	uint64_t t0;

	R.poll_ns = 300 * NSEC_PER_MSEC;
	one_completion();
	for (int i = 0; i < N; i++) {
		done_init(&d[i]);
		reactor_nop(&R, &d[i].op); /* submits by itself each time the SQ fills */
	}
	t0 = reactor_now_ns();
	for (int pass = 0; pass < 50 && done < N; pass++) {
		reactor_poll(&R, UINT64_MAX);
		done = 0;
		for (int i = 0; i < N; i++)
			done += (unsigned)d[i].calls;
	}
	ck_assert_uint_eq(done, N);
	/* Without the window: a few passes, well under a millisecond. */
	ck_assert_uint_lt(reactor_now_ns() - t0, 100 * NSEC_PER_MSEC);
}
END_TEST

/* Before 5.11 a bounded wait is a timeout request of liburing's own
 * (user_data LIBURING_UDATA_TIMEOUT).  A wait that ends at once (a
 * completion already there) leaves it armed; when it fires inside a later
 * window it is no hit: counted, it ran nothing, yet ended the spin,
 * skipped the wait and opened a new window. */
START_TEST(liburing_timeout_is_no_hit)
{
	struct reactor_spin_stats st0, st1;
	struct done n;

	R.poll_ns = 60 * NSEC_PER_MSEC;
	done_init(&n);
	reactor_nop(&R, &n.op);
	reactor_submit(&R);		  /* its CQE is in the ring before the wait */
	reactor_poll(&R, 10 * NSEC_PER_MSEC); /* arms liburing's 10 ms timeout, returns at once */
	ck_assert_int_eq(n.calls, 1);
	reactor_spin_stats(&R, &st0);
	reactor_poll(&R, 200 * NSEC_PER_MSEC); /* spins: the timeout fires at ~10 ms */
	reactor_spin_stats(&R, &st1);
	ck_assert_uint_eq(st1.hits, st0.hits);
	ck_assert_uint_eq(st1.misses, st0.misses + 1);
}
END_TEST


/* Each CQE leaves the ring before its callback runs, so that a batch
 * frees CQ space as it goes: the completions a callback's own operations
 * produce then land in the ring, not on the overflow list (which before
 * 5.19 makes the next submit fail with EBUSY). */
enum { SEEN_N = 3 };
static unsigned seen_ready[SEEN_N], seen_calls;

static void seen_fn(struct reactor_op *op, int res, uint32_t flags)
{
	(void)op;
	(void)res;
	(void)flags;
	if (seen_calls < SEEN_N)
		seen_ready[seen_calls] = io_uring_cq_ready(&R.ring);
	seen_calls++;
}

START_TEST(cqe_leaves_the_ring_before_its_callback)
{
	struct reactor_op ops[SEEN_N];

	seen_calls = 0;
	for (int i = 0; i < SEEN_N; i++) {
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].fn = seen_fn;
		reactor_nop(&R, &ops[i]);
	}
	reactor_submit(&R); /* all three CQEs are in the ring before the pass */
	reactor_poll(&R, UINT64_MAX);
	ck_assert_uint_eq(seen_calls, SEEN_N);
	for (unsigned i = 0; i < SEEN_N; i++)
		ck_assert_uint_eq(seen_ready[i], SEEN_N - 1 - i);
}
END_TEST

/* A mass event on a tiny ring: 40 completions overflow a 16-entry CQ, and
 * each callback queues another operation into a 4-entry SQ that the kernel
 * refuses to take (EBUSY: a kernel before 5.19 whose overflowed CQ it
 * cannot flush; EAGAIN: memory pressure).  reactor_sqe aborted there,
 * taking every export with it.  Now the operations wait in user space and
 * reach the kernel, in the order they were queued, at the next submit. */
enum { CHAINS = 40 };
struct chain_op {
	struct reactor_op op;
	struct reactor *r;
	struct chain_op *next; /* queued by this one's callback */
	unsigned seq;	       /* queue order */
	int calls;
	int res;
};
static struct chain_op heads[CHAINS], tails[CHAINS];
static unsigned chain_queued, chain_done, chain_misordered;

static void chain_queue(struct reactor *r, struct chain_op *c)
{
	c->r = r;
	c->seq = chain_queued++;
	reactor_nop(r, &c->op);
}

static void chain_fn(struct reactor_op *op, int res, uint32_t flags)
{
	struct chain_op *c = container_of(op, struct chain_op, op);

	(void)flags;
	c->calls++;
	c->res = res;
	if (c->seq != chain_done)
		chain_misordered++;
	chain_done++;
	if (c->next)
		chain_queue(c->r, c->next);
}

static void chains_run(unsigned poll_us, unsigned fail_submits)
{
	struct reactor r;
	uint64_t deadline;

	reactor_set_poll_us(poll_us);
	reactor_set_backend_mode(REACTOR_FORCE_IO_URING);
	ck_assert_int_eq(reactor_init(&r, 1, 4), 0);
	ck_assert_str_eq(reactor_backend_name(&r), "io_uring");
	chain_queued = chain_done = chain_misordered = 0;
	memset(heads, 0, sizeof(heads));
	memset(tails, 0, sizeof(tails));
	for (int i = 0; i < CHAINS; i++) {
		heads[i].op.fn = tails[i].op.fn = chain_fn;
		heads[i].next = &tails[i];
		chain_queue(&r, &heads[i]); /* the SQ fills: submitted 4 at a time */
	}
	/* The heads overflowed the CQ; from here the submits that would free
	 * the full SQ for the tails are refused (the loop's own still go
	 * through, as the kernel's would once the CQ has room again). */
	reactor_test_fail_submits(&r, fail_submits);
	deadline = reactor_now_ns() + 10 * NSEC_PER_SEC;
	while (chain_done < 2 * CHAINS && reactor_now_ns() < deadline)
		reactor_poll(&r, 100 * NSEC_PER_MSEC);
	/* Nothing more comes on later passes. */
	for (int i = 0; i < 3; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_msg(r.test_fail_submits < fail_submits,
		      "poll_us %u: no submit was refused: the backlog was not exercised", poll_us);
	ck_assert_uint_eq(chain_queued, 2 * CHAINS);
	ck_assert_uint_eq(chain_done, 2 * CHAINS);
	for (int i = 0; i < CHAINS; i++) {
		ck_assert_int_eq(heads[i].calls, 1);
		ck_assert_int_eq(tails[i].calls, 1);
		ck_assert_int_eq(heads[i].res, 0);
		ck_assert_int_eq(tails[i].res, 0);
	}
	ck_assert_msg(chain_misordered == 0, "poll_us %u, %u refused: %u completions out of queue order",
		      poll_us, fail_submits, chain_misordered);
	ck_assert_uint_eq(r.pending_submit, 0);
	reactor_fini(&r);
	reactor_set_poll_us(0);
}

START_TEST(sq_full_and_refused_keeps_every_op)
{
	/* Every refusal (the backlog only drains at the loop's own submit,
	 * a ring's worth per pass, and the SQ has room while operations still
	 * wait: new ones must queue behind them), and two (the backlog also
	 * drains from an operation call), with and without the window. */
	chains_run(0, 1000);
	chains_run(0, 2);
	chains_run(200, 1000);
	chains_run(200, 2);
}
END_TEST

#endif

/* Whether the kernel lets a reactor have io_uring here. */
static bool io_uring_usable(void)
{
	struct reactor r;

	reactor_set_backend_mode(REACTOR_FORCE_IO_URING);
	if (reactor_init(&r, 9, 4) < 0)
		return false;
	reactor_fini(&r);
	return true;
}

static void add_contract(TCase *tc)
{
	tcase_add_test(tc, send_then_recv);
	tcase_add_test(tc, sendmsg_recvmsg_iovecs);
	tcase_add_test(tc, accept_and_connect);
	tcase_add_test(tc, read_and_poll);
	tcase_add_test(tc, nop_completes_on_a_later_pass);
	tcase_add_test(tc, cancel_a_pending_recv);
	tcase_add_test(tc, two_reads_in_flight);
	tcase_add_test(tc, reused_descriptor_number);
	tcase_add_test(tc, timer_bounds_the_wait);
	tcase_add_test(tc, message_wakes_the_reactor);
	tcase_add_test(tc, message_from_another_thread);
	tcase_add_test(tc, fini_reaps_the_mailbox);
	tcase_add_test(tc, poll_for_errors_only_sleeps);
	tcase_add_test(tc, failing_wait_pauses);
	tcase_set_timeout(tc, 30);
}

static void add_poll(TCase *tc)
{
	add_contract(tc);
	tcase_add_test(tc, spin_takes_a_completion);
	tcase_add_test(tc, idle_reactor_sleeps);
	tcase_add_test(tc, timer_ends_the_spin);
	tcase_add_test(tc, timer_on_time_in_window);
	tcase_add_test(tc, queued_before_spin_runs_at_once);
	tcase_add_test(tc, stop_seen_by_spin_ends_the_pass);
}

int main(void)
{
	Suite *s = suite_create("reactor");
	TCase *tc;
	SRunner *sr;
	int failed;

	/* Each case picks its backend: a suite forcing one must not. */
	unsetenv(REACTOR_BACKEND_ENV);
	/* The epoll backend runs where io_uring does not: only the io_uring
	 * case needs it. */
	tc = tcase_create("epoll");
	tcase_add_checked_fixture(tc, setup_epoll, teardown);
	add_contract(tc);
	suite_add_tcase(s, tc);
	tc = tcase_create("epoll_poll");
	tcase_add_checked_fixture(tc, setup_epoll_poll, teardown);
	add_poll(tc);
	suite_add_tcase(s, tc);
	if (io_uring_usable()) {
		tc = tcase_create("io_uring");
		tcase_add_checked_fixture(tc, setup_uring, teardown);
		add_contract(tc);
		suite_add_tcase(s, tc);
		tc = tcase_create("io_uring_poll");
		tcase_add_checked_fixture(tc, setup_uring_poll, teardown);
		add_poll(tc);
		suite_add_tcase(s, tc);
#ifndef GW_NO_IO_URING
		tc = tcase_create("io_uring_before_5_11");
		tcase_add_checked_fixture(tc, setup_uring_no_ext_arg, teardown);
		add_contract(tc);
		tcase_add_test(tc, bounded_waits_between_operations);
		suite_add_tcase(s, tc);
		tc = tcase_create("io_uring_backlog");
		tcase_add_checked_fixture(tc, setup_uring, teardown);
		tcase_add_test(tc, cqe_leaves_the_ring_before_its_callback);
		tcase_add_test(tc, sq_full_and_refused_keeps_every_op);
		tcase_set_timeout(tc, 60);
		suite_add_tcase(s, tc);
		tc = tcase_create("io_uring_poll_overflow");
		tcase_add_checked_fixture(tc, setup_uring_poll, teardown);
		tcase_add_test(tc, cq_overflow_not_stalled_by_spin);
		suite_add_tcase(s, tc);
		/* The pre-5.11 wait path under a window. */
		tc = tcase_create("io_uring_before_5_11_poll");
		tcase_add_checked_fixture(tc, setup_uring_no_ext_arg_poll, teardown);
		add_poll(tc);
		tcase_add_test(tc, bounded_waits_between_operations);
		tcase_add_test(tc, liburing_timeout_is_no_hit);
		tcase_add_test(tc, cq_overflow_not_stalled_by_spin);
		suite_add_tcase(s, tc);
#endif
	} else {
		printf("test_reactor: io_uring refused here: its case is not run\n");
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
