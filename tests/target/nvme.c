/* Subsystems, controllers and command execution of the test target.  The
 * behaviour follows the Linux target (drivers/nvme/target) where the spec
 * leaves a choice, since that is what the gateway meets in production. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gateway/base/log.h"
#include "tests/target/tgt.h"

#define TGT_MN "nvmf-test-target"
#define TGT_FR "0.1"
#define TGT_KAS 10 /* 100 ms units: keep-alive granularity of 1 s */

static uint8_t *log_buf; /* scratch for building log pages (admin only) */
static size_t log_buf_size;

static inline void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void pad_copy(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);
	memset(dst, ' ', len);
	memcpy(dst, src, n < len ? n : len);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

const char *ana_state_name(uint8_t s)
{
	switch (s) {
	case ANA_OPTIMIZED: return "optimized";
	case ANA_NONOPTIMIZED: return "non-optimized";
	case ANA_INACCESSIBLE: return "inaccessible";
	case ANA_PERSISTENT_LOSS: return "persistent-loss";
	case ANA_CHANGE: return "change";
	}
	return "?";
}

int ana_state_parse(const char *s)
{
	static const uint8_t all[] = { ANA_OPTIMIZED, ANA_NONOPTIMIZED, ANA_INACCESSIBLE,
				       ANA_PERSISTENT_LOSS, ANA_CHANGE };
	for (unsigned i = 0; i < sizeof(all); i++)
		if (strcmp(s, ana_state_name(all[i])) == 0)
			return all[i];
	return -1;
}

