/* Multipath: a path's connect, loss, reconnect and delete (on
 * reactor 0).  See mpath.h for the rules;
 * the comments here say why the code is shaped the way it is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "transports/io.h"
#include "gateway/volume/mpath_priv.h"
#include "transports/status.h"

/* ---- paths: connect, lose, reconnect, delete (on reactor 0) ---- */

static void path_ready(struct nvmf_ctrl *c, int err);
static void path_ana(struct nvmf_ctrl *c);
static void path_ns(struct nvmf_ctrl *c);

static uint64_t path_anatt_ns(const struct mp_path *p)
{
	unsigned s = p->started && p->ctrl.id && p->ctrl.id->anatt ? p->ctrl.id->anatt
								    : MP_DEFAULT_ANATT_S;
	return (uint64_t)s * NSEC_PER_SEC;
}

static void ana_watch(struct mp_path *p);

void mp_fast_fire(struct reactor_timer *tm)
{
	struct mp_target *t = container_of(tm, struct mp_target, fast_timer);

	if (mp_any_attached(t) || t->shutting_down)
		return;
	target_log(ERR, t, "no usable path for %d s (fast_io_fail_tmo): failing I/O with EIO "
		   "while reconnecting",
		   t->o.fast_io_fail_tmo_s);
	t->fast_failed = true;
	mp_broadcast(t, NULL, NULL);
}

static void path_delete(struct mp_path *p, const char *why)
{
	struct mp_target *t = p->t;

	log_err("target %s: path %u (%s %s:%s): %s; deleting its controller", t->o.ctrl.name,
		p->idx, nvmf_trtype_name(t->o.paths[p->idx].trtype), t->o.paths[p->idx].traddr,
		t->o.paths[p->idx].trsvcid, why);
	p->deleted = true;
	p->delete_after = false;
	p->unlisted_over = false;
	reactor_timer_cancel(&p->reconnect_timer);
	reactor_timer_cancel(&p->loss_timer);
	reactor_timer_cancel(&p->unlisted_timer);
	if (p->started && p->ctrl.state != NVMF_CTRL_DEAD) {
		if (p->ctrl.state == NVMF_CTRL_CONNECTING || p->ctrl.state == NVMF_CTRL_RESETTING)
			nvmf_ctrl_set_state(&p->ctrl, NVMF_CTRL_DELETING);
		if (p->ctrl.state == NVMF_CTRL_DELETING)
			nvmf_ctrl_set_state(&p->ctrl, NVMF_CTRL_DEAD);
	}
	if (mp_all_deleted(t))
		target_log(ERR, t, "every path is deleted; its exports fail with EIO until an "
			   "operator reset (nvmf-gateway reset %s) or a reload",
			   t->o.ctrl.name);
	mp_broadcast(t, NULL, NULL);
	if (mp_all_deleted(t) && t->live_cb) {
		mp_target_cb cb = t->live_cb;
		t->live_cb = NULL;
		cb(t, -ETIMEDOUT, t->live_arg);
	}
}

void mp_reconnect_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, reconnect_timer);
	struct mp_target *t = p->t;
	int ret;

	if (t->shutting_down || p->deleted)
		return;
	/* One attempt at a time, and none before every reactor has dropped
	 * the lost path's queues (path_detached reconnects then). */
	if (p->connecting || p->attached || p->detaching) {
		path_log(DEBUG, p, "reconnect not started: %s",
			 p->connecting ? "an attempt is running"
			 : p->attached ? "attached"
				       : "the reactors are still dropping its queues");
		return;
	}
	p->connecting = true;
	p->reconnects++;
	path_log(INFO, p, "reconnecting (attempt %u)", p->reconnects);
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
		p->ctrl.lost_cb = mp_path_lost;
		p->ctrl.ana_cb = path_ana;
		p->ctrl.ns_cb = path_ns;
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

/* A path never live yet is waited for by connect_loss_tmo when the
 * owner set one (boot order: the array may come up after the host). */
static bool path_first_wait(const struct mp_path *p)
{
	return !p->ever_live && p->t->o.connect_loss_own;
}

static const char *path_loss_why(const struct mp_path *p)
{
	return path_first_wait(p) ? "connect_loss_tmo expired before it was ever connected"
				  : "ctrl_loss_tmo expired";
}

/* Armed at a path's first failure: ctrl_loss_tmo from now, or what is
 * left of connect_loss_tmo since mp_target_connect. */
