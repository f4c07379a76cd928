/* The orderly shutdown (CC.SHN, then CSTS polls for SHST) against a
 * controller that stops answering: it ends at its own 5 s bound, not at
 * the admin queue's io_timeout.  The controller is ctrl_fixture's: the
 * test reads the host's commands and answers them, or not. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/ctrl_fixture.h"
#include "transports/ctrl.h"
#include "transports/ctrl_priv.h"

#define ADMIN_IO_TIMEOUT_MS 60000u /* what the old code waited */
#define BOUND_MS 20000u /* 5 s and a wide margin */

static int done_calls;
static uint64_t done_ns;

static void on_done(struct nvmf_ctrl *c, int err)
{
	(void)c;
	(void)err;
	done_calls++;
	done_ns = reactor_now_ns();
}

static bool is_property(const struct nvme_sqe *sqe, uint8_t fctype, uint32_t reg)
{
	const struct nvmf_property_cmd *p = (const void *)sqe;

	return p->opcode == NVME_FABRICS_COMMAND && p->fctype == fctype && p->offset == reg;
}

/* Shutdown with the controller answering the first `answered` of its
 * commands (the Property Set, then CSTS polls with SHST "in progress"),
 * then none.  Returns how long the shutdown took, in ms. */
#define SHN_TEST_MS 1000u

static unsigned shutdown_unanswered_after(unsigned answered)
{
	struct ctrl_fixture f;
	struct nvme_sqe sqe;

	done_calls = 0;
	ck_assert_int_eq(ctrlfx_init(&f, "shn"), 0);
	f.c.adminq.io_timeout_ms = ADMIN_IO_TIMEOUT_MS;
	/* The mechanism, not the 5 s: the deadline shortened for the test. */
	f.c.shutdown_timeout_ms = SHN_TEST_MS;
	uint64_t t0 = reactor_now_ns();
	nvmf_ctrl_shutdown(&f.c, on_done);
	ck_assert(ctrlfx_wait_cmd(&f, &sqe, 1000));
	ck_assert_msg(is_property(&sqe, NVMF_FCTYPE_PROPERTY_SET, NVME_REG_CC),
		      "first command: opcode 0x%02x", sqe.opcode);
	for (unsigned i = 0; i < answered; i++) {
		/* SHST 01b: shutdown processing occurring. */
		ck_assert(ctrlfx_reply(&f, sqe.cid, NULL, 0, 0, i ? 1u << 2 : 0));
		ck_assert(ctrlfx_wait_cmd(&f, &sqe, 1000));
		ck_assert_msg(is_property(&sqe, NVMF_FCTYPE_PROPERTY_GET, NVME_REG_CSTS),
			      "command %u: not a CSTS poll (opcode 0x%02x)", i + 1, sqe.opcode);
	}
	/* sqe is left unanswered. */
	uint64_t end = t0 + (uint64_t)BOUND_MS * NSEC_PER_MSEC;
	while (!done_calls && reactor_now_ns() < end) {
		ctrlfx_settle(&f);
		reactor_poll(&f.r, 10 * NSEC_PER_MSEC);
	}
	ck_assert_msg(done_calls == 1, "shutdown not done %u ms after it started (admin io_timeout "
		      "%u ms)", BOUND_MS, ADMIN_IO_TIMEOUT_MS);
	ck_assert_str_eq(nvmf_queue_state_name(f.c.adminq.state), "dead");
	ck_assert(!f.c.teardown_running);
	unsigned ms = (unsigned)((done_ns - t0) / NSEC_PER_MSEC);
	/* A late completion starts no second teardown. */
	for (int i = 0; i < 20; i++)
		reactor_poll(&f.r, 10 * NSEC_PER_MSEC);
	ck_assert_int_eq(done_calls, 1);
	ctrlfx_fini(&f);
	return ms;
}

START_TEST(property_set_unanswered)
{
	unsigned ms = shutdown_unanswered_after(0);
	ck_assert_uint_ge(ms, SHN_TEST_MS - 100);
}
END_TEST

