/* The identity and ANA limits of issue 14 defect 6, in the pure functions
 * bring-up and the multipath snapshot use: the transfer size for every
 * MDTS, namespace sizes that would wrap, the active namespace list, the
 * ANA log length walk and the per-group states the snapshot keeps. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/iov.h"
#include "transports/ctrl.h"
#include "transports/io.h"
#include "transports/nvme_spec.h"
#include "transports/transport.h"

#define DEFAULT_BYTES (256u * 1024)

static uint64_t cap_mpsmin(unsigned m) { return (uint64_t)m << 48; }

START_TEST(max_xfer_every_mdts)
{
	/* 0 = no limit: the option, or 256 KiB.  No cap for the iovec array
	 * (nvmf_io_chunk splits by fragmentation): a target's 128 KiB or a
	 * 1 MiB option stay whole. */
	ck_assert_uint_eq(nvmf_pick_max_xfer(0, 0, 0), DEFAULT_BYTES);
	ck_assert_uint_eq(nvmf_pick_max_xfer(0, 5, 0), 128u * 1024);
	ck_assert_uint_eq(nvmf_pick_max_xfer(0, 0, 1u << 20), 1u << 20);
	ck_assert_uint_eq(nvmf_pick_max_xfer(0, 0, 8192), 8192);
	ck_assert_uint_eq(nvmf_pick_max_xfer(0, 1, 0), 8192);
	ck_assert_uint_eq(nvmf_pick_max_xfer(0, 3, 0), 32768);
	ck_assert_uint_eq(nvmf_pick_max_xfer(cap_mpsmin(1), 2, 0), 32768);
	/* Large MDTS (undefined shifts before: 64 and more) is no limit. */
	for (unsigned mdts = 7; mdts <= 255; mdts++)
		for (unsigned m = 0; m < 16; m++) {
			uint32_t x = nvmf_pick_max_xfer(cap_mpsmin(m), (uint8_t)mdts, 0);
			ck_assert_msg(x == DEFAULT_BYTES, "mdts %u mpsmin %u: %u", mdts, m, x);
			x = nvmf_pick_max_xfer(cap_mpsmin(m), (uint8_t)mdts, 4096);
			ck_assert_msg(x == 4096, "mdts %u mpsmin %u with a 4k cap: %u", mdts, m, x);
		}
}
END_TEST

/* With no iovec cap in max_xfer, each command still fits the request's
 * iovec array: a page-fragmented buffer gets commands of at most
 * NVMF_REQ_MAX_IOV pages, a contiguous one whole max_xfer commands. */
START_TEST(io_chunk_fits_iovecs)
{
	static uint8_t buf[1u << 20];
	static struct iovec frag[256];
	struct nvmf_ns ns = { .nsid = 1, .nsze = 1u << 20, .lba_shift = 9, .lba_size = 512 };
	struct iovec one = { buf, sizeof(buf) };
	struct nvmf_io io = { .op = NVMF_IO_READ, .len = sizeof(buf), .ns = &ns };

	io.max_xfer = nvmf_pick_max_xfer(0, 5, 0);
	io.iov = &one;
	io.iovcnt = 1;
	ck_assert_uint_eq(nvmf_io_chunk(&io, 0), 128u * 1024);
	ck_assert_uint_eq(nvmf_io_chunk(&io, sizeof(buf) - 4096), 4096);
	for (unsigned i = 0; i < 256; i++)
		frag[i] = (struct iovec){ buf + i * 4096u, 4096 };
	io.iov = frag;
	io.iovcnt = 256;
	for (uint64_t off = 0; off < sizeof(buf); off += 1536) {
		uint64_t n = nvmf_io_chunk(&io, off);
		struct iovec sl[NVMF_REQ_MAX_IOV];
		ck_assert_uint_gt(n, 0);
		ck_assert_uint_le(n, 128u * 1024);
		ck_assert_int_gt(iov_slice(frag, 256, off, n, sl, NVMF_REQ_MAX_IOV), 0);
	}
	ck_assert_uint_eq(nvmf_io_chunk(&io, 0), NVMF_REQ_MAX_IOV * 4096u);
}
END_TEST

static void id_ns(struct nvme_id_ns *id, uint64_t nsze, unsigned ds)
{
	memset(id, 0, sizeof(*id));
	id->nsze = nsze;
	id->nlbaf = 0;
	id->flbas = 0;
	id->lbaf[0].ds = (uint8_t)ds;
	id->anagrpid = 7;
}

