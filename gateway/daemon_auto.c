/* auto_export policies at run time (issue 19).  A namespace of a live
 * target (configured, or made here for a subsystem discovery listed) that
 * no export serves and that a policy matches gets an export built from
 * the policy: a file of its own holding that one export
 * (config_auto_build), started as a batch like any other, removed by the
 * namespace-change code like any other (daemon_ns.c), and weighed by a
 * reload (gw_auto_reload).  The active namespaces are the controller's own
 * table (Identify CNS 02h at bring-up, kept current by the Namespace
 * Attribute Changed event), looked at when kicked and every second: one
 * change at a time (gw->busy), so a scan that finds the gateway busy just
 * comes again.  Everything here runs on reactor 0. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "gateway/config_diff.h"
#include "gateway/daemon_priv.h"

#define AUTO_SCAN_NS NSEC_PER_SEC
#define AUTO_MAX_NS 1024

/* A namespace or subsystem the policies cannot serve (name clash, bad
 * template result) or must not (its export taken away by export-remove):
 * logged once, not tried again until a reload.  nsid 0: a subsystem.
 * The list grows as needed: a cap would let an export removed by hand
 * come back (it is remembered here or nowhere). */
struct skip {
	char what[NVMF_NQN_SIZE];
	uint32_t nsid;
};

struct gw_autos {
	struct gw *gw;
	struct reactor_timer timer;
	struct skip *skips;
	size_t nr_skips, cap_skips;
	bool skips_oom; /* said once */
	uint32_t nsids[AUTO_MAX_NS];
};

/* True the first time (what, nsid) is seen: the caller logs then. */
static bool skip_first(struct gw_autos *a, const char *what, uint32_t nsid)
{
	for (size_t i = 0; i < a->nr_skips; i++)
		if (a->skips[i].nsid == nsid && !strcmp(a->skips[i].what, what))
			return false;
	if (a->nr_skips == a->cap_skips) {
		size_t cap = a->cap_skips ? 2 * a->cap_skips : 32;
		struct skip *s = realloc(a->skips, cap * sizeof(*s));
		if (!s) {
			if (!a->skips_oom)
				log_err("auto_export: out of memory for the list of namespaces set "
					"aside; %s nsid %u is tried again each scan", what, nsid);
			a->skips_oom = true;
			return false;
		}
		a->skips = s;
		a->cap_skips = cap;
	}
	snprintf(a->skips[a->nr_skips].what, sizeof(a->skips[0].what), "%s", what);
	a->skips[a->nr_skips++].nsid = nsid;
	return true;
}

static bool skipped(const struct gw_autos *a, const char *what, uint32_t nsid)
{
	for (size_t i = 0; i < a->nr_skips; i++)
		if (a->skips[i].nsid == nsid && !strcmp(a->skips[i].what, what))
			return true;
	return false;
}

void gw_auto_removed_by_hand(struct gw_exp *e)
{
	struct gw_autos *a = e->gw->autos;

	if (a && e->is_auto && skip_first(a, e->tgt->cfg->subnqn, e->cfg->nsid))
		log_notice("export %s: made by auto_export[%u]; not made again until a reload",
			   e->name, e->auto_idx);
}

const char *gw_exp_origin(const struct gw_exp *e, char *buf, size_t len)
{
	if (!e->is_auto)
		return "config";
	snprintf(buf, len, "auto_export[%u]", e->auto_idx);
	return buf;
}

static bool served(struct gw *gw, struct gw_tgt *t, uint32_t nsid)
{
	const struct gw_config *cfg = gw->cur->cfg;
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (e->tgt == t && e->cfg->nsid == nsid)
			return true;
	}
	/* A hand-written export of it that is not running (failed, or
	 * taken away by export-remove) still has the namespace. */
	for (size_t i = 0; i < cfg->nr_exports; i++)
		if (cfg->exports[i].nsid == nsid && !strcmp(cfg->exports[i].target_name, t->cfg->name))
			return true;
	return false;
}

