/* Persistent discovery controllers (see daemon_discovery.h).  All on
 * reactor 0; the log's bytes are checked by transports/discovery_log.c
 * before anything is done with them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/daemon_discovery.h"
#include "gateway/daemon_priv.h"
#include "gateway/discover.h"
#include "gateway/linkwatch.h"
#include "gateway/base/log.h"
#include "transports/discovery_log.h"
#include "transports/nvme_spec.h"
#include "transports/status.h"

#define DISC_BACKOFF_MAX_S 60
#define DISC_AEN_CHANGE 0xf0 /* notice: Discovery Log Page Change */
#define DISC_AEC_CHANGE (1u << 31)

enum disc_state {
	DC_CONNECTING,
	DC_READING,	/* the log page walk */
	DC_WATCHING,	/* live, an AER outstanding */
	DC_BACKOFF,	/* lost or not reached: the next attempt is timed */
	DC_IDLE,	/* not persistent: read once, disconnected */
	DC_STOPPING,
	DC_STOPPED,
};

static const char *const state_names[] = {
	[DC_CONNECTING] = "connecting", [DC_READING] = "reading log", [DC_WATCHING] = "watching",
	[DC_BACKOFF] = "waiting to reconnect", [DC_IDLE] = "read once",
	[DC_STOPPING] = "stopping", [DC_STOPPED] = "stopped",
};

struct disc_root;

struct disc_ctrl {
	struct list_node link;
	struct gw_discs *all;
	struct disc_root *root;	/* referrals: the configured controller's set */
	unsigned depth;		/* 0: configured */
	/* A referral: the controller whose log listed it (its children are
	 * stopped before it, so this stays valid), and that record. */
	struct disc_ctrl *parent;
	struct dlog_entry ref;
	bool removing;		/* its parent no longer lists it (or a reload
				 * dropped it): closing, then freed */
	/* Configured ones: every setting of its entry, as one string, so that
	 * a reload tells an unchanged entry from a changed one. */
	char *key;
	char name[96];
	struct nvmf_ctrl_opts opts;
	struct nvmf_ctrl ctrl;
	bool started;		/* ctrl holds a connection's resources */
	bool persistent;
	unsigned base_delay_s, delay_s;
	enum disc_state state;
	struct disc_walk walk;
	struct dlog log;	/* the last one read */
	bool have_log;
	bool aen;		/* the change notice is enabled */
	bool aer_armed;
	bool reread;		/* an event came while the log was read */
	bool shut;		/* not persistent: its one connection is closed */
	bool stop_wait;		/* the daemon stops while that close runs */
	struct reactor_timer timer;
	uint64_t next_ns;
	int last_err;
	unsigned connects, reads, events;
};

struct disc_root {
	struct dlog_refs refs;
	unsigned users;
};

/* A subsystem port some discovery log listed. */
/* Paths no longer listed are kept for status (most recent last), up to
 * this many: a discovery controller inventing new ports at every log
 * change must not grow the list, and the scans over it, without bound. */
#define DISC_UNLISTED_MAX 256

struct disc_path {
	struct list_node link;
	struct dlog_entry e;
	char from[96];		/* the discovery controller that listed it */
	bool listed;		/* still in that controller's log */
	bool refused_logged;	/* TREQ required, no key: said once */
};

struct gw_discs {
	struct gw *gw;
	/* Targets configured without paths wait for discovery to list their
	 * subsystem; checked after each log and every second (a change being
	 * applied, or a reload that brought such a target back). */
	struct reactor_timer fill_timer;
	struct list_node ctrls;	/* disc_ctrl */
	struct list_node paths;	/* disc_path */
	unsigned closing;
	void (*done)(void *arg);
	void *done_arg;
	bool stopping;
	unsigned nr_unlisted; /* paths with listed false */
};

#define dc_log(lvl, d, fmt, ...) log_##lvl("discovery %s: " fmt, (d)->name, ##__VA_ARGS__)

static bool set_state(struct disc_ctrl *d, enum disc_state s)
{
	if (d->state == s)
		return true;
	/* Once stopping, only stopped. */
	if ((d->state == DC_STOPPING && s != DC_STOPPED) || d->state == DC_STOPPED) {
		log_debug("discovery %s: %s -> %s refused", d->name, state_names[d->state],
			  state_names[s]);
		return false;
	}
	log_debug("discovery %s: %s -> %s", d->name, state_names[d->state], state_names[s]);
	d->state = s;
	return true;
}

static void read_chunk(struct disc_ctrl *d);
static void connect_now(struct disc_ctrl *d);
static void aer_submit(struct disc_ctrl *d);

static void backoff(struct disc_ctrl *d, int err)
{
	if (d->state == DC_BACKOFF || !set_state(d, DC_BACKOFF))
		return;
	d->last_err = err;
	d->aer_armed = false;
	uint64_t ns = (uint64_t)d->delay_s * NSEC_PER_SEC;
	d->next_ns = reactor_now_ns() + ns;
	dc_log(notice, d, "%s; connecting again in %u s", err ? strerror(-err) : "lost",
	       d->delay_s);
	reactor_timer_arm(d->ctrl.r ? d->ctrl.r : &d->all->gw->reactors[0], &d->timer, ns);
	d->delay_s = d->delay_s * 2 > DISC_BACKOFF_MAX_S ? DISC_BACKOFF_MAX_S : d->delay_s * 2;
}

/* ---- what the log says ---- */

static struct disc_path *find_path(struct gw_discs *a, const struct dlog_entry *e)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &a->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		if (dlog_same_path(&p->e, e))
			return p;
	}
	return NULL;
}

static const struct gw_target *configured(struct gw *gw, const char *subnqn)
{
	struct gw_config *cfg = gw->cur->cfg;

	for (size_t i = 0; i < cfg->nr_targets; i++)
		if (!strcmp(cfg->targets[i].subnqn, subnqn))
			return &cfg->targets[i];
	return NULL;
}

static bool known(void *ctx, const char *subnqn)
{
	struct gw_discs *a = ctx;
	struct list_node *pos, *tmp;

	if (configured(a->gw, subnqn))
		return true;
	list_for_each_safe(pos, tmp, &a->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		if (!strcmp(p->e.subnqn, subnqn))
			return true;
	}
	return false;
}

