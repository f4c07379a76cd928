/* Live changes: reload (SIGHUP or the control command), export-add and
 * export-remove.  One change at a time, on reactor 0.  A reload validates
 * the whole file first (an invalid file changes nothing), then stops what
 * was removed or changed (exports first: their NBD servers and kernel
 * devices drain in-flight I/O, their FUSE files go; then targets), then
 * connects and starts what is new, as one batch.  Untouched targets and
 * exports are only moved to the new file's entries: same controllers, same
 * volume, no pause. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/config_diff.h"
#include "gateway/daemon_discovery.h"
#include "gateway/daemon_priv.h"
#include "gateway/base/log.h"

struct change {
	struct gw *gw;
	struct control_call *call; /* NULL for SIGHUP */
	struct gw_cfgref *ref; /* the file just loaded */
	unsigned pending;
	struct gw_tgt **stop_tgts;
	size_t nr_stop_tgts;
	struct gw_batch *b;
	unsigned added, removed, changed, kept, reattached;
	char restart[256];
	const char *export_name; /* export-add / export-remove */
};

/* The file's errors, one log line each, and joined for the reply. */
static struct gw_config *load_file(struct gw *gw, struct control_call *call, const char *what)
{
	struct gw_config *n = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int ret;

	if (!f) {
		log_err("%s: %s", what, strerror(errno));
		if (call)
			control_reply_error(call, "%s: out of memory", what);
		return NULL;
	}
	/* Against the running keys: a reload that changes reactors must not
	 * tear down every target and export that inherits a default from it
	 * when the reactors themselves stay until the restart. */
	ret = config_load_running(gw->path, gw->cfg, &n, f);
	fclose(f);
	if (ret == 0) {
		free(text);
		return n;
	}
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		log_err("%s: %s", what, line);
	log_err("%s: %s is not valid; nothing changed", what, gw->path);
	if (call) {
		/* strtok left NULs between the lines: join them again */
		for (size_t i = 0; i + 1 < len; i++)
			if (!text[i])
				text[i] = ';';
		control_reply_error(call, "invalid configuration, nothing changed: %s",
				    text ? text : "?");
	}
	free(text);
	return NULL;
}

static bool may_change(struct gw *gw, struct control_call *call, const char *what)
{
	const char *why = NULL;

	if (gw->state != GW_RUNNING)
		why = gw->state == GW_STARTING ? "the gateway is still starting"
					       : "the gateway is stopping";
	else if (gw->busy)
		why = "another change is being applied";
	if (!why)
		return true;
	log_warn("%s: refused: %s", what, why);
	if (call)
		control_reply_error(call, "%s: %s", what, why);
	return false;
}

static void change_free(struct change *c)
{
	free(c->stop_tgts);
	free(c);
}

static void finished(struct gw *gw)
{
	gw->busy = false;
	gw_op_finished(gw);
}

/* ---- reload ---- */

/* An export the reload started (added, changed, or failed and started
 * again) that does not run: a changed one has lost its old instance
 * already.  Not one waiting for its target (it comes up with it) nor one
 * going for another reason (its namespace went).  Only exports still
 * listed are looked at, by address: the batch's may be freed by now. */
static bool reload_not_started(const struct gw_batch *b, const struct gw_exp *e)
{
	bool ours = false;

	for (size_t i = 0; i < b->nr_exps && !ours; i++)
		ours = b->exps[i] == e;
	/* One whose namespace went during the reload is going, not failed. */
	return ours && !e->waiting && !e->removing && !e->ns_gone_pending && !gw_exp_running(e);
}

