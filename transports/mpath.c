/* Multipath target, path recovery and the "nvmf" volume over it.  See
 * mpath.h for the rules; the comments here say why the code is shaped the
 * way it is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/log.h"
#include "transports/io.h"
#include "transports/mpath.h"
#include "transports/status.h"

#define MP_MAX_QS 64 /* queues of one path on one reactor */

/* A path put aside by the data path (a path-related or ANA status) is
 * tried again after this long, or sooner when a new snapshot arrives; I/O
 * that waits for a usable path is looked at again (and the ANA log of a
 * path that blocks it re-read) at this period. */
#define MP_BACKOFF_NS (1000 * NSEC_PER_MSEC)
/* After export-remove or SIGTERM (vol_mp_drain), I/O still waiting for a
 * path gets this much longer, then fails with EIO. */
#define MP_DRAIN_NS (5 * NSEC_PER_SEC)
/* The longest Command Retry Delay honoured: CRDT counts 100 ms units up
 * to 6553.5 s, which would hold an I/O for hours; the Linux host waits
 * whatever the controller says.  Also capped by the I/O's wait budget
 * (retry_delay_ns). */
#define MP_RETRY_DELAY_MAX_NS (5 * NSEC_PER_SEC)
/* ANATT when Identify says 0. */
#define MP_DEFAULT_ANATT_S 10
#define MP_FOREVER UINT64_MAX

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* What one reactor may use of one path. */
struct snap_path {
	bool attached;
	uint32_t max_xfer;
	unsigned nq;
	struct nvmf_queue *qs[MP_MAX_QS];
	/* Every group of the path's namespaces, sorted by group ID; in the
	 * snapshot's own allocation (struct snap's ana_store). */
	unsigned nr_ana;
	struct nvmf_ana_grp *ana;
};

struct bcast;

/* A reactor's whole view, replaced by message. */
struct snap {
	struct reactor_msg m;
	struct mp_target *t;
	unsigned reactor;
	struct bcast *bc;
	bool failfast;
	struct snap_path p[MP_MAX_PATHS];
	struct nvmf_ana_grp ana_store[]; /* the paths' nr_ana entries, in order */
};

/* Counters of one path on one reactor: one writer, read by reactor 0. */
struct pstats {
	uint64_t reads, writes, read_bytes, write_bytes, errors, retries;
	unsigned in_flight;
};

struct rview {
	struct mp_target *t;
	struct reactor *r;
	unsigned home; /* reactor carrying this one's I/O */
	struct snap *cur;
	struct list_node parked; /* waiting for a usable path */
	struct list_node delayed; /* waiting for their retry delay */
	struct reactor_timer delay_timer;
	/* Armed while anything is parked or a path is put aside: expires
	 * the marks, re-reads blocking ANA logs, enforces the deadlines. */
	struct reactor_timer wait_timer;
	unsigned rr;
	bool kicking;
	/* Set by the data path when an I/O came back with a status about
	 * the path itself (controller or host pathing error, a reset): the
	 * path is not used here, for any namespace, until this time (ns) or
	 * the next snapshot, whichever comes first.  0 = usable.  A status
	 * about one namespace on the path puts aside only that pair (struct
	 * acked's aside_until). */
	uint64_t stale_until[MP_MAX_PATHS];
	uint64_t snap_gen; /* snapshots applied here: a pair's mark ends with its own */
	uint64_t expired_logged_ns; /* deadline log lines: one a second */
	unsigned expired_quiet; /* not logged since */
	uint64_t crd_logged_ns; /* capped retry delay lines: one a second */
	unsigned crd_quiet;
	uint64_t cqt_logged_ns; /* Command Quiesce Time waits: one line a second */
	unsigned cqt_quiet;
	struct pstats st[MP_MAX_PATHS];
	struct ana_req {
		struct reactor_msg m;
		struct mp_path *p;
		int busy; /* atomic */
	} ana_req[MP_MAX_PATHS], reset_req[MP_MAX_PATHS];
};

struct bcast_ack {
	struct reactor_msg m;
	struct bcast *bc;
};

struct bcast {
	struct mp_target *t;
	unsigned pending;
	void (*then)(struct mp_path *p);
	struct mp_path *p;
	struct bcast_ack *acks; /* one per reactor */
};

struct mp_path {
	struct mp_target *t;
	unsigned idx;
	struct nvmf_ctrl ctrl;
	bool started; /* nvmf_ctrl_connect succeeded once: ctrl is valid */
	bool attached; /* the reactors may use its queues */
	bool deleted; /* no more reconnects until an operator reset */
	bool connecting; /* an attempt is running */
	bool delete_after; /* ctrl_loss_tmo passed during an attempt */
	bool reset_now; /* operator reset: reconnect without delay */
	bool first_done;
	uint64_t lost_ns;
	unsigned reconnects;
	struct reactor_timer reconnect_timer;
	struct reactor_timer loss_timer;
	/* ANA change state: since when (0 = none), re-read every second
	 * until it ends or ANATT has passed (then the path is reset). */
	uint64_t change_ns;
	struct reactor_timer ana_timer;
	unsigned regroups_seen; /* ctrl.ana_regroups the volumes have followed */
};

struct vol_mp;

struct mp_target {
	struct mp_target_opts o;
	struct reactor *r;
	struct reactor **reactors;
	unsigned nr_reactors;
	struct mp_path paths[MP_MAX_PATHS];
	struct rview *views;
	struct vol_mp **vols;
	unsigned nr_vols;
	unsigned first_pending;
	mp_target_cb connect_cb, shutdown_cb;
	void *connect_arg, *shutdown_arg;
	unsigned shutdown_pending;
	bool shutting_down;
	bool fast_failed; /* fast_io_fail_tmo passed with no path attached */
	struct reactor_timer fast_timer;
	/* How long an I/O may wait for a usable path (ns, MP_FOREVER), and
	 * ANATT (the longest of the paths', atomic): see wait_limit. */
	uint64_t wait_ns;
	uint64_t anatt_ns;
};

/* Per volume and path: the FLUSH rule's bookkeeping (see flush_*). */
struct vpath {
	uint64_t flushed_upto; /* atomic max */
	uint64_t loss_hi; /* writes_acked when a reset lost unflushed writes */
	uint64_t loss_reported;
};

struct vol_mp {
	struct volume v;
	struct mp_target *t;
	/* Geometry copy: the controllers' tables change on reconnect.  Its
	 * anagrpid follows the target when it moves the namespace to another
	 * ANA group (vol_regroup, on reactor 0): the data path reads it with
	 * LOAD. */
	struct nvmf_ns ns;
	bool failed; /* atomic: the namespace changed under us */
	uint64_t drain_at; /* atomic: vol_mp_drain's deadline for waiting I/O, 0 = none */
	bool excluded[MP_MAX_PATHS]; /* path reports another namespace (reactor 0) */
	bool bad_path[MP_MAX_PATHS]; /* the same, read by the data path (atomic) */
	struct vpath vp[MP_MAX_PATHS];
	/* Per reactor, written only there (so the data path makes no shared
	 * write): writes acknowledged per path, which the flush rule sums
	 * (acked_sum); and this namespace's own put-aside marks per path
	 * (see put_aside), valid while aside_gen is the reactor's snap_gen
	 * and aside_until has not passed. */
	struct acked {
		_Alignas(64) uint64_t n[MP_MAX_PATHS];
		uint64_t aside_until[MP_MAX_PATHS];
		uint64_t aside_gen[MP_MAX_PATHS];
	} *acked;
};

/* The backend's part of vol_io.priv. */
struct mpio {
	struct nvmf_io nio;
	struct list_node link;
	struct rview *view;
	uint64_t due_ns;
	uint64_t flush_snap;
	uint64_t wait_start; /* first time it had to wait for a path, 0 = never */
	uint8_t path;
	uint8_t retries;
	uint8_t flush_next;
	uint8_t flush_for; /* the path whose writes this flush covers */
	bool flushing;
	bool transition; /* came back with ANA Transition: may wait up to ANATT */
};
_Static_assert(sizeof(struct mpio) <= VOL_IO_PRIV_SIZE, "VOL_IO_PRIV_SIZE too small");

/* Writes acknowledged on path i by every reactor, from any reactor: each
 * count only grows, so the sum is at least what was acknowledged before
 * the caller asked. */
static uint64_t acked_sum(struct vol_mp *n, unsigned i)
{
	uint64_t sum = 0;

	for (unsigned k = 0; k < n->t->nr_reactors; k++)
		sum += LOAD(n->acked[k].n[i]);
	return sum;
}

static struct mpio *mpio_of(struct vol_io *io) { return (struct mpio *)io->priv; }
static struct vol_io *io_of(struct mpio *m) { return container_of((void *)m, struct vol_io, priv); }