static bool configured_path(const struct gw_target *t, const struct dlog_entry *e)
{
	for (size_t i = 0; i < t->nr_paths; i++) {
		const struct gw_path *p = &t->paths[i];
		bool tr = (p->transport == NVMF_TR_TCP && e->trtype == NVMF_TRTYPE_TCP) ||
			  (p->transport == NVMF_TR_RDMA && e->trtype == NVMF_TRTYPE_RDMA);
		if (tr && !strcmp(p->traddr, e->traddr) && !strcmp(p->trsvcid, e->trsvcid))
			return true;
	}
	return false;
}

/* The running target whose paths discovery gives (a target configured
 * without paths, or one an auto_export policy made) for subnqn, or NULL.
 * A target whose file names its paths keeps exactly those: a port it does
 * not name may be one the operator left out on purpose (another network,
 * a replication link), and a reload would take a path added here away
 * again, as the file is what a reload compares against.  Every target is
 * multipath (failover by default), so "multipath" says nothing here. */
static struct gw_tgt *discovered_tgt(struct gw *gw, const char *subnqn)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (t->mp && t->cfg->paths_discovered && !strcmp(t->cfg->subnqn, subnqn))
			return t;
	}
	return NULL;
}

/* One error line per listed port the target may not use: it requires TLS
 * and the target has no key, or the target says tls = "require" and the
 * port is not NVMe/TCP (no TLS there). */
static void treq_refused(struct disc_path *p, const struct gw_target *c, bool auto_made)
{
	if (p->refused_logged)
		return;
	p->refused_logged = true;
	if (p->e.trtype != NVMF_TRTYPE_TCP)
		log_err("target %s: subsystem %s port %s:%s is not NVMe/TCP and the target says "
			"tls = \"require\": not connecting to it", c->name, p->e.subnqn,
			p->e.traddr, p->e.trsvcid);
	else
		log_err("target %s: subsystem %s port %s:%s requires TLS (TREQ) and the target has "
			"no TLS key: not connecting to it; set tls = true and tls_key_file on %s",
			c->name, p->e.subnqn, p->e.traddr, p->e.trsvcid,
			auto_made ? "its auto_export policy" : "the target");
}

/* TLS on a discovered path of target c: 1 yes, 0 no, -1 not to be used
 * (treq_refused says why).  TREQ only ever turns TLS on, as libnvme's
 * connect-all does: the log may come from a plaintext discovery
 * controller, and one byte of it must not switch off the TLS the
 * operator configured (with TLS off the PSK no longer proves who the
 * target is).  So: TREQ "required" needs a key; a target with tls = true
 * uses TLS on every NVMe/TCP port whatever TREQ says; one without TLS
 * connects in plaintext where the port does not require it.  "require"
 * also refuses ports of other transports, which have no TLS.  The
 * security type (TSAS) is not consulted: nvmet lists "none" on a port
 * that still takes TLS. */
static int disc_entry_tls(const struct dlog_entry *e, const struct gw_target *c)
{
	if (e->trtype != NVMF_TRTYPE_TCP)
		return c->tls == GW_TLS_REQUIRE ? -1 : 0;
	if ((e->treq & 3) == 1)
		return c->tls ? 1 : -1;
	return c->tls != GW_TLS_OFF;
}

static void entry_path(const struct dlog_entry *e, const struct gw_target *c,
		       struct nvmf_path_opts *po)
{
	memset(po, 0, sizeof(*po));
	po->trtype = e->trtype == NVMF_TRTYPE_RDMA ? NVMF_TR_RDMA : NVMF_TR_TCP;
	snprintf(po->traddr, sizeof(po->traddr), "%s", e->traddr);
	snprintf(po->trsvcid, sizeof(po->trsvcid), "%s", e->trsvcid);
	po->tos = -1;
	po->hdr_digest = c->hdr_digest;
	po->data_digest = c->data_digest;
	po->tls = disc_entry_tls(e, c) > 0;
	po->tls_kdf = (uint8_t)c->tls_kdf;
	po->tls_key = c->tls_key;
}

/* The running discovered target of e's subsystem (NULL: none), e's path
 * options for it in *po, and that path's index in it (or -ENOENT). */
static struct gw_tgt *entry_target(struct gw *gw, const struct dlog_entry *e,
				   struct nvmf_path_opts *po, int *idx)
{
	struct gw_tgt *t = discovered_tgt(gw, e->subnqn);

	if (t) {
		entry_path(e, t->cfg, po);
		*idx = mp_target_find_path(t->mp, po);
	}
	return t;
}

/* A port listed (again) for a subsystem whose target runs: a path of it. */
static void path_listed(struct gw *gw, const struct dlog_entry *e)
{
	struct nvmf_path_opts po;
	int idx;
	struct gw_tgt *t = entry_target(gw, e, &po, &idx);

	if (!t)
		return;
	if (idx >= 0) {
		mp_target_path_listed(t->mp, (unsigned)idx, true);
		return;
	}
	if (disc_entry_tls(e, t->cfg) < 0) {
		struct disc_path *p = find_path(gw->discs, e);
		if (p)
			treq_refused(p, t->cfg, t->auto_made);
		return;
	}
	/* It logs the path it adds, or why not.  Link watching resolves
	 * every path of a target at once: the target is watched anew. */
	if (mp_target_add_path(t->mp, &po) >= 0) {
		linkwatch_remove(gw->lw, t->mp);
		linkwatch_add(gw->lw, t->mp);
	}
}

/* The oldest unlisted paths beyond DISC_UNLISTED_MAX go (counted, so
 * that a log losing thousands of entries is not a scan per entry). */
static void unlisted_trim(struct gw_discs *all)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &all->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		if (all->nr_unlisted <= DISC_UNLISTED_MAX)
			break;
		if (p->listed)
			continue;
		list_del(&p->link);
		free(p);
		all->nr_unlisted--;
	}
}

static void path_unlisted(struct gw *gw, const struct dlog_entry *e)
{
	struct nvmf_path_opts po;
	int idx;
	struct gw_tgt *t = entry_target(gw, e, &po, &idx);

	if (t && idx >= 0)
		mp_target_path_listed(t->mp, (unsigned)idx, false);
}

