/* The exporters' request pools claim what the queue pool claims
 * (test_mpath_invariants.c): a slot is on exactly one list, and the debug
 * builds (ASan, fuzz: -DNVMF_DEBUG_INVARIANTS) abort on a put of a slot
 * that is already free or still queued for a reply.  The abort cases run
 * (forked, SIGABRT expected) only where the checks are compiled in; every
 * build checks that the legal sequence keeps the pool whole. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>

#include "gateway/base/invariant.h"
#include "gateway/base/list.h"
#include "nbd/internal.h"

static struct nbd_conn *c;

static void conn_setup(void)
{
	c = nbd_conn_alloc(-1, "unit");
	ck_assert_ptr_nonnull(c);
}

static void conn_teardown(void)
{
	nbd_conn_free_unstarted(c);
	c = NULL;
}

static struct nbd_req *slot_get(void)
{
	struct list_node *n = list_pop(&c->free);
	ck_assert_ptr_nonnull(n);
	return container_of(n, struct nbd_req, link);
}

START_TEST(nbd_slots_legal)
{
	/* Taken and put back many times over: the pool stays whole, LIFO. */
	for (unsigned round = 0; round < 3 * NBD_MAX_INFLIGHT; round++) {
		struct nbd_req *a = slot_get(), *b = slot_get();
		nbd_req_put(c, b);
		nbd_req_put(c, a);
		ck_assert_ptr_eq(slot_get(), a);
		nbd_req_put(c, a);
	}
	ck_assert_uint_eq(list_len(&c->free), NBD_MAX_INFLIGHT);
}
END_TEST

START_TEST(nbd_double_put_aborts)
{
	struct nbd_req *q = slot_get();

	nbd_req_put(c, q);
	nbd_req_put(c, q); /* aborts in the debug build */
}
END_TEST

START_TEST(nbd_put_while_queued_aborts)
{
	struct nbd_req *q = slot_get();

	/* Queued for its reply (on replyq), then put as if done. */
	list_add_tail(&c->replyq, &q->link);
	nbd_req_put(c, q); /* aborts in the debug build */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pool invariants");
	TCase *tc = tcase_create("nbd slots");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, conn_setup, conn_teardown);
	tcase_add_test(tc, nbd_slots_legal);
#if NVMF_INVARIANTS
	tcase_add_test_raise_signal(tc, nbd_double_put_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, nbd_put_while_queued_aborts, SIGABRT);
#else
	(void)nbd_double_put_aborts;
	(void)nbd_put_while_queued_aborts;
#endif
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
