/* Multipath across reactors (gateway/volume/mpath_*.c), with two reactors
 * polled by hand and paths whose queues are the production queues with a
 * fake transport that records each command and completes it when told:
 * - the FLUSH rule: a flush reaches every path holding acknowledged,
 *   unflushed writes, even when the reactor that takes it still has a
 *   snapshot in which that path is not attached (it became attached, or
 *   was added, after the snapshot this reactor applied last);
 * - a lost path is reconnected only once every reactor has dropped its
 *   queues, also when it is deleted and listed again meanwhile, and never
 *   by two attempts at once;
 * - with every slot used, a new address takes the slot of a deleted path,
 *   once nothing refers to that path any more;
 * - an I/O whose connection is lost again and again while the other path
 *   is back each time ends: a command that timed out itself counts as a
 *   retry (ETIMEDOUT after max_retries), other losses and path errors are
 *   bounded by the wait bound and the drain's deadline. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/reactor.h"
#include "transports/io.h"
#include "gateway/volume/mpath_priv.h"
#include "transports/transport.h"

#define NR_R 2

static struct reactor rs[NR_R];
static struct reactor *rps[NR_R] = { &rs[0], &rs[1] };
static struct nvme_id_ctrl idc;
static struct nvmf_ns nss[2];

static struct nvmf_req *pending[16];
static unsigned npending;
static struct sent {
	struct nvmf_queue *q;
	uint8_t opcode;
} sent[16];
static unsigned nsent;
/* Each path's fake queues, also once a reconnect has reset its ctrl. */
static struct nvmf_queue *fakeq[2];

static int fake_submit(struct nvmf_queue *q, struct nvmf_req *req)
{
	ck_assert_uint_lt(nsent, 16);
	sent[nsent].q = q;
	sent[nsent++].opcode = req->sqe.opcode;
	pending[npending++] = req;
	return 0;
}

/* The commands in flight on q come back (the queue's own completion);
 * they are no longer the test's to answer. */
static void fake_shutdown(struct nvmf_queue *q)
{
	unsigned k = 0;

	for (unsigned i = 0; i < npending; i++)
		if (pending[i]->q != q)
			pending[k++] = pending[i];
	npending = k;
	nvmf_queue_transport_quiesced(q);
}
static void fake_free(struct nvmf_queue *q) { q->tp = NULL; }

static const struct nvmf_transport_ops fake_ops = {
	.name = "fake",
	.submit = fake_submit,
	.queue_shutdown = fake_shutdown,
	.queue_free = fake_free,
};

/* Path i as a live controller would leave it: one LIVE queue on each
 * reactor, namespace 1 optimized, a volatile write cache. */
static void path_live(struct mp_target *t, unsigned i)
{
	struct mp_path *p = &t->paths[i];
	struct nvmf_path_opts o = { .trtype = NVMF_TR_TCP, .tos = -1 };

	p->ctrl.ioq = fakeq[i] = calloc(NR_R, sizeof(*p->ctrl.ioq));
	ck_assert_ptr_nonnull(p->ctrl.ioq);
	for (unsigned k = 0; k < NR_R; k++) {
		struct nvmf_queue *q = &p->ctrl.ioq[k];
		ck_assert_int_eq(nvmf_queue_init(q, NULL, &rs[k], (uint16_t)(k + 1), 32, &o), 0);
		q->ops->queue_free(q);
		q->ops = &fake_ops;
		nvmf_queue_set_state(q, NVMF_Q_CONNECTING);
		nvmf_queue_set_state(q, NVMF_Q_FABRIC_CONNECT);
		nvmf_queue_set_state(q, NVMF_Q_LIVE);
	}
	p->ctrl.nr_ioq = NR_R;
	p->ctrl.id = &idc;
	p->ctrl.max_xfer = 128 * 1024;
	nss[i] = (struct nvmf_ns){ .nsid = 1, .nsze = 2048, .lba_shift = 9, .lba_size = 512,
				   .anagrpid = 1, .ana_state = NVME_ANA_OPTIMIZED };
	p->ctrl.ns = &nss[i];
	p->ctrl.nr_ns = 1;
	p->attached = true;
}