/* Path i is put aside on reactor v for vol n: for every namespace (the
 * path's mark) or for n alone (the pair's mark; it expires by itself). */
static bool aside_for(struct rview *v, struct vol_mp *n, unsigned i)
{
	const struct acked *a = &n->acked[v - v->t->views];

	if (v->stale_until[i])
		return true;
	return a->aside_gen[i] == v->snap_gen && a->aside_until[i] > reactor_now_ns();
}

const char *mp_policy_name(enum mp_policy p)
{
	static const char *const n[] = { [MP_FAILOVER] = "failover",
					 [MP_ROUND_ROBIN] = "round-robin",
					 [MP_QUEUE_DEPTH] = "queue-depth" };
	return p <= MP_QUEUE_DEPTH ? n[p] : "?";
}

const char *mp_target_name(const struct mp_target *t) { return t->o.ctrl.name; }

const char *mp_target_state(const struct mp_target *t)
{
	unsigned live = 0, deleted = 0;

	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		live += t->paths[i].attached;
		deleted += t->paths[i].deleted;
	}
	if (live == t->o.nr_paths)
		return "live";
	if (live)
		return "degraded";
	return deleted == t->o.nr_paths ? "failed" : "reconnecting";
}

/* ---- snapshots: reactor 0 tells every reactor what it may use ---- */

static void snap_kick(struct rview *v);

static void bcast_ack(struct reactor_msg *m)
{
	struct bcast *bc = container_of(m, struct bcast_ack, m)->bc;

	if (--bc->pending)
		return;
	if (bc->then && !bc->t->shutting_down)
		bc->then(bc->p);
	free(bc->acks);
	free(bc);
}

static void snap_apply(struct reactor_msg *m)
{
	struct snap *s = container_of(m, struct snap, m);
	struct rview *v = &s->t->views[s->reactor];
	struct bcast *bc = s->bc;

	free(v->cur);
	v->cur = s;
	memset(v->stale_until, 0, sizeof(v->stale_until));
	v->snap_gen++;
	if (bc) {
		struct bcast_ack *ack = &bc->acks[s->reactor];
		ack->m.fn = bcast_ack;
		ack->bc = bc;
		s->bc = NULL;
		reactor_send_msg(s->t->r, &ack->m);
	}
	snap_kick(v);
}

static bool all_deleted(const struct mp_target *t)
{
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (!t->paths[i].deleted)
			return false;
	return true;
}

static bool any_attached(const struct mp_target *t)
{
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (t->paths[i].attached)
			return true;
	return false;
}

/* Sends every reactor its view of the current path states; then(p) runs
 * on reactor 0 once every reactor has dropped what it had before (the
 * queues it referred to may then be freed). */
static void broadcast(struct mp_target *t, void (*then)(struct mp_path *p), struct mp_path *p)
{
	struct bcast *bc = NULL;
	bool failfast = !any_attached(t) && (t->fast_failed || all_deleted(t));

	if (then) {
		bc = calloc(1, sizeof(*bc));
		if (!bc || !(bc->acks = calloc(t->nr_reactors, sizeof(*bc->acks))))
			abort(); /* control path, a few bytes */
		bc->t = t;
		bc->then = then;
		bc->p = p;
		bc->pending = t->nr_reactors;
	}
	size_t nr_ns = 0;
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (t->paths[i].attached)
			nr_ns += t->paths[i].ctrl.nr_ns;
	for (unsigned k = 0; k < t->nr_reactors; k++) {
		struct snap *s = calloc(1, sizeof(*s) + nr_ns * sizeof(s->ana_store[0]));
		struct nvmf_ana_grp *ana = s ? s->ana_store : NULL;
		if (!s)
			abort();
		s->m.fn = snap_apply;
		s->t = t;
		s->reactor = k;
		s->bc = bc;
		s->failfast = failfast;
		for (unsigned i = 0; i < t->o.nr_paths; i++) {
			struct mp_path *pp = &t->paths[i];
			struct snap_path *sp = &s->p[i];
			if (!pp->attached)
				continue;
			sp->attached = true;
			sp->max_xfer = pp->ctrl.max_xfer;
			for (unsigned q = 0; q < pp->ctrl.nr_ioq && sp->nq < MP_MAX_QS; q++)
				if (pp->ctrl.ioq[q].r == t->reactors[k])
					sp->qs[sp->nq++] = &pp->ctrl.ioq[q];
			sp->ana = ana;
			sp->nr_ana = nvmf_ctrl_ana_groups(&pp->ctrl, ana);
			ana += sp->nr_ana;
		}
		reactor_send_msg(t->reactors[k], &s->m);
	}
}

/* ---- the data path (on the home reactor) ---- */

static void mp_start(struct vol_io *io);

/* A group no namespace of the path is in has no state here: 0, which no
 * policy uses.  Without ANA every namespace is OPTIMIZED in its group. */
static uint8_t ana_of(const struct snap_path *sp, uint32_t grp)
{
	return nvmf_ana_grp_state(sp->ana, sp->nr_ana, grp);
}

static struct nvmf_queue *live_queue(struct rview *v, unsigned i)
{
	struct snap_path *sp = &v->cur->p[i];

	for (unsigned k = 0; k < sp->nq; k++) {
		struct nvmf_queue *q = sp->qs[(v->rr + k) % sp->nq];
		if (q->state == NVMF_Q_LIVE)
			return q;
	}
	return NULL;
}

/* The path for the next command of vol n on this reactor, or -1. */
static int pick_path(struct rview *v, struct vol_mp *n, struct nvmf_queue **qout)
{
	struct mp_target *t = v->t;
	int best = -1, best_rank = 3;
	unsigned best_load = ~0u;
	struct nvmf_queue *best_q = NULL;

	if (!v->cur)
		return -1;
	for (unsigned k = 0; k < t->o.nr_paths; k++) {
		/* Round-robin starts the scan at a moving index; the others
		 * always from path 0, so failover sticks to the first good
		 * path in configuration order. */
		unsigned i = t->o.policy == MP_ROUND_ROBIN ? (v->rr + k) % t->o.nr_paths : k;
		struct snap_path *sp = &v->cur->p[i];
		if (!sp->attached || aside_for(v, n, i) || LOAD(n->bad_path[i]))
			continue;
		uint8_t st = ana_of(sp, LOAD(n->ns.anagrpid));
		int rank = st == NVME_ANA_OPTIMIZED ? 0 : st == NVME_ANA_NON_OPTIMIZED ? 1 : 3;
		if (rank > best_rank || rank == 3)
			continue;
		struct nvmf_queue *q = live_queue(v, i);
		if (!q)
			continue;
		unsigned load = t->o.policy == MP_QUEUE_DEPTH ? q->nr_in_flight : 0;
		if (rank < best_rank || load < best_load) {
			best = (int)i;
			best_rank = rank;
			best_load = load;
			best_q = q;
		}
	}
	v->rr++;
	*qout = best_q;
	return best;
}

static void wait_arm(struct rview *v, uint64_t delay_ns)
{
	uint64_t at = reactor_now_ns() + delay_ns;

	if (!v->wait_timer.armed || v->wait_timer.deadline_ns > at)
		reactor_timer_arm(v->r, &v->wait_timer, delay_ns);
}

static void park(struct rview *v, struct vol_io *io)
{
	list_add_tail(&v->parked, &mpio_of(io)->link);
	wait_arm(v, MP_BACKOFF_NS);
}

static void finish(struct rview *v, struct vol_io *io, int err)
{
	vol_complete(v->r, io, err);
}

static bool ana_usable(uint8_t st)
{
	return st == NVME_ANA_OPTIMIZED || st == NVME_ANA_NON_OPTIMIZED;
}

/* The group of vol n is changing ANA state behind an attached path. */
static bool in_transition(struct rview *v, struct vol_mp *n)
{
	for (unsigned i = 0; v->cur && i < v->t->o.nr_paths; i++)
		if (v->cur->p[i].attached &&
		    ana_of(&v->cur->p[i], LOAD(n->ns.anagrpid)) == NVME_ANA_CHANGE)
			return true;
	return false;
}

/* A path this reactor put aside (for n or for all) for MP_BACKOFF_NS
 * after a path-related status: the controller is live, only its last
 * answer was not. */
static bool any_put_aside(struct rview *v, struct vol_mp *n)
{
	for (unsigned i = 0; v->cur && i < v->t->o.nr_paths; i++)
		if (v->cur->p[i].attached && aside_for(v, n, i))
			return true;
	return false;
}