static void reload_done(struct gw_batch *b)
{
	struct change *c = b->arg;
	struct gw *gw = c->gw;
	unsigned total, ok = gw_exports_running(gw, &total), nr_failed = 0;
	struct list_node *pos, *tmp;
	char failed[512] = "";
	size_t off = 0;

	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (!reload_not_started(b, e))
			continue;
		nr_failed++;
		if (off < sizeof(failed)) {
			int w = snprintf(failed + off, sizeof(failed) - off, "%s%s", off ? ", " : "",
					 e->name);
			if (w > 0)
				off += (size_t)w;
		}
	}
	gw->reloads++;
	log_notice("reload: %u added, %u removed, %u changed, %u kept, %u re-attached; "
		   "%u of %u exports running",
		   c->added, c->removed, c->changed, c->kept, c->reattached, ok, total);
	if (nr_failed)
		log_err("reload: %u export%s could not be started: %s", nr_failed,
			nr_failed == 1 ? "" : "s", failed);
	if (c->call) {
		struct json_buf j;
		json_buf_init(&j);
		json_obj_begin(&j);
		json_kv_bool(&j, "ok", !nr_failed);
		if (nr_failed) {
			/* "error" makes the client (systemctl reload) fail */
			char err[768];
			snprintf(err, sizeof(err),
				 "reload applied (%u added, %u removed, %u changed, %u kept), but "
				 "%u export%s could not be started: %s (the gateway log says why)",
				 c->added, c->removed, c->changed, c->kept, nr_failed,
				 nr_failed == 1 ? "" : "s", failed);
			json_kv_str(&j, "error", err);
			json_key(&j, "failed");
			json_arr_begin(&j);
			list_for_each_safe(pos, tmp, &gw->exps) {
				struct gw_exp *e = container_of(pos, struct gw_exp, link);
				if (reload_not_started(b, e))
					json_str(&j, e->name);
			}
			json_arr_end(&j);
		}
		json_kv_u64(&j, "added", c->added);
		json_kv_u64(&j, "removed", c->removed);
		json_kv_u64(&j, "changed", c->changed);
		json_kv_u64(&j, "kept", c->kept);
		json_kv_u64(&j, "reattached", c->reattached);
		json_kv_u64(&j, "exports_running", ok);
		json_kv_u64(&j, "exports_total", total);
		if (c->restart[0])
			json_kv_str(&j, "restart_needed", c->restart);
		json_obj_end(&j);
		control_reply(c->call, &j);
	}
	free(b->exps);
	free(b);
	change_free(c);
	finished(gw);
	/* New policies, or namespaces a removed export had: at once. */
	gw_auto_kick(gw);
}

/* Everything removed is gone: create what the file has and we do not. */
static void reload_start(struct change *c)
{
	struct gw *gw = c->gw;
	struct gw_config *n = c->ref->cfg;
	struct gw_batch *b = calloc(1, sizeof(*b));

	if (!b || !(b->exps = calloc(n->nr_exports + 1, sizeof(*b->exps)))) {
		free(b);
		log_err("reload: out of memory; new targets and exports not started");
		if (c->call)
			control_reply_error(c->call, "reload: out of memory after removing");
		change_free(c);
		finished(gw);
		return;
	}
	b->gw = gw;
	b->arg = c;
	b->done = reload_done;
	for (size_t i = 0; i < n->nr_targets; i++) {
		if (gw_find_tgt(gw, n->targets[i].name))
			continue;
		struct gw_tgt *t = gw_tgt_new(gw, c->ref, &n->targets[i]);
		if (t)
			t->batch = b;
		else
			log_err("target %s: out of memory; not started", n->targets[i].name);
	}
	for (size_t i = 0; i < n->nr_exports; i++) {
		if (gw_find_exp(gw, n->exports[i].name))
			continue;
		struct gw_exp *e = gw_exp_new(gw, c->ref, &n->exports[i]);
		if (e)
			b->exps[b->nr_exps++] = e;
		else
			log_err("export %s: out of memory; not started", n->exports[i].name);
	}
	gw_batch_run(b);
}

static void tgt_stopped(void *arg)
{
	struct change *c = arg;

	if (--c->pending == 0)
		reload_start(c);
}

static void exp_stopped(void *arg)
{
	struct change *c = arg;

	if (--c->pending)
		return;
	/* Exports first, so that no volume is left on a target shut down. */
	c->pending = 1;
	for (size_t i = 0; i < c->nr_stop_tgts; i++) {
		c->pending++;
		gw_tgt_remove(c->stop_tgts[i], tgt_stopped, c);
	}
	tgt_stopped(c);
}

/* A kept export's NBD TLS keys: same paths (else the export changed), so
 * the content is what may be new.  New connections get the new keys;
 * sessions keep theirs.  The new file's check loaded the keys already, so
 * an error here is a file changed since: the old keys stay. */