static void path_free(struct mp_target *t, unsigned i)
{
	for (unsigned k = 0; fakeq[i] && k < NR_R; k++)
		nvmf_queue_free(&fakeq[i][k]);
	free(fakeq[i]);
	fakeq[i] = NULL;
	if (!t->paths[i].started)
		t->paths[i].ctrl.ioq = NULL;
}

static unsigned cb_count;
static int cb_err;

static void io_cb(struct vol_io *io, int err)
{
	(void)io;
	cb_count++;
	cb_err = err;
}

static void shut_cb(struct mp_target *t, int err, void *arg)
{
	(void)t;
	(void)err;
	*(int *)arg = 1;
}

static struct mp_target *target_new(int ctrl_loss_tmo_s)
{
	struct mp_target_opts o;
	struct mp_target *t;

	for (unsigned k = 0; k < NR_R; k++)
		ck_assert_int_eq(reactor_init(&rs[k], k, 64), 0);
	memset(&idc, 0, sizeof(idc));
	idc.vwc = NVME_CTRL_VWC_PRESENT;
	memset(&o, 0, sizeof(o));
	snprintf(o.ctrl.name, sizeof(o.ctrl.name), "t");
	o.ctrl.nr_io_queues = NR_R;
	o.nr_paths = 2;
	o.reconnect_delay_ms = 1000;
	o.ctrl_loss_tmo_s = ctrl_loss_tmo_s;
	o.fast_io_fail_tmo_s = 30; /* waits are bounded, by far not reached */
	ck_assert_int_eq(mp_target_create(&o, rps, NR_R, &t), 0);
	npending = nsent = cb_count = 0;
	return t;
}

static void target_free(struct mp_target *t)
{
	for (unsigned i = 0; i < 2; i++) {
		t->paths[i].attached = false;
		if (!t->paths[i].started) {
			/* The test's own tables; a started one is the ctrl's. */
			t->paths[i].ctrl.ns = NULL;
			t->paths[i].ctrl.nr_ns = 0;
		}
		path_free(t, i);
	}
	mp_target_free(t);
	for (unsigned k = 0; k < NR_R; k++)
		reactor_fini(&rs[k]);
}

static void poll_all(unsigned k)
{
	for (int n = 0; n < 4; n++)
		reactor_poll(&rs[k], 0);
}

static void complete_pending(void)
{
	while (npending) {
		struct nvmf_req *req = pending[0];
		struct nvme_cqe cqe = { .cid = req->cid };
		memmove(pending, pending + 1, --npending * sizeof(pending[0]));
		nvmf_req_complete(req, &cqe);
	}
}

/* Path 1 became attached: reactor 0 has the snapshot that shows it and
 * acknowledged a write on it; reactor 1 still has the older one.  A flush
 * taken by reactor 1 waits for its snapshot, then flushes path 1; never a
 * success that skipped it. */
