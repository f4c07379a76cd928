/* nvmf-gateway run: the daemon.  Loads the configuration, starts the
 * reactors (reactor 0 on the main thread: admin queues, keep-alive,
 * listeners, signals; the others on threads of their own, each owning one
 * I/O queue of every controller), connects every target, builds a volume
 * per export and starts its exporters.  SIGINT/SIGTERM tear it down in
 * order: exporters (draining in-flight I/O), then controllers (CC.SHN),
 * then the reactors. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/daemon.h"
#include "gateway/daemon_metrics.h"
#include "gateway/daemon_priv.h"
#include "gateway/daemon_discovery.h"
#include "gateway/runtime_control.h"
#include "gateway/linkwatch.h"
#include "gateway/base/invariant.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"
#include "gateway/base/metrics.h"
#include "gateway/volume/qos.h"
#include "gateway/base/reclaim.h"
#include "gateway/base/notify.h"
#include "gateway/volume/volume.h"
#include "gateway/watchdog.h"
#include "fuse/fusefs.h"
#include "nbd/kdev.h"
#include "nbd/nbd.h"
#include "transports/ctrl.h"
#include "gateway/volume/mpath.h"

/* No default: -Wswitch names a state added without a name. */
const char *gw_state_name(enum gw_state s)
{
	switch (s) {
	case GW_STARTING: return "starting";
	case GW_RUNNING: return "running";
	case GW_STOPPING: return "stopping";
	case GW_SHUTDOWN: return "shutdown";
	case GW_DONE: return "done";
	}
	return "?";
}

static void gw_set_state(struct gw *gw, enum gw_state s)
{
	if (s <= gw->state) {
		log_err("gateway: illegal state change %s -> %s", gw_state_name(gw->state),
			gw_state_name(s));
		return;
	}
	log_info("gateway: %s -> %s", gw_state_name(gw->state), gw_state_name(s));
	gw->state = s;
}

static void gw_stop(struct gw *gw);

/* ---- objects ---- */

struct gw_cfgref *gw_cfgref_new(struct gw *gw, struct gw_config *cfg)
{
	struct gw_cfgref *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->cfg = cfg;
	list_add_tail(&gw->cfgs, &r->link);
	return r;
}

void gw_cfgref_get(struct gw_cfgref *r)
{
	r->refs++;
}

void gw_cfgref_put(struct gw *gw, struct gw_cfgref *r)
{
	if (r->refs && --r->refs)
		return;
	/* The first file also holds the gateway-wide keys; the latest is
	 * what export-add and the next reload start from. */
	if (r->cfg == gw->cfg || r == gw->cur)
		return;
	list_del(&r->link);
	config_free(r->cfg);
	free(r);
}

struct gw_tgt *gw_tgt_new(struct gw *gw, struct gw_cfgref *ref, struct gw_target *cfg)
{
	struct gw_tgt *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->gw = gw;
	t->ref = ref;
	t->cfg = cfg;
	gw_cfgref_get(ref);
	list_add_tail(&gw->tgts, &t->link);
	return t;
}

struct gw_tgt *gw_find_tgt(struct gw *gw, const char *name)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (!strcmp(t->cfg->name, name))
			return t;
	}
	return NULL;
}

struct gw_exp *gw_find_exp(struct gw *gw, const char *name)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (!strcmp(e->name, name))
			return e;
	}
	return NULL;
}

struct gw_exp *gw_exp_new(struct gw *gw, struct gw_cfgref *ref, struct gw_export *cfg)
{
	struct gw_exp *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->gw = gw;
	e->ref = ref;
	e->cfg = cfg;
	e->name = strdup(cfg->name);
	e->desc = strdup(cfg->target->subnqn);
	e->tgt = gw_find_tgt(gw, cfg->target_name);
	if (!e->name || !e->desc || !e->tgt) {
		free(e->name);
		free(e->desc);
		free(e);
		return NULL;
	}
	gw_cfgref_get(ref);
	list_add_tail(&gw->exps, &e->link);
	return e;
}

void gw_tgt_repoint(struct gw *gw, struct gw_tgt *t, struct gw_cfgref *ref, struct gw_target *c)
{
	struct gw_cfgref *old = t->ref;

	/* Kept by a reload (config_target_equal): paths from discovery move
	 * to the new configuration, which has none of its own. */
	if (t->cfg && t->cfg != c && t->cfg->paths_discovered && !c->nr_paths) {
		c->paths = t->cfg->paths;
		c->nr_paths = t->cfg->nr_paths;
		c->paths_discovered = true;
		t->cfg->paths = NULL;
		t->cfg->nr_paths = 0;
		t->cfg->paths_discovered = false;
	}
	gw_cfgref_get(ref);
	t->ref = ref;
	t->cfg = c;
	/* Exports made by a policy point at their target's entry. */
	struct list_node *pos, *tmp;
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (e->is_auto && e->tgt == t)
			e->cfg->target = c;
	}
	gw_cfgref_put(gw, old);
}

void gw_exp_repoint(struct gw *gw, struct gw_exp *e, struct gw_cfgref *ref, struct gw_export *c)
{
	struct gw_cfgref *old = e->ref;

	gw_cfgref_get(ref);
	e->ref = ref;
	e->cfg = c;
	gw_cfgref_put(gw, old);
}

