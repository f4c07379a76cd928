/* The controller once up: its state, keep-alive, Abort, the I/O queues on
 * their reactors, failure, teardown and the orderly shutdown.  Bring-up
 * is ctrl_init.c, Connect and the admin commands fabrics.c, ANA ana.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/ctrl_priv.h"
#include "transports/status.h"

/* Names from switches with no default: -Wswitch names a state or step
 * added without one. */
const char *nvmf_ctrl_state_name(enum nvmf_ctrl_state s)
{
	switch (s) {
	case NVMF_CTRL_NEW: return "new";
	case NVMF_CTRL_CONNECTING: return "connecting";
	case NVMF_CTRL_LIVE: return "live";
	case NVMF_CTRL_RESETTING: return "resetting";
	case NVMF_CTRL_DELETING: return "deleting";
	case NVMF_CTRL_DEAD: return "dead";
	}
	return "?";
}

static bool ctrl_transition_ok(enum nvmf_ctrl_state from, enum nvmf_ctrl_state to)
{
	switch (to) {
	case NVMF_CTRL_CONNECTING:
		/* From DEAD only when the operator asks for it again. */
		return from == NVMF_CTRL_NEW || from == NVMF_CTRL_RESETTING ||
		       from == NVMF_CTRL_DEAD;
	case NVMF_CTRL_LIVE:
		return from == NVMF_CTRL_CONNECTING;
	case NVMF_CTRL_RESETTING:
		return from == NVMF_CTRL_LIVE;
	case NVMF_CTRL_DELETING:
		return from != NVMF_CTRL_DELETING && from != NVMF_CTRL_DEAD;
	case NVMF_CTRL_DEAD:
		return from != NVMF_CTRL_DEAD;
	case NVMF_CTRL_NEW:
		return false;
	}
	return false;
}

bool nvmf_ctrl_set_state(struct nvmf_ctrl *c, enum nvmf_ctrl_state s)
{
	if (!ctrl_transition_ok(c->state, s)) {
		ctrl_log(ERR, c, "illegal state change %s -> %s refused",
			 nvmf_ctrl_state_name(c->state), nvmf_ctrl_state_name(s));
		return false;
	}
	ctrl_log(INFO, c, "%s -> %s", nvmf_ctrl_state_name(c->state), nvmf_ctrl_state_name(s));
	c->state = s;
	return true;
}

struct nvmf_ns *nvmf_ctrl_find_ns(struct nvmf_ctrl *c, uint32_t nsid)
{
	for (unsigned i = 0; i < c->nr_ns; i++)
		if (c->ns[i].nsid == nsid)
			return &c->ns[i];
	return NULL;
}

/* ---- Abort (an I/O command timed out) ---- */

struct abort_msg {
	struct reactor_msg m;
	struct list_node link; /* on c->abort_wait */
	struct nvmf_ctrl *c;
	unsigned resets; /* the incarnation the command belonged to */
	uint16_t sqid, cid;
};

static void abort_send(struct abort_msg *a);

/* The controller takes ACL + 1 Aborts at a time (Identify ACL, 0's based;
 * more are failed with Abort Command Limit Exceeded).  Those beyond wait
 * here for one to complete; a command whose Abort waits too long is
 * still bounded by its queue's grace timer, which resets the controller. */
static unsigned abort_limit(const struct nvmf_ctrl *c)
{
	return c->id ? c->id->acl + 1u : 1u;
}

static void abort_next(struct nvmf_ctrl *c)
{
	struct list_node *n;

	while (c->nr_aborts < abort_limit(c) && (n = list_pop(&c->abort_wait)))
		abort_send(container_of(n, struct abort_msg, link));
}

static void abort_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	bool not_aborted = req->cqe.result.dw0 & 1;
	uint32_t what = req->sqe.cdw10;
	char why[160], sbuf[96];

	nvmf_req_put(req);
	c->nr_aborts--;
	/* Not live any more: the waiting ones are stale and freed here. */
	abort_next(c);
	if (err || c->state != NVMF_CTRL_LIVE)
		return;
	if (!st && !not_aborted) {
		ctrl_log(NOTICE, c, "q%u CID 0x%04x aborted", what & 0xffff, what >> 16);
		return;
	}
	snprintf(why, sizeof(why), "q%u CID 0x%04x timed out and could not be aborted (%s)",
		 what & 0xffff, what >> 16,
		 st ? nvme_status_fmt(st, sbuf, sizeof(sbuf)) : "not aborted");
	nvmf_ctrl_reset(c, -ETIMEDOUT, why);
}