/* How long io may wait for a usable path in all: fast_io_fail_tmo, or
 * ctrl_loss_tmo when that is off, or forever when both are; at least
 * ANATT while its group is in transition.  fast_io_fail_tmo counts an
 * outage: while a live path is only put aside, every I/O gets at least
 * two backoffs, so fast_io_fail_tmo = 0 (or a budget nearly spent in an
 * earlier wait) does not turn one transient status into EIO for all the
 * I/O submitted in that second. */
static uint64_t wait_limit(struct rview *v, struct vol_io *io)
{
	struct mpio *m = mpio_of(io);
	uint64_t lim = v->t->wait_ns, anatt = LOAD(v->t->anatt_ns);

	if (lim != MP_FOREVER && anatt > lim && (m->transition || in_transition(v, io->vol->priv)))
		lim = anatt;
	if (lim != MP_FOREVER && lim < 2 * MP_BACKOFF_NS && any_put_aside(v, io->vol->priv))
		lim = 2 * MP_BACKOFF_NS;
	return lim;
}

/* No usable path for io now: it waits (parked, looked at again every
 * MP_BACKOFF_NS and on every snapshot) until its deadline, then fails
 * with EIO.  Never spins: nothing here resubmits. */
static void wait_for_path(struct rview *v, struct vol_io *io)
{
	struct mpio *m = mpio_of(io);
	struct vol_mp *n = io->vol->priv;
	uint64_t now = reactor_now_ns(), lim = wait_limit(v, io), drain = LOAD(n->drain_at);

	if (!m->wait_start)
		m->wait_start = now;
	if (drain && now >= drain) {
		log_err("%s: %s of %llu bytes at %llu failed with EIO: the export is being removed "
			"and no path was usable for %.3f s",
			io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
			(unsigned long long)io->offset, (double)(now - m->wait_start) / 1e9);
		finish(v, io, -EIO);
		return;
	}
	if (lim == MP_FOREVER || now - m->wait_start < lim) {
		park(v, io);
		if (lim != MP_FOREVER)
			wait_arm(v, m->wait_start + lim - now);
		return;
	}
	if (now - v->expired_logged_ns >= NSEC_PER_SEC) {
		char more[48] = "";
		if (v->expired_quiet)
			snprintf(more, sizeof(more), " (and %u more since the last line)",
				 v->expired_quiet);
		log_err("%s: %s of %llu bytes at %llu failed with EIO after waiting %.3f s for a "
			"usable path (limit %.0f s)%s",
			io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
			(unsigned long long)io->offset, (double)(now - m->wait_start) / 1e9,
			(double)lim / 1e9, more);
		v->expired_logged_ns = now;
		v->expired_quiet = 0;
	} else {
		v->expired_quiet++;
	}
	finish(v, io, -EIO);
}

/* Resubmit what waited for a path; those that still find none park again
 * (at the tail, keeping their order). */
static void snap_kick(struct rview *v)
{
	struct list_node todo;
	struct list_node *node;

	if (v->kicking)
		return;
	v->kicking = true;
	list_init(&todo);
	while ((node = list_pop(&v->parked)))
		list_add_tail(&todo, node);
	while ((node = list_pop(&todo)))
		mp_start(io_of(container_of(node, struct mpio, link)));
	v->kicking = false;
}

static void delay_fire(struct reactor_timer *tm)
{
	struct rview *v = container_of(tm, struct rview, delay_timer);
	uint64_t now = reactor_now_ns(), next = 0;
	struct list_node *node, *nx;

	for (node = v->delayed.next; node != &v->delayed; node = nx) {
		struct mpio *m = container_of(node, struct mpio, link);
		uint64_t drain = LOAD(((struct vol_mp *)io_of(m)->vol->priv)->drain_at);
		nx = node->next;
		/* A drain (export removal, SIGTERM) that began during the
		 * wait ends it at its deadline: a Command Quiesce Time may be
		 * a minute, the drain is MP_DRAIN_NS. */
		if (m->due_ns <= now || (drain && drain <= now)) {
			list_del(node);
			mp_start(io_of(m));
		} else if (!next || m->due_ns < next) {
			next = m->due_ns;
		}
	}
	/* At least once per MP_BACKOFF_NS, to notice a drain. */
	if (next)
		reactor_timer_arm(v->r, &v->delay_timer,
				  next - now > MP_BACKOFF_NS ? MP_BACKOFF_NS : next - now);
}

static void retry_later(struct rview *v, struct vol_io *io, uint64_t delay_ns)
{
	struct mpio *m = mpio_of(io);

	if (!delay_ns) {
		park(v, io);
		snap_kick(v);
		return;
	}
	uint64_t now = reactor_now_ns(), arm = delay_ns > MP_BACKOFF_NS ? MP_BACKOFF_NS : delay_ns;

	m->due_ns = now + delay_ns;
	list_add_tail(&v->delayed, &m->link);
	if (!v->delay_timer.armed || v->delay_timer.deadline_ns > now + arm)
		reactor_timer_arm(v->r, &v->delay_timer, arm);
}

static void ana_refresh_msg(struct reactor_msg *msg)
{
	struct ana_req *a = container_of(msg, struct ana_req, m);
	struct mp_path *p = a->p;

	STORE(a->busy, 0);
	if (p->started && !p->t->shutting_down)
		nvmf_ctrl_ana_refresh(&p->ctrl);
}

static void ask_ana_refresh(struct rview *v, unsigned path)
{
	struct ana_req *a = &v->ana_req[path];

	if (__atomic_exchange_n(&a->busy, 1, __ATOMIC_ACQ_REL))
		return;
	a->m.fn = ana_refresh_msg;
	a->p = &v->t->paths[path];
	reactor_send_msg(v->t->r, &a->m);
}

static void reset_msg(struct reactor_msg *msg)
{
	struct ana_req *a = container_of(msg, struct ana_req, m);
	struct mp_path *p = a->p;

	STORE(a->busy, 0);
	if (p->attached && !p->t->shutting_down && p->ctrl.state == NVMF_CTRL_LIVE)
		nvmf_ctrl_reset(&p->ctrl, -ECONNRESET,
				"the controller answered Keep Alive Timer Expired");
}

static void ask_reset(struct rview *v, unsigned path)
{
	struct ana_req *a = &v->reset_req[path];

	if (__atomic_exchange_n(&a->busy, 1, __ATOMIC_ACQ_REL))
		return;
	a->m.fn = reset_msg;
	a->p = &v->t->paths[path];
	reactor_send_msg(v->t->r, &a->m);
}

/* The data path puts path aside on this reactor for MP_BACKOFF_NS: for
 * every namespace when the status is about the path (whole), else for
 * vol n alone.  As Linux clears the current path per namespace head: a
 * namespace the target disabled answers Internal Path Error on a path
 * that serves its other namespaces well, and ANA states are per group
 * (a namespace of the same group meets the same status and is put aside
 * by its own). */
static void put_aside(struct rview *v, struct vol_mp *n, unsigned path, bool whole)
{
	uint64_t until = reactor_now_ns() + MP_BACKOFF_NS;

	if (whole) {
		v->stale_until[path] = until;
	} else {
		struct acked *a = &n->acked[v - v->t->views];
		a->aside_until[path] = until;
		a->aside_gen[path] = v->snap_gen;
	}
	wait_arm(v, MP_BACKOFF_NS);
}

/* A status that says the path (controller or host side) cannot carry
 * commands, whatever the namespace. */
static bool status_is_whole_path(uint16_t status)
{
	return NVME_STATUS_SCT(status) == NVME_SCT_PATH &&
	       (NVME_STATUS_SC(status) == 0x60 || NVME_STATUS_SC(status) == 0x70);
}

/* Every MP_BACKOFF_NS while something waits or a path is put aside:
 * paths whose backoff is over are usable again, an attached path whose
 * ANA state blocks a waiting I/O has its log read again (the target may
 * change state without an event), and every waiting I/O is looked at
 * again (sent, or failed once past its deadline). */
static void wait_fire(struct reactor_timer *tm)
{
	struct rview *v = container_of(tm, struct rview, wait_timer);
	struct mp_target *t = v->t;
	uint64_t now = reactor_now_ns();
	bool aside = false, reread[MP_MAX_PATHS] = { false };
	struct list_node *node;

	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		if (v->stale_until[i] && v->stale_until[i] <= now)
			v->stale_until[i] = 0;
		aside |= v->stale_until[i] != 0;
	}
	for (node = v->parked.next; v->cur && node != &v->parked; node = node->next) {
		struct vol_io *io = io_of(container_of(node, struct mpio, link));
		uint32_t grp = LOAD(((struct vol_mp *)io->vol->priv)->ns.anagrpid);
		for (unsigned i = 0; i < t->o.nr_paths; i++)
			if (v->cur->p[i].attached && !ana_usable(ana_of(&v->cur->p[i], grp)))
				reread[i] = true;
	}
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (reread[i])
			ask_ana_refresh(v, i);
	snap_kick(v);
	if (aside && !v->wait_timer.armed)
		wait_arm(v, MP_BACKOFF_NS);
}