static void arm_loss(struct mp_path *p)
{
	struct mp_target *t = p->t;
	uint64_t tmo, gone;

	if (!path_first_wait(p)) {
		if (t->o.ctrl_loss_tmo_s >= 0)
			reactor_timer_arm(t->r, &p->loss_timer,
					  (uint64_t)t->o.ctrl_loss_tmo_s * NSEC_PER_SEC);
		return;
	}
	if (t->o.connect_loss_tmo_s < 0)
		return;
	tmo = (uint64_t)t->o.connect_loss_tmo_s * NSEC_PER_SEC;
	gone = reactor_now_ns() - t->connect_ns;
	reactor_timer_arm(t->r, &p->loss_timer, gone < tmo ? tmo - gone : 0);
}

void mp_loss_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, loss_timer);

	if (p->attached || p->deleted || p->t->shutting_down)
		return;
	if (p->connecting) {
		p->delete_after = true; /* let the attempt finish first */
		return;
	}
	path_delete(p, path_loss_why(p));
}

/* How long a lost path that discovery no longer lists keeps
 * reconnecting: ctrl_loss_tmo when set (as any lost path), else
 * MP_UNLISTED_GRACE_S; never less than fast_io_fail_tmo, so that an
 * entry missing from the log for a moment never fails I/O sooner than the
 * loss alone would. */
static uint64_t unlisted_grace_ns(const struct mp_target *t)
{
	uint64_t g = t->o.ctrl_loss_tmo_s >= 0 ? (uint64_t)t->o.ctrl_loss_tmo_s * NSEC_PER_SEC
					       : (uint64_t)MP_UNLISTED_GRACE_S * NSEC_PER_SEC;

	if (t->o.fast_io_fail_tmo_s >= 0 && (uint64_t)t->o.fast_io_fail_tmo_s * NSEC_PER_SEC > g)
		g = (uint64_t)t->o.fast_io_fail_tmo_s * NSEC_PER_SEC;
	return g;
}

/* An unlisted path without a connection: its grace starts (once). */
static void unlisted_arm(struct mp_path *p)
{
	if (!p->unlisted || p->attached || p->deleted || p->unlisted_timer.armed)
		return;
	reactor_timer_arm(p->t->r, &p->unlisted_timer, unlisted_grace_ns(p->t));
}

static void unlisted_delete(struct mp_path *p)
{
	char why[96];

	snprintf(why, sizeof(why), "not listed by discovery for %.0f s and not reconnected",
		 (double)unlisted_grace_ns(p->t) / 1e9);
	path_delete(p, why);
}

void mp_unlisted_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, unlisted_timer);

	if (!p->unlisted || p->attached || p->deleted || p->t->shutting_down)
		return;
	if (p->connecting) {
		p->unlisted_over = true; /* the attempt decides */
		return;
	}
	unlisted_delete(p);
}

static void schedule_reconnect(struct mp_path *p, bool now)
{
	struct mp_target *t = p->t;
	uint64_t delay = now ? 0 : (uint64_t)t->o.reconnect_delay_ms * NSEC_PER_MSEC;

	/* The options allow no less than 1 s; a caller that passed 0 would
	 * retry a refused target in a busy loop (a log line each time). */
	if (!now && delay < NSEC_PER_SEC)
		delay = NSEC_PER_SEC;
	reactor_timer_arm(t->r, &p->reconnect_timer, delay);
}

/* Reconnect without delay (operator reset, listed again): while the
 * reactors still drop the lost path's queues, path_detached does it,
 * at once. */
static void reconnect_now(struct mp_path *p)
{
	if (p->detaching)
		p->reset_now = true;
	else
		schedule_reconnect(p, true);
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

/* Whether another attached path than p serves volume n. */
static bool vol_has_other_path(const struct vol_mp *n, const struct mp_path *p)
{
	const struct mp_target *t = p->t;

	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (&t->paths[i] != p && t->paths[i].attached && !n->excluded[i])
			return true;
	return false;
}

/* Volume n grew as path p reports it: another path whose table still
 * shows the old size (its own event has not come yet) would answer I/O
 * past the old end with LBA Out of Range.  It carries none for n until
 * its re-identify shows the new size (mp_check_identity on it). */
static void vol_stale_paths(struct vol_mp *n, const struct mp_path *p)
{
	struct mp_target *t = p->t;

	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		struct mp_path *q = &t->paths[i];
		const struct nvmf_ns *ns;
		if (q == p || !q->attached || n->excluded[i] ||
		    !(ns = nvmf_ctrl_find_ns(&q->ctrl, n->ns.nsid)) || ns->nsze >= n->ns.nsze)
			continue;
		log_info("%s: path %u of target %s still shows nsid %u at %llu blocks; not used for "
			 "it until it shows the new size",
			 n->v.name, i, t->o.ctrl.name, n->ns.nsid, (unsigned long long)ns->nsze);
		n->excluded[i] = true;
		STORE(n->bad_path[i], true);
	}
}