START_TEST(ns_size_never_wraps)
{
	struct nvme_id_ns *id = aligned_alloc(4096, sizeof(*id));
	struct nvmf_ns ns;

	ck_assert_ptr_nonnull(id);
	id_ns(id, 16384, 9);
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 1);
	ck_assert_uint_eq(ns.nsze << ns.lba_shift, 8u << 20);
	ck_assert_uint_eq(ns.anagrpid, 7);
	ck_assert_uint_eq(ns.ana_state, NVME_ANA_OPTIMIZED);
	/* The largest that fits 2^63 - 1 bytes, and one block more. */
	for (unsigned ds = 9; ds <= 16; ds++) {
		id_ns(id, (uint64_t)INT64_MAX >> ds, ds);
		ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 1);
		ck_assert_uint_le(ns.nsze << ns.lba_shift, (uint64_t)INT64_MAX);
		id_ns(id, ((uint64_t)INT64_MAX >> ds) + 1, ds);
		ck_assert_msg(nvmf_ns_from_id("unit", 1, id, &ns) == 0, "ds %u accepted a size "
			      "beyond 2^63 bytes", ds);
		id_ns(id, UINT64_MAX, ds);
		ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	}
	/* Unusable formats and an inactive namespace. */
	id_ns(id, 100, 8);
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	id_ns(id, 100, 17);
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	id_ns(id, 0, 12);
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	id_ns(id, 100, 12);
	id->flbas = 1; /* index 1 > nlbaf 0 */
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	/* Metadata, in each block (flbas bit 4) or apart: every transfer
	 * would be sized and addressed wrong.  The extended one was taken
	 * as usable, the separate one with a warning only. */
	id_ns(id, 100, 12);
	id->lbaf[0].ms = 8;
	id->flbas = 0x10;
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	id->flbas = 0;
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 0);
	id->lbaf[0].ms = 0;
	ck_assert_int_eq(nvmf_ns_from_id("unit", 1, id, &ns), 1);
	free(id);
}
END_TEST

START_TEST(ns_list_order)
{
	uint32_t l[1024] = { 1, 2, 5, 9, 0, 11 };

	ck_assert_uint_eq(nvmf_ns_list_count("unit", l, 1024), 4);
	uint32_t dup[1024] = { 1, 2, 2, 3 };
	ck_assert_uint_eq(nvmf_ns_list_count("unit", dup, 1024), 2);
	uint32_t down[1024] = { 4, 3 };
	ck_assert_uint_eq(nvmf_ns_list_count("unit", down, 1024), 1);
	uint32_t bcast[1024] = { 1, 0xffffffff };
	ck_assert_uint_eq(nvmf_ns_list_count("unit", bcast, 1024), 1);
	uint32_t full[1024];
	for (unsigned i = 0; i < 1024; i++)
		full[i] = i + 1;
	ck_assert_uint_eq(nvmf_ns_list_count("unit", full, 1024), 1024);
}
END_TEST

/* ngrps descriptors of (nnsids) each, the IDs after each. */
static size_t ana_page(uint8_t *buf, unsigned ngrps, uint32_t nnsids)
{
	struct nvme_ana_log_hdr h = { .chgcnt = 1, .ngrps = (uint16_t)ngrps };
	size_t off = sizeof(h);

	memcpy(buf, &h, sizeof(h));
	for (unsigned i = 0; i < ngrps; i++) {
		struct nvme_ana_group_desc d = { .grpid = i + 1, .nnsids = nnsids,
						 .state = NVME_ANA_OPTIMIZED };
		memcpy(buf + off, &d, sizeof(d));
		off += sizeof(d);
		for (uint32_t k = 0; k < nnsids; k++, off += 4)
			memcpy(buf + off, &k, 4);
	}
	return off;
}

static void count_grp(void *arg, uint32_t grpid, uint8_t state)
{
	(void)grpid;
	(void)state;
	(*(unsigned *)arg)++;
}

