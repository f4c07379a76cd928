/* libFuzzer harness for the FUSE file's read-modify-write planning
 * (fuse/rmw.c), run as fuse/io.c runs it against a RAM disk: the input
 * picks the block size, the volume's max I/O and a sequence of reads,
 * writes and zeroings at any byte offset and length.  Checked for each:
 * - the plan's span is block-aligned and covers exactly the request plus
 *   less than a block on each side; every partial block is an edge read,
 *   every whole block is in the inner range, the two edges never overlap;
 * - the span is cut into volume I/Os that are whole blocks, at most the
 *   max I/O long, and tile it with no gap or overlap;
 * - after a write or zeroing, the disk equals a reference where the bytes
 *   were simply copied or cleared: nothing outside the range changed, and
 *   nothing of the span buffer was left unmerged (it starts poisoned). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/rmw.h"

#include "tests/fuzz/fuzz_check.h"

#define DISK (16 * 1024)

static uint8_t pattern[DISK], disk[DISK], ref[DISK], span[DISK], edge[2 * 4096];

static void check_plan(const struct rmw_plan *p, uint64_t off, uint64_t len, uint32_t bs)
{
	uint64_t end = off + len;
	unsigned partial = 0;
	uint64_t whole = 0;

	check(p->start % bs == 0 && p->end % bs == 0);
	check(p->start <= off && off - p->start < bs);
	check(p->end >= end && p->end - end < bs);
	check(p->inner_start % bs == 0 && p->inner_end % bs == 0);
	check(p->start <= p->inner_start && p->inner_start <= p->inner_end &&
	      p->inner_end <= p->end);
	for (uint64_t b = p->start; b < p->end; b += bs) {
		if (b >= off && b + bs <= end) {
			check(b >= p->inner_start && b + bs <= p->inner_end);
			whole++;
			continue;
		}
		partial++;
		check((b == p->start && p->head_partial) ||
		      (b == p->end - bs && b != p->start && p->tail_partial));
	}
	check(whole * bs == p->inner_end - p->inner_start);
	check(partial == rmw_edge_reads(p));
	if (p->head_partial && p->tail_partial)
		check(p->end - p->start >= 2 * (uint64_t)bs);
}

/* The span moved in volume I/Os as fuse/io.c's pump cuts it. */
static void move_span(const struct rmw_plan *p, uint64_t cmax, uint32_t bs, bool write)
{
	uint64_t pos = p->start;

	check(cmax % bs == 0 && cmax >= bs);
	while (pos < p->end) {
		uint64_t n = p->end - pos;
		if (n > cmax)
			n = cmax;
		check(pos % bs == 0 && n % bs == 0 && n > 0);
		if (write)
			memcpy(disk + pos, span + (pos - p->start), n);
		else
			memcpy(span + (pos - p->start), disk + pos, n);
		pos += n;
	}
	check(pos == p->end);
}

static void read_edges(const struct rmw_plan *p, uint32_t bs)
{
	memset(edge, 0x5a, sizeof(edge));
	if (p->head_partial)
		memcpy(edge, disk + p->start, bs);
	if (p->tail_partial)
		memcpy(edge + bs, disk + p->end - bs, bs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	uint32_t bs = 1u << (data[0] % 13); /* 1 B to 4 KiB */
	uint64_t max_io = (uint64_t)data[1] * 97 + data[2];
	uint64_t cmax = rmw_chunk_max(max_io, bs);
	uint8_t fill = 1;

	check(cmax % bs == 0 && cmax >= bs && (max_io < bs || cmax <= max_io));
	if (!pattern[1])
		for (size_t i = 0; i < DISK; i++)
			pattern[i] = (uint8_t)(i * 7 + (i >> 8));
	memcpy(disk, pattern, DISK);
	memcpy(ref, pattern, DISK);
	/* At most 8 operations: longer inputs add little but time. */
	for (size_t i = 3; i + 5 <= size && i < 3 + 8 * 5; i += 5) {
		uint8_t kind = data[i] % 3;
		uint64_t off = ((uint64_t)data[i + 1] << 8 | data[i + 2]) % DISK;
		uint64_t len = (uint64_t)data[i + 3] << 8 | data[i + 4];
		struct rmw_plan p;

		if (kind == 1 && (data[i] & 0x80))
			len &= 0x3f; /* short writes, where the edges matter most */
		if (!len)
			len = 1;
		if (len > DISK - off)
			len = DISK - off;
		rmw_plan(off, len, bs, &p);
		check_plan(&p, off, len, bs);
		if (kind == 0) {
			move_span(&p, cmax, bs, false);
			check(!memcmp(span + (off - p.start), ref + off, len));
			continue;
		}
		read_edges(&p, bs);
		if (kind == 1) {
			memset(span, 0xa5 ^ fill, p.end - p.start);
			for (uint64_t k = 0; k < len; k++)
				span[off - p.start + k] = ref[off + k] = (uint8_t)(fill + k);
			fill += 13;
			rmw_merge(&p, off, len, bs, span, edge);
			move_span(&p, cmax, bs, true);
		} else {
			rmw_zero_edges(&p, off, len, bs, edge);
			if (p.head_partial)
				memcpy(disk + p.start, edge, bs);
			if (p.tail_partial)
				memcpy(disk + p.end - bs, edge + bs, bs);
			memset(disk + p.inner_start, 0, p.inner_end - p.inner_start);
			memset(ref + off, 0, len);
		}
		check(!memcmp(disk, ref, DISK));
	}
	return 0;
}