/* What vol_stale_paths claims, asserted in the ASan and fuzz builds before
 * the new size is published: every other path that may carry I/O for n
 * shows it at least at its new size. */
static void stale_paths_check(const struct vol_mp *n, const struct mp_path *p)
{
	const struct mp_target *t = p->t;

	if (!NVMF_INVARIANTS)
		return;
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		const struct mp_path *q = &t->paths[i];
		const struct nvmf_ns *ns;
		if (q == p || !q->attached || n->excluded[i] ||
		    !(ns = nvmf_ctrl_find_ns((struct nvmf_ctrl *)&q->ctrl, n->ns.nsid)))
			continue;
		INVARIANT(ns->nsze >= n->ns.nsze,
			  "a path carrying I/O for a grown volume shows its new size");
	}
}

/* Every namespace the volumes use must be the same one behind this path
 * as behind the path the volume was built from.  After a (re)connect, or
 * a namespace change event that identified it again, the path's group for
 * it is the target's current one.  What a difference means is
 * nvmf_ns_change_classify's: a grown namespace grows the volume; one that
 * is gone, shrunk, reformatted or replaced is not used through this path,
 * and once no path is left the volume fails (EIO, never truncated or
 * misaddressed) and its owner is told. */
void mp_check_identity(struct mp_path *p, enum mp_id_why why)
{
	struct mp_target *t = p->t;

	for (unsigned i = 0; i < t->nr_vols; i++) {
		struct vol_mp *n = t->vols[i];
		const struct nvmf_ns *ns = nvmf_ctrl_find_ns(&p->ctrl, n->ns.nsid);
		enum nvmf_ns_change ch = nvmf_ns_change_classify(&n->ns, ns);
		/* Identified by this very event: the subsystem's word now.  An
		 * entry the event left alone may be older than the volume (a
		 * grow another path saw first), and says nothing new. */
		bool fresh = why == MP_ID_EVENT && ns && ns->id_event &&
			     ns->id_event == p->ctrl.ns_events;
		bool bad = ch != NVMF_NS_SAME && ch != NVMF_NS_GROWN;

		if (!bad && !(n->v.caps & VOL_CAP_FLUSH) && p->ctrl.id &&
		    (p->ctrl.id->vwc & NVME_CTRL_VWC_PRESENT)) {
			/* Exported without flush (no path had a volatile
			 * cache), and the capability cannot change now: a path
			 * that has one (added later, or a controller that
			 * changed) would acknowledge writes nobody flushes. */
			if (!n->excluded[p->idx])
				log_warn("%s: path %u of target %s has a volatile write cache and "
					 "the export offers no flush; not used for it",
					 n->v.name, p->idx, t->o.ctrl.name);
			n->excluded[p->idx] = true;
			STORE(n->bad_path[p->idx], true);
			continue;
		}
		n->excluded[p->idx] = bad;
		STORE(n->bad_path[p->idx], bad);
		/* Smaller (or behind on a grow) it still flushes its own writes. */
		STORE(n->ns_gone[p->idx], ch == NVMF_NS_REMOVED || ch == NVMF_NS_OTHER);
		if (!bad && ns && !nvmf_uuid_known(n->ns.uuid) && nvmf_uuid_known(ns->uuid)) {
			/* The volume was built from a path whose descriptor
			 * list did not come: learn the UUID now, or no later
			 * check would ever compare it. */
			memcpy(n->ns.uuid, ns->uuid, 16);
			log_info("%s: nsid %u: UUID learnt from path %u", n->v.name, n->ns.nsid, p->idx);
		}
		if (ch == NVMF_NS_GROWN && !LOAD(n->failed)) {
			uint64_t was = vol_size(&n->v);
			__atomic_store_n(&n->ns.nsze, ns->nsze, __ATOMIC_RELAXED); /* read by submissions */
			log_notice("%s: nsid %u of target %s grew from %llu to %llu bytes (path %u); "
				   "exports follow",
				   n->v.name, n->ns.nsid, t->o.ctrl.name, (unsigned long long)was,
				   (unsigned long long)(ns->nsze << ns->lba_shift), p->idx);
			/* The paths still at the old size first, then the new
			 * size published (release, after their marks). */
			vol_stale_paths(n, p);
			stale_paths_check(n, p);
			vol_resized(&n->v, ns->nsze << ns->lba_shift);
		}
		if (!bad) {
			/* The same namespace in another group: the target
			 * moved it (ANACAP allows it).  Not at volume creation,
			 * where the other paths' tables may be older than the
			 * one the volume was built from. */
			if (why == MP_ID_BRINGUP || fresh)
				vol_regroup(n, p, ns->anagrpid, "Identify Namespace");
			continue;
		}
		if (LOAD(n->failed))
			continue; /* said once */
		/* Reported by the subsystem's own event, a new identity, block
		 * size or a smaller size is a fact about the namespace, not the
		 * path: NSIDs are the subsystem's, so the other paths reach the
		 * same changed namespace, and serving on through them until
		 * their own events come would read and write another volume's
		 * blocks.  Only for a namespace that event identified: a stale
		 * entry, or a path's first view at a (re)connect (a wrong port,
		 * a path behind on a grow), is this path's alone.  A removal may
		 * be a detach from this controller only (Namespace Attachment):
		 * the others may still serve it. */
		bool subsystem_wide = fresh && ch != NVMF_NS_REMOVED;
		if (!subsystem_wide && vol_has_other_path(n, p)) {
			/* Another path still shows the namespace as exported:
			 * refuse this one for it (a path whose event has not
			 * come yet, or a wrong one); the others serve it. */
			log_err("%s: path %u of target %s: nsid %u: %s; this path is not used for "
				"it",
				n->v.name, p->idx, t->o.ctrl.name, n->ns.nsid, nvmf_ns_change_name(ch));
			continue;
		}
		/* The namespace went away, or offsets no longer mean what the
		 * exporters think they mean. */
		if (ch == NVMF_NS_REMOVED)
			log_err("%s: nsid %u of target %s was removed; its I/O fails with EIO and "
				"its exports go away",
				n->v.name, n->ns.nsid, t->o.ctrl.name);
		else
			log_err("%s: path %u of target %s: nsid %u: %s (now %llu blocks of %u bytes, "
				"was %llu of %u); failing the export rather than risking its data",
				n->v.name, p->idx, t->o.ctrl.name, n->ns.nsid, nvmf_ns_change_name(ch),
				(unsigned long long)ns->nsze, ns->lba_size,
				(unsigned long long)n->ns.nsze, n->ns.lba_size);
		STORE(n->failed, true);
		vol_failed(&n->v, ch == NVMF_NS_REMOVED);
	}
}

