/* --nice N|off (gateway/base/reclaim.c): the range of setpriority, "off",
 * and nothing else; a refused value leaves the options as they were. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "gateway/base/reclaim.h"

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

int main(void)
{
	Suite *s = suite_create("reclaim_nice");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, values);
	tcase_add_test(tc, refused);
	tcase_add_test(tc, off_opts_leave_priority);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
