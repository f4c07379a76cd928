/* nvmf-gateway run: the daemon.  Loads the configuration, starts the
 * reactors (reactor 0 on the main thread: admin queues, keep-alive,
 * listeners, signals; the others on threads of their own, each owning one
 * I/O queue of every controller), connects every target, builds a volume
 * per export and starts its exporters.  SIGINT/SIGTERM tear it down in
 * order: exporters (draining in-flight I/O), then controllers (CC.SHN),
 * then the reactors. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/config.h"
#include "gateway/daemon_metrics.h"
#include "gateway/log.h"
#include "gateway/metrics.h"
#include "gateway/qos.h"
#include "gateway/notify.h"
#include "gateway/tools.h"
#include "gateway/volume.h"
#include "fuse/fusefs.h"
#include "nbd/kdev.h"
#include "nbd/nbd.h"
#include "transports/ctrl.h"
#include "transports/mpath.h"

enum gw_state {
	GW_STARTING, /* controllers connecting */
	GW_RUNNING,
	GW_STOPPING, /* exporters closing */
	GW_SHUTDOWN, /* controllers shutting down */
	GW_DONE,
};

struct gw_tgt {
	struct gw_target *cfg;
	struct mp_target *mp;
	bool connecting, live, shutting_down;
	struct gw *gw;
};

struct gw_exp {
	struct gw_export *cfg;
	struct gw_tgt *tgt;
	struct volume *vol;
	struct nbd_export nbd;
	struct nbd_server *srv;
	struct nbd_kdev *kdev;
	char backend_id[96];
	bool in_fuse; /* has a file in the FUSE mount */
	bool failed;
	struct gw *gw;
};

struct gw {
	struct gw_config *cfg;
	enum gw_state state;
	unsigned nr_reactors;
	struct reactor *reactors;
	struct reactor **rp;
	struct gw_tgt *tgts;
	struct gw_exp *exps;
	struct fusefs *fs;
	unsigned pending; /* targets connecting, or closers outstanding */
	unsigned attaching; /* kernel device attaches not yet answered */
	bool stop_requested; /* a signal while starting: stop once started */
	int sfd;
	struct reactor_op sig_op;
	unsigned char siginfo[sizeof(struct signalfd_siginfo)];
	bool sig_armed;
	int ready_fd; /* the parent's pipe while daemonizing, else -1 */
	struct stop_msg {
		struct reactor_msg m;
		struct reactor *r;
	} *stop_msgs; /* one per reactor */
	int rc;
	char hostnqn[NVMF_NQN_SIZE];
	uint8_t hostid[16];
	struct metrics_srv *metrics;
	uint64_t start_ns;
};