START_TEST(flush_waits_for_stale_snapshot)
{
	struct mp_target *t = target_new(-1);
	struct volume *vol;
	struct vol_io io;

	path_live(t, 0);
	ck_assert_int_eq(vol_mp_create("v", t, 1, false, &vol), 0);
	ck_assert(vol->caps & VOL_CAP_FLUSH);
	struct vol_mp *n = vol->priv;
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	ck_assert(t->views[1].cur && !t->views[1].cur->p[1].attached);

	/* Path 1 attaches (path_ready's broadcast); reactor 0 applies it and
	 * a write it carried on path 1 is acknowledged there. */
	path_live(t, 1);
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	ck_assert(t->views[0].cur->p[1].attached);
	ck_assert(!t->views[1].cur->p[1].attached);
	STORE(n->acked[0].n[1], 1);

	/* The flush reaches reactor 1 before its new snapshot does. */
	memset(&io, 0, sizeof(io));
	io.op = VOL_FLUSH;
	io.cb = io_cb;
	ck_assert_int_eq(vol_submit(vol, &rs[1], &io), 0);
	ck_assert_uint_eq(cb_count, 0);
	ck_assert_uint_eq(nsent, 0);

	/* The snapshot arrives: the flush goes to path 1 (its queue on
	 * reactor 1), and is answered only once that path has flushed. */
	poll_all(1);
	ck_assert_msg(cb_count == 0, "the flush was answered (err %d) without flushing path 1",
		      cb_err);
	ck_assert(t->views[1].cur->p[1].attached);
	ck_assert_uint_eq(nsent, 1);
	ck_assert_ptr_eq(sent[0].q, &t->paths[1].ctrl.ioq[1]);
	ck_assert_uint_eq(sent[0].opcode, NVME_CMD_FLUSH);
	complete_pending();
	poll_all(1);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	ck_assert_uint_eq(LOAD(n->vp[1].flushed_upto), 1);

	/* Nothing owed now: the next flush is answered at once. */
	cb_count = 0;
	memset(&io, 0, sizeof(io));
	io.op = VOL_FLUSH;
	io.cb = io_cb;
	ck_assert_int_eq(vol_submit(vol, &rs[1], &io), 0);
	poll_all(1);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	ck_assert_uint_eq(nsent, 1);

	vol_destroy(vol);
	target_free(t);
}
END_TEST

/* nsid 1 is detached from path 1's controller only (path 0 still shows
 * it), after path 1 acknowledged a write for it; nsid 2 keeps path 1 in
 * the same ANA group, so ANA alone says path 1 is usable.  Path 1 is left
 * out for the volume, and the flush it is owed goes through path 0.  It
 * went to path 1, which answers Invalid Namespace: every flush failed. */
START_TEST(flush_of_path_left_out)
{
	static struct nvmf_ns tbl[2][2];
	struct mp_target *t = target_new(-1);
	struct volume *vol;
	struct vol_io io;

	for (unsigned i = 0; i < 2; i++) {
		path_live(t, i);
		tbl[i][0] = nss[i];
		tbl[i][1] = nss[i];
		tbl[i][1].nsid = 2;
		t->paths[i].ctrl.ns = tbl[i];
		t->paths[i].ctrl.nr_ns = 2;
	}
	ck_assert_int_eq(vol_mp_create("v", t, 1, false, &vol), 0);
	struct vol_mp *n = vol->priv;
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	STORE(n->acked[0].n[1], 1);

	tbl[1][0] = tbl[1][1]; /* nsid 2 only */
	t->paths[1].ctrl.nr_ns = 1;
	t->paths[1].ctrl.ns_events++;
	mp_check_identity(&t->paths[1], MP_ID_EVENT);
	ck_assert(!LOAD(n->failed));
	ck_assert(LOAD(n->bad_path[1]));
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);

	memset(&io, 0, sizeof(io));
	io.op = VOL_FLUSH;
	io.cb = io_cb;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	poll_all(0);
	ck_assert_uint_eq(nsent, 1);
	ck_assert_uint_eq(sent[0].opcode, NVME_CMD_FLUSH);
	ck_assert_msg(sent[0].q == &t->paths[0].ctrl.ioq[0],
		      "the flush owed by path 1 went to the path that no longer shows nsid 1");
	complete_pending();
	poll_all(0);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	ck_assert_uint_eq(LOAD(n->vp[1].flushed_upto), 1);

	vol_destroy(vol);
	t->paths[0].ctrl.ns = &nss[0];
	t->paths[1].ctrl.ns = &nss[1];
	target_free(t);
}
END_TEST

/* Path 0 is lost; reactor 0 has applied the snapshot without it, reactor
 * 1 not yet (it may still use the old queues).  ctrl_loss_tmo 0 deletes
 * the path meanwhile, and discovery lists it again: the reconnect, which
 * frees the old queues, waits for reactor 1; it then runs at once. */
