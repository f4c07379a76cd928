/* The disposition of every NVMe status, one Check test per row of an
 * expectation table written here independently of status.c's: what the
 * host does without DNR, that DNR always fails, and the errno an exporter
 * sees. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/nvme_spec.h"
#include "transports/status.h"

#define F NVME_DISP_FAIL
#define R NVME_DISP_RETRY
#define P NVME_DISP_FAILOVER
#define A NVME_DISP_ANA
#define X NVME_DISP_RESET

static const struct row {
	unsigned sct, sc;
	enum nvme_disposition disp; /* without DNR */
	int err;
} rows[] = {
	{ 0, 0x01, F, -EOPNOTSUPP }, /* Invalid Command Opcode */
	{ 0, 0x02, F, -EINVAL }, /* Invalid Field in Command */
	{ 0, 0x03, R, -EIO }, /* Command ID Conflict */
	{ 0, 0x04, R, -EIO }, /* Data Transfer Error */
	{ 0, 0x05, R, -EIO }, /* Aborted due to Power Loss */
	{ 0, 0x06, R, -EIO }, /* Internal Error */
	{ 0, 0x07, R, -ECANCELED }, /* Abort Requested (our io_timeout abort) */
	{ 0, 0x08, R, -ECANCELED }, /* SQ Deletion */
	{ 0, 0x0b, F, -ENXIO }, /* Invalid Namespace or Format */
	{ 0, 0x0c, R, -EIO }, /* Command Sequence Error */
	{ 0, 0x0d, F, -EINVAL },
	{ 0, 0x0f, F, -EINVAL },
	{ 0, 0x11, F, -EINVAL },
	{ 0, 0x15, F, -EINVAL },
	{ 0, 0x18, X, -EBUSY }, /* Keep Alive Timer Expired: reset the path */
	{ 0, 0x1d, R, -EIO }, /* Sanitize In Progress */
	{ 0, 0x20, F, -EROFS }, /* Write Protected */
	{ 0, 0x21, R, -EINTR }, /* Command Interrupted: retry after CRD */
	{ 0, 0x22, R, -EIO }, /* Transient Transport Error */
	{ 0, 0x80, F, -EINVAL }, /* LBA Out of Range */
	{ 0, 0x81, F, -ENOSPC }, /* Capacity Exceeded */
	{ 0, 0x82, R, -EAGAIN }, /* Namespace Not Ready: retry after CRD */
	{ 0, 0x83, F, -EBADE }, /* Reservation Conflict */
	{ 0, 0x99, R, -EIO }, /* unknown generic: retry */
	{ 1, 0x01, F, -EINVAL },
	{ 1, 0x05, R, -EBUSY },
	{ 1, 0x82, F, -EROFS }, /* Write to Read Only Range */
	{ 2, 0x80, R, -EIO }, /* Write Fault */
	{ 2, 0x81, R, -EIO }, /* Unrecovered Read Error */
	{ 2, 0x82, R, -EILSEQ }, /* Guard Check */
	{ 2, 0x85, R, -EIO }, /* Compare Failure */
	{ 2, 0x86, F, -EACCES }, /* Access Denied */
	{ 2, 0x87, F, -ENODATA }, /* Deallocated or Unwritten */
	{ 3, 0x00, P, -EIO }, /* Internal Path Error: another path */
	{ 3, 0x01, A, -ENOLINK }, /* ANA Persistent Loss */
	{ 3, 0x02, A, -ENOLINK }, /* ANA Inaccessible */
	{ 3, 0x03, A, -EAGAIN }, /* ANA Transition */
	{ 3, 0x60, P, -EIO }, /* Controller Pathing Error */
	{ 3, 0x70, P, -EIO }, /* Host Pathing Error */
	{ 3, 0x71, P, -ECANCELED }, /* Command Aborted By Host */
	{ 3, 0x42, P, -EIO }, /* unknown path status: another path */
	{ 7, 0x10, R, -EIO }, /* vendor specific */
};

static uint16_t st(unsigned sct, unsigned sc, bool dnr, unsigned crd)
{
	return (uint16_t)(sc | sct << 8 | crd << 11 | (dnr ? 1u << 14 : 0));
}

START_TEST(row)
{
	const struct row *r = &rows[_i];
	char buf[128];

	for (unsigned crd = 0; crd < 4; crd++) {
		uint16_t s = st(r->sct, r->sc, false, crd);
		ck_assert_msg(nvme_status_disposition(s) == r->disp, "%s: %s, want %s",
			      nvme_status_fmt(s, buf, sizeof(buf)),
			      nvme_disposition_name(nvme_status_disposition(s)),
			      nvme_disposition_name(r->disp));
		/* DNR fails now, whatever the class. */
		s = st(r->sct, r->sc, true, crd);
		ck_assert_int_eq(nvme_status_disposition(s), NVME_DISP_FAIL);
		ck_assert_int_eq(nvme_status_to_errno(s), r->err);
	}
	ck_assert_int_eq(nvme_status_is_ana(st(r->sct, r->sc, false, 0)), r->disp == A);
}
END_TEST

START_TEST(success)
{
	ck_assert_int_eq(nvme_status_disposition(0), NVME_DISP_DONE);
	/* More and CRD bits alone are still success. */
	ck_assert_int_eq(nvme_status_disposition(st(0, 0, false, 3)), NVME_DISP_DONE);
	ck_assert_int_eq(nvme_status_to_errno(0), 0);
	ck_assert_str_eq(nvme_disposition_name(NVME_DISP_ANA), "wait-for-ana");
}
END_TEST

/* A target's Identify Controller model string goes into a log line: a
 * newline in it started a line of the target's choosing (it was printed
 * with %.40s, raw). */
START_TEST(peer_string_printable)
{
	char mn[40], out[41];

	memset(mn, ' ', sizeof(mn));
	static const char evil[] = "x\nnvmf-gateway: error: forged\x1b[0m'";
	memcpy(mn, evil, sizeof(evil) - 1);
	log_printable(out, sizeof(out), mn, sizeof(mn));
	ck_assert_ptr_null(strchr(out, '\n'));
	ck_assert_ptr_null(strchr(out, '\x1b'));
	ck_assert_ptr_null(strchr(out, '\''));
	ck_assert_str_eq(out, "x?nvmf-gateway: error: forged?[0m?      ");
	/* NUL padding ends a field; a NUL inside shows (an export name
	 * "e1\0x" is not "e1"); a short buffer cuts, always ends. */
	memset(mn, 0, sizeof(mn));
	memcpy(mn, "model", 5);
	log_printable(out, sizeof(out), mn, sizeof(mn));
	ck_assert_str_eq(out, "model");
	log_printable(out, sizeof(out), "e1\0x", 4);
	ck_assert_str_eq(out, "e1?x");
	log_printable(out, 4, "abcdef", 6);
	ck_assert_str_eq(out, "abc");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("status");
	TCase *tc = tcase_create("status");
	SRunner *sr;
	int failed;

	tcase_add_loop_test(tc, row, 0, (int)(sizeof(rows) / sizeof(rows[0])));
	tcase_add_test(tc, success);
	tcase_add_test(tc, peer_string_printable);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
