/* The quick commands' connection options (session_parse_opt): the bounds
 * that keep a bad value from reaching the connection code. */
#include <check.h>
#include <stdlib.h>

#include "gateway/session.h"

/* -c/--reconnect-delay 0 made nbd and mount retry a refused target in a
 * busy loop (100,000 "cannot connect" lines in 3 s): 1 to 3600, as the
 * configuration file's reconnect_delay. */
START_TEST(reconnect_delay_bounds)
{
	struct session s;

	session_defaults(&s, "4420");
	ck_assert_int_eq(s.reconnect_delay_s, 10);
	ck_assert_int_lt(session_parse_opt(&s, 'c', "0"), 0);
	ck_assert_int_eq(s.reconnect_delay_s, 10);
	ck_assert_int_lt(session_parse_opt(&s, 'c', "3601"), 0);
	ck_assert_int_lt(session_parse_opt(&s, 'c', "-1"), 0);
	ck_assert_int_eq(session_parse_opt(&s, 'c', "1"), 1);
	ck_assert_int_eq(s.reconnect_delay_s, 1);
	ck_assert_int_eq(session_parse_opt(&s, 'c', "3600"), 1);
	ck_assert_int_eq(s.reconnect_delay_s, 3600);
}
END_TEST

static Suite *session_opts_suite(void)
{
	Suite *s = suite_create("session_opts");
	TCase *tc = tcase_create("session_opts");

	tcase_add_test(tc, reconnect_delay_bounds);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(session_opts_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