START_TEST(relisted_while_detaching)
{
	struct mp_target *t = target_new(0);
	struct mp_path *p = &t->paths[0];
	struct mp_path_info pi[2];

	path_live(t, 0);
	p->ctrl.owner = p;
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	ck_assert(t->views[1].cur->p[0].attached);

	mp_path_lost(&p->ctrl, -ECONNRESET);
	poll_all(0); /* its snapshot, and ctrl_loss_tmo (0 s) deletes it */
	ck_assert(!t->views[0].cur->p[0].attached);
	ck_assert(t->views[1].cur->p[0].attached);
	ck_assert(p->deleted);
	ck_assert(!p->reconnect_timer.armed);

	/* Its next ctrl_loss_tmo must not end the test's reconnect early. */
	t->o.ctrl_loss_tmo_s = 60;
	mp_target_path_listed(t, 0, true);
	ck_assert(!p->deleted);
	ck_assert_msg(!p->reconnect_timer.armed,
		      "a reconnect was scheduled while reactor 1 still holds the old queues");
	/* A reconnect timer firing now (one armed before the loss, say)
	 * starts nothing either. */
	unsigned tries = p->reconnects;
	mp_reconnect_fire(&p->reconnect_timer);
	ck_assert_uint_eq(p->reconnects, tries);
	ck_assert(!p->connecting);

	/* Reactor 1 drops the queues: the reconnect runs, at once (the
	 * path has no address: the attempt begins, then fails). */
	poll_all(1);
	ck_assert(!t->views[1].cur->p[0].attached);
	for (int n = 0; n < 8 && p->reconnects == tries; n++)
		reactor_poll(&rs[0], 0);
	ck_assert(!p->detaching);
	ck_assert_uint_eq(p->reconnects, tries + 1);
	ck_assert(p->started && p->connecting);
	mp_target_paths(t, pi, 2);
	ck_assert_int_ne(pi[0].state, NVMF_CTRL_DEAD);

	/* While it runs, a second one does not start. */
	mp_reconnect_fire(&p->reconnect_timer);
	ck_assert_uint_eq(p->reconnects, tries + 1);

	int done = 0;
	mp_target_shutdown(t, shut_cb, &done);
	for (int n = 0; n < 200 && !done; n++) {
		reactor_poll(&rs[0], NSEC_PER_MSEC);
		reactor_poll(&rs[1], 0);
	}
	ck_assert(done);
	target_free(t);
}
END_TEST

static struct nvmf_path_opts path_at(unsigned port)
{
	struct nvmf_path_opts po;

	memset(&po, 0, sizeof(po));
	po.trtype = NVMF_TR_TCP;
	po.tos = -1;
	snprintf(po.traddr, sizeof(po.traddr), "127.0.0.1");
	snprintf(po.trsvcid, sizeof(po.trsvcid), "%u", port);
	return po;
}

/* Path 0 is lost, its reconnect attempt starts a controller (and fails:
 * the path has no address), then ctrl_loss_tmo deletes it.  The target
 * gets its other six paths; a ninth address takes slot 0 only once no
 * reactor and no request refers to path 0, with fresh counters. */
