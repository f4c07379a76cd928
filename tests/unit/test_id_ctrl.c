/* The Identify Controller layout read against bytes a real target sent:
 * tests/unit/data/nvmet-6.12-id-ctrl.bin is the first 1 KiB of the data
 * Linux's nvmet (6.12) returned, taken from a recording of its PDUs
 * (tests/fuzz/record_nvmet.sh).  The _Static_asserts in nvme_spec.h check
 * the offsets we wrote down; this checks them against the target, whose
 * values are set in nvmet's admin-cmd.c (ANATT 10, ANACAP 0x1f, 128 ANA
 * groups, KAS 10, SQES 0x66, CQES 0x44, a volatile write cache).  The
 * in-tree test target fills the same struct, so it cannot catch an offset
 * that is wrong: ANATT was read at 343 (ANACAP) until this test. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "transports/nvme_spec.h"

static struct nvme_id_ctrl id;

static void load(void)
{
	const char *path = "tests/unit/data/nvmet-6.12-id-ctrl.bin";
	FILE *f = fopen(path, "rb");
	size_t n;

	ck_assert_msg(f != NULL, "cannot open %s (run from the top of the tree)", path);
	memset(&id, 0, sizeof(id));
	n = fread(&id, 1, sizeof(id), f);
	fclose(f);
	ck_assert_uint_eq(n, 1024);
}

START_TEST(identity)
{
	load();
	ck_assert_int_eq(memcmp(id.mn, "Linux ", 6), 0);
	ck_assert_int_eq(memcmp(id.subnqn, "nqn.2014-08.org.nvmf-gateway:rec-512", 36), 0);
}
END_TEST

START_TEST(ana_fields)
{
	load();
	ck_assert_uint_eq(id.anatt, 10);
	ck_assert_uint_eq(id.anacap, 0x1f);
	ck_assert_uint_eq(id.anagrpmax, 128);
	ck_assert_uint_eq(id.nanagrpid, 128);
}
END_TEST

START_TEST(other_fields)
{
	load();
	ck_assert_uint_eq(id.kas, 10);
	ck_assert_uint_eq(id.oaes, 0x900); /* namespace attribute and ANA change notices */
	ck_assert_uint_eq(id.crdt[0], 0);
	ck_assert_uint_eq(id.cqt, 0);
	ck_assert_uint_eq(id.sqes, 0x66);
	ck_assert_uint_eq(id.cqes, 0x44);
	ck_assert_uint_eq(id.nn, 1024);
	ck_assert_uint_eq(id.vwc & 1, 1);
	ck_assert_uint_eq(id.mdts, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("id_ctrl");
	TCase *tc = tcase_create("nvmet");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, identity);
	tcase_add_test(tc, ana_fields);
	tcase_add_test(tc, other_fields);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