START_TEST(csts_poll_unanswered)
{
	unsigned ms = shutdown_unanswered_after(1);
	ck_assert_uint_ge(ms, SHN_TEST_MS - 100);
}
END_TEST

START_TEST(csts_poll_unanswered_after_polls)
{
	unsigned ms = shutdown_unanswered_after(4);
	ck_assert_uint_ge(ms, SHN_TEST_MS - 100);
}
END_TEST

/* A keep-alive answered after the CC.SHN Property Set went out: the
 * shutdown goes on with the Set's completion and ends when the controller
 * reports SHST complete, not at its deadline.  The keep-alive's completion
 * cleared the shutdown's poll (fixed in 42f86bd): the Set's completion was
 * then taken for nobody's, no CSTS poll went out, and the shutdown waited
 * out its 5 s bound with a false warning. */
START_TEST(keep_alive_answered_during_shutdown)
{
	struct ctrl_fixture f;
	struct nvme_sqe ka, set, poll;

	done_calls = 0;
	ck_assert_int_eq(ctrlfx_init(&f, "shn-ka"), 0);
	f.c.adminq.io_timeout_ms = ADMIN_IO_TIMEOUT_MS;
	/* Far past what the test waits for: a busy host cannot fail it. */
	f.c.shutdown_timeout_ms = 20 * SHN_TEST_MS;
	/* A keep-alive now, left unanswered for the moment. */
	f.c.opts.kato_ms = 10000;
	reactor_timer_arm(&f.r, &f.c.kato_timer, 1);
	ck_assert(ctrlfx_wait_cmd(&f, &ka, 1000));
	ck_assert_msg(ka.opcode == NVME_ADMIN_KEEP_ALIVE, "not a keep-alive: opcode 0x%02x",
		      ka.opcode);
	uint64_t t0 = reactor_now_ns();
	nvmf_ctrl_shutdown(&f.c, on_done);
	ck_assert(ctrlfx_wait_cmd(&f, &set, 1000));
	ck_assert(is_property(&set, NVMF_FCTYPE_PROPERTY_SET, NVME_REG_CC));
	/* The keep-alive's answer first, then the Set's. */
	ck_assert(ctrlfx_reply(&f, ka.cid, NULL, 0, 0, 0));
	ck_assert(ctrlfx_reply(&f, set.cid, NULL, 0, 0, 0));
	ck_assert_msg(ctrlfx_wait_cmd(&f, &poll, 10 * SHN_TEST_MS),
		      "no CSTS poll within %u ms of the Set's answer", 10 * SHN_TEST_MS);
	ck_assert_msg(is_property(&poll, NVMF_FCTYPE_PROPERTY_GET, NVME_REG_CSTS),
		      "not a CSTS poll: opcode 0x%02x", poll.opcode);
	/* SHST 10b: shutdown processing complete. */
	ck_assert(ctrlfx_reply(&f, poll.cid, NULL, 0, 0, 2u << 2));
	uint64_t end = t0 + (uint64_t)BOUND_MS * NSEC_PER_MSEC;
	while (!done_calls && reactor_now_ns() < end) {
		ctrlfx_settle(&f);
		reactor_poll(&f.r, 10 * NSEC_PER_MSEC);
	}
	ck_assert_int_eq(done_calls, 1);
	unsigned ms = (unsigned)((done_ns - t0) / NSEC_PER_MSEC);
	/* By the reactor's clock; the deadline is 20 s. */
	ck_assert_msg(ms < 10 * SHN_TEST_MS, "shutdown took %u ms: it waited for its deadline", ms);
	ctrlfx_fini(&f);
}
END_TEST

static Suite *ctrl_shutdown_suite(void)
{
	Suite *s = suite_create("ctrl_shutdown");
	TCase *tc = tcase_create("ctrl_shutdown");

	/* The hang guard only: each case takes about 5 s. */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, property_set_unanswered);
	tcase_add_test(tc, csts_poll_unanswered);
	tcase_add_test(tc, csts_poll_unanswered_after_polls);
	tcase_add_test(tc, keep_alive_answered_during_shutdown);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctrl_shutdown_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
