/* libFuzzer harness for the ANA log page as a target serves it and the
 * multipath snapshot built from it.  The input is a target's ANA log page
 * (the bytes after the first two; beyond them the page reads as zeroes),
 * served to the gateway's read loop (nvmf_ana_log_need and
 * nvmf_ana_next_read, the decisions ana.c takes between commands) with a
 * transfer size and, from the first byte, whether the target honours the
 * log page offset (nvmet does not for this page).  Checked: the loop ends
 * within a bound, never asks for more than NVMF_ANA_LOG_MAX nor starts a
 * piece past the length known, and a page it accepts parses; the page
 * applied to namespaces in groups from the second byte (the page may move
 * them to other groups) gives a snapshot (nvmf_ctrl_ana_groups) where
 * every group of a namespace is present once, sorted, with
 * the state of its namespaces: never a default (0 only where the page
 * itself gave an invalid state). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/ctrl.h"
#include "transports/nvme_spec.h"

#define NS 16

static const uint8_t *page;
static size_t page_len;

static uint8_t *buf;
static size_t dirty; /* buf[dirty..] is all zeroes: only what was written is cleared */

/* What the target returns for bytes [off, off + len) of its page, into
 * buf at pos. */
static void serve(size_t pos, uint64_t off, size_t len, int honour_offset)
{
	size_t k = 0;

	if (!honour_offset)
		off = 0;
	if (off < page_len)
		k = page_len - off < len ? page_len - off : len;
	memcpy(buf + pos, page + off, k);
	if (pos + k < dirty)
		memset(buf + pos + k, 0, (pos + len < dirty ? pos + len : dirty) - (pos + k));
	if (k && pos + k > dirty)
		dirty = pos + k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nvmf_ctrl c;
	static struct nvmf_ns ns[NS];
	static struct nvmf_ana_grp out[NS];
	static int once;

	if (!once) {
		once = 1;
		log_set_level(LOG_LVL_ERR);
		buf = calloc(1, NVMF_ANA_LOG_MAX);
		if (!buf)
			abort();
	}
	if (size < 2)
		return 0;
	int honour = data[0] & 1;
	uint32_t chunk = 4096u << ((data[0] >> 1) & 7); /* 4 KiB to 512 KiB */
	unsigned groups = 1 + (data[1] & 15);
	page = data + 2;
	page_len = size - 2;

	/* The read loop of ana.c, with the target above. */
	size_t have = 0, want = 4096;
	unsigned rounds = 0;
	for (;;) {
		if (want > NVMF_ANA_LOG_MAX || want <= have)
			abort();
		while (have < want) {
			size_t n = want - have < chunk ? want - have : chunk;
			serve(have, have, n, honour);
			have += n;
		}
		uint64_t need = nvmf_ana_log_need(buf, have);
		if (need <= have)
			break;
		bool restart;
		if (nvmf_ana_next_read(have, need, chunk, &want, &restart) < 0) {
			if (need <= NVMF_ANA_LOG_MAX)
				abort(); /* refused a page within the cap */
			have = 0;
			break;
		}
		if (want < need)
			abort();
		if (restart) {
			if (want > chunk)
				abort();
			have = 0;
		} else if (have >= need) {
			abort(); /* the next piece would start past the length known */
		}
		/* The length known only grows: at most one round per page of
		 * the cap, far fewer with the doubling. */
		if (++rounds > NVMF_ANA_LOG_MAX / 4096)
			abort();
	}
	if (dirty > have) {
		memset(buf + have, 0, dirty - have);
		dirty = have;
	}
	if (!have)
		return 0;

	/* Namespaces i + 1 in group 1 + i % groups, applied as bring-up does. */
	memset(&c, 0, sizeof(c));
	strcpy(c.opts.name, "fuzz");
	c.ns = ns;
	c.nr_ns = NS;
	for (unsigned i = 0; i < NS; i++)
		ns[i] = (struct nvmf_ns){ .nsid = i + 1, .anagrpid = 1 + i % groups,
					  .ana_state = NVME_ANA_OPTIMIZED };
	if (nvmf_ctrl_ana_apply(&c, buf, have) < 0)
		abort(); /* the walk accepted what the parse refuses */
	/* The page may move namespaces to other groups (its NSID lists), so
	 * the groups are those the namespaces are in afterwards, never 0. */
	unsigned distinct = 0;
	uint32_t top = 0;
	for (unsigned i = 0; i < NS; i++) {
		unsigned k = 0;
		while (k < i && ns[k].anagrpid != ns[i].anagrpid)
			k++;
		distinct += k == i;
		if (ns[i].anagrpid == 0)
			abort();
		if (ns[i].anagrpid > top)
			top = ns[i].anagrpid;
	}
	unsigned n = nvmf_ctrl_ana_groups(&c, out);
	if (n != distinct)
		abort();
	for (unsigned i = 1; i < n; i++)
		if (out[i].grp <= out[i - 1].grp)
			abort();
	for (unsigned i = 0; i < NS; i++) {
		/* Every namespace of a group has the group's state, and the
		 * snapshot has exactly that one. */
		uint8_t st = nvmf_ana_grp_state(out, n, ns[i].anagrpid);
		if (st != ns[i].ana_state)
			abort();
	}
	if ((top < UINT32_MAX && nvmf_ana_grp_state(out, n, top + 1) != 0) ||
	    nvmf_ana_grp_state(out, n, 0) != 0)
		abort();
	return 0;
}