static void exp_free(struct gw_exp *e)
{
	struct gw *gw = e->gw;

	list_del(&e->link);
	gw_cfgref_put(gw, e->ref);
	nbd_tls_free(e->tls);
	free(e->name);
	free(e->desc);
	free(e);
}

bool gw_exp_running(const struct gw_exp *e)
{
	return !e->failed && !e->removing && (e->srv || e->kdev || e->in_fuse);
}

unsigned gw_exports_running(struct gw *gw, unsigned *total)
{
	struct list_node *pos, *tmp;
	unsigned ok = 0, n = 0;

	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		n++;
		ok += gw_exp_running(e);
	}
	if (total)
		*total = n;
	return ok;
}

/* ---- signals ---- */

static void sig_arm(struct gw *gw);

static void sig_done(struct reactor_op *op, int res, uint32_t flags)
{
	struct gw *gw = container_of(op, struct gw, sig_op);
	(void)flags;
	gw->sig_armed = false;
	if (res == -ECANCELED)
		return;
	if (res > 0) {
		struct signalfd_siginfo *si = (void *)gw->siginfo;
		if (si->ssi_signo == SIGHUP) {
			if (gw->state == GW_RUNNING && !gw->busy) {
				log_notice("gateway: SIGHUP: reloading %s", gw->path);
				gw_reload(gw, NULL);
			} else if (gw->state <= GW_RUNNING) {
				log_notice("gateway: SIGHUP: reloading once the %s is done",
					   gw->busy ? "current change" : "start");
				gw->reload_queued = true;
			}
		} else {
			log_notice("gateway: signal %u: stopping", si->ssi_signo);
			gw_stop(gw);
		}
	}
	if (gw->state < GW_DONE)
		sig_arm(gw);
}

static void sig_arm(struct gw *gw)
{
	reactor_read(&gw->reactors[0], &gw->sig_op, gw->sfd, gw->siginfo, sizeof(gw->siginfo));
	gw->sig_armed = true;
}

void gw_op_finished(struct gw *gw)
{
	unsigned total, ok = gw_exports_running(gw, &total);

	notify_sendf("STATUS=%u of %u exports running", ok, total);
	struct control_call *call = gw->reload_call;
	if (gw->stop_requested) {
		gw->reload_queued = false;
		if (call) {
			gw->reload_call = NULL;
			log_warn("reload: refused: the gateway is stopping");
			control_reply_error(call, "reload: the gateway is stopping");
		}
		gw_stop(gw);
		return;
	}
	if ((call || gw->reload_queued) && gw->state == GW_RUNNING && !gw->busy) {
		/* One reload answers both a queued call and a SIGHUP. */
		gw->reload_call = NULL;
		log_notice("gateway: reloading %s (%s while busy)", gw->path,
			   call ? "control request" : "SIGHUP");
		gw->reload_queued = false;
		gw_reload(gw, call);
	}
	gw_ns_gone_resume(gw);
	gw_wait_resume(gw);
}

/* ---- teardown ---- */

/* Another thread's reactor is stopped by a message: it wakes its wait and
 * sets the flag on its own thread. */
static void stop_here(struct reactor_msg *m)
{
	reactor_stop(container_of(m, struct stop_msg, m)->r);
}

static void all_done(struct gw *gw)
{
	gw_set_state(gw, GW_DONE);
	reactor_stop(&gw->reactors[0]);
	for (unsigned i = 1; i < gw->nr_reactors; i++) {
		gw->stop_msgs[i].m.fn = stop_here;
		gw->stop_msgs[i].r = &gw->reactors[i];
		reactor_send_msg(&gw->reactors[i], &gw->stop_msgs[i].m);
	}
}

static void tgt_shutdown_done(struct mp_target *mp, int err, void *arg)
{
	struct gw_tgt *t = arg;
	struct gw *gw = t->gw;
	(void)mp;
	(void)err;
	t->live = false;
	if (--gw->pending == 0)
		all_done(gw);
}

static void shutdown_controllers(struct gw *gw)
{
	struct list_node *pos, *tmp;

	gw_set_state(gw, GW_SHUTDOWN);
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		vol_destroy(e->vol);
		e->vol = NULL;
	}
	gw->pending = 1;
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (!t->mp)
			continue;
		gw->pending++;
		mp_target_shutdown(t->mp, tgt_shutdown_done, t);
	}
	if (--gw->pending == 0)
		all_done(gw);
}

static void exporter_closed(void *arg)
{
	struct gw *gw = arg;
	if (--gw->pending == 0)
		shutdown_controllers(gw);
}

