/* Multipath: the target, the snapshots reactor 0 publishes to every
 * reactor, and the target's lifecycle.  See mpath.h for the rules;
 * the comments here say why the code is shaped the way it is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "transports/io.h"
#include "gateway/volume/mpath_priv.h"
#include "transports/status.h"

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
	mp_snap_kick(v);
}

bool mp_all_deleted(const struct mp_target *t)
{
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (!t->paths[i].deleted)
			return false;
	return true;
}

bool mp_any_attached(const struct mp_target *t)
{
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (t->paths[i].attached)
			return true;
	return false;
}

/* Sends every reactor its view of the current path states; then(p) runs
 * on reactor 0 once every reactor has dropped what it had before (the
 * queues it referred to may then be freed). */
void mp_broadcast(struct mp_target *t, void (*then)(struct mp_path *p), struct mp_path *p)
{
	struct bcast *bc = NULL;
	bool failfast = !mp_any_attached(t) && (t->fast_failed || mp_all_deleted(t));

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
	reactor_timer_init(&t->fast_timer, mp_fast_fire);
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
		reactor_timer_init(&v->delay_timer, mp_delay_fire);
		reactor_timer_init(&v->wait_timer, mp_wait_fire);
	}
	for (unsigned i = 0; i < o->nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		p->t = t;
		p->idx = i;
		reactor_timer_init(&p->reconnect_timer, mp_reconnect_fire);
		reactor_timer_init(&p->loss_timer, mp_loss_fire);
		reactor_timer_init(&p->ana_timer, mp_ana_fire);
		reactor_timer_init(&p->unlisted_timer, mp_unlisted_fire);
	}
	*out = t;
	return 0;
}

void mp_target_connect(struct mp_target *t, mp_target_cb cb, void *arg)
{
	t->connect_cb = cb;
	t->connect_arg = arg;
	t->connect_ns = reactor_now_ns();
	t->first_pending = t->o.nr_paths;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		p->reconnects = 0;
		mp_reconnect_fire(&p->reconnect_timer);
		p->reconnects = 0;
		if (p->deleted && !p->first_done) {
			p->first_done = true;
			mp_first_result(t);
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
	t->live_cb = NULL;
	reactor_timer_cancel(&t->fast_timer);
	t->shutdown_pending = 1;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		reactor_timer_cancel(&p->reconnect_timer);
		reactor_timer_cancel(&p->loss_timer);
		reactor_timer_cancel(&p->ana_timer);
		reactor_timer_cancel(&p->unlisted_timer);
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
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		mp_path_release(&t->paths[i]);
	for (unsigned k = 0; k < t->nr_reactors; k++) {
		reactor_timer_cancel(&t->views[k].delay_timer);
		reactor_timer_cancel(&t->views[k].wait_timer);
		free(t->views[k].cur);
	}
	free(t->views);
	free(t->reactors);
	free(t->vols);
	/* The options carry the DH-HMAC-CHAP and TLS keys. */
	explicit_bzero(&t->o, sizeof(t->o));
	free(t);
}

unsigned mp_target_nsids(struct mp_target *t, uint32_t *out, unsigned max)
{
	/* The first attached path's table: the controller keeps it current
	 * (bring-up's active list, then every Namespace Attribute Changed). */
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *p = &t->paths[i];
		if (!p->attached || !p->started)
			continue;
		unsigned n = p->ctrl.nr_ns < max ? p->ctrl.nr_ns : max;
		for (unsigned k = 0; k < n; k++)
			out[k] = p->ctrl.ns[k].nsid;
		return n;
	}
	return 0;
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
		/* A failed first connect leaves the controller dead, but the
		 * path is tried again: shown as a lost path between attempts. */
		if (!p->deleted && pi->state == NVMF_CTRL_DEAD)
			pi->state = NVMF_CTRL_RESETTING;
		pi->cntlid = p->attached ? p->ctrl.cntlid : 0;
		pi->reconnects = p->reconnects;
		pi->last_err = p->attached ? 0 : p->last_err;
		pi->next_attempt_ns = p->reconnect_timer.armed ? p->reconnect_timer.deadline_ns : 0;
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
