/* What a namespace change means for an export: (old, new) -> action, and
 * the controller's table kept in NSID order as events add, replace and
 * remove entries. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/ctrl_fixture.h"
#include "transports/ctrl.h"
#include "transports/ctrl_priv.h"

/* The AER completion of a Namespace Attribute Changed notice. */
#define NS_CHANGED_AEN \
	(0x2 | (NVME_AER_NOTICE_NS_CHANGED << 8) | ((uint32_t)NVME_LOG_CHANGED_NS << 16))

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

/* The host's next command, which must be opcode op (and, for Get Log
 * Page, log lid). */
static struct nvme_sqe expect_cmd(struct ctrl_fixture *f, uint8_t op, int lid)
{
	struct nvme_sqe sqe;

	ck_assert_msg(ctrlfx_next_cmd(f, &sqe), "the host sent opcode 0x%02x", op);
	ck_assert_uint_eq(sqe.opcode, op);
	if (lid >= 0)
		ck_assert_uint_eq(sqe.cdw10 & 0xff, (unsigned)lid);
	return sqe;
}

struct served {
	unsigned logs, ids, aers;
	uint16_t aer_cid;
};

/* Plays the target until the host sends nothing more: the Changed
 * Namespace List names nsid, whose Identify says nsze blocks; an AER is
 * held (counted). */
static struct served serve(struct ctrl_fixture *f, uint32_t nsid, uint64_t nsze)
{
	static uint32_t log[1024];
	static struct nvme_id_ns id;
	struct served sv = { 0 };
	struct nvme_sqe sqe;

	while (ctrlfx_next_cmd(f, &sqe)) {
		if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT) {
			sv.aers++;
			sv.aer_cid = sqe.cid;
		} else if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE &&
			   (sqe.cdw10 & 0xff) == NVME_LOG_CHANGED_NS) {
			sv.logs++;
			memset(log, 0, sizeof(log));
			log[0] = nsid;
			ck_assert(ctrlfx_reply(f, sqe.cid, log, sizeof(log), 0, 0));
		} else if (sqe.opcode == NVME_ADMIN_IDENTIFY && (sqe.cdw10 & 0xff) == NVME_ID_CNS_NS) {
			sv.ids++;
			ck_assert_uint_eq(sqe.nsid, nsid);
			ctrlfx_id_ns(&id, nsze, 9, 0x31);
			ck_assert(ctrlfx_reply(f, sqe.cid, &id, 4096, 0, 0));
		} else {
			ck_abort_msg("unexpected admin opcode 0x%02x", sqe.opcode);
		}
	}
	return sv;
}

static void put_done(struct nvmf_req *req, int err)
{
	(void)err;
	nvmf_req_put(req);
}

/* A Namespace Attribute Changed event that arrives while every admin
 * request the others may take is busy (keep-alives, Aborts the target
 * holds): the log is read, the namespace re-identified, and the AER
 * armed again, from the requests kept back for them. */