static void gw_stop(struct gw *gw)
{
	struct list_node *pos, *tmp;

	if (gw->state >= GW_STOPPING)
		return;
	if (gw->state == GW_STARTING || gw->busy) {
		/* Connecting controllers, kernel attaches and a change being
		 * applied finish (or fail) first; the stop happens when the
		 * last one has answered. */
		gw->stop_requested = true;
		return;
	}
	gw_set_state(gw, GW_STOPPING);
	notify_send("STOPPING=1");
	/* I/O waiting for a path gets a few seconds more, not the recovery
	 * deadlines, and I/O waiting for QoS tokens goes at once: the drains
	 * below end in bounded time. */
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (e->vol)
			vol_drain(e->vol);
	}
	gw->pending = 1;
	if (gw->control) {
		gw->pending++;
		control_stop(gw->control, exporter_closed, gw);
		gw->control = NULL;
	}
	if (gw->metrics) {
		gw->pending++;
		metrics_stop(gw->metrics, exporter_closed, gw);
		gw->metrics = NULL;
	}
	if (gw->fs) {
		gw->pending++;
		fusefs_stop(gw->fs, exporter_closed, gw);
		gw->fs = NULL;
	}
	gw_auto_stop(gw);
	gw->pending += gw_discovery_stop(gw, exporter_closed, gw);
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (e->srv) {
			gw->pending++;
			nbd_server_stop(e->srv, exporter_closed, gw);
			e->srv = NULL;
		}
		if (e->kdev) {
			gw->pending++;
			nbd_kdev_detach(e->kdev, exporter_closed, gw);
			e->kdev = NULL;
		}
	}
	exporter_closed(gw);
}

/* ---- removing one export or target (reload, export-remove) ---- */

static void exp_closer_done(void *arg)
{
	struct gw_exp *e = arg;
	void (*removed)(void *) = e->removed, (*removed2)(void *) = e->removed2;
	void *removed_arg = e->removed_arg, *removed2_arg = e->removed2_arg;

	if (--e->closing)
		return;
	/* Every exporter is gone and its I/O drained: nothing uses the
	 * volume any more. */
	vol_destroy(e->vol);
	e->vol = NULL;
	log_notice("export %s: removed", e->name);
	exp_free(e);
	if (removed)
		removed(removed_arg);
	if (removed2)
		removed2(removed2_arg);
}

static void exp_takedown(struct gw_exp *e);

void gw_exp_remove(struct gw_exp *e, void (*removed)(void *arg), void *arg)
{
	if (e->removing) {
		/* Already going (its namespace was removed, say): this caller
		 * waits for the same end.  Starting over would count its
		 * closers again and free it under the first takedown. */
		INVARIANT(!e->removed2, "an export removed a third time while going");
		e->removed2 = removed;
		e->removed2_arg = arg;
		return;
	}
	e->removing = true;
	e->removed = removed;
	e->removed_arg = arg;
	if (e->batch) {
		/* The helper thread attaching its /dev/nbdN holds e: the
		 * takedown waits for the answer (kdev_attached). */
		e->remove_deferred = true;
		log_info("export %s: removed once its /dev/nbdN attach answers", e->name);
		return;
	}
	exp_takedown(e);
}

static void exp_takedown(struct gw_exp *e)
{
	struct gw *gw = e->gw;

	if (e->vol)
		vol_drain(e->vol);
	e->closing = 1;
	if (e->srv) {
		e->closing++;
		nbd_server_stop(e->srv, exp_closer_done, e);
		e->srv = NULL;
	}
	if (e->kdev) {
		e->closing++;
		nbd_kdev_detach(e->kdev, exp_closer_done, e);
		e->kdev = NULL;
	}
	if (e->in_fuse && gw->fs) {
		e->closing++;
		fusefs_remove_file(gw->fs, e->name, exp_closer_done, e);
	}
	e->in_fuse = false;
	exp_closer_done(e);
}

struct tgt_removal {
	struct gw_tgt *t;
	void (*done)(void *);
	void *arg;
};

static void tgt_removed(struct mp_target *mp, int err, void *arg)
{
	struct tgt_removal *r = arg;
	struct gw_tgt *t = r->t;
	struct gw *gw = t->gw;
	struct mp_target **d;
	(void)err;

	/* The target's per-reactor views go only once the reactors have
	 * stopped: kept until exit. */
	d = realloc(gw->dead_mps, (gw->nr_dead_mps + 1) * sizeof(*d));
	if (d) {
		gw->dead_mps = d;
		gw->dead_mps[gw->nr_dead_mps++] = mp;
	} else {
		log_warn("target %s: out of memory; its controller memory is not freed",
			 t->cfg->name);
	}
	log_notice("target %s: removed", t->cfg->name);
	list_del(&t->link);
	gw_cfgref_put(gw, t->ref);
	free(t);
	r->done(r->arg);
	free(r);
}

void gw_tgt_remove(struct gw_tgt *t, void (*done)(void *arg), void *arg)
{
	struct tgt_removal *r = calloc(1, sizeof(*r));
	struct gw *gw = t->gw;

	if (!r) {
		/* Kept running, unused: better than a half-removed target. */
		log_err("target %s: out of memory; not removed", t->cfg->name);
		done(arg);
		return;
	}
	r->t = t;
	r->done = done;
	r->arg = arg;
	if (t->mp)
		linkwatch_remove(gw->lw, t->mp); /* no event may reach it once freed */
	if (!t->mp) {
		list_del(&t->link);
		gw_cfgref_put(gw, t->ref);
		free(t);
		done(arg);
		free(r);
		return;
	}
	mp_target_shutdown(t->mp, tgt_removed, r);
}

/* ---- start-up ---- */

static void notify_ready(struct gw *gw, bool ok)
{
	if (gw->ready_fd < 0)
		return;
	char c = ok ? 'R' : 'F';
	if (write(gw->ready_fd, &c, 1) < 0)
		log_warn("gateway: cannot tell the parent process: %s", strerror(errno));
	close(gw->ready_fd);
	gw->ready_fd = -1;
}

