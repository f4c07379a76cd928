#include "gateway/base/log.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log_capture.h"

#define S 1000000000ull

/* A burst passes, the rest of the interval is left out and counted, and
 * the first line of the next interval carries the count, once. */
START_TEST(rate_limit_interval)
{
	struct log_rl rl = { 0 };
	unsigned left = 99;
	uint64_t t0 = 5 * S;

	for (unsigned i = 0; i < LOG_RL_BURST; i++) {
		ck_assert(log_rl_pass(&rl, t0 + i, &left));
		ck_assert_uint_eq(left, 0);
	}
	for (unsigned i = 0; i < 25; i++)
		ck_assert(!log_rl_pass(&rl, t0 + S, &left));
	/* Still the same interval just before its end. */
	ck_assert(!log_rl_pass(&rl, t0 + LOG_RL_INTERVAL_S * S - 1, &left));
	ck_assert(log_rl_pass(&rl, t0 + LOG_RL_INTERVAL_S * S, &left));
	ck_assert_uint_eq(left, 26);
	ck_assert(log_rl_pass(&rl, t0 + LOG_RL_INTERVAL_S * S + 1, &left));
	ck_assert_uint_eq(left, 0);
	/* A quiet site: every line passes, none is counted. */
	struct log_rl quiet = { 0 };
	for (unsigned i = 0; i < 3 * LOG_RL_BURST; i++) {
		ck_assert(log_rl_pass(&quiet, (uint64_t)i * LOG_RL_INTERVAL_S * S / 2, &left));
		ck_assert_uint_eq(left, 0);
	}
}
END_TEST

/* Whatever a clock at 0 means, the first line passes and opens an
 * interval (start 0 is "none yet"). */
START_TEST(rate_limit_clock_zero)
{
	struct log_rl rl = { 0 };
	unsigned left;

	for (unsigned i = 0; i < LOG_RL_BURST; i++)
		ck_assert(log_rl_pass(&rl, 0, &left));
	ck_assert(!log_rl_pass(&rl, 0, &left));
}
END_TEST

static char logged[65536];

/* The lines log_rl_msg writes for n calls through one site. */
static unsigned capture(struct log_rl *rl, unsigned n, enum log_level lvl)
{
	struct log_capture cap;
	unsigned lines = 0;

	log_capture_begin(&cap);
	for (unsigned i = 0; i < n; i++)
		log_rl_msg(rl, lvl, "peer %u: refused", i);
	log_capture_end(&cap, logged, sizeof(logged));
	for (char *p = logged; (p = strchr(p, '\n')); p++)
		lines++;
	return lines;
}

START_TEST(rate_limit_lines)
{
	struct log_rl rl = { 0 };

	log_set_level(LOG_LVL_NOTICE);
	/* Below the level: nothing shown, nothing counted. */
	ck_assert_uint_eq(capture(&rl, 40, LOG_LVL_INFO), 0);
	ck_assert_uint_eq(rl.n, 0);
	ck_assert_uint_eq(capture(&rl, 50, LOG_LVL_WARN), LOG_RL_BURST);
	/* The burst's last line says that the rest is held back. */
	ck_assert_msg(strstr(logged, "peer 8: refused\n") &&
			      strstr(logged, "peer 9: refused (the last line like it for now: at most "
					     "10 lines in 10 s)\n") &&
			      !strstr(logged, "peer 10:"),
		      "%s", logged);
	/* The next interval (moved back rather than waited for). */
	rl.start_ns -= (uint64_t)LOG_RL_INTERVAL_S * S;
	ck_assert_uint_eq(capture(&rl, 1, LOG_LVL_WARN), 1);
	ck_assert_msg(strstr(logged, "peer 0: refused (and 40 more like it, not logged: at most 10 "
				     "lines in 10 s)\n"),
		      "%s", logged);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("rate_limit");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, rate_limit_interval);
	tcase_add_test(tc, rate_limit_clock_zero);
	tcase_add_test(tc, rate_limit_lines);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