static void abort_send(struct abort_msg *a)
{
	struct nvmf_ctrl *c = a->c;
	struct nvmf_req *req;

	/* Only on a live admin queue: a submit that fails at once completes
	 * the Abort inside this call, which would send the next waiting one
	 * from there, one stack frame per waiting Abort. */
	if (c->state == NVMF_CTRL_LIVE && c->resets == a->resets &&
	    c->adminq.state == NVMF_Q_LIVE) {
		if ((req = nvmf_admin_req(c))) {
			req->sqe.opcode = NVME_ADMIN_ABORT;
			req->sqe.cdw10 = a->sqid | ((uint32_t)a->cid << 16);
			req->done = abort_done;
			c->nr_aborts++;
			nvmf_req_submit(req);
		} else {
			nvmf_ctrl_reset(c, -ETIMEDOUT, "an I/O command timed out (no admin slot to abort it)");
		}
	}
	free(a);
}

static void abort_start(struct reactor_msg *m)
{
	struct abort_msg *a = container_of(m, struct abort_msg, m);
	struct nvmf_ctrl *c = a->c;

	if (c->nr_aborts >= abort_limit(c) && c->state == NVMF_CTRL_LIVE &&
	    c->resets == a->resets) {
		list_add_tail(&c->abort_wait, &a->link);
		return;
	}
	abort_send(a);
}

void nvmf_ctrl_abort(struct nvmf_ctrl *c, uint16_t sqid, uint16_t cid)
{
	struct abort_msg *a = malloc(sizeof(*a));

	if (!a)
		return; /* the grace timer resets the connection instead */
	a->m.fn = abort_start;
	a->c = c;
	a->resets = c->resets;
	a->sqid = sqid;
	a->cid = cid;
	reactor_send_msg(c->r, &a->m);
}

/* ---- keep-alive ---- */

static void kato_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	char sbuf[96];

	nvmf_req_put(req);
	c->kato_outstanding = false;
	c->kato_missed = 0;
	if (!err && st)
		ctrl_log(WARN, c, "keep-alive failed: %s",
			 nvme_status_fmt(st, sbuf, sizeof(sbuf)));
}

/* The next keep-alive tick, KATO/2 from now. */
static void kato_arm(struct nvmf_ctrl *c)
{
	reactor_timer_arm(c->r, &c->kato_timer, (uint64_t)c->opts.kato_ms / 2 * NSEC_PER_MSEC);
}

static void kato_tick(struct reactor_timer *t)
{
	struct nvmf_ctrl *c = container_of(t, struct nvmf_ctrl, kato_timer);
	struct nvmf_req *req;

	bool bringing_up = c->state == NVMF_CTRL_CONNECTING && c->step >= INIT_IO_QUEUES;
	if ((c->state != NVMF_CTRL_LIVE && !bringing_up) || c->adminq.state != NVMF_Q_LIVE)
		return;
	/* Sent every KATO/2: one still unanswered after that long means the
	 * target will soon (or did) consider us gone. */
	if (c->kato_outstanding) {
		/* Sent every KATO/2; the target gives us KATO, so do we. */
		if (++c->kato_missed >= 2) {
			nvmf_queue_transport_error(&c->adminq, -ETIMEDOUT,
						   "keep-alive not answered in %u ms", c->opts.kato_ms);
			return;
		}
		kato_arm(c);
		return;
	}
	req = nvmf_admin_req(c);
	if (req) {
		req->sqe.opcode = NVME_ADMIN_KEEP_ALIVE;
		req->done = kato_done;
		c->kato_outstanding = true;
		nvmf_req_submit(req);
	}
	kato_arm(c);
}

void ctrl_kato_init(struct nvmf_ctrl *c)
{
	reactor_timer_init(&c->kato_timer, kato_tick);
}