void mp_first_result(struct mp_target *t)
{
	if (!t->first_pending || --t->first_pending)
		return;
	mp_target_cb cb = t->connect_cb;
	t->connect_cb = NULL;
	if (cb)
		cb(t, mp_any_attached(t) ? 0 : -ENOTCONN, t->connect_arg);
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
		p->last_err = err;
		if (err == -EACCES || err == -EPERM) {
			/* Refused credentials or host: trying again changes
			 * nothing until the configuration does. */
			path_delete(p, "the target refused this host");
		} else if (p->delete_after) {
			path_delete(p, path_loss_why(p));
		} else if (p->unlisted_over) {
			unlisted_delete(p);
		} else {
			if (!p->lost_ns) {
				p->lost_ns = reactor_now_ns();
				arm_loss(p);
			}
			unlisted_arm(p);
			schedule_reconnect(p, false);
		}
		if (first)
			mp_first_result(t);
		return;
	}
	mp_check_identity(p, MP_ID_BRINGUP);
	p->regroups_seen = p->ctrl.ana_regroups;
	reactor_timer_cancel(&p->loss_timer);
	/* Reachable: an entry missing from the log does not tear a live
	 * connection down; a later loss starts a new grace. */
	reactor_timer_cancel(&p->unlisted_timer);
	p->unlisted_over = false;
	if (p->lost_ns)
		log_notice("target %s: path %u live again after %.1f s", t->o.ctrl.name, p->idx,
			   (double)(reactor_now_ns() - p->lost_ns) / 1e9);
	p->lost_ns = 0;
	p->attached = true;
	p->ever_live = true;
	p->last_err = 0;
	t->fast_failed = false;
	reactor_timer_cancel(&t->fast_timer);
	uint64_t anatt = 0;
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (t->paths[i].attached && path_anatt_ns(&t->paths[i]) > anatt)
			anatt = path_anatt_ns(&t->paths[i]);
	STORE(t->anatt_ns, anatt);
	p->change_ns = 0;
	ana_watch(p);
	mp_broadcast(t, NULL, NULL);
	if (first)
		mp_first_result(t);
	if (t->live_cb) {
		mp_target_cb cb = t->live_cb;
		t->live_cb = NULL;
		cb(t, 0, t->live_arg);
	}
}