static void flush_step(struct rview *v, struct vol_io *io);

/* The delay before retrying io after a status asking for Command Retry
 * Delay crd (1..3; 0: none) of path p: CRDTn from Identify, capped at
 * MP_RETRY_DELAY_MAX_NS, at what is left of the I/O's wait budget (a
 * retry delay is a wait: it counts from wait_start like a wait for a
 * path) and at the drain's deadline (export-remove, SIGTERM).  *over:
 * the budget is spent, fail the I/O now.  One log line a second per
 * reactor when a delay is cut or the budget spent. */
static uint64_t retry_delay_ns(struct rview *v, struct vol_io *io, const struct mp_path *p,
			       unsigned crd, bool *over)
{
	struct mpio *m = mpio_of(io);
	uint64_t now = reactor_now_ns(), want = 0, d, lim;
	uint64_t drain = LOAD(((struct vol_mp *)io->vol->priv)->drain_at);
	const char *why = NULL;

	*over = false;
	/* CRDT is from Identify, read on reactor 0 at bring-up and not
	 * changed while the path is attached. */
	if (crd && p->ctrl.id)
		want = (uint64_t)p->ctrl.id->crdt[crd - 1] * 100 * NSEC_PER_MSEC;
	if (!want)
		return 0;
	if (!m->wait_start)
		m->wait_start = now;
	d = want;
	if (d > MP_RETRY_DELAY_MAX_NS) {
		d = MP_RETRY_DELAY_MAX_NS;
		why = "the gateway's maximum";
	}
	lim = wait_limit(v, io);
	if (lim != MP_FOREVER) {
		uint64_t used = now - m->wait_start;
		if (used >= lim) {
			*over = true;
			d = 0;
			why = "its deadline has passed";
		} else if (d > lim - used) {
			d = lim - used;
			why = "its deadline";
		}
	}
	if (drain && !*over) {
		if (now >= drain) {
			*over = true;
			d = 0;
			why = "the export is being removed";
		} else if (d > drain - now) {
			d = drain - now;
			why = "the export's removal";
		}
	}
	if (!why)
		return d;
	if (now - v->crd_logged_ns >= NSEC_PER_SEC) {
		char more[48] = "";
		if (v->crd_quiet)
			snprintf(more, sizeof(more), " (and %u more since the last line)", v->crd_quiet);
		char limit[40] = "";
		if (lim != MP_FOREVER)
			snprintf(limit, sizeof(limit), " (wait limit %.0f s)", (double)lim / 1e9);
		if (*over)
			log_err("%s: %s of %llu bytes at %llu failed: path %u asks a retry delay of "
				"%.1f s (CRD %u) and %s%s%s",
				io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
				(unsigned long long)io->offset, p->idx, (double)want / 1e9, crd, why,
				limit, more);
		else
			log_warn("%s: %s of %llu bytes at %llu: path %u asks a retry delay of %.1f s "
				 "(CRD %u); retried after %.3f s, capped by %s%s",
				 io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
				 (unsigned long long)io->offset, p->idx, (double)want / 1e9, crd,
				 (double)d / 1e9, why, more);
		v->crd_logged_ns = now;
		v->crd_quiet = 0;
	} else {
		v->crd_quiet++;
	}
	return d;
}

/* A write in flight on a path whose connection went away may still be
 * carried out by that controller after its host gave up on it (NVMe 2.1
 * Communication Loss Handling): retried at once on another path, a newer
 * write there could be overwritten by it.  A controller reporting a
 * Command Quiesce Time is done with such commands CQT after it noticed the
 * loss, so those writes wait that long before their retry, bounded by
 * the I/O's wait budget and the drain's deadline like a retry delay.
 * CQT 0 (not reported): retried at once, as before.  Reads and flushes are
 * not held back: a late one changes nothing. */
static uint64_t cqt_delay_ns(struct rview *v, struct vol_io *io, const struct mp_path *p)
{
	struct mpio *m = mpio_of(io);
	uint64_t now = reactor_now_ns(), want, d, lim;
	uint64_t drain = LOAD(((struct vol_mp *)io->vol->priv)->drain_at);

	if (io->op != VOL_WRITE && io->op != VOL_WRITE_ZEROES && io->op != VOL_TRIM)
		return 0;
	/* Identify is read on reactor 0 at bring-up, as for CRDT. */
	if (!p->ctrl.id || !p->ctrl.id->cqt)
		return 0;
	want = d = (uint64_t)p->ctrl.id->cqt * NSEC_PER_MSEC;
	if (!m->wait_start)
		m->wait_start = now;
	lim = wait_limit(v, io);
	if (lim != MP_FOREVER) {
		uint64_t used = now - m->wait_start;
		if (used >= lim)
			d = 0;
		else if (d > lim - used)
			d = lim - used;
	}
	if (drain && d > (now >= drain ? 0 : drain - now))
		d = now >= drain ? 0 : drain - now;
	if (now - v->cqt_logged_ns >= NSEC_PER_SEC) {
		char more[48] = "";
		if (v->cqt_quiet)
			snprintf(more, sizeof(more), " (and %u more since the last line)", v->cqt_quiet);
		log_notice("%s: %s of %llu bytes at %llu was in flight on path %u when it was lost: "
			   "retried after %.3f s (CQT %.3f s)%s",
			   io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
			   (unsigned long long)io->offset, p->idx, (double)d / 1e9,
			   (double)want / 1e9, more);
		v->cqt_logged_ns = now;
		v->cqt_quiet = 0;
	} else {
		v->cqt_quiet++;
	}
	return d;
}

static void nio_done(struct nvmf_io *nio, int err)
{
	struct vol_io *io = nio->ctx;
	struct mpio *m = mpio_of(io);
	struct rview *v = m->view;
	struct vol_mp *n = io->vol->priv;
	struct pstats *st = &v->st[m->path];
	uint16_t status = nio->status;

	STORE(st->in_flight, st->in_flight - 1);
	if (!err) {
		if (io->op == VOL_READ) {
			STORE(st->reads, st->reads + 1);
			STORE(st->read_bytes, st->read_bytes + io->length);
		} else if (io->op == VOL_WRITE || io->op == VOL_WRITE_ZEROES ||
			   io->op == VOL_TRIM) {
			STORE(st->writes, st->writes + 1);
			STORE(st->write_bytes, st->write_bytes + io->length);
			/* Acknowledged into the controller's cache: the next
			 * flush must reach this path. */
			if ((io->op == VOL_WRITE || io->op == VOL_WRITE_ZEROES) &&
			    !(io->flags & VOL_IO_FUA))
				STORE(n->acked[v - v->t->views].n[m->path],
				      n->acked[v - v->t->views].n[m->path] + 1);
		}
		if (m->flushing) {
			struct vpath *vp = &n->vp[m->flush_for];
			uint64_t cur = LOAD(vp->flushed_upto);
			while (cur < m->flush_snap &&
			       !__atomic_compare_exchange_n(&vp->flushed_upto, &cur, m->flush_snap,
							    false, __ATOMIC_RELAXED,
							    __ATOMIC_RELAXED))
				;
			m->flush_next = (uint8_t)(m->flush_for + 1);
			flush_step(v, io);
			return;
		}
		finish(v, io, 0);
		return;
	}
	if (!status) {
		/* The connection went away under the command: it comes back
		 * when a path is usable (another one, or this one after its
		 * reconnect).  Not a retry: nothing was answered. */
		log_debug("%s: %s of %llu bytes at %llu back from path %u (%s); requeued",
			  io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
			  (unsigned long long)io->offset, m->path, strerror(-err));
		retry_later(v, io, cqt_delay_ns(v, io, &v->t->paths[m->path]));
		return;
	}
	STORE(st->errors, st->errors + 1);
	switch (nvme_status_disposition(status)) {
	case NVME_DISP_FAILOVER:
		/* Another path now; this one again after the backoff (not
		 * counted as a retry, bounded by the wait deadline). */
		put_aside(v, n, m->path, status_is_whole_path(status));
		park(v, io);
		snap_kick(v);
		return;
	case NVME_DISP_ANA:
		/* As Linux's ANA_PENDING: not used until the log is read
		 * again (a changed state brings a snapshot) or the backoff
		 * is over, so a refresh that finds nothing new still lets
		 * the I/O go on. */
		if (NVME_STATUS_SC(status) == 0x03)
			m->transition = true;
		put_aside(v, n, m->path, false);
		ask_ana_refresh(v, m->path);
		park(v, io);
		snap_kick(v);
		return;
	case NVME_DISP_RESET:
		put_aside(v, n, m->path, true);
		ask_reset(v, m->path);
		park(v, io);
		snap_kick(v);
		return;
	case NVME_DISP_RETRY:
		if (m->retries < v->t->o.max_retries) {
			bool over;
			uint64_t delay = retry_delay_ns(v, io, &v->t->paths[m->path],
							NVME_STATUS_CRD(status), &over);
			if (over)
				break;
			m->retries++;
			STORE(st->retries, st->retries + 1);
			vol_count_retry(v->r, io);
			retry_later(v, io, delay);
			return;
		}
		break;
	default:
		break;
	}
	finish(v, io, err);
}