/* ---- I/O queues, possibly on other reactors ---- */

struct ioq_msg {
	struct reactor_msg m;
	struct nvmf_ctrl *c;
	unsigned idx;
	int err;
	bool down; /* a connected queue went down, not its Connect's result */
};

static void ioq_result(struct reactor_msg *m);

static void ioq_post(struct nvmf_queue *q, int err, bool down)
{
	struct nvmf_ctrl *c = q->ctrl;
	struct ioq_msg *rm = malloc(sizeof(*rm));
	if (!rm)
		abort(); /* control path, a few bytes: nothing sane to do */
	rm->m.fn = ioq_result;
	rm->c = c;
	rm->idx = (unsigned)(q - c->ioq);
	rm->err = err;
	rm->down = down;
	reactor_send_msg(c->r, &rm->m);
}

static void ioq_connected(struct nvmf_queue *q, int err)
{
	ioq_post(q, err, false);
}

static void ioq_down(struct nvmf_queue *q, int err);

static void ioq_start(struct reactor_msg *m)
{
	struct ioq_msg *msg = container_of(m, struct ioq_msg, m);
	struct nvmf_queue *q = &msg->c->ioq[msg->idx];

	free(msg);
	q->down_cb = ioq_down;
	nvmf_queue_connect(q, ioq_connected);
}

static void ctrl_failed(struct nvmf_ctrl *c, int err);

static void ioq_result(struct reactor_msg *m)
{
	struct ioq_msg *msg = container_of(m, struct ioq_msg, m);
	struct nvmf_ctrl *c = msg->c;
	int err = msg->err;
	unsigned idx = msg->idx;
	bool down = msg->down;

	free(msg);
	/* Posted before a teardown closed the queue (a shutdown or a failed
	 * step in the same mailbox batch as the Connect's answer): the queue
	 * is being closed anyway, and its close reply, which comes after this
	 * message, is what the teardown counts. */
	if (c->teardown_running)
		return;
	if (c->state == NVMF_CTRL_CONNECTING && c->step == INIT_IO_QUEUES) {
		if (down) {
			/* Its Connect was counted already: a queue that went
			 * live and dropped fails the bring-up now. */
			ctrl_init_fail(c, err, "I/O queue %u lost while the others connected",
				       idx + 1);
			return;
		}
		c->nr_ioq_pending--;
		if (err && !c->ioq_error)
			c->ioq_error = err;
		else if (!err)
			c->nr_ioq_connected++;
		if (c->nr_ioq_pending)
			return;
		if (c->ioq_error) {
			ctrl_init_fail(c, c->ioq_error, "%u of %u I/O queues connected",
				  c->nr_ioq_connected, c->nr_ioq);
			return;
		}
		c->step = INIT_DONE;
		ctrl_init_next(c);
		return;
	}
	/* A live I/O queue went down (ctrl_failed ignores any other state). */
	if (down)
		ctrl_failed(c, err);
}

static void ioq_down(struct nvmf_queue *q, int err)
{
	ioq_post(q, err ? err : -ECONNRESET, true);
}