static void start_referral(struct disc_ctrl *parent, const struct dlog_entry *e);
static void stop_referral(struct disc_ctrl *parent, const struct dlog_entry *e);
static void fill_scan(struct gw_discs *all);

/* The one step from a log change to the gateway.  A policy (auto_export)
 * takes a new subsystem in fill_scan, which runs after every log read. */
static void disc_apply(struct disc_ctrl *d, const struct dlog_action *a)
{
	struct gw_discs *all = d->all;
	const struct dlog_entry *e = a->e;
	const char *tr = dlog_trtype_name(e->trtype);
	struct disc_path *p = find_path(all, e);
	const struct gw_target *t;

	switch (a->kind) {
	case DLOG_NEW_TARGET:
	case DLOG_ADD_PATH:
		if (p && !p->listed)
			all->nr_unlisted--; /* listed again */
		if (!p) {
			p = calloc(1, sizeof(*p));
			if (!p) {
				dc_log(err, d, "out of memory for %s", e->subnqn);
				return;
			}
			p->e = *e;
			list_add_tail(&all->paths, &p->link);
		}
		p->listed = true;
		snprintf(p->from, sizeof(p->from), "%s", d->name);
		t = configured(all->gw, e->subnqn);
		if (a->kind == DLOG_NEW_TARGET)
			dc_log(notice, d, "new subsystem %s at %s %s:%s%s%s", e->subnqn, tr, e->traddr,
			       e->trsvcid, t ? "; configured as target " : "; no target configured for it",
			       t ? t->name : "");
		else
			dc_log(notice, d, "subsystem %s: path %s %s:%s", e->subnqn, tr, e->traddr,
			       e->trsvcid);
		/* A target configured without paths takes them all: at its
		 * start (fill_scan), or here once it runs.  One whose file
		 * names its paths keeps those (discovered_tgt says why). */
		if (t && t->nr_paths && !t->paths_discovered && !configured_path(t, e))
			dc_log(notice, d, "target %s: path %s %s:%s is not in its configuration; "
			       "it is not used until a reload names it", t->name, tr, e->traddr,
			       e->trsvcid);
		/* TREQ "required": a plaintext connect would only be cut.
		 * Discovered paths of such a target are not used at all
		 * (treq_refused); a target with paths of its own keeps them. */
		if ((e->treq & 3) == 1 && t && !t->tls && (!t->nr_paths || t->paths_discovered))
			treq_refused(p, t, false);
		else if ((e->treq & 3) == 1 && !t &&
			 config_auto_find_subsys(all->gw->cur->cfg, e->subnqn) >= 0)
			; /* a policy's target: said when it is filled */
		else if ((e->treq & 3) == 1 && t && !t->tls)
			dc_log(warn, d, "subsystem %s: port %s:%s requires TLS (TREQ), and its target "
			       "has no tls = true; its connects will be refused", e->subnqn,
			       e->traddr, e->trsvcid);
		else if ((e->treq & 3) == 1 && !t)
			dc_log(info, d, "subsystem %s: port %s:%s requires TLS (TREQ); a target for "
			       "it needs tls = true and tls_key_file", e->subnqn, e->traddr,
			       e->trsvcid);
		path_listed(all->gw, e);
		return;
	case DLOG_GONE:
		if (p) {
			all->nr_unlisted += p->listed;
			p->listed = false;
			list_del(&p->link);
			list_add_tail(&all->paths, &p->link);
			unlisted_trim(all);
		}
		/* As nvme-discoverd: a live connection stays. */
		dc_log(notice, d, "subsystem %s: path %s %s:%s no longer listed; a live connection "
		       "to it stays", e->subnqn, tr, e->traddr, e->trsvcid);
		/* A path discovery gave is not chased once lost; a path the
		 * file names is, by the target's own rules. */
		path_unlisted(all->gw, e);
		return;
	case DLOG_REFERRAL:
		start_referral(d, e);
		return;
	case DLOG_REFERRAL_GONE:
		dc_log(info, d, "referral to %s %s:%s no longer listed", tr, e->traddr, e->trsvcid);
		stop_referral(d, e);
		return;
	}
}

static void log_read(struct disc_ctrl *d)
{
	struct dlog l;
	const char *why = NULL;
	const struct nvmf_disc_log_hdr *h = (const void *)d->walk.buf;
	size_t len = sizeof(*h) + h->numrec * sizeof(struct nvmf_disc_log_entry);
	int rc = dlog_parse(&l, d->walk.buf, len, &why);

	d->reads++;
	if (rc < 0) {
		dc_log(err, d, "discovery log page refused: %s", why);
		nvmf_ctrl_reset(&d->ctrl, rc, "malformed discovery log page");
		return;
	}
	if (l.skipped)
		dc_log(warn, d, "%u discovery log record%s skipped (transport not supported, or "
		       "malformed)", l.skipped, l.skipped == 1 ? "" : "s");
	dc_log(info, d, "discovery log generation %llu, %u record%s",
	       (unsigned long long)l.genctr, l.nr, l.nr == 1 ? "" : "s");
	struct dlog_action *act = calloc((size_t)l.nr + d->log.nr + 1, sizeof(*act));
	if (!act) {
		dlog_free(&l);
		nvmf_ctrl_reset(&d->ctrl, -ENOMEM, "out of memory");
		return;
	}
	size_t n = dlog_diff(d->have_log ? &d->log : NULL, &l, known, d->all, act);
	for (size_t i = 0; i < n; i++)
		disc_apply(d, &act[i]);
	free(act);
	dlog_free(&d->log);
	d->log = l;
	d->have_log = true;
	fill_scan(d->all);
}


/* ---- targets configured without paths: discovery gives them ---- */

static void fill_done(struct gw_batch *b)
{
	struct gw *gw = b->gw;

	for (size_t i = 0; i < b->nr_exps; i++) {
		struct gw_exp *e = b->exps[i];
		if (gw_exp_running(e))
			log_notice("export %s: serving (its target was discovered)", e->name);
		else if (!e->failed && !e->waiting)
			log_err("export %s: its target was discovered but none of its exporters "
				"is running", e->name);
	}
	free(b->exps);
	free(b);
	gw->busy = false;
	gw_op_finished(gw);
}

