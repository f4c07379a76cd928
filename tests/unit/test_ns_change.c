/* What a namespace change means for an export: (old, new) -> action, and
 * the controller's table kept in NSID order as events add, replace and
 * remove entries. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ctrl.h"

static struct nvmf_ns ns_make(uint32_t nsid, uint64_t nsze, uint32_t shift, uint8_t tag)
{
	struct nvmf_ns ns;

	memset(&ns, 0, sizeof(ns));
	ns.nsid = nsid;
	ns.nsze = nsze;
	ns.lba_shift = shift;
	ns.lba_size = 1u << shift;
	memset(ns.nguid, tag, sizeof(ns.nguid));
	memset(ns.eui64, tag, sizeof(ns.eui64));
	return ns;
}

START_TEST(classify)
{
	struct nvmf_ns a = ns_make(1, 2048, 9, 0xa1), b;

	ck_assert_int_eq(nvmf_ns_change_classify(&a, &a), NVMF_NS_SAME);
	ck_assert_int_eq(nvmf_ns_change_classify(NULL, &a), NVMF_NS_ADDED);
	ck_assert_int_eq(nvmf_ns_change_classify(&a, NULL), NVMF_NS_REMOVED);
	b = a;
	b.nsze = 4096;
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_GROWN);
	b.nsze = 1024;
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_SHRUNK);
	/* Same bytes in 4 KiB blocks: still another format, never served. */
	b = ns_make(1, 256, 12, 0xa1);
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_LBA_FORMAT);
	/* Identity first: a bigger namespace with another NGUID is not a
	 * growth of the old one. */
	b = a;
	b.nsze = 4096;
	b.nguid[15] ^= 1;
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_OTHER);
	b = a;
	b.eui64[0] ^= 0x80;
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_OTHER);
	b = ns_make(1, 2048, 12, 0xb2);
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_OTHER);
	/* The ANA state and group are not part of what is served. */
	b = a;
	b.ana_state = 3;
	b.anagrpid = 9;
	ck_assert_int_eq(nvmf_ns_change_classify(&a, &b), NVMF_NS_SAME);
	ck_assert_str_eq(nvmf_ns_change_name(NVMF_NS_GROWN), "grown");
}
END_TEST

START_TEST(table_update)
{
	struct nvmf_ctrl c;
	struct nvmf_ns n;

	memset(&c, 0, sizeof(c));
	c.ns = calloc(1024, sizeof(*c.ns));
	ck_assert_ptr_nonnull(c.ns);
	n = ns_make(5, 100, 9, 5);
	ck_assert(nvmf_ctrl_ns_update(&c, 5, &n));
	n = ns_make(2, 100, 9, 2);
	ck_assert(nvmf_ctrl_ns_update(&c, 2, &n));
	n = ns_make(9, 100, 9, 9);
	ck_assert(nvmf_ctrl_ns_update(&c, 9, &n));
	ck_assert_uint_eq(c.nr_ns, 3);
	ck_assert_uint_eq(c.ns[0].nsid, 2);
	ck_assert_uint_eq(c.ns[1].nsid, 5);
	ck_assert_uint_eq(c.ns[2].nsid, 9);
	/* A resize replaces the entry and keeps the ANA state it had. */
	c.ns[1].ana_state = 2;
	n = ns_make(5, 300, 9, 5);
	n.ana_state = 1;
	ck_assert(nvmf_ctrl_ns_update(&c, 5, &n));
	ck_assert_uint_eq(c.nr_ns, 3);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&c, 5)->nsze, 300);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&c, 5)->ana_state, 2);
	ck_assert(nvmf_ctrl_ns_update(&c, 2, NULL));
	ck_assert(nvmf_ctrl_ns_update(&c, 7, NULL)); /* not there: nothing */
	ck_assert_uint_eq(c.nr_ns, 2);
	ck_assert_uint_eq(c.ns[0].nsid, 5);
	ck_assert_uint_eq(c.ns[1].nsid, 9);
	ck_assert_ptr_null(nvmf_ctrl_find_ns(&c, 2));
	/* Full table: refused, nothing overwritten. */
	c.nr_ns = 0;
	for (uint32_t i = 1; i <= 1024; i++) {
		n = ns_make(i * 2, 1, 9, 1);
		ck_assert(nvmf_ctrl_ns_update(&c, i * 2, &n));
	}
	n = ns_make(3, 1, 9, 1);
	ck_assert(!nvmf_ctrl_ns_update(&c, 3, &n));
	ck_assert_uint_eq(c.nr_ns, 1024);
	ck_assert_uint_eq(c.ns[1023].nsid, 2048);
	free(c.ns);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ns_change");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, classify);
	tcase_add_test(tc, table_update);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
