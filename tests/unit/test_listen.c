/* Unix listeners (gateway/base/listen.c): a stale socket file is replaced,
 * a live server's never, and telling the two apart does not wait on a
 * server that does not accept. */
#include "gateway/base/listen.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static char dir[] = "/tmp/test_listen.XXXXXX";
static char path[128];

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
}

/* A socket listening at path, with backlog. */
static int listener(int backlog)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(a.sun_path, path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, backlog), 0);
	return fd;
}

static int dial(int flags)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | flags, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(a.sun_path, path);
	ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect: %s",
		      strerror(errno));
	return fd;
}

/* The file of a server that is gone: replaced by a working listener. */
START_TEST(stale_replaced)
{
	int old = listener(4), fd, c;

	close(old); /* the file stays */
	fd = gw_listen_unix(path, 4, NULL, 0600);
	ck_assert_int_ge(fd, 0);
	c = dial(0);
	close(c);
	close(fd);
}
END_TEST

/* A live server's file is left alone. */
START_TEST(live_kept)
{
	int l = listener(4);
	struct stat st;

	ck_assert_int_eq(gw_listen_unix(path, 4, NULL, 0600), -EADDRINUSE);
	ck_assert_int_eq(stat(path, &st), 0);
	close(dial(0));
	close(l);
}
END_TEST

/* A server that does not accept and whose backlog is full (a wedged old
 * instance; a local user's socket with backlog 0 and one connection
 * queued): live, said at once.  The probe used to be a blocking connect,
 * which sleeps until the backlog has room: forever here (at start the
 * daemon hung, at a reload reactor 0 did), so this test hit Check's timeout. */
START_TEST(full_backlog_live)
{
	int l = listener(0), queued = dial(SOCK_NONBLOCK);

	ck_assert_int_eq(gw_listen_unix(path, 4, NULL, 0600), -EADDRINUSE);
	close(queued);
	close(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("listen");
	TCase *tc = tcase_create("unix");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, stale_replaced);
	tcase_add_test(tc, live_kept);
	tcase_add_test(tc, full_backlog_live);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
