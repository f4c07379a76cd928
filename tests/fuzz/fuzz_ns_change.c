/* libFuzzer harness for namespaces that change while the controller is
 * live (transports/ns_change.c): the Namespace Attribute Changed event,
 * the Changed Namespace List log (04h) the host reads, the active list it
 * reads when that log overflowed, and the re-identify that updates its
 * table.  The controller's code runs unchanged on a live admin queue
 * (tests/unit/ctrl_fixture.c); the input plays the target: the table the
 * host starts with, then, command by command, what the target answers
 * (lists of NSIDs, sizes, formats, identities, error statuses), and when
 * it sends an event (also while the host is still busy with the last).
 * Checked (with the code's own INVARIANTs, on in this build: one event
 * handled at a time, one of its commands in flight, the table in NSID
 * order):
 * - the host never has more than one AER and one other command out;
 * - it identifies only NSIDs the log (or, after an overflow, the active
 *   list or its own table) named, never NSID 0 or FFFFFFFFh;
 * - a namespace it did not identify, or whose Identify failed with a
 *   status other than Invalid Namespace, is left exactly as it was;
 * - the table holds only NSIDs 1..FFFFFFFEh, each once;
 * - every event handled is reported to the owner once (ns_cb).
 * A failed log read is retried by the host on a 1 s timer: a round that
 * outlasts it meets that read first. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/unit/ctrl_fixture.h"

#define NSMAX 12u /* NSIDs the input names mostly come from 0..NSMAX-1 */
#define EVENTS 6
#define CMDS 400

struct in {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint32_t take32(struct in *in)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++)
		v = v << 8 | take(in);
	return v;
}

/* An NSID as a target might list it: mostly small, sometimes anything. */
static uint32_t take_nsid(struct in *in)
{
	uint8_t b = take(in);
	if (b >= 0xf0)
		return b == 0xff ? 0xffffffffu : take32(in);
	return b % NSMAX;
}

static struct ctrl_fixture f;
static uint32_t page[1024];
static struct nvme_id_ns id;
static struct nvmf_ns before[NVME_CHANGED_NS_MAX];
static unsigned nr_before;

/* What one round (from an event to quiet) may identify and did touch. */
static uint8_t allowed_small[NSMAX];
static uint32_t allowed_big[2 * NVME_CHANGED_NS_MAX];
static unsigned nr_allowed_big;
static uint32_t touched[CMDS];
static unsigned nr_touched;

static int allowed(uint32_t nsid);

static void allow(uint32_t nsid)
{
	if (nsid < NSMAX)
		allowed_small[nsid] = 1;
	else if (!allowed(nsid)) {
		check(nr_allowed_big < sizeof(allowed_big) / sizeof(allowed_big[0]));
		allowed_big[nr_allowed_big++] = nsid;
	}
}

static int allowed(uint32_t nsid)
{
	if (nsid < NSMAX)
		return allowed_small[nsid];
	for (unsigned i = 0; i < nr_allowed_big; i++)
		if (allowed_big[i] == nsid)
			return 1;
	return 0;
}

static int was_touched(uint32_t nsid)
{
	for (unsigned i = 0; i < nr_touched; i++)
		if (touched[i] == nsid)
			return 1;
	return 0;
}

static void snapshot(void)
{
	nr_before = f.c.nr_ns;
	memcpy(before, f.c.ns, nr_before * sizeof(*before));
	memset(allowed_small, 0, sizeof(allowed_small));
	nr_allowed_big = 0;
	nr_touched = 0;
}

static const struct nvmf_ns *find(const struct nvmf_ns *t, unsigned n, uint32_t nsid)
{
	for (unsigned i = 0; i < n; i++)
		if (t[i].nsid == nsid)
			return &t[i];
	return NULL;
}

/* The table after a round against the one before it. */
static void check_round(void)
{
	const struct nvmf_ctrl *c = &f.c;

	check(!c->nsc_busy && !c->nsc_inflight);
	check(f.ns_cb_calls == c->ns_events);
	for (unsigned i = 0; i < c->nr_ns; i++) {
		check(c->ns[i].nsid && c->ns[i].nsid != 0xffffffffu);
		check(!i || c->ns[i - 1].nsid < c->ns[i].nsid);
		if (!was_touched(c->ns[i].nsid)) {
			const struct nvmf_ns *o = find(before, nr_before, c->ns[i].nsid);
			check(o && !memcmp(o, &c->ns[i], sizeof(*o)));
		}
	}
	for (unsigned i = 0; i < nr_before; i++)
		if (!was_touched(before[i].nsid))
			check(find(c->ns, c->nr_ns, before[i].nsid));
}

static void reply_log(struct in *in, const struct nvme_sqe *sqe)
{
	uint8_t m = take(in);

	memset(page, 0, sizeof(page));
	if (m % 8 == 7) {
		ctrlfx_reply(&f, sqe->cid, NULL, 0, 0x06, 0); /* internal error */
		return;
	}
	if (m % 8 == 6) {
		page[0] = 0xffffffffu; /* overflowed */
		ctrlfx_reply(&f, sqe->cid, page, sizeof(page), 0, 0);
		return;
	}
	unsigned k = m & 0x80 ? 1024 : take(in) % 17;
	for (unsigned i = 0; i < k; i++) {
		page[i] = m & 0x80 ? (i + 1) * 3 : take_nsid(in);
		if (!page[i])
			break;
		allow(page[i]);
	}
	ctrlfx_reply(&f, sqe->cid, page, sizeof(page), 0, 0);
}