START_TEST(ana_need_walks_within_len)
{
	size_t cap = 64 * 1024;
	uint8_t *buf = calloc(1, cap);
	unsigned n;

	ck_assert_ptr_nonnull(buf);
	/* Shorter than a header: the header. */
	ck_assert_uint_eq(nvmf_ana_log_need(buf, 0), 16);
	ck_assert_uint_eq(nvmf_ana_log_need(buf, 15), 16);
	/* 300 groups of 2 IDs: 16 + 300 * 40 = 12016 bytes. */
	size_t len = ana_page(buf, 300, 2);
	ck_assert_uint_eq(len, 12016);
	ck_assert_uint_eq(nvmf_ana_log_need(buf, len), len);
	ck_assert_uint_eq(nvmf_ana_log_need(buf, cap), len);
	/* Within the first 4 KiB, the end of the first descriptor that does
	 * not fit: 102 whole ones (16 + 102 * 40 = 4096), the next header;
	 * and 32 bytes at least for each of the 197 after it. */
	ck_assert_uint_eq(nvmf_ana_log_need(buf, 4096), 4096 + 32 + 197 * 32);
	ck_assert_uint_eq(nvmf_ana_log_need(buf, 4100), 4096 + 32 + 197 * 32);
	ck_assert_uint_eq(nvmf_ana_log_need(buf, 4128), 4096 + 40 + 197 * 32);
	/* Never more than the page itself. */
	for (size_t l = 0; l < len; l += 97)
		ck_assert_uint_le(nvmf_ana_log_need(buf, l), len);
	/* The parse agrees once everything is there, and refuses less. */
	n = 0;
	ck_assert_int_eq(nvmf_ana_log_parse(buf, len, NULL, count_grp, &n), 0);
	ck_assert_uint_eq(n, 300);
	ck_assert_int_eq(nvmf_ana_log_parse(buf, 4096, NULL, count_grp, &n), -EPROTO);
	/* A descriptor claiming 2^32 - 1 IDs: a length beyond the cap, no
	 * wrap, nothing read past len. */
	struct nvme_ana_group_desc d;
	memcpy(&d, buf + 16, sizeof(d));
	d.nnsids = UINT32_MAX;
	memcpy(buf + 16, &d, sizeof(d));
	uint64_t need = nvmf_ana_log_need(buf, 48);
	ck_assert_uint_eq(need, 16 + 32 + 4ull * UINT32_MAX + 299 * 32);
	ck_assert_uint_gt(need, NVMF_ANA_LOG_MAX);
	/* 65535 groups claimed in a 16-byte page. */
	struct nvme_ana_log_hdr h = { .ngrps = 0xffff };
	memcpy(buf, &h, sizeof(h));
	ck_assert_uint_eq(nvmf_ana_log_need(buf, 16), 16 + 65535 * 32);
	ck_assert_uint_gt(nvmf_ana_log_need(buf, 16), NVMF_ANA_LOG_MAX);
	free(buf);
}
END_TEST

/* More groups than the 16 the snapshot used to keep: each one's state is
 * there, and a group with no namespace on the path has none (0). */
START_TEST(ana_groups_all_kept)
{
	struct nvmf_ctrl *c = calloc(1, sizeof(*c));
	struct nvmf_ana_grp out[64];

	ck_assert_ptr_nonnull(c);
	c->ns = calloc(64, sizeof(*c->ns));
	ck_assert_ptr_nonnull(c->ns);
	/* 40 namespaces in 20 groups (two each), listed in reverse. */
	for (unsigned i = 0; i < 40; i++) {
		c->ns[i].nsid = i + 1;
		c->ns[i].anagrpid = 20 - i / 2;
		c->ns[i].ana_state = c->ns[i].anagrpid % 3 == 0 ? NVME_ANA_INACCESSIBLE
							     : NVME_ANA_OPTIMIZED;
	}
	c->nr_ns = 40;
	unsigned n = nvmf_ctrl_ana_groups(c, out);
	ck_assert_uint_eq(n, 20);
	for (unsigned g = 1; g <= 20; g++) {
		uint8_t want = g % 3 == 0 ? NVME_ANA_INACCESSIBLE : NVME_ANA_OPTIMIZED;
		ck_assert_msg(nvmf_ana_grp_state(out, n, g) == want, "group %u: %u, want %u", g,
			      nvmf_ana_grp_state(out, n, g), want);
	}
	ck_assert_uint_eq(nvmf_ana_grp_state(out, n, 0), 0);
	ck_assert_uint_eq(nvmf_ana_grp_state(out, n, 21), 0);
	ck_assert_uint_eq(nvmf_ana_grp_state(out, n, UINT32_MAX), 0);
	/* No namespace: no group. */
	c->nr_ns = 0;
	ck_assert_uint_eq(nvmf_ctrl_ana_groups(c, out), 0);
	ck_assert_uint_eq(nvmf_ana_grp_state(out, 0, 1), 0);
	free(c->ns);
	free(c);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("limits");

	tcase_add_test(tc, max_xfer_every_mdts);
	tcase_add_test(tc, io_chunk_fits_iovecs);
	tcase_add_test(tc, ns_size_never_wraps);
	tcase_add_test(tc, ns_list_order);
	tcase_add_test(tc, ana_need_walks_within_len);
	tcase_add_test(tc, ana_groups_all_kept);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(limits_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