/* The listed paths of subnqn into t's configuration, then t connects and
 * its waiting exports start, as one batch. */
static void fill_target(struct gw_discs *all, struct gw_tgt *t)
{
	struct gw *gw = all->gw;
	struct list_node *pos, *tmp;
	struct gw_target *c = t->cfg;
	size_t n = 0;

	list_for_each_safe(pos, tmp, &all->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		if (!p->listed || strcmp(p->e.subnqn, c->subnqn))
			continue;
		if (disc_entry_tls(&p->e, c) < 0) {
			treq_refused(p, c, t->auto_made);
			snprintf(t->wait_reason, sizeof(t->wait_reason),
				 "port %s:%s requires TLS (TREQ) and the target has no TLS key",
				 p->e.traddr, p->e.trsvcid);
			continue;
		}
		n++;
	}
	if (!n)
		return;
	t->wait_reason[0] = 0;
	if (n > MP_MAX_PATHS)
		n = MP_MAX_PATHS;
	struct gw_path *paths = calloc(n, sizeof(*paths));
	struct gw_batch *b = paths ? gw_waiting_batch(t, fill_done) : NULL;
	if (!b) {
		free(paths);
		log_err("target %s: out of memory for its discovered paths", c->name);
		return;
	}
	size_t k = 0;
	list_for_each_safe(pos, tmp, &all->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		if (k == n || !p->listed || strcmp(p->e.subnqn, c->subnqn) ||
		    disc_entry_tls(&p->e, c) < 0)
			continue;
		struct gw_path *gp = &paths[k];
		gp->tls = disc_entry_tls(&p->e, c);
		gp->transport = p->e.trtype == NVMF_TRTYPE_RDMA ? NVMF_TR_RDMA : NVMF_TR_TCP;
		gp->traddr = strdup(p->e.traddr);
		gp->trsvcid = strdup(p->e.trsvcid);
		gp->tos = -1;
		if (!gp->traddr || !gp->trsvcid)
			abort(); /* a few bytes at start-up rate: as the batch code does */
		log_notice("target %s: path %zu from discovery: %s %s:%s%s", c->name, k,
			   dlog_trtype_name(p->e.trtype), p->e.traddr, p->e.trsvcid,
			   gp->tls ? " (TLS)" : "");
		k++;
	}
	/* Owned by the loaded file from now on: config_free releases them. */
	c->paths = paths;
	c->nr_paths = k;
	c->paths_discovered = true;
	t->waiting = false;
	t->batch = b;
	gw->busy = true;
	gw_batch_run(b);
}

static void fill_scan(struct gw_discs *all)
{
	struct gw *gw = all->gw;
	struct list_node *pos, *tmp;

	if (all->stopping || gw->state != GW_RUNNING || gw->busy)
		return;
	/* A subsystem no configured target names: a target of its own when
	 * an auto_export policy matches it, filled below like the others. */
	list_for_each_safe(pos, tmp, &all->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		if (p->listed && !configured(gw, p->e.subnqn))
			gw_auto_discovered(gw, p->e.subnqn);
	}
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (t->cfg->nr_paths || t->mp || t->connecting)
			continue;
		fill_target(all, t);
		if (gw->busy)
			return; /* one batch at a time; the next scan takes the rest */
	}
}

/* A target discovery gave no usable path (none listed, or only ports
 * that require TLS it has no key for): its exports fail once its
 * connect_loss_tmo has passed, as for a target not reached. */
static void wait_expire(struct gw *gw)
{
	struct list_node *pos, *tmp;
	uint64_t now = reactor_now_ns();

	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		int tmo = t->cfg->connect_loss_tmo;
		if (!t->waiting || t->mp || t->connecting || t->cfg->nr_paths || tmo < 0 ||
		    now - t->wait_since_ns < (uint64_t)tmo * NSEC_PER_SEC)
			continue;
		log_warn("target %s: discovery gave no usable path within connect_loss_tmo (%d s)%s%s",
			 t->cfg->name, tmo, t->wait_reason[0] ? ": " : "", t->wait_reason);
		gw_tgt_wait_expired(t);
	}
}

static void fill_timer_fired(struct reactor_timer *tm)
{
	struct gw_discs *all = container_of(tm, struct gw_discs, fill_timer);

	if (!all->stopping && all->gw->state == GW_RUNNING && !all->gw->busy)
		wait_expire(all->gw);
	fill_scan(all);
	if (!all->stopping)
		reactor_timer_arm(&all->gw->reactors[0], &all->fill_timer, NSEC_PER_SEC);
}

bool gw_discovery_tgt_wait(struct gw_tgt *t)
{
	if (t->cfg->nr_paths)
		return false;
	t->waiting = true;
	t->wait_since_ns = reactor_now_ns();
	log_notice("target %s: no paths configured; waiting for discovery to list %s",
		   t->cfg->name, t->cfg->subnqn);
	return true;
}

/* ---- the controller ---- */

static void ctrl_closed(struct nvmf_ctrl *c, int err);

static void ref_reap(struct disc_ctrl *d);

static void idle_closed(struct nvmf_ctrl *c, int err)
{
	struct disc_ctrl *d = c->owner;

	d->shut = true;
	if (d->removing && !d->stop_wait) {
		set_state(d, DC_STOPPED);
		ref_reap(d);
		return;
	}
	if (d->stop_wait) {
		d->stop_wait = false;
		ctrl_closed(c, err);
	}
}

