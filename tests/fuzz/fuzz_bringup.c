/* libFuzzer harness for controller bring-up parsing: what a target says in
 * CAP, Identify Controller, the active namespace list and Identify
 * Namespace, through the functions ctrl_init.c's bring-up steps call
 * (nvmf_pick_max_xfer, nvmf_in_capsule_max, nvmf_ns_list_count,
 * nvmf_ns_from_id).  Input: CAP (8 bytes), the --max-xfer option (4), MDTS
 * (1), IOCCSZ (4), the number of list entries (1), the entries (4 each),
 * then for each namespace used the first 384 bytes of its Identify
 * Namespace data (everything the gateway reads; short input reads as
 * zeroes) and, for one accepted, the 64 bytes that end its Namespace
 * Identification Descriptor list (nvmf_ns_descs_uuid; the rest of the
 * 4 KiB page is zeroes, as a target leaves it).  Checked: a UUID is taken
 * only whole and non-zero, from a descriptor inside the page; the transfer size is within every limit, the list
 * used is strictly increasing without 0 or the broadcast ID, and every
 * namespace accepted has a usable block size and a byte size that fits
 * 2^63. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/ctrl.h"
#include "transports/nvme_spec.h"
#include "transports/transport.h"

#define ID_NS_USED 384

static const uint8_t *in;
static size_t in_len, in_off;

static void take(void *dst, size_t n)
{
	size_t k = in_len - in_off < n ? in_len - in_off : n;
	memset(dst, 0, n);
	memcpy(dst, in + in_off, k);
	in_off += k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nvme_id_ns *id;
	static uint32_t list[1024];
	static int once;
	uint64_t cap;
	uint32_t opt, ioccsz;
	uint8_t mdts, nr;

	if (!once) {
		once = 1;
		log_set_level(LOG_LVL_ERR);
		if (!(id = aligned_alloc(4096, sizeof(*id))))
			abort();
	}
	in = data;
	in_len = size;
	in_off = 0;
	take(&cap, 8);
	take(&opt, 4);
	take(&mdts, 1);
	take(&ioccsz, 4);
	take(&nr, 1);

	uint32_t x = nvmf_pick_max_xfer(cap, mdts, opt);
	if (x == 0 || x > (opt ? opt : 256u * 1024))
		abort();
	if (mdts && mdts < 32) {
		uint64_t lim = (4096ull << NVME_CAP_MPSMIN(cap)) << mdts;
		if (x > lim)
			abort();
	}
	uint32_t icm = nvmf_in_capsule_max(ioccsz);
	if (ioccsz < 4 ? icm != 0 : (uint64_t)icm + 64 > (uint64_t)ioccsz * 16)
		abort();

	memset(list, 0, sizeof(list));
	for (unsigned i = 0; i < nr; i++)
		take(&list[i], 4);
	unsigned n = nvmf_ns_list_count("fuzz", list, 1024);
	if (n > nr)
		abort();
	for (unsigned i = 0; i < n; i++)
		if (!list[i] || list[i] == 0xffffffff || (i && list[i] <= list[i - 1]))
			abort();

	for (unsigned i = 0; i < n; i++) {
		struct nvmf_ns ns;
		memset(id, 0, sizeof(*id));
		take(id, ID_NS_USED);
		if (nvmf_ns_from_id("fuzz", list[i], id, &ns) <= 0)
			continue;
		if (ns.nsid != list[i] || ns.nsze == 0 || ns.lba_shift < 9 || ns.lba_shift > 16 ||
		    ns.lba_size != 1u << ns.lba_shift)
			abort();
		if (ns.nsze > (uint64_t)INT64_MAX >> ns.lba_shift)
			abort(); /* the byte size would not fit an off_t */
		if (ns.optimal_io % ns.lba_size)
			abort();
		static uint8_t page[4096];
		uint8_t uuid[16], none[16] = { 0 };
		memset(page, 0, sizeof(page));
		take(page + sizeof(page) - 64, 64);
		/* Also from the front: descriptors start at byte 0. */
		memcpy(page, page + sizeof(page) - 64, 64);
		memset(uuid, 0xa5, sizeof(uuid));
		int got = nvmf_ns_descs_uuid(page, sizeof(page), uuid);
		if (got != 0 && got != 1)
			abort();
		if (got == !memcmp(uuid, none, 16))
			abort(); /* 1 with a zero UUID, or 0 with one left behind */
	}
	return 0;
}