static int start_export(struct gw *gw, struct gw_exp *e)
{
	struct gw_export *c = e->cfg;
	int ret;

	if (!e->tgt->live && e->tgt->waiting) {
		/* Nothing to serve yet, not even a size: no exporter until
		 * the target is up (daemon_wait.c). */
		e->waiting = true;
		log_notice("export %s: waiting for target %s; it is served once the target "
			   "is reached", c->name, c->target_name);
		return 0;
	}
	if (!e->tgt->live) {
		log_err("export %s: target %s is not connected; export not started", c->name,
			c->target_name);
		return -ENOTCONN;
	}
	ret = vol_mp_create(c->name, e->tgt->mp, c->nsid, c->read_only, &e->vol);
	if (ret < 0)
		return ret;
	gw_ns_watch(e);
	ret = vol_set_qos(e->vol, &(struct vol_qos_limits){
		.iops = c->qos_iops, .bandwidth = c->qos_bandwidth,
		.read_iops = c->qos_read_iops, .read_bandwidth = c->qos_read_bandwidth,
		.write_iops = c->qos_write_iops, .write_bandwidth = c->qos_write_bandwidth });
	if (ret < 0)
		return ret;
	e->nbd.name = e->name;
	e->nbd.description = e->desc;
	e->nbd.vol = e->vol;
	e->nbd.read_only = c->read_only;
	if (c->has_nbd && c->nbd.listen.kind != GW_LISTEN_NONE) {
		if (c->nbd.tls != NBD_TLS_OFF && !e->tls) {
			char err[512];
			ret = nbd_tls_new(&(struct nbd_tls_opts){
						  .mode = (enum nbd_tls_mode)c->nbd.tls,
						  .psk_file = c->nbd.tls_psk_file,
						  .cert_dir = c->nbd.tls_certificates,
						  .verify_peer = c->nbd.tls_verify_peer,
						  .max_handshakes =
							  (unsigned)c->nbd.tls_max_handshakes },
					  &e->tls, err, sizeof(err));
			if (ret < 0) {
				log_err("export %s: NBD TLS: %s", c->name, err);
				return ret;
			}
		}
		struct nbd_export *list[] = { &e->nbd };
		struct nbd_server_opts o = {
			.listen = &c->nbd.listen,
			.exports = list,
			.nr_exports = 1,
			.reactors = gw->rp,
			.nr_reactors = gw->nr_reactors,
			.max_connections = (unsigned)(c->nbd.max_connections ? c->nbd.max_connections
									      : gw->cfg->max_connections),
			.tls = e->tls,
		};
		ret = nbd_server_start(&o, &e->srv);
		if (ret < 0)
			return ret;
		log_notice("export %s: NBD on %s", c->name, c->nbd.listen.spec);
	}
	return 0;
}

static void fuse_gone(void *arg, int err)
{
	struct gw *gw = arg;

	if (gw->state >= GW_STOPPING)
		return;
	if (err)
		log_err("fuse: the session failed (%s); stopping", strerror(-err));
	else
		log_notice("fuse: %s was unmounted from outside; stopping",
			   gw->cfg->fuse.mountpoint);
	gw_stop(gw);
}

/* mkdir -p: the default mountpoint lives under /run, which is empty after
 * a boot. */
static int mkdir_p(const char *path)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* One FUSE filesystem holds a file per export that asks for one: mounted
 * with the batch's files when there is none yet, else the files are added
 * to it. */
static int start_fuse(struct gw *gw, struct gw_exp **exps, size_t nr)
{
	struct fusefs_file *files = calloc(nr ? nr : 1, sizeof(*files));
	unsigned n = 0;
	int ret;

	if (!files)
		return -ENOMEM;
	for (size_t i = 0; i < nr; i++) {
		struct gw_exp *e = exps[i];
		if (!e->cfg->fuse || e->failed || !e->vol)
			continue;
		files[n].name = e->name;
		files[n].vol = e->vol;
		files[n].read_only = e->cfg->read_only;
		if (gw->fs) {
			ret = fusefs_add_file(gw->fs, &files[n]);
			if (ret < 0)
				log_err("export %s: no FUSE file (%s)", e->name, strerror(-ret));
			else
				e->in_fuse = true;
			continue;
		}
		e->in_fuse = true;
		n++;
	}
	ret = 0;
	if (n && (ret = mkdir_p(gw->cfg->fuse.mountpoint)) < 0)
		log_err("fuse: cannot create %s: %s", gw->cfg->fuse.mountpoint, strerror(-ret));
	if (n && !ret) {
		struct fusefs_opts o = {
			.mountpoint = gw->cfg->fuse.mountpoint,
			.allow_other = gw->cfg->fuse.allow_other,
			.uid = gw->cfg->fuse.uid,
			.gid = gw->cfg->fuse.gid,
			.files = files,
			.nr_files = n,
			.on_gone = fuse_gone,
			.arg = gw,
		};
		ret = fusefs_start(&gw->reactors[0], &o, &gw->fs);
		if (ret == 0)
			log_notice("fuse: %u files under %s", n, gw->cfg->fuse.mountpoint);
	}
	if (ret < 0 && !gw->fs)
		for (size_t i = 0; i < nr; i++)
			exps[i]->in_fuse = false;
	free(files);
	return ret;
}

