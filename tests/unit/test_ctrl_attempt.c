/* A bring-up attempt against a target that answers every admin command
 * late, but well within the step bound: the attempt ends at its own whole
 * bound (the controller's attempt_timeout_ms, shortened for the test), not
 * after every command's answer, and a reconnect's attempt gets a bound of
 * its own.  The target is the in-tree one (admin-delay MS) with a
 * subsystem of several namespaces, each of which costs two more admin
 * commands. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor.h"
#include "transports/ctrl.h"
#include "transports/ctrl_priv.h"

#include "target_proc.h"

#define SUBNQN "nqn.2026-01.test:attempt"
#define MANY_NQN "nqn.2026-01.test:attempt-many"
#define NR_NS "8"
#define ADMIN_DELAY_MS 500u
/* Connect, CAP, VS, CC, CSTS, Identify, queue count, namespace list, then
 * two per namespace, each answered ADMIN_DELAY_MS late: the whole
 * bring-up takes at least this long when nothing bounds the attempt. */
#define UNBOUNDED_MS ((8u + 2u * 8u) * ADMIN_DELAY_MS)
#define ATTEMPT_MS 2000u
#define GUARD_MS 60000u /* far past the unbounded bring-up; a hang fails */

static struct target_proc tgt;
static struct reactor R;
static struct nvmf_ctrl C;
static int ready_calls, ready_err;
static uint64_t ready_ns;

static void on_ready(struct nvmf_ctrl *c, int err)
{
	(void)c;
	ready_calls++;
	ready_err = err;
	ready_ns = reactor_now_ns();
}

static void setup(void)
{
	static const char *const extra[] = { "--subsys", MANY_NQN ":1M:512:" NR_NS,
					     "--admin-delay", "500", NULL };

	log_init();
	ck_assert_int_eq(reactor_init(&R, 0, 64), 0);
	target_proc_start(&tgt, "ctrl-attempt", SUBNQN, false, extra, 15000);
	memset(&C, 0, sizeof(C));
	ready_calls = ready_err = 0;
}

/* The same subsystem answered at once. */
static void setup_quick(void)
{
	static const char *const extra[] = { "--subsys", MANY_NQN ":1M:512:" NR_NS, NULL };

	log_init();
	ck_assert_int_eq(reactor_init(&R, 0, 64), 0);
	target_proc_start(&tgt, "ctrl-attempt", SUBNQN, false, extra, 15000);
	memset(&C, 0, sizeof(C));
	ready_calls = ready_err = 0;
}

static void teardown(void)
{
	target_proc_stop(&tgt);
}

static void opts_fill(struct nvmf_ctrl_opts *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "attempt");
	snprintf(o->subnqn, sizeof(o->subnqn), "%s", MANY_NQN);
	snprintf(o->hostnqn, sizeof(o->hostnqn),
		 "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000cd");
	o->path.trtype = NVMF_TR_TCP;
	strcpy(o->path.traddr, "127.0.0.1");
	snprintf(o->path.trsvcid, sizeof(o->path.trsvcid), "%s", tgt.port);
	o->path.tos = -1;
	o->nr_io_queues = 1;
	o->queue_size = 32;
	o->kato_ms = 5000;
	o->io_timeout_ms = 30000;
}

/* Polls R until the attempt reports; its length in ms. */
static unsigned attempt_ms(uint64_t t0)
{
	uint64_t end = t0 + (uint64_t)GUARD_MS * NSEC_PER_MSEC;

	while (!ready_calls && reactor_now_ns() < end)
		reactor_poll(&R, 10 * NSEC_PER_MSEC);
	ck_assert_msg(ready_calls == 1, "the attempt did not end within %u ms", GUARD_MS);
	return (unsigned)((ready_ns - t0) / NSEC_PER_MSEC);
}

START_TEST(slow_answers_end_at_the_attempt_bound)
{
	struct nvmf_ctrl_opts o;

	opts_fill(&o);
	C.attempt_timeout_ms = ATTEMPT_MS;
	uint64_t t0 = reactor_now_ns();
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	unsigned ms = attempt_ms(t0);
	/* Each answer within its step's 10 s: only the whole bound ends it,
	 * before the target has answered everything. */
	ck_assert_msg(ready_err == -ETIMEDOUT,
		      "attempt ended with %d after %u ms (bound %u ms; all answers take %u ms)",
		      ready_err, ms, ATTEMPT_MS, UNBOUNDED_MS);
	ck_assert_uint_ge(ms, ATTEMPT_MS);
	ck_assert_msg(ms < UNBOUNDED_MS, "failed after %u ms, not at the %u ms bound", ms,
		      ATTEMPT_MS);
	ck_assert_str_eq(nvmf_ctrl_state_name(C.state), "dead");

	/* A reconnect is a new attempt with a whole bound of its own, not
	 * the first one's deadline, long past. */
	ready_calls = 0;
	t0 = reactor_now_ns();
	ck_assert_int_eq(nvmf_ctrl_reconnect(&C, on_ready), 0);
	ms = attempt_ms(t0);
	ck_assert_int_eq(ready_err, -ETIMEDOUT);
	ck_assert_uint_ge(ms, ATTEMPT_MS);
	ck_assert_str_eq(nvmf_ctrl_state_name(C.state), "connecting");
	nvmf_ctrl_free(&C);
}
END_TEST

/* The default bound grows by ATTEMPT_NS_MS per active namespace once the
 * list is read, so that many namespaces far away still come up; and it is
 * what the attempt's failure would name. */
START_TEST(default_bound_counts_namespaces)
{
	struct nvmf_ctrl_opts o;

	opts_fill(&o);
	o.path.connect_timeout_ms = 3000;
	uint64_t t0 = reactor_now_ns();
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	(void)attempt_ms(t0);
	ck_assert_int_eq(ready_err, 0);
	unsigned want = 2 * (DEFAULT_STEP_TIMEOUT_MS + 3000) + ATTEMPT_CMDS_MS +
			(NVME_CAP_TO(C.cap) ? NVME_CAP_TO(C.cap) : 1) * 500u + 8 * 1000u; /* 1 s a namespace */
	ck_assert_uint_eq(C.attempt_ms, want);
	nvmf_ctrl_free(&C);
}
END_TEST

static Suite *ctrl_attempt_suite(void)
{
	Suite *s = suite_create("ctrl_attempt");
	TCase *tc = tcase_create("ctrl_attempt");

	/* The hang guard only: the case takes about 2 x 2 s. */
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, slow_answers_end_at_the_attempt_bound);
	suite_add_tcase(s, tc);
	tc = tcase_create("allowance");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup_quick, teardown);
	tcase_add_test(tc, default_bound_counts_namespaces);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctrl_attempt_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
