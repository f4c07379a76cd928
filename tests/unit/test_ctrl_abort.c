/* Commands that get no answer, against the in-tree test target (build/
 * nvmf-test-target on loopback, started per test case): timed-out I/O
 * commands on a target that honours Abort all have their Abort sent at
 * the moment they time out, not one per grace period; an unanswered
 * CSTS poll at bring-up ends at CAP.TO, not at io_timeout. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "gateway/base/reactor.h"
#include "transports/ctrl.h"
#include "transports/nvme_spec.h"
#include "transports/transport.h"

#include "target_proc.h"

#define SUBNQN "nqn.2026-01.test:abort"
#define GUARD_MS 15000u /* bring-up and shutdown; a hang is a failure */

static struct target_proc tgt;

/* One fault command over the target's control socket; its reply. */
static void target_ctl(const char *cmd, char *reply, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t got = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ctl", tgt.dir);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
	ck_assert_int_eq(write(fd, "\n", 1), 1);
	while (got < len - 1 && (!got || reply[got - 1] != '\n')) {
		ssize_t r = read(fd, reply + got, len - 1 - got);
		ck_assert_int_gt(r, 0);
		got += (size_t)r;
	}
	reply[got] = 0;
	close(fd);
	ck_assert_msg(!strncmp(reply, "ok", 2), "target: %s: %s", cmd, reply);
}

static void opts_fill(struct nvmf_ctrl_opts *o, unsigned nioq)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->name, sizeof(o->name), "ab");
	snprintf(o->subnqn, sizeof(o->subnqn), "%s", SUBNQN);
	snprintf(o->hostnqn, sizeof(o->hostnqn),
		 "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000cd");
	o->path.trtype = NVMF_TR_TCP;
	strcpy(o->path.traddr, "127.0.0.1");
	snprintf(o->path.trsvcid, sizeof(o->path.trsvcid), "%s", tgt.port);
	o->path.tos = -1;
	o->nr_io_queues = nioq;
	o->queue_size = 32;
	o->kato_ms = 5000;
	o->io_timeout_ms = 30000;
}

static struct reactor R;
static struct nvmf_ctrl C;
static int ready_calls, ready_err, done_calls;

static void on_ready(struct nvmf_ctrl *c, int err)
{
	(void)c;
	ready_calls++;
	ready_err = err;
}

static void on_done(struct nvmf_ctrl *c, int err)
{
	(void)c;
	(void)err;
	done_calls++;
}

static bool poll_until(const int *flag, unsigned ms)
{
	uint64_t end = reactor_now_ns() + (uint64_t)ms * NSEC_PER_MSEC;

	while (!*flag && reactor_now_ns() < end)
		reactor_poll(&R, 10 * NSEC_PER_MSEC);
	return *flag;
}

/* ---- stuck reads, all timed out at once, aborted at once ---- */

#define NR_READS 8
#define IO_TIMEOUT_MS 2000u

static uint8_t bufs[NR_READS][4096];
static int reads_done, read_errs[NR_READS];
static uint16_t read_st[NR_READS];
static uint64_t read_ns[NR_READS];

static void read_done(struct nvmf_req *req, int err)
{
	unsigned i = (unsigned)(uintptr_t)req->ctx;

	read_errs[i] = err;
	read_st[i] = (uint16_t)((req->cqe.status >> 1) & 0x7ff);
	read_ns[i] = reactor_now_ns();
	nvmf_req_put(req);
	reads_done++;
}

