/* The controller's bring-up and teardown against the in-tree test target
 * (build/nvmf-test-target on loopback, started per test case): what lands
 * in reactor 0's mailbox while a teardown starts.
 *
 * An I/O queue's Connect result posted to reactor 0 but not yet handled
 * when a shutdown starts (SIGTERM's completion in the same batch as the
 * Connect response's), a queue that connects and drops while the others
 * connect, the admin queue lost while the I/O queues connect.  Each case
 * checks what the owner relies on: the callback runs once, only after
 * every queue is dead, and the controller can be connected again. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor.h"
#include "transports/ctrl.h"

#include "target_proc.h"

#define SUBNQN "nqn.2026-01.test:teardown"
#define GUARD_MS 15000u /* far past any step here; a hang is a failure */

static struct target_proc tgt;

static void opts_fill(struct nvmf_ctrl_opts *o, unsigned nioq)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "td");
	snprintf(o->subnqn, sizeof(o->subnqn), "%s", SUBNQN);
	snprintf(o->hostnqn, sizeof(o->hostnqn),
		 "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000cc");
	o->path.trtype = NVMF_TR_TCP;
	strcpy(o->path.traddr, "127.0.0.1");
	snprintf(o->path.trsvcid, sizeof(o->path.trsvcid), "%s", tgt.port);
	o->path.tos = -1;
	o->nr_io_queues = nioq;
	o->queue_size = 32;
	o->kato_ms = 5000;
	o->io_timeout_ms = 30000;
}

static struct reactor R, R2;
static struct nvmf_ctrl C;

/* What each callback saw when it ran. */
static int ready_calls, ready_err, done_calls;
static bool ready_all_dead, done_all_dead;

static bool all_queues_dead(struct nvmf_ctrl *c)
{
	if (c->adminq.state != NVMF_Q_DEAD)
		return false;
	for (unsigned i = 0; c->ioq && i < c->nr_ioq; i++)
		if (c->ioq[i].state != NVMF_Q_DEAD)
			return false;
	return true;
}

static void on_ready(struct nvmf_ctrl *c, int err)
{
	ready_calls++;
	ready_err = err;
	ready_all_dead = all_queues_dead(c);
}

static void on_done(struct nvmf_ctrl *c, int err)
{
	(void)err;
	done_calls++;
	done_all_dead = all_queues_dead(c) && !c->teardown_running;
}

static void reset_counts(void)
{
	ready_calls = ready_err = done_calls = 0;
	ready_all_dead = done_all_dead = false;
}

/* Polls R until *flag is set or GUARD_MS of the reactor's clock pass. */
static bool poll_until(const int *flag)
{
	uint64_t end = reactor_now_ns() + (uint64_t)GUARD_MS * NSEC_PER_MSEC;

	while (!*flag && reactor_now_ns() < end)
		reactor_poll(&R, 10 * NSEC_PER_MSEC);
	return *flag;
}

static void poll_for(unsigned ms)
{
	uint64_t end = reactor_now_ns() + (uint64_t)ms * NSEC_PER_MSEC;

	while (reactor_now_ns() < end)
		reactor_poll(&R, NSEC_PER_MSEC);
}

/* Polls R until ioq[i] has its Connect callback (ioq_start ran). */
static void wait_ioq_started(unsigned i)
{
	uint64_t end = reactor_now_ns() + (uint64_t)GUARD_MS * NSEC_PER_MSEC;

	while (!(C.step == INIT_IO_QUEUES && C.ioq && C.ioq[i].connect_cb) &&
	       reactor_now_ns() < end && !ready_calls)
		reactor_poll(&R, NSEC_PER_MSEC / 10);
	ck_assert_msg(C.ioq && C.ioq[i].connect_cb, "I/O queue %u never started connecting", i + 1);
}

static void setup(void)
{
	log_init();
	ck_assert_int_eq(reactor_init(&R, 0, 64), 0);
	target_proc_start(&tgt, "ctrl-teardown", SUBNQN, false, NULL, GUARD_MS);
	reset_counts();
	memset(&C, 0, sizeof(C));
}

static void teardown(void)
{
	target_proc_stop(&tgt);
}

/* After the case: the controller comes up again and shuts down cleanly
 * (no teardown left running, no stray message counted). */
static void reconnect_and_shutdown(void)
{
	reset_counts();
	ck_assert_int_eq(nvmf_ctrl_reconnect(&C, on_ready), 0);
	ck_assert(poll_until(&ready_calls));
	ck_assert_int_eq(ready_err, 0);
	ck_assert_str_eq(nvmf_ctrl_state_name(C.state), "live");
	nvmf_ctrl_shutdown(&C, on_done);
	ck_assert(poll_until(&done_calls));
	poll_for(200);
	ck_assert_int_eq(done_calls, 1);
	ck_assert(done_all_dead);
	nvmf_ctrl_free(&C);
}

