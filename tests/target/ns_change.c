/* Namespaces that change under a connected host, as an array admin changes
 * them: the ns-* knobs, the Changed Namespace List log (04h) and the
 * Namespace Attribute Changed event (notice 00h) that points to it.
 *
 *   ns-resize NQN NSID SIZE [noaen]   grow or shrink (bytes kept)
 *   ns-remove NQN NSID [noaen]        inactive; I/O fails Invalid Namespace
 *   ns-add NQN NSID [noaen]           active again, with the bytes it had
 *   ns-identity NQN NSID [noaen]      new NGUID/EUI-64/UUID (another namespace)
 *   ns-format NQN NSID BLOCK [noaen]  another LBA data size, same bytes
 *
 * "noaen": the change is made but no event sent, as across a reconnect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "tests/target/tgt.h"

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	uint64_t mul = 1;

	if (end == s)
		return -1;
	if (*end == 'k' || *end == 'K')
		mul = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		mul = 1024ull * 1024 * 1024, end++;
	if (*end)
		return -1;
	*out = v * mul;
	return 0;
}

/* The namespace goes on the Changed Namespace List of every controller
 * of ss, and those that enabled the notice and have read the log since
 * the last one get the event. */
static void ns_notify(struct tgt_subsys *ss, uint32_t nsid, bool aen, uint32_t ports)
{
	for (struct list_node *n = T.ctrls.next; n != &T.ctrls; n = n->next) {
		struct tgt_ctrl *ctrl = container_of(n, struct tgt_ctrl, link);
		bool listed = false;
		if (ctrl->ss != ss || !(ports >> ctrl->port & 1u))
			continue;
		for (unsigned i = 0; i < ctrl->nr_changed_ns; i++)
			listed |= ctrl->changed_ns[i] == nsid;
		if (!listed) {
			if (ctrl->nr_changed_ns < TGT_CHANGED_NS_MAX)
				ctrl->changed_ns[ctrl->nr_changed_ns++] = nsid;
			else
				ctrl->changed_ns_overflow = true;
		}
		if (!aen || !(ctrl->aec & NVME_AEN_CFG_NS_ATTR) || ctrl->ns_aen_masked)
			continue;
		ctrl->ns_aen_masked = true;
		/* Notice, namespace attribute changed, log page 04h. */
		nvme_aen_queue(ctrl, 0x2 | ((uint32_t)NVME_AER_NOTICE_NS_CHANGED << 8) |
					     ((uint32_t)NVME_LOG_CHANGED_NS << 16));
	}
}

void ns_changed_log(struct tgt_ctrl *ctrl, uint8_t *buf, bool rae)
{
	uint32_t *list = (uint32_t *)buf;

	if (ctrl->changed_ns_overflow)
		list[0] = NVME_CHANGED_NS_OVERFLOW;
	else
		memcpy(list, ctrl->changed_ns, ctrl->nr_changed_ns * sizeof(*list));
	if (rae)
		return;
	ctrl->nr_changed_ns = 0;
	ctrl->changed_ns_overflow = false;
	ctrl->ns_aen_masked = false;
}

/* A namespace's identity after ns-identity: derived from the old one, so
 * runs are reproducible. */
static void ns_new_identity(struct tgt_ns *ns)
{
	for (unsigned i = 0; i < 16; i++)
		ns->nguid[i] = (uint8_t)(ns->nguid[i] * 31u + 7u + i);
	for (unsigned i = 0; i < 8; i++)
		ns->eui64[i] = (uint8_t)(ns->eui64[i] * 31u + 11u + i);
	for (unsigned i = 0; i < 16; i++)
		ns->uuid[i] = (uint8_t)(ns->uuid[i] * 31u + 13u + i);
}

