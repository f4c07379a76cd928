/* NVMe/RDMA transport: the parts that need no RDMA device. */
#include "transports/rdma_internal.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint16_t le16_at(const void *p, size_t off)
{
	const uint8_t *b = (const uint8_t *)p + off;
	return (uint16_t)(b[0] | b[1] << 8);
}

START_TEST(cm_req_admin)
{
	struct nvme_rdma_cm_req r;

	memset(&r, 0xaa, sizeof(r));
	rdma_cm_req_init(&r, 0, 32, 7);
	/* Wire offsets of the RDMA transport binding, byte by byte. */
	ck_assert_uint_eq(le16_at(&r, 0), 0); /* recfmt 1.0 */
	ck_assert_uint_eq(le16_at(&r, 2), 0); /* qid */
	ck_assert_uint_eq(le16_at(&r, 4), 32); /* hrqsize, 1's based */
	ck_assert_uint_eq(le16_at(&r, 6), 31); /* hsqsize, 0's based */
	ck_assert_uint_eq(le16_at(&r, 8), 0); /* no cntlid for the admin queue */
	for (size_t i = 10; i < sizeof(r); i++)
		ck_assert_uint_eq(((uint8_t *)&r)[i], 0);
}
END_TEST

START_TEST(cm_req_io)
{
	struct nvme_rdma_cm_req r;

	rdma_cm_req_init(&r, 3, 128, 0x1234);
	ck_assert_uint_eq(le16_at(&r, 2), 3);
	ck_assert_uint_eq(le16_at(&r, 4), 128);
	ck_assert_uint_eq(le16_at(&r, 6), 127);
	ck_assert_uint_eq(le16_at(&r, 8), 0x1234);
}
END_TEST

START_TEST(reject_nvme_status)
{
	char buf[160];
	uint8_t pd[148] = { 0, 0, 3, 0 }; /* recfmt 0, sts 3 (invalid QID) */

	int err = rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, sizeof(pd), buf, sizeof(buf));
	ck_assert_int_eq(err, -ECONNREFUSED);
	ck_assert_msg(strstr(buf, "NVMe/RDMA status 3 (invalid queue ID)"), "%s", buf);

	pd[2] = NVME_RDMA_CM_NO_RSC;
	err = rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, 4, buf, sizeof(buf));
	ck_assert_int_eq(err, -EBUSY);
	ck_assert_msg(strstr(buf, "no resources"), "%s", buf);

	pd[2] = 0x77;
	rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, 4, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "status 119 (unknown status)"), "%s", buf);
}
END_TEST

START_TEST(reject_other)
{
	char buf[160];
	uint8_t pd[2] = { 0 };

	/* Too short to hold a status: said so, not read past the end. */
	ck_assert_int_eq(rdma_reject_describe(RDMA_REJ_CONSUMER_DEFINED, pd, sizeof(pd), buf,
					      sizeof(buf)),
			 -ECONNREFUSED);
	ck_assert_msg(strstr(buf, "without an NVMe/RDMA status"), "%s", buf);
	rdma_reject_describe(RDMA_REJ_INVALID_SERVICE_ID, NULL, 0, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "no NVMe/RDMA listener"), "%s", buf);
	rdma_reject_describe(5, NULL, 0, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, "reject reason 5"), "%s", buf);
	for (uint16_t s = 1; s <= 9; s++)
		ck_assert_str_ne(rdma_cm_status_str(s), "unknown status");
}
END_TEST

START_TEST(sgl_keyed)
{
	struct nvme_sqe sqe;
	const uint8_t *d = (const uint8_t *)&sqe.dptr;

	memset(&sqe, 0xee, sizeof(sqe));
	rdma_sgl_keyed(&sqe, 0x1122334455667788ull, 0xabcdef, 0xdeadbeef);
	/* addr (8, LE), length (3, LE), key (4, LE), type */
	const uint8_t want[16] = { 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
				   0xef, 0xcd, 0xab, 0xef, 0xbe, 0xad, 0xde, 0x40 };
	ck_assert_mem_eq(d, want, 16);
	/* The rest of the SQE is untouched. */
	ck_assert_uint_eq(sqe.cdw10, 0xeeeeeeee);
	ck_assert_uint_eq(sqe.mptr, 0xeeeeeeeeeeeeeeeeull);
}
END_TEST