/* The FLUSH rule: a flush is answered only after every path that
 * acknowledged a write before it has flushed; if a path was reset while
 * holding acknowledged, unflushed writes (they may have been lost with its
 * volatile cache), the next flush says EIO once, never a false success. */
static void flush_step(struct rview *v, struct vol_io *io)
{
	struct mpio *m = mpio_of(io);
	struct vol_mp *n = io->vol->priv;
	struct mp_target *t = v->t;

	for (; m->flush_next < t->o.nr_paths; m->flush_next++) {
		unsigned i = m->flush_next;
		struct vpath *vp = &n->vp[i];
		uint64_t acked = acked_sum(n, i);
		if (acked <= LOAD(vp->flushed_upto))
			continue;
		struct snap_path *sp = v->cur ? &v->cur->p[i] : NULL;
		if (!sp || !sp->attached)
			continue; /* detached: its loss, if any, is recorded */
		/* The same rules as a write: a path put aside, in an ANA state
		 * that carries no I/O, or resetting, is waited for (bounded),
		 * never sent to again at once. */
		struct nvmf_queue *q = live_queue(v, i);
		unsigned via = i;
		if (q && !aside_for(v, n, i) && !ana_usable(ana_of(sp, LOAD(n->ns.anagrpid)))) {
			/* The controller says it cannot reach the namespace
			 * now (inaccessible, persistent loss, change): flush
			 * the namespace through a usable path, as the Linux
			 * host sends every flush down one path. */
			int j = pick_path(v, n, &q);
			if (j >= 0)
				via = (unsigned)j;
			else
				q = NULL;
		}
		if (!q || aside_for(v, n, i)) {
			if (v->cur->failfast)
				finish(v, io, -EIO);
			else
				wait_for_path(v, io);
			return;
		}
		sp = &v->cur->p[via];
		m->path = (uint8_t)via;
		m->flush_for = (uint8_t)i;
		m->flushing = true;
		m->flush_snap = acked;
		memset(&m->nio, 0, sizeof(m->nio));
		m->nio.op = NVMF_IO_FLUSH;
		m->nio.cb = nio_done;
		m->nio.ctx = io;
		STORE(v->st[via].in_flight, v->st[via].in_flight + 1);
		int ret = nvmf_io_submit(q, &n->ns, sp->max_xfer, &m->nio);
		if (ret < 0) {
			STORE(v->st[via].in_flight, v->st[via].in_flight - 1);
			finish(v, io, ret);
		}
		return;
	}
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct vpath *vp = &n->vp[i];
		uint64_t hi = LOAD(vp->loss_hi), rep = LOAD(vp->loss_reported);
		if (hi > rep && __atomic_compare_exchange_n(&vp->loss_reported, &rep, hi, false,
							    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			log_err("%s: flush fails: path %u was reset with acknowledged writes "
				"not yet flushed; they may be lost",
				io->vol->name, i);
			finish(v, io, -EIO);
			return;
		}
	}
	finish(v, io, 0);
}

static void mp_start(struct vol_io *io)
{
	struct vol_mp *n = io->vol->priv;
	struct mpio *m = mpio_of(io);
	struct rview *v = m->view;
	struct nvmf_queue *q;
	int i;

	if (LOAD(n->failed)) {
		finish(v, io, -EIO);
		return;
	}
	if (io->op == VOL_FLUSH) {
		flush_step(v, io);
		return;
	}
	i = pick_path(v, n, &q);
	if (i < 0) {
		if (v->cur && v->cur->failfast)
			finish(v, io, -EIO);
		else
			wait_for_path(v, io);
		return;
	}
	static const enum nvmf_io_op ops[] = {
		[VOL_READ] = NVMF_IO_READ,
		[VOL_WRITE] = NVMF_IO_WRITE,
		[VOL_FLUSH] = NVMF_IO_FLUSH,
		[VOL_WRITE_ZEROES] = NVMF_IO_WRITE_ZEROES,
		[VOL_TRIM] = NVMF_IO_DISCARD,
	};
	memset(&m->nio, 0, sizeof(m->nio));
	m->path = (uint8_t)i;
	m->nio.op = ops[io->op];
	m->nio.flags = ((io->flags & VOL_IO_FUA) ? NVMF_IO_FUA : 0) |
		       ((io->flags & VOL_IO_NO_HOLE) ? NVMF_IO_NO_DEALLOC : 0);
	m->nio.offset = io->offset;
	m->nio.len = io->length;
	m->nio.iov = io->iov;
	m->nio.iovcnt = io->iovcnt;
	m->nio.cb = nio_done;
	m->nio.ctx = io;
	STORE(v->st[i].in_flight, v->st[i].in_flight + 1);
	int ret = nvmf_io_submit(q, &n->ns, v->cur->p[i].max_xfer, &m->nio);
	if (ret < 0) {
		STORE(v->st[i].in_flight, v->st[i].in_flight - 1);
		finish(v, io, ret);
	}
}

static void forwarded(struct reactor_msg *msg)
{
	mp_start(container_of(msg, struct vol_io, msg));
}

static void mp_submit(struct volume *vol, struct vol_io *io)
{
	struct vol_mp *n = vol->priv;
	struct mp_target *t = n->t;
	unsigned id = io->origin->id < t->nr_reactors ? io->origin->id : 0;
	struct rview *v = &t->views[t->views[id].home];
	struct mpio *m = mpio_of(io);

	m->view = v;
	m->retries = 0;
	m->flush_next = 0;
	m->flushing = false;
	m->transition = false;
	m->wait_start = 0;
	if (v->r == io->origin) {
		/* vol_complete defers when the completion is on the
		 * submitter's own stack, so starting here is safe. */
		mp_start(io);
		return;
	}
	vol_forward(v->r, io, forwarded);
}

/* ---- paths: connect, lose, reconnect, delete (on reactor 0) ---- */

static void path_ready(struct nvmf_ctrl *c, int err);
static void path_lost(struct nvmf_ctrl *c, int err);
static void path_ana(struct nvmf_ctrl *c);

static uint64_t path_anatt_ns(const struct mp_path *p)
{
	unsigned s = p->started && p->ctrl.id && p->ctrl.id->anatt ? p->ctrl.id->anatt
								    : MP_DEFAULT_ANATT_S;
	return (uint64_t)s * NSEC_PER_SEC;
}

static void ana_fire(struct reactor_timer *tm);
static void ana_watch(struct mp_path *p);

static void fast_fire(struct reactor_timer *tm)
{
	struct mp_target *t = container_of(tm, struct mp_target, fast_timer);

	if (any_attached(t) || t->shutting_down)
		return;
	log_err("target %s: no usable path for %d s (fast_io_fail_tmo): failing I/O with EIO "
		"while reconnecting",
		t->o.ctrl.name, t->o.fast_io_fail_tmo_s);
	t->fast_failed = true;
	broadcast(t, NULL, NULL);
}

static void path_delete(struct mp_path *p, const char *why)
{
	struct mp_target *t = p->t;

	log_err("target %s: path %u (%s %s:%s): %s; deleting its controller", t->o.ctrl.name,
		p->idx, nvmf_trtype_name(t->o.paths[p->idx].trtype), t->o.paths[p->idx].traddr,
		t->o.paths[p->idx].trsvcid, why);
	p->deleted = true;
	p->delete_after = false;
	reactor_timer_cancel(&p->reconnect_timer);
	reactor_timer_cancel(&p->loss_timer);
	if (p->started && p->ctrl.state != NVMF_CTRL_DEAD) {
		if (p->ctrl.state == NVMF_CTRL_CONNECTING || p->ctrl.state == NVMF_CTRL_RESETTING)
			nvmf_ctrl_set_state(&p->ctrl, NVMF_CTRL_DELETING);
		if (p->ctrl.state == NVMF_CTRL_DELETING)
			nvmf_ctrl_set_state(&p->ctrl, NVMF_CTRL_DEAD);
	}
	if (all_deleted(t))
		log_err("target %s: every path is deleted; its exports fail with EIO until an "
			"operator reset (nvmf-gateway reset %s) or a reload",
			t->o.ctrl.name, t->o.ctrl.name);
	broadcast(t, NULL, NULL);
}