/* ---- a shutdown with an I/O queue's Connect result in the mailbox ---- */

static nvmf_queue_cb orig_connect_cb[4];

static void connect_then_shutdown(struct nvmf_queue *q, int err)
{
	orig_connect_cb[q->qid - 1](q, err); /* posts the result to R */
	nvmf_ctrl_shutdown(q->ctrl, on_done);
}

START_TEST(shutdown_with_connect_result_queued)
{
	struct nvmf_ctrl_opts o;

	opts_fill(&o, 2);
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	wait_ioq_started(0);
	orig_connect_cb[0] = C.ioq[0].connect_cb;
	C.ioq[0].connect_cb = connect_then_shutdown;
	ck_assert_msg(poll_until(&done_calls), "shutdown callback never called (nr_ioq_pending %u)",
		      C.nr_ioq_pending);
	poll_for(500);
	ck_assert_int_eq(done_calls, 1);
	ck_assert_msg(done_all_dead, "the shutdown callback ran before every queue was dead");
	ck_assert_int_eq(ready_calls, 0);
	ck_assert(!C.teardown_running);
	ck_assert_uint_le(C.nr_ioq_pending, C.nr_ioq);
	nvmf_ctrl_free(&C);
}
END_TEST

/* The same with the I/O queue on another reactor's thread: reactor 0 is
 * not run from the I/O queues' start until their result is in its
 * mailbox, then shuts down before handling it. */
static struct reactor_msg r2_stop_msg;

static void r2_stop(struct reactor_msg *m)
{
	(void)m;
	reactor_stop(&R2);
}

static bool mailbox_empty(struct reactor *r)
{
	pthread_mutex_lock(&r->mbox_lock);
	bool e = list_empty(&r->mbox);
	pthread_mutex_unlock(&r->mbox_lock);
	return e;
}

/* R2 held in a message until the test lets it go: its I/O queue cannot
 * connect (and post its result) before reactor 0 is at that step, however
 * the threads are scheduled. */
static pthread_mutex_t hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static bool hold_go;
static struct reactor_msg hold_msg;

static void r2_hold(struct reactor_msg *m)
{
	(void)m;
	pthread_mutex_lock(&hold_mu);
	while (!hold_go)
		pthread_cond_wait(&hold_cv, &hold_mu);
	pthread_mutex_unlock(&hold_mu);
}

static void r2_release(void)
{
	pthread_mutex_lock(&hold_mu);
	hold_go = true;
	pthread_cond_signal(&hold_cv);
	pthread_mutex_unlock(&hold_mu);
}

START_TEST(shutdown_with_connect_result_queued_two_reactors)
{
	struct reactor *io_r[1] = { &R2 };
	struct nvmf_ctrl_opts o;

	ck_assert_int_eq(reactor_init(&R2, 1, 64), 0);
	ck_assert_int_eq(reactor_start_thread(&R2), 0);
	hold_go = false;
	hold_msg.fn = r2_hold;
	reactor_send_msg(&R2, &hold_msg);
	opts_fill(&o, 1);
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, io_r, on_ready), 0);
	uint64_t end = reactor_now_ns() + (uint64_t)GUARD_MS * NSEC_PER_MSEC;
	while (C.step != INIT_IO_QUEUES && !ready_calls && reactor_now_ns() < end)
		reactor_poll(&R, NSEC_PER_MSEC / 10);
	ck_assert_int_eq(C.step, INIT_IO_QUEUES);
	r2_release();
	/* Only the I/O queue's thread posts to R from here. */
	while (mailbox_empty(&R) && reactor_now_ns() < end)
		usleep(1000);
	ck_assert(!mailbox_empty(&R));
	nvmf_ctrl_shutdown(&C, on_done);
	ck_assert_msg(poll_until(&done_calls), "shutdown callback never called (nr_ioq_pending %u)",
		      C.nr_ioq_pending);
	poll_for(500);
	ck_assert_int_eq(done_calls, 1);
	ck_assert_msg(done_all_dead, "the shutdown callback ran before every queue was dead");
	ck_assert(!C.teardown_running);
	nvmf_ctrl_free(&C);
	r2_stop_msg.fn = r2_stop;
	reactor_send_msg(&R2, &r2_stop_msg);
	reactor_join(&R2);
	reactor_fini(&R2);
}
END_TEST