static bool name_taken(struct gw *gw, const char *name)
{
	const struct gw_config *cfg = gw->cur->cfg;

	if (gw_find_exp(gw, name))
		return true;
	for (size_t i = 0; i < cfg->nr_exports; i++)
		if (!strcmp(cfg->exports[i].name, name))
			return true;
	return false;
}

static void batch_done(struct gw_batch *b)
{
	struct gw *gw = b->gw;
	char org[32];

	for (size_t i = 0; i < b->nr_exps; i++) {
		struct gw_exp *e = b->exps[i];
		if (gw_exp_running(e))
			log_notice("export %s: serving nsid %u of target %s (%s)", e->name,
				   e->cfg->nsid, e->tgt->cfg->name, gw_exp_origin(e, org, sizeof(org)));
		else if (!e->waiting)
			log_err("export %s: made by %s for nsid %u of target %s, but none of its "
				"exporters is running", e->name, gw_exp_origin(e, org, sizeof(org)),
				e->cfg->nsid, e->tgt->cfg->name);
	}
	free(b->exps);
	free(b);
	gw->busy = false;
	gw_op_finished(gw);
}

/* One new export for nsid of t, into b; false if none was made. */
static bool make_export(struct gw_autos *a, struct gw_batch *b, struct gw_tgt *t, uint32_t nsid)
{
	struct gw *gw = a->gw;
	const struct gw_config *cfg = gw->cur->cfg;
	int idx = config_auto_find(cfg, t->cfg->subnqn, nsid);
	struct gw_config *n;
	char why[256];

	if (idx < 0)
		return false;
	if (config_auto_build(cfg, (size_t)idx, t->cfg, nsid, &n, why, sizeof(why)) < 0) {
		if (skip_first(a, t->cfg->subnqn, nsid))
			log_err("auto_export[%d]: nsid %u of target %s: %s; not exported", idx, nsid,
				t->cfg->name, why);
		return false;
	}
	const char *name = n->exports[0].name;
	if (name_taken(gw, name)) {
		if (skip_first(a, t->cfg->subnqn, nsid))
			log_warn("auto_export[%d]: nsid %u of target %s would be export %s, a name "
				 "another export has; not exported", idx, nsid, t->cfg->name, name);
		config_free(n);
		return false;
	}
	struct gw_cfgref *ref = gw_cfgref_new(gw, n);
	struct gw_exp *e = ref ? gw_exp_new(gw, ref, &n->exports[0]) : NULL;
	if (!e) {
		if (ref)
			gw_cfgref_put(gw, ref);
		else
			config_free(n);
		log_err("auto_export[%d]: out of memory for nsid %u of target %s", idx, nsid,
			t->cfg->name);
		return false;
	}
	e->is_auto = true;
	e->auto_idx = (unsigned)idx;
	log_notice("auto_export[%d]: nsid %u of target %s (%s): starting export %s", idx, nsid,
		   t->cfg->name, t->cfg->subnqn, name);
	b->exps[b->nr_exps++] = e;
	return true;
}

static void scan(struct gw_autos *a)
{
	struct gw *gw = a->gw;
	struct list_node *pos, *tmp;
	struct gw_batch *b = NULL;
	size_t cap = 0;

	if (gw->state != GW_RUNNING || gw->busy || !gw->cur->cfg->auto_export.nr)
		return;
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (!t->live || !t->mp || t->connecting)
			continue;
		unsigned n = mp_target_nsids(t->mp, a->nsids, AUTO_MAX_NS);
		for (unsigned i = 0; i < n; i++) {
			if (served(gw, t, a->nsids[i]) || skipped(a, t->cfg->subnqn, a->nsids[i]) ||
			    config_auto_find(gw->cur->cfg, t->cfg->subnqn, a->nsids[i]) < 0)
				continue;
			if (!b || b->nr_exps == cap) {
				size_t ncap = cap ? cap * 2 : 8;
				struct gw_exp **x = b ? realloc(b->exps, ncap * sizeof(*x))
						      : calloc(ncap, sizeof(*x));
				if (!b && x && !(b = calloc(1, sizeof(*b)))) {
					free(x);
					x = NULL;
				}
				if (!x) {
					log_err("auto_export: out of memory; tried again in a second");
					goto run;
				}
				b->exps = x;
				cap = ncap;
			}
			make_export(a, b, t, a->nsids[i]);
		}
	}