static void reconnect_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, reconnect_timer);
	struct mp_target *t = p->t;
	int ret;

	if (t->shutting_down || p->deleted)
		return;
	p->connecting = true;
	p->reconnects++;
	log_info("target %s: path %u: reconnecting (attempt %u)", t->o.ctrl.name, p->idx,
		 p->reconnects);
	if (!p->started) {
		struct nvmf_ctrl_opts co = t->o.ctrl;
		co.path = t->o.paths[p->idx];
		snprintf(co.name, sizeof(co.name), "%.48s/path%u", t->o.ctrl.name, p->idx);
		struct reactor **qr = calloc(co.nr_io_queues ? co.nr_io_queues : 1, sizeof(*qr));
		if (!qr)
			abort();
		for (unsigned q = 0; q < co.nr_io_queues; q++)
			qr[q] = t->reactors[q % t->nr_reactors];
		p->ctrl.owner = p;
		p->ctrl.lost_cb = path_lost;
		p->ctrl.ana_cb = path_ana;
		p->started = true;
		ret = nvmf_ctrl_connect(&p->ctrl, &co, t->r, qr, path_ready);
		if (ret < 0) {
			/* nvmf_ctrl_connect freed what it had allocated. */
			free(qr);
			p->started = false;
			p->connecting = false;
			path_delete(p, "cannot create its controller");
		}
		return;
	}
	ret = nvmf_ctrl_reconnect(&p->ctrl, path_ready);
	if (ret < 0) {
		p->connecting = false;
		path_delete(p, "cannot reconnect its controller");
	}
}

static void loss_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, loss_timer);

	if (p->attached || p->deleted || p->t->shutting_down)
		return;
	if (p->connecting) {
		p->delete_after = true; /* let the attempt finish first */
		return;
	}
	path_delete(p, "ctrl_loss_tmo expired");
}

static void schedule_reconnect(struct mp_path *p, bool now)
{
	struct mp_target *t = p->t;
	uint64_t delay = now ? 0 : (uint64_t)t->o.reconnect_delay_ms * NSEC_PER_MSEC;

	reactor_timer_arm(t->r, &p->reconnect_timer, delay);
}

/* The target says the namespace of vol n is now in ANA group grp (path p
 * re-identified it, or its ANA log page lists it there).  The data path
 * looks the volume's state up by this group in each path's snapshot, where
 * a group no namespace of the path is in reads as unusable: left at the
 * old group, every path would look unusable and I/O would fail with EIO at
 * fast_io_fail_tmo.  The caller broadcasts a snapshot next; until it
 * arrives a reactor may see the new group in the old snapshot, and the
 * I/O waits for it (snapshots kick the waiting I/O). */
static void vol_regroup(struct vol_mp *n, const struct mp_path *p, uint32_t grp, const char *how)
{
	uint32_t old = LOAD(n->ns.anagrpid);

	if (grp == old)
		return;
	log_notice("%s: nsid %u of target %s is now in ANA group %u (was %u; path %u, %s)",
		   n->v.name, n->ns.nsid, p->t->o.ctrl.name, grp, old, p->idx, how);
	STORE(n->ns.anagrpid, grp);
}

/* Every namespace the volumes use must be the same one behind this path
 * as behind the path the volume was built from.  After a (re)connect
 * (reidentified), the path's group for it is the target's current one. */
static void check_identity(struct mp_path *p, bool reidentified)
{
	struct mp_target *t = p->t;

	for (unsigned i = 0; i < t->nr_vols; i++) {
		struct vol_mp *n = t->vols[i];
		const struct nvmf_ns *ns = nvmf_ctrl_find_ns(&p->ctrl, n->ns.nsid);
		const char *why = NULL;
		bool other = false;
		if (!ns) {
			why = "the namespace is gone";
		} else if (memcmp(ns->nguid, n->ns.nguid, 16) ||
			   memcmp(ns->eui64, n->ns.eui64, 8)) {
			why = "it is another namespace (NGUID/EUI-64 differ)";
			other = true;
		} else if (ns->nsze != n->ns.nsze) {
			why = "the namespace size changed";
		} else if (ns->lba_size != n->ns.lba_size) {
			why = "the LBA format changed";
		}
		n->excluded[p->idx] = why != NULL;
		STORE(n->bad_path[p->idx], why != NULL);
		if (!why) {
			/* The same namespace in another group: the target
			 * moved it (ANACAP allows it).  Not at volume creation,
			 * where the other paths' tables may be older than the
			 * one the volume was built from. */
			if (reidentified)
				vol_regroup(n, p, ns->anagrpid, "Identify Namespace");
			continue;
		}
		if (other) {
			/* Another namespace behind this path: refuse the path
			 * for this volume, the others still serve it. */
			log_err("%s: path %u of target %s: nsid %u: %s; this path is not used for "
				"it",
				n->v.name, p->idx, t->o.ctrl.name, n->ns.nsid, why);
			continue;
		}
		/* The same namespace with another geometry: offsets no
		 * longer mean what the exporters think they mean. */
		log_err("%s: path %u of target %s: nsid %u: %s; failing the export rather than "
			"risking its data",
			n->v.name, p->idx, t->o.ctrl.name, n->ns.nsid, why);
		STORE(n->failed, true);
	}
}

static void first_result(struct mp_target *t)
{
	if (!t->first_pending || --t->first_pending)
		return;
	mp_target_cb cb = t->connect_cb;
	t->connect_cb = NULL;
	if (cb)
		cb(t, any_attached(t) ? 0 : -ENOTCONN, t->connect_arg);
}

static void path_ready(struct nvmf_ctrl *c, int err)
{
	struct mp_path *p = c->owner;
	struct mp_target *t = p->t;

	p->connecting = false;
	if (t->shutting_down)
		return;
	bool first = !p->first_done;
	p->first_done = true;
	if (err) {
		if (err == -EACCES || err == -EPERM) {
			/* Refused credentials or host: trying again changes
			 * nothing until the configuration does. */
			path_delete(p, "the target refused this host");
		} else if (p->delete_after) {
			path_delete(p, "ctrl_loss_tmo expired");
		} else {
			if (!p->lost_ns) {
				p->lost_ns = reactor_now_ns();
				if (t->o.ctrl_loss_tmo_s >= 0)
					reactor_timer_arm(t->r, &p->loss_timer,
							  (uint64_t)t->o.ctrl_loss_tmo_s *
								  NSEC_PER_SEC);
			}
			schedule_reconnect(p, false);
		}
		if (first)
			first_result(t);
		return;
	}
	check_identity(p, true);
	p->regroups_seen = p->ctrl.ana_regroups;
	reactor_timer_cancel(&p->loss_timer);
	if (p->lost_ns)
		log_notice("target %s: path %u live again after %.1f s", t->o.ctrl.name, p->idx,
			   (double)(reactor_now_ns() - p->lost_ns) / 1e9);
	p->lost_ns = 0;
	p->attached = true;
	t->fast_failed = false;
	reactor_timer_cancel(&t->fast_timer);
	uint64_t anatt = 0;
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (t->paths[i].attached && path_anatt_ns(&t->paths[i]) > anatt)
			anatt = path_anatt_ns(&t->paths[i]);
	STORE(t->anatt_ns, anatt);
	p->change_ns = 0;
	ana_watch(p);
	broadcast(t, NULL, NULL);
	if (first)
		first_result(t);
}

/* Every reactor has dropped the lost path's queues: they may be freed by
 * the reconnect. */
static void path_detached(struct mp_path *p)
{
	if (p->deleted)
		return;
	schedule_reconnect(p, p->reset_now);
	p->reset_now = false;
}

static void path_lost(struct nvmf_ctrl *c, int err)
{
	struct mp_path *p = c->owner;
	struct mp_target *t = p->t;

	(void)err;
	p->attached = false;
	p->lost_ns = reactor_now_ns();
	p->change_ns = 0;
	reactor_timer_cancel(&p->ana_timer);
	/* Writes acknowledged on this controller and not flushed may have
	 * died with its volatile cache. */
	if (c->id && (c->id->vwc & 1))
		for (unsigned i = 0; i < t->nr_vols; i++) {
			struct vpath *vp = &t->vols[i]->vp[p->idx];
			uint64_t acked = acked_sum(t->vols[i], p->idx);
			if (acked > LOAD(vp->flushed_upto)) {
				log_warn("%s: path %u was reset with %llu acknowledged writes not "
					 "flushed; the next flush reports EIO",
					 t->vols[i]->v.name, p->idx,
					 (unsigned long long)(acked - LOAD(vp->flushed_upto)));
				STORE(vp->loss_hi, acked);
				STORE(vp->flushed_upto, acked);
			}
		}
	if (t->o.ctrl_loss_tmo_s >= 0 && !p->reset_now)
		reactor_timer_arm(t->r, &p->loss_timer,
				  (uint64_t)t->o.ctrl_loss_tmo_s * NSEC_PER_SEC);
	if (!any_attached(t) && t->o.fast_io_fail_tmo_s >= 0 && !t->fast_timer.armed)
		reactor_timer_arm(t->r, &t->fast_timer,
				  (uint64_t)t->o.fast_io_fail_tmo_s * NSEC_PER_SEC);
	broadcast(t, path_detached, p);
}

