/* The FUSE export's I/O planning: which edge blocks of an unaligned range
 * need a read-modify-write, the block-range locks that serialize
 * overlapping writes, and the errno table. */
#include "fuse/rmw.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>

/* The plan against a block-by-block model of the same range. */
static void check_plan(uint64_t off, uint64_t len, uint32_t bs)
{
	struct rmw_plan p;
	uint64_t end = off + len;
	uint64_t first = off / bs, last = (end - 1) / bs;
	uint64_t whole_lo = UINT64_MAX, whole_hi = 0;

	rmw_plan(off, len, bs, &p);
	ck_assert_uint_eq(p.start, first * bs);
	ck_assert_uint_eq(p.end, (last + 1) * bs);
	for (uint64_t b = first; b <= last; b++) {
		bool whole = b * bs >= off && (b + 1) * bs <= end;
		if (whole) {
			if (whole_lo == UINT64_MAX)
				whole_lo = b;
			whole_hi = b + 1;
		}
		if (b == first)
			ck_assert_msg(p.head_partial == !whole, "off %llu len %llu bs %u head",
				      (unsigned long long)off, (unsigned long long)len, bs);
		if (b == last && last != first)
			ck_assert_msg(p.tail_partial == !whole, "off %llu len %llu bs %u tail",
				      (unsigned long long)off, (unsigned long long)len, bs);
	}
	if (last == first)
		ck_assert(!p.tail_partial);
	if (whole_lo == UINT64_MAX) {
		ck_assert_uint_eq(p.inner_start, p.inner_end);
	} else {
		ck_assert_uint_eq(p.inner_start, whole_lo * bs);
		ck_assert_uint_eq(p.inner_end, whole_hi * bs);
	}
	/* Every byte of the span is either the caller's, or in an edge
	 * block that is read first. */
	ck_assert(rmw_edge_reads(&p) <= 2);
	if (off % bs == 0 && end % bs == 0)
		ck_assert_uint_eq(rmw_edge_reads(&p), 0);
}

START_TEST(plan_named_cases)
{
	struct rmw_plan p;

	/* aligned: no reads */
	rmw_plan(4096, 8192, 4096, &p);
	ck_assert(!p.head_partial && !p.tail_partial);
	ck_assert_uint_eq(p.inner_start, 4096);
	ck_assert_uint_eq(p.inner_end, 12288);
	/* head only */
	rmw_plan(100, 4096 * 2 - 100, 4096, &p);
	ck_assert(p.head_partial && !p.tail_partial);
	ck_assert_uint_eq(p.start, 0);
	ck_assert_uint_eq(p.end, 8192);
	ck_assert_uint_eq(p.inner_start, 4096);
	ck_assert_uint_eq(p.inner_end, 8192);
	/* tail only */
	rmw_plan(512, 1000, 512, &p);
	ck_assert(!p.head_partial && p.tail_partial);
	ck_assert_uint_eq(p.end, 1536);
	ck_assert_uint_eq(p.inner_start, 512);
	ck_assert_uint_eq(p.inner_end, 1024);
	/* head and tail in adjacent blocks, nothing whole */
	rmw_plan(4000, 200, 4096, &p);
	ck_assert(p.head_partial && p.tail_partial);
	ck_assert_uint_eq(p.start, 0);
	ck_assert_uint_eq(p.end, 8192);
	ck_assert_uint_eq(p.inner_start, p.inner_end);
	ck_assert_uint_eq(rmw_edge_reads(&p), 2);
	/* head, whole blocks, tail */
	rmw_plan(10, 3 * 512, 512, &p);
	ck_assert(p.head_partial && p.tail_partial);
	ck_assert_uint_eq(p.inner_start, 512);
	ck_assert_uint_eq(p.inner_end, 1536);
	/* inside one block: one read */
	rmw_plan(4097, 10, 4096, &p);
	ck_assert(p.head_partial && !p.tail_partial);
	ck_assert_uint_eq(p.start, 4096);
	ck_assert_uint_eq(p.end, 8192);
	ck_assert_uint_eq(rmw_edge_reads(&p), 1);
	/* the start of a block, ending inside it */
	rmw_plan(8192, 1, 4096, &p);
	ck_assert(p.head_partial && !p.tail_partial);
	ck_assert_uint_eq(rmw_edge_reads(&p), 1);
	/* ending at the end of a block, starting inside it */
	rmw_plan(511, 1, 512, &p);
	ck_assert(p.head_partial && !p.tail_partial);
	ck_assert_uint_eq(p.start, 0);
	ck_assert_uint_eq(p.end, 512);
	/* exactly one whole block */
	rmw_plan(512, 512, 512, &p);
	ck_assert(!p.head_partial && !p.tail_partial);
}
END_TEST

