#include "gateway/config_diff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool listen_eq(const struct gw_listen *a, const struct gw_listen *b)
{
	return a->kind == b->kind && str_eq(a->path, b->path) && str_eq(a->host, b->host) &&
	       a->port == b->port && gw_access_eq(&a->access, &b->access);
}

static bool path_eq(const struct gw_path *a, const struct gw_path *b)
{
	return a->transport == b->transport && str_eq(a->traddr, b->traddr) &&
	       str_eq(a->trsvcid, b->trsvcid) && str_eq(a->host_traddr, b->host_traddr) &&
	       str_eq(a->host_iface, b->host_iface) && a->tos == b->tos;
}

bool config_target_equal(const struct gw_target *a, const struct gw_target *b)
{
	/* Paths a discovery controller gave a target the file leaves without
	 * any are not a change of the file: the new configuration inherits
	 * them (gw_tgt_repoint). */
	bool discovered = a->paths_discovered && !b->nr_paths;

	if (!str_eq(a->name, b->name) || !str_eq(a->subnqn, b->subnqn) ||
	    (!discovered && a->nr_paths != b->nr_paths) || a->nr_io_queues != b->nr_io_queues ||
	    a->queue_size != b->queue_size || a->hdr_digest != b->hdr_digest ||
	    a->data_digest != b->data_digest || a->keep_alive_tmo != b->keep_alive_tmo ||
	    a->reconnect_delay != b->reconnect_delay || a->ctrl_loss_tmo != b->ctrl_loss_tmo ||
	    a->fast_io_fail_tmo != b->fast_io_fail_tmo || a->io_timeout != b->io_timeout ||
	    a->max_retries != b->max_retries || a->multipath != b->multipath ||
	    !str_eq(a->dhchap_secret, b->dhchap_secret) ||
	    !str_eq(a->dhchap_ctrl_secret, b->dhchap_ctrl_secret) ||
	    !str_eq(a->dhchap_secret_file, b->dhchap_secret_file) ||
	    !str_eq(a->dhchap_ctrl_secret_file, b->dhchap_ctrl_secret_file) ||
	    a->tls != b->tls || a->tls_kdf != b->tls_kdf ||
	    !str_eq(a->tls_key_file, b->tls_key_file) ||
	    memcmp(&a->tls_key, &b->tls_key, sizeof(a->tls_key)))
		return false;
	for (size_t i = 0; !discovered && i < a->nr_paths; i++)
		if (!path_eq(&a->paths[i], &b->paths[i]))
			return false;
	return true;
}

bool config_export_equal(const struct gw_export *a, const struct gw_export *b)
{
	return str_eq(a->name, b->name) && str_eq(a->target_name, b->target_name) &&
	       a->nsid == b->nsid && a->has_nbd == b->has_nbd &&
	       a->nbd.device == b->nbd.device && listen_eq(&a->nbd.listen, &b->nbd.listen) &&
	       a->nbd.connections == b->nbd.connections && a->nbd.iface == b->nbd.iface &&
	       a->nbd.max_connections == b->nbd.max_connections && a->fuse == b->fuse &&
	       cfg_nbd_tls_equal(&a->nbd, &b->nbd) &&
	       a->read_only == b->read_only && a->qos_iops == b->qos_iops &&
	       a->qos_bandwidth == b->qos_bandwidth && a->qos_read_iops == b->qos_read_iops &&
	       a->qos_write_iops == b->qos_write_iops &&
	       a->qos_read_bandwidth == b->qos_read_bandwidth &&
	       a->qos_write_bandwidth == b->qos_write_bandwidth;
}

void config_diff_free(struct config_diff *d)
{
	free(d->old_t);
	free(d->new_t);
	free(d->old_e);
	free(d->new_e);
	memset(d, 0, sizeof(*d));
}

int config_diff(const struct gw_target *const *old_t, size_t nr_old_t,
		const struct gw_export *const *old_e, size_t nr_old_e, const struct gw_config *n,
		struct config_diff *d)
{
	memset(d, 0, sizeof(*d));
	d->old_t = calloc(nr_old_t + 1, sizeof(*d->old_t));
	d->new_t = calloc(n->nr_targets + 1, sizeof(*d->new_t));
	d->old_e = calloc(nr_old_e + 1, sizeof(*d->old_e));
	d->new_e = calloc(n->nr_exports + 1, sizeof(*d->new_e));
	if (!d->old_t || !d->new_t || !d->old_e || !d->new_e) {
		config_diff_free(d);
		return -ENOMEM;
	}
	d->nr_old_t = nr_old_t;
	d->nr_new_t = n->nr_targets;
	d->nr_old_e = nr_old_e;
	d->nr_new_e = n->nr_exports;

