/* Multipath: the data path on each I/O's home reactor, and the
 * "nvmf" volume over a target.  See mpath.h for the rules;
 * the comments here say why the code is shaped the way it is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/io.h"
#include "gateway/volume/mpath_priv.h"
#include "transports/status.h"

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

	unsigned np = mp_nr_paths(t);

	if (!v->cur)
		return -1;
	for (unsigned k = 0; k < np; k++) {
		/* Round-robin starts the scan at a moving index; the others
		 * always from path 0, so failover sticks to the first good
		 * path in configuration order. */
		unsigned i = t->o.policy == MP_ROUND_ROBIN ? (v->rr + k) % np : k;
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

/* io waits for a usable path (parked, or for a retry after that) until
 * it is sent down one or completes: counted once meanwhile, so that the
 * exporters can bound the buffers a target's outage pins. */
static void path_wait_begin(struct vol_io *io)
{
	struct mpio *m = mpio_of(io);

	/* Only what holds a data buffer: a parked 1 GiB discard holds none
	 * and would have used up the share of every volume (review). */
	if (m->path_wait || (io->op != VOL_READ && io->op != VOL_WRITE))
		return;
	m->path_wait = true;
	vol_path_wait_add(io->vol, io->length);
}

static void path_wait_end(struct vol_io *io)
{
	struct mpio *m = mpio_of(io);

	if (!m->path_wait)
		return;
	m->path_wait = false;
	vol_path_wait_sub(io->vol, io->length);
}

static void finish(struct rview *v, struct vol_io *io, int err)
{
	path_wait_end(io);
	vol_complete(v->r, io, err);
}

static bool ana_usable(uint8_t st)
{
	return st == NVME_ANA_OPTIMIZED || st == NVME_ANA_NON_OPTIMIZED;
}