static void reply_list(struct in *in, const struct nvme_sqe *sqe)
{
	unsigned k = take(in) % 17;
	uint32_t prev = 0;

	memset(page, 0, sizeof(page));
	for (unsigned i = 0; i < k; i++)
		page[i] = take_nsid(in);
	/* What the host may then identify: the list as far as it is valid
	 * (ascending, no FFFFFFFFh), and what its table has. */
	for (unsigned i = 0; i < k && page[i] && page[i] != 0xffffffffu && page[i] > prev; i++)
		allow(prev = page[i]);
	for (unsigned i = 0; i < f.c.nr_ns; i++)
		allow(f.c.ns[i].nsid);
	ctrlfx_reply(&f, sqe->cid, page, sizeof(page), take(in) == 0xee ? 0x06 : 0, 0);
}

static void reply_identify(struct in *in, const struct nvme_sqe *sqe)
{
	uint8_t s = take(in);

	check(sqe->nsid && sqe->nsid != 0xffffffffu);
	check(allowed(sqe->nsid));
	switch (s % 8) {
	case 5: /* Invalid Namespace or Format: gone */
		check(nr_touched < CMDS);
		touched[nr_touched++] = sqe->nsid;
		ctrlfx_reply(&f, sqe->cid, NULL, 0, 0x0b, 0);
		return;
	case 6: /* Command Interrupted: says nothing of the namespace */
		ctrlfx_reply(&f, sqe->cid, NULL, 0, 0x21, 0);
		return;
	default:
		break;
	}
	check(nr_touched < CMDS);
	touched[nr_touched++] = sqe->nsid;
	uint8_t ds = s & 0x80 ? take(in) : (uint8_t)(9 + take(in) % 4);
	uint64_t nsze = s % 8 == 7 ? 0 : (uint64_t)take(in) << 8 | take(in);
	if (s & 0x40)
		nsze = (uint64_t)take32(in) << 32 | take32(in);
	ctrlfx_id_ns(&id, nsze, ds, take(in) % 3);
	if (s & 0x20) {
		id.nlbaf = take(in);
		id.flbas = take(in);
	}
	ctrlfx_reply(&f, sqe->cid, &id, sizeof(id), 0, 0);
}

static void event(uint16_t cid)
{
	ctrlfx_reply(&f, cid, NULL, 0, 0,
		     0x2 | (NVME_AER_NOTICE_NS_CHANGED << 8) | ((uint32_t)NVME_LOG_CHANGED_NS << 16));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	struct in in = { data, size };
	struct nvme_sqe sqe, held[4];
	unsigned nheld = 0, cmds = 0;
	int aer = -1; /* the held AER's CID */

	if (!once) {
		once = 1;
		log_set_level(LOG_LVL_ERR);
	}
	check(ctrlfx_init(&f, "fuzz") == 0);
	/* The table the host starts with: NSIDs from a bit mask, sizes and
	 * formats from the input. */
	uint16_t mask = (uint16_t)(take(&in) | take(&in) << 8);
	for (uint32_t nsid = 1; nsid < NSMAX; nsid++) {
		if (!(mask & (1u << nsid)))
			continue;
		struct nvmf_ns ns;
		ctrlfx_id_ns(&id, 1 + take(&in), 9 + take(&in) % 4, (uint8_t)(nsid % 3));
		if (nvmf_ns_from_id("fuzz", nsid, &id, &ns) > 0)
			check(nvmf_ctrl_ns_update(&f.c, nsid, &ns));
	}
	ctrlfx_arm_aer(&f);
	for (unsigned ev = 0; ev < EVENTS && in.n; ev++) {
		snapshot();
		/* The AER out, and nothing else (the last round is over),
		 * unless a failed log read is retried by its timer now (a
		 * round longer than its 1 s): that is served as a round. */
		int pending = 0;
		while (ctrlfx_next_cmd(&f, &sqe)) {
			if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT) {
				check(aer < 0);
				aer = sqe.cid;
				continue;
			}
			check(!pending && sqe.opcode == NVME_ADMIN_GET_LOG_PAGE);
			held[0] = sqe;
			pending = 1;
		}
		if (!pending) {
			check(aer >= 0);
			event((uint16_t)aer);
			aer = -1;
		}
		for (;;) {
			/* Everything the host sent so far: one AER at most
			 * and one command of the change at most. */
			nheld = pending;
			pending = 0;
			while (ctrlfx_next_cmd(&f, &sqe)) {
				if (sqe.opcode == NVME_ADMIN_ASYNC_EVENT) {
					check(aer < 0);
					aer = sqe.cid;
					continue;
				}
				check(nheld < 1);
				held[nheld++] = sqe;
			}
			if (!nheld)
				break;
			check(++cmds < CMDS * 4);
			sqe = held[0];
			if (!in.n)
				break; /* the target stops answering: torn down below */
			/* Sometimes the next event first, while the host is
			 * busy: it is handled after this one, not lost. */
			if (aer >= 0 && take(&in) == 0xa5) {
				event((uint16_t)aer);
				aer = -1;
			}
			if (sqe.opcode == NVME_ADMIN_GET_LOG_PAGE &&
			    (sqe.cdw10 & 0xff) == NVME_LOG_CHANGED_NS)
				reply_log(&in, &sqe);
			else if (sqe.opcode == NVME_ADMIN_IDENTIFY &&
				 (sqe.cdw10 & 0xff) == NVME_ID_CNS_NS_ACTIVE_LIST)
				reply_list(&in, &sqe);
			else if (sqe.opcode == NVME_ADMIN_IDENTIFY &&
				 (sqe.cdw10 & 0xff) == NVME_ID_CNS_NS)
				reply_identify(&in, &sqe);
			else
				check(!"an admin command the change handling does not send");
		}
		if (nheld)
			break;
		check_round();
	}
	ctrlfx_fini(&f);
	return 0;
}
