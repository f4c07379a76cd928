/* The recovery rules in isolation: the controller state machine's
 * transition table, what the host does with each class of NVMe status,
 * and ANA log page parsing (including pages that lie about their size). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ctrl.h"
#include "transports/nvme_spec.h"
#include "transports/status.h"

enum { N = NVMF_CTRL_DEAD + 1 };
enum { NEW_ = NVMF_CTRL_NEW, CON = NVMF_CTRL_CONNECTING, LIV = NVMF_CTRL_LIVE,
       RES = NVMF_CTRL_RESETTING, DEL = NVMF_CTRL_DELETING, DEA = NVMF_CTRL_DEAD };

/* allowed[from][to], as the Linux host has it, plus DEAD -> CONNECTING
 * for an operator's reset of a deleted path. */
static const bool allowed[N][N] = {
	[NEW_] = { [CON] = 1, [DEL] = 1, [DEA] = 1 },
	[CON] = { [LIV] = 1, [DEL] = 1, [DEA] = 1 },
	[LIV] = { [RES] = 1, [DEL] = 1, [DEA] = 1 },
	[RES] = { [CON] = 1, [DEL] = 1, [DEA] = 1 },
	[DEL] = { [DEA] = 1 },
	[DEA] = { [CON] = 1 },
};

START_TEST(transition_table)
{
	struct nvmf_ctrl *c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	strcpy(c->opts.name, "unit");
	for (int from = 0; from < N; from++)
		for (int to = 0; to < N; to++) {
			c->state = (enum nvmf_ctrl_state)from;
			bool ok = nvmf_ctrl_set_state(c, (enum nvmf_ctrl_state)to);
			ck_assert_msg(ok == allowed[from][to], "%s -> %s: returned %d",
				      nvmf_ctrl_state_name(from), nvmf_ctrl_state_name(to), ok);
			enum nvmf_ctrl_state want = allowed[from][to] ? to : from;
			ck_assert_msg(c->state == want, "%s -> %s: got %s",
				      nvmf_ctrl_state_name(from), nvmf_ctrl_state_name(to),
				      nvmf_ctrl_state_name(c->state));
		}
	free(c);
}
END_TEST

/* The queue's table, and the bool its setter returns. */
START_TEST(queue_transition_table)
{
	enum { QN = NVMF_Q_DEAD + 1 };
	enum { IDL = NVMF_Q_IDLE, QCO = NVMF_Q_CONNECTING, FAB = NVMF_Q_FABRIC_CONNECT,
	       QLI = NVMF_Q_LIVE, DRA = NVMF_Q_DRAINING, QDE = NVMF_Q_DEAD };
	static const bool q_allowed[QN][QN] = {
		[IDL] = { [QCO] = 1, [QDE] = 1 },
		[QCO] = { [FAB] = 1, [DRA] = 1 },
		[FAB] = { [QLI] = 1, [DRA] = 1 },
		[QLI] = { [DRA] = 1 },
		[DRA] = { [QDE] = 1 },
		[QDE] = { [QCO] = 1 },
	};
	struct nvmf_queue *q = calloc(1, sizeof(*q));
	ck_assert_ptr_nonnull(q);
	strcpy(q->name, "unit q0");
	for (int from = 0; from < QN; from++)
		for (int to = 0; to < QN; to++) {
			q->state = (enum nvmf_queue_state)from;
			bool ok = nvmf_queue_set_state(q, (enum nvmf_queue_state)to);
			ck_assert_msg(ok == q_allowed[from][to] &&
					      (int)q->state == (ok ? to : from),
				      "%s -> %s: returned %d, now %s", nvmf_queue_state_name(from),
				      nvmf_queue_state_name(to), ok, nvmf_queue_state_name(q->state));
		}
	free(q);
}
END_TEST

/* A reconnect is for a controller that was connected and is down: the
 * states the table refuses, NEW and a running teardown say -EBUSY and
 * leave the controller as it was. */
