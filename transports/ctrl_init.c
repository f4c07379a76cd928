/* Controller bring-up, in the order the NVMe over
 * Fabrics specification gives: admin Connect, CAP/VS, CC.EN and CSTS.RDY
 * within CAP.TO, Identify, queue count, namespaces, I/O queue Connects.
 * Every step is one admin command whose completion starts the next; the
 * step timer bounds each wait, and never past the whole attempt's bound
 * (ATTEMPT_CMDS_MS). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/ctrl_priv.h"
#include "transports/status.h"

static const char *step_name(enum nvmf_init_step s)
{
	switch (s) {
	case INIT_NONE: return "none";
	case INIT_ADMIN_CONNECT: return "admin queue connect";
	case INIT_GET_CAP: return "property get CAP";
	case INIT_GET_VS: return "property get VS";
	case INIT_SET_CC: return "property set CC.EN";
	case INIT_WAIT_RDY: return "waiting for CSTS.RDY";
	case INIT_IDENTIFY_CTRL: return "identify controller";
	case INIT_SET_NUM_QUEUES: return "set features number of queues";
	case INIT_NS_LIST: return "identify active namespace list";
	case INIT_IDENTIFY_NS: return "identify namespace";
	case INIT_NS_DESCS: return "identify namespace descriptors";
	case INIT_ANA_LOG: return "get log page ANA";
	case INIT_AEN_CONFIG: return "set features asynchronous event configuration";
	case INIT_IO_QUEUES: return "I/O queue connect";
	case INIT_DONE: return "done";
	}
	return "?";
}

/* ---- bring-up ---- */


static unsigned cap_to_ms(const struct nvmf_ctrl *c)
{
	/* CAP.TO is in 500 ms units; 0 would be a broken target, give it
	 * the minimum rather than no time at all. */
	return (NVME_CAP_TO(c->cap) ? NVME_CAP_TO(c->cap) : 1) * 500u;
}

/* A step's wait ended at its own bound (why) or at the attempt's. */
static void step_expired(struct nvmf_ctrl *c, const char *why)
{
	if (reactor_now_ns() >= c->attempt_deadline_ns)
		ctrl_init_fail(c, -ETIMEDOUT, "the whole attempt's bound of %u ms passed",
			       c->attempt_ms);
	else
		ctrl_init_fail(c, -ETIMEDOUT, "%s", why);
}

void ctrl_step_timeout(struct reactor_timer *t)
{
	struct nvmf_ctrl *c = container_of(t, struct nvmf_ctrl, step_timer);
	char why[96];

	/* The poll tick, or CAP.TO passed (a poll in flight: unanswered). */
	if (c->step == INIT_WAIT_RDY && !c->poll_req && reactor_now_ns() < c->deadline_ns) {
		ctrl_init_next(c); /* poll CSTS again */
		return;
	}
	if (c->step == INIT_DONE && c->shutdown_cb)
		return; /* the shutdown's own wait handles it */
	snprintf(why, sizeof(why), "%s timed out", step_name(c->step));
	step_expired(c, why);
}

void ctrl_arm_attempt(struct nvmf_ctrl *c)
{
	uint64_t ms = c->attempt_timeout_ms
		? c->attempt_timeout_ms
		: 2 * ((uint64_t)DEFAULT_STEP_TIMEOUT_MS + c->opts.path.connect_timeout_ms) +
			  ATTEMPT_CMDS_MS;

	/* A huge connect timeout: room left for CAP.TO's 127.5 s at most
	 * and 1024 namespaces' allowance. */
	const uint64_t room = 127500u + 1024ull * ATTEMPT_NS_MS;
	c->attempt_ms = ms > UINT32_MAX - room ? (unsigned)(UINT32_MAX - room) : (unsigned)ms;
	c->attempt_deadline_ns = reactor_now_ns() + (uint64_t)c->attempt_ms * NSEC_PER_MSEC;
}

void ctrl_arm_step(struct nvmf_ctrl *c, unsigned ms)
{
	uint64_t now = reactor_now_ns(), ns = (uint64_t)ms * NSEC_PER_MSEC;

	/* Never past the attempt's bound: each answer starting a fresh
	 * step bound alone is what let a slow target stretch an attempt. */
	if (now + ns > c->attempt_deadline_ns)
		ns = c->attempt_deadline_ns > now ? c->attempt_deadline_ns - now : 0;
	c->deadline_ns = now + ns;
	reactor_timer_arm(c->r, &c->step_timer, ns);
}