/* A namespace of the path is in the ANA change state: the controller
 * promises a new state within ANATT.  As the Linux host: wait that long,
 * then reset the controller.  Unlike it, read the log every second while
 * waiting, so a target that changes state without an event is seen. */
static void ana_watch(struct mp_path *p)
{
	bool change = false;

	for (unsigned i = 0; p->attached && i < p->ctrl.nr_ns; i++)
		change |= p->ctrl.ns[i].ana_state == NVME_ANA_CHANGE;
	if (!change) {
		if (p->change_ns)
			log_info("target %s: path %u: ANA transition over after %.1f s",
				 p->t->o.ctrl.name, p->idx,
				 (double)(reactor_now_ns() - p->change_ns) / 1e9);
		p->change_ns = 0;
		reactor_timer_cancel(&p->ana_timer);
		return;
	}
	if (!p->change_ns) {
		p->change_ns = reactor_now_ns();
		log_notice("target %s: path %u: ANA transition; waiting up to ANATT %.0f s",
			   p->t->o.ctrl.name, p->idx, (double)path_anatt_ns(p) / 1e9);
	}
	if (!p->ana_timer.armed)
		reactor_timer_arm(p->t->r, &p->ana_timer, MP_BACKOFF_NS);
}

static void ana_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, ana_timer);
	uint64_t now = reactor_now_ns();

	if (!p->attached || !p->change_ns || p->t->shutting_down)
		return;
	if (now - p->change_ns >= path_anatt_ns(p)) {
		log_err("target %s: path %u: ANA transition not over after ANATT (%.0f s); "
			"resetting the controller",
			p->t->o.ctrl.name, p->idx, (double)path_anatt_ns(p) / 1e9);
		p->change_ns = 0;
		if (p->ctrl.state == NVMF_CTRL_LIVE)
			nvmf_ctrl_reset(&p->ctrl, -ETIMEDOUT, "ANATT expired");
		return;
	}
	nvmf_ctrl_ana_refresh(&p->ctrl);
	reactor_timer_arm(p->t->r, &p->ana_timer, MP_BACKOFF_NS);
}

static void path_ana(struct nvmf_ctrl *c)
{
	struct mp_path *p = c->owner;

	if (p->attached) {
		/* The log page just applied moved a namespace to another
		 * group (nvmf_ctrl_ana_apply follows its NSID lists): the
		 * volumes follow it.  Only then: a path whose table no page
		 * moved (its target lists no NSIDs, or it has not read the
		 * new page yet) may still hold the old group, and must not
		 * move the volumes back. */
		if (c->ana_regroups != p->regroups_seen) {
			p->regroups_seen = c->ana_regroups;
			for (unsigned i = 0; i < p->t->nr_vols; i++) {
				struct vol_mp *n = p->t->vols[i];
				const struct nvmf_ns *ns = nvmf_ctrl_find_ns(c, n->ns.nsid);
				if (ns && !n->excluded[p->idx])
					vol_regroup(n, p, ns->anagrpid, "ANA log page");
			}
		}
		ana_watch(p);
		broadcast(p->t, NULL, NULL);
	}
}

void mp_target_reset(struct mp_target *t)
{
	t->fast_failed = false;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		if (p->attached) {
			p->reset_now = true;
			nvmf_ctrl_reset(&p->ctrl, -ECONNRESET, "requested by the operator");
		} else if (p->deleted) {
			log_notice("target %s: path %u: reconnecting as the operator asked",
				   t->o.ctrl.name, i);
			p->deleted = false;
			p->lost_ns = reactor_now_ns();
			if (t->o.ctrl_loss_tmo_s >= 0)
				reactor_timer_arm(t->r, &p->loss_timer,
						  (uint64_t)t->o.ctrl_loss_tmo_s * NSEC_PER_SEC);
			schedule_reconnect(p, true);
		} else if (!p->connecting) {
			schedule_reconnect(p, true);
		}
	}
	broadcast(t, NULL, NULL);
}

void mp_target_link_event(struct mp_target *t, unsigned idx, bool up, const char *why)
{
	struct mp_path *p;

	if (idx >= t->o.nr_paths || t->shutting_down)
		return;
	p = &t->paths[idx];
	if (!up) {
		/* The connection cannot outlive its interface: fail it now
		 * as a transport error would, rather than when keep-alive
		 * notices (the I/O moves to another path or waits). */
		if (p->attached && p->ctrl.state == NVMF_CTRL_LIVE) {
			log_notice("target %s: path %u: %s; failing the path over", t->o.ctrl.name,
				   idx, why);
			nvmf_ctrl_reset(&p->ctrl, -ENETDOWN, why);
		}
		return;
	}
	if (p->attached || p->deleted || p->connecting)
		return;
	log_notice("target %s: path %u: %s; reconnecting now", t->o.ctrl.name, idx, why);
	if (p->reconnect_timer.armed)
		schedule_reconnect(p, true);
	else
		p->reset_now = true; /* still detaching: path_detached reconnects at once */
}

/* ---- target lifecycle ---- */

int mp_target_create(const struct mp_target_opts *o, struct reactor **reactors,
		     unsigned nr_reactors, struct mp_target **out)
{
	struct mp_target *t;

	if (!o->nr_paths || o->nr_paths > MP_MAX_PATHS || !nr_reactors)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->o = *o;
	t->r = reactors[0];
	t->nr_reactors = nr_reactors;
	t->reactors = calloc(nr_reactors, sizeof(*t->reactors));
	t->views = calloc(nr_reactors, sizeof(*t->views));
	if (!t->reactors || !t->views) {
		free(t->reactors);
		free(t->views);
		free(t);
		return -ENOMEM;
	}
	memcpy(t->reactors, reactors, nr_reactors * sizeof(*reactors));
	reactor_timer_init(&t->fast_timer, fast_fire);
	if (o->fast_io_fail_tmo_s >= 0)
		t->wait_ns = (uint64_t)o->fast_io_fail_tmo_s * NSEC_PER_SEC;
	else if (o->ctrl_loss_tmo_s >= 0)
		t->wait_ns = (uint64_t)o->ctrl_loss_tmo_s * NSEC_PER_SEC;
	else
		t->wait_ns = MP_FOREVER;
	t->anatt_ns = (uint64_t)MP_DEFAULT_ANATT_S * NSEC_PER_SEC;
	if (t->wait_ns == MP_FOREVER)
		log_warn("target %s: fast_io_fail_tmo and ctrl_loss_tmo are both off: I/O waits "
			 "for a usable path for ever (as dm-multipath's queue_if_no_path)",
			 o->ctrl.name);
	unsigned nq = o->ctrl.nr_io_queues ? o->ctrl.nr_io_queues : 1;
	for (unsigned k = 0; k < nr_reactors; k++) {
		struct rview *v = &t->views[k];
		v->t = t;
		v->r = reactors[k];
		/* A reactor without a queue of its own hands its I/O to the
		 * reactor that owns queue k mod nq. */
		v->home = k < nq ? k : k % nq;
		list_init(&v->parked);
		list_init(&v->delayed);
		reactor_timer_init(&v->delay_timer, delay_fire);
		reactor_timer_init(&v->wait_timer, wait_fire);
	}
	for (unsigned i = 0; i < o->nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		p->t = t;
		p->idx = i;
		reactor_timer_init(&p->reconnect_timer, reconnect_fire);
		reactor_timer_init(&p->loss_timer, loss_fire);
		reactor_timer_init(&p->ana_timer, ana_fire);
	}
	*out = t;
	return 0;
}

void mp_target_connect(struct mp_target *t, mp_target_cb cb, void *arg)
{
	t->connect_cb = cb;
	t->connect_arg = arg;
	t->first_pending = t->o.nr_paths;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		p->reconnects = 0;
		reconnect_fire(&p->reconnect_timer);
		p->reconnects = 0;
		if (p->deleted && !p->first_done) {
			p->first_done = true;
			first_result(t);
		}
	}
}