/* ---- subsystems from the command line ---- */

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	v = strtoull(s, &end, 0);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static int ns_init(struct tgt_subsys *ss, struct tgt_ns *ns, uint32_t nsid, uint64_t bytes,
		   uint32_t block)
{
	uint64_t h;

	ns->nsid = nsid;
	ns->block = block;
	ns->lba_shift = (uint8_t)__builtin_ctz(block);
	ns->nblocks = bytes / block;
	ns->bytes = bytes;
	h = fnv1a(0xcbf29ce484222325ull, ss->nqn, strlen(ss->nqn));
	if (T.persist_dir) {
		/* The medium is a file: a restarted target (kill -9 included)
		 * finds it as the last process left it in the page cache. */
		char path[4096];
		int fd;
		snprintf(path, sizeof(path), "%s/%016llx-%u.img", T.persist_dir,
			 (unsigned long long)h, nsid);
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
			fprintf(stderr, "nvmf-test-target: %s: %s\n", path, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -errno;
		}
		ns->durable = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (ns->durable == MAP_FAILED)
			return -ENOMEM;
		if (T.vwc) {
			ns->data = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (ns->data != MAP_FAILED)
				memcpy(ns->data, ns->durable, bytes);
		} else {
			ns->data = ns->durable; /* write-through */
		}
	} else {
		/* Anonymous mappings: untouched pages cost nothing and read
		 * zero; reserved large enough for the ns-resize knob. */
		ns->cap_bytes = bytes < TGT_NS_RESERVE ? TGT_NS_RESERVE : bytes;
		ns->data = mmap(NULL, ns->cap_bytes, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		ns->durable = mmap(NULL, ns->cap_bytes, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (!ns->cap_bytes)
		ns->cap_bytes = bytes;
	ns->ndirty_words = (ns->cap_bytes / TGT_PAGE + 63) / 64;
	ns->dirty = calloc(ns->ndirty_words, 8);
	if (ns->data == MAP_FAILED || ns->durable == MAP_FAILED || !ns->dirty)
		return -ENOMEM;
	h = fnv1a(h, &nsid, sizeof(nsid));
	memcpy(ns->nguid, &h, 8);
	uint64_t h2 = fnv1a(h, "nguid", 5);
	memcpy(ns->nguid + 8, &h2, 8);
	uint64_t h3 = fnv1a(h, "eui64", 5);
	memcpy(ns->eui64, &h3, 8);
	uint64_t h4 = fnv1a(h, "uuid", 4), h5 = fnv1a(h4, "uuid", 4);
	memcpy(ns->uuid, &h4, 8);
	memcpy(ns->uuid + 8, &h5, 8);
	ns->uuid[6] = (uint8_t)((ns->uuid[6] & 0x0f) | 0x40);
	ns->uuid[8] = (uint8_t)((ns->uuid[8] & 0x3f) | 0x80);
	for (unsigned p = 0; p < TGT_MAX_PORTS; p++)
		ns->ana[p] = ANA_OPTIMIZED;
	return 0;
}

/* NQN:SIZE[:BLOCK][:NSCOUNT].  An NQN has colons of its own, so the numeric
 * fields are the ones after the last field that is not a number. */
int subsys_add(const char *spec)
{
	char buf[512], *f[64];
	unsigned nf = 0, first_num;
	uint64_t size, block = 512, count = 1;
	struct tgt_subsys *ss;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *p = buf, *s; (s = strsep(&p, ":")) && nf < 64;)
		f[nf++] = s;
	first_num = nf;
	while (first_num > 1 && nf - first_num < 3 && parse_size(f[first_num - 1], &size) == 0)
		first_num--;
	if (first_num == nf || first_num == 0)
		goto bad;
	if (parse_size(f[first_num], &size) < 0 ||
	    (first_num + 1 < nf && parse_size(f[first_num + 1], &block) < 0) ||
	    (first_num + 2 < nf && parse_size(f[first_num + 2], &count) < 0))
		goto bad;
	if (block < 512 || block > 65536 || (block & (block - 1)) || size < block ||
	    size % block || size % TGT_PAGE || !count || count > TGT_MAX_NS)
		goto bad;
	for (unsigned i = 1; i < first_num; i++)
		f[i][-1] = ':';
	if (strlen(f[0]) > NVMF_NQN_MAX_LEN || strncmp(f[0], "nqn.", 4))
		goto bad;
	for (unsigned i = 0; i < T.nr_subsys; i++)
		if (strcmp(T.subsys[i].nqn, f[0]) == 0) {
			fprintf(stderr, "nvmf-test-target: subsystem %s given twice\n", f[0]);
			return -1;
		}
	ss = realloc(T.subsys, (T.nr_subsys + 1) * sizeof(*ss));
	if (!ss)
		return -1;
	T.subsys = ss;
	ss = &T.subsys[T.nr_subsys];
	memset(ss, 0, sizeof(*ss));
	snprintf(ss->nqn, sizeof(ss->nqn), "%s", f[0]);
	snprintf(ss->serial, sizeof(ss->serial), "%016llx",
		 (unsigned long long)fnv1a(0xcbf29ce484222325ull, ss->nqn, strlen(ss->nqn)));
	if (strcmp(ss->nqn, NVME_DISC_SUBSYS_NQN) == 0)
		goto bad;
	ss->nr_ns = (unsigned)count;
	for (unsigned i = 0; i < count; i++)
		if (ns_init(ss, &ss->ns[i], i + 1, size, (uint32_t)block) < 0) {
			fprintf(stderr, "nvmf-test-target: no memory for %s\n", spec);
			return -1;
		}
	T.nr_subsys++;
	return 0;
bad:
	fprintf(stderr, "nvmf-test-target: --subsys '%s': NQN:SIZE[:BLOCK][:NSCOUNT], NQN "
			"starting with nqn., SIZE a multiple of BLOCK and of 4k, BLOCK a power "
			"of two 512..64k, NSCOUNT 1..%d\n",
		spec, TGT_MAX_NS);
	return -1;
}

/* ---- controllers ---- */

static struct tgt_subsys *find_subsys(const char *nqn)
{
	for (unsigned i = 0; i < T.nr_subsys; i++)
		if (strcmp(T.subsys[i].nqn, nqn) == 0)
			return &T.subsys[i];
	return NULL;
}

struct tgt_subsys *tgt_find_subsys(const char *nqn)
{
	return find_subsys(nqn);
}

void nvme_ctrl_free(struct tgt_ctrl *ctrl, const char *why)
{
	log_info("controller %u (%s) of %s deleted: %s", ctrl->cntlid, ctrl->hostnqn,
		 ctrl->ss->nqn, why);
	list_del(&ctrl->link);
	for (unsigned q = 0; q <= TGT_MAX_QID; q++) {
		struct tgt_conn *c = ctrl->ioq[q];
		if (c) {
			c->ctrl = NULL;
			conn_close(c, why);
		}
	}
	if (ctrl->adminq) {
		struct tgt_conn *c = ctrl->adminq;
		c->ctrl = NULL;
		ctrl->adminq = NULL;
		conn_close(c, why);
	}
	free(ctrl);
}

void nvme_conn_gone(struct tgt_conn *c)
{
	struct tgt_ctrl *ctrl = c->ctrl;

	if (!ctrl)
		return;
	c->ctrl = NULL;
	if (c->qid == 0) {
		ctrl->adminq = NULL;
		nvme_ctrl_free(ctrl, "admin queue closed");
	} else {
		ctrl->ioq[c->qid] = NULL;
	}
}

void nvme_kato_check(uint64_t now)
{
	struct list_node *n, *t;

	list_for_each_safe(n, t, &T.ctrls) {
		struct tgt_ctrl *ctrl = container_of(n, struct tgt_ctrl, link);
		if (ctrl->kato_deadline_ns && now > ctrl->kato_deadline_ns) {
			log_notice("controller %u of %s: keep-alive timeout (%u ms) expired", ctrl->cntlid,
				   ctrl->ss->nqn, ctrl->kato_ms);
			nvme_ctrl_free(ctrl, "keep-alive timeout expired");
		}
	}
}

static void kato_touch(struct tgt_ctrl *ctrl)
{
	/* Any command counts (traffic based keep-alive), with the slack the
	 * Linux target gives for the host's KATO/2 cadence. */
	if (ctrl->kato_ms)
		ctrl->kato_deadline_ns = now_ns() + (uint64_t)ctrl->kato_ms * 1000000ull;
}

/* ---- completion ---- */

static void complete64(struct tgt_cmd *cmd, uint16_t st, uint64_t result)
{
	struct tgt_conn *c = cmd->conn;

	memset(&cmd->cqe, 0, sizeof(cmd->cqe));
	cmd->cqe.result.u64 = result;
	cmd->cqe.cid = cmd->sqe.cid;
	cmd->cqe.sqid = c->qid;
	cmd->cqe.sqhd = c->sq_flow_off ? 0xffff : c->sqhd;
	cmd->cqe.status = (uint16_t)(st << 1);
	if (st)
		cmd->data_len = cmd->h2c ? cmd->data_len : 0;
	uint32_t delay = c->qid ? T.f.delay_ms : T.f.admin_delay_ms;
	if (delay) {
		cmd->state = CMD_DELAYED;
		cmd->due_ns = now_ns() + (uint64_t)delay * 1000000ull;
		delayed_insert(cmd);
		return;
	}
	cmd_send_completion(cmd);
}

void nvme_complete(struct tgt_cmd *cmd, uint16_t st, uint32_t dw0)
{
	complete64(cmd, st, dw0);
}

/* ---- Fabrics ---- */

static uint16_t connect_param_err(struct tgt_cmd *cmd, size_t off, uint32_t *dw0)
{
	(void)cmd;
	*dw0 = (1u << 16) | (uint32_t)off; /* IATTR 1: in the connect data */
	return SC_CONNECT_INVALID_PARAM | ST_DNR;
}

static void fabrics_connect(struct tgt_cmd *cmd)
{
	struct tgt_conn *c = cmd->conn;
	const struct nvmf_connect_cmd *cc = (const void *)&cmd->sqe;
	struct nvmf_connect_data *d = (void *)cmd->buf;
	struct tgt_subsys *ss;
	struct tgt_ctrl *ctrl = NULL;
	uint32_t dw0 = 0;
	uint16_t st = 0;

	d->subsysnqn[NVMF_NQN_SIZE - 1] = 0;
	d->hostnqn[NVMF_NQN_SIZE - 1] = 0;
	if (c->connected) {
		log_warn("%s: second Connect on one queue", c->peer);
		st = SC_CMD_SEQ | ST_DNR;
		goto out;
	}
	if (cmd->data_len != sizeof(*d)) {
		st = SC_SGL_LEN | ST_DNR;
		goto out;
	}
	if (cc->recfmt != 0) {
		st = SC_CONNECT_FORMAT | ST_DNR;
		goto out;
	}
	ss = find_subsys(d->subsysnqn);
	if (!ss) {
		log_notice("%s: Connect to unknown subsystem '%s'", c->peer, d->subsysnqn);
		st = connect_param_err(cmd, offsetof(struct nvmf_connect_data, subsysnqn), &dw0);
		goto out;
	}
	if (!d->hostnqn[0]) {
		st = connect_param_err(cmd, offsetof(struct nvmf_connect_data, hostnqn), &dw0);
		goto out;
	}
	if (ss->allow_host && strcmp(ss->allow_host, d->hostnqn)) {
		log_notice("%s: host %s is not allowed on %s", c->peer, d->hostnqn, ss->nqn);
		st = SC_CONNECT_INVALID_HOST | ST_DNR;
		goto out;
	}
	if (cc->sqsize == 0 || cc->sqsize > (cc->qid ? TGT_MQES : TGT_ADMIN_QSIZE - 1)) {
		log_notice("%s: Connect qid %u with sqsize %u", c->peer, cc->qid, cc->sqsize);
		dw0 = offsetof(struct nvmf_connect_cmd, sqsize); /* IATTR 0: in the SQE */
		st = SC_CONNECT_INVALID_PARAM | ST_DNR;
		goto out;
	}
	if (cc->qid == 0) {
		if (d->cntlid != 0xffff) {
			st = connect_param_err(cmd, offsetof(struct nvmf_connect_data, cntlid), &dw0);
			goto out;
		}
		ctrl = calloc(1, sizeof(*ctrl));
		if (!ctrl) {
			st = SC_INTERNAL;
			goto out;
		}
		if (T.next_cntlid == 0 || T.next_cntlid > 0xffef)
			T.next_cntlid = 1;
		ctrl->cntlid = T.next_cntlid++;
		ctrl->ss = ss;
		ctrl->port = c->port;
		snprintf(ctrl->hostnqn, sizeof(ctrl->hostnqn), "%s", d->hostnqn);
		memcpy(ctrl->hostid, d->hostid, 16);
		ctrl->kato_ms = cc->kato;
		/* The Linux target gives a discovery controller without KATO
		 * two minutes rather than forever. */
		if (ss->discovery && !ctrl->kato_ms)
			ctrl->kato_ms = 120000;
		ctrl->aec = 1u << 11; /* ANA change notices on by default */
		ctrl->adminq = c;
		list_add_tail(&T.ctrls, &ctrl->link);
		kato_touch(ctrl);
		dw0 = ctrl->cntlid;
		log_info("%s: controller %u of %s for %s, kato %u ms", c->peer, ctrl->cntlid,
			 ss->nqn, ctrl->hostnqn, ctrl->kato_ms);
	} else {
		struct list_node *n;
		for (n = T.ctrls.next; n != &T.ctrls; n = n->next) {
			struct tgt_ctrl *x = container_of(n, struct tgt_ctrl, link);
			if (x->cntlid == d->cntlid && x->ss == ss && !strcmp(x->hostnqn, d->hostnqn)) {
				ctrl = x;
				break;
			}
		}
		if (!ctrl) {
			log_notice("%s: I/O Connect for unknown controller %u", c->peer, d->cntlid);
			st = connect_param_err(cmd, offsetof(struct nvmf_connect_data, cntlid), &dw0);
			goto out;
		}
		if (!(ctrl->csts & NVME_CSTS_RDY) || ss->discovery) {
			st = SC_CMD_SEQ | ST_DNR;
			goto out;
		}
		/* Like the Linux target, a host that never set the Number of
		 * Queues may still use up to the maximum. */
		unsigned maxq = ctrl->nr_ioq ? ctrl->nr_ioq : TGT_MAX_QID;
		if (cc->qid > maxq || ctrl->ioq[cc->qid]) {
			log_notice("%s: I/O Connect qid %u (%u granted)", c->peer, cc->qid, ctrl->nr_ioq);
			dw0 = offsetof(struct nvmf_connect_cmd, qid);
			st = SC_CONNECT_INVALID_PARAM | ST_DNR;
			ctrl = NULL;
			goto out;
		}
		ctrl->ioq[cc->qid] = c;
		kato_touch(ctrl);
	}
	c->ctrl = ctrl;
	c->qid = cc->qid;
	c->qsize = (uint16_t)(cc->sqsize + 1);
	c->sq_flow_off = cc->cattr & 0x4;
	c->connected = true;
	c->sqhd = 1 % c->qsize;
out:
	nvme_complete(cmd, st, dw0);
}

static void fabrics_cmd(struct tgt_cmd *cmd)
{
	const struct nvmf_property_cmd *p = (const void *)&cmd->sqe;
	struct tgt_conn *c = cmd->conn;
	struct tgt_ctrl *ctrl = c->ctrl;
	uint64_t v = 0;

	if (p->fctype == NVMF_FCTYPE_CONNECT) {
		fabrics_connect(cmd);
		return;
	}
	if (!c->connected || !ctrl) {
		nvme_complete(cmd, SC_CMD_SEQ | ST_DNR, 0);
		return;
	}
	if (c->qid) {
		nvme_complete(cmd, SC_INVALID_OPCODE | ST_DNR, 0);
		return;
	}
	bool eight = (p->attrib & 7) == 1;
	switch (p->fctype) {
	case NVMF_FCTYPE_PROPERTY_GET:
		switch (p->offset) {
		case NVME_REG_CAP:
			if (!eight)
				goto bad;
			v = TGT_MQES | (1ull << 16) /* CQR */ | (15ull << 24) /* TO 7.5 s */ |
			    (1ull << 37) /* CSS: NVM */;
			break;
		case NVME_REG_VS:
			v = 0x00010300;
			break;
		case NVME_REG_CC:
			v = ctrl->cc;
			break;
		case NVME_REG_CSTS:
			v = ctrl->csts;
			if (T.f.rdy_stall && (ctrl->cc & NVME_CC_EN) &&
			    ctrl->csts_reads_enabled++ > 0) {
				log_notice("fault: CSTS read %u after CC.EN not answered (rdy-stall)",
					   ctrl->csts_reads_enabled);
				cmd->state = CMD_HELD;
				return;
			}
			if (T.f.rdy_stall && (ctrl->cc & NVME_CC_EN))
				v &= ~(uint64_t)NVME_CSTS_RDY;
			break;
		default:
			goto bad;
		}
		if (!eight && p->offset == NVME_REG_CAP)
			goto bad;
		complete64(cmd, 0, v);
		return;
	case NVMF_FCTYPE_PROPERTY_SET:
		if (p->offset != NVME_REG_CC || eight)
			goto bad;
		uint32_t cc = (uint32_t)p->value, old = ctrl->cc;
		if ((cc & NVME_CC_EN) && !(old & NVME_CC_EN)) {
			/* The host's queue entry sizes, 4 KiB pages, NVM set. */
			if (((cc >> 16) & 0xf) != 6 || ((cc >> 20) & 0xf) != 4 ||
			    ((cc >> 7) & 0xf) != 0 || ((cc >> 4) & 0x7) != 0) {
				log_warn("%s: CC 0x%x enables with unsupported sizes; CSTS.CFS", c->peer,
					 cc);
				ctrl->csts |= NVME_CSTS_CFS;
			} else {
				ctrl->csts |= NVME_CSTS_RDY;
			}
		}
		if (!(cc & NVME_CC_EN) && (old & NVME_CC_EN))
			ctrl->csts &= ~(NVME_CSTS_RDY | NVME_CSTS_CFS);
		if ((cc & NVME_CC_SHN_MASK) && !(old & NVME_CC_SHN_MASK)) {
			log_info("%s: controller %u shut down by the host", c->peer, ctrl->cntlid);
			ctrl->csts = (ctrl->csts & ~NVME_CSTS_SHST_MASK) | NVME_CSTS_SHST_CMPLT;
		}
		if (!(cc & NVME_CC_SHN_MASK))
			ctrl->csts &= ~NVME_CSTS_SHST_MASK;
		ctrl->cc = cc;
		nvme_complete(cmd, 0, 0);
		return;
	}
	nvme_complete(cmd, SC_INVALID_OPCODE | ST_DNR, 0);
	return;
bad:
	nvme_complete(cmd, SC_INVALID_FIELD | ST_DNR, 0);
}

/* ---- admin ---- */

static void identify_ctrl(struct tgt_ctrl *ctrl, uint8_t *b)
{
	struct nvme_id_ctrl *id = (void *)b;
	struct tgt_subsys *ss = ctrl->ss;

	id->vid = 0x1b36;
	id->ssvid = 0x1b36;
	pad_copy(id->sn, sizeof(id->sn), ss->discovery ? "discovery" : ss->serial);
	pad_copy(id->mn, sizeof(id->mn), TGT_MN);
	pad_copy(id->fr, sizeof(id->fr), TGT_FR);
	b[IDC_RAB] = 6;
	id->mdts = TGT_MDTS;
	id->cntlid = ctrl->cntlid;
	id->ver = 0x00010300;
	b[IDC_CNTRLTYPE] = ss->discovery ? 2 : 1;
	b[IDC_ACL] = 3;
	b[IDC_AERL] = TGT_AERL;
	b[IDC_LPA] = 1u << 2; /* extended data for Get Log Page */
	b[IDC_ELPE] = 0;
	id->kas = TGT_KAS;
	id->sqes = 0x66;
	id->cqes = 0x44;
	id->maxcmd = TGT_MQES + 1;
	id->sgls = (1u << 0) | (1u << 20); /* SGLs; offsets for in-capsule data */
	id->ioccsz = (64 + TGT_INCAPSULE) / 16;
	id->iorcsz = 1;
	id->msdbd = 1;
	snprintf(id->subnqn, sizeof(id->subnqn), "%s", ss->nqn);
	if (ss->discovery) {
		put32(b + IDC_OAES, 1u << 31); /* discovery log page change notices */
		return;
	}
	b[IDC_CMIC] = (1u << 1) | NVME_CTRL_CMIC_ANA;
	/* ANA change and namespace attribute notices */
	put32(b + IDC_OAES, (1u << 11) | (1u << 8));
	id->anatt = 10;
	for (unsigned k = 0; k < 3; k++)
		id->crdt[k] = T.crdt[k];
	id->cqt = T.cqt;
	b[IDC_ANACAP] = 0x1f; /* reports every state; group ids never change */
	put32(b + IDC_ANAGRPMAX, TGT_MAX_NS + (T.ana_pad ? 1000 + T.ana_pad : 0));
	put32(b + IDC_NANAGRPID, ss->nr_ns + T.ana_pad);
	id->nn = ss->nr_ns;
	id->oncs = NVME_CTRL_ONCS_DSM | NVME_CTRL_ONCS_WRITE_ZEROES;
	if (tgt_vwc_present())
		id->vwc = NVME_CTRL_VWC_PRESENT | (3u << 1); /* broadcast Flush works */
}

static struct tgt_ns *find_ns(struct tgt_ctrl *ctrl, uint32_t nsid)
{
	if (nsid == 0 || nsid > ctrl->ss->nr_ns || ctrl->ss->ns[nsid - 1].removed ||
	    (ctrl->ss->ns[nsid - 1].detached >> ctrl->port & 1u))
		return NULL;
	return &ctrl->ss->ns[nsid - 1];
}

static uint16_t identify(struct tgt_cmd *cmd)
{
	struct tgt_ctrl *ctrl = cmd->conn->ctrl;
	uint8_t cns = cmd->sqe.cdw10 & 0xff;
	uint32_t nsid = cmd->sqe.nsid;
	uint8_t *b = cmd->buf;
	struct tgt_ns *ns;

	memset(b, 0, cmd->data_len > 4096 ? cmd->data_len : 4096);
	switch (cns) {
	case NVME_ID_CNS_CTRL:
		identify_ctrl(ctrl, b);
		return 0;
	case NVME_ID_CNS_NS: {
		struct nvme_id_ns *id = (void *)b;
		if (!(ns = find_ns(ctrl, nsid)))
			return SC_INVALID_NS | ST_DNR;
		id->nsze = id->ncap = id->nuse = ns->nblocks;
		id->nlbaf = 0;
		id->flbas = 0;
		id->lbaf[0].ds = ns->lba_shift;
		/* deallocated blocks read zero; WZ may deallocate (--dlfeat 0: as
		 * nvmet on a bdev without unmapping Write Zeroes reports) */
		id->dlfeat = T.dlfeat < 0 ? 0x09 : (uint8_t)T.dlfeat;
		id->nmic = 1;
		id->anagrpid = ns->anagrp ? ns->anagrp : ns->nsid;
		if (!T.uuid_only) {
			memcpy(id->nguid, ns->nguid, 16);
			memcpy(id->eui64, ns->eui64, 8);
		}
		return 0;
	}
	case NVME_ID_CNS_NS_ACTIVE_LIST: {
		uint32_t *list = (void *)b;
		unsigned n = 0;
		if (nsid >= 0xfffffffe)
			return SC_INVALID_NS | ST_DNR;
		for (unsigned i = 0; i < ctrl->ss->nr_ns && n < 1024; i++)
			if (ctrl->ss->ns[i].nsid > nsid && !ctrl->ss->ns[i].removed &&
			    !(ctrl->ss->ns[i].detached >> ctrl->port & 1u))
				list[n++] = ctrl->ss->ns[i].nsid;
		return 0;
	}
	case NVME_ID_CNS_NS_DESC_LIST: {
		if (!(ns = find_ns(ctrl, nsid)))
			return SC_INVALID_NS | ST_DNR;
		uint8_t *p = b;
		if (!T.uuid_only) {
			p[0] = 1, p[1] = 8, memcpy(p + 4, ns->eui64, 8), p += 12;
			p[0] = 2, p[1] = 16, memcpy(p + 4, ns->nguid, 16), p += 20;
		}
		p[0] = 3, p[1] = 16, memcpy(p + 4, ns->uuid, 16), p += 20;
		p[0] = 4, p[1] = 1, p[4] = 0; /* CSI: NVM */
		return 0;
	}
	}
	return SC_INVALID_FIELD | ST_DNR;
}

static uint8_t *log_space(size_t n)
{
	if (n > log_buf_size) {
		uint8_t *nb = realloc(log_buf, n);
		if (!nb)
			return NULL;
		log_buf = nb;
		log_buf_size = n;
	}
	memset(log_buf, 0, n);
	return log_buf;
}

static size_t build_disc_log(struct tgt_ctrl *ctrl)
{
	unsigned listed = 0, ports = 0;
	for (unsigned i = 0; i < T.nr_subsys; i++)
		listed += !T.subsys[i].disc_hidden;
	for (unsigned p = 0; p < T.nr_ports; p++)
		ports += !T.ports[p].disc_hidden;
	size_t nrec = (size_t)listed * ports + T.nr_disc_refs;
	size_t size = sizeof(struct nvmf_disc_log_hdr) + nrec * sizeof(struct nvmf_disc_log_entry);
	uint8_t *b = log_space(size);
	if (!b)
		return 0;
	struct nvmf_disc_log_hdr *h = (void *)b;
	struct nvmf_disc_log_entry *e = (void *)(b + sizeof(*h));
	(void)ctrl;
	h->genctr = T.genctr;
	h->numrec = nrec;
	for (unsigned p = 0; p < T.nr_ports; p++) {
		for (unsigned i = 0; i < T.nr_subsys && !T.ports[p].disc_hidden; i++) {
			struct tgt_subsys *ss = &T.subsys[i];
			if (ss->disc_hidden)
				continue;
			e->trtype = NVMF_TRTYPE_TCP;
			e->adrfam = T.ports[p].v6 ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4;
			e->subtype = ss->discovery ? NVMF_SUBTYPE_DISCOVERY_CUR : NVMF_SUBTYPE_NVME;
			/* SQ flow control disable supported; secure channel
			 * "required" with --tls-key, else not specified. */
			e->treq = (uint8_t)(0x4 | (T.ports[p].treq ? T.ports[p].treq - 1
						   : T.tls && !T.ports[p].plain ? 0x1 : 0));
			e->portid = (uint16_t)(p + 1);
			e->cntlid = 0xffff;
			e->asqsz = TGT_ADMIN_QSIZE;
			e->eflags = ss->discovery ? 0x3 : 0; /* duplicate info, explicit persistent */
			snprintf(e->trsvcid, sizeof(e->trsvcid), "%s", T.ports[p].svc);
			snprintf(e->subnqn, sizeof(e->subnqn), "%s", ss->nqn);
			snprintf(e->traddr, sizeof(e->traddr), "%s", T.ports[p].addr);
			/* TCP security type: TLS 1.3 or none */
			e->tsas[0] = T.tls && !T.ports[p].plain ? 2 : 0;
			e++;
		}
	}
	for (unsigned r = 0; r < T.nr_disc_refs; r++, e++) {
		e->trtype = NVMF_TRTYPE_TCP;
		e->adrfam = strchr(T.disc_refs[r].addr, ':') ? NVMF_ADRFAM_IPV6 : NVMF_ADRFAM_IPV4;
		e->subtype = NVMF_SUBTYPE_DISCOVERY_REF;
		e->portid = (uint16_t)(100 + r);
		e->cntlid = 0xffff;
		e->asqsz = TGT_ADMIN_QSIZE;
		snprintf(e->trsvcid, sizeof(e->trsvcid), "%.15s", T.disc_refs[r].svc);
		snprintf(e->subnqn, sizeof(e->subnqn), "%s", NVME_DISC_SUBSYS_NQN);
		snprintf(e->traddr, sizeof(e->traddr), "%.63s", T.disc_refs[r].addr);
	}
	return size;
}

/* The discovery log changed: a new generation, and the Discovery Log Page
 * Change notice (AEC bit 31) to the discovery controllers that want it. */

static void disc_changed(void)
{
	T.genctr++;
	for (struct list_node *n = T.ctrls.next; n != &T.ctrls; n = n->next) {
		struct tgt_ctrl *ctrl = container_of(n, struct tgt_ctrl, link);
		if (!ctrl->ss->discovery || !(ctrl->aec & (1u << 31)))
			continue;
		nvme_aen_queue(ctrl, 0x2 | (0xf0u << 8) | ((uint32_t)NVME_LOG_DISCOVERY << 16));
	}
	log_notice("discovery log generation %llu", (unsigned long long)T.genctr);
}

int nvme_disc_show(const char *nqn, bool show, char *err, size_t errlen)
{
	for (unsigned i = 0; i < T.nr_subsys; i++) {
		struct tgt_subsys *ss = &T.subsys[i];
		if (ss->discovery || strcmp(ss->nqn, nqn))
			continue;
		if (ss->disc_hidden == !show)
			return 0;
		ss->disc_hidden = !show;
		log_notice("discovery log: %s %s", nqn, show ? "listed" : "left out");
		disc_changed();
		return 0;
	}
	snprintf(err, errlen, "no subsystem %s", nqn);
	return -1;
}

void nvme_disc_port_show(unsigned idx, bool show)
{
	if (T.ports[idx].disc_hidden == !show)
		return;
	T.ports[idx].disc_hidden = !show;
	log_notice("discovery log: port %u %s", idx + 1, show ? "listed" : "left out");
	disc_changed();
}

int nvme_disc_referral(const char *addr, const char *svc, char *err, size_t errlen)
{
	if (T.nr_disc_refs >= sizeof(T.disc_refs) / sizeof(T.disc_refs[0]) ||
	    strlen(addr) >= sizeof(T.disc_refs[0].addr) || strlen(svc) >= sizeof(T.disc_refs[0].svc)) {
		snprintf(err, errlen, "too many referrals or too long");
		return -1;
	}
	snprintf(T.disc_refs[T.nr_disc_refs].addr, sizeof(T.disc_refs[0].addr), "%s", addr);
	snprintf(T.disc_refs[T.nr_disc_refs].svc, sizeof(T.disc_refs[0].svc), "%s", svc);
	T.nr_disc_refs++;
	log_notice("discovery log: referral to %s:%s", addr, svc);
	disc_changed();
	return 0;
}

void nvme_disc_referrals_clear(void)
{
	T.nr_disc_refs = 0;
	disc_changed();
}

static size_t build_ana_log(struct tgt_ctrl *ctrl, bool groups_only)
{
	struct tgt_subsys *ss = ctrl->ss;
	size_t size = sizeof(struct ana_log_hdr) +
		      ss->nr_ns * (sizeof(struct ana_group_desc) + (groups_only ? 0 : 4)) +
		      T.ana_pad * sizeof(struct ana_group_desc);
	uint8_t *b = log_space(size), *p;
	if (!b)
		return 0;
	struct ana_log_hdr *h = (void *)b;
	p = b + sizeof(*h);
	h->ngrps = (uint16_t)(ss->nr_ns + T.ana_pad);
	/* First, so that the real groups' descriptors lie beyond 4 KiB. */
	for (unsigned i = 0; i < T.ana_pad; i++) {
		struct ana_group_desc *d = (void *)p;
		d->grpid = 1000 + i;
		d->state = ANA_OPTIMIZED;
		p += sizeof(*d);
	}
	for (unsigned i = 0; i < ss->nr_ns; i++) {
		struct tgt_ns *ns = &ss->ns[i];
		struct ana_group_desc *d = (void *)p;
		h->chgcnt += ns->ana_chgcnt;
		d->grpid = ns->anagrp ? ns->anagrp : ns->nsid;
		d->nnsids = groups_only ? 0 : 1;
		d->chgcnt = ns->ana_chgcnt;
		d->state = ns->ana[ctrl->port];
		p += sizeof(*d);
		if (!groups_only) {
			put32(p, ns->nsid);
			p += 4;
		}
	}
	return size;
}

static uint16_t get_log_page(struct tgt_cmd *cmd)
{
	struct tgt_ctrl *ctrl = cmd->conn->ctrl;
	const struct nvme_sqe *s = &cmd->sqe;
	uint8_t lid = s->cdw10 & 0xff, lsp = (s->cdw10 >> 8) & 0xf;
	bool rae = s->cdw10 & (1u << 15);
	uint64_t numd = (((uint64_t)(s->cdw11 & 0xffff) << 16) | (s->cdw10 >> 16)) + 1;
	uint64_t off = s->cdw12 | ((uint64_t)s->cdw13 << 32);
	size_t size = 0;

	if (numd * 4 != cmd->data_len)
		return SC_SGL_LEN | ST_DNR;
	if (off % 4)
		return SC_INVALID_FIELD | ST_DNR;
	switch (lid) {
	case 0x01: /* error information: no errors */
		size = 64;
		if (!log_space(size))
			return SC_INTERNAL;
		break;
	case 0x02: /* SMART / health: nothing to report */
		size = 512;
		if (ctrl->ss->discovery || !log_space(size))
			return SC_INVALID_FIELD | ST_DNR;
		break;
	case NVME_LOG_ANA:
		if (ctrl->ss->discovery)
			return SC_INVALID_FIELD | ST_DNR;
		size = build_ana_log(ctrl, lsp & 1);
		if (!rae)
			ctrl->ana_aen_masked = false;
		break;
	case NVME_LOG_CHANGED_NS:
		if (ctrl->ss->discovery)
			return SC_INVALID_FIELD | ST_DNR;
		size = 4096;
		if (!log_space(size))
			return SC_INTERNAL;
		ns_changed_log(ctrl, log_buf, rae);
		break;
	case NVME_LOG_DISCOVERY:
		if (!ctrl->ss->discovery)
			return SC_INVALID_FIELD | ST_DNR;
		size = build_disc_log(ctrl);
		break;
	default:
		return SC_INVALID_FIELD | ST_DNR;
	}
	if (!size)
		return SC_INTERNAL;
	if (off > size)
		return SC_INVALID_FIELD | ST_DNR;
	size_t n = size - off < cmd->data_len ? size - off : cmd->data_len;
	memcpy(cmd->buf, log_buf + off, n);
	memset(cmd->buf + n, 0, cmd->data_len - n);
	if (lid == NVME_LOG_ANA && off && off + n >= size && T.f.ana_mid_nsid &&
	    ctrl->port == T.f.ana_mid_port) {
		/* A change between this host's pieces of one page (one shot). */
		char err[128];
		uint32_t nsid = T.f.ana_mid_nsid;
		T.f.ana_mid_nsid = 0;
		if (nvme_set_ana(T.f.ana_mid_nqn, nsid, T.f.ana_mid_port, T.f.ana_mid_state, false,
				 err, sizeof(err)) < 0)
			log_warn("fault: ana-after-pieces: %s", err);
		else
			T.f.nr_injected++;
	}
	return 0;
}

static void aen_deliver(struct tgt_ctrl *ctrl)
{
	if (!ctrl->nr_aen_q || !ctrl->nr_aer || T.ports[ctrl->port].aen_hold)
		return;
	struct tgt_cmd *cmd = ctrl->aer[--ctrl->nr_aer];
	uint32_t ev = ctrl->aen_q[0];
	memmove(ctrl->aen_q, ctrl->aen_q + 1, --ctrl->nr_aen_q * sizeof(ctrl->aen_q[0]));
	log_info("controller %u: asynchronous event 0x%08x delivered", ctrl->cntlid, ev);
	nvme_complete(cmd, 0, ev);
}

static void features(struct tgt_cmd *cmd, bool set)
{
	struct tgt_ctrl *ctrl = cmd->conn->ctrl;
	uint8_t fid = cmd->sqe.cdw10 & 0xff;
	uint32_t v = cmd->sqe.cdw11, dw0 = 0;

	if (set && (cmd->sqe.cdw10 & (1u << 31))) {
		nvme_complete(cmd, SC_NOT_SAVEABLE | ST_DNR, 0);
		return;
	}
	switch (fid) {
	case NVME_FEAT_NUM_QUEUES:
		if (ctrl->ss->discovery)
			goto bad;
		if (set) {
			if ((v & 0xffff) == 0xffff || (v >> 16) == 0xffff)
				goto bad;
			unsigned n = (v & 0xffff) + 1u;
			if ((v >> 16) + 1u < n)
				n = (v >> 16) + 1u;
			if (n > TGT_MAX_QID)
				n = TGT_MAX_QID;
			ctrl->nr_ioq = (uint16_t)n;
		}
		dw0 = (uint32_t)(ctrl->nr_ioq - 1) | ((uint32_t)(ctrl->nr_ioq - 1) << 16);
		if (!ctrl->nr_ioq)
			dw0 = ((TGT_MAX_QID - 1) << 16) | (TGT_MAX_QID - 1);
		break;
	case NVME_FEAT_KATO:
		if (set) {
			ctrl->kato_ms = v;
			kato_touch(ctrl);
			if (!v)
				ctrl->kato_deadline_ns = 0;
		}
		dw0 = ctrl->kato_ms;
		break;
	case NVME_FEAT_ASYNC_EVENT:
		if (set)
			ctrl->aec = v;
		dw0 = ctrl->aec;
		break;
	case 0x06: /* volatile write cache: always on */
		if (set && !(v & 1))
			goto bad;
		dw0 = 1;
		break;
	default:
		goto bad;
	}
	nvme_complete(cmd, 0, dw0);
	return;
bad:
	nvme_complete(cmd, SC_INVALID_FIELD | ST_DNR, 0);
}

/* The abort-honour knob: a command of ctrl's I/O queue still waiting for
 * its delayed completion completes now with Command Abort Requested, as
 * SPDK does for a queued command; anything else is not aborted (as Linux's
 * target always answers). */
static bool abort_victim(struct tgt_ctrl *ctrl, uint32_t cdw10)
{
	uint16_t sqid = (uint16_t)cdw10, cid = (uint16_t)(cdw10 >> 16);

	if (!T.f.abort_honour || !sqid)
		return false;
	for (struct list_node *n = T.conns.next; n != &T.conns; n = n->next) {
		struct tgt_conn *c = container_of(n, struct tgt_conn, link);
		if (c->ctrl != ctrl || c->qid != sqid || c->closing)
			continue;
		for (unsigned i = 0; i < c->nr_cmds; i++) {
			struct tgt_cmd *v = &c->cmds[i];
			if (v->state != CMD_DELAYED || v->exec_pending || v->sqe.cid != cid)
				continue;
			list_del(&v->link);
			v->cqe.result.u64 = 0;
			v->cqe.status = (uint16_t)(0x07 << 1);
			if (!v->h2c)
				v->data_len = 0;
			T.f.nr_aborted++;
			log_notice("fault: q%u CID 0x%04x aborted (abort-honour)", sqid, cid);
			cmd_send_completion(v);
			return true;
		}
	}
	return false;
}

static void admin_cmd(struct tgt_cmd *cmd)
{
	struct tgt_ctrl *ctrl = cmd->conn->ctrl;
	uint16_t st;

	if (!(ctrl->cc & NVME_CC_EN) || !(ctrl->csts & NVME_CSTS_RDY)) {
		log_warn("%s: admin opcode 0x%02x before CC.EN/CSTS.RDY", cmd->conn->peer,
			 cmd->sqe.opcode);
		nvme_complete(cmd, SC_CMD_SEQ | ST_DNR, 0);
		return;
	}
	switch (cmd->sqe.opcode) {
	case NVME_ADMIN_IDENTIFY:
		if ((cmd->sqe.cdw10 & 0xff) == NVME_ID_CNS_NS && T.f.id_ns_fail) {
			T.f.id_ns_fail--;
			log_notice("fault: Identify Namespace %u fails with status 0x%02x",
				   cmd->sqe.nsid, T.f.id_ns_status);
			nvme_complete(cmd, ST(0, T.f.id_ns_status), 0);
			return;
		}
		if ((cmd->sqe.cdw10 & 0xff) == NVME_ID_CNS_NS_DESC_LIST && T.f.id_desc_fail) {
			T.f.id_desc_fail--;
			log_notice("fault: the descriptor list of nsid %u fails with status 0x%02x",
				   cmd->sqe.nsid, T.f.id_ns_status);
			nvme_complete(cmd, ST(0, T.f.id_ns_status), 0);
			return;
		}
		st = identify(cmd);
		cmd->c2h_src = cmd->buf;
		nvme_complete(cmd, st, 0);
		return;
	case NVME_ADMIN_GET_LOG_PAGE:
		st = get_log_page(cmd);
		cmd->c2h_src = cmd->buf;
		nvme_complete(cmd, st, 0);
		return;
	case NVME_ADMIN_SET_FEATURES:
		features(cmd, true);
		return;
	case NVME_ADMIN_GET_FEATURES:
		features(cmd, false);
		return;
	case NVME_ADMIN_KEEP_ALIVE:
		nvme_complete(cmd, 0, 0);
		return;
	case NVME_ADMIN_ASYNC_EVENT:
		if (ctrl->nr_aer > TGT_AERL) {
			nvme_complete(cmd, SC_AER_LIMIT, 0);
			return;
		}
		cmd->state = CMD_HELD;
		ctrl->aer[ctrl->nr_aer++] = cmd;
		aen_deliver(ctrl);
		return;
	case NVME_ADMIN_ABORT:
		T.f.nr_abort_cmds++;
		nvme_complete(cmd, 0, abort_victim(ctrl, cmd->sqe.cdw10) ? 0 : 1);
		return;
	}
	nvme_complete(cmd, SC_INVALID_OPCODE | ST_DNR, 0);
}

/* ---- ANA ---- */

/* An ANA change event to ss's controllers on port (-1: every port). */
static void ana_notify(struct tgt_subsys *ss, int port)
{
	for (struct list_node *n = T.ctrls.next; n != &T.ctrls; n = n->next) {
		struct tgt_ctrl *ctrl = container_of(n, struct tgt_ctrl, link);
		if (ctrl->ss != ss || (port >= 0 && ctrl->port != (unsigned)port) ||
		    !(ctrl->aec & (1u << 11)) || ctrl->ana_aen_masked)
			continue;
		/* Notice, ANA change, log page 0x0c; masked until the host
		 * reads the log without RAE. */
		ctrl->ana_aen_masked = true;
		nvme_aen_queue(ctrl, 0x2 | (0x03u << 8) | ((uint32_t)NVME_LOG_ANA << 16));
	}
}

void nvme_aen_kick(struct tgt_ctrl *ctrl)
{
	aen_deliver(ctrl);
}

void nvme_aen_queue(struct tgt_ctrl *ctrl, uint32_t ev)
{
	/* Each kind is masked until its log is read, so at most one of each
	 * waits: the queue cannot fill. */
	if (ctrl->nr_aen_q < sizeof(ctrl->aen_q) / sizeof(ctrl->aen_q[0]))
		ctrl->aen_q[ctrl->nr_aen_q++] = ev;
	aen_deliver(ctrl);
}

int nvme_set_ana(const char *nqn, uint32_t nsid, unsigned port, uint8_t state, bool aen,
		 char *err, size_t errlen)
{
	struct tgt_subsys *ss = find_subsys(nqn);

	if (!ss || ss->discovery) {
		snprintf(err, errlen, "no subsystem %s", nqn);
		return -1;
	}
	if (nsid == 0 || nsid > ss->nr_ns) {
		snprintf(err, errlen, "no namespace %u in %s", nsid, nqn);
		return -1;
	}
	if (port >= T.nr_ports) {
		snprintf(err, errlen, "no port %u", port + 1);
		return -1;
	}
	struct tgt_ns *ns = &ss->ns[nsid - 1];
	ns->ana[port] = state;
	ns->ana_chgcnt++;
	log_notice("ANA: %s nsid %u on port %u is now %s%s", nqn, nsid, port + 1,
		   ana_state_name(state), aen ? "" : " (no event sent)");
	if (aen)
		ana_notify(ss, (int)port);
	return 0;
}

/* The namespace moves to ANA group grp (ANACAP allows a namespace's group
 * to change, as nvmet's namespaces/N/ana_grpid does): Identify Namespace
 * and the ANA log page say so from now on; the per-port states stay. */
int nvme_set_ana_group(const char *nqn, uint32_t nsid, uint32_t grp, bool aen, char *err,
		       size_t errlen)
{
	struct tgt_subsys *ss = find_subsys(nqn);

	if (!ss || ss->discovery) {
		snprintf(err, errlen, "no subsystem %s", nqn);
		return -1;
	}
	if (nsid == 0 || nsid > ss->nr_ns) {
		snprintf(err, errlen, "no namespace %u in %s", nsid, nqn);
		return -1;
	}
	/* The log has one descriptor per namespace: one group each, within
	 * ANAGRPMAX. */
	if (grp == 0 || grp > TGT_MAX_NS) {
		snprintf(err, errlen, "group %u is not in 1..%u", grp, TGT_MAX_NS);
		return -1;
	}
	for (unsigned i = 0; i < ss->nr_ns; i++) {
		uint32_t g = ss->ns[i].anagrp ? ss->ns[i].anagrp : ss->ns[i].nsid;
		if (i != nsid - 1 && g == grp) {
			snprintf(err, errlen, "group %u is nsid %u's", grp, ss->ns[i].nsid);
			return -1;
		}
	}
	struct tgt_ns *ns = &ss->ns[nsid - 1];
	ns->anagrp = grp;
	ns->ana_chgcnt++;
	log_notice("ANA: %s nsid %u is now in ANA group %u%s", nqn, nsid, grp,
		   aen ? "" : " (no event sent)");
	if (aen)
		ana_notify(ss, -1);
	return 0;
}

/* ---- I/O ---- */

static void mark_dirty(struct tgt_ns *ns, uint64_t off, uint64_t len)
{
	for (uint64_t p = off / TGT_PAGE; p <= (off + len - 1) / TGT_PAGE; p++)
		ns->dirty[p / 64] |= 1ull << (p % 64);
}

bool tgt_vwc_present(void)
{
	return !T.persist_dir || T.vwc;
}

static void flush_ns(struct tgt_ns *ns)
{
	if (ns->data == ns->durable) {
		memset(ns->dirty, 0, ns->ndirty_words * 8);
		return;
	}
	for (uint64_t w = 0; w < ns->ndirty_words; w++) {
		uint64_t bits = ns->dirty[w];
		while (bits) {
			uint64_t p = w * 64 + (uint64_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			memcpy(ns->durable + p * TGT_PAGE, ns->data + p * TGT_PAGE, TGT_PAGE);
		}
		ns->dirty[w] = 0;
	}
}

void nvme_lose_cache(void)
{
	uint64_t pages = 0;

	for (unsigned i = 0; i < T.nr_subsys; i++)
		for (unsigned j = 0; j < T.subsys[i].nr_ns; j++) {
			struct tgt_ns *ns = &T.subsys[i].ns[j];
			for (uint64_t w = 0; w < ns->ndirty_words; w++) {
				uint64_t bits = ns->dirty[w];
				while (bits && ns->data != ns->durable) {
					uint64_t p = w * 64 + (uint64_t)__builtin_ctzll(bits);
					bits &= bits - 1;
					memcpy(ns->data + p * TGT_PAGE, ns->durable + p * TGT_PAGE,
					       TGT_PAGE);
					pages++;
				}
				ns->dirty[w] = 0;
			}
		}
	log_notice("fault: volatile cache lost: %llu pages written since their Flush reverted",
		   (unsigned long long)pages);
}

static void ns_write(struct tgt_ns *ns, uint64_t off, const void *src, uint64_t len, bool fua)
{
	if (src)
		memcpy(ns->data + off, src, len);
	else
		memset(ns->data + off, 0, len);
	if (fua && ns->data != ns->durable)
		memcpy(ns->durable + off, ns->data + off, len);
	mark_dirty(ns, off, len);
}

static uint16_t ana_status(struct tgt_ns *ns, unsigned port)
{
	switch (ns->ana[port]) {
	case ANA_INACCESSIBLE:
		return ST(3, 0x02);
	case ANA_PERSISTENT_LOSS:
		return ST(3, 0x01);
	case ANA_CHANGE:
		return ST(3, 0x03);
	}
	return 0;
}

/* Checks an I/O command before any data moves; 0 to go on. */
static uint16_t io_prepare(struct tgt_cmd *cmd, struct tgt_ns **nsp)
{
	struct tgt_ctrl *ctrl = cmd->conn->ctrl;
	const struct nvme_sqe *s = &cmd->sqe;
	struct tgt_ns *ns = NULL;
	uint16_t st;

	if (!(ctrl->csts & NVME_CSTS_RDY))
		return SC_CMD_SEQ | ST_DNR;
	switch (s->opcode) {
	case NVME_CMD_READ:
	case NVME_CMD_WRITE:
	case NVME_CMD_WRITE_ZEROES:
	case NVME_CMD_DSM:
	case NVME_CMD_FLUSH:
		break;
	default:
		return SC_INVALID_OPCODE | ST_DNR;
	}
	if (!(s->opcode == NVME_CMD_FLUSH && s->nsid == 0xffffffff)) {
		if (!(ns = find_ns(ctrl, s->nsid)))
			return SC_INVALID_NS | ST_DNR;
		if ((st = ana_status(ns, ctrl->port)))
			return st;
	}
	*nsp = ns;
	if ((st = faults_io_status(s->nsid)))
		return st;
	if (s->opcode == NVME_CMD_READ || s->opcode == NVME_CMD_WRITE ||
	    s->opcode == NVME_CMD_WRITE_ZEROES) {
		uint64_t slba = s->cdw10 | ((uint64_t)s->cdw11 << 32);
		uint64_t nlb = (s->cdw12 & 0xffff) + 1ull;
		if (slba + nlb > ns->nblocks || slba + nlb < slba)
			return SC_LBA_RANGE | ST_DNR;
		if (s->opcode != NVME_CMD_WRITE_ZEROES && (nlb << ns->lba_shift) != cmd->data_len)
			return SC_SGL_LEN | ST_DNR;
	}
	if (s->opcode == NVME_CMD_DSM && ((s->cdw10 & 0xff) + 1u) * 16u != cmd->data_len)
		return SC_SGL_LEN | ST_DNR;
	return 0;
}

static void io_execute(struct tgt_cmd *cmd, struct tgt_ns *ns)
{
	const struct nvme_sqe *s = &cmd->sqe;
	uint64_t slba = s->cdw10 | ((uint64_t)s->cdw11 << 32);
	uint64_t nlb = (s->cdw12 & 0xffff) + 1ull;

	switch (s->opcode) {
	case NVME_CMD_READ:
		cmd->c2h_src = ns->data + (slba << ns->lba_shift);
		break;
	case NVME_CMD_WRITE:
		ns_write(ns, slba << ns->lba_shift, cmd->buf, nlb << ns->lba_shift,
			 s->cdw12 & NVME_RW_FUA);
		break;
	case NVME_CMD_WRITE_ZEROES:
		if (s->cdw12 & NVME_WZ_DEAC)
			T.f.nr_wz_deac++;
		else
			T.f.nr_wz_nodeac++;
		ns_write(ns, slba << ns->lba_shift, NULL, nlb << ns->lba_shift,
			 s->cdw12 & NVME_RW_FUA);
		break;
	case NVME_CMD_DSM: {
		const struct nvme_dsm_range *r = (const void *)cmd->buf;
		unsigned nr = (s->cdw10 & 0xff) + 1u;
		if (!(s->cdw11 & NVME_DSM_ATTR_DEALLOCATE) || T.f.dsm_noop)
			break;
		for (unsigned i = 0; i < nr; i++)
			if (r[i].slba + r[i].nlb > ns->nblocks || r[i].slba + r[i].nlb < r[i].slba) {
				nvme_complete(cmd, SC_LBA_RANGE | ST_DNR, 0);
				return;
			}
		/* Deallocated blocks read as zeroes (DLFEAT). */
		for (unsigned i = 0; i < nr; i++)
			if (r[i].nlb)
				ns_write(ns, r[i].slba << ns->lba_shift, NULL,
					 (uint64_t)r[i].nlb << ns->lba_shift, false);
		break;
	}
	case NVME_CMD_FLUSH:
		if (ns) {
			flush_ns(ns);
		} else {
			struct tgt_subsys *ss = cmd->conn->ctrl->ss;
			for (unsigned i = 0; i < ss->nr_ns; i++)
				flush_ns(&ss->ns[i]);
		}
		break;
	}
	nvme_complete(cmd, 0, 0);
}

/* ---- dispatch ---- */

static void execute(struct tgt_cmd *cmd)
{
	struct tgt_conn *c = cmd->conn;

	if (cmd->sqe.opcode == NVME_FABRICS_COMMAND) {
		fabrics_cmd(cmd);
		return;
	}
	if (!c->connected || !c->ctrl) {
		log_warn("%s: opcode 0x%02x before Connect", c->peer, cmd->sqe.opcode);
		nvme_complete(cmd, SC_CMD_SEQ | ST_DNR, 0);
		return;
	}
	if (c->qid == 0) {
		admin_cmd(cmd);
		return;
	}
	struct tgt_ns *ns = cmd->ns;
	if (!cmd->prepared) {
		uint16_t st = io_prepare(cmd, &ns);
		if (st) {
			nvme_complete(cmd, st, 0);
			return;
		}
	}
	if (T.f.reorder_ms || T.f.late_ms) {
		/* Like a target that runs commands concurrently: a later command
		 * may take effect before an earlier one. */
		cmd->ns = ns;
		cmd->state = CMD_DELAYED;
		cmd->exec_pending = true;
		cmd->due_ns = now_ns() + (uint64_t)T.f.late_ms * 1000000ull;
		if (T.f.reorder_ms)
			cmd->due_ns += faults_rng() % ((uint64_t)T.f.reorder_ms * 1000000ull + 1);
		delayed_insert(cmd);
		return;
	}
	io_execute(cmd, ns);
}

void nvme_io_execute_delayed(struct tgt_cmd *cmd)
{
	cmd->exec_pending = false;
	io_execute(cmd, cmd->ns);
}

void delayed_insert(struct tgt_cmd *cmd)
{
	struct list_node *n = T.delayed.prev;

	while (n != &T.delayed && container_of(n, struct tgt_cmd, link)->due_ns > cmd->due_ns)
		n = n->prev;
	/* after n */
	cmd->link.prev = n;
	cmd->link.next = n->next;
	n->next->prev = &cmd->link;
	n->next = &cmd->link;
}

void nvme_cmd_data_done(struct tgt_cmd *cmd)
{
	execute(cmd);
}

void nvme_cmd_arrived(struct tgt_cmd *cmd, uint32_t inlen)
{
	struct tgt_conn *c = cmd->conn;
	const struct nvme_sqe *s = &cmd->sqe;
	uint8_t dir = s->opcode == NVME_FABRICS_COMMAND ?
			      ((const struct nvmf_connect_cmd *)s)->fctype & 3 : s->opcode & 3;
	uint16_t st = 0;

	if (c->ctrl)
		kato_touch(c->ctrl);
	cmd->prepared = false;
	cmd->exec_pending = false;
	cmd->ns = NULL;
	cmd->h2c = dir == 1;
	cmd->data_len = dir ? s->dptr.length : 0;
	if (s->flags & 0x3) {
		st = SC_INVALID_FIELD | ST_DNR; /* fused operations */
	} else if ((s->flags & 0xc0) != NVME_CMD_FLAGS_SGL_METABUF) {
		st = SC_INVALID_FIELD | ST_DNR; /* fabrics commands use SGLs */
	} else if (dir == 3) {
		st = SC_INVALID_OPCODE | ST_DNR;
	} else if (inlen) {
		if (!cmd->h2c || s->dptr.type != NVME_SGL_DATA_BLOCK_OFFSET)
			st = SC_SGL_TYPE | ST_DNR;
		else if (s->dptr.addr != 0)
			st = SC_SGL_OFFSET | ST_DNR;
		else if (s->dptr.length != inlen)
			st = SC_SGL_LEN | ST_DNR;
	} else if (dir && cmd->data_len) {
		if (s->dptr.type != NVME_SGL_TRANSPORT_DATA_BLOCK)
			st = SC_SGL_TYPE | ST_DNR;
		else if (cmd->data_len > TGT_MAX_XFER)
			st = SC_INVALID_FIELD | ST_DNR;
	}
	if (st) {
		cmd->data_len = 0;
		cmd->h2c = false;
		nvme_complete(cmd, st, 0);
		return;
	}
	if (!cmd->h2c || inlen || !cmd->data_len) {
		execute(cmd);
		return;
	}
	/* Data to fetch with R2T: fail before asking for it if the command
	 * cannot succeed. */
	if (c->qid && c->connected && c->ctrl) {
		st = io_prepare(cmd, &cmd->ns);
		if (st) {
			nvme_complete(cmd, st, 0);
			return;
		}
		cmd->prepared = true;
	}
	cmd_send_r2t(cmd);
}