START_TEST(plan_exhaustive)
{
	static const uint32_t sizes[] = { 512, 4096 };
	uint32_t bs = sizes[_i];

	/* Every offset in the first three blocks, lengths up to four blocks
	 * around the block boundaries that matter. */
	for (uint64_t off = 0; off < 3 * bs; off += (off % bs < 3 || off % bs > bs - 4) ? 1 : 61)
		for (uint64_t len = 1; len <= 4 * bs; len += (len % bs < 3 || len % bs > bs - 4) ? 1 : 97)
			check_plan(off + (uint64_t)1000 * bs, len, bs);
}
END_TEST

/* --- range locks --- */

static int nr_order;

static void record(struct range_lock *l)
{
	ck_assert(l->granted);
	nr_order++;
}

START_TEST(lock_disjoint_never_waits)
{
	struct range_locks ls;
	struct range_lock a, b, c;

	range_locks_init(&ls);
	ck_assert(range_lock(&ls, &a, 0, 4096, record));
	ck_assert(range_lock(&ls, &b, 4096, 8192, record)); /* adjacent is not overlap */
	ck_assert(range_lock(&ls, &c, 65536, 65536 + 4096, record));
	range_unlock(&ls, &b);
	range_unlock(&ls, &a);
	range_unlock(&ls, &c);
	ck_assert(list_empty(&ls.list));
	ck_assert_uint_eq(ls.waiting, 0);
}
END_TEST

START_TEST(lock_overlap_fifo)
{
	struct range_locks ls;
	struct range_lock a, b, c, d, e;

	nr_order = 0;
	range_locks_init(&ls);
	/* A holds [0,8k); B overlaps A; C overlaps only B (a waiter), so it
	 * queues behind B rather than overtaking it; D is disjoint. */
	ck_assert(range_lock(&ls, &a, 0, 8192, record));
	ck_assert(!range_lock(&ls, &b, 4096, 12288, record));
	ck_assert(!range_lock(&ls, &c, 10240, 20480, record));
	ck_assert(range_lock(&ls, &d, 1 << 20, (1 << 20) + 4096, record));
	ck_assert_uint_eq(ls.waiting, 2);
	/* E overlaps A only; it waits for A, and is granted with B. */
	ck_assert(!range_lock(&ls, &e, 0, 512, record));

	range_unlock(&ls, &a);
	/* B and E are granted (they do not overlap each other), C waits for B. */
	ck_assert(b.granted);
	ck_assert(e.granted);
	ck_assert(!c.granted);
	ck_assert_int_eq(nr_order, 2);
	range_unlock(&ls, &e);
	ck_assert(!c.granted);
	range_unlock(&ls, &b);
	ck_assert(c.granted);
	ck_assert_int_eq(nr_order, 3);
	range_unlock(&ls, &c);
	range_unlock(&ls, &d);
	ck_assert(list_empty(&ls.list));
	ck_assert_uint_eq(ls.waiting, 0);
}
END_TEST

/* The grant order among waiters of one range is their arrival order. */
static int chain_seen[8], chain_n;
static struct range_lock chain[8];

static void chain_grant(struct range_lock *l)
{
	chain_seen[chain_n++] = (int)(l - chain);
}

START_TEST(lock_waiters_in_arrival_order)
{
	struct range_locks ls;

	range_locks_init(&ls);
	chain_n = 0;
	ck_assert(range_lock(&ls, &chain[0], 0, 4096, chain_grant));
	for (int i = 1; i < 8; i++)
		ck_assert(!range_lock(&ls, &chain[i], (uint64_t)(i % 2) * 100, 4096, chain_grant));
	for (int i = 0; i < 7; i++) {
		range_unlock(&ls, &chain[i]);
		ck_assert_int_eq(chain_n, i + 1);
		ck_assert_int_eq(chain_seen[i], i + 1);
		for (int j = i + 2; j < 8; j++)
			ck_assert(!chain[j].granted);
	}
	range_unlock(&ls, &chain[7]);
	ck_assert(list_empty(&ls.list));
}
END_TEST