int ns_change_command(char **w, unsigned nw, char *reply, size_t len)
{
	bool aen = !(nw > 1 && !strcmp(w[nw - 1], "noaen"));
	unsigned nargs = nw - !aen;
	struct tgt_subsys *ss;
	struct tgt_ns *ns;
	uint64_t nsid, v = 0;

	if (nargs < 3 || parse_u64(w[2], &nsid) < 0)
		goto bad;
	if (!(ss = tgt_find_subsys(w[1])) || ss->discovery || !nsid || nsid > ss->nr_ns) {
		snprintf(reply, len, "err no namespace %s %s", w[1], w[2]);
		return -1;
	}
	ns = &ss->ns[nsid - 1];
	if (!strcmp(w[0], "ns-resize") && nargs == 4 && !parse_u64(w[3], &v)) {
		if (!v || v % ns->block || v % TGT_PAGE || v > ns->cap_bytes) {
			snprintf(reply, len,
				 "err size must be a multiple of %u and 4 KiB, at most %llu (with "
				 "--persist: the size it has)",
				 ns->block, (unsigned long long)ns->cap_bytes);
			return -1;
		}
		if (v > ns->bytes) {
			/* What the host sees there is zeroes, as a grown
			 * volume's new blocks are. */
			memset(ns->data + ns->bytes, 0, v - ns->bytes);
			if (ns->durable != ns->data)
				memset(ns->durable + ns->bytes, 0, v - ns->bytes);
		}
		log_notice("namespace: %s nsid %u resized from %llu to %llu bytes%s", ss->nqn,
			   ns->nsid, (unsigned long long)ns->bytes, (unsigned long long)v,
			   aen ? "" : " (no event sent)");
		ns->bytes = v;
		ns->nblocks = v / ns->block;
	} else if (!strcmp(w[0], "ns-remove") && nargs == 3) {
		ns->removed = true;
		log_notice("namespace: %s nsid %u removed%s", ss->nqn, ns->nsid,
			   aen ? "" : " (no event sent)");
	} else if (!strcmp(w[0], "ns-add") && nargs == 3) {
		ns->removed = false;
		log_notice("namespace: %s nsid %u added%s", ss->nqn, ns->nsid,
			   aen ? "" : " (no event sent)");
	} else if ((!strcmp(w[0], "ns-detach") || !strcmp(w[0], "ns-attach")) && nargs == 4 &&
		   !parse_u64(w[3], &v) && v >= 1 && v <= T.nr_ports) {
		bool detach = !strcmp(w[0], "ns-detach");
		uint32_t bit = 1u << (v - 1);
		ns->detached = detach ? ns->detached | bit : ns->detached & ~bit;
		log_notice("namespace: %s nsid %u %s port %llu%s", ss->nqn, ns->nsid,
			   detach ? "detached from" : "attached to", (unsigned long long)v,
			   aen ? "" : " (no event sent)");
		ns_notify(ss, ns->nsid, aen, bit);
		T.f.nr_injected++;
		return 0;
	} else if (!strcmp(w[0], "ns-identity") && nargs == 3) {
		ns_new_identity(ns);
		log_notice("namespace: %s nsid %u has a new identity (NGUID/EUI-64/UUID)%s",
			   ss->nqn, ns->nsid, aen ? "" : " (no event sent)");
	} else if (!strcmp(w[0], "ns-format") && nargs == 4 && !parse_u64(w[3], &v)) {
		if (v < 512 || v > 65536 || (v & (v - 1)) || ns->bytes % v) {
			snprintf(reply, len, "err block size %llu", (unsigned long long)v);
			return -1;
		}
		ns->block = (uint32_t)v;
		ns->lba_shift = (uint8_t)__builtin_ctzll(v);
		ns->nblocks = ns->bytes / v;
		log_notice("namespace: %s nsid %u now has %llu-byte blocks%s", ss->nqn, ns->nsid,
			   (unsigned long long)v, aen ? "" : " (no event sent)");
	} else {
		goto bad;
	}
	ns_notify(ss, ns->nsid, aen, ~0u);
	T.f.nr_injected++;
	return 0;
bad:
	snprintf(reply, len, "err usage: ns-resize|ns-remove|ns-add|ns-identity|ns-format NQN "
			     "NSID [SIZE|BLOCK] [noaen], ns-detach|ns-attach NQN NSID PORT [noaen]");
	return -1;
}