void ctrl_ioq_connect_all(struct nvmf_ctrl *c)
{
	unsigned qsize = c->opts.queue_size;

	if (!c->nr_ioq) {
		c->step = INIT_DONE;
		ctrl_init_next(c);
		return;
	}
	if (qsize > NVME_CAP_MQES(c->cap) + 1u)
		qsize = NVME_CAP_MQES(c->cap) + 1u;
	if (qsize > NVMF_QUEUE_MAX_SIZE)
		qsize = NVMF_QUEUE_MAX_SIZE;
	c->ioq = calloc(c->nr_ioq, sizeof(*c->ioq));
	if (!c->ioq) {
		ctrl_init_fail(c, -ENOMEM, "no memory for I/O queues");
		return;
	}
	ctrl_arm_step(c, DEFAULT_STEP_TIMEOUT_MS + c->opts.path.connect_timeout_ms);
	c->nr_ioq_pending = c->nr_ioq;
	c->nr_ioq_connected = 0;
	c->ioq_error = 0;
	for (unsigned i = 0; i < c->nr_ioq; i++) {
		struct reactor *r = c->io_reactors ? c->io_reactors[i] : c->r;
		struct nvmf_queue *q = &c->ioq[i];
		int ret = nvmf_queue_init(q, c, r, (uint16_t)(i + 1), (uint16_t)qsize, &c->opts.path);
		if (ret < 0) {
			c->nr_ioq = i;
			c->nr_ioq_pending = 0;
			ctrl_init_fail(c, ret, "I/O queue %u: %s", i + 1, strerror(-ret));
			return;
		}
		q->in_capsule_max = c->in_capsule_max;
	}
	/* Keep-alive from here on, as Linux does since it authenticates I/O
	 * queues: their connects (each a DH-HMAC-CHAP exchange, seconds in a
	 * slow guest, or a slow target's answer) can together outlast KATO,
	 * and the target then ends the controller under them. */
	if (c->opts.kato_ms)
		kato_arm(c);
	for (unsigned i = 0; i < c->nr_ioq; i++) {
		struct ioq_msg *m = malloc(sizeof(*m));
		if (!m)
			abort();
		m->m.fn = ioq_start;
		m->c = c;
		m->idx = i;
		reactor_send_msg(c->ioq[i].r, &m->m);
	}
}

void ctrl_init_live(struct nvmf_ctrl *c)
{
	/* No command need be in flight on the admin queue while the I/O
	 * queues connect, so its loss may show only here: LIVE without it
	 * would be a controller with no keep-alive, AER or Abort. */
	if (c->adminq.state != NVMF_Q_LIVE) {
		ctrl_init_fail(c, c->adminq.error ? c->adminq.error : -ENOTCONN,
			       "admin queue lost while the I/O queues connected");
		return;
	}
	reactor_timer_cancel(&c->step_timer);
	/* Deleted while its queues connected: no keep-alive, no AER. */
	if (!nvmf_ctrl_set_state(c, NVMF_CTRL_LIVE))
		return;
	c->reconnecting = false;
	if (c->opts.kato_ms)
		kato_arm(c);
	if (ctrl_aen_config(c))
		ctrl_aer_submit(c);
	nvmf_ctrl_cb cb = c->ready_cb;
	c->ready_cb = NULL;
	if (cb)
		cb(c, 0);
}

static void admin_connected(struct nvmf_queue *q, int err)
{
	struct nvmf_ctrl *c = q->ctrl;

	if (err) {
		/* The cause was logged where it was found. */
		if (c->state == NVMF_CTRL_CONNECTING) {
			c->error = err;
			reactor_timer_cancel(&c->step_timer);
			if (!c->reconnecting)
				nvmf_ctrl_set_state(c, NVMF_CTRL_DEAD);
			ctrl_init_failed_down(c, err);
		}
		return;
	}
	c->step = INIT_GET_CAP;
	ctrl_init_next(c);
}

static void admin_down(struct nvmf_queue *q, int err)
{
	struct nvmf_ctrl *c = q->ctrl;

	/* Lost during the bring-up with no admin command in flight to see it
	 * (the I/O queues connecting, CSTS.RDY's next poll not yet sent): the
	 * bring-up failed.  ctrl_init_fail ignores it once one failed. */
	if (c->state == NVMF_CTRL_CONNECTING) {
		ctrl_init_fail(c, err, "admin queue lost: %s", strerror(-err));
		return;
	}
	ctrl_failed(c, err);
}

static int ctrl_start(struct nvmf_ctrl *c);

int nvmf_ctrl_connect(struct nvmf_ctrl *c, const struct nvmf_ctrl_opts *opts,
		      struct reactor *r, struct reactor **io_reactors, nvmf_ctrl_cb cb)
{
	int ret;

	/* The owner's hooks, set before connecting, survive the reset. */
	void *owner = c->owner;
	nvmf_ctrl_cb lost_cb = c->lost_cb;
	void (*ana_cb)(struct nvmf_ctrl *) = c->ana_cb;
	void (*ns_cb)(struct nvmf_ctrl *) = c->ns_cb;
	unsigned attempt_timeout_ms = c->attempt_timeout_ms;