void ctrl_init_failed_down(struct nvmf_ctrl *c, int err)
{
	nvmf_ctrl_cb cb = c->ready_cb;
	(void)err;
	c->ready_cb = NULL;
	if (cb)
		cb(c, c->error);
}

void ctrl_init_fail(struct nvmf_ctrl *c, int err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	/* Once per attempt: a second failure (a step's command and the
	 * admin queue's loss, both reported) would start a second teardown
	 * over the first one's close replies. */
	if (c->state != NVMF_CTRL_CONNECTING || c->teardown_running || c->step == INIT_NONE)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctrl_log(ERR, c, "bring-up failed at %s: %s", step_name(c->step), msg);
	c->error = err ? err : -EIO;
	reactor_timer_cancel(&c->step_timer);
	/* A reconnect attempt that fails stays CONNECTING: the owner tries
	 * again or deletes the controller. */
	if (!c->reconnecting)
		nvmf_ctrl_set_state(c, NVMF_CTRL_DEAD);
	ctrl_teardown(c, ctrl_init_failed_down);
}

uint32_t nvmf_pick_max_xfer(uint64_t cap_reg, uint8_t mdts, uint32_t opt_max)
{
	uint32_t cap = opt_max ? opt_max : DEFAULT_MAX_XFER;
	/* At most 2^27 (MPSMIN is 4 bits) shifted by less than 32: no
	 * overflow in 64 bits; 2^32 pages or more is no limit for us. */
	uint64_t mps = 4096ull << NVME_CAP_MPSMIN(cap_reg);

	if (mdts && mdts < 32 && (mps << mdts) < cap)
		cap = (uint32_t)(mps << mdts);
	/* No cap for the request's iovec array here: nvmf_io_chunk ends each
	 * command where the caller's pieces run out of iovecs, so a
	 * page-fragmented buffer gets shorter commands and a contiguous one
	 * (an NBD reply buffer) gets whole MDTS-sized ones. */
	return cap;
}

uint32_t nvmf_in_capsule_max(uint32_t ioccsz)
{
	/* 16-byte units including the 64-byte command: 64-bit, so that a
	 * huge IOCCSZ cannot wrap into a small (or any) other value. */
	uint64_t b = (uint64_t)ioccsz * 16u;

	if (ioccsz < 4)
		return 0;
	return b - 64 > UINT32_MAX ? UINT32_MAX : (uint32_t)(b - 64);
}

int nvmf_ns_from_id(const char *name, uint32_t nsid, const struct nvme_id_ns *id,
		    struct nvmf_ns *ns)
{
	unsigned idx = NVME_NS_FLBAS_INDEX(id->flbas);

	if (id->nsze == 0)
		return 0; /* inactive after all */
	if (idx > id->nlbaf || id->lbaf[idx].ds < 9 || id->lbaf[idx].ds > 16) {
		log_warn("ctrl %s: nsid %u has an unusable LBA format (index %u, ds %u); skipped",
			 name, nsid, idx, idx < 64 ? id->lbaf[idx].ds : 0);
		return 0;
	}
	/* Sizes in bytes are signed 64-bit (off_t) further up: a size that
	 * does not fit would wrap into a small or negative one. */
	if (id->nsze > (uint64_t)INT64_MAX >> id->lbaf[idx].ds) {
		log_warn("ctrl %s: nsid %u claims %llu blocks of %u bytes, more than 2^63 bytes; "
			 "skipped",
			 name, nsid, (unsigned long long)id->nsze, 1u << id->lbaf[idx].ds);
		return 0;
	}
	/* Metadata: in each block (extended LBA), a transfer is nlb * (2^ds
	 * + ms) bytes, not what every offset and length here assumes; kept
	 * apart, fabrics cannot carry it at all.  Linux gives such a
	 * namespace capacity 0: skipped, not misaddressed. */
	if (id->lbaf[idx].ms) {
		log_warn("ctrl %s: nsid %u has %u bytes of %s metadata per block, which the "
			 "gateway does not carry; skipped",
			 name, nsid, (unsigned)id->lbaf[idx].ms,
			 (id->flbas & 0x10) ? "extended-LBA" : "separate");
		return 0;
	}
	memset(ns, 0, sizeof(*ns));
	ns->nsid = nsid;
	ns->nsze = id->nsze;
	ns->lba_shift = id->lbaf[idx].ds;
	ns->lba_size = 1u << ns->lba_shift;
	ns->dlfeat = id->dlfeat;
	if ((id->nsfeat & NVME_NS_NSFEAT_OPTPERF) && id->npwg)
		ns->optimal_io = ((uint32_t)id->npwg + 1) * ns->lba_size;
	memcpy(ns->nguid, id->nguid, sizeof(ns->nguid));
	memcpy(ns->eui64, id->eui64, sizeof(ns->eui64));
	ns->anagrpid = id->anagrpid;
	ns->ana_state = NVME_ANA_OPTIMIZED;
	log_info("ctrl %s: nsid %u: %llu blocks of %u bytes (%.1f GiB)", name, nsid,
		 (unsigned long long)ns->nsze, ns->lba_size,
		 (double)(ns->nsze << ns->lba_shift) / (1024.0 * 1024 * 1024));
	return 1;
}