/* ---- metrics ---- */

/* Per-path counters, so that a test (or an operator) can tell which path
 * carried the I/O. */
static void gw_metrics_paths(struct gw *gw, struct metrics_buf *mb)
{
	size_t cap = list_len(&gw->tgts) * MP_MAX_PATHS, n = 0;
	struct dm_path *dp = calloc(cap ? cap : 1, sizeof(*dp));
	struct mp_path_info pi[MP_MAX_PATHS];
	struct list_node *pos, *tmp;

	if (!dp) {
		mb->nomem = true;
		return;
	}
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		unsigned np = t->mp ? mp_target_paths(t->mp, pi, MP_MAX_PATHS) : 0;

		for (unsigned j = 0; j < np; j++)
			dp[n++] = (struct dm_path){
				.target = t->cfg->name, .index = j,
				.transport = nvmf_trtype_name(pi[j].opts->trtype),
				.traddr = pi[j].opts->traddr, .trsvcid = pi[j].opts->trsvcid,
				.state = nvmf_ctrl_state_name(pi[j].state),
				.ana_state = nvme_ana_state_name(pi[j].ana_state),
				.reads = pi[j].reads, .writes = pi[j].writes,
				.read_bytes = pi[j].read_bytes, .write_bytes = pi[j].write_bytes,
				.errors = pi[j].errors, .retries = pi[j].retries,
				.reconnects = pi[j].reconnects, .in_flight = pi[j].in_flight,
			};
	}
	daemon_metrics_paths(mb, dp, n);
	free(dp);
}

/* On reactor 0, where volumes are also destroyed (and the endpoint is
 * stopped before they are): every vol pointer here is live. */
static void gw_fill_metrics(void *arg, struct metrics_buf *mb)
{
	struct gw *gw = arg;
	unsigned n;
	struct list_node *pos, *tmp;

	gw_exports_running(gw, &n);
	struct dm_export *ex = calloc(n ? n : 1, sizeof(*ex));
	size_t i = 0;

	if (!ex) {
		mb->nomem = true;
		return;
	}
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		ex[i++] = (struct dm_export){ .name = e->name,
					      .target = e->tgt->cfg->name,
					      .vol = e->failed ? NULL : e->vol };
	}
	daemon_metrics_gateway(mb, NVMF_GATEWAY_VERSION,
			       (double)(reactor_now_ns() - gw->start_ns) / 1e9);
	daemon_metrics_exports(mb, ex, n);
	free(ex);
	gw_metrics_paths(gw, mb);
}

static void start_metrics(struct gw *gw)
{
	if (gw->cfg->metrics.kind == GW_LISTEN_NONE)
		return;
	/* A metrics endpoint that cannot listen is no reason to take the
	 * disks away: logged (by metrics_start), and the exports run. */
	metrics_start(&gw->reactors[0], &gw->cfg->metrics, gw_fill_metrics, gw, &gw->metrics);
}

static void start_control(struct gw *gw)
{
	char dir[4096];
	char *slash;
	int ret;

	/* Like metrics: the exports run without it (logged). */
	snprintf(dir, sizeof(dir), "%s", gw->cfg->control);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if ((ret = mkdir_p(dir)) < 0)
			log_err("control: cannot create %s: %s", dir, strerror(-ret));
	}
	if (control_start_access(&gw->reactors[0], gw->cfg->control, &gw->cfg->control_access,
				 gw_control_handle, gw, &gw->control) == 0 &&
	    (ret = runtime_control_record(gw->cfg->control)) < 0)
		log_warn("control: cannot record %s in $RUNTIME_DIRECTORY: %s (a reload with "
			 "a changed gateway.control will not find it)",
			 gw->cfg->control, strerror(-ret));
}

/* ---- batches: connect targets, then start exports ---- */

static void batch_exports(struct gw_batch *b);

static void batch_put(struct gw_batch *b)
{
	if (--b->pending)
		return;
	if (!b->exports_phase) {
		b->exports_phase = true;
		batch_exports(b);
		return;
	}
	b->done(b);
}

static void kdev_attached(void *arg, struct nbd_kdev *d, int index_or_err)
{
	struct gw_exp *e = arg;
	struct gw_batch *b = e->batch;

	e->batch = NULL;
	if (d) {
		e->kdev = d;
		log_notice("export %s: %s /dev/nbd%d", e->name,
			   nbd_kdev_reattached(d) ? "reattached to" : "attached as", index_or_err);
	}
	bool deferred = e->remove_deferred;
	e->remove_deferred = false;
	/* The batch still reads e when it ends; the takedown frees it. */
	batch_put(b);
	if (deferred)
		exp_takedown(e);
}