START_TEST(deleted_slot_reused)
{
	struct mp_target *t = target_new(60);
	struct mp_path *p = &t->paths[0];
	struct mp_path_info pi[MP_MAX_PATHS];

	path_live(t, 0);
	p->ctrl.owner = p;
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	mp_path_lost(&p->ctrl, -ECONNRESET);
	poll_all(0);
	poll_all(1);
	for (int n = 0; n < 8 && p->detaching; n++)
		reactor_poll(&rs[0], 0);
	ck_assert(!p->detaching);
	reactor_timer_cancel(&p->reconnect_timer);
	mp_reconnect_fire(&p->reconnect_timer); /* as its timer would */
	ck_assert(p->started && p->connecting);
	for (int n = 0; n < 200 && p->connecting; n++) {
		reactor_poll(&rs[0], NSEC_PER_MSEC);
		reactor_poll(&rs[1], 0);
	}
	ck_assert(!p->connecting);
	reactor_timer_cancel(&p->reconnect_timer);
	reactor_timer_cancel(&p->loss_timer);
	mp_loss_fire(&p->loss_timer); /* ctrl_loss_tmo is over */
	ck_assert(p->deleted && p->started);

	for (unsigned i = 2; i < MP_MAX_PATHS; i++) {
		struct nvmf_path_opts po = path_at(100 + i);
		ck_assert_int_eq(mp_target_add_path(t, &po), (int)i);
	}
	struct nvmf_path_opts nine = path_at(999), ten = path_at(1000);
	/* A reactor's request about path 0 still waits: not yet. */
	STORE(t->views[1].ana_req[0].busy, 1);
	ck_assert_int_eq(mp_target_add_path(t, &nine), -ENOSPC);
	STORE(t->views[1].ana_req[0].busy, 0);
	/* (As if) a reactor still held its queues: not yet. */
	p->detaching = true;
	ck_assert_int_eq(mp_target_add_path(t, &nine), -ENOSPC);
	p->detaching = false;

	STORE(t->views[1].st[0].writes, 5);
	ck_assert_int_eq(mp_target_add_path(t, &nine), 0);
	ck_assert_int_eq(mp_target_find_path(t, &nine), 0);
	ck_assert_uint_eq(mp_target_paths(t, pi, MP_MAX_PATHS), MP_MAX_PATHS);
	ck_assert_str_eq(pi[0].opts->trsvcid, "999");
	ck_assert_int_ne(pi[0].state, NVMF_CTRL_DEAD);
	ck_assert_uint_eq(pi[0].reconnects, 0);
	ck_assert_uint_eq(pi[0].writes, 0);
	ck_assert_uint_ne(pi[0].next_attempt_ns, 0);
	ck_assert(!p->started && !p->deleted);
	/* No deleted slot left. */
	ck_assert_int_eq(mp_target_add_path(t, &ten), -ENOSPC);

	int done = 0;
	mp_target_shutdown(t, shut_cb, &done);
	ck_assert(done);
	poll_all(0);
	poll_all(1);
	target_free(t);
}
END_TEST

/* ---- an I/O that keeps coming back from a lost connection ---- */

static char rbuf[4096];
static struct iovec riov = { rbuf, sizeof(rbuf) };

/* Two live paths, one volume, a 4 KiB read submitted on reactor 0. */
static struct mp_target *two_paths(struct volume **vol, struct vol_io *io)
{
	struct mp_target *t = target_new(-1);

	path_live(t, 0);
	path_live(t, 1);
	ck_assert_int_eq(vol_mp_create("v", t, 1, false, vol), 0);
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	memset(io, 0, sizeof(*io));
	io->op = VOL_READ;
	io->length = sizeof(rbuf);
	io->iov = &riov;
	io->iovcnt = 1;
	io->cb = io_cb;
	return t;
}

/* The path whose queue on reactor 0 carries the I/O's command, or -1. */
static int carrier(void)
{
	if (npending != 1)
		return -1;
	for (int i = 0; i < 2; i++)
		if (pending[0]->q == &fakeq[i][0])
			return i;
	return -1;
}

/* A closed queue connects again (its path is back on this reactor). */
static void queue_back(struct nvmf_queue *q)
{
	ck_assert(nvmf_queue_set_state(q, NVMF_Q_CONNECTING));
	ck_assert(nvmf_queue_set_state(q, NVMF_Q_FABRIC_CONNECT));
	ck_assert(nvmf_queue_set_state(q, NVMF_Q_LIVE));
}

static void two_paths_free(struct mp_target *t, struct volume *vol)
{
	for (int n = 0; n < 8; n++)
		poll_all(0);
	vol_destroy(vol);
	target_free(t);
}

