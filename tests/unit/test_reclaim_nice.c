/* --nice N|off (gateway/base/reclaim.c): the range of setpriority, "off",
 * and nothing else; a refused value leaves the options as they were.
 * reclaim_renice: every thread of the process moves (nice is per thread),
 * and a thread already there is left alone without a setpriority, which
 * the shipped unit's seccomp filter refuses (checked under such a filter,
 * in a child). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/base/reclaim.h"
#include "tests/lib/seccomp_deny.h"

START_TEST(values)
{
	struct reclaim_opts o = RECLAIM_OPTS_DEFAULT;

	ck_assert(o.renice);
	ck_assert_int_eq(o.nice, -20);
	ck_assert_int_eq(reclaim_parse_nice("19", &o), 0);
	ck_assert(o.renice);
	ck_assert_int_eq(o.nice, 19);
	ck_assert_int_eq(reclaim_parse_nice("-20", &o), 0);
	ck_assert_int_eq(o.nice, -20);
	ck_assert_int_eq(reclaim_parse_nice("0", &o), 0);
	ck_assert_int_eq(o.nice, 0);
	ck_assert_int_eq(reclaim_parse_nice("off", &o), 0);
	ck_assert(!o.renice);
	ck_assert_int_eq(reclaim_parse_nice("-5", &o), 0);
	ck_assert(o.renice);
	ck_assert_int_eq(o.nice, -5);
}
END_TEST

START_TEST(refused)
{
	static const char *const bad[] = { "20", "-21", "", "x", "5x", " 5", "off ", "OFF",
					   "99999999999999999999", "-0x5" };
	struct reclaim_opts o = RECLAIM_OPTS_DEFAULT;

	o.nice = 7;
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(reclaim_parse_nice(bad[i], &o) == -EINVAL, "'%s' taken", bad[i]);
		ck_assert(o.renice);
		ck_assert_int_eq(o.nice, 7);
	}
}
END_TEST

START_TEST(off_opts_leave_priority)
{
	struct reclaim_opts o = RECLAIM_OPTS_OFF;

	ck_assert(!o.renice && !o.mlock && !o.io_flusher && !o.oom);
}
END_TEST

static void *idle_thread(void *arg)
{
	int *tid = arg;

	__atomic_store_n(tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	pause();
	return NULL;
}

static int nice_of(int tid)
{
	errno = 0;
	int v = getpriority(PRIO_PROCESS, (id_t)tid);
	ck_assert_int_eq(errno, 0);
	return v;
}

/* In a child (the filter and the new nice stay there): a second thread,
 * both moved to 5 by one call; then, with setpriority refused as the
 * unit's filter refuses it (EPERM), 5 again asks nothing of it and
 * succeeds, 6 fails. */
START_TEST(every_thread_and_seccomp)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		pthread_t th;
		int tid = 0;
		if (pthread_create(&th, NULL, idle_thread, &tid))
			_exit(10);
		while (!__atomic_load_n(&tid, __ATOMIC_ACQUIRE))
			usleep(1000);
		if (reclaim_renice(5) != 0)
			_exit(11);
		if (nice_of(0) != 5 || nice_of(tid) != 5)
			_exit(12);
		if (seccomp_deny(__NR_setpriority, EPERM) < 0)
			_exit(13);
		if (setpriority(PRIO_PROCESS, 0, 5) == 0 || errno != EPERM)
			_exit(14); /* the filter is not in place: the test proves nothing */
		if (reclaim_renice(5) != 0)
			_exit(15); /* every thread already at 5: no call, no failure */
		if (reclaim_renice(6) != -EPERM)
			_exit(16);
		if (nice_of(0) != 5 || nice_of(tid) != 5)
			_exit(17);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed at step %d",
		      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reclaim_nice");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, values);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, off_opts_leave_priority);
	tcase_add_test(tc, every_thread_and_seccomp);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