	memset(c, 0, sizeof(*c));
	c->attempt_timeout_ms = attempt_timeout_ms;
	c->owner = owner;
	c->lost_cb = lost_cb;
	c->ana_cb = ana_cb;
	c->ns_cb = ns_cb;
	c->opts = *opts;
	if (!c->opts.path.connect_timeout_ms)
		c->opts.path.connect_timeout_ms = DEFAULT_STEP_TIMEOUT_MS;
	if (!c->opts.queue_size)
		c->opts.queue_size = 128;
	if (!c->opts.nr_io_queues)
		c->opts.nr_io_queues = 1;
	c->r = r;
	c->io_reactors = io_reactors;
	c->ready_cb = cb;
	c->state = NVMF_CTRL_NEW;
	reactor_timer_init(&c->step_timer, ctrl_step_timeout);
	ctrl_kato_init(c);
	list_init(&c->abort_wait);
	ctrl_ns_change_init(c);
	c->id = aligned_alloc(4096, sizeof(*c->id));
	c->admin_buf = aligned_alloc(4096, 4096);
	c->ns_list = aligned_alloc(4096, 4096);
	c->ns = calloc(1024, sizeof(*c->ns));
	if (!c->id || !c->admin_buf || !c->ns_list || !c->ns) {
		nvmf_ctrl_free(c);
		return -ENOMEM;
	}
	memset(c->id, 0, sizeof(*c->id));
	c->vwc_before = -1;
	ret = ctrl_start(c);
	if (ret < 0)
		nvmf_ctrl_free(c);
	return ret;
}

/* Admin queue up, then the bring-up steps. */
static int ctrl_start(struct nvmf_ctrl *c)
{
	int ret = nvmf_queue_init(&c->adminq, c, c->r, 0, ADMIN_QUEUE_SIZE, &c->opts.path);

	if (ret < 0) {
		ctrl_log(ERR, c, "%s transport: %s",
			nvmf_trtype_name(c->opts.path.trtype), strerror(-ret));
		return ret;
	}
	c->adminq.down_cb = admin_down;
	/* A reconnect attempt is CONNECTING already (nvmf_ctrl_reconnect). */
	if (c->state != NVMF_CTRL_CONNECTING && !nvmf_ctrl_set_state(c, NVMF_CTRL_CONNECTING))
		return -EBUSY;
	c->step = INIT_ADMIN_CONNECT;
	ctrl_arm_attempt(c);
	ctrl_arm_step(c, DEFAULT_STEP_TIMEOUT_MS + c->opts.path.connect_timeout_ms);
	nvmf_queue_connect(&c->adminq, admin_connected);
	return 0;
}

static void release_queues(struct nvmf_ctrl *c)
{
	for (unsigned i = 0; c->ioq && i < c->nr_ioq; i++)
		nvmf_queue_free(&c->ioq[i]);
	free(c->ioq);
	c->ioq = NULL;
	c->nr_ioq = 0;
	nvmf_queue_free(&c->adminq);
}

int nvmf_ctrl_reconnect(struct nvmf_ctrl *c, nvmf_ctrl_cb cb)
{
	/* Never connected (NEW) or still closing: not yet.  A failed attempt
	 * stays CONNECTING and tries again; the table decides the rest. */
	if (c->teardown_running || c->state == NVMF_CTRL_NEW)
		return -EBUSY;
	if (c->state != NVMF_CTRL_CONNECTING && !nvmf_ctrl_set_state(c, NVMF_CTRL_CONNECTING))
		return -EBUSY;
	release_queues(c);
	c->error = 0;
	c->ioq_error = 0;
	c->nr_ns = 0;
	c->cntlid = 0;
	c->kato_outstanding = false;
	c->kato_missed = 0;
	c->aer_armed = false;
	c->ana_busy = c->ana_again = false;
	c->nsc_busy = c->nsc_again = false;
	c->nsc_inflight = 0;
	/* The bring-up re-identifies: no earlier retry is due. */
	reactor_timer_cancel(&c->nsc_timer);
	c->nsc_retry_ms = 0;
	c->ana_then = NULL;
	c->ready_cb = cb;
	c->shutdown_cb = NULL;
	c->reconnecting = true;
	reactor_timer_init(&c->step_timer, ctrl_step_timeout);
	return ctrl_start(c);
}