run:
	if (!b)
		return;
	if (!b->nr_exps) {
		free(b->exps);
		free(b);
		return;
	}
	b->gw = gw;
	b->done = batch_done;
	gw->busy = true;
	gw_batch_run(b);
}

static void timer_fired(struct reactor_timer *tm)
{
	struct gw_autos *a = container_of(tm, struct gw_autos, timer);

	scan(a);
	reactor_timer_arm(&a->gw->reactors[0], &a->timer, AUTO_SCAN_NS);
}

void gw_auto_start(struct gw *gw)
{
	struct gw_autos *a;

	if (gw->autos || !(a = calloc(1, sizeof(*a)))) {
		if (!gw->autos)
			log_err("auto_export: out of memory; policies are not applied");
		return;
	}
	a->gw = gw;
	gw->autos = a;
	reactor_timer_init(&a->timer, timer_fired);
	/* Configured targets are live by now: their namespaces at once. */
	scan(a);
	reactor_timer_arm(&gw->reactors[0], &a->timer, AUTO_SCAN_NS);
}

void gw_auto_stop(struct gw *gw)
{
	if (!gw->autos)
		return;
	reactor_timer_cancel(&gw->autos->timer);
	free(gw->autos->skips);
	free(gw->autos);
	gw->autos = NULL;
}

void gw_auto_kick(struct gw *gw)
{
	if (gw->autos)
		scan(gw->autos);
}

static bool glob_matches(const struct gw_config *cfg, const char *subnqn)
{
	for (size_t i = 0; i < cfg->auto_export.nr; i++)
		if (!fnmatch(cfg->auto_export.v[i].subnqn, subnqn, 0))
			return true;
	return false;
}

void gw_auto_discovered(struct gw *gw, const char *subnqn)
{
	const struct gw_config *cfg = gw->cur->cfg;
	struct list_node *pos, *tmp;
	char name[NVMF_NQN_SIZE];

	if (!gw->autos || !glob_matches(cfg, subnqn))
		return;
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (!strcmp(t->cfg->subnqn, subnqn))
			return; /* made already */
	}
	config_auto_nqn_short(subnqn, name, sizeof(name));
	if (strlen(name) > 64 || gw_find_tgt(gw, name) || config_find_target(cfg, name)) {
		if (skip_first(gw->autos, subnqn, 0))
			log_warn("auto_export: discovered subsystem %s would be target %.64s, a name "
				 "another target has (or too long); not used", subnqn, name);
		return;
	}
	/* The strictest TLS of the policies for the subsystem: a made target
	 * never takes the key of the discovery controller that listed it
	 * (README, "TLS and discovery"). */
	int pi = config_auto_find_subsys(cfg, subnqn);
	struct gw_config *n =
		config_auto_target(cfg, name, subnqn, pi >= 0 ? &cfg->auto_export.v[pi] : NULL);
	struct gw_cfgref *ref = n ? gw_cfgref_new(gw, n) : NULL;
	struct gw_tgt *t = ref ? gw_tgt_new(gw, ref, &n->targets[0]) : NULL;
	if (!t) {
		if (ref)
			gw_cfgref_put(gw, ref);
		else
			config_free(n);
		log_err("auto_export: out of memory for discovered subsystem %s", subnqn);
		return;
	}
	t->auto_made = true;
	t->waiting = true;
	t->wait_since_ns = reactor_now_ns();
	log_notice("target %s: made for discovered subsystem %s (an auto_export policy matches); "
		   "its paths come from discovery", name, subnqn);
}