static void chunk_done(struct nvmf_req *req, int err)
{
	struct disc_ctrl *d = req->ctx2;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t n = req->data_len;
	char sbuf[96];

	nvmf_req_put(req);
	if (err || d->state != DC_READING)
		return; /* the controller is lost: lost_cb backs off */
	if (st) {
		dc_log(err, d, "discovery log page: %s", nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		nvmf_ctrl_reset(&d->ctrl, -EIO, "discovery log page not read");
		return;
	}
	switch (disc_walk_got(&d->walk, n)) {
	case DISC_READ:
		read_chunk(d);
		return;
	case DISC_ERR:
		dc_log(err, d, "discovery log page: %s", d->walk.why);
		nvmf_ctrl_reset(&d->ctrl, -EPROTO, "discovery log page not read");
		return;
	case DISC_DONE:
		break;
	}
	log_read(d);
	if (d->state != DC_READING || d->ctrl.state != NVMF_CTRL_LIVE)
		return;
	d->delay_s = d->base_delay_s; /* a good read: the backoff starts over */
	if (!d->persistent) {
		set_state(d, DC_IDLE);
		nvmf_ctrl_shutdown(&d->ctrl, idle_closed);
		return;
	}
	set_state(d, DC_WATCHING);
	if (d->reread) {
		d->reread = false;
		set_state(d, DC_READING);
		disc_walk_restart(&d->walk);
		d->walk.tries = 0;
		read_chunk(d);
	}
}

static void read_chunk(struct disc_ctrl *d)
{
	struct nvmf_req *req = nvmf_admin_req(&d->ctrl);
	uint32_t off, n;
	uint8_t *dst;

	if (!req) {
		nvmf_ctrl_reset(&d->ctrl, -ENOMEM, "no admin request for the discovery log");
		return;
	}
	disc_walk_next(&d->walk, &off, &n, &dst);
	req->ctx2 = d;
	req->done = chunk_done;
	nvmf_prep_get_log(req, NVME_LOG_DISCOVERY, 0, dst, n, off);
	nvmf_req_submit(req);
}

static void read_log(struct disc_ctrl *d)
{
	if (d->state == DC_READING) {
		d->reread = true; /* the walk in flight may have missed it */
		return;
	}
	if (!set_state(d, DC_READING))
		return;
	disc_walk_restart(&d->walk);
	d->walk.tries = 0;
	read_chunk(d);
}

static void aer_done(struct nvmf_req *req, int err)
{
	struct disc_ctrl *d = req->ctx2;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	uint32_t dw0 = req->cqe.result.dw0;
	char sbuf[96];

	nvmf_req_put(req);
	d->aer_armed = false;
	if (err || (d->state != DC_WATCHING && d->state != DC_READING))
		return;
	if (st) {
		dc_log(warn, d, "asynchronous event request failed: %s; the log is read again "
		       "only at reconnect", nvme_status_fmt(st, sbuf, sizeof(sbuf)));
		return;
	}
	d->events++;
	if (NVME_AER_TYPE(dw0) == NVME_AER_TYPE_NOTICE && NVME_AER_INFO(dw0) == DISC_AEN_CHANGE) {
		dc_log(info, d, "discovery log changed");
		read_log(d);
	} else {
		dc_log(info, d, "asynchronous event type %u info 0x%02x", NVME_AER_TYPE(dw0),
		       NVME_AER_INFO(dw0));
	}
	aer_submit(d);
}

static void aer_submit(struct disc_ctrl *d)
{
	struct nvmf_req *req;

	if (d->aer_armed || !d->aen || !(req = nvmf_admin_req(&d->ctrl)))
		return;
	d->aer_armed = true;
	req->ctx2 = d;
	req->sqe.opcode = NVME_ADMIN_ASYNC_EVENT;
	req->no_timeout = true;
	req->done = aer_done;
	nvmf_req_submit(req);
}

static void aec_done(struct nvmf_req *req, int err)
{
	struct disc_ctrl *d = req->ctx2;
	uint16_t st = (uint16_t)(req->cqe.status >> 1);
	char sbuf[96];

	nvmf_req_put(req);
	if (err || d->state != DC_READING)
		return;
	if (st) {
		dc_log(warn, d, "cannot enable discovery log change events: %s; the log is read "
		       "again only at reconnect", nvme_status_fmt(st, sbuf, sizeof(sbuf)));
	} else {
		d->aen = true;
		aer_submit(d);
	}
	read_chunk(d);
}

static void ctrl_ready(struct nvmf_ctrl *c, int err)
{
	struct disc_ctrl *d = c->owner;

	if (d->state != DC_CONNECTING)
		return;
	if (err) {
		backoff(d, err);
		return;
	}
	d->connects++;
	d->last_err = 0;
	d->aen = false;
	dc_log(notice, d, "connected%s", d->connects > 1 ? " again" : "");
	set_state(d, DC_READING);
	disc_walk_restart(&d->walk);
	d->walk.tries = 0;
	d->reread = false;
	/* The notice first, so that a change after the read is not missed. */
	if (d->persistent && c->id && (c->id->oaes & DISC_AEC_CHANGE)) {
		struct nvmf_req *req = nvmf_admin_req(c);
		if (req) {
			req->ctx2 = d;
			req->done = aec_done;
			req->sqe.opcode = NVME_ADMIN_SET_FEATURES;
			req->sqe.cdw10 = NVME_FEAT_ASYNC_EVENT;
			req->sqe.cdw11 = DISC_AEC_CHANGE;
			nvmf_req_submit(req);
			return;
		}
	}
	if (d->persistent)
		dc_log(notice, d, "the controller sends no discovery log change events; the log "
		       "is read again only at reconnect");
	read_chunk(d);
}

static void ctrl_lost(struct nvmf_ctrl *c, int err)
{
	struct disc_ctrl *d = c->owner;

	if (d->state == DC_STOPPING || d->state == DC_STOPPED || d->state == DC_IDLE)
		return;
	backoff(d, err ? err : -ECONNRESET);
}

static void timer_fired(struct reactor_timer *t)
{
	struct disc_ctrl *d = container_of(t, struct disc_ctrl, timer);

	if (d->state == DC_BACKOFF)
		connect_now(d);
}

static void connect_now(struct disc_ctrl *d)
{
	struct gw *gw = d->all->gw;
	int ret;

	if (!set_state(d, DC_CONNECTING))
		return;
	if (d->started) {
		ret = nvmf_ctrl_reconnect(&d->ctrl, ctrl_ready);
	} else {
		d->ctrl.owner = d;
		d->ctrl.lost_cb = ctrl_lost;
		d->started = true;
		ret = nvmf_ctrl_connect(&d->ctrl, &d->opts, &gw->reactors[0], NULL, ctrl_ready);
		if (ret < 0)
			d->started = false; /* it freed what it had */
	}
	if (ret < 0)
		backoff(d, ret);
}

static struct disc_ctrl *ctrl_alloc(struct gw_discs *all, struct disc_root *root,
				    unsigned depth)
{
	struct disc_ctrl *d = calloc(1, sizeof(*d));

	if (!d || disc_walk_init(&d->walk) < 0) {
		free(d);
		log_err("discovery: out of memory");
		return NULL;
	}
	d->all = all;
	d->root = root;
	root->users++;
	d->depth = depth;
	d->state = DC_BACKOFF; /* connect_now moves it on */
	reactor_timer_init(&d->timer, timer_fired);
	list_add_tail(&all->ctrls, &d->link);
	return d;
}

static void ctrl_name(struct disc_ctrl *d)
{
	const struct nvmf_path_opts *p = &d->opts.path;

	snprintf(d->name, sizeof(d->name), "%s:%.40s:%s", nvmf_trtype_name(p->trtype), p->traddr,
		 p->trsvcid);
	snprintf(d->opts.name, sizeof(d->opts.name), "disc %.58s", d->name);
}

static const char *nz(const char *s) { return s ? s : ""; }

/* NULL when out of memory: such a controller is then seen as changed by
 * the next reload, which restarts it (harmless). */
static char *disc_key(const struct gw_discovery *c)
{
	char *k = NULL, key[2 * sizeof(c->tls_key) + 1];

	/* The key's bytes: a key file rewritten in place is a change. */
	for (size_t i = 0; i < sizeof(c->tls_key); i++)
		snprintf(key + 2 * i, 3, "%02x", ((const uint8_t *)&c->tls_key)[i]);
	if (asprintf(&k, "%d\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%d\x1f%d\x1f%d\x1f%s\x1f%s"
		     "\x1f%d\x1f%d\x1f%s\x1f%s",
		     (int)c->transport, nz(c->traddr), nz(c->trsvcid), nz(c->host_traddr),
		     nz(c->host_iface), nz(c->hostnqn), c->persistent, c->keep_alive_tmo,
		     c->reconnect_delay, nz(c->dhchap_secret), nz(c->dhchap_ctrl_secret),
		     c->tls, c->tls_kdf, nz(c->tls_key_file), c->tls ? key : "") < 0)
		k = NULL;
	explicit_bzero(key, sizeof(key));
	return k;
}

static struct disc_ctrl *ctrl_new(struct gw_discs *all, const struct gw_discovery *c,
				  struct disc_root *root)
{
	struct gw *gw = all->gw;
	struct disc_ctrl *d = ctrl_alloc(all, root, 0);
	const char *why;

	if (!d)
		return NULL;
	d->persistent = c->persistent;
	d->base_delay_s = d->delay_s = (unsigned)c->reconnect_delay;
	struct nvmf_ctrl_opts *o = &d->opts;
	snprintf(o->subnqn, sizeof(o->subnqn), "%s", NVME_DISC_SUBSYS_NQN);
	if (c->hostnqn)
		snprintf(o->hostnqn, sizeof(o->hostnqn), "%s", c->hostnqn);
	else
		memcpy(o->hostnqn, gw->hostnqn, sizeof(o->hostnqn));
	memcpy(o->hostid, gw->hostid, sizeof(o->hostid));
	o->path.trtype = c->transport;
	o->path.tos = -1;
	snprintf(o->path.traddr, sizeof(o->path.traddr), "%s", c->traddr);
	snprintf(o->path.trsvcid, sizeof(o->path.trsvcid), "%s", c->trsvcid);
	if (c->host_traddr)
		snprintf(o->path.host_traddr, sizeof(o->path.host_traddr), "%s", c->host_traddr);
	if (c->host_iface)
		snprintf(o->path.host_iface, sizeof(o->path.host_iface), "%s", c->host_iface);
	o->discovery = true;
	o->nr_io_queues = 0;
	o->queue_size = 32;
	o->kato_ms = c->persistent ? (unsigned)c->keep_alive_tmo * 1000 : 0;
	o->io_timeout_ms = 30000;
	/* Checked when the file was loaded. */
	if (c->dhchap_secret)
		nvmf_dhchap_key_parse(c->dhchap_secret, &o->dhchap_key, &why);
	if (c->dhchap_ctrl_secret)
		nvmf_dhchap_key_parse(c->dhchap_ctrl_secret, &o->dhchap_ctrl_key, &why);
	o->path.tls = c->tls;
	o->path.tls_kdf = (uint8_t)c->tls_kdf;
	o->path.tls_key = c->tls_key;
	ctrl_name(d);
	d->key = disc_key(c);
	return d;
}

/* A referral's controller: the referring one's host settings, another
 * address (a reload may free the configuration entry: nothing points
 * into it). */
static void start_referral(struct disc_ctrl *parent, const struct dlog_entry *e)
{
	enum dlog_ref_verdict v = dlog_refs_add(&parent->root->refs, parent->depth, e);
	const char *tr = dlog_trtype_name(e->trtype);

	if (v != DLOG_REF_FOLLOW) {
		dc_log(notice, parent, "referral to %s %s:%s not followed: %s", tr, e->traddr,
		       e->trsvcid, dlog_ref_verdict_name(v));
		return;
	}
	if (parent->all->stopping)
		return;
	/* Followed with the parent's settings: a TLS parent's referral to
	 * a transport without TLS would be read in plaintext. */
	if (parent->opts.path.tls && e->trtype != NVMF_TRTYPE_TCP) {
		dc_log(err, parent, "referral to %s %s:%s not followed: this discovery controller "
		       "uses TLS, and %s has none", tr, e->traddr, e->trsvcid, tr);
		return;
	}
	dc_log(notice, parent, "following referral to %s %s:%s (depth %u)", tr, e->traddr,
	       e->trsvcid, parent->depth + 1);
	struct disc_ctrl *d = ctrl_alloc(parent->all, parent->root, parent->depth + 1);
	if (!d)
		return;
	d->parent = parent;
	d->ref = *e;
	d->persistent = parent->persistent;
	d->base_delay_s = d->delay_s = parent->base_delay_s;
	d->opts = parent->opts;
	d->opts.path.trtype = e->trtype == NVMF_TRTYPE_RDMA ? NVMF_TR_RDMA : NVMF_TR_TCP;
	snprintf(d->opts.path.traddr, sizeof(d->opts.path.traddr), "%s", e->traddr);
	snprintf(d->opts.path.trsvcid, sizeof(d->opts.path.trsvcid), "%s", e->trsvcid);
	ctrl_name(d);
	connect_now(d);
}

/* ---- a referral no longer listed: its controller stopped ---- */

static void ctrl_free(struct disc_ctrl *d);

static void ref_reap_fired(struct reactor_timer *t)
{
	ctrl_free(container_of(t, struct disc_ctrl, timer));
}

/* Freed from the reactor, not from inside its controller's callback. */
static void ref_reap(struct disc_ctrl *d)
{
	reactor_timer_cancel(&d->timer);
	reactor_timer_init(&d->timer, ref_reap_fired);
	reactor_timer_arm(&d->all->gw->reactors[0], &d->timer, 0);
}

static void ref_closed(struct nvmf_ctrl *c, int err)
{
	struct disc_ctrl *d = c->owner;

	if (d->stop_wait) {
		/* The daemon stops meanwhile and counted this close. */
		d->stop_wait = false;
		ctrl_closed(c, err);
		return;
	}
	set_state(d, DC_STOPPED);
	ref_reap(d);
}

/* d and, first, every controller its log referred to: their keys leave
 * the root's set (listed again, they are followed again; the loop check
 * is unchanged for the rest). */
static void ref_remove(struct disc_ctrl *d, const char *why)
{
	struct gw_discs *all = d->all;
	struct list_node *pos;

	for (pos = all->ctrls.next; pos != &all->ctrls; pos = pos->next) {
		struct disc_ctrl *k = container_of(pos, struct disc_ctrl, link);
		/* Freed only by a timer: the list stays as it is meanwhile. */
		if (k->parent == d && !k->removing)
			ref_remove(k, why); /* the same cause, as logged before */
	}
	dc_log(notice, d, "stopped: %s", why);
	dlog_refs_remove(&d->root->refs, &d->ref);
	d->removing = true;
	reactor_timer_cancel(&d->timer);
	bool idle = d->state == DC_IDLE;
	set_state(d, DC_STOPPING);
	if (!d->started || (idle && d->shut)) {
		set_state(d, DC_STOPPED);
		ref_reap(d);
		return;
	}
	if (idle)
		return; /* its close runs: idle_closed reaps it */
	nvmf_ctrl_shutdown(&d->ctrl, ref_closed);
}

static void stop_referral(struct disc_ctrl *parent, const struct dlog_entry *e)
{
	struct gw_discs *all = parent->all;
	struct list_node *pos;

	if (all->stopping)
		return;
	for (pos = all->ctrls.next; pos != &all->ctrls; pos = pos->next) {
		struct disc_ctrl *d = container_of(pos, struct disc_ctrl, link);
		if (d->parent == parent && !d->removing && d->ref.trtype == e->trtype &&
		    !strcmp(d->ref.traddr, e->traddr) && !strcmp(d->ref.trsvcid, e->trsvcid)) {
			ref_remove(d, "the discovery controller that referred to it no longer "
				   "lists it");
			return;
		}
	}
}

/* One configured entry's controller, connecting. */
static void start_entry(struct gw_discs *all, const struct gw_discovery *c)
{
	struct disc_root *root = calloc(1, sizeof(*root));
	uint8_t trtype = c->transport == NVMF_TR_RDMA ? NVMF_TRTYPE_RDMA : NVMF_TRTYPE_TCP;

	if (!root) {
		log_err("discovery: out of memory");
		return;
	}
	if (dlog_refs_init(&root->refs, trtype, c->traddr, c->trsvcid) < 0)
		/* A host name: referrals back to it are caught one level
		 * later, by the address they give. */
		memset(&root->refs, 0, sizeof(root->refs));
	struct disc_ctrl *d = ctrl_new(all, c, root);
	if (!d) {
		free(root);
		return;
	}
	connect_now(d);
}

void gw_discovery_start(struct gw *gw)
{
	const struct gw_discovery_set *s = &gw->cur->cfg->discovery;

	if (!s->nr || gw->discs)
		return;
	struct gw_discs *all = calloc(1, sizeof(*all));
	if (!all) {
		log_err("discovery: out of memory");
		return;
	}
	all->gw = gw;
	list_init(&all->ctrls);
	list_init(&all->paths);
	gw->discs = all;
	reactor_timer_init(&all->fill_timer, fill_timer_fired);
	reactor_timer_arm(&gw->reactors[0], &all->fill_timer, NSEC_PER_SEC);
	for (size_t i = 0; i < s->nr; i++)
		start_entry(all, &s->ctrls[i]);
}

void gw_discovery_reload(struct gw *gw)
{
	const struct gw_discovery_set *s = &gw->cur->cfg->discovery;
	struct gw_discs *all = gw->discs;
	struct list_node *pos;

	if (!all) {
		if (s->nr)
			log_notice("reload: starting %zu discovery controller%s", s->nr,
				   s->nr == 1 ? "" : "s");
		gw_discovery_start(gw);
		return;
	}
	if (all->stopping)
		return;
	char **keys = calloc(s->nr + 1, sizeof(*keys));
	bool *kept = calloc(s->nr + 1, sizeof(*kept));
	if (!keys || !kept) {
		free(keys);
		free(kept);
		log_err("reload: out of memory; the discovery controllers are left as they are");
		return;
	}
	for (size_t i = 0; i < s->nr; i++)
		keys[i] = disc_key(&s->ctrls[i]);
	/* Removed or changed: stopped, with the referrals it followed.  The
	 * paths it found stay with their targets (a live path is never torn
	 * down for what discovery says).  Controllers are freed only by
	 * timers, so the list stays as it is while walked. */
	for (pos = all->ctrls.next; pos != &all->ctrls; pos = pos->next) {
		struct disc_ctrl *d = container_of(pos, struct disc_ctrl, link);
		size_t i;
		if (d->depth || d->removing)
			continue;
		for (i = 0; i < s->nr; i++)
			if (!kept[i] && keys[i] && d->key && !strcmp(keys[i], d->key))
				break;
		if (i < s->nr) {
			kept[i] = true;
			dc_log(notice, d, "unchanged by the reload; left as it is (%s)",
			       state_names[d->state]);
			continue;
		}
		ref_remove(d, "no longer in the configuration, or changed (reload)");
	}
	for (size_t i = 0; i < s->nr; i++) {
		if (kept[i])
			continue;
		const struct gw_discovery *c = &s->ctrls[i];
		log_notice("discovery %s:%s:%s: new in the configuration (reload); connecting",
			   nvmf_trtype_name(c->transport), c->traddr, c->trsvcid);
		start_entry(all, c);
	}
	for (size_t i = 0; i < s->nr; i++) {
		if (keys[i])
			explicit_bzero(keys[i], strlen(keys[i]));
		free(keys[i]);
	}
	free(keys);
	free(kept);
}

static void ctrl_free(struct disc_ctrl *d)
{
	struct disc_root *root = d->root;

	reactor_timer_cancel(&d->timer);
	if (d->started)
		nvmf_ctrl_free(&d->ctrl);
	disc_walk_free(&d->walk);
	dlog_free(&d->log);
	/* Both hold keys (the hex of the TLS key, DH-HMAC-CHAP secrets). */
	if (d->key)
		explicit_bzero(d->key, strlen(d->key));
	free(d->key);
	explicit_bzero(&d->opts, sizeof(d->opts));
	list_del(&d->link);
	if (--root->users == 0)
		free(root);
	free(d);
}

static void all_free(struct gw_discs *all)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &all->ctrls)
		ctrl_free(container_of(pos, struct disc_ctrl, link));
	list_for_each_safe(pos, tmp, &all->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		list_del(&p->link);
		free(p);
	}
	void (*done)(void *) = all->done;
	void *arg = all->done_arg;
	all->gw->discs = NULL;
	free(all);
	if (done)
		done(arg);
}