/* A grant callback that fails at once and unlocks: the next waiter still
 * gets its grant exactly once. */
static struct range_locks *reent_ls;
static int reent_calls[3];
static struct range_lock reent[3];

static void reent_grant(struct range_lock *l)
{
	int i = (int)(l - reent);

	reent_calls[i]++;
	if (i == 1)
		range_unlock(reent_ls, l);
}

START_TEST(lock_reentrant_unlock)
{
	struct range_locks ls;

	range_locks_init(&ls);
	reent_ls = &ls;
	ck_assert(range_lock(&ls, &reent[0], 0, 4096, reent_grant));
	ck_assert(!range_lock(&ls, &reent[1], 0, 4096, reent_grant));
	ck_assert(!range_lock(&ls, &reent[2], 0, 4096, reent_grant));
	range_unlock(&ls, &reent[0]);
	ck_assert_int_eq(reent_calls[0], 0); /* granted at once: no callback */
	ck_assert_int_eq(reent_calls[1], 1);
	ck_assert_int_eq(reent_calls[2], 1);
	ck_assert(reent[2].granted);
	range_unlock(&ls, &reent[2]);
	ck_assert(list_empty(&ls.list));
	ck_assert_uint_eq(ls.waiting, 0);
}
END_TEST

/* Random locks against a model: a granted lock never overlaps another
 * granted one, and a lock with no earlier overlapping lock is granted. */
START_TEST(lock_random_model)
{
	struct range_locks ls;
	struct range_lock l[64];
	bool held[64] = { 0 };
	uint64_t x = 0x12345678;

	range_locks_init(&ls);
	for (int step = 0; step < 20000; step++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int i = (int)(x % 64);
		if (held[i]) {
			range_unlock(&ls, &l[i]);
			held[i] = false;
		} else {
			uint64_t s = (x >> 8) % 64 * 512, n = ((x >> 20) % 8 + 1) * 512;
			range_lock(&ls, &l[i], s, s + n, NULL);
			held[i] = true;
		}
		for (int a = 0; a < 64; a++) {
			if (!held[a] || !l[a].granted)
				continue;
			for (int b = a + 1; b < 64; b++)
				if (held[b] && l[b].granted)
					ck_assert(!(l[a].start < l[b].end && l[b].start < l[a].end));
		}
		/* The head of the list is always granted. */
		if (!list_empty(&ls.list))
			ck_assert(container_of(ls.list.next, struct range_lock, link)->granted);
	}
}
END_TEST

START_TEST(errno_table)
{
	ck_assert_int_eq(rmw_errno(0), 0);
	ck_assert_int_eq(rmw_errno(-EIO), EIO);
	ck_assert_int_eq(rmw_errno(-ENOSPC), ENOSPC);
	ck_assert_int_eq(rmw_errno(-EROFS), EROFS);
	ck_assert_int_eq(rmw_errno(-EPERM), EROFS); /* the volume's read-only */
	/* Access Denied fails reads too: not a read-only file system. */
	ck_assert_int_eq(rmw_errno(-EACCES), EACCES);
	ck_assert_int_eq(rmw_errno(-ENOMEM), ENOMEM);
	ck_assert_int_eq(rmw_errno(-EOPNOTSUPP), EOPNOTSUPP);
	ck_assert_int_eq(rmw_errno(-ETIMEDOUT), EIO);
	ck_assert_int_eq(rmw_errno(-ECONNRESET), EIO);
	ck_assert_int_eq(rmw_errno(-ENOTCONN), EIO);
	ck_assert_int_eq(rmw_errno(-ECANCELED), EIO);
	ck_assert_int_eq(rmw_errno(-EILSEQ), EIO);
	ck_assert_int_eq(rmw_errno(-ENODATA), EIO);
	ck_assert_int_eq(rmw_errno(-EINVAL), EIO); /* our bug, not the caller's */
	ck_assert_int_eq(rmw_errno(-EAGAIN), EIO);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuse_rmw");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, plan_named_cases);
	tcase_add_loop_test(tc, plan_exhaustive, 0, 2);
	tcase_add_test(tc, lock_disjoint_never_waits);
	tcase_add_test(tc, lock_overlap_fifo);
	tcase_add_test(tc, lock_waiters_in_arrival_order);
	tcase_add_test(tc, lock_reentrant_unlock);
	tcase_add_test(tc, lock_random_model);
	tcase_add_test(tc, errno_table);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