START_TEST(sgl_inline_and_null)
{
	struct nvme_sqe sqe;
	const uint8_t *d = (const uint8_t *)&sqe.dptr;

	memset(&sqe, 0xee, sizeof(sqe));
	rdma_sgl_inline(&sqe, 4096);
	const uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0x01 };
	ck_assert_mem_eq(d, want, 16);

	rdma_sgl_null(&sqe);
	const uint8_t null[16] = { [15] = 0x40 };
	ck_assert_mem_eq(d, null, 16);
}
END_TEST

static struct nvme_cqe cqe_with(uint16_t cid, uint16_t status)
{
	struct nvme_cqe c;
	memset(&c, 0, sizeof(c));
	c.cid = cid;
	c.status = status;
	return c;
}

START_TEST(bookkeeping_send_first)
{
	struct rdma_req rr = { 0 };
	struct nvme_cqe c = cqe_with(5, 0x4);

	rdma_req_start(&rr);
	ck_assert_int_eq(rdma_req_send_done(&rr), 0); /* still waits for the response */
	ck_assert_int_eq(rdma_req_resp(&rr, &c), 1);
	ck_assert_uint_eq(rr.resp.cid, 5);
	ck_assert_uint_eq(rr.resp.status, 0x4);
}
END_TEST

START_TEST(bookkeeping_resp_first)
{
	struct rdma_req rr = { 0 };
	struct nvme_cqe c = cqe_with(9, 0);

	rdma_req_start(&rr);
	/* The response overtakes the send completion: not complete yet, the
	 * capsule buffer may still be in use by the HCA. */
	ck_assert_int_eq(rdma_req_resp(&rr, &c), 0);
	ck_assert_int_eq(rdma_req_send_done(&rr), 1);
	ck_assert_uint_eq(rr.resp.cid, 9);
}
END_TEST

START_TEST(bookkeeping_duplicates)
{
	struct rdma_req rr = { 0 };
	struct nvme_cqe c = cqe_with(1, 0);

	/* Nothing posted: any completion is unexpected. */
	ck_assert_int_eq(rdma_req_send_done(&rr), -EPROTO);
	ck_assert_int_eq(rdma_req_resp(&rr, &c), -EPROTO);
	rdma_req_start(&rr);
	ck_assert_int_eq(rdma_req_resp(&rr, &c), 0);
	ck_assert_int_eq(rdma_req_resp(&rr, &c), -EPROTO);
	ck_assert_int_eq(rdma_req_send_done(&rr), 1);
	ck_assert_int_eq(rdma_req_send_done(&rr), -EPROTO);
	/* A reused slot starts over. */
	rdma_req_start(&rr);
	ck_assert_int_eq(rdma_req_send_done(&rr), 0);
	ck_assert_int_eq(rdma_req_resp(&rr, &c), 1);
}
END_TEST

START_TEST(wr_ids)
{
	uint64_t s = rdma_wr_id(RDMA_WR_SEND, 4095), r = rdma_wr_id(RDMA_WR_RECV, 0);

	ck_assert_uint_eq(s >> 32, RDMA_WR_SEND);
	ck_assert_uint_eq((uint32_t)s, 4095);
	ck_assert_uint_eq(r >> 32, RDMA_WR_RECV);
	ck_assert_uint_eq((uint32_t)r, 0);
}
END_TEST

START_TEST(ops_registered)
{
	enum nvmf_trtype t;
	const struct nvmf_transport_ops *ops;

	ck_assert_int_eq(nvmf_trtype_parse("rdma", &t), 0);
	ops = nvmf_transport_find(t);
	ck_assert_ptr_nonnull(ops);
	ck_assert_str_eq(ops->name, "rdma");
	ck_assert_uint_ge(ops->req_priv_size, sizeof(struct rdma_req));
	ck_assert_ptr_nonnull(ops->queue_init);
	ck_assert_ptr_nonnull(ops->queue_connect);
	ck_assert_ptr_nonnull(ops->submit);
	ck_assert_ptr_nonnull(ops->queue_shutdown);
	ck_assert_ptr_nonnull(ops->queue_free);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rdma");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, cm_req_admin);
	tcase_add_test(tc, cm_req_io);
	tcase_add_test(tc, reject_nvme_status);
	tcase_add_test(tc, reject_other);
	tcase_add_test(tc, sgl_keyed);
	tcase_add_test(tc, sgl_inline_and_null);
	tcase_add_test(tc, bookkeeping_send_first);
	tcase_add_test(tc, bookkeeping_resp_first);
	tcase_add_test(tc, bookkeeping_duplicates);
	tcase_add_test(tc, wr_ids);
	tcase_add_test(tc, ops_registered);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