static void ctrl_closed(struct nvmf_ctrl *c, int err)
{
	struct disc_ctrl *d = c->owner;
	struct gw_discs *all = d->all;

	(void)err;
	set_state(d, DC_STOPPED);
	if (--all->closing == 0)
		all_free(all);
}

bool gw_discovery_stop(struct gw *gw, void (*done)(void *arg), void *arg)
{
	struct gw_discs *all = gw->discs;
	struct list_node *pos, *tmp;

	if (!all || all->stopping)
		return false;
	all->stopping = true;
	reactor_timer_cancel(&all->fill_timer);
	all->done = done;
	all->done_arg = arg;
	all->closing = 1;
	list_for_each_safe(pos, tmp, &all->ctrls) {
		struct disc_ctrl *d = container_of(pos, struct disc_ctrl, link);
		reactor_timer_cancel(&d->timer);
		if (d->removing) {
			/* A referral being closed (ref_remove): counted when
			 * that close ends, unless it has (all_free frees it). */
			if (d->state != DC_STOPPED) {
				all->closing++;
				d->stop_wait = true;
			}
			continue;
		}
		bool idle = d->state == DC_IDLE;
		set_state(d, DC_STOPPING);
		if (!d->started || (idle && d->shut))
			continue;
		if (idle) {
			/* Its close is running: counted when it ends. */
			all->closing++;
			d->stop_wait = true;
			continue;
		}
		all->closing++;
		nvmf_ctrl_shutdown(&d->ctrl, ctrl_closed);
	}
	if (--all->closing == 0) {
		/* Nothing to wait for; done runs after the caller counted it. */
		all->done = NULL;
		all_free(all);
		return false;
	}
	return true;
}