static void start_kdev(struct gw_batch *b, struct gw_exp *e)
{
	struct gw_export *c = e->cfg;

	/* The namespace is part of the name: after a crash the next start
	 * must not hand a device whose export now names another namespace
	 * (the file changed meanwhile) to that namespace, under the old
	 * filesystem's dirty pages.  The export's name alone is what
	 * gateways before this one used. */
	snprintf(e->backend_id, sizeof(e->backend_id), "nvmf-gateway:%s/%u@%s", c->name, c->nsid,
		 e->tgt->cfg->subnqn);
	snprintf(e->legacy_backend_id, sizeof(e->legacy_backend_id), "nvmf-gateway:%s", c->name);
	struct nbd_kdev_opts o = {
		.index = c->nbd.device == GW_NBD_AUTO ? -1 : c->nbd.device,
		.connections = (unsigned)c->nbd.connections,
		/* The kernel holds I/O this long for a restarted gateway. */
		.dead_conn_timeout_s = 120,
		.backend_id = e->backend_id,
		.legacy_backend_id = e->legacy_backend_id,
		.iface = (enum nbd_kdev_iface)c->nbd.iface,
	};
	e->batch = b;
	b->pending++;
	if (nbd_kdev_attach(&b->gw->reactors[0], &e->nbd, &o, kdev_attached, e) < 0) {
		e->batch = NULL;
		b->pending--;
	}
}

static void batch_exports(struct gw_batch *b)
{
	struct gw *gw = b->gw;

	b->pending = 1;
	if (gw->stop_requested && gw->state == GW_STARTING) {
		batch_put(b);
		return;
	}
	for (size_t i = 0; i < b->nr_exps; i++) {
		struct gw_exp *e = b->exps[i];
		if (start_export(gw, e) < 0)
			e->failed = true;
	}
	/* Before the kernel can write back through anything we serve; the
	 * queues' pools exist by now (their targets are connected). */
	for (size_t i = 0; i < b->nr_exps; i++) {
		struct gw_export *c = b->exps[i]->cfg;
		if (!b->exps[i]->failed && !b->exps[i]->waiting &&
		    (c->fuse || (c->has_nbd && c->nbd.device != GW_NBD_NONE)))
			reclaim_enable(gw->rp, gw->nr_reactors, 0, &gw->cfg->reclaim);
	}
	if (start_fuse(gw, b->exps, b->nr_exps) < 0)
		log_err("fuse: the mount failed; no export has a FUSE file");
	/* Kernel devices last: the attach runs off the reactor and answers
	 * later; the batch waits for every answer. */
	for (size_t i = 0; i < b->nr_exps; i++) {
		struct gw_exp *e = b->exps[i];
		if (!e->failed && !e->waiting && e->cfg->has_nbd &&
		    e->cfg->nbd.device != GW_NBD_NONE)
			start_kdev(b, e);
	}
	batch_put(b);
}

static void tgt_ready(struct mp_target *mp, int err, void *arg)
{
	struct gw_tgt *t = arg;
	struct gw_batch *b = t->batch;

	(void)mp;
	t->batch = NULL;
	t->connecting = false;
	t->live = err == 0;
	if (err && !gw_tgt_wait(t))
		log_err("target %s: not connected (%s)", t->cfg->name, strerror(-err));
	batch_put(b);
}

static void tgt_opts(struct gw *gw, struct gw_tgt *t, struct mp_target_opts *o)
{
	struct gw_target *c = t->cfg;

	memset(o, 0, sizeof(*o));
	snprintf(o->ctrl.name, sizeof(o->ctrl.name), "%s", c->name);
	snprintf(o->ctrl.subnqn, sizeof(o->ctrl.subnqn), "%s", c->subnqn);
	memcpy(o->ctrl.hostnqn, gw->hostnqn, sizeof(o->ctrl.hostnqn));
	memcpy(o->ctrl.hostid, gw->hostid, sizeof(o->ctrl.hostid));
	o->ctrl.nr_io_queues = (unsigned)c->nr_io_queues;
	if (o->ctrl.nr_io_queues < gw->nr_reactors)
		log_notice("target %s: %u I/O queues for %u reactors; reactors without a queue "
			   "forward their I/O", c->name, o->ctrl.nr_io_queues, gw->nr_reactors);
	o->ctrl.queue_size = (unsigned)c->queue_size;
	o->ctrl.kato_ms = (unsigned)c->keep_alive_tmo * 1000;
	o->ctrl.io_timeout_ms = (unsigned)c->io_timeout * 1000;
	/* Both were checked when the file was loaded. */
	const char *why;
	if (c->dhchap_secret)
		nvmf_dhchap_key_parse(c->dhchap_secret, &o->ctrl.dhchap_key, &why);
	if (c->dhchap_ctrl_secret)
		nvmf_dhchap_key_parse(c->dhchap_ctrl_secret, &o->ctrl.dhchap_ctrl_key, &why);
	if (c->nr_paths > MP_MAX_PATHS)
		log_warn("target %s: only the first %u of %zu paths are used", c->name,
			 MP_MAX_PATHS, c->nr_paths);
	for (size_t i = 0; i < c->nr_paths && i < MP_MAX_PATHS; i++) {
		struct gw_path *p = &c->paths[i];
		struct nvmf_path_opts *po = &o->paths[o->nr_paths++];
		po->trtype = p->transport;
		snprintf(po->traddr, sizeof(po->traddr), "%s", p->traddr);
		snprintf(po->trsvcid, sizeof(po->trsvcid), "%s", p->trsvcid);
		if (p->host_traddr)
			snprintf(po->host_traddr, sizeof(po->host_traddr), "%s", p->host_traddr);
		if (p->host_iface)
			snprintf(po->host_iface, sizeof(po->host_iface), "%s", p->host_iface);
		po->tos = p->tos;
		po->hdr_digest = c->hdr_digest;
		po->data_digest = c->data_digest;
		/* A discovered path: what its TREQ allows (daemon_discovery.c). */
		po->tls = p->tls >= 0 ? p->tls > 0 : c->tls != GW_TLS_OFF;
		po->tls_kdf = (uint8_t)c->tls_kdf;
		po->tls_key = c->tls_key;
	}
	o->reconnect_delay_ms = (unsigned)c->reconnect_delay * 1000;
	o->ctrl_loss_tmo_s = c->ctrl_loss_tmo;
	o->fast_io_fail_tmo_s = c->fast_io_fail_tmo;
	o->max_retries = (unsigned)c->max_retries;
	o->policy = c->multipath;
	o->connect_loss_own = true;
	o->connect_loss_tmo_s = c->connect_loss_tmo;
}