/* ---- failure and teardown ---- */

static void lost_done(struct nvmf_ctrl *c, int err)
{
	if (c->lost_cb && c->state == NVMF_CTRL_RESETTING)
		c->lost_cb(c, err);
}

/* A queue of a live controller failed, or the owner asked for a reset.
 * With an owner that recovers (lost_cb), the controller is RESETTING while
 * its queues close, then the owner decides; otherwise that is the end of
 * it: every queue goes down and in-flight I/O completes with the error. */
static void ctrl_failed(struct nvmf_ctrl *c, int err)
{
	if (c->state != NVMF_CTRL_LIVE)
		return;
	c->error = err;
	reactor_timer_cancel(&c->kato_timer);
	c->resets++;
	if (c->lost_cb) {
		ctrl_log(ERR, c, "lost (%s); resetting", strerror(-err));
		nvmf_ctrl_set_state(c, NVMF_CTRL_RESETTING);
		ctrl_teardown(c, lost_done);
		return;
	}
	ctrl_log(ERR, c, "lost (%s); failing its I/O", strerror(-err));
	nvmf_ctrl_set_state(c, NVMF_CTRL_DEAD);
	ctrl_teardown(c, NULL);
}

void nvmf_ctrl_reset(struct nvmf_ctrl *c, int err, const char *why)
{
	if (c->state != NVMF_CTRL_LIVE)
		return;
	ctrl_log(NOTICE, c, "reset: %s", why);
	ctrl_failed(c, err);
}

/* Closing the I/O queues, each on its own reactor, then running then(c)
 * on c->r once every one is dead: shared by teardown and shutdown. */
struct ioq_close_msg {
	struct reactor_msg m;
	struct nvmf_ctrl *c;
	unsigned idx;
};

static void ioq_close_reply(struct reactor_msg *m)
{
	struct ioq_close_msg *t = container_of(m, struct ioq_close_msg, m);
	struct nvmf_ctrl *c = t->c;

	free(t);
	if (--c->nr_ioq_closing == 0)
		c->ioq_close_then(c);
}

static void send_close_reply(struct nvmf_ctrl *c, struct ioq_close_msg *t)
{
	if (!t && !(t = malloc(sizeof(*t))))
		abort(); /* control path, a few bytes: nothing sane to do */
	t->m.fn = ioq_close_reply;
	t->c = c;
	reactor_send_msg(c->r, &t->m);
}

static void ioq_closed(struct nvmf_queue *q, int err)
{
	(void)err;
	send_close_reply(q->ctrl, NULL);
}

static void ioq_close(struct reactor_msg *m)
{
	struct ioq_close_msg *t = container_of(m, struct ioq_close_msg, m);
	struct nvmf_queue *q = &t->c->ioq[t->idx];

	if (q->state == NVMF_Q_DEAD || q->state == NVMF_Q_IDLE) {
		if (q->state == NVMF_Q_IDLE)
			nvmf_queue_set_state(q, NVMF_Q_DEAD);
		send_close_reply(t->c, t);
		return;
	}
	free(t);
	q->connect_cb = NULL;
	q->down_cb = ioq_closed;
	if (q->state != NVMF_Q_DRAINING)
		nvmf_queue_shutdown(q, -ESHUTDOWN);
}

static void ioqs_close(struct nvmf_ctrl *c, void (*then)(struct nvmf_ctrl *c))
{
	c->ioq_close_then = then;
	c->nr_ioq_closing = c->ioq ? c->nr_ioq : 0;
	if (!c->nr_ioq_closing) {
		then(c);
		return;
	}
	for (unsigned i = 0; i < c->nr_ioq; i++) {
		struct ioq_close_msg *t = malloc(sizeof(*t));
		if (!t)
			abort();
		t->m.fn = ioq_close;
		t->c = c;
		t->idx = i;
		reactor_send_msg(c->ioq[i].r, &t->m);
	}
}