START_TEST(event_with_admin_queue_full)
{
	static struct ctrl_fixture f;
	uint16_t held[ADMIN_QUEUE_SIZE];
	struct nvme_sqe aer;
	struct nvmf_ns ns = ns_make(1, 2048, 9, 0x31);
	unsigned nheld = 0;

	ck_assert_int_eq(ctrlfx_init(&f, "full"), 0);
	ck_assert(nvmf_ctrl_ns_update(&f.c, 1, &ns));
	ctrlfx_arm_aer(&f);
	aer = expect_cmd(&f, NVME_ADMIN_ASYNC_EVENT, -1);
	/* Every request the queue hands out, taken and left unanswered. */
	struct nvmf_req *req;
	while (nheld < ADMIN_QUEUE_SIZE && (req = nvmf_admin_req(&f.c))) {
		req->sqe.opcode = NVME_ADMIN_KEEP_ALIVE;
		req->done = put_done;
		nvmf_req_submit(req);
		held[nheld++] = req->cid;
	}
	/* 31 requests: the AER's, this many, and the reserve left free. */
	ck_assert_uint_ge(nheld, ADMIN_QUEUE_SIZE - 2 - NVMF_ADMIN_RESERVED);
	for (unsigned i = 0; i < nheld; i++)
		expect_cmd(&f, NVME_ADMIN_KEEP_ALIVE, -1);
	/* Notice 00h, Namespace Attribute Changed, log 04h. */
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0, NS_CHANGED_AEN));
	struct served sv = serve(&f, 1, 4096);
	ck_assert_msg(sv.logs == 1, "the Changed Namespace List log was read");
	ck_assert_msg(sv.ids == 1, "the namespace was identified again");
	ck_assert_msg(sv.aers == 1, "the AER was armed again");
	ck_assert_uint_eq(f.c.ns_events, 1);
	ck_assert_uint_eq(f.ns_cb_calls, 1);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->nsze, 4096);
	/* And the next event is seen as well: nothing was lost. */
	ck_assert(ctrlfx_reply(&f, sv.aer_cid, NULL, 0, 0,
			       NS_CHANGED_AEN));
	sv = serve(&f, 1, 8192);
	ck_assert(sv.logs == 1 && sv.ids == 1 && sv.aers == 1);
	ck_assert_uint_eq(f.c.ns_events, 2);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->nsze, 8192);
	for (unsigned i = 0; i < nheld; i++)
		ck_assert(ctrlfx_reply(&f, held[i], NULL, 0, 0, 0));
	ctrlfx_fini(&f);
}
END_TEST

/* Both events while the queue is full: the namespace change's Get Log
 * Page still unanswered (its request and the re-armed AER taken from the
 * reserve) when an ANA change event arrives.  The ANA log is read as
 * well, from the request kept for it; before, it found no request, waited
 * for a next event the target never sends (it waits for the log to be
 * read), and the path kept its old ANA state. */
START_TEST(ana_event_with_ns_change_in_flight)
{
	static struct ctrl_fixture f;
	static uint8_t ana[4096];
	static uint32_t log[1024];
	static struct nvme_id_ns id;
	struct nvmf_ns ns = ns_make(1, 2048, 9, 0x31);
	struct nvme_sqe sqe, aer, getlog = { 0 };
	uint16_t held[ADMIN_QUEUE_SIZE];
	unsigned nheld = 0;
	struct nvmf_req *req;

	ck_assert_int_eq(ctrlfx_init(&f, "full-ana"), 0);
	f.c.ana = true;
	ns.anagrpid = 1;
	ns.ana_state = NVME_ANA_OPTIMIZED;
	ck_assert(nvmf_ctrl_ns_update(&f.c, 1, &ns));
	f.c.ns[0].ana_state = NVME_ANA_OPTIMIZED;
	ctrlfx_arm_aer(&f);
	aer = expect_cmd(&f, NVME_ADMIN_ASYNC_EVENT, -1);
	while (nheld < ADMIN_QUEUE_SIZE && (req = nvmf_admin_req(&f.c))) {
		req->sqe.opcode = NVME_ADMIN_KEEP_ALIVE;
		req->done = put_done;
		nvmf_req_submit(req);
		held[nheld++] = req->cid;
	}
	for (unsigned i = 0; i < nheld; i++)
		expect_cmd(&f, NVME_ADMIN_KEEP_ALIVE, -1);
	/* The namespace change: its Get Log Page left unanswered. */
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0, NS_CHANGED_AEN));
	bool have_log = false, have_aer = false;
	while (ctrlfx_next_cmd(&f, &sqe)) {
		if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT)
			aer = sqe, have_aer = true;
		else if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE)
			getlog = sqe, have_log = true;
	}
	ck_assert(have_log && have_aer);
	/* The ANA change: group 1 inaccessible. */
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0,
			       0x2 | (NVME_AER_NOTICE_ANA_CHANGE << 8) | ((uint32_t)NVME_LOG_ANA << 16)));
	bool ana_read = false;
	have_aer = false;
	while (ctrlfx_next_cmd(&f, &sqe)) {
		if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT) {
			have_aer = true;
		} else if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE && (sqe.cdw10 & 0xff) == NVME_LOG_ANA) {
			struct nvme_ana_log_hdr h = { .chgcnt = 2, .ngrps = 1 };
			struct nvme_ana_group_desc g = { .grpid = 1, .nnsids = 1, .chgcnt = 2,
							 .state = NVME_ANA_INACCESSIBLE };
			uint32_t nsid = 1;
			memset(ana, 0, sizeof(ana));
			memcpy(ana, &h, sizeof(h));
			memcpy(ana + sizeof(h), &g, sizeof(g));
			memcpy(ana + sizeof(h) + sizeof(g), &nsid, sizeof(nsid));
			ana_read = true;
			ck_assert(ctrlfx_reply(&f, sqe.cid, ana, sizeof(ana), 0, 0));
		} else {
			ck_abort_msg("unexpected admin opcode 0x%02x", sqe.opcode);
		}
	}
	ck_assert_msg(ana_read, "the ANA log was read");
	ck_assert_msg(have_aer, "the AER was armed again");
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->ana_state, NVME_ANA_INACCESSIBLE);
	/* The namespace change finishes too. */
	memset(log, 0, sizeof(log));
	log[0] = 1;
	ck_assert(ctrlfx_reply(&f, getlog.cid, log, sizeof(log), 0, 0));
	sqe = expect_cmd(&f, NVME_ADMIN_IDENTIFY, NVME_ID_CNS_NS);
	ctrlfx_id_ns(&id, 4096, 9, 0x31);
	ck_assert(ctrlfx_reply(&f, sqe.cid, &id, 4096, 0, 0));
	/* nsc_end refreshes ANA for a table that changed: served here. */
	while (ctrlfx_next_cmd(&f, &sqe)) {
		ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_GET_LOG_PAGE);
		ck_assert(ctrlfx_reply(&f, sqe.cid, ana, sizeof(ana), 0, 0));
	}
	ck_assert_uint_eq(f.c.ns_events, 1);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->nsze, 4096);
	for (unsigned i = 0; i < nheld; i++)
		ck_assert(ctrlfx_reply(&f, held[i], NULL, 0, 0, 0));
	ctrlfx_fini(&f);
}
END_TEST