void gw_batch_run(struct gw_batch *b)
{
	struct gw *gw = b->gw;
	struct list_node *pos, *tmp;

	b->pending = 1;
	b->exports_phase = false;
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		struct mp_target_opts o;

		if (t->batch != b)
			continue;
		if (gw_discovery_tgt_wait(t)) {
			t->batch = NULL;
			continue;
		}
		tgt_opts(gw, t, &o);
		if (mp_target_create(&o, gw->rp, gw->nr_reactors, &t->mp) < 0) {
			log_err("target %s: cannot start connecting", t->cfg->name);
			t->batch = NULL;
			continue;
		}
		linkwatch_add(gw->lw, t->mp);
		t->connecting = true;
		b->pending++;
		mp_target_connect(t->mp, tgt_ready, t);
	}
	batch_put(b);
}

static void finish_start(struct gw_batch *b)
{
	struct gw *gw = b->gw;
	struct list_node *pos, *tmp;
	unsigned ok = 0, total = 0, waiting = 0;

	free(b->exps);
	free(b);
	if (gw->stop_requested) {
		log_notice("gateway: stopping as asked while starting");
		gw_set_state(gw, GW_RUNNING);
		notify_ready(gw, false);
		gw_stop(gw);
		return;
	}
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		total++;
		if (gw_exp_running(e))
			ok++;
		else if (e->waiting)
			waiting++;
		else if (!e->failed)
			log_err("export %s: none of its exporters is running", e->name);
	}
	gw_set_state(gw, GW_RUNNING);
	start_metrics(gw);
	gw_discovery_start(gw);
	gw_auto_start(gw);
	/* Ready with exports still waiting for their target: boot goes on,
	 * and they come up by themselves (each logged why it waits). */
	if (waiting) {
		log_notice("gateway: %u of %u exports running, %u waiting for their target", ok,
			   total, waiting);
		notify_sendf("READY=1\nSTATUS=%u of %u exports running, %u waiting for their "
			     "target", ok, total, waiting);
	} else {
		log_notice("gateway: %u of %u exports running", ok, total);
		notify_sendf("READY=1\nSTATUS=%u of %u exports running", ok, total);
	}
	if (!ok && !waiting && total) {
		log_err("gateway: no export could be started; exiting");
		gw->rc = 1;
		notify_ready(gw, false);
		gw_stop(gw);
		return;
	}
	notify_ready(gw, true);
	gw_op_finished(gw);
}

/* Every target and export of the file, as one batch. */
static void start_all(struct gw *gw)
{
	struct gw_config *cfg = gw->cur->cfg;
	struct gw_batch *b = calloc(1, sizeof(*b));

	if (!b || !(b->exps = calloc(cfg->nr_exports + 1, sizeof(*b->exps))))
		abort();
	b->gw = gw;
	b->done = finish_start;
	/* Without it (no netlink) paths still fail over, on keep-alive. */
	linkwatch_start(&gw->reactors[0], &gw->lw);
	for (size_t i = 0; i < cfg->nr_targets; i++) {
		struct gw_tgt *t = gw_tgt_new(gw, gw->cur, &cfg->targets[i]);
		if (!t)
			abort();
		t->batch = b;
	}
	for (size_t i = 0; i < cfg->nr_exports; i++) {
		struct gw_exp *e = gw_exp_new(gw, gw->cur, &cfg->exports[i]);
		if (!e)
			abort();
		b->exps[b->nr_exps++] = e;
	}
	gw_batch_run(b);
}

/* ---- the daemon's life, from cmd_run ---- */

/* Forks; the parent waits until the child says it is up (exit 0) or has
 * failed (exit 1).  Returns in the child with *ready_fd set. */
static int daemonize(int *ready_fd)
{
	int p[2];
	pid_t pid;
	char c = 0;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		ssize_t n = read(p[0], &c, 1);
		_exit(n == 1 && c == 'R' ? 0 : 1);
	}
	close(p[0]);
	setsid();
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (fd > 2)
			close(fd);
	}
	*ready_fd = p[1];
	return 0;
}