	for (size_t j = 0; j < n->nr_targets; j++)
		d->new_t[j].action = CD_ADD;
	for (size_t i = 0; i < nr_old_t; i++) {
		d->old_t[i].action = CD_REMOVE;
		for (size_t j = 0; j < n->nr_targets; j++) {
			if (strcmp(old_t[i]->name, n->targets[j].name))
				continue;
			enum cd_action a =
				config_target_equal(old_t[i], &n->targets[j]) ? CD_KEEP : CD_CHANGE;
			d->old_t[i] = (struct cd_entry){ a, j };
			d->new_t[j] = (struct cd_entry){ a, i };
			break;
		}
	}

	for (size_t j = 0; j < n->nr_exports; j++)
		d->new_e[j].action = CD_ADD;
	for (size_t i = 0; i < nr_old_e; i++) {
		d->old_e[i].action = CD_REMOVE;
		for (size_t j = 0; j < n->nr_exports; j++) {
			const struct gw_export *ne = &n->exports[j];
			if (strcmp(old_e[i]->name, ne->name))
				continue;
			enum cd_action a = config_export_equal(old_e[i], ne) ? CD_KEEP : CD_CHANGE;
			/* The volume lives on the target's controllers. */
			size_t ti = (size_t)(ne->target - n->targets);
			if (a == CD_KEEP && (ti >= n->nr_targets || d->new_t[ti].action != CD_KEEP))
				a = CD_CHANGE;
			d->old_e[i] = (struct cd_entry){ a, j };
			d->new_e[j] = (struct cd_entry){ a, i };
			break;
		}
	}

	for (size_t i = 0; i < nr_old_t; i++)
		d->removed += d->old_t[i].action == CD_REMOVE;
	for (size_t i = 0; i < nr_old_e; i++)
		d->removed += d->old_e[i].action == CD_REMOVE;
	for (size_t j = 0; j < n->nr_targets; j++) {
		d->added += d->new_t[j].action == CD_ADD;
		d->changed += d->new_t[j].action == CD_CHANGE;
		d->kept += d->new_t[j].action == CD_KEEP;
	}
	for (size_t j = 0; j < n->nr_exports; j++) {
		d->added += d->new_e[j].action == CD_ADD;
		d->changed += d->new_e[j].action == CD_CHANGE;
		d->kept += d->new_e[j].action == CD_KEEP;
	}
	return 0;
}

const char *config_diff_restart_keys(const struct gw_config *a, const struct gw_config *b,
				     char *buf, size_t len)
{
	const struct {
		const char *key;
		bool differs;
	} keys[] = {
		{ "reactors", a->reactors != b->reactors },
		{ "reactor_backend", a->reactor_backend != b->reactor_backend },
		{ "poll_us", a->poll_us != b->poll_us },
		/* the default of exports' nbd.interface: they keep the running one */
		{ "nbd_interface", a->nbd_interface != b->nbd_interface },
		{ "control", !str_eq(a->control, b->control) },
		{ "control_access", !gw_access_eq(&a->control_access, &b->control_access) },
		{ "state_dir", !str_eq(a->state_dir, b->state_dir) },
		{ "hostnqn", !str_eq(a->hostnqn, b->hostnqn) },
		{ "hostid", !str_eq(a->hostid, b->hostid) },
		{ "metrics", !listen_eq(&a->metrics, &b->metrics) },
		/* memory and connections: set when the reactors start */
		{ "buffer_budget", a->buffer_budget != b->buffer_budget },
		{ "max_connections", a->max_connections != b->max_connections },
		{ "stall_timeout", a->stall_timeout != b->stall_timeout },
		{ "fuse.mountpoint", !str_eq(a->fuse.mountpoint, b->fuse.mountpoint) },
		{ "fuse.allow_other", a->fuse.allow_other != b->fuse.allow_other },
		{ "fuse.uid", a->fuse.uid != b->fuse.uid },
		{ "fuse.gid", a->fuse.gid != b->fuse.gid },
		/* reclaim_enable: once per process, with the first load's */
		{ "mlock", a->reclaim.mlock != b->reclaim.mlock },
		{ "io_flusher", a->reclaim.io_flusher != b->reclaim.io_flusher },
		{ "oom_score_adj", a->reclaim.oom != b->reclaim.oom ||
					   a->reclaim.oom_score_adj != b->reclaim.oom_score_adj },
		{ "nice", a->reclaim.renice != b->reclaim.renice || a->reclaim.nice != b->reclaim.nice },
	};
	size_t off = 0;

	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!keys[i].differs || off >= len)
			continue;
		int w = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", keys[i].key);
		if (w > 0)
			off += (size_t)w;
	}
	return buf;
}