/* Every reactor has dropped the lost path's queues: they may be freed by
 * the reconnect. */
static void path_detached(struct mp_path *p)
{
	p->detaching = false;
	if (p->deleted)
		return;
	/* Unlisted too, it reconnects as any lost path, for its grace
	 * only (unlisted_arm in mp_path_lost). */
	schedule_reconnect(p, p->reset_now);
	p->reset_now = false;
}

void mp_path_lost(struct nvmf_ctrl *c, int err)
{
	struct mp_path *p = c->owner;
	struct mp_target *t = p->t;

	(void)err;
	p->attached = false;
	p->detaching = true;
	p->lost_ns = reactor_now_ns();
	p->change_ns = 0;
	reactor_timer_cancel(&p->ana_timer);
	/* Writes acknowledged on this controller and not flushed may have
	 * died with its volatile cache.  Every I/O queue was closed on its
	 * reactor before this runs (ctrl_teardown), so the counts are whole.
	 * Without a cache they are durable: no longer owed a flush either. */
	for (unsigned i = 0; i < t->nr_vols; i++) {
		struct vpath *vp = &t->vols[i]->vp[p->idx];
		uint64_t acked = acked_sum(t->vols[i], p->idx);
		uint64_t done = LOAD(vp->flushed_upto);
		if (acked <= done)
			continue;
		if (c->id && (c->id->vwc & 1)) {
			log_warn("%s: path %u was reset with %llu acknowledged writes not "
				 "flushed; the next flush reports EIO (once to each client)",
				 t->vols[i]->v.name, p->idx, (unsigned long long)(acked - done));
			/* Before flushed_upto moves (release, read with
			 * acquire by flush_step): a flush that sees it moved,
			 * or the path detached, sees the loss. */
			vol_note_loss(&t->vols[i]->v);
		}
		__atomic_store_n(&vp->flushed_upto, acked, __ATOMIC_RELEASE);
	}
	if (t->o.ctrl_loss_tmo_s >= 0 && !p->reset_now)
		reactor_timer_arm(t->r, &p->loss_timer,
				  (uint64_t)t->o.ctrl_loss_tmo_s * NSEC_PER_SEC);
	if (!mp_any_attached(t) && t->o.fast_io_fail_tmo_s >= 0 && !t->fast_timer.armed)
		reactor_timer_arm(t->r, &t->fast_timer,
				  (uint64_t)t->o.fast_io_fail_tmo_s * NSEC_PER_SEC);
	/* A port discovery no longer lists is not chased for ever (as
	 * nvme-discoverd), but not given up at once either: the log may be
	 * missing it only for a moment. */
	unlisted_arm(p);
	mp_broadcast(t, path_detached, p);
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
			path_log(INFO, p, "ANA transition over after %.1f s",
				 (double)(reactor_now_ns() - p->change_ns) / 1e9);
		p->change_ns = 0;
		reactor_timer_cancel(&p->ana_timer);
		return;
	}
	if (!p->change_ns) {
		p->change_ns = reactor_now_ns();
		path_log(NOTICE, p, "ANA transition; waiting up to ANATT %.0f s",
			 (double)path_anatt_ns(p) / 1e9);
	}
	if (!p->ana_timer.armed)
		reactor_timer_arm(p->t->r, &p->ana_timer, MP_BACKOFF_NS);
}

void mp_ana_fire(struct reactor_timer *tm)
{
	struct mp_path *p = container_of(tm, struct mp_path, ana_timer);
	uint64_t now = reactor_now_ns();

	if (!p->attached || !p->change_ns || p->t->shutting_down)
		return;
	if (now - p->change_ns >= path_anatt_ns(p)) {
		path_log(ERR, p, "ANA transition not over after ANATT (%.0f s); "
			 "resetting the controller",
			 (double)path_anatt_ns(p) / 1e9);
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
		mp_broadcast(p->t, NULL, NULL);
	}
}