START_TEST(reconnect_refused)
{
	struct nvmf_ctrl *c = calloc(1, sizeof(*c));
	const enum nvmf_ctrl_state busy[] = { NVMF_CTRL_NEW, NVMF_CTRL_LIVE, NVMF_CTRL_DELETING };

	ck_assert_ptr_nonnull(c);
	strcpy(c->opts.name, "unit");
	for (unsigned i = 0; i < sizeof(busy) / sizeof(busy[0]); i++) {
		c->state = busy[i];
		ck_assert_int_eq(nvmf_ctrl_reconnect(c, NULL), -EBUSY);
		ck_assert_int_eq(c->state, busy[i]);
	}
	c->state = NVMF_CTRL_RESETTING;
	c->teardown_running = true;
	ck_assert_int_eq(nvmf_ctrl_reconnect(c, NULL), -EBUSY);
	ck_assert_int_eq(c->state, NVMF_CTRL_RESETTING);
	free(c);
}
END_TEST

static uint16_t st(unsigned sct, unsigned sc, bool dnr, unsigned crd)
{
	return (uint16_t)(sc | sct << 8 | crd << 11 | (dnr ? 1u << 14 : 0));
}

START_TEST(disposition_by_class)
{
	ck_assert_int_eq(nvme_status_disposition(0), NVME_DISP_DONE);
	/* DNR always wins, whatever the class. */
	ck_assert_int_eq(nvme_status_disposition(st(0, 0x02, true, 0)), NVME_DISP_FAIL);
	ck_assert_int_eq(nvme_status_disposition(st(2, 0x81, true, 0)), NVME_DISP_FAIL);
	ck_assert_int_eq(nvme_status_disposition(st(3, 0x02, true, 0)), NVME_DISP_FAIL);
	/* Without DNR: generic, command specific and media errors retry. */
	ck_assert_int_eq(nvme_status_disposition(st(0, 0x06, false, 0)), NVME_DISP_RETRY);
	ck_assert_int_eq(nvme_status_disposition(st(0, 0x22, false, 1)), NVME_DISP_RETRY);
	ck_assert_int_eq(nvme_status_disposition(st(1, 0x05, false, 0)), NVME_DISP_RETRY);
	ck_assert_int_eq(nvme_status_disposition(st(2, 0x81, false, 0)), NVME_DISP_RETRY);
	/* Path-related status goes to another path; the ANA ones wait for
	 * the ANA state (every row: test_status.c). */
	ck_assert_int_eq(nvme_status_disposition(st(3, 0, false, 0)), NVME_DISP_FAILOVER);
	for (unsigned sc = 1; sc <= 3; sc++)
		ck_assert_int_eq(nvme_status_disposition(st(3, sc, false, 0)), NVME_DISP_ANA);
	ck_assert_int_eq(nvme_status_disposition(st(3, 0x70, false, 0)), NVME_DISP_FAILOVER);
	/* Only the three ANA codes make the host re-read the ANA log. */
	ck_assert(!nvme_status_is_ana(st(3, 0x00, false, 0)));
	ck_assert(nvme_status_is_ana(st(3, 0x01, false, 0)));
	ck_assert(nvme_status_is_ana(st(3, 0x02, false, 0)));
	ck_assert(nvme_status_is_ana(st(3, 0x03, false, 0)));
	ck_assert(!nvme_status_is_ana(st(3, 0x70, false, 0)));
	ck_assert(!nvme_status_is_ana(st(0, 0x02, false, 0)));
	ck_assert_uint_eq(NVME_STATUS_CRD(st(0, 0x06, false, 2)), 2);
	/* The errno an exporter sees for the common ones. */
	ck_assert_int_eq(nvme_status_to_errno(st(0, 0x80, true, 0)), -EINVAL);
	ck_assert_int_eq(nvme_status_to_errno(st(3, 0x02, false, 0)), -ENOLINK);
}
END_TEST

struct seen {
	unsigned n;
	uint32_t grp[8];
	uint8_t state[8];
};