/* A Changed Namespace List with FFFFFFFFh past its first entry (the
 * broadcast NSID, whose Identify describes every namespace) and repeats:
 * only the real NSIDs are identified, each once, in order; the table
 * never gains a namespace FFFFFFFFh (found by fuzz_ns_change). */
START_TEST(log_with_broadcast_nsid)
{
	static struct ctrl_fixture f;
	static uint32_t log[1024];
	static struct nvme_id_ns id;
	struct nvme_sqe sqe, aer;
	uint32_t asked[8];
	unsigned nasked = 0;

	ck_assert_int_eq(ctrlfx_init(&f, "bcast"), 0);
	ctrlfx_arm_aer(&f);
	aer = expect_cmd(&f, NVME_ADMIN_ASYNC_EVENT, -1);
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0, NS_CHANGED_AEN));
	while (ctrlfx_next_cmd(&f, &sqe)) {
		if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT)
			continue;
		if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE) {
			memset(log, 0, sizeof(log));
			log[0] = 2;
			log[1] = 0xffffffffu;
			log[2] = 2;
			log[3] = 1;
			ck_assert(ctrlfx_reply(&f, sqe.cid, log, sizeof(log), 0, 0));
			continue;
		}
		ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_IDENTIFY);
		ck_assert_uint_lt(nasked, 8);
		asked[nasked++] = sqe.nsid;
		/* What a target may answer for the broadcast NSID: data. */
		ctrlfx_id_ns(&id, 4096, 9, 0x40);
		ck_assert(ctrlfx_reply(&f, sqe.cid, &id, 4096, 0, 0));
	}
	ck_assert_uint_eq(nasked, 2);
	ck_assert_uint_eq(asked[0], 1);
	ck_assert_uint_eq(asked[1], 2);
	ck_assert_uint_eq(f.c.nr_ns, 2);
	ck_assert_ptr_null(nvmf_ctrl_find_ns(&f.c, 0xffffffffu));
	ck_assert_uint_eq(f.c.ns_events, 1);
	ctrlfx_fini(&f);
}
END_TEST

/* The Changed Namespace List log read fails with a status: the target
 * sends no further event until the log is read, so the host reads it
 * again on a timer (about 1 s later by its clock) and applies the change. */
