/* The pure logic under the FUSE file I/O path, kept apart so that it is
 * unit-tested without a mount: which blocks of a byte range need a
 * read-modify-write, the block-range locks that order overlapping writes,
 * and the volume error to errno table. */
#ifndef GW_FUSE_RMW_H
#define GW_FUSE_RMW_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/base/list.h"

/* How the byte range [off, off + len) (len > 0) sits on blocks of bs. */
struct rmw_plan {
	uint64_t start, end; /* the block-aligned span that covers the range */
	/* The first block is only partly covered (read it before writing).
	 * A range inside one block sets only this. */
	bool head_partial;
	/* The last block is only partly covered and is not the first. */
	bool tail_partial;
	/* Blocks wholly covered: [inner_start, inner_end), may be empty. */
	uint64_t inner_start, inner_end;
};

void rmw_plan(uint64_t off, uint64_t len, uint32_t bs, struct rmw_plan *p);
static inline unsigned rmw_edge_reads(const struct rmw_plan *p)
{
	return (unsigned)p->head_partial + (unsigned)p->tail_partial;
}

/* A write's span buffer (p->end - p->start bytes) holds the caller's
 * bytes at off - p->start; edge holds the head block then the tail block
 * as read (bs bytes each, where the plan asks for them).  Fills in the
 * bytes of the span outside [off, off + len) from the edges. */
void rmw_merge(const struct rmw_plan *p, uint64_t off, uint64_t len, uint32_t bs, uint8_t *span,
	       const uint8_t *edge);
/* Zeroing [off, off + len): clears the range's bytes in the edge blocks
 * as read (head at edge, tail at edge + bs); the caller writes them back
 * and zeroes [inner_start, inner_end) on the volume. */
void rmw_zero_edges(const struct rmw_plan *p, uint64_t off, uint64_t len, uint32_t bs,
		    uint8_t *edge);
/* The longest volume I/O one request is cut into: max_io rounded down to
 * whole blocks, at least one block. */
uint64_t rmw_chunk_max(uint64_t max_io, uint32_t bs);

/* Exclusive locks on byte ranges, granted in arrival order: a lock waits
 * while any earlier lock (granted or waiting) overlaps it, so overlapping
 * writers are serialized FIFO and disjoint ones never wait. */
struct range_lock;
typedef void (*range_grant_fn)(struct range_lock *l);

struct range_lock {
	struct list_node link;
	uint64_t start, end;
	bool granted;
	range_grant_fn grant; /* called from range_unlock when granted late */
};

struct range_locks {
	struct list_node list; /* arrival order */
	unsigned waiting;
};

void range_locks_init(struct range_locks *ls);
/* true: granted now; false: grant(l) runs later from a range_unlock. */
bool range_lock(struct range_locks *ls, struct range_lock *l, uint64_t start, uint64_t end,
		range_grant_fn grant);
void range_unlock(struct range_locks *ls, struct range_lock *l);

/* A volume error (-errno, 0) as the positive errno a FUSE reply carries:
 * what an application can act on (ENOSPC, EROFS, EOPNOTSUPP, ENOMEM) is
 * kept, transport and protocol trouble becomes EIO. */
int rmw_errno(int vol_err);

#endif