static void reload_nbd_tls(struct gw_exp *e)
{
	const struct gw_nbd *n = &e->cfg->nbd;
	char err[512];
	bool changed;

	if (!e->tls)
		return;
	if (nbd_tls_reload(e->tls, &(struct nbd_tls_opts){ .mode = (enum nbd_tls_mode)n->tls,
							     .psk_file = n->tls_psk_file,
							     .cert_dir = n->tls_certificates,
							     .verify_peer = n->tls_verify_peer,
							     .max_handshakes =
								     (unsigned)n->tls_max_handshakes },
			   &changed, err, sizeof(err)) < 0)
		log_err("export %s: NBD TLS keys not re-read, the old ones stay: %s", e->name, err);
	else if (changed)
		log_notice("export %s: NBD TLS keys re-read (%s changed): new connections use them",
			   e->name, n->tls_psk_file ? n->tls_psk_file : n->tls_certificates);
}

/* Fills the change's lists from the diff; untouched objects are moved to
 * the new file now. */
static int plan(struct change *c, struct gw_tgt **tg, size_t nt, struct gw_exp **ex, size_t ne,
		struct gw_exp ***stop_exps, size_t *nr_stop_exps)
{
	struct gw *gw = c->gw;
	struct gw_config *n = c->ref->cfg;
	const struct gw_target **ot = calloc(nt + 1, sizeof(*ot));
	const struct gw_export **oe = calloc(ne + 1, sizeof(*oe));
	bool *tstop = calloc(nt + 1, sizeof(*tstop));
	struct config_diff d;
	int ret = -ENOMEM;

	/* Room for the auto_export objects too (gw_auto_reload). */
	*stop_exps = calloc(list_len(&gw->exps) + 1, sizeof(**stop_exps));
	c->stop_tgts = calloc(list_len(&gw->tgts) + 1, sizeof(*c->stop_tgts));
	if (!ot || !oe || !tstop || !*stop_exps || !c->stop_tgts)
		goto out;
	for (size_t i = 0; i < nt; i++)
		ot[i] = tg[i]->cfg;
	for (size_t i = 0; i < ne; i++)
		oe[i] = ex[i]->cfg;
	if ((ret = config_diff(ot, nt, oe, ne, n, &d)) < 0)
		goto out;
	c->added = d.added;
	c->removed = d.removed;
	c->changed = d.changed;
	c->kept = d.kept;

	for (size_t i = 0; i < nt; i++) {
		struct gw_tgt *t = tg[i];
		enum cd_action a = d.old_t[i].action;
		if (a == CD_KEEP && (!t->mp || !t->live)) {
			/* Never connected: a fresh target is the way to try again. */
			log_notice("target %s: unchanged but never connected; connecting it again",
				   t->cfg->name);
			a = CD_CHANGE;
			c->reattached++;
		}
		if (a != CD_KEEP) {
			tstop[i] = true;
			c->stop_tgts[c->nr_stop_tgts++] = t;
			continue;
		}
		gw_tgt_repoint(gw, t, c->ref, &n->targets[d.old_t[i].peer]);
		if (!strcmp(mp_target_state(t->mp), "failed")) {
			/* ctrl_loss_tmo is over on every path: the operator says
			 * the target is back.  Same volumes, so the exports keep
			 * their devices and files. */
			log_notice("target %s: every path was given up; reconnecting (reload)",
				   t->cfg->name);
			mp_target_reset(t->mp);
			c->reattached++;
		}
	}
	for (size_t i = 0; i < ne; i++) {
		struct gw_exp *e = ex[i];
		enum cd_action a = d.old_e[i].action;
		bool tgt_stops = false;
		for (size_t k = 0; k < nt; k++)
			tgt_stops |= tstop[k] && tg[k] == e->tgt;
		if (a == CD_KEEP && tgt_stops)
			a = CD_CHANGE;
		if (a == CD_KEEP && (e->failed || !e->vol)) {
			log_notice("export %s: unchanged but failed; starting it again", e->name);
			a = CD_CHANGE;
			c->reattached++;
		}
		if (a != CD_KEEP) {
			(*stop_exps)[(*nr_stop_exps)++] = e;
			continue;
		}
		gw_exp_repoint(gw, e, c->ref, &n->exports[d.old_e[i].peer]);
		reload_nbd_tls(e);
	}
	config_diff_free(&d);
	gw_auto_reload(gw, n, c->stop_tgts, &c->nr_stop_tgts, *stop_exps, nr_stop_exps);
	ret = 0;
out:
	free(ot);
	free(oe);
	free(tstop);
	return ret;
}