static void teardown_finish(struct nvmf_ctrl *c)
{
	/* No bring-up step runs: a late failure report (the admin queue's
	 * own down_cb after its commands failed) starts no second teardown. */
	c->step = INIT_NONE;
	c->teardown_running = false;
	/* Every queue is dead: no poll is in flight any more, and the next
	 * bring-up must not take a stale one for its own. */
	c->poll_req = NULL;
	nvmf_ctrl_cb cb = c->shutdown_cb;
	c->shutdown_cb = NULL;
	if (cb)
		cb(c, c->error);
}

static void admin_dead(struct nvmf_queue *q, int err)
{
	(void)err;
	teardown_finish(q->ctrl);
}

static void teardown_admin(struct nvmf_ctrl *c)
{
	if (c->adminq.state == NVMF_Q_DEAD) {
		teardown_finish(c);
		return;
	}
	c->adminq.connect_cb = NULL;
	c->adminq.down_cb = admin_dead;
	if (c->adminq.state != NVMF_Q_DRAINING)
		nvmf_queue_shutdown(&c->adminq, -ESHUTDOWN);
}

/* Teardown: every I/O queue, then the admin queue, then cb.  On c->r. */
void ctrl_teardown(struct nvmf_ctrl *c, nvmf_ctrl_cb cb)
{
	c->shutdown_cb = cb;
	c->teardown_running = true;
	reactor_timer_cancel(&c->kato_timer);
	ioqs_close(c, teardown_admin);
}

/* ---- orderly shutdown: I/O queues, CC.SHN, admin queue ---- */

static unsigned shn_timeout_ms(const struct nvmf_ctrl *c)
{
	return c->shutdown_timeout_ms ? c->shutdown_timeout_ms : SHUTDOWN_TIMEOUT_MS;
}

/* The shutdown's commands (the CC.SHN Property Set, then CSTS polls) are
 * one at a time, c->poll_req the one in flight.  The step timer is the
 * poll tick between two of them and, while one is in flight, the 5 s
 * deadline: an unanswered command used to wait the admin io_timeout (up
 * to an hour), keep-alive already stopped. */