static bool stopping_tgt(struct gw_tgt *t, struct gw_tgt **stop, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (stop[i] == t)
			return true;
	return false;
}

/* The TLS a target made by policy p would get is what t has. */
static bool tls_same(const struct gw_auto_export *p, const struct gw_target *t)
{
	if (p->tls != t->tls)
		return false;
	return !p->tls || (p->tls_kdf == t->tls_kdf &&
			   !memcmp(&p->tls_key, &t->tls_key, sizeof(t->tls_key)));
}

void gw_auto_reload(struct gw *gw, const struct gw_config *n, struct gw_tgt **stop_tgts,
		    size_t *nr_stop_tgts, struct gw_exp **stop_exps, size_t *nr_stop_exps)
{
	struct list_node *pos, *tmp;

	if (gw->autos) {
		gw->autos->nr_skips = 0; /* the new file may settle them */
		gw->autos->skips_oom = false;
	}
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		const char *why = NULL;
		if (!t->auto_made)
			continue;
		for (size_t i = 0; i < n->nr_targets && !why; i++)
			if (!strcmp(n->targets[i].subnqn, t->cfg->subnqn) ||
			    !strcmp(n->targets[i].name, t->cfg->name))
				why = "the file now configures it";
		if (!why && !glob_matches(n, t->cfg->subnqn))
			why = "no auto_export policy matches it any more";
		if (!why && !tls_same(&n->auto_export.v[config_auto_find_subsys(n, t->cfg->subnqn)],
				      t->cfg))
			/* Made again at once, from the paths discovery lists. */
			why = "its policy's TLS settings changed";
		if (!why) {
			/* As for a configured target: a reload is how the
			 * operator says a target given up on is back. */
			if (t->mp && !strcmp(mp_target_state(t->mp), "failed")) {
				log_notice("reload: target %s (discovered %s): every path was given "
					   "up; reconnecting", t->cfg->name, t->cfg->subnqn);
				mp_target_reset(t->mp);
			}
			continue;
		}
		log_notice("reload: target %s (discovered %s): removed: %s", t->cfg->name,
			   t->cfg->subnqn, why);
		stop_tgts[(*nr_stop_tgts)++] = t;
	}
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		const char *why = NULL;
		struct gw_config *b = NULL;
		char buf[256];
		int idx = -1;
		if (!e->is_auto)
			continue;
		if (stopping_tgt(e->tgt, stop_tgts, *nr_stop_tgts))
			why = "its target goes";
		else if (e->failed || !e->vol)
			/* As a hand-written one: a reload starts it again. */
			why = "it failed; made again if its namespace is there";
		for (size_t i = 0; i < n->nr_exports && !why; i++) {
			const struct gw_export *x = &n->exports[i];
			if (!strcmp(x->name, e->name))
				why = "the file now has an export of that name";
			else if (x->nsid == e->cfg->nsid && !strcmp(x->target_name, e->tgt->cfg->name))
				why = "the file now exports that namespace by hand";
		}
		if (!why && (idx = config_auto_find(n, e->tgt->cfg->subnqn, e->cfg->nsid)) < 0)
			why = "no auto_export policy matches it any more";
		if (!why && config_auto_build(n, (size_t)idx, e->tgt->cfg, e->cfg->nsid, &b, buf,
					      sizeof(buf)) < 0)
			why = buf;
		if (!why && !config_export_equal(&b->exports[0], e->cfg))
			why = "its policy changed";
		config_free(b);
		if (!why) {
			e->auto_idx = (unsigned)idx;
			continue;
		}
		log_notice("reload: export %s (auto_export): removed: %s", e->name, why);
		stop_exps[(*nr_stop_exps)++] = e;
	}
}
