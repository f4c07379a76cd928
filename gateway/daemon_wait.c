/* A target that is not there yet.  At boot the network or the array often
 * comes up after the host: a target whose first connect fails keeps
 * reconnecting every reconnect_delay (for connect_loss_tmo, by default for
 * ever), its exports wait without any exporter (no NBD listener, kernel
 * device or FUSE file: their size is not known yet), and they start by
 * themselves once a path is live.  Everything here runs on reactor 0. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/daemon_priv.h"
#include "gateway/base/log.h"
#include "gateway/base/notify.h"

int gw_tgt_last_err(struct gw_tgt *t, uint64_t *next_attempt_ns)
{
	struct mp_path_info pi[MP_MAX_PATHS];
	unsigned n = t->mp ? mp_target_paths(t->mp, pi, MP_MAX_PATHS) : 0;
	uint64_t next = 0;
	int err = 0;

	for (unsigned i = 0; i < n; i++) {
		if (!err)
			err = pi[i].last_err;
		if (pi[i].next_attempt_ns && (!next || pi[i].next_attempt_ns < next))
			next = pi[i].next_attempt_ns;
	}
	if (next_attempt_ns)
		*next_attempt_ns = next;
	return err;
}

static void wait_batch_done(struct gw_batch *b)
{
	struct gw *gw = b->gw;

	for (size_t i = 0; i < b->nr_exps; i++) {
		struct gw_exp *e = b->exps[i];
		if (gw_exp_running(e))
			log_notice("export %s: serving (its target came up)", e->name);
		else if (!e->failed)
			log_err("export %s: its target came up but none of its exporters is running",
				e->name);
	}
	free(b->exps);
	free(b);
	gw->busy = false;
	gw_op_finished(gw);
}

struct gw_batch *gw_waiting_batch(struct gw_tgt *t, void (*done)(struct gw_batch *b))
{
	struct gw *gw = t->gw;
	struct list_node *pos, *tmp;
	struct gw_batch *b;
	size_t n = 0;

	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		n += e->tgt == t && e->waiting && !e->removing;
	}
	b = calloc(1, sizeof(*b));
	if (!b || !(b->exps = calloc(n + 1, sizeof(*b->exps)))) {
		free(b);
		return NULL;
	}
	b->gw = gw;
	b->done = done;
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (e->tgt != t || !e->waiting || e->removing)
			continue;
		e->waiting = false;
		b->exps[b->nr_exps++] = e;
	}
	return b;
}

/* The waiting exports of t, started as a batch of their own (no target
 * to connect: it is live).  busy keeps a reload or export command from
 * running into it; one arriving meanwhile waits for it. */
static void start_waiting_exports(struct gw_tgt *t)
{
	struct gw *gw = t->gw;
	struct gw_batch *b;

	t->up_pending = false;
	if (!(b = gw_waiting_batch(t, wait_batch_done))) {
		log_err("target %s: out of memory; its exports start at the next reload",
			t->cfg->name);
		return;
	}
	if (!b->nr_exps) {
		free(b->exps);
		free(b);
		return;
	}
	gw->busy = true;
	gw_batch_run(b);
}

void gw_tgt_wait_expired(struct gw_tgt *t)
{
	struct gw *gw = t->gw;
	struct list_node *pos, *tmp;

	t->waiting = false;
	list_for_each_safe(pos, tmp, &gw->exps) {
		struct gw_exp *e = container_of(pos, struct gw_exp, link);
		if (e->tgt != t || !e->waiting)
			continue;
		e->waiting = false;
		e->failed = true;
		log_err("export %s: target %s not reached within connect_loss_tmo (%d s); "
			"export failed (a reload tries again)",
			e->name, t->cfg->name, t->cfg->connect_loss_tmo);
	}
	unsigned total, ok = gw_exports_running(gw, &total);
	notify_sendf("STATUS=%u of %u exports running", ok, total);
}

static void tgt_up(struct mp_target *mp, int err, void *arg)
{
	struct gw_tgt *t = arg;
	struct gw *gw = t->gw;
	double waited = (double)(reactor_now_ns() - t->wait_since_ns) / 1e9;

	(void)mp;
	if (err) {
		gw_tgt_wait_expired(t);
		return;
	}
	t->waiting = false;
	t->live = true;
	log_notice("target %s: connected after waiting %.1f s; starting its exports",
		   t->cfg->name, waited);
	if (gw->state != GW_RUNNING || gw->busy) {
		/* Start-up or a change is still being applied: its end
		 * calls gw_wait_resume. */
		t->up_pending = true;
		return;
	}
	start_waiting_exports(t);
}

bool gw_tgt_wait(struct gw_tgt *t)
{
	struct gw_target *c = t->cfg;
	char tmo[64];
	int err;

	if (!t->mp || !strcmp(mp_target_state(t->mp), "failed"))
		return false;
	t->waiting = true;
	t->wait_since_ns = reactor_now_ns();
	err = gw_tgt_last_err(t, NULL);
	if (c->connect_loss_tmo < 0)
		snprintf(tmo, sizeof(tmo), "for ever (connect_loss_tmo = -1)");
	else
		snprintf(tmo, sizeof(tmo), "for up to %d s (connect_loss_tmo)",
			 c->connect_loss_tmo);
	log_warn("target %s: not reachable yet (%s); waiting for it: reconnecting every %d s %s",
		 c->name, strerror(err ? -err : ENOTCONN), c->reconnect_delay, tmo);
	mp_target_on_live(t->mp, tgt_up, t);
	return true;
}

void gw_wait_resume(struct gw *gw)
{
	struct list_node *pos, *tmp;

	list_for_each_safe(pos, tmp, &gw->tgts) {
		struct gw_tgt *t = container_of(pos, struct gw_tgt, link);
		if (gw->state != GW_RUNNING || gw->busy)
			return;
		if (t->up_pending)
			start_waiting_exports(t);
	}
}
