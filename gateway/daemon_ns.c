/* Exports whose namespace changes while they serve (issue 19): the volume
 * reports it (vol_set_event_cb, on reactor 0), the exporters follow.
 *   grown:   the kernel NBD device is resized live (nbd_kdev_resize, off
 *            the reactors), the FUSE file's size is refreshed in the
 *            kernel; NBD socket clients read the size at NBD_OPT_GO/INFO.
 *   removed: the export goes away as export-remove takes it away (kernel
 *            device disconnected, socket closed, FUSE file removed); its
 *            I/O already fails with EIO.
 *   shrunk, reformatted, replaced: the export is failed (EIO, "failed" in
 *            status); a reload or export-add starts it again on purpose.
 * The work runs deferred: the event comes from inside the volume layer's
 * walk over its volumes, which removing one must not disturb. */
#include <stdlib.h>
#include <string.h>

#include "gateway/base/log.h"
#include "gateway/daemon_priv.h"

struct ns_event {
	struct reactor_msg m;
	struct gw *gw;
	struct volume *vol; /* compared, never dereferenced before the lookup */
	enum vol_event ev;
	bool gone;
	char name[];
};

static struct gw_exp *exp_of_vol(struct gw *gw, const char *name, const struct volume *vol)
{
	struct gw_exp *e = gw_find_exp(gw, name);

	return e && e->vol == vol && !e->removing ? e : NULL;
}

static void ns_event_run(struct reactor_msg *m)
{
	struct ns_event *ev = (struct ns_event *)m;
	struct gw_exp *e = exp_of_vol(ev->gw, ev->name, ev->vol);

	if (!e) {
		free(ev);
		return; /* removed meanwhile */
	}
	switch (ev->ev) {
	case VOL_EV_RESIZED:
		if (e->kdev)
			nbd_kdev_resize(e->kdev);
		if (e->in_fuse && ev->gw->fs)
			fusefs_file_resized(ev->gw->fs, e->name);
		log_notice("export %s: now %llu bytes", e->name,
			   (unsigned long long)vol_size(e->vol));
		break;
	case VOL_EV_FAILED:
		if (ev->gone && ev->gw->state >= GW_STOPPING) {
			/* The stop takes every export down already; a second
			 * takedown here would free the volume under the
			 * exporters still draining it. */
			log_notice("export %s: its namespace was removed; the stop takes the export "
				   "down", e->name);
			e->failed = true;
		} else if (ev->gone && (ev->gw->state != GW_RUNNING || ev->gw->busy)) {
			/* A batch (start, reload, a target coming up) lists
			 * this export and reads it when it ends. */
			e->failed = true;
			if (!e->ns_gone_pending)
				log_notice("export %s: its namespace was removed; taking the export "
					   "down once the change under way ends", e->name);
			e->ns_gone_pending = true;
		} else if (ev->gone) {
			log_notice("export %s: its namespace was removed; taking the export down",
				   e->name);
			gw_exp_remove(e, NULL, NULL);
		} else {
			e->failed = true;
		}
		break;
	}
	free(ev);
}

static void ns_event(struct volume *v, enum vol_event what, bool gone, void *arg)
{
	struct gw_exp *e = arg;
	size_t len = strlen(e->name) + 1;
	struct ns_event *ev = malloc(sizeof(*ev) + len);

	if (!ev) {
		log_err("export %s: out of memory handling a namespace change", e->name);
		return;
	}
	ev->m.fn = ns_event_run;
	ev->gw = e->gw;
	ev->vol = v;
	ev->ev = what;
	ev->gone = gone;
	memcpy(ev->name, e->name, len);
	reactor_defer(&e->gw->reactors[0], &ev->m);
}

void gw_ns_gone_resume(struct gw *gw)
{
	struct list_node *pos, *tmp;

	if (gw->state != GW_RUNNING || gw->busy)
		return;
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (!e->ns_gone_pending || e->removing)
			continue;
		e->ns_gone_pending = false;
		log_notice("export %s: its namespace was removed; taking the export down",
			   e->name);
		gw_exp_remove(e, NULL, NULL);
	}
}

void gw_ns_watch(struct gw_exp *e)
{
	vol_set_event_cb(e->vol, ns_event, e);
}