/* The group of vol n is changing ANA state behind an attached path. */
static bool in_transition(struct rview *v, struct vol_mp *n)
{
	for (unsigned i = 0, np = mp_nr_paths(v->t); v->cur && i < np; i++)
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
	for (unsigned i = 0, np = mp_nr_paths(v->t); v->cur && i < np; i++)
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
		path_wait_begin(io);
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

/* io came back unanswered by anything a retry counts (its connection went
 * away under it, a status about the path) and is to go out again.  While
 * some path is usable at each such moment it never waits for one, so the
 * wait bound alone never ended it: two paths taking turns to reconnect, or
 * to answer a path error once the other's backoff is over, sent it back and
 * forth for ever, and a drain waited for it.  Its wait clock runs from the
 * first return too; past its wait bound (at least two backoffs, as
 * wait_limit gives a path put aside, so that fast_io_fail_tmo = 0 still
 * lets one return go to another path) or the drain's deadline, it fails
 * with EIO here.  false: io is completed. */
static bool may_resend(struct rview *v, struct vol_io *io, const char *why, bool counted)
{
	struct mpio *m = mpio_of(io);
	struct vol_mp *n = io->vol->priv;
	uint64_t now = reactor_now_ns(), lim = wait_limit(v, io), drain = LOAD(n->drain_at);
	bool drained = drain && now >= drain;

	/* The clock counts a run of quick bounces, not the I/O's life: an
	 * attempt that stayed in flight a backoff or more had a usable path
	 * that long, so its return starts a new run (a healthy path's I/O
	 * lost in a later, unrelated reset must not fail for the first
	 * one).  A return counted as a retry (its own timeout) is bounded by
	 * max_retries instead, as the README's bound says; the drain bounds
	 * every one. */
	if (!m->wait_start || counted || now - m->due_ns >= MP_BACKOFF_NS)
		m->wait_start = now;
	if (lim != MP_FOREVER && lim < 2 * MP_BACKOFF_NS)
		lim = 2 * MP_BACKOFF_NS;
	if (!drained && (lim == MP_FOREVER || now - m->wait_start < lim))
		return true;
	if (now - v->expired_logged_ns >= NSEC_PER_SEC) {
		char more[48] = "";
		if (v->expired_quiet)
			snprintf(more, sizeof(more), " (and %u more since the last line)",
				 v->expired_quiet);
		/* The drain's words are wait_for_path's: one line to look for. */
		if (drained)
			log_err("%s: %s of %llu bytes at %llu failed with EIO: the export is being "
				"removed and no path was usable for %.3f s (the last: %s on path "
				"%u)%s",
				io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
				(unsigned long long)io->offset, (double)(now - m->wait_start) / 1e9,
				why, m->path, more);
		else
			log_err("%s: %s of %llu bytes at %llu failed with EIO: %s on path %u, %.3f s "
				"after it first had to wait or be sent again (limit %.0f s)%s",
				io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
				(unsigned long long)io->offset, why, m->path,
				(double)(now - m->wait_start) / 1e9, (double)lim / 1e9, more);
		v->expired_logged_ns = now;
		v->expired_quiet = 0;
	} else {
		v->expired_quiet++;
	}
	finish(v, io, -EIO);
	return false;
}

/* Resubmit what waited for a path; those that still find none park again
 * (at the tail, keeping their order). */
void mp_snap_kick(struct rview *v)
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

void mp_delay_fire(struct reactor_timer *tm)
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
		mp_snap_kick(v);
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
void mp_wait_fire(struct reactor_timer *tm)
{
	struct rview *v = container_of(tm, struct rview, wait_timer);
	struct mp_target *t = v->t;
	uint64_t now = reactor_now_ns();
	bool aside = false, reread[MP_MAX_PATHS] = { false };
	struct list_node *node;
	unsigned np = mp_nr_paths(t);

	for (unsigned i = 0; i < np; i++) {
		if (v->stale_until[i] && v->stale_until[i] <= now)
			v->stale_until[i] = 0;
		aside |= v->stale_until[i] != 0;
	}
	for (node = v->parked.next; v->cur && node != &v->parked; node = node->next) {
		struct vol_io *io = io_of(container_of(node, struct mpio, link));
		uint32_t grp = LOAD(((struct vol_mp *)io->vol->priv)->ns.anagrpid);
		for (unsigned i = 0; i < np; i++)
			if (v->cur->p[i].attached && !ana_usable(ana_of(&v->cur->p[i], grp)))
				reread[i] = true;
	}
	for (unsigned i = 0; i < np; i++)
		if (reread[i])
			ask_ana_refresh(v, i);
	mp_snap_kick(v);
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
		 * reconnect).  Not a retry when nothing was answered because
		 * something else took the connection down.  One that timed
		 * out itself took it down (Abort not honoured, as nvmet never
		 * does, or its grace over): a retry, as an aborted command is,
		 * else a command the target never answers resets a controller
		 * and goes to the next live path for ever. */
		if (nio->timed_out) {
			unsigned tmo_ms = nio->q ? nio->q->io_timeout_ms : 0;
			if (m->timeouts < UINT8_MAX)
				m->timeouts++;
			if (m->retries >= v->t->o.max_retries) {
				log_err("%s: %s of %llu bytes at %llu failed with ETIMEDOUT: it timed "
					"out on %u of %u attempts (io_timeout %.3f s, max_retries %u)",
					io->vol->name, vol_op_name(io->op),
					(unsigned long long)io->length, (unsigned long long)io->offset,
					m->timeouts, m->retries + 1u, (double)tmo_ms / 1e3,
					v->t->o.max_retries);
				finish(v, io, -ETIMEDOUT);
				return;
			}
			m->retries++;
			STORE(st->retries, st->retries + 1);
			vol_count_retry(v->r, io);
		}
		if (!may_resend(v, io, nio->timed_out ? "timed out" : "lost with its connection",
				 nio->timed_out))
			return;
		log_debug("%s: %s of %llu bytes at %llu back from path %u (%s%s); requeued",
			  io->vol->name, vol_op_name(io->op), (unsigned long long)io->length,
			  (unsigned long long)io->offset, m->path, strerror(-err),
			  nio->timed_out ? ", timed out" : "");
		retry_later(v, io, cqt_delay_ns(v, io, &v->t->paths[m->path]));
		return;
	}
	STORE(st->errors, st->errors + 1);
	switch (nvme_status_disposition(status)) {
	case NVME_DISP_FAILOVER:
		/* Another path now; this one again after the backoff (not
		 * counted as a retry, bounded by the wait deadline). */
		put_aside(v, n, m->path, status_is_whole_path(status));
		if (!may_resend(v, io, "a path error", false))
			return;
		park(v, io);
		mp_snap_kick(v);
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
		if (!may_resend(v, io, "an ANA status", false))
			return;
		park(v, io);
		mp_snap_kick(v);
		return;
	case NVME_DISP_RESET:
		put_aside(v, n, m->path, true);
		ask_reset(v, m->path);
		if (!may_resend(v, io, "Keep Alive Timer Expired", false))
			return;
		park(v, io);
		mp_snap_kick(v);
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
 * volatile cache), mp_path_lost records the loss (vol_note_loss) and the
 * volume layer fails the flushes that cannot vouch for them: never a
 * false success. */