static void shn_cmd_done(struct nvmf_req *req, int err)
{
	struct nvmf_ctrl *c = req->ctx;
	uint32_t csts = req->cqe.result.dw0;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	bool was_set = ((struct nvmf_property_cmd *)&req->sqe)->fctype == NVMF_FCTYPE_PROPERTY_SET;
	bool mine = req == c->poll_req;

	nvmf_req_put(req);
	if (!mine)
		return; /* completed by the teardown its deadline started */
	c->poll_req = NULL;
	if (err || st) {
		ctrl_log(WARN, c, "shutdown notification failed; closing anyway");
		reactor_timer_cancel(&c->step_timer);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	if (!was_set && (csts & NVME_CSTS_SHST_MASK) == NVME_CSTS_SHST_CMPLT) {
		ctrl_log(INFO, c, "shutdown complete");
		reactor_timer_cancel(&c->step_timer);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	uint64_t now = reactor_now_ns();
	if (now >= c->deadline_ns) {
		ctrl_log(WARN, c, "shutdown not complete after %u ms; closing anyway",
			 shn_timeout_ms(c));
		reactor_timer_cancel(&c->step_timer);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	uint64_t left = c->deadline_ns - now;
	reactor_timer_arm(c->r, &c->step_timer, left < 10 * NSEC_PER_MSEC ? left : 10 * NSEC_PER_MSEC);
}

static void shn_submit(struct nvmf_ctrl *c, struct nvmf_req *req)
{
	uint64_t now = reactor_now_ns();

	req->done = shn_cmd_done;
	c->poll_req = req;
	reactor_timer_arm(c->r, &c->step_timer, c->deadline_ns > now ? c->deadline_ns - now : 0);
	nvmf_req_submit(req);
}

static void shn_timer(struct reactor_timer *t)
{
	struct nvmf_ctrl *c = container_of(t, struct nvmf_ctrl, step_timer);
	struct nvmf_req *req;

	if (c->poll_req || reactor_now_ns() >= c->deadline_ns) {
		/* Its late completion, if any, is the teardown's. */
		c->poll_req = NULL;
		ctrl_log(WARN, c, "shutdown not complete after %u ms; closing anyway",
			 shn_timeout_ms(c));
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	req = nvmf_admin_req(c);
	if (!req || c->adminq.state != NVMF_Q_LIVE) {
		if (req)
			nvmf_req_put(req);
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	ctrl_prep_property_get(req, NVME_REG_CSTS, false);
	shn_submit(c, req);
}

/* The I/O queues are closed: tell the controller it is shutting down. */
static void shn_start(struct nvmf_ctrl *c)
{
	struct nvmf_req *req;

	if (c->adminq.state != NVMF_Q_LIVE || !(req = nvmf_admin_req(c))) {
		ctrl_teardown(c, c->shutdown_cb);
		return;
	}
	c->deadline_ns = reactor_now_ns() + (uint64_t)shn_timeout_ms(c) * NSEC_PER_MSEC;
	reactor_timer_cancel(&c->step_timer);
	reactor_timer_init(&c->step_timer, shn_timer);
	ctrl_prep_property_set(req, NVME_REG_CC, (c->cc & ~NVME_CC_SHN_MASK) | NVME_CC_SHN_NORMAL);
	shn_submit(c, req);
}

void nvmf_ctrl_shutdown(struct nvmf_ctrl *c, nvmf_ctrl_cb cb)
{
	c->lost_cb = NULL;
	c->ana_cb = NULL;
	c->ns_cb = NULL;
	if (c->state == NVMF_CTRL_RESETTING ||
	    (c->state == NVMF_CTRL_CONNECTING && c->reconnecting && !c->ready_cb)) {
		/* Being reset, or between two reconnect attempts: nothing to
		 * tell the controller; close what is left. */
		nvmf_ctrl_set_state(c, NVMF_CTRL_DELETING);
		c->shutdown_cb = cb;
		if (!c->teardown_running)
			teardown_admin(c);
		return;
	}
	if (c->state == NVMF_CTRL_DEAD || c->state == NVMF_CTRL_NEW) {
		/* Already torn down (or never up): just make sure it is quiet.
		 * A teardown still running (a lost controller's, started with
		 * no callback) reports to the new cb when its I/O queues and
		 * admin queue are closed: closing the admin queue now would
		 * let the owner free the controller under the I/O queues'
		 * close messages. */
		c->shutdown_cb = cb;
		if (!c->teardown_running)
			teardown_admin(c);
		return;
	}
	if (c->state == NVMF_CTRL_CONNECTING) {
		c->ready_cb = NULL;
		reactor_timer_cancel(&c->step_timer);
		nvmf_ctrl_set_state(c, NVMF_CTRL_DELETING);
		if (c->teardown_running) {
			/* A failed attempt's teardown, its close replies in
			 * flight: starting another would count them again. */
			c->shutdown_cb = cb;
			return;
		}
		ctrl_teardown(c, cb);
		return;
	}
	nvmf_ctrl_set_state(c, NVMF_CTRL_DELETING);
	c->shutdown_cb = cb;
	reactor_timer_cancel(&c->kato_timer);
	c->step = INIT_DONE;
	ioqs_close(c, shn_start);
}

void nvmf_ctrl_free(struct nvmf_ctrl *c)
{
	reactor_timer_cancel(&c->step_timer);
	reactor_timer_cancel(&c->kato_timer);
	release_queues(c);
	/* Left only if the admin queue never completed the Abort before. */
	for (struct list_node *n; c->abort_wait.next && (n = list_pop(&c->abort_wait));)
		free(container_of(n, struct abort_msg, link));
	free(c->id);
	free(c->admin_buf);
	free(c->ns_list);
	free(c->ns);
	free(c->ana_log);
	ctrl_ns_change_free(c);
	c->ana_log = NULL;
	c->ana_log_alloc = 0;
	c->id = NULL;
	c->admin_buf = NULL;
	c->ns_list = NULL;
	c->ns = NULL;
	/* The secrets' copies in the options (the owner may free c next). */
	explicit_bzero(&c->opts.dhchap_key, sizeof(c->opts.dhchap_key));
	explicit_bzero(&c->opts.dhchap_ctrl_key, sizeof(c->opts.dhchap_ctrl_key));
	explicit_bzero(&c->opts.path.tls_key, sizeof(c->opts.path.tls_key));
}