/* nvmet never honours an Abort: a command it does not answer takes its
 * connection down at each io_timeout (here the queue closes at once: no
 * controller to send the Abort to), and the other path has reconnected
 * meanwhile.  Each such loss is a retry: with max_retries 2 the read fails
 * with ETIMEDOUT on its third, although the wait bound is forever.  It was
 * sent to the next live path without end. */
START_TEST(timed_out_is_a_retry)
{
	struct volume *vol;
	struct vol_io io;
	struct mp_target *t = two_paths(&vol, &io);
	unsigned losses = 0;

	t->o.max_retries = 2;
	t->wait_ns = MP_FOREVER; /* fast_io_fail_tmo = ctrl_loss_tmo = -1 */
	fakeq[0][0].io_timeout_ms = fakeq[1][0].io_timeout_ms = 1;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	for (unsigned round = 0; round < 40 && !cb_count; round++) {
		int was = carrier();
		ck_assert_msg(was >= 0, "round %u: the read is not in flight on one path", round);
		/* Its io_timeout passes (the queue's own timer). */
		for (int n = 0; n < 2000 && fakeq[was][0].state == NVMF_Q_LIVE; n++)
			reactor_poll(&rs[0], NSEC_PER_MSEC);
		ck_assert_int_eq(fakeq[was][0].state, NVMF_Q_DEAD);
		losses++;
		queue_back(&fakeq[was][0]);
		nsent = 0;
		poll_all(0);
	}
	ck_assert_msg(cb_count == 1, "the read still goes round after %u timeouts", losses);
	ck_assert_int_eq(cb_err, -ETIMEDOUT);
	ck_assert_uint_eq(losses, 3);
	ck_assert_uint_eq(LOAD(t->views[0].st[0].retries) + LOAD(t->views[0].st[1].retries), 2);
	two_paths_free(t, vol);
}
END_TEST

/* Connections lost for another reason (not the read's own timeout) are
 * not retries: with max_retries 0 and no wait bound, the read lives
 * through five and then succeeds. */
START_TEST(lost_not_a_retry)
{
	struct volume *vol;
	struct vol_io io;
	struct mp_target *t = two_paths(&vol, &io);

	t->wait_ns = MP_FOREVER;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	for (int k = 0; k < 5; k++) {
		int was = carrier();
		ck_assert_int_ge(was, 0);
		nvmf_queue_transport_error(&fakeq[was][0], -ECONNRESET, "test: connection reset");
		queue_back(&fakeq[was][0]);
		poll_all(0);
		ck_assert_uint_eq(cb_count, 0);
	}
	ck_assert_int_ge(carrier(), 0);
	complete_pending();
	poll_all(0);
	ck_assert_uint_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, 0);
	two_paths_free(t, vol);
}
END_TEST

/* Loses its connection every 10 ms, the other path back each time, until
 * it completes or 15 s pass on the gateway's clock; the time from the
 * first loss to its end. */
static uint64_t lose_until_done(struct mp_target *t)
{
	uint64_t first = reactor_now_ns(), end = first + 15 * NSEC_PER_SEC;

	(void)t;
	while (!cb_count && reactor_now_ns() < end) {
		int was = carrier();
		ck_assert_int_ge(was, 0);
		nvmf_queue_transport_error(&fakeq[was][0], -ECONNRESET, "test: connection reset");
		queue_back(&fakeq[was][0]);
		nsent = 0;
		reactor_poll(&rs[0], 10 * NSEC_PER_MSEC);
		poll_all(0);
	}
	return reactor_now_ns() - first;
}

/* fast_io_fail_tmo 0: the losses end at the wait bound's floor of two
 * backoffs (2 s) with EIO; the read went round for ever. */