/* The controller re-identified namespaces after a change event. */
static void path_ns(struct nvmf_ctrl *c)
{
	struct mp_path *p = c->owner;

	if (!p->attached)
		return; /* path_ready checks them */
	mp_check_identity(p, MP_ID_EVENT);
	/* I/O waiting for a path learns the volume failed, or that this
	 * path is no longer one for it. */
	mp_broadcast(p->t, NULL, NULL);
}

void mp_target_on_live(struct mp_target *t, mp_target_cb cb, void *arg)
{
	if (mp_any_attached(t)) {
		cb(t, 0, arg);
	} else if (mp_all_deleted(t)) {
		cb(t, -ETIMEDOUT, arg);
	} else {
		t->live_cb = cb;
		t->live_arg = arg;
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
			path_log(NOTICE, p, "reconnecting as the operator asked");
			p->deleted = false;
			p->lost_ns = reactor_now_ns();
			if (t->o.ctrl_loss_tmo_s >= 0)
				reactor_timer_arm(t->r, &p->loss_timer,
						  (uint64_t)t->o.ctrl_loss_tmo_s * NSEC_PER_SEC);
			reconnect_now(p);
		} else if (!p->connecting) {
			reconnect_now(p);
		}
	}
	mp_broadcast(t, NULL, NULL);
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
			path_log(NOTICE, p, "%s; failing the path over", why);
			nvmf_ctrl_reset(&p->ctrl, -ENETDOWN, why);
		}
		return;
	}
	if (p->attached || p->deleted || p->connecting)
		return;
	path_log(NOTICE, p, "%s; reconnecting now", why);
	if (p->reconnect_timer.armed)
		schedule_reconnect(p, true);
	else
		p->reset_now = true; /* still detaching: path_detached reconnects at once */
}

/* ---- paths added while the target runs (discovery, issue 19) ---- */

static bool same_addr(const struct nvmf_path_opts *a, const struct nvmf_path_opts *b)
{
	return a->trtype == b->trtype && !strcmp(a->traddr, b->traddr) &&
	       !strcmp(a->trsvcid, b->trsvcid);
}

int mp_target_find_path(const struct mp_target *t, const struct nvmf_path_opts *po)
{
	for (unsigned i = 0; i < t->o.nr_paths; i++)
		if (same_addr(&t->o.paths[i], po))
			return (int)i;
	return -ENOENT;
}

/* Once every slot is used: a deleted path nothing refers to any more,
 * whose slot a new address may take.  Every reactor has applied a snapshot
 * without it (not detaching), no attempt runs or closes its queues, and no
 * reactor's request about it waits in reactor 0's queue. */
static int reusable_slot(struct mp_target *t)
{
	for (unsigned i = 0; i < t->o.nr_paths; i++) {
		const struct mp_path *p = &t->paths[i];
		bool asked = false;
		if (!p->deleted || p->attached || p->connecting || p->detaching ||
		    (p->started && p->ctrl.teardown_running))
			continue;
		for (unsigned k = 0; k < t->nr_reactors; k++)
			asked |= LOAD(t->views[k].ana_req[i].busy) || LOAD(t->views[k].reset_req[i].busy);
		if (!asked)
			return (int)i;
	}
	return -1;
}

/* Slot i (reusable_slot) forgets its deleted path.  Its counters are
 * written by the reactors only for I/O on it, and none has any since its
 * loss.  The flush bookkeeping stays: its acknowledged counts equal
 * flushed_upto since mp_path_lost, and the new path's writes add to
 * both as before.  The volumes re-check the namespace behind it when it
 * attaches (mp_check_identity). */
/* The path's timers and controller, when its slot is cleared or its
 * target freed. */
void mp_path_release(struct mp_path *p)
{
	reactor_timer_cancel(&p->reconnect_timer);
	reactor_timer_cancel(&p->loss_timer);
	reactor_timer_cancel(&p->ana_timer);
	reactor_timer_cancel(&p->unlisted_timer);
	if (p->started) {
		free(p->ctrl.io_reactors);
		nvmf_ctrl_free(&p->ctrl);
	}
}