int nvmf_ns_descs_uuid(const void *buf, size_t len, uint8_t uuid[16])
{
	const uint8_t *p = buf;
	size_t off = 0;

	memset(uuid, 0, 16);
	while (off + 4 <= len) {
		uint8_t type = p[off], nidl = p[off + 1];
		if (!type || !nidl || off + 4 + nidl > len)
			break;
		/* A UUID is 16 bytes; another length is a broken entry,
		 * not a UUID to compare later. */
		if (type == NVME_NIDT_UUID && nidl == 16) {
			memcpy(uuid, p + off + 4, 16);
			return nvmf_uuid_known(uuid);
		}
		off += 4 + (size_t)nidl;
	}
	return 0;
}

bool nvmf_ctrl_wants_descs(const struct nvmf_ctrl *c)
{
	return c->vs >= 0x10300;
}

unsigned nvmf_ns_list_count(const char *name, const uint32_t *list, unsigned max)
{
	unsigned n;

	for (n = 0; n < max && list[n]; n++) {
		/* The list is in increasing order (NVMe base spec, Identify
		 * CNS 02h); a repeated ID would become two namespaces. */
		if (list[n] == 0xffffffff || (n && list[n] <= list[n - 1])) {
			log_warn("ctrl %s: active namespace list entry %u (nsid %u) is out of "
				 "order or invalid; the list is used up to there",
				 name, n, list[n]);
			break;
		}
	}
	return n;
}

static void parse_ns(struct nvmf_ctrl *c, uint32_t nsid, const struct nvme_id_ns *id)
{
	if (nvmf_ns_from_id(c->opts.name, nsid, id, &c->ns[c->nr_ns]) > 0)
		c->nr_ns++;
}

static void ana_init_read(struct nvmf_ctrl *c, int err)
{
	if (c->state != NVMF_CTRL_CONNECTING)
		return;
	if (err) {
		ctrl_init_fail(c, err, "%s", err == -EMSGSIZE ? "ANA log page too large"
							: "ANA log page not read");
		return;
	}
	if (nvmf_ctrl_ana_apply(c, c->ana_log, c->ana_have) < 0) {
		ctrl_init_fail(c, -EPROTO, "malformed ANA log page");
		return;
	}
	c->step = ctrl_aen_config(c) ? INIT_AEN_CONFIG : INIT_IO_QUEUES;
	ctrl_init_next(c);
}