START_TEST(lost_bounded)
{
	struct volume *vol;
	struct vol_io io;
	struct mp_target *t = two_paths(&vol, &io);

	t->wait_ns = 0;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	uint64_t took = lose_until_done(t);
	ck_assert_msg(cb_count == 1, "the read still goes round after %.1f s of losses",
		      (double)took / 1e9);
	ck_assert_int_eq(cb_err, -EIO);
	ck_assert_uint_ge(took, 2 * MP_BACKOFF_NS);
	two_paths_free(t, vol);
}
END_TEST

/* Review: the wait clock ran from the read's first return for the rest
 * of its life, so a read carried 1.2 s at a time by live paths, each time
 * lost in a reset that was not its doing, failed at the second such loss
 * with a path usable all along.  A return after a backoff or more in
 * flight starts the clock again; quick bounces still end at the bound.
 * Before: "failed after 3 slow losses". */
START_TEST(slow_losses_not_bounded)
{
	struct volume *vol;
	struct vol_io io;
	struct mp_target *t = two_paths(&vol, &io);

	t->wait_ns = 0;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	for (int k = 1; k <= 4; k++) {
		uint64_t until = reactor_now_ns() + MP_BACKOFF_NS + 200 * NSEC_PER_MSEC;
		int was = -1;
		while (reactor_now_ns() < until) {
			reactor_poll(&rs[0], 10 * NSEC_PER_MSEC);
			poll_all(0);
		}
		was = carrier();
		ck_assert_msg(cb_count == 0 && was >= 0, "failed after %d slow losses", k - 1);
		nvmf_queue_transport_error(&fakeq[was][0], -ECONNRESET, "test: connection reset");
		queue_back(&fakeq[was][0]);
		nsent = 0;
	}
	ck_assert_msg(cb_count == 0, "failed after 4 slow losses");
	/* Then quick bounces: bounded again. */
	lose_until_done(t);
	ck_assert_int_eq(cb_count, 1);
	ck_assert_int_eq(cb_err, -EIO);
	two_paths_free(t, vol);
}
END_TEST

/* The same with no wait bound, during a drain (export-remove, SIGTERM):
 * the read fails with EIO at the drain's deadline (the test's, shorter
 * than MP_DRAIN_NS); it kept the drain waiting for ever. */
START_TEST(lost_during_drain)
{
	struct volume *vol;
	struct vol_io io;
	struct mp_target *t = two_paths(&vol, &io);
	struct vol_mp *n = vol->priv;

	t->wait_ns = MP_FOREVER;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	vol_mp_drain(vol);
	ck_assert_uint_ne(LOAD(n->drain_at), 0);
	uint64_t drain = reactor_now_ns() + 300 * NSEC_PER_MSEC;
	STORE(n->drain_at, drain);
	lose_until_done(t);
	ck_assert_msg(cb_count == 1, "the read still goes round 15 s after the drain's deadline");
	ck_assert_int_eq(cb_err, -EIO);
	ck_assert_uint_ge(reactor_now_ns(), drain);
	two_paths_free(t, vol);
}
END_TEST

/* Each path answers Internal Path Error after the other's put-aside has
 * ended (a new snapshot ends it, as its backoff would): fast_io_fail_tmo 0,
 * the read fails with EIO after the floor of two backoffs; it went back
 * and forth for ever. */
START_TEST(path_errors_bounded)
{
	struct volume *vol;
	struct vol_io io;
	struct mp_target *t = two_paths(&vol, &io);
	uint64_t first = reactor_now_ns(), end = first + 15 * NSEC_PER_SEC;

	t->wait_ns = 0;
	ck_assert_int_eq(vol_submit(vol, &rs[0], &io), 0);
	while (!cb_count && reactor_now_ns() < end) {
		ck_assert_int_ge(carrier(), 0);
		struct nvmf_req *req = pending[0];
		struct nvme_cqe cqe = { .cid = req->cid,
					.status = (uint16_t)((NVME_SCT_PATH << 8 | 0x00) << 1) };
		npending = 0;
		nsent = 0;
		nvmf_req_complete(req, &cqe);
		reactor_poll(&rs[0], 10 * NSEC_PER_MSEC);
		mp_broadcast(t, NULL, NULL);
		poll_all(0);
		poll_all(1);
	}
	ck_assert_msg(cb_count == 1, "the read still goes back and forth after %.1f s",
		      (double)(reactor_now_ns() - first) / 1e9);
	ck_assert_int_eq(cb_err, -EIO);
	ck_assert_uint_ge(reactor_now_ns() - first, 2 * MP_BACKOFF_NS);
	two_paths_free(t, vol);
}
END_TEST