static void slot_clear(struct mp_target *t, unsigned i)
{
	struct mp_path *p = &t->paths[i];

	target_log(NOTICE, t, "path %u (%s %s:%s, deleted) gives its slot to a new address", i,
		   nvmf_trtype_name(t->o.paths[i].trtype), t->o.paths[i].traddr,
		   t->o.paths[i].trsvcid);
	mp_path_release(p);
	for (unsigned k = 0; k < t->nr_reactors; k++) {
		struct pstats *st = &t->views[k].st[i];
		STORE(st->reads, 0);
		STORE(st->writes, 0);
		STORE(st->read_bytes, 0);
		STORE(st->write_bytes, 0);
		STORE(st->errors, 0);
		STORE(st->retries, 0);
	}
}

int mp_target_add_path(struct mp_target *t, const struct nvmf_path_opts *po)
{
	unsigned i = t->o.nr_paths;
	int reuse = -1;

	if (t->shutting_down)
		return -ESHUTDOWN;
	if (mp_target_find_path(t, po) >= 0)
		return -EEXIST;
	if (i >= MP_MAX_PATHS && (reuse = reusable_slot(t)) < 0) {
		target_log(WARN, t, "path %s %s:%s not added: the target has %u paths already "
			   "(the most) and none deleted whose slot it could take",
			   nvmf_trtype_name(po->trtype), po->traddr, po->trsvcid, MP_MAX_PATHS);
		return -ENOSPC;
	}
	if (reuse >= 0) {
		i = (unsigned)reuse;
		slot_clear(t, i);
	}
	/* Everything a reader of index i may touch is set before the count
	 * that lets it look (mp_nr_paths): the arrays indexed by it were
	 * zeroed at creation and never written for it since.  A reused slot
	 * is shown attached by no snapshot until the new path attaches. */
	t->o.paths[i] = *po;
	struct mp_path *p = &t->paths[i];
	memset(p, 0, sizeof(*p));
	p->t = t;
	p->idx = i;
	/* Not one of mp_target_connect's first attempts: its result must
	 * not count towards that callback. */
	p->first_done = true;
	/* A port the array lists now is expected to answer: ctrl_loss_tmo
	 * applies from its first failure, not what is left of the target's
	 * connect_loss_tmo. */
	p->ever_live = true;
	reactor_timer_init(&p->reconnect_timer, mp_reconnect_fire);
	reactor_timer_init(&p->loss_timer, mp_loss_fire);
	reactor_timer_init(&p->ana_timer, mp_ana_fire);
	reactor_timer_init(&p->unlisted_timer, mp_unlisted_fire);
	if (reuse < 0)
		__atomic_store_n(&t->o.nr_paths, i + 1, __ATOMIC_RELEASE);
	target_log(NOTICE, t, "path %u added: %s %s:%s", i, nvmf_trtype_name(po->trtype),
		   po->traddr, po->trsvcid);
	/* Connects as a path that was lost does: mp_reconnect_fire creates
	 * its controller, path_ready attaches it and broadcasts the snapshot
	 * that lets the reactors use it. */
	schedule_reconnect(p, true);
	return (int)i;
}

void mp_target_path_listed(struct mp_target *t, unsigned idx, bool listed)
{
	struct mp_path *p;

	if (idx >= t->o.nr_paths || t->shutting_down)
		return;
	p = &t->paths[idx];
	if (!listed) {
		if (!p->unlisted) {
			if (p->attached || p->deleted)
				path_log(NOTICE, p, "no longer listed by discovery; %s",
					 p->attached ? "kept while its connection lasts"
						     : "stays deleted");
			else
				path_log(NOTICE, p, "no longer listed by discovery; reconnecting for "
					 "up to %.0f s unless listed again",
					 (double)unlisted_grace_ns(t) / 1e9);
		}
		p->unlisted = true;
		unlisted_arm(p);
		return;
	}
	if (p->unlisted)
		path_log(NOTICE, p, "listed by discovery again");
	p->unlisted = false;
	p->unlisted_over = false;
	reactor_timer_cancel(&p->unlisted_timer);
	if (p->deleted && !p->attached) {
		path_log(NOTICE, p, "listed again: reconnecting%s",
			 p->detaching ? " once the reactors have dropped its old queues" : "");
		p->deleted = false;
		p->lost_ns = reactor_now_ns();
		arm_loss(p);
		reconnect_now(p);
		mp_broadcast(t, NULL, NULL);
	}
}
