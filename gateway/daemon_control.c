/* The daemon's control commands: status, stats, controller-reset, and the
 * dispatch to reload / export-add / export-remove (daemon_reload.c).
 * Replies are built on reactor 0, where targets and volumes live, so every
 * pointer read here is live; counters are read with the same lock-free
 * snapshots as the metrics endpoint. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gateway/daemon_priv.h"
#include "gateway/daemon_discovery.h"
#include "gateway/base/json.h"
#include "gateway/base/log.h"
#include "gateway/base/membudget.h"
#include "gateway/volume/qos.h"

static const char *trtype_name(enum nvmf_trtype t)
{
	return t == NVMF_TR_RDMA ? "rdma" : "tcp";
}

static const char *exp_state(const struct gw_exp *e)
{
	if (e->removing)
		return "removing";
	if (e->waiting)
		return "waiting for target";
	if (e->failed || !e->vol)
		return "failed";
	return gw_exp_running(e) ? "attached" : "failed";
}

static const char *exp_kind(const struct gw_exp *e)
{
	bool nbd = e->cfg->has_nbd;

	if (nbd && e->cfg->fuse)
		return "nbd+fuse";
	return nbd ? "nbd" : e->cfg->fuse ? "fuse" : "none";
}

static void put_latency(struct json_buf *j, const char *key, const struct vol_latency_us *l)
{
	json_key(j, key);
	json_obj_begin(j);
	json_kv_u64(j, "p50", l->p50);
	json_kv_u64(j, "p95", l->p95);
	json_kv_u64(j, "p99", l->p99);
	json_kv_u64(j, "p99.9", l->p999);
	json_obj_end(j);
}

static void put_paths(struct json_buf *j, struct gw_tgt *t, bool stats)
{
	struct mp_path_info info[MP_MAX_PATHS];
	unsigned n = t->mp ? mp_target_paths(t->mp, info, MP_MAX_PATHS) : 0;

	json_key(j, "paths");
	json_arr_begin(j);
	for (unsigned i = 0; i < n; i++) {
		struct mp_path_info *p = &info[i];
		json_obj_begin(j);
		json_kv_u64(j, "index", i);
		json_kv_str(j, "transport", trtype_name(p->opts->trtype));
		json_kv_str(j, "traddr", p->opts->traddr);
		json_kv_str(j, "trsvcid", p->opts->trsvcid);
		json_kv_str(j, "state", nvmf_ctrl_state_name(p->state));
		json_kv_str(j, "ana_state",
			    p->state == NVMF_CTRL_LIVE ? nvme_ana_state_name(p->ana_state) : "none");
		json_kv_u64(j, "cntlid", p->cntlid);
		json_kv_u64(j, "reconnects", p->reconnects);
		json_kv_u64(j, "in_flight", p->in_flight);
		json_kv_u64(j, "retries", p->retries);
		json_kv_u64(j, "errors", p->errors);
		if (stats) {
			json_kv_u64(j, "reads", p->reads);
			json_kv_u64(j, "writes", p->writes);
			json_kv_u64(j, "read_bytes", p->read_bytes);
			json_kv_u64(j, "write_bytes", p->write_bytes);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
}

/* Why a target not reached yet is still waited for, and until when. */
static void put_waiting(struct json_buf *j, struct gw_tgt *t)
{
	uint64_t next = 0, now = reactor_now_ns();
	int err = gw_tgt_last_err(t, &next);
	char when[32] = "";

	json_kv_double(j, "waiting_s", (double)((now - t->wait_since_ns) / NSEC_PER_MSEC) / 1e3);
	json_kv_str(j, "last_error", err ? strerror(-err) : "none");
	if (t->wait_reason[0])
		json_kv_str(j, "wait_reason", t->wait_reason);
	if (next) {
		uint64_t in_ms = next > now ? (next - now) / NSEC_PER_MSEC : 0;
		time_t at = time(NULL) + (time_t)((in_ms + 999) / 1000);
		struct tm tm;
		json_kv_double(j, "next_attempt_in_s", (double)in_ms / 1e3);
		if (gmtime_r(&at, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		json_kv_str(j, "next_attempt", when);
	} else {
		json_kv_str(j, "next_attempt", "connecting now");
	}
	json_kv_i64(j, "connect_loss_tmo", t->cfg->connect_loss_tmo);
}

static void put_targets(struct json_buf *j, struct gw *gw, bool stats)
{
	struct list_node *pos, *tmp;

	json_key(j, "targets");
	json_arr_begin(j);
	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		json_obj_begin(j);
		json_kv_str(j, "name", t->cfg->name);
		if (!stats) {
			json_kv_str(j, "subnqn", t->cfg->subnqn);
			json_kv_str(j, "multipath", mp_policy_name(t->cfg->multipath));
			/* Made for a discovered subsystem by an auto_export policy. */
			json_kv_str(j, "origin", t->auto_made ? "discovery" : "config");
		}
		json_kv_str(j, "state", t->connecting ? "connecting"
					: t->waiting ? "waiting for target"
					: !t->mp    ? "not connected"
						    : mp_target_state(t->mp));
		if (t->waiting)
			put_waiting(j, t);
		put_paths(j, t, stats);
		json_obj_end(j);
	}
	json_arr_end(j);
}

static int put_exports(struct json_buf *j, struct gw *gw, bool stats)
{
	struct list_node *pos, *tmp;
	struct vol_stats_snap *snap = malloc(sizeof(*snap));

	if (!snap)
		return -ENOMEM;
	json_key(j, "exports");
	json_arr_begin(j);
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		bool have = e->vol && vol_stats_snapshot(e->vol, snap) == 0;

		json_obj_begin(j);
		json_kv_str(j, "name", e->name);
		if (!stats) {
			json_kv_str(j, "kind", exp_kind(e));
			json_kv_str(j, "target", e->tgt->cfg->name);
			json_kv_u64(j, "nsid", e->cfg->nsid);
			char org[32];
			json_kv_str(j, "origin", gw_exp_origin(e, org, sizeof(org)));
		}
		json_kv_str(j, "state", exp_state(e));
		if (!stats) {
			json_kv_u64(j, "size", e->vol ? vol_size(e->vol) : 0);
			json_kv_u64(j, "block_size", e->vol ? e->vol->block_size : 0);
			json_kv_bool(j, "read_only", e->cfg->read_only);
			if (e->cfg->has_nbd && e->cfg->nbd.listen.kind != GW_LISTEN_NONE)
				json_kv_str(j, "nbd_listen", e->cfg->nbd.listen.spec);
			if (e->kdev) {
				char dev[32];
				snprintf(dev, sizeof(dev), "/dev/nbd%d", nbd_kdev_index(e->kdev));
				json_kv_str(j, "nbd_device", dev);
				json_kv_str(j, "nbd_interface",
					    nbd_kdev_iface_name(nbd_kdev_interface(e->kdev)));
				/* The kernel kept the old size at a live resize. */
				if (nbd_kdev_resize_ignored(e->kdev))
					json_kv_bool(j, "nbd_resize_ignored", true);
			}
			json_kv_bool(j, "fuse_file", e->in_fuse);
		}
		json_kv_u64(j, "reads", have ? snap->reads : 0);
		json_kv_u64(j, "writes", have ? snap->writes : 0);
		json_kv_u64(j, "read_bytes", have ? snap->read_bytes : 0);
		json_kv_u64(j, "write_bytes", have ? snap->write_bytes : 0);
		json_kv_u64(j, "flushes", have ? snap->flushes : 0);
		json_kv_u64(j, "errors", have ? snap->errors : 0);
		json_kv_u64(j, "retries", have ? snap->retries : 0);
		json_kv_u64(j, "in_flight", have ? snap->in_flight : 0);
		if (stats) {
			static const struct vol_latency_us zero;
			json_kv_u64(j, "qos_delayed", have ? snap->qos_delayed : 0);
			json_kv_u64(j, "qos_queued", have ? snap->qos_queued : 0);
			put_latency(j, "read_latency_us", have ? &snap->read_us : &zero);
			put_latency(j, "write_latency_us", have ? &snap->write_us : &zero);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
	free(snap);
	return 0;
}

/* The busy-poll window and what it cost: the operator's measure of the
 * CPU traded for latency (spin_ms against the exports' I/O counts). */
static void put_busy_poll(struct json_buf *j, struct gw *gw)
{
	struct reactor_spin_stats sum = { 0 }, one;

	json_kv_u64(j, "poll_us", reactor_poll_us());
	for (unsigned i = 0; i < gw->nr_reactors; i++) {
		reactor_spin_stats(&gw->reactors[i], &one);
		sum.hits += one.hits;
		sum.misses += one.misses;
		sum.spin_ns += one.spin_ns;
	}
	json_key(j, "busy_poll");
	json_obj_begin(j);
	json_kv_u64(j, "hits", sum.hits);
	json_kv_u64(j, "misses", sum.misses);
	json_kv_u64(j, "spin_ms", sum.spin_ns / NSEC_PER_MSEC);
	json_obj_end(j);
}

static void cmd_status(struct gw *gw, struct control_call *call, bool stats)
{
	struct json_buf j;
	unsigned total, ok = gw_exports_running(gw, &total);

	json_buf_init(&j);
	json_obj_begin(&j);
	json_kv_str(&j, "version", NVMF_GATEWAY_VERSION);
	json_kv_double(&j, "uptime_s",
		       (double)((reactor_now_ns() - gw->start_ns) / NSEC_PER_MSEC) / 1e3);
	if (!stats) {
		json_kv_str(&j, "state", gw_state_name(gw->state));
		json_kv_str(&j, "config", gw->path);
		json_kv_str(&j, "reactor_backend", reactor_backend_name(&gw->reactors[0]));
		json_kv_str(&j, "reactor_backend_why", gw->reactors[0].backend_why);
		put_busy_poll(&j, gw);
		json_kv_u64(&j, "reloads", gw->reloads);
		json_kv_u64(&j, "exports_running", ok);
		json_kv_u64(&j, "exports_total", total);
		/* Who holds the NBD and FUSE data buffers, and who waited. */
		struct membudget *b = membudget_global();
		json_key(&j, "buffers");
		json_obj_begin(&j);
		json_kv_u64(&j, "budget_bytes", b->limit);
		json_kv_u64(&j, "used_bytes", membudget_used(b));
		json_kv_u64(&j, "peak_bytes", atomic_load(&b->peak));
		json_kv_u64(&j, "waiters", membudget_waiters(b));
		json_kv_u64(&j, "waits", atomic_load(&b->waits));
		json_obj_end(&j);
	}
	put_targets(&j, gw, stats);
	if (!stats)
		gw_discovery_status(gw, &j);
	if (put_exports(&j, gw, stats) < 0) {
		json_buf_free(&j);
		control_reply_error(call, "out of memory");
		return;
	}
	json_obj_end(&j);
	control_reply(call, &j);
}

static void cmd_reset(struct gw *gw, struct control_call *call, const char *name)
{
	struct gw_tgt *t;

	if (!name)
		return control_reply_error(call, "controller-reset needs \"target\"");
	t = gw_find_tgt(gw, name);
	if (!t)
		return control_reply_error(call, "no target named \"%s\"", name);
	if (gw->state != GW_RUNNING || !t->mp || t->connecting)
		return control_reply_error(call, "target %s is still starting", name);
	log_notice("target %s: reset requested over the control socket", name);
	mp_target_reset(t->mp);
	control_reply_ok(call);
}

void gw_control_handle(void *arg, struct control_call *call, const struct json_val *req)
{
	struct gw *gw = arg;
	const char *cmd = json_get_str(req, "cmd");

	if (!strcmp(cmd, "status"))
		return cmd_status(gw, call, false);
	if (!strcmp(cmd, "stats"))
		return cmd_status(gw, call, true);
	if (!strcmp(cmd, "controller-reset"))
		return cmd_reset(gw, call, json_get_str(req, "target"));
	if (!strcmp(cmd, "reload")) {
		gw_reload(gw, call);
		return;
	}
	if (!strcmp(cmd, "export-add") || !strcmp(cmd, "export-remove")) {
		const char *name = json_get_str(req, "name");
		if (!name)
			return control_reply_error(call, "%s needs \"name\"", cmd);
		if (cmd[7] == 'a')
			gw_export_add(gw, call, name);
		else
			gw_export_remove(gw, call, name);
		return;
	}
	control_reply_error(call,
			    "unknown command \"%s\" (status, stats, reload, export-add, "
			    "export-remove, controller-reset)", cmd);
}