static void path_shut(struct nvmf_ctrl *c, int err)
{
	struct mp_path *p = c->owner;
	struct mp_target *t = p->t;

	(void)err;
	p->attached = false;
	if (--t->shutdown_pending == 0 && t->shutdown_cb)
		t->shutdown_cb(t, 0, t->shutdown_arg);
}

void mp_target_shutdown(struct mp_target *t, mp_target_cb cb, void *arg)
{
	t->shutting_down = true;
	t->shutdown_cb = cb;
	t->shutdown_arg = arg;
	t->connect_cb = NULL;
	reactor_timer_cancel(&t->fast_timer);
	t->shutdown_pending = 1;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		reactor_timer_cancel(&p->reconnect_timer);
		reactor_timer_cancel(&p->loss_timer);
		reactor_timer_cancel(&p->ana_timer);
		if (!p->started)
			continue;
		t->shutdown_pending++;
		nvmf_ctrl_shutdown(&p->ctrl, path_shut);
	}
	if (--t->shutdown_pending == 0 && cb)
		cb(t, 0, arg);
}

void mp_target_free(struct mp_target *t)
{
	if (!t)
		return;
	reactor_timer_cancel(&t->fast_timer);
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		reactor_timer_cancel(&p->reconnect_timer);
		reactor_timer_cancel(&p->loss_timer);
		reactor_timer_cancel(&p->ana_timer);
		if (p->started) {
			free(p->ctrl.io_reactors);
			nvmf_ctrl_free(&p->ctrl);
		}
	}
	for (unsigned k = 0; k < t->nr_reactors; k++) {
		reactor_timer_cancel(&t->views[k].delay_timer);
		reactor_timer_cancel(&t->views[k].wait_timer);
		free(t->views[k].cur);
	}
	free(t->views);
	free(t->reactors);
	free(t->vols);
	free(t);
}

unsigned mp_target_paths(struct mp_target *t, struct mp_path_info *out, unsigned max)
{
	unsigned n = t->o.nr_paths < max ? t->o.nr_paths : max;

	for (unsigned i = 0; i < n; i++) {
		struct mp_path *p = &t->paths[i];
		struct mp_path_info *pi = &out[i];
		memset(pi, 0, sizeof(*pi));
		pi->opts = &t->o.paths[i];
		pi->state = p->started ? p->ctrl.state : NVMF_CTRL_NEW;
		if (p->deleted && pi->state != NVMF_CTRL_LIVE)
			pi->state = NVMF_CTRL_DEAD;
		pi->cntlid = p->attached ? p->ctrl.cntlid : 0;
		pi->reconnects = p->reconnects;
		pi->ana_state = 0;
		if (p->attached && p->ctrl.nr_ns) {
			uint32_t nsid = t->nr_vols ? t->vols[0]->ns.nsid : p->ctrl.ns[0].nsid;
			const struct nvmf_ns *ns = nvmf_ctrl_find_ns(&p->ctrl, nsid);
			pi->ana_state = ns ? ns->ana_state : 0;
		}
		for (unsigned k = 0; k < t->nr_reactors; k++) {
			struct pstats *st = &t->views[k].st[i];
			pi->reads += LOAD(st->reads);
			pi->writes += LOAD(st->writes);
			pi->read_bytes += LOAD(st->read_bytes);
			pi->write_bytes += LOAD(st->write_bytes);
			pi->errors += LOAD(st->errors);
			pi->retries += LOAD(st->retries);
			pi->in_flight += LOAD(st->in_flight);
		}
	}
	return n;
}

/* ---- the volume ---- */

static void mp_vol_destroy(struct volume *vol)
{
	struct vol_mp *n = vol->priv;
	struct mp_target *t = n->t;

	for (unsigned i = 0; i < t->nr_vols; i++)
		if (t->vols[i] == n) {
			t->vols[i] = t->vols[--t->nr_vols];
			break;
		}
	free(vol->stats);
	free(n->acked);
	free(n);
}

static const struct vol_ops mp_vol_ops = {
	.name = "nvmf",
	.submit = mp_submit,
	.destroy = mp_vol_destroy,
};

void vol_mp_drain(struct volume *vol)
{
	struct vol_mp *n = vol->priv;

	if (vol->ops != &mp_vol_ops || LOAD(n->drain_at))
		return;
	/* Parked I/O is looked at every MP_BACKOFF_NS: no message needed. */
	STORE(n->drain_at, reactor_now_ns() + MP_DRAIN_NS);
}

int vol_mp_create(const char *name, struct mp_target *t, uint32_t nsid, bool read_only,
		  struct volume **out)
{
	const struct nvmf_ns *ns = NULL;
	struct mp_path *from = NULL;
	struct vol_mp *n;
	char caps[128];

	for (unsigned i = 0; i < t->o.nr_paths && !from; i++) {
		struct mp_path *p = &t->paths[i];
		if (p->attached && (ns = nvmf_ctrl_find_ns(&p->ctrl, nsid)))
			from = p;
	}
	if (!from) {
		log_err("%s: target %s has no live path with an active namespace %u", name,
			t->o.ctrl.name, nsid);
		return -ENOENT;
	}
	struct vol_mp **vols = realloc(t->vols, (t->nr_vols + 1) * sizeof(*vols));
	if (!vols)
		return -ENOMEM;
	t->vols = vols;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->v.stats = calloc(t->nr_reactors, sizeof(*n->v.stats));
	n->acked = aligned_alloc(64, t->nr_reactors * sizeof(*n->acked));
	if (!n->v.stats || !n->acked) {
		free(n->v.stats);
		free(n->acked);
		free(n);
		return -ENOMEM;
	}
	memset(n->acked, 0, t->nr_reactors * sizeof(*n->acked));
	n->t = t;
	n->ns = *ns;
	n->v.nr_stats = t->nr_reactors;
	snprintf(n->v.name, sizeof(n->v.name), "%s", name);
	n->v.ops = &mp_vol_ops;
	n->v.priv = n;
	n->v.size = ns->nsze << ns->lba_shift;
	n->v.block_size = ns->lba_size;
	n->v.pref_io = ns->optimal_io > ns->lba_size ? ns->optimal_io : ns->lba_size;
	if (n->v.pref_io < 4096 && 4096 % ns->lba_size == 0)
		n->v.pref_io = 4096;
	/* Exporters may send up to 32 MiB; the I/O layer splits it at each
	 * path's transfer limit. */
	n->v.max_io = 32u << 20;
	n->v.caps = VOL_CAP_FUA;
	if (read_only)
		n->v.caps |= VOL_CAP_READ_ONLY;
	const struct nvme_id_ctrl *id = from->ctrl.id;
	/* Writes may sit in the volatile cache of whichever path took them:
	 * flush is offered when any live path has one, and when a path is
	 * not up yet (its cache is unknown and the capability cannot change
	 * once exported; a flush to a controller without one is harmless). */
	unsigned vwc = 0, unknown = 0;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		const struct mp_path *p = &t->paths[i];
		if (!p->attached)
			unknown++;
		else if (p->ctrl.id->vwc & NVME_CTRL_VWC_PRESENT)
			vwc++;
	}
	if (vwc || unknown)
		n->v.caps |= VOL_CAP_FLUSH;
	if (unknown && !vwc)
		log_info("%s: flush offered: %u of %u paths not connected yet, their write cache "
			 "unknown",
			 name, unknown, t->o.nr_paths);
	else if (vwc && vwc + unknown < t->o.nr_paths)
		log_info("%s: flush offered: %u of %u paths have a volatile write cache", name, vwc,
			 t->o.nr_paths);
	if (id->oncs & NVME_CTRL_ONCS_DSM)
		n->v.caps |= VOL_CAP_TRIM;
	if (id->oncs & NVME_CTRL_ONCS_WRITE_ZEROES) {
		n->v.caps |= VOL_CAP_WRITE_ZEROES;
		/* DLFEAT: bit 3 = Write Zeroes may deallocate, bits 2:0 = 1 =
		 * deallocated blocks read as zeroes. */
		if ((ns->dlfeat & 0x8) && (ns->dlfeat & 0x7) == 1)
			n->v.caps |= VOL_CAP_FAST_ZERO;
	}
	t->vols[t->nr_vols++] = n;
	/* The other live paths must show the same namespace. */
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (t->paths[i].attached && &t->paths[i] != from)
			check_identity(&t->paths[i], false);
	log_info("%s: namespace %u of %s: %llu bytes, %u-byte blocks, %s, %u paths (%s)", name,
		 nsid, t->o.ctrl.name, (unsigned long long)n->v.size, n->v.block_size,
		 vol_caps_str(n->v.caps, caps, sizeof(caps)), t->o.nr_paths,
		 mp_policy_name(t->o.policy));
	*out = &n->v;
	return 0;
}