void gw_discovery_status(struct gw *gw, struct json_buf *j)
{
	struct gw_discs *all = gw->discs;
	struct list_node *pos, *tmp;

	if (!all)
		return;
	json_key(j, "discovery");
	json_arr_begin(j);
	list_for_each_safe(pos, tmp, &all->ctrls) {
		struct disc_ctrl *d = container_of(pos, struct disc_ctrl, link);
		json_obj_begin(j);
		json_kv_str(j, "name", d->name);
		json_kv_str(j, "state", state_names[d->state]);
		json_kv_u64(j, "depth", d->depth);
		json_kv_bool(j, "persistent", d->persistent);
		json_kv_bool(j, "tls", d->opts.path.tls);
		json_kv_bool(j, "change_events", d->aen);
		json_kv_u64(j, "connects", d->connects);
		json_kv_u64(j, "log_reads", d->reads);
		json_kv_u64(j, "events", d->events);
		json_kv_u64(j, "records", d->have_log ? d->log.nr : 0);
		if (d->have_log)
			json_kv_u64(j, "genctr", d->log.genctr);
		if (d->last_err)
			json_kv_str(j, "last_error", strerror(-d->last_err));
		if (d->state == DC_BACKOFF) {
			uint64_t now = reactor_now_ns();
			json_kv_double(j, "next_attempt_in_s",
				       d->next_ns > now ? (double)(d->next_ns - now) / 1e9 : 0);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
	json_key(j, "discovered");
	json_arr_begin(j);
	list_for_each_safe(pos, tmp, &all->paths) {
		struct disc_path *p = container_of(pos, struct disc_path, link);
		const struct gw_target *t = configured(gw, p->e.subnqn);
		struct list_node *tp, *tt;
		/* Else the target an auto_export policy made for it. */
		list_for_each_safe(tp, tt, &gw->tgts) {
			struct gw_tgt *g = container_of(tp, struct gw_tgt, link);
			if (!t && g->auto_made && !strcmp(g->cfg->subnqn, p->e.subnqn))
				t = g->cfg;
		}
		json_obj_begin(j);
		json_kv_str(j, "subnqn", p->e.subnqn);
		json_kv_str(j, "transport", dlog_trtype_name(p->e.trtype));
		json_kv_str(j, "traddr", p->e.traddr);
		json_kv_str(j, "trsvcid", p->e.trsvcid);
		/* What the log said about TLS on that port (raw values). */
		json_kv_u64(j, "treq", p->e.treq & 3);
		json_kv_u64(j, "sectype", p->e.sectype);
		json_kv_bool(j, "listed", p->listed);
		json_kv_str(j, "from", p->from);
		json_kv_str(j, "target", t ? t->name : NULL);
		json_obj_end(j);
	}
	json_arr_end(j);
}