START_TEST(stuck_reads_aborted_together)
{
	const char *const faults[] = { "--abort-honour", "on", NULL };
	struct nvmf_ctrl_opts o;
	char reply[640];

	target_proc_start(&tgt, "ctrl-abort", SUBNQN, true, faults, GUARD_MS);
	opts_fill(&o, 1);
	o.io_timeout_ms = IO_TIMEOUT_MS;
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	ck_assert(poll_until(&ready_calls, GUARD_MS));
	ck_assert_int_eq(ready_err, 0);
	/* Only now: the I/O queue's Connect is not to wait. */
	target_ctl("delay 600000", reply, sizeof(reply));

	uint64_t t0 = reactor_now_ns();
	for (unsigned i = 0; i < NR_READS; i++) {
		struct nvmf_req *req = nvmf_req_get(&C.ioq[0]);
		struct iovec iov = { bufs[i], sizeof(bufs[i]) };
		ck_assert_ptr_nonnull(req);
		req->sqe.opcode = NVME_CMD_READ;
		req->sqe.nsid = 1;
		req->sqe.cdw10 = i * 8;
		req->sqe.cdw12 = 7;
		nvmf_req_set_data(req, &iov, 1, sizeof(bufs[i]), false);
		req->done = read_done;
		req->ctx = (void *)(uintptr_t)i;
		nvmf_req_submit(req);
	}
	/* The target completes them only when aborted (600 s delay).  One
	 * Abort per grace period (2 s with this io_timeout) had the last
	 * one out 16 s after they were sent. */
	uint64_t end = t0 + 40 * NSEC_PER_SEC;
	while (reads_done < NR_READS && reactor_now_ns() < end)
		reactor_poll(&R, 10 * NSEC_PER_MSEC);
	ck_assert_msg(reads_done == NR_READS, "%d of %d reads completed in 40 s", reads_done,
		      NR_READS);
	uint64_t last = 0;
	for (unsigned i = 0; i < NR_READS; i++) {
		ck_assert_msg(!read_errs[i] && read_st[i] == 0x07,
			      "read %u: err %d status 0x%03x (want Command Abort Requested)", i,
			      read_errs[i], read_st[i]);
		if (read_ns[i] - t0 > last)
			last = read_ns[i] - t0;
	}
	/* io_timeout then a few round trips on loopback; a wide margin. */
	ck_assert_msg(last < (IO_TIMEOUT_MS + 5000) * NSEC_PER_MSEC,
		      "the last read was aborted %llu ms after it was sent (io_timeout %u ms)",
		      (unsigned long long)(last / NSEC_PER_MSEC), IO_TIMEOUT_MS);
	/* Every Abort was honoured: no reset.  An Abort's own completion
	 * comes after its victim's. */
	end = reactor_now_ns() + 5 * NSEC_PER_SEC;
	while (C.nr_aborts && reactor_now_ns() < end)
		reactor_poll(&R, 10 * NSEC_PER_MSEC);
	ck_assert_uint_eq(C.nr_aborts, 0);
	ck_assert_str_eq(nvmf_ctrl_state_name(C.state), "live");
	ck_assert_uint_eq(C.resets, 0);
	target_ctl("stats", reply, sizeof(reply));
	ck_assert_msg(strstr(reply, " abort_cmds=8 aborted=8"), "target: %s", reply);

	nvmf_ctrl_shutdown(&C, on_done);
	ck_assert(poll_until(&done_calls, GUARD_MS));
	nvmf_ctrl_free(&C);
}
END_TEST

/* ---- the CSTS.RDY wait: a poll never answered ---- */

START_TEST(rdy_poll_unanswered)
{
	const char *const faults[] = { "--rdy-stall", "on", NULL };
	struct nvmf_ctrl_opts o;

	target_proc_start(&tgt, "ctrl-abort", SUBNQN, true, faults, GUARD_MS);
	opts_fill(&o, 1);
	o.io_timeout_ms = 60000; /* what an unanswered poll used to wait */
	/* Longer than CAP.TO: no keep-alive goes out before the bring-up
	 * ends, and the target counts from the Connect. */
	o.kato_ms = 30000;
	uint64_t t0 = reactor_now_ns();
	ck_assert_int_eq(nvmf_ctrl_connect(&C, &o, &R, NULL, on_ready), 0);
	/* The target's CAP.TO is 7.5 s; 20 s is a wide margin under 60. */
	ck_assert_msg(poll_until(&ready_calls, 20000),
		      "bring-up still waiting 20 s after it started (CAP.TO 7.5 s, io_timeout 60 s)");
	ck_assert_int_eq(ready_err, -ETIMEDOUT);
	ck_assert_uint_ge((reactor_now_ns() - t0) / NSEC_PER_MSEC, 7000);
	nvmf_ctrl_shutdown(&C, on_done);
	ck_assert(poll_until(&done_calls, GUARD_MS));
	nvmf_ctrl_free(&C);
}
END_TEST

static void setup(void)
{
	log_init();
	ck_assert_int_eq(reactor_init(&R, 0, 64), 0);
	ready_calls = ready_err = done_calls = 0;
	memset(&C, 0, sizeof(C));
}

static void teardown(void)
{
	target_proc_stop(&tgt);
}

static Suite *ctrl_abort_suite(void)
{
	Suite *s = suite_create("ctrl_abort");
	TCase *tc = tcase_create("ctrl_abort");

	/* The hang guard only: the case takes a few seconds. */
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, stuck_reads_aborted_together);
	tcase_add_test(tc, rdy_poll_unanswered);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ctrl_abort_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