/* ---- an I/O queue connects, then drops while the others connect ---- */

/* ioq[0] goes down once connected; ioq[2]'s result is held until then, so
 * that it arrives after the bring-up decided. */
static struct nvmf_queue *held_q;
static int held_err;
static void (*orig_down0)(struct nvmf_queue *q, int err);

static void connect_then_drop(struct nvmf_queue *q, int err)
{
	orig_connect_cb[0](q, err);
	nvmf_queue_transport_error(q, -ECONNRESET, "dropped by the test");
}

static void connect_held(struct nvmf_queue *q, int err)
{
	held_q = q;
	held_err = err;
}

static void down_then_release(struct nvmf_queue *q, int err)
{
	orig_down0(q, err);
	if (held_q)
		orig_connect_cb[2](held_q, held_err);
	held_q = NULL;
}

START_TEST(ioq_lost_while_others_connect)
{
	struct nvmf_ctrl_opts o;

	opts_fill(&o, 3);
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	wait_ioq_started(0);
	wait_ioq_started(2);
	orig_connect_cb[0] = C.ioq[0].connect_cb;
	C.ioq[0].connect_cb = connect_then_drop;
	orig_down0 = C.ioq[0].down_cb;
	C.ioq[0].down_cb = down_then_release;
	orig_connect_cb[2] = C.ioq[2].connect_cb;
	C.ioq[2].connect_cb = connect_held;
	ck_assert(poll_until(&ready_calls));
	poll_for(500);
	ck_assert_int_eq(ready_calls, 1);
	ck_assert_int_ne(ready_err, 0);
	ck_assert_msg(ready_all_dead, "the failure was reported before every queue was dead");
	ck_assert(!C.teardown_running);
	/* One result per queue at most: a count that went below zero wrapped. */
	ck_assert_msg(C.nr_ioq_pending <= C.nr_ioq, "I/O queue count wrapped: %u",
		      C.nr_ioq_pending);
	reconnect_and_shutdown();
}
END_TEST

/* ---- the admin queue lost while the I/O queues connect ---- */

static struct reactor_msg late_msg;
static struct nvmf_queue *late_q;
static int late_err;

static void late_result(struct reactor_msg *m)
{
	(void)m;
	orig_connect_cb[0](late_q, late_err);
}

/* The admin connection is gone before the I/O queue's result is handled. */
static void admin_lost_then_result(struct nvmf_queue *q, int err)
{
	nvmf_queue_transport_error(&q->ctrl->adminq, -ETIMEDOUT, "lost (test)");
	late_q = q;
	late_err = err;
	late_msg.fn = late_result;
	reactor_defer(&R, &late_msg);
}

/* The same, the result posted at once (the admin queue still draining). */
static void admin_lost_with_result(struct nvmf_queue *q, int err)
{
	nvmf_queue_transport_error(&q->ctrl->adminq, -ETIMEDOUT, "lost (test)");
	orig_connect_cb[0](q, err);
}

static void admin_lost_case(nvmf_queue_cb wrap)
{
	struct nvmf_ctrl_opts o;

	opts_fill(&o, 1);
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	wait_ioq_started(0);
	orig_connect_cb[0] = C.ioq[0].connect_cb;
	C.ioq[0].connect_cb = wrap;
	ck_assert(poll_until(&ready_calls));
	poll_for(500);
	ck_assert_int_eq(ready_calls, 1);
	ck_assert_msg(ready_err != 0, "bring-up reported success with the admin queue %s",
		      nvmf_queue_state_name(C.adminq.state));
	ck_assert_str_ne(nvmf_ctrl_state_name(C.state), "live");
	ck_assert(ready_all_dead);
	ck_assert(!C.teardown_running);
	reconnect_and_shutdown();
}

START_TEST(admin_lost_before_ioq_result)
{
	admin_lost_case(admin_lost_then_result);
}
END_TEST

START_TEST(admin_lost_as_ioq_result_posted)
{
	admin_lost_case(admin_lost_with_result);
}
END_TEST

static Suite *ctrl_teardown_suite(void)
{
	Suite *s = suite_create("ctrl_teardown");
	TCase *tc = tcase_create("ctrl_teardown");

	/* Each case is a second or two; the bound is only the hang guard. */
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, shutdown_with_connect_result_queued);
	tcase_add_test(tc, shutdown_with_connect_result_queued_two_reactors);
	tcase_add_test(tc, ioq_lost_while_others_connect);
	tcase_add_test(tc, admin_lost_before_ioq_result);
	tcase_add_test(tc, admin_lost_as_ioq_result_posted);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctrl_teardown_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