START_TEST(log_read_failure_retried)
{
	static struct ctrl_fixture f;
	static uint32_t log[1024];
	static struct nvme_id_ns id;
	struct nvme_sqe sqe, aer;
	struct nvmf_ns ns = ns_make(1, 2048, 9, 0x31);

	ck_assert_int_eq(ctrlfx_init(&f, "retry"), 0);
	ck_assert(nvmf_ctrl_ns_update(&f.c, 1, &ns));
	ctrlfx_arm_aer(&f);
	aer = expect_cmd(&f, NVME_ADMIN_ASYNC_EVENT, -1);
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0, NS_CHANGED_AEN));
	unsigned logs = 0;
	while (ctrlfx_next_cmd(&f, &sqe))
		if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE) {
			logs++;
			ck_assert(ctrlfx_reply(&f, sqe.cid, NULL, 0, 0x06, 0)); /* internal error */
		}
	ck_assert_uint_eq(logs, 1);
	uint64_t t0 = reactor_now_ns();
	ck_assert_msg(ctrlfx_wait_cmd(&f, &sqe, 3000), "the log was not read again");
	ck_assert_uint_ge(reactor_now_ns() - t0, 500 * NSEC_PER_MSEC);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_GET_LOG_PAGE);
	memset(log, 0, sizeof(log));
	log[0] = 1;
	ck_assert(ctrlfx_reply(&f, sqe.cid, log, sizeof(log), 0, 0));
	sqe = expect_cmd(&f, NVME_ADMIN_IDENTIFY, NVME_ID_CNS_NS);
	ctrlfx_id_ns(&id, 4096, 9, 0x31);
	ck_assert(ctrlfx_reply(&f, sqe.cid, &id, 4096, 0, 0));
	ck_assert_uint_eq(f.c.ns_events, 1);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->nsze, 4096);
	ctrlfx_fini(&f);
}
END_TEST

/* The host's next command other than an AER armed again (whose place in
 * the stream depends on when its send is reaped). */
static struct nvme_sqe next_not_aer(struct ctrl_fixture *f)
{
	struct nvme_sqe sqe;

	do
		ck_assert_msg(ctrlfx_wait_cmd(f, &sqe, 3000), "no command from the host");
	while (sqe.opcode == NVME_ADMIN_ASYNC_EVENT);
	return sqe;
}

/* A retry pending from a failed read is dropped when a later event's read
 * works: it would read the log again and report a change that is none. */
START_TEST(retry_dropped_after_a_good_read)
{
	static struct ctrl_fixture f;
	static uint32_t log[1024];
	static struct nvme_id_ns id;
	struct nvme_sqe sqe, aer;
	struct nvmf_ns ns = ns_make(1, 2048, 9, 0x31);
	uint16_t aer2 = 0;
	bool have_aer2 = false;

	ck_assert_int_eq(ctrlfx_init(&f, "retry2"), 0);
	ck_assert(nvmf_ctrl_ns_update(&f.c, 1, &ns));
	ctrlfx_arm_aer(&f);
	aer = expect_cmd(&f, NVME_ADMIN_ASYNC_EVENT, -1);
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0, NS_CHANGED_AEN));
	while (ctrlfx_next_cmd(&f, &sqe)) {
		if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE)
			ck_assert(ctrlfx_reply(&f, sqe.cid, NULL, 0, 0x06, 0)); /* internal error */
		else if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT) {
			aer2 = sqe.cid;
			have_aer2 = true;
		}
	}
	ck_assert_msg(have_aer2, "the AER was not armed again");
	/* Before the 1 s retry: the next event, and its read works. */
	ck_assert(ctrlfx_reply(&f, aer2, NULL, 0, 0, NS_CHANGED_AEN));
	sqe = next_not_aer(&f);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_GET_LOG_PAGE);
	memset(log, 0, sizeof(log));
	log[0] = 1;
	ck_assert(ctrlfx_reply(&f, sqe.cid, log, sizeof(log), 0, 0));
	sqe = next_not_aer(&f);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_IDENTIFY);
	ctrlfx_id_ns(&id, 4096, 9, 0x31);
	ck_assert(ctrlfx_reply(&f, sqe.cid, &id, 4096, 0, 0));
	ck_assert_uint_eq(f.c.ns_events, 1);
	/* Past the retry's due time: nothing but the re-armed AER. */
	uint64_t t0 = reactor_now_ns();
	while (reactor_now_ns() - t0 < 2500 * NSEC_PER_MSEC) {
		if (!ctrlfx_wait_cmd(&f, &sqe, 200))
			continue;
		ck_assert_msg(sqe.opcode == NVME_ADMIN_ASYNC_EVENT,
			      "opcode 0x%02x after a good read: the old retry fired", sqe.opcode);
	}
	ck_assert_uint_eq(f.c.ns_events, 1);
	ctrlfx_fini(&f);
}
END_TEST

