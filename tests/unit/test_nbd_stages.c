/* The per-request stage sums of an NBD connection (nbd/stages.c): each
 * stage ends at the next one that happened, a skipped stage costs nothing,
 * stamps out of order never wrap, and the worst case is kept. */
#include <check.h>
#include <stdlib.h>

#include "nbd/internal.h"

START_TEST(all_stages)
{
	struct nbd_stage_sum m = { 0 };
	uint64_t t[NBD_STAGES] = { 1000, 1500, 4500, 4600 };

	nbd_stage_add(&m, t, 5600);
	ck_assert_uint_eq(m.n, 1);
	ck_assert_uint_eq(m.ns[NBD_STAGE_RECEIVE], 500);
	ck_assert_uint_eq(m.ns[NBD_STAGE_VOLUME], 3000);
	ck_assert_uint_eq(m.ns[NBD_STAGE_QUEUED], 100);
	ck_assert_uint_eq(m.ns[NBD_STAGE_SEND], 1000);
	/* A second, slower volume: sums add, the worst case moves. */
	uint64_t u[NBD_STAGES] = { 10000, 10000, 19000, 19000 };
	nbd_stage_add(&m, u, 19001);
	ck_assert_uint_eq(m.n, 2);
	ck_assert_uint_eq(m.ns[NBD_STAGE_VOLUME], 12000);
	ck_assert_uint_eq(m.max_ns[NBD_STAGE_VOLUME], 9000);
	ck_assert_uint_eq(m.max_ns[NBD_STAGE_RECEIVE], 500);
	ck_assert_uint_eq(m.ns[NBD_STAGE_SEND], 1001);
	ck_assert_uint_eq(m.max_ns[NBD_STAGE_SEND], 1000);
}
END_TEST

START_TEST(skipped_volume)
{
	/* A reply that never went to the volume (a zero-length read): its
	 * receive stage runs up to the answer, the volume stage is empty. */
	struct nbd_stage_sum m = { 0 };
	uint64_t t[NBD_STAGES] = { 1000, 0, 1200, 1300 };

	nbd_stage_add(&m, t, 1400);
	ck_assert_uint_eq(m.n, 1);
	ck_assert_uint_eq(m.ns[NBD_STAGE_RECEIVE], 200);
	ck_assert_uint_eq(m.ns[NBD_STAGE_VOLUME], 0);
	ck_assert_uint_eq(m.ns[NBD_STAGE_QUEUED], 100);
	ck_assert_uint_eq(m.ns[NBD_STAGE_SEND], 100);
}
END_TEST

START_TEST(out_of_order_is_zero)
{
	/* Later stamps before earlier ones, and a "now" before the send:
	 * each such stage counts 0, not 2^64 minus a little. */
	struct nbd_stage_sum m = { 0 };
	uint64_t t[NBD_STAGES] = { 5000, 4000, 6000, 7000 };

	nbd_stage_add(&m, t, 6500);
	ck_assert_uint_eq(m.ns[NBD_STAGE_RECEIVE], 0);
	ck_assert_uint_eq(m.ns[NBD_STAGE_VOLUME], 2000);
	ck_assert_uint_eq(m.ns[NBD_STAGE_QUEUED], 1000);
	ck_assert_uint_eq(m.ns[NBD_STAGE_SEND], 0);
	for (unsigned s = 0; s < NBD_STAGES; s++)
		ck_assert_uint_le(m.max_ns[s], 2000);
}
END_TEST

START_TEST(never_stamped_not_counted)
{
	struct nbd_stage_sum m = { 0 };
	uint64_t t[NBD_STAGES] = { 0 };

	nbd_stage_add(&m, t, 100);
	ck_assert_uint_eq(m.n, 0);
	for (unsigned s = 0; s < NBD_STAGES; s++)
		ck_assert_uint_eq(m.ns[s], 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nbd_stages");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, all_stages);
	tcase_add_test(tc, skipped_volume);
	tcase_add_test(tc, out_of_order_is_zero);
	tcase_add_test(tc, never_stamped_not_counted);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
