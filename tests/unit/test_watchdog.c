/* The watchdog: the ping decision on made-up stamps, the environment
 * systemd sets, and two real reactors pinging a socket of the test's own,
 * where blocking one reactor must stop the pings and releasing it must
 * bring them back.  No assertion rests on the machine being fast: a
 * blocked reactor stays blocked however slow the machine is. */
#include "gateway/watchdog.h"
#include "gateway/base/reactor.h"
#include "unit_skip.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MS NSEC_PER_MSEC

START_TEST(decision)
{
	uint64_t now = 10000 * MS;
	uint64_t st[3] = { now - 10 * MS, now - 50 * MS, now };
	unsigned stale = 99;

	ck_assert(watchdog_all_fresh(st, 3, now, 100 * MS, &stale));
	ck_assert_uint_eq(stale, 99);
	/* Exactly max_age old is still fresh; one ns more is not. */
	st[1] = now - 100 * MS;
	ck_assert(watchdog_all_fresh(st, 3, now, 100 * MS, &stale));
	st[1] = now - 100 * MS - 1;
	ck_assert(!watchdog_all_fresh(st, 3, now, 100 * MS, &stale));
	ck_assert_uint_eq(stale, 1);
	/* The first stale one is named. */
	st[0] = 0;
	ck_assert(!watchdog_all_fresh(st, 3, now, 100 * MS, &stale));
	ck_assert_uint_eq(stale, 0);
	/* A stamp taken after our clock read (another thread) is fresh. */
	uint64_t fut[2] = { now + 5 * MS, now };
	ck_assert(watchdog_all_fresh(fut, 2, now, 100 * MS, NULL));
	/* One reactor only, and none. */
	ck_assert(!watchdog_all_fresh(st, 1, now, 100 * MS, NULL));
	ck_assert(watchdog_all_fresh(st, 0, now, 100 * MS, NULL));
}
END_TEST

START_TEST(environment)
{
	char pid[32];
	uint64_t us = 7;

	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	ck_assert_int_eq(watchdog_period_from_env(&us), 0);
	ck_assert_uint_eq(us, 0);
	setenv("WATCHDOG_USEC", "30000000", 1);
	ck_assert_int_eq(watchdog_period_from_env(&us), 0);
	ck_assert_uint_eq(us, 30000000);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	ck_assert_int_eq(watchdog_period_from_env(&us), 0);
	ck_assert_uint_eq(us, 30000000);
	/* Meant for another process: off. */
	snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1);
	ck_assert_int_eq(watchdog_period_from_env(&us), 0);
	ck_assert_uint_eq(us, 0);
	unsetenv("WATCHDOG_PID");
	const char *bad[] = { "", "0", "-5", "12x", "99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("WATCHDOG_USEC", bad[i], 1);
		us = 7;
		ck_assert_int_eq(watchdog_period_from_env(&us), -EINVAL);
		ck_assert_uint_eq(us, 0);
	}
	setenv("WATCHDOG_USEC", "400000", 1);
	setenv("WATCHDOG_PID", "abc", 1);
	ck_assert_int_eq(watchdog_period_from_env(&us), -EINVAL);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}
END_TEST

START_TEST(off_when_zero)
{
	struct reactor r;
	struct watchdog *wd = (void *)1;

	ck_assert_int_eq(reactor_init(&r, 0, 8), 0);
	ck_assert_int_eq(watchdog_start(&r, 1, 0, &wd), 0);
	ck_assert_ptr_null(wd);
	ck_assert(list_empty(&r.timers));
	watchdog_free(NULL);
	reactor_fini(&r);
}
END_TEST

/* ---- two live reactors ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool blocked, release;
} gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };

static void block_here(struct reactor_msg *m)
{
	(void)m;
	pthread_mutex_lock(&gate.lock);
	gate.blocked = true;
	pthread_cond_broadcast(&gate.cond);
	while (!gate.release)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
}

static struct reactor *stop_target;
static void stop_here(struct reactor_msg *m)
{
	(void)m;
	reactor_stop(stop_target);
}

static int pings(int fd)
{
	char buf[64];
	ssize_t n;
	int count = 0;

	while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		buf[n] = 0;
		ck_assert_str_eq(buf, "WATCHDOG=1");
		count++;
	}
	return count;
}

/* Runs reactor 0 for ms milliseconds. */
static void run0(struct reactor *r, unsigned ms)
{
	uint64_t end = reactor_now_ns() + ms * MS;
	while (reactor_now_ns() < end)
		reactor_poll(r, 10 * MS);
}

START_TEST(stuck_reactor_stops_pings)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char name[64];
	struct reactor r[2];
	struct watchdog *wd;
	struct reactor_msg blk = { .fn = block_here }, stop = { .fn = stop_here };
	int fd, got;

	snprintf(name, sizeof(name), "@gw-watchdog-test-%d", (int)getpid());
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	ck_assert_int_ge(fd, 0);
	memcpy(sa.sun_path, name, strlen(name));
	sa.sun_path[0] = 0;
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name))), 0);
	setenv("NOTIFY_SOCKET", name, 1);

	ck_assert_int_eq(reactor_init(&r[0], 0, 8), 0);
	ck_assert_int_eq(reactor_init(&r[1], 1, 8), 0);
	/* 200 ms: a tick every 50 ms, stale after 100 ms. */
	ck_assert_int_eq(watchdog_start(r, 2, 200000, &wd), 0);
	ck_assert_ptr_nonnull(wd);
	ck_assert_int_eq(reactor_start_thread(&r[1]), 0);

	/* Both run: pings come (bounded only by a generous 20 s). */
	got = 0;
	for (int i = 0; i < 200 && got < 3; i++) {
		run0(&r[0], 100);
		got += pings(fd);
	}
	ck_assert_int_ge(got, 3);

	/* Reactor 1 stuck in a callback. */
	reactor_send_msg(&r[1], &blk);
	pthread_mutex_lock(&gate.lock);
	while (!gate.blocked)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
	/* Pings already on their way when it blocked are dropped; after
	 * 300 ms its stamp is surely older than 100 ms and stays so. */
	run0(&r[0], 300);
	pings(fd);
	uint64_t before = watchdog_pings(wd);
	run0(&r[0], 600);
	ck_assert_int_eq(pings(fd), 0);
	ck_assert_uint_eq(watchdog_pings(wd), before);

	/* Released: the pings come back. */
	pthread_mutex_lock(&gate.lock);
	gate.release = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
	got = 0;
	for (int i = 0; i < 200 && got < 2; i++) {
		run0(&r[0], 100);
		got += pings(fd);
	}
	ck_assert_int_ge(got, 2);

	stop_target = &r[1];
	reactor_send_msg(&r[1], &stop);
	reactor_join(&r[1]);
	watchdog_free(wd);
	reactor_fini(&r[0]);
	reactor_fini(&r[1]);
	unsetenv("NOTIFY_SOCKET");
	close(fd);
}
END_TEST

int main(void)
{
	unit_need_io_uring();
	Suite *s = suite_create("watchdog");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, decision);
	tcase_add_test(tc, environment);
	tcase_add_test(tc, off_when_zero);
	tcase_add_test(tc, stuck_reactor_stops_pings);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
