/* The notify protocol against a socket of the test's own, as systemd
 * would receive it. */
#include "gateway/base/notify.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int listener(const char *name, int abstract)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	size_t len = strlen(name);

	ck_assert_int_ge(fd, 0);
	memcpy(sa.sun_path, name, len);
	if (abstract)
		sa.sun_path[0] = 0;
	else
		unlink(name);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)), 0);
	return fd;
}

static void expect(int fd, const char *want)
{
	char buf[600];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_str_eq(buf, want);
}

START_TEST(unset_is_noop)
{
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(notify_send("READY=1"), 0);
}
END_TEST

START_TEST(path_socket)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/gw-notify-%d.sock", (int)getpid());
	int fd = listener(path, 0);
	setenv("NOTIFY_SOCKET", path, 1);
	ck_assert_int_eq(notify_send("READY=1\nSTATUS=2 exports"), 1);
	expect(fd, "READY=1\nSTATUS=2 exports");
	ck_assert_int_eq(notify_sendf("STATUS=%u of %u", 1u, 2u), 1);
	expect(fd, "STATUS=1 of 2");
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(abstract_socket)
{
	char name[64];
	snprintf(name, sizeof(name), "@gw-notify-test-%d", (int)getpid());
	int fd = listener(name, 1);
	setenv("NOTIFY_SOCKET", name, 1);
	ck_assert_int_eq(notify_send("WATCHDOG=1"), 1);
	expect(fd, "WATCHDOG=1");
	close(fd);
}
END_TEST

START_TEST(bad_socket)
{
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	ck_assert_int_eq(notify_send("READY=1"), -EINVAL);
	setenv("NOTIFY_SOCKET", "/nonexistent/dir/sock", 1);
	ck_assert_int_lt(notify_send("READY=1"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, unset_is_noop);
	tcase_add_test(tc, path_socket);
	tcase_add_test(tc, abstract_socket);
	tcase_add_test(tc, bad_socket);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