/* I/O that waits for a usable path is counted, by bytes, for its target
 * and the process (what the exporters bound the buffers of: a target's
 * outage must not pin the budget of the others' clients) from when it
 * parks until it is sent down a path; never twice across the retries. */
START_TEST(path_wait_counted)
{
	struct mp_target *t = target_new(-1);
	static uint8_t buf[8192];
	struct iovec iov = { buf, sizeof(buf) };
	struct volume *vol;
	struct vol_io io[2];

	struct volume *other;

	path_live(t, 0);
	ck_assert_int_eq(vol_mp_create("v", t, 1, false, &vol), 0);
	ck_assert_int_eq(vol_mp_create("w", t, 1, false, &other), 0);
	uint64_t total0 = vol_path_wait_total();
	t->paths[0].attached = false; /* lost: no usable path */
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	for (unsigned i = 0; i < 2; i++) {
		memset(&io[i], 0, sizeof(io[i]));
		io[i].op = VOL_READ;
		io[i].offset = 8192 * i;
		io[i].length = 4096 << i;
		io[i].iov = &iov;
		io[i].iovcnt = 1;
		io[i].cb = io_cb;
		ck_assert_int_eq(vol_submit(vol, &rs[i], &io[i]), 0);
	}
	poll_all(0);
	poll_all(1);
	ck_assert_uint_eq(nsent, 0);
	ck_assert_uint_eq(vol_path_wait_bytes(vol), 4096 + 8192);
	ck_assert_uint_eq(vol_path_wait_total() - total0, 4096 + 8192);
	/* The volume's count, not its target's: another volume's clients
	 * are not held back by this one's waiting I/O (review: one namespace
	 * without a path stalled every namespace of its target). */
	ck_assert_uint_eq(vol_path_wait_bytes(other), 0);
	/* Looked at again (every second, and on each snapshot): still one
	 * count each. */
	mp_wait_fire(&t->views[0].wait_timer);
	mp_wait_fire(&t->views[1].wait_timer);
	ck_assert_uint_eq(vol_path_wait_bytes(vol), 4096 + 8192);

	t->paths[0].attached = true; /* back */
	mp_broadcast(t, NULL, NULL);
	poll_all(0);
	poll_all(1);
	ck_assert_uint_eq(nsent, 2);
	ck_assert_uint_eq(vol_path_wait_bytes(vol), 0);
	ck_assert_uint_eq(vol_path_wait_total(), total0);
	complete_pending();
	poll_all(0);
	poll_all(1);
	ck_assert_uint_eq(cb_count, 2);
	ck_assert_int_eq(cb_err, 0);

	vol_destroy(other);
	vol_destroy(vol);
	target_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpath_reactors");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, flush_waits_for_stale_snapshot);
	tcase_add_test(tc, flush_of_path_left_out);
	tcase_add_test(tc, relisted_while_detaching);
	tcase_add_test(tc, deleted_slot_reused);
	tcase_add_test(tc, path_wait_counted);
	suite_add_tcase(s, tc);
	tc = tcase_create("requeue");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, timed_out_is_a_retry);
	tcase_add_test(tc, lost_not_a_retry);
	tcase_add_test(tc, lost_bounded);
	tcase_add_test(tc, lost_during_drain);
	tcase_add_test(tc, slow_losses_not_bounded);
	tcase_add_test(tc, path_errors_bounded);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