static void on_group(void *arg, uint32_t grpid, uint8_t state)
{
	struct seen *s = arg;
	ck_assert_uint_lt(s->n, 8);
	s->grp[s->n] = grpid;
	s->state[s->n++] = state;
}

/* A page with groups (grpid, state, nnsids). */
static size_t build(uint8_t *buf, const uint32_t (*g)[3], unsigned ng, uint64_t chg)
{
	struct nvme_ana_log_hdr h = { .chgcnt = chg, .ngrps = (uint16_t)ng };
	size_t off = sizeof(h);

	memcpy(buf, &h, sizeof(h));
	for (unsigned i = 0; i < ng; i++) {
		struct nvme_ana_group_desc d = { .grpid = g[i][0], .nnsids = g[i][2],
						 .state = (uint8_t)g[i][1] };
		memcpy(buf + off, &d, sizeof(d));
		off += sizeof(d);
		for (uint32_t k = 0; k < g[i][2]; k++, off += 4) {
			uint32_t nsid = 100 * (i + 1) + k;
			memcpy(buf + off, &nsid, 4);
		}
	}
	return off;
}

START_TEST(ana_parse_groups)
{
	uint8_t buf[4096] = { 0 };
	const uint32_t g[3][3] = { { 1, NVME_ANA_OPTIMIZED, 2 },
				   { 2, NVME_ANA_INACCESSIBLE, 0 },
				   { 7, 0xf0 | NVME_ANA_CHANGE, 3 } };
	size_t len = build(buf, g, 3, 42);
	struct seen s = { 0 };
	uint64_t chg = 0;

	ck_assert_int_eq(nvmf_ana_log_parse(buf, len, &chg, on_group, &s), 0);
	ck_assert_uint_eq(chg, 42);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_uint_eq(s.grp[0], 1);
	ck_assert_uint_eq(s.state[0], NVME_ANA_OPTIMIZED);
	ck_assert_uint_eq(s.grp[1], 2);
	ck_assert_uint_eq(s.state[1], NVME_ANA_INACCESSIBLE);
	ck_assert_uint_eq(s.grp[2], 7);
	ck_assert_uint_eq(s.state[2], NVME_ANA_CHANGE); /* reserved bits masked */
	ck_assert_str_eq(nvme_ana_state_name(NVME_ANA_NON_OPTIMIZED), "non-optimized");
	ck_assert_str_eq(nvme_ana_state_name(9), "unknown");
}
END_TEST

START_TEST(ana_parse_lies)
{
	uint8_t buf[4096] = { 0 };
	const uint32_t g[2][3] = { { 1, NVME_ANA_OPTIMIZED, 1 }, { 2, NVME_ANA_OPTIMIZED, 1 } };
	size_t len = build(buf, g, 2, 1);
	struct seen s = { 0 };

	/* Every truncation of a valid page is refused, never read past. */
	for (size_t cut = 0; cut < len; cut++) {
		uint8_t *copy = malloc(cut ? cut : 1);
		memcpy(copy, buf, cut);
		s.n = 0;
		ck_assert_int_eq(nvmf_ana_log_parse(copy, cut, NULL, on_group, &s), -EPROTO);
		free(copy);
	}
	/* A group claiming more namespaces than the page holds. */
	struct nvme_ana_group_desc d;
	memcpy(&d, buf + sizeof(struct nvme_ana_log_hdr), sizeof(d));
	d.nnsids = 0xffffffffu;
	memcpy(buf + sizeof(struct nvme_ana_log_hdr), &d, sizeof(d));
	ck_assert_int_eq(nvmf_ana_log_parse(buf, len, NULL, on_group, &s), -EPROTO);
	/* No groups at all is a valid (if useless) page. */
	const uint32_t none[1][3] = { { 0, 0, 0 } };
	len = build(buf, none, 0, 3);
	s.n = 0;
	ck_assert_int_eq(nvmf_ana_log_parse(buf, len, NULL, on_group, &s), 0);
	ck_assert_uint_eq(s.n, 0);
}
END_TEST

/* The target moved a namespace to another ANA group: the page lists it
 * under the new one, and the controller's table follows (group and that
 * group's state), so the multipath snapshot carries the real group. */