static void flush_step(struct rview *v, struct vol_io *io)
{
	struct mpio *m = mpio_of(io);
	struct vol_mp *n = io->vol->priv;

	/* Every slot, not mp_nr_paths: a path added while the target runs
	 * may carry writes acknowledged on another reactor before this one
	 * reads the new count; a slot never used has nothing acknowledged. */
	for (; m->flush_next < MP_MAX_PATHS; m->flush_next++) {
		unsigned i = m->flush_next;
		struct vpath *vp = &n->vp[i];
		uint64_t acked = acked_sum(n, i);
		if (acked <= __atomic_load_n(&vp->flushed_upto, __ATOMIC_ACQUIRE))
			continue;
		struct snap_path *sp = v->cur ? &v->cur->p[i] : NULL;
		if (!sp || !sp->attached) {
			/* Writes acknowledged on the path and neither flushed
			 * nor recorded as lost: mp_path_lost moves flushed_upto
			 * up to them (after vol_note_loss) before it tells
			 * the reactors, so the path is attached on reactor 0
			 * and this reactor's snapshot is older than the one
			 * the writes went out with (path_ready or a path added
			 * since).  The newer one is already on its way: wait
			 * for it (parked I/O is kicked by snap_apply), within
			 * the usual wait deadline, then look again.  Answered
			 * now, the flush would vouch for writes it skipped. */
			wait_for_path(v, io);
			return;
		}
		/* The same rules as a write: a path put aside, in an ANA state
		 * that carries no I/O, or resetting, is waited for (bounded),
		 * never sent to again at once. */
		struct nvmf_queue *q = live_queue(v, i);
		unsigned via = i;
		if (q && !aside_for(v, n, i) &&
		    (LOAD(n->ns_gone[i]) || !ana_usable(ana_of(sp, LOAD(n->ns.anagrpid))))) {
			/* The controller says it cannot reach the namespace
			 * now (inaccessible, persistent loss, change), or no
			 * longer shows it at all (detached from this
			 * controller only, or another namespace there): flush
			 * the namespace through a usable path, as the Linux
			 * host sends every flush down one path.  Sent to this
			 * one, Invalid Namespace failed every flush after.  A
			 * path only behind on a grow still flushes its own. */
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
		m->due_ns = reactor_now_ns(); /* sent at (may_resend) */
		path_wait_end(io);
		int ret = nvmf_io_submit(q, &n->ns, sp->max_xfer, &m->nio);
		if (ret < 0) {
			STORE(v->st[via].in_flight, v->st[via].in_flight - 1);
			finish(v, io, ret);
		}
		return;
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
	m->nio.sink = io->sink;
	m->nio.cb = nio_done;
	m->nio.ctx = io;
	STORE(v->st[i].in_flight, v->st[i].in_flight + 1);
	m->due_ns = reactor_now_ns(); /* sent at (may_resend) */
	path_wait_end(io);
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
	m->timeouts = 0;
	m->flush_next = 0;
	m->flushing = false;
	m->transition = false;
	m->wait_start = 0;
	m->path_wait = false;
	if (v->r == io->origin) {
		/* vol_complete defers when the completion is on the
		 * submitter's own stack, so starting here is safe. */
		mp_start(io);
		return;
	}
	vol_forward(v->r, io, forwarded);
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
	.drain = vol_mp_drain,
	.pipe_writes = true, /* nvmf_io_submit takes the payload out where needed */
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
	n->v.path_wait = &n->path_wait;
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
			mp_check_identity(&t->paths[i], MP_ID_CREATE);
	log_info("%s: namespace %u of %s: %llu bytes, %u-byte blocks, %s, %u paths (%s)", name,
		 nsid, t->o.ctrl.name, (unsigned long long)vol_size(&n->v), n->v.block_size,
		 vol_caps_str(n->v.caps, caps, sizeof(caps)), t->o.nr_paths,
		 mp_policy_name(t->o.policy));
	*out = &n->v;
	return 0;
}