int daemon_run(const char *path, bool foreground)
{
	struct gw gw = { .sfd = -1, .ready_fd = -1, .start_ns = reactor_now_ns() };
	sigset_t set;
	int ret;

	if (config_load(path, &gw.cfg, stderr) < 0)
		return 1;
	if (!getenv("NVMF_GATEWAY_LOG") && gw.cfg->log_level)
		log_set_level(gw.cfg->log_level);
	if (nvmf_host_identity(gw.cfg->hostnqn, gw.cfg->hostid, gw.cfg->state_dir, gw.hostnqn,
			       gw.hostid) < 0) {
		config_free(gw.cfg);
		return 1;
	}
	if (!foreground && daemonize(&gw.ready_fd) < 0) {
		fprintf(stderr, "nvmf-gateway: cannot daemonize: %s\n", strerror(errno));
		config_free(gw.cfg);
		return 1;
	}

	gw.nr_reactors = (unsigned)gw.cfg->reactors;
	gw.reactors = calloc(gw.nr_reactors, sizeof(*gw.reactors));
	gw.rp = calloc(gw.nr_reactors, sizeof(*gw.rp));
	gw.stop_msgs = calloc(gw.nr_reactors, sizeof(*gw.stop_msgs));
	list_init(&gw.cfgs);
	list_init(&gw.tgts);
	list_init(&gw.exps);
	gw.path = path;
	gw.cur = gw_cfgref_new(&gw, gw.cfg);
	if (!gw.reactors || !gw.rp || !gw.stop_msgs || !gw.cur)
		abort();

	/* Signals are blocked in every thread and read on reactor 0. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* SIGPIPE: ignored by main for every command. */
	/* Before any reactor runs: the budget is read from every thread. */
	membudget_init(membudget_global(), gw.cfg->buffer_budget, (unsigned)gw.cfg->stall_timeout);
	membudget_pin_allocator();
	log_info("buffer budget %llu MiB, a stalled client cut off after %d s",
		 (unsigned long long)(gw.cfg->buffer_budget >> 20), gw.cfg->stall_timeout);
	reactor_set_backend_mode((enum reactor_backend_mode)gw.cfg->reactor_backend);
	reactor_set_poll_us((unsigned)gw.cfg->poll_us);
	for (unsigned i = 0; i < gw.nr_reactors; i++) {
		ret = reactor_init(&gw.reactors[i], i, 512);
		if (ret < 0) {
			notify_ready(&gw, false);
			return 1;
		}
		gw.rp[i] = &gw.reactors[i];
	}
	log_notice("gateway: reactors on %s (%s)", reactor_backend_name(&gw.reactors[0]),
		   gw.reactors[0].backend_why);
	if (gw.cfg->poll_us)
		log_notice("gateway: reactors busy-poll %d us after each completion (poll_us)",
			   gw.cfg->poll_us);
	/* Its timers go on every reactor's list before their threads start. */
	struct watchdog *wd = NULL;
	uint64_t wd_usec;
	if (watchdog_period_from_env(&wd_usec) < 0)
		log_warn("gateway: WATCHDOG_USEC=%s is not a period; no watchdog pings",
			 getenv("WATCHDOG_USEC"));
	else if (watchdog_start(gw.reactors, gw.nr_reactors, wd_usec, &wd) < 0)
		log_err("gateway: cannot start the watchdog: out of memory");
	gw.sfd = signalfd(-1, &set, SFD_CLOEXEC);
	gw.sig_op.fn = sig_done;
	if (gw.sfd >= 0)
		sig_arm(&gw);
	for (unsigned i = 1; i < gw.nr_reactors; i++)
		if (reactor_start_thread(&gw.reactors[i]) < 0) {
			log_err("gateway: cannot start reactor thread %u", i);
			abort();
		}
	log_notice("gateway: %s: %zu targets, %zu exports, %u reactors", path,
		   gw.cfg->nr_targets, gw.cfg->nr_exports, gw.nr_reactors);
	start_control(&gw);
	start_all(&gw);
	reactor_run(&gw.reactors[0]);

	for (unsigned i = 1; i < gw.nr_reactors; i++)
		reactor_join(&gw.reactors[i]);
	watchdog_free(wd);
	if (gw.sig_armed) {
		reactor_cancel(&gw.reactors[0], &gw.sig_op);
		reactor_submit(&gw.reactors[0]);
	}
	if (gw.sfd >= 0)
		close(gw.sfd);
	while (!list_empty(&gw.exps))
		exp_free(container_of(gw.exps.next, struct gw_exp, link));
	while (!list_empty(&gw.tgts)) {
		struct gw_tgt *t = container_of(gw.tgts.next, struct gw_tgt, link);
		mp_target_free(t->mp);
		list_del(&t->link);
		free(t);
	}
	for (size_t i = 0; i < gw.nr_dead_mps; i++)
		mp_target_free(gw.dead_mps[i]);
	free(gw.dead_mps);
	for (unsigned i = 0; i < gw.nr_reactors; i++)
		reactor_fini(&gw.reactors[i]);
	linkwatch_free(gw.lw);
	notify_ready(&gw, false);
	free(gw.reactors);
	free(gw.rp);
	free(gw.stop_msgs);
	while (!list_empty(&gw.cfgs)) {
		struct gw_cfgref *r = container_of(gw.cfgs.next, struct gw_cfgref, link);
		list_del(&r->link);
		config_free(r->cfg);
		free(r);
	}
	log_notice("gateway: stopped");
	return gw.rc;
}