static const char *gw_state_name(enum gw_state s)
{
	static const char *names[] = {
		[GW_STARTING] = "starting", [GW_RUNNING] = "running", [GW_STOPPING] = "stopping",
		[GW_SHUTDOWN] = "shutdown", [GW_DONE] = "done",
	};
	return names[s];
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
			log_notice("gateway: SIGHUP: live reload is not supported yet; "
				   "restart the service to apply a changed configuration");
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
	struct io_uring_sqe *sqe = reactor_sqe(&gw->reactors[0], &gw->sig_op);
	io_uring_prep_read(sqe, gw->sfd, gw->siginfo, sizeof(gw->siginfo), 0);
	gw->sig_armed = true;
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
	gw_set_state(gw, GW_SHUTDOWN);
	for (size_t i = 0; i < gw->cfg->nr_exports; i++) {
		vol_destroy(gw->exps[i].vol);
		gw->exps[i].vol = NULL;
	}
	gw->pending = 1;
	for (size_t i = 0; i < gw->cfg->nr_targets; i++) {
		struct gw_tgt *t = &gw->tgts[i];
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
	if (gw->state >= GW_STOPPING)
		return;
	if (gw->state == GW_STARTING) {
		/* Connecting controllers and kernel attaches finish (or fail)
		 * first; the stop happens when the last one has answered. */
		gw->stop_requested = true;
		return;
	}
	gw_set_state(gw, GW_STOPPING);
	notify_send("STOPPING=1");
	gw->pending = 1;
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
	for (size_t i = 0; i < gw->cfg->nr_exports; i++) {
		struct gw_exp *e = &gw->exps[i];
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

	if (!e->tgt->live) {
		log_err("export %s: target %s is not connected; export not started", c->name,
			c->target_name);
		return -ENOTCONN;
	}
	ret = vol_mp_create(c->name, e->tgt->mp, c->nsid, c->read_only, &e->vol);
	if (ret < 0)
		return ret;
	ret = vol_set_qos(e->vol, &(struct vol_qos_limits){
		.iops = c->qos_iops, .bandwidth = c->qos_bandwidth,
		.read_iops = c->qos_read_iops, .read_bandwidth = c->qos_read_bandwidth,
		.write_iops = c->qos_write_iops, .write_bandwidth = c->qos_write_bandwidth });
	if (ret < 0)
		return ret;
	e->nbd.name = c->name;
	e->nbd.description = c->target->subnqn;
	e->nbd.vol = e->vol;
	e->nbd.read_only = c->read_only;
	if (c->has_nbd && c->nbd.listen.kind != GW_LISTEN_NONE) {
		struct nbd_export *list[] = { &e->nbd };
		struct nbd_server_opts o = {
			.listen = &c->nbd.listen,
			.exports = list,
			.nr_exports = 1,
			.reactors = gw->rp,
			.nr_reactors = gw->nr_reactors,
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

/* One FUSE filesystem holds a file per export that asks for one. */
static int start_fuse(struct gw *gw)
{
	struct fusefs_file *files = calloc(gw->cfg->nr_exports, sizeof(*files));
	unsigned n = 0;
	int ret;

	if (!files)
		return -ENOMEM;
	for (size_t i = 0; i < gw->cfg->nr_exports; i++) {
		struct gw_exp *e = &gw->exps[i];
		if (!e->cfg->fuse || e->failed || !e->vol)
			continue;
		files[n].name = e->cfg->name;
		files[n].vol = e->vol;
		files[n].read_only = e->cfg->read_only;
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
	if (ret < 0)
		for (size_t i = 0; i < gw->cfg->nr_exports; i++)
			gw->exps[i].in_fuse = false;
	free(files);
	return ret;
}

/* ---- metrics ---- */

/* On reactor 0, where volumes are also destroyed (and the endpoint is
 * stopped before they are): every vol pointer here is live. */
static void gw_fill_metrics(void *arg, struct metrics_buf *mb)
{
	struct gw *gw = arg;
	size_t n = gw->cfg->nr_exports;
	struct dm_export *ex = calloc(n ? n : 1, sizeof(*ex));

	if (!ex) {
		mb->nomem = true;
		return;
	}
	for (size_t i = 0; i < n; i++)
		ex[i] = (struct dm_export){ .name = gw->exps[i].cfg->name,
					    .target = gw->exps[i].cfg->target_name,
					    .vol = gw->exps[i].failed ? NULL : gw->exps[i].vol };
	daemon_metrics_gateway(mb, NVMF_GATEWAY_VERSION,
			       (double)(reactor_now_ns() - gw->start_ns) / 1e9);
	daemon_metrics_exports(mb, ex, n);
	/* Paths: daemon_metrics_paths(mb, paths, n) once the multipath layer
	 * reports them (struct dm_path). */
	free(ex);
}

static void start_metrics(struct gw *gw)
{
	if (gw->cfg->metrics.kind == GW_LISTEN_NONE)
		return;
	/* A metrics endpoint that cannot listen is no reason to take the
	 * disks away: logged (by metrics_start), and the exports run. */
	metrics_start(&gw->reactors[0], &gw->cfg->metrics, gw_fill_metrics, gw, &gw->metrics);
}

static void finish_start(struct gw *gw)
{
	unsigned ok = 0;

	if (gw->stop_requested) {
		log_notice("gateway: stopping as asked while starting");
		gw_set_state(gw, GW_RUNNING);
		notify_ready(gw, false);
		gw_stop(gw);
		return;
	}
	for (size_t i = 0; i < gw->cfg->nr_exports; i++) {
		struct gw_exp *e = &gw->exps[i];
		if (!e->failed && (e->srv || e->kdev || e->in_fuse))
			ok++;
		else if (!e->failed)
			log_err("export %s: none of its exporters is running", e->cfg->name);
	}
	gw_set_state(gw, GW_RUNNING);
	start_metrics(gw);
	log_notice("gateway: %u of %zu exports running", ok, gw->cfg->nr_exports);
	notify_sendf("READY=1\nSTATUS=%u of %zu exports running", ok, gw->cfg->nr_exports);
	if (!ok && gw->cfg->nr_exports) {
		log_err("gateway: no export could be started; exiting");
		gw->rc = 1;
		notify_ready(gw, false);
		gw_stop(gw);
		return;
	}
	notify_ready(gw, true);
}

static void kdev_attached(void *arg, struct nbd_kdev *d, int index_or_err)
{
	struct gw_exp *e = arg;
	struct gw *gw = e->gw;

	if (d) {
		e->kdev = d;
		log_notice("export %s: %s /dev/nbd%d", e->cfg->name,
			   nbd_kdev_reattached(d) ? "reattached to" : "attached as", index_or_err);
	}
	if (--gw->attaching == 0)
		finish_start(gw);
}

static void start_kdev(struct gw *gw, struct gw_exp *e)
{
	struct gw_export *c = e->cfg;

	snprintf(e->backend_id, sizeof(e->backend_id), "nvmf-gateway:%s", c->name);
	struct nbd_kdev_opts o = {
		.index = c->nbd.device == GW_NBD_AUTO ? -1 : c->nbd.device,
		.connections = (unsigned)c->nbd.connections,
		/* The kernel holds I/O this long for a restarted gateway. */
		.dead_conn_timeout_s = 120,
		.backend_id = e->backend_id,
	};
	e->gw = gw;
	gw->attaching++;
	if (nbd_kdev_attach(&gw->reactors[0], &e->nbd, &o, kdev_attached, e) < 0)
		gw->attaching--;
}

static void start_exports(struct gw *gw)
{
	if (gw->stop_requested) {
		finish_start(gw);
		return;
	}
	for (size_t i = 0; i < gw->cfg->nr_exports; i++) {
		struct gw_exp *e = &gw->exps[i];
		if (start_export(gw, e) < 0)
			e->failed = true;
	}
	if (start_fuse(gw) < 0)
		log_err("fuse: the mount failed; no export has a FUSE file");
	/* Kernel devices last: the attach runs off the reactor and answers
	 * later; READY waits for every answer. */
	gw->attaching = 1;
	for (size_t i = 0; i < gw->cfg->nr_exports; i++) {
		struct gw_exp *e = &gw->exps[i];
		if (!e->failed && e->cfg->has_nbd && e->cfg->nbd.device != GW_NBD_NONE)
			start_kdev(gw, e);
	}
	if (--gw->attaching == 0)
		finish_start(gw);
}

static void tgt_ready(struct mp_target *mp, int err, void *arg)
{
	struct gw_tgt *t = arg;
	struct gw *gw = t->gw;

	(void)mp;
	t->connecting = false;
	t->live = err == 0;
	if (err)
		log_err("target %s: not connected (%s)", t->cfg->name, strerror(-err));
	if (--gw->pending == 0)
		start_exports(gw);
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
		po->trtype = p->transport == GW_TRANSPORT_RDMA ? NVMF_TR_RDMA : NVMF_TR_TCP;
		snprintf(po->traddr, sizeof(po->traddr), "%s", p->traddr);
		snprintf(po->trsvcid, sizeof(po->trsvcid), "%s", p->trsvcid);
		if (p->host_traddr)
			snprintf(po->host_traddr, sizeof(po->host_traddr), "%s", p->host_traddr);
		if (p->host_iface)
			snprintf(po->host_iface, sizeof(po->host_iface), "%s", p->host_iface);
		po->tos = p->tos;
		po->hdr_digest = c->hdr_digest;
		po->data_digest = c->data_digest;
	}
	o->reconnect_delay_ms = (unsigned)c->reconnect_delay * 1000;
	o->ctrl_loss_tmo_s = c->ctrl_loss_tmo;
	o->fast_io_fail_tmo_s = c->fast_io_fail_tmo;
	o->max_retries = (unsigned)c->max_retries;
	o->policy = c->multipath == GW_MULTIPATH_ROUND_ROBIN	 ? MP_ROUND_ROBIN
		    : c->multipath == GW_MULTIPATH_QUEUE_DEPTH ? MP_QUEUE_DEPTH
							       : MP_FAILOVER;
}

static void connect_targets(struct gw *gw)
{
	gw->pending = 1;
	for (size_t i = 0; i < gw->cfg->nr_targets; i++) {
		struct gw_tgt *t = &gw->tgts[i];
		struct mp_target_opts o;

		tgt_opts(gw, t, &o);
		t->gw = gw;
		if (mp_target_create(&o, gw->rp, gw->nr_reactors, &t->mp) < 0) {
			log_err("target %s: cannot start connecting", t->cfg->name);
			continue;
		}
		t->connecting = true;
		gw->pending++;
		mp_target_connect(t->mp, tgt_ready, t);
	}
	if (--gw->pending == 0)
		start_exports(gw);
}

/* ---- the command ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: nvmf-gateway run [-c FILE] [-f|--foreground]\n\n"
		   "Runs the gateway: connects every target of FILE (default %s) and\n"
		   "serves its exports until SIGINT or SIGTERM.\n\n"
		   "  -c, --config FILE     configuration file\n"
		   "  -f, --foreground      do not daemonize (for systemd and tests)\n"
		   "  -v, --verbose         debug logs\n",
		GW_CONFIG_DEFAULT_PATH);
}

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

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, 0, 'c' }, { "foreground", no_argument, 0, 'f' },
		{ "verbose", no_argument, 0, 'v' },	 { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = GW_CONFIG_DEFAULT_PATH;
	bool foreground = false;
	struct gw gw = { .sfd = -1, .ready_fd = -1, .start_ns = reactor_now_ns() };
	sigset_t set;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "c:fvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c': path = optarg; break;
		case 'f': foreground = true; break;
		case 'v': log_set_level(LOG_LVL_DEBUG); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 1;
	}
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
	gw.tgts = calloc(gw.cfg->nr_targets ? gw.cfg->nr_targets : 1, sizeof(*gw.tgts));
	gw.exps = calloc(gw.cfg->nr_exports ? gw.cfg->nr_exports : 1, sizeof(*gw.exps));
	gw.stop_msgs = calloc(gw.nr_reactors, sizeof(*gw.stop_msgs));
	if (!gw.reactors || !gw.rp || !gw.tgts || !gw.exps || !gw.stop_msgs)
		abort();
	for (size_t i = 0; i < gw.cfg->nr_targets; i++)
		gw.tgts[i].cfg = &gw.cfg->targets[i];
	for (size_t i = 0; i < gw.cfg->nr_exports; i++) {
		gw.exps[i].cfg = &gw.cfg->exports[i];
		for (size_t j = 0; j < gw.cfg->nr_targets; j++)
			if (gw.cfg->exports[i].target == &gw.cfg->targets[j])
				gw.exps[i].tgt = &gw.tgts[j];
	}

	/* Signals are blocked in every thread and read on reactor 0. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (unsigned i = 0; i < gw.nr_reactors; i++) {
		ret = reactor_init(&gw.reactors[i], i, 512);
		if (ret < 0) {
			notify_ready(&gw, false);
			return 1;
		}
		gw.rp[i] = &gw.reactors[i];
	}
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
	connect_targets(&gw);
	reactor_run(&gw.reactors[0]);

	for (unsigned i = 1; i < gw.nr_reactors; i++)
		reactor_join(&gw.reactors[i]);
	if (gw.sig_armed) {
		struct io_uring_sqe *sqe = reactor_sqe(&gw.reactors[0], NULL);
		io_uring_prep_cancel(sqe, &gw.sig_op, 0);
		io_uring_submit(&gw.reactors[0].ring);
	}
	if (gw.sfd >= 0)
		close(gw.sfd);
	for (size_t i = 0; i < gw.cfg->nr_targets; i++)
		mp_target_free(gw.tgts[i].mp);
	for (unsigned i = 0; i < gw.nr_reactors; i++)
		reactor_fini(&gw.reactors[i]);
	notify_ready(&gw, false);
	free(gw.reactors);
	free(gw.rp);
	free(gw.tgts);
	free(gw.exps);
	free(gw.stop_msgs);
	config_free(gw.cfg);
	log_notice("gateway: stopped");
	return gw.rc;
}