START_TEST(ana_apply_regroup)
{
	uint8_t buf[4096] = { 0 };
	static struct nvmf_ctrl c;
	struct nvmf_ns ns[2] = {
		{ .nsid = 100, .anagrpid = 5, .ana_state = NVME_ANA_OPTIMIZED },
		{ .nsid = 200, .anagrpid = 2, .ana_state = NVME_ANA_OPTIMIZED },
	};
	struct nvmf_ana_grp out[2];

	memset(&c, 0, sizeof(c));
	strcpy(c.opts.name, "unit");
	c.ns = ns;
	c.nr_ns = 2;
	/* nsid 100 listed in group 7 (build numbers descriptor 0's as 100). */
	const uint32_t moved[2][3] = { { 7, NVME_ANA_INACCESSIBLE, 1 }, { 2, NVME_ANA_OPTIMIZED, 0 } };
	size_t len = build(buf, moved, 2, 1);
	ck_assert_int_eq(nvmf_ctrl_ana_apply(&c, buf, len), 1);
	ck_assert_uint_eq(ns[0].anagrpid, 7);
	ck_assert_uint_eq(ns[0].ana_state, NVME_ANA_INACCESSIBLE);
	ck_assert_uint_eq(ns[1].anagrpid, 2);
	ck_assert_uint_eq(ns[1].ana_state, NVME_ANA_OPTIMIZED);
	ck_assert_uint_eq(nvmf_ctrl_ana_groups(&c, out), 2);
	ck_assert_uint_eq(nvmf_ana_grp_state(out, 2, 7), NVME_ANA_INACCESSIBLE);
	ck_assert_uint_eq(nvmf_ana_grp_state(out, 2, 5), 0);
	/* The same page again changes nothing. */
	ck_assert_int_eq(nvmf_ctrl_ana_apply(&c, buf, len), 0);
	/* Group ID 0 is no group; an NSID the table does not have (300) is
	 * ignored; a group listing nothing moves nothing. */
	const uint32_t odd[3][3] = { { 0, NVME_ANA_OPTIMIZED, 1 },
				     { 9, NVME_ANA_OPTIMIZED, 0 },
				     { 9, NVME_ANA_OPTIMIZED, 1 } };
	len = build(buf, odd, 3, 2);
	ck_assert_int_eq(nvmf_ctrl_ana_apply(&c, buf, len), 0);
	ck_assert_uint_eq(ns[0].anagrpid, 7);
	ck_assert_uint_eq(ns[1].anagrpid, 2);
	/* nsid 100 listed in groups 7 and 8 (a broken target): it moved to
	 * 8 and back to 7 at every read, a change (and four log lines) each
	 * time.  The first group holds, and the same page is no change. */
	const uint32_t dup[2][3] = { { 7, NVME_ANA_INACCESSIBLE, 1 }, { 8, NVME_ANA_OPTIMIZED, 1 } };
	len = build(buf, dup, 2, 3);
	uint32_t hundred = 100;
	memcpy(buf + sizeof(struct nvme_ana_log_hdr) + 2 * sizeof(struct nvme_ana_group_desc) + 4,
	       &hundred, 4);
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(nvmf_ctrl_ana_apply(&c, buf, len), 0);
		ck_assert_uint_eq(ns[0].anagrpid, 7);
		ck_assert_uint_eq(ns[0].ana_state, NVME_ANA_INACCESSIBLE);
	}
}
END_TEST

static Suite *recovery_suite(void)
{
	Suite *s = suite_create("recovery");
	TCase *tc = tcase_create("recovery");

	tcase_add_test(tc, transition_table);
	tcase_add_test(tc, queue_transition_table);
	tcase_add_test(tc, reconnect_refused);
	tcase_add_test(tc, disposition_by_class);
	tcase_add_test(tc, ana_parse_groups);
	tcase_add_test(tc, ana_parse_lies);
	tcase_add_test(tc, ana_apply_regroup);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(recovery_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