/* An Identify that fails after the log was read (Namespace Not Ready
 * while the array reformats, say) is asked again on the retry timer,
 * through the active list: the log that named it is gone. */
START_TEST(identify_failure_retried)
{
	static struct ctrl_fixture f;
	static uint32_t log[1024];
	static struct nvme_id_ns id;
	struct nvme_sqe sqe, aer;
	struct nvmf_ns ns = ns_make(1, 2048, 9, 0x31);

	ck_assert_int_eq(ctrlfx_init(&f, "idretry"), 0);
	ck_assert(nvmf_ctrl_ns_update(&f.c, 1, &ns));
	ctrlfx_arm_aer(&f);
	aer = expect_cmd(&f, NVME_ADMIN_ASYNC_EVENT, -1);
	ck_assert(ctrlfx_reply(&f, aer.cid, NULL, 0, 0, NS_CHANGED_AEN));
	sqe = next_not_aer(&f);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_GET_LOG_PAGE);
	memset(log, 0, sizeof(log));
	log[0] = 1;
	ck_assert(ctrlfx_reply(&f, sqe.cid, log, sizeof(log), 0, 0));
	sqe = next_not_aer(&f);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_IDENTIFY);
	ck_assert(ctrlfx_reply(&f, sqe.cid, NULL, 0, 0x82, 0)); /* Namespace Not Ready */
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->nsze, 2048);
	/* The retry: the log (empty now), then every active namespace. */
	uint64_t t0 = reactor_now_ns();
	sqe = next_not_aer(&f);
	ck_assert_uint_ge(reactor_now_ns() - t0, 500 * NSEC_PER_MSEC);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_GET_LOG_PAGE);
	memset(log, 0, sizeof(log));
	ck_assert(ctrlfx_reply(&f, sqe.cid, log, sizeof(log), 0, 0));
	sqe = next_not_aer(&f);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_IDENTIFY);
	ck_assert_uint_eq(sqe.cdw10 & 0xff, NVME_ID_CNS_NS_ACTIVE_LIST);
	log[0] = 1;
	ck_assert(ctrlfx_reply(&f, sqe.cid, log, 4096, 0, 0));
	sqe = next_not_aer(&f);
	ck_assert_uint_eq(sqe.opcode, NVME_ADMIN_IDENTIFY);
	ck_assert_uint_eq(sqe.nsid, 1);
	ctrlfx_id_ns(&id, 4096, 9, 0x31);
	ck_assert(ctrlfx_reply(&f, sqe.cid, &id, 4096, 0, 0));
	for (int i = 0; i < 100 && nvmf_ctrl_find_ns(&f.c, 1)->nsze != 4096; i++)
		ctrlfx_wait_cmd(&f, &sqe, 10);
	ck_assert_uint_eq(nvmf_ctrl_find_ns(&f.c, 1)->nsze, 4096);
	ck_assert_uint_eq(f.c.ns_events, 2);
	ctrlfx_fini(&f);
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
	tcase_add_test(tc, event_with_admin_queue_full);
	tcase_add_test(tc, ana_event_with_ns_change_in_flight);
	tcase_add_test(tc, log_with_broadcast_nsid);
	tcase_add_test(tc, log_read_failure_retried);
	tcase_add_test(tc, retry_dropped_after_a_good_read);
	tcase_add_test(tc, identify_failure_retried);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