static void init_cmd_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	struct nvme_cqe cqe = req->cqe;
	uint16_t st = (uint16_t)(cqe.status >> 1);
	char sbuf[96];

	if (req == c->poll_req)
		c->poll_req = NULL;
	nvmf_req_put(req);
	if (c->state != NVMF_CTRL_CONNECTING)
		return;
	if (err) {
		ctrl_init_fail(c, err, "admin queue lost: %s", strerror(-err));
		return;
	}
	if (st && c->step == INIT_NS_DESCS) {
		/* Not every controller has the list (it is optional before
		 * 2.0): the namespace is compared by its other identifiers. */
		ctrl_log(DEBUG, c, "nsid %u: no descriptor list (%s)", c->ns_list[c->ns_list_idx],
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		c->ns_list_idx++;
		c->step = INIT_IDENTIFY_NS;
		ctrl_init_next(c);
		return;
	}
	if (st && c->step == INIT_AEN_CONFIG) {
		/* Without ANA change events the gateway still reads the log
		 * when an I/O reports an ANA state: slower, not wrong.  Without
		 * namespace change events a resize is seen at the next
		 * reconnect's re-identify. */
		ctrl_log(WARN, c, "cannot enable asynchronous events (0x%x): %s", ctrl_aen_config(c),
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		c->step = INIT_IO_QUEUES;
		ctrl_init_next(c);
		return;
	}
	if (st) {
		ctrl_init_fail(c, nvme_status_to_errno(st), "%s",
			  nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		return;
	}
	switch (c->step) {
	case INIT_GET_CAP:
		c->cap = cqe.result.u64;
		/* The target's own CSTS.RDY time joins the attempt's bound. */
		if (!c->attempt_timeout_ms) {
			c->attempt_ms += cap_to_ms(c);
			c->attempt_deadline_ns += (uint64_t)cap_to_ms(c) * NSEC_PER_MSEC;
		}
		c->step = INIT_GET_VS;
		break;
	case INIT_GET_VS:
		c->vs = cqe.result.dw0;
		c->step = INIT_SET_CC;
		break;
	case INIT_SET_CC:
		c->step = INIT_WAIT_RDY;
		ctrl_arm_step(c, cap_to_ms(c));
		break;
	case INIT_WAIT_RDY:
		if (cqe.result.dw0 & NVME_CSTS_CFS) {
			ctrl_init_fail(c, -EIO, "controller fatal status (CSTS 0x%x)", cqe.result.dw0);
			return;
		}
		if (!(cqe.result.dw0 & NVME_CSTS_RDY)) {
			/* Not ready yet: ask again shortly, within CAP.TO. */
			uint64_t now = reactor_now_ns();
			if (now >= c->deadline_ns) {
				step_expired(c, "CSTS.RDY not set within CAP.TO");
				return;
			}
			reactor_timer_arm(c->r, &c->step_timer, 10 * NSEC_PER_MSEC);
			return;
		}
		c->step = INIT_IDENTIFY_CTRL;
		break;
	case INIT_IDENTIFY_CTRL:
		c->ana = !c->opts.discovery && (c->id->cmic & NVME_CTRL_CMIC_ANA);
		c->max_xfer = nvmf_pick_max_xfer(c->cap, c->id->mdts, c->opts.max_xfer);
		if (c->adminq.ops->max_xfer && c->max_xfer > c->adminq.ops->max_xfer)
			c->max_xfer = c->adminq.ops->max_xfer;
		if (c->vwc_before >= 0 && c->vwc_before != (int)(c->id->vwc & NVME_CTRL_VWC_PRESENT))
			/* The volume's flush capability was settled at export
			 * time from every path (vol_mp_create); say so when a
			 * controller changes its mind across a reconnect. */
			ctrl_log(WARN, c, "the volatile write cache is now %s (it was %s before "
				 "the reconnect)",
				 (c->id->vwc & NVME_CTRL_VWC_PRESENT) ? "present" : "absent",
				 c->vwc_before ? "present" : "absent");
		c->vwc_before = c->id->vwc & NVME_CTRL_VWC_PRESENT;
		c->in_capsule_max = nvmf_in_capsule_max(c->id->ioccsz);
		char mn[sizeof(c->id->mn) + 1];
		log_printable(mn, sizeof(mn), c->id->mn, sizeof(c->id->mn));
		ctrl_log(INFO, c, "cntlid %u, NVMe %u.%u, model '%s', max transfer %u, "
			 "in-capsule %u, %u namespaces",
			 c->cntlid, c->vs >> 16, (c->vs >> 8) & 0xff, mn,
			 c->max_xfer, c->in_capsule_max, c->id->nn);
		if (c->opts.discovery) {
			c->step = INIT_DONE;
			break;
		}
		c->step = INIT_SET_NUM_QUEUES;
		break;
	case INIT_SET_NUM_QUEUES: {
		unsigned nsq = (cqe.result.dw0 & 0xffff) + 1u, ncq = (cqe.result.dw0 >> 16) + 1u;
		unsigned n = c->opts.nr_io_queues;
		if (nsq < n)
			n = nsq;
		if (ncq < n)
			n = ncq;
		if (n < c->opts.nr_io_queues)
			ctrl_log(NOTICE, c, "controller allows %u I/O queues of %u asked",
				   n, c->opts.nr_io_queues);
		c->nr_ioq = n;
		c->step = INIT_NS_LIST;
		break;
	}
	case INIT_NS_LIST:
		memcpy(c->ns_list, c->admin_buf, 4096);
		c->ns_list_len = nvmf_ns_list_count(c->opts.name, c->ns_list, 1024);
		c->ns_list_idx = 0;
		if (!c->attempt_timeout_ms) {
			uint64_t more = (uint64_t)c->ns_list_len * ATTEMPT_NS_MS;
			c->attempt_ms += (unsigned)more;
			c->attempt_deadline_ns += more * NSEC_PER_MSEC;
		}
		c->step = INIT_IDENTIFY_NS;
		break;
	case INIT_IDENTIFY_NS: {
		unsigned had = c->nr_ns;
		parse_ns(c, c->ns_list[c->ns_list_idx], c->admin_buf);
		if (c->nr_ns > had && nvmf_ctrl_wants_descs(c))
			c->step = INIT_NS_DESCS; /* the same NSID's list next */
		else
			c->ns_list_idx++;
		break;
	}
	case INIT_NS_DESCS:
		nvmf_ns_descs_uuid(c->admin_buf, 4096, c->ns[c->nr_ns - 1].uuid);
		c->ns_list_idx++;
		c->step = INIT_IDENTIFY_NS;
		break;
	case INIT_AEN_CONFIG:
		c->step = INIT_IO_QUEUES;
		break;
	default:
		ctrl_init_fail(c, -EPROTO, "unexpected completion");
		return;
	}
	ctrl_init_next(c);
}


/* Issue the command of the current step. */
void ctrl_init_next(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->step == INIT_IDENTIFY_NS && c->ns_list_idx >= c->ns_list_len) {
		if (c->ns_list_idx == 1024)
			ctrl_log(WARN, c, "more than 1024 namespaces; only the first 1024 are used");
		c->step = c->ana ? INIT_ANA_LOG
				 : ctrl_aen_config(c) ? INIT_AEN_CONFIG : INIT_IO_QUEUES;
	}
	if (c->step == INIT_IO_QUEUES) {
		ctrl_ioq_connect_all(c);
		return;
	}
	if (c->step == INIT_DONE) {
		ctrl_init_live(c);
		return;
	}
	if (c->step != INIT_WAIT_RDY)
		ctrl_arm_step(c, DEFAULT_STEP_TIMEOUT_MS);
	if (c->step == INIT_ANA_LOG) {
		/* Possibly several commands, all within this step's timer. */
		int ret = ctrl_ana_read_start(c, ana_init_read);
		if (ret < 0)
			ctrl_init_fail(c, ret, "no free admin request");
		return;
	}
	req = nvmf_admin_req(c);
	if (!req) {
		ctrl_init_fail(c, -EBUSY, "no free admin request");
		return;
	}
	req->done = init_cmd_done;
	switch (c->step) {
	case INIT_GET_CAP:
		ctrl_prep_property_get(req, NVME_REG_CAP, true);
		break;
	case INIT_GET_VS:
		ctrl_prep_property_get(req, NVME_REG_VS, false);
		break;
	case INIT_SET_CC:
		c->cc = NVME_CC_EN | NVME_CC_CSS_NVM | NVME_CC_MPS(12) | NVME_CC_IOSQES |
			NVME_CC_IOCQES;
		ctrl_prep_property_set(req, NVME_REG_CC, c->cc);
		break;
	case INIT_WAIT_RDY: {
		/* Bounded by CAP.TO, not by the admin io_timeout: between
		 * polls the step timer is the poll tick, so it is armed for
		 * what is left while one is in flight. */
		uint64_t now = reactor_now_ns();
		ctrl_prep_property_get(req, NVME_REG_CSTS, false);
		c->poll_req = req;
		reactor_timer_arm(c->r, &c->step_timer,
				  c->deadline_ns > now ? c->deadline_ns - now : 0);
		break;
	}
	case INIT_IDENTIFY_CTRL:
		ctrl_prep_identify(req, NVME_ID_CNS_CTRL, 0, c->id);
		break;
	case INIT_SET_NUM_QUEUES:
		req->sqe.opcode = NVME_ADMIN_SET_FEATURES;
		req->sqe.cdw10 = NVME_FEAT_NUM_QUEUES;
		req->sqe.cdw11 = (c->opts.nr_io_queues - 1) | ((c->opts.nr_io_queues - 1) << 16);
		break;
	case INIT_NS_LIST:
		ctrl_prep_identify(req, NVME_ID_CNS_NS_ACTIVE_LIST, 0, c->admin_buf);
		break;
	case INIT_IDENTIFY_NS:
		ctrl_prep_identify(req, NVME_ID_CNS_NS, c->ns_list[c->ns_list_idx], c->admin_buf);
		break;
	case INIT_NS_DESCS:
		ctrl_prep_identify(req, NVME_ID_CNS_NS_DESC_LIST, c->ns_list[c->ns_list_idx],
				   c->admin_buf);
		break;
	case INIT_AEN_CONFIG:
		req->sqe.opcode = NVME_ADMIN_SET_FEATURES;
		req->sqe.cdw10 = NVME_FEAT_ASYNC_EVENT;
		req->sqe.cdw11 = ctrl_aen_config(c);
		break;
	default:
		nvmf_req_put(req);
		ctrl_init_fail(c, -EPROTO, "bad step");
		return;
	}
	nvmf_req_submit(req);
}
