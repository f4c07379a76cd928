/* Aborts past the controller's Abort Command Limit wait their turn on a
 * list.  When the admin queue has gone out of LIVE under a controller that
 * is still LIVE (its loss not yet handled), the waiting Aborts are not
 * sent: before 42f86bd each one's submit failed at once and completed
 * inside the send of the one before, one stack frame per waiting Abort
 * (a timer fire aborts every command it finds timed out, and a full queue
 * of them can wait).  Here enough of them wait for that recursion to
 * overflow the stack; the controller is ctrl_fixture's, answered by the
 * test. */
#include <check.h>
#include <stdlib.h>

#include "tests/unit/ctrl_fixture.h"
#include "transports/ctrl.h"
#include "transports/ctrl_priv.h"

/* Frames of a few hundred bytes each: far past an 8 MiB stack. */
#define WAITING 200000u

START_TEST(waiting_aborts_on_a_lost_admin_queue)
{
	struct ctrl_fixture f;
	struct nvme_sqe sqe;

	ck_assert_int_eq(ctrlfx_init(&f, "abort-wait"), 0);
	/* ACL 0: one Abort at a time, the rest wait. */
	f.c.id->acl = 0;
	for (unsigned i = 0; i <= WAITING; i++)
		nvmf_ctrl_abort(&f.c, 1, (uint16_t)i);
	ctrlfx_settle(&f);
	ck_assert(ctrlfx_wait_cmd(&f, &sqe, 1000));
	ck_assert_msg(sqe.opcode == NVME_ADMIN_ABORT, "not an Abort: opcode 0x%02x", sqe.opcode);
	ck_assert_uint_eq(f.c.nr_aborts, 1);
	/* The admin queue leaves LIVE (its transport failed), the
	 * controller not yet: the Abort in flight is answered
	 * and the next waiting one would be sent. */
	f.c.adminq.state = NVMF_Q_DRAINING;
	ck_assert(ctrlfx_reply(&f, sqe.cid, NULL, 0, 0, 0));
	ctrlfx_settle(&f);
	/* No Abort went out on the queue that is not LIVE. */
	ck_assert(!ctrlfx_next_cmd(&f, &sqe));
	ck_assert_uint_eq(f.c.nr_aborts, 0);
	ctrlfx_fini(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctrl_abort_wait");
	TCase *tc = tcase_create("ctrl_abort_wait");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, waiting_aborts_on_a_lost_admin_queue);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
