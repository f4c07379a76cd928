/* The invariants the data path claims, and that the debug builds (ASan,
 * fuzz: -DNVMF_DEBUG_INVARIANTS) enforce by aborting: a request of a
 * queue's pool is put back once, completed once; a vol_io completes once.
 * The abort cases run (forked, SIGABRT expected) only where the checks are
 * compiled in, i.e. in build-asan; the normal build checks that the legal
 * sequences still work. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "transports/transport.h"

static int done_calls;

static void req_done(struct nvmf_req *req, int err)
{
	(void)req;
	(void)err;
	done_calls++;
}

/* A queue reduced to what the pool functions touch, one request. */
static struct nvmf_queue q;
static struct nvmf_req *req;

static void pool_setup(void)
{
	memset(&q, 0, sizeof(q));
	list_init(&q.free_reqs);
	list_init(&q.in_flight);
	list_init(&q.waiters);
	req = calloc(1, sizeof(*req));
	ck_assert_ptr_nonnull(req);
	req->q = &q;
	list_init(&req->link);
	list_add_tail(&q.free_reqs, &req->link);
	q.nr_free = 1; /* as nvmf_queue_init counts them */
	done_calls = 0;
}

/* get, put; then as submitted and completed once. */
static void legal_sequence(void)
{
	struct nvmf_req *r = nvmf_req_get(&q);
	ck_assert_ptr_eq(r, req);
	nvmf_req_put(r);
	ck_assert_int_eq(list_len(&q.free_reqs), 1);
	r = nvmf_req_get(&q);
	/* What nvmf_req_submit does before the transport sees it. */
	r->in_flight = true;
	list_add_tail(&q.in_flight, &r->link);
	q.nr_in_flight = 1;
	r->done = req_done;
	struct nvme_cqe cqe = { 0 };
	nvmf_req_complete(r, &cqe);
	ck_assert_int_eq(done_calls, 1);
	ck_assert(!r->in_flight);
	nvmf_req_put(r);
}

START_TEST(pool_legal)
{
	pool_setup();
	legal_sequence();
	ck_assert_int_eq(list_len(&q.free_reqs), 1);
	free(req);
}
END_TEST

START_TEST(pool_double_put_aborts)
{
	pool_setup();
	struct nvmf_req *r = nvmf_req_get(&q);
	nvmf_req_put(r);
	nvmf_req_put(r); /* aborts in the debug build */
}
END_TEST

START_TEST(pool_double_completion_aborts)
{
	pool_setup();
	legal_sequence();
	struct nvme_cqe cqe = { 0 };
	nvmf_req_complete(req, &cqe); /* not in flight: aborts */
}
END_TEST

START_TEST(pool_put_in_flight_aborts)
{
	pool_setup();
	struct nvmf_req *r = nvmf_req_get(&q);
	r->in_flight = true;
	list_add_tail(&q.in_flight, &r->link);
	nvmf_req_put(r);
}
END_TEST

/* A slot's CID is never its previous use's, however many takes of other
 * slots came between (with one generation count per queue, 15 other takes
 * between two uses gave the slot the same CID again: a late response or
 * an Abort meant for the first use hit the second); and a slot whose
 * command had an Abort sent is reused last. */
START_TEST(pool_cid_per_slot)
{
	enum { N = 4 };
	struct nvmf_req *rs = calloc(N, sizeof(*rs));
	ck_assert_ptr_nonnull(rs);
	memset(&q, 0, sizeof(q));
	list_init(&q.free_reqs);
	list_init(&q.in_flight);
	list_init(&q.waiters);
	for (unsigned i = 0; i < N; i++) {
		rs[i].q = &q;
		rs[i].cid = (uint16_t)i;
		list_init(&rs[i].link);
		list_add_tail(&q.free_reqs, &rs[i].link);
	}
	q.nr_free = N;
	struct nvmf_req *a = nvmf_req_get(&q);
	uint16_t first = a->cid;
	for (unsigned k = 0; k < 64; k++) {
		/* 15 takes of another slot, then a's next use. */
		for (unsigned j = 0; j < 15; j++)
			nvmf_req_put(nvmf_req_get(&q));
		nvmf_req_put(a);
		a = nvmf_req_get(&q);
		ck_assert_ptr_eq(a, &rs[0]); /* LIFO */
		ck_assert_uint_eq(a->cid & NVMF_CID_IDX_MASK, 0);
		ck_assert_msg(a->cid != first, "use %u of slot 0 has CID 0x%04x again", k + 1, a->cid);
		first = a->cid;
	}
	a->abort_sent = true;
	nvmf_req_put(a);
	for (unsigned i = 0; i < N - 1; i++)
		ck_assert_ptr_ne(nvmf_req_get(&q), &rs[0]);
	ck_assert_ptr_eq(nvmf_req_get(&q), &rs[0]);
	free(rs);
}
END_TEST

static int vol_calls;
static void vol_cb(struct vol_io *io, int err)
{
	(void)io;
	(void)err;
	vol_calls++;
}

static struct reactor here;

static void vol_setup(struct volume **v, struct vol_io *io)
{
	ck_assert_int_eq(vol_mem_create("inv", 1 << 20, 512, VOL_CAP_FLUSH, 1, v), 0);
	memset(io, 0, sizeof(*io));
	io->op = VOL_FLUSH;
	io->cb = vol_cb;
	/* As vol_submit leaves it; the test completes it by hand. */
	io->vol = *v;
	io->origin = &here;
	io->completed = false;
	vol_calls = 0;
}

START_TEST(vol_once)
{
	struct volume *v;
	struct vol_io io;

	vol_setup(&v, &io);
	vol_complete(&here, &io, 0);
	ck_assert_int_eq(vol_calls, 1);
	vol_destroy(v);
}
END_TEST

START_TEST(vol_twice_aborts)
{
	struct volume *v;
	struct vol_io io;

	vol_setup(&v, &io);
	vol_complete(&here, &io, 0);
	vol_complete(&here, &io, 0); /* aborts in the debug build */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("invariants");
	TCase *tc = tcase_create("invariants");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, pool_legal);
	tcase_add_test(tc, pool_cid_per_slot);
	tcase_add_test(tc, vol_once);
#if NVMF_INVARIANTS
	tcase_add_test_raise_signal(tc, pool_double_put_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, pool_double_completion_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, pool_put_in_flight_aborts, SIGABRT);
	tcase_add_test_raise_signal(tc, vol_twice_aborts, SIGABRT);
#else
	(void)pool_double_put_aborts;
	(void)pool_double_completion_aborts;
	(void)pool_put_in_flight_aborts;
	(void)vol_twice_aborts;
#endif
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