int gw_reload(struct gw *gw, struct control_call *call)
{
	struct gw_config *n;
	struct change *c;
	struct list_node *pos, *tmp;
	struct gw_tgt **tg = NULL;
	struct gw_exp **ex = NULL, **stop_exps = NULL;
	size_t nt = 0, ne = 0, nr_stop_exps = 0;
	int ret = -ENOMEM;

	if (call && gw->state == GW_RUNNING && gw->busy) {
		/* An operator's reload (systemctl reload) must not fail
		 * because an auto_export batch or export-add is under way. */
		if (!gw->reload_call) {
			log_notice("reload: queued until the change being applied is done");
			gw->reload_call = call;
			return 0;
		}
		/* One reload reads the file as it is when it runs: later than
		 * any waiting request was made, so it is the answer to all of
		 * them (a second run would find nothing new). */
		if (control_call_join(gw->reload_call, call) < 0) {
			log_warn("reload: refused: %d reloads wait already", CONTROL_MAX_JOINED + 1);
			control_reply_error(call, "reload: %d reloads wait already for the change "
					    "being applied; try again later", CONTROL_MAX_JOINED + 1);
			return -EBUSY;
		}
		log_notice("reload: joins the reload already queued");
		return 0;
	}
	if (!may_change(gw, call, "reload"))
		return -EBUSY;
	n = load_file(gw, call, "reload");
	if (!n)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	tg = calloc(list_len(&gw->tgts) + 1, sizeof(*tg));
	ex = calloc(list_len(&gw->exps) + 1, sizeof(*ex));
	if (!c || !tg || !ex)
		goto fail;
	c->gw = gw;
	c->call = call;
	c->ref = gw_cfgref_new(gw, n);
	if (!c->ref)
		goto fail;
	n = NULL;
	/* What the file made: the policies' objects are weighed apart
	 * (gw_auto_reload), the file does not name them. */
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (!t->auto_made)
			tg[nt++] = t;
	}
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (!e->is_auto)
			ex[ne++] = e;
	}

	/* The new file becomes the current one; the old is freed once
	 * nothing points into it. */
	struct gw_cfgref *old = gw->cur;
	gw->cur = c->ref;
	gw_cfgref_get(old);
	if (plan(c, tg, nt, ex, ne, &stop_exps, &nr_stop_exps) < 0) {
		/* Objects moved so far point into the new file, which is now
		 * current: consistent, only nothing was stopped or started. */
		gw_cfgref_put(gw, old);
		log_err("reload: out of memory; nothing started or stopped");
		if (call)
			control_reply_error(call, "reload: out of memory");
		free(stop_exps);
		change_free(c);
		free(tg);
		free(ex);
		return -ENOMEM;
	}
	gw_cfgref_put(gw, old);
	/* The discovery list: started, stopped or left alone per entry. */
	gw_discovery_reload(gw);

	config_diff_restart_keys(gw->cfg, c->ref->cfg, c->restart, sizeof(c->restart));
	if (c->restart[0])
		log_warn("reload: %s changed; that takes a restart (the running values stay)",
			 c->restart);
	if (!getenv("NVMF_GATEWAY_LOG") && c->ref->cfg->log_level)
		log_set_level(c->ref->cfg->log_level);

	gw->busy = true;
	c->pending = 1;
	for (size_t i = 0; i < nr_stop_exps; i++) {
		c->pending++;
		gw_exp_remove(stop_exps[i], exp_stopped, c);
	}
	free(stop_exps);
	free(tg);
	free(ex);
	exp_stopped(c);
	return 0;
fail:
	config_free(n);
	free(c);
	free(tg);
	free(ex);
	log_err("reload: out of memory; nothing changed");
	if (call)
		control_reply_error(call, "reload: out of memory");
	return ret;
}

/* ---- export-add / export-remove ---- */

static void add_failed_removed(void *arg)
{
	struct change *c = arg;
	struct gw *gw = c->gw;

	control_reply_error(c->call,
			    "export %s could not be started (the gateway log says why)",
			    c->export_name);
	free((char *)c->export_name);
	change_free(c);
	finished(gw);
}

static void add_done(struct gw_batch *b)
{
	struct change *c = b->arg;
	struct gw *gw = c->gw;
	struct gw_exp *e = b->exps[0];

	free(b->exps);
	free(b);
	if (e->waiting) {
		/* Its target is not reached yet: it starts with it. */
		log_notice("export-add: export %s waits for target %s", e->name,
			   e->tgt->cfg->name);
		control_reply_ok(c->call);
		free((char *)c->export_name);
		change_free(c);
		finished(gw);
		return;
	}
	if (!gw_exp_running(e)) {
		log_err("export-add: export %s could not be started; removing it again",
			e->name);
		gw_exp_remove(e, add_failed_removed, c);
		return;
	}
	log_notice("export-add: export %s started", e->name);
	control_reply_ok(c->call);
	free((char *)c->export_name);
	change_free(c);
	finished(gw);
}

void gw_export_add(struct gw *gw, struct control_call *call, const char *name)
{
	struct gw_config *n;
	struct gw_export *x = NULL;
	struct gw_tgt *t;
	struct gw_cfgref *ref;
	struct change *c;
	struct gw_batch *b;
	struct gw_exp *e;

	if (!may_change(gw, call, "export-add"))
		return;
	if (gw_find_exp(gw, name))
		return control_reply_error(call, "export %s is running already", name);
	n = load_file(gw, call, "export-add");
	if (!n)
		return;
	for (size_t i = 0; i < n->nr_exports; i++)
		if (!strcmp(n->exports[i].name, name))
			x = &n->exports[i];
	if (!x) {
		control_reply_error(call, "%s has no export named \"%s\"", gw->path, name);
		config_free(n);
		return;
	}
	t = gw_find_tgt(gw, x->target_name);
	if (!t || !config_target_equal(t->cfg, x->target)) {
		control_reply_error(call,
				    "target %s of export %s is %s; apply the file with reload",
				    x->target_name, name,
				    t ? "not what the file says now" : "not running");
		config_free(n);
		return;
	}
	c = calloc(1, sizeof(*c));
	b = calloc(1, sizeof(*b));
	ref = gw_cfgref_new(gw, n);
	e = ref ? gw_exp_new(gw, ref, x) : NULL;
	if (!c || !b || !e || !(b->exps = calloc(1, sizeof(*b->exps))) ||
	    !(c->export_name = strdup(name))) {
		free(c);
		free(b);
		control_reply_error(call, "export-add: out of memory");
		if (e)
			gw_exp_remove(e, NULL, NULL);
		else if (ref)
			gw_cfgref_put(gw, ref);
		else
			config_free(n);
		return;
	}
	c->gw = gw;
	c->call = call;
	c->ref = ref;
	b->gw = gw;
	b->arg = c;
	b->done = add_done;
	b->exps[b->nr_exps++] = e;
	gw->busy = true;
	log_notice("export-add: starting export %s from %s", name, gw->path);
	gw_batch_run(b);
}

static void remove_done(void *arg)
{
	struct change *c = arg;
	struct gw *gw = c->gw;

	control_reply_ok(c->call);
	change_free(c);
	finished(gw);
}

void gw_export_remove(struct gw *gw, struct control_call *call, const char *name)
{
	struct gw_exp *e;
	struct change *c;

	if (!may_change(gw, call, "export-remove"))
		return;
	e = gw_find_exp(gw, name);
	if (!e)
		return control_reply_error(call, "no export named \"%s\"", name);
	c = calloc(1, sizeof(*c));
	if (!c)
		return control_reply_error(call, "export-remove: out of memory");
	c->gw = gw;
	c->call = call;
	gw->busy = true;
	log_notice("export-remove: removing export %s (until the next reload or export-add)",
		   name);
	gw_auto_removed_by_hand(e);
	gw_exp_remove(e, remove_done, c);
}
