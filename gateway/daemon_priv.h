/* Inside the daemon: what daemon.c (lifecycle), daemon_control.c (the
 * control socket's commands) and daemon_reload.c (live reload) share.
 * Everything here lives on reactor 0. */
#ifndef GW_DAEMON_PRIV_H
#define GW_DAEMON_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/signalfd.h>

#include "gateway/config.h"
#include "gateway/base/control.h"
#include "gateway/base/list.h"
#include "gateway/base/metrics.h"
#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "fuse/fusefs.h"
#include "nbd/kdev.h"
#include "nbd/nbd.h"
#include "transports/ctrl.h"
#include "gateway/volume/mpath.h"

enum gw_state {
	GW_STARTING, /* controllers connecting */
	GW_RUNNING,
	GW_STOPPING, /* exporters closing */
	GW_SHUTDOWN, /* controllers shutting down */
	GW_DONE,
};

/* A loaded file.  Targets and exports point into the file they were last
 * matched against; a reload moves the untouched ones to the new file, and
 * a file nothing points into any more is freed. */
struct gw_cfgref {
	struct list_node link;
	struct gw_config *cfg;
	unsigned refs;
};

struct gw_batch;

struct gw_tgt {
	struct list_node link;
	struct gw *gw;
	struct gw_cfgref *ref;
	struct gw_target *cfg;
	struct mp_target *mp;
	bool connecting, live;
	struct gw_batch *batch; /* connecting for this batch */
	/* Not reached at its first connect and still trying (boot order):
	 * its exports wait and start once it is up (daemon_wait.c). */
	bool waiting;
	bool up_pending; /* came up while a change was applied: start after it */
	uint64_t wait_since_ns;
	/* Waiting for discovery and why its listed ports are not used ("":
	 * none listed yet), for the status. */
	char wait_reason[160];
	/* Made by an auto_export policy for a discovered subsystem (its cfg
	 * is a file of its own, daemon_auto.c), not named by the file. */
	bool auto_made;
};

struct gw_exp {
	struct list_node link;
	struct gw *gw;
	struct gw_cfgref *ref;
	struct gw_export *cfg;
	struct gw_tgt *tgt;
	/* Own copies: NBD connections on other reactors read them while the
	 * file they came from may be replaced. */
	char *name, *desc;
	struct volume *vol;
	struct nbd_export nbd;
	struct nbd_server *srv;
	struct nbd_tls *tls; /* the listener's credentials; NULL: TLS off */
	struct nbd_kdev *kdev;
	char backend_id[320], legacy_backend_id[96];
	bool in_fuse; /* has a file in the FUSE mount */
	bool failed;
	bool waiting; /* for its target: no exporter yet */
	bool removing;
	/* Removed while its kernel attach was running (a namespace gone at
	 * once): the takedown starts when the attach answers. */
	bool remove_deferred;
	/* Its namespace went away while a change or the start was under way:
	 * taken down once it ends (gw_op_finished), not under the batch that
	 * still reads it. */
	bool ns_gone_pending;
	unsigned closing; /* exporters still closing while removed */
	/* Called once it is gone: the first remover, and one more that asked
	 * while it was already going (a reload during a namespace removal). */
	void (*removed)(void *arg);
	void *removed_arg;
	void (*removed2)(void *arg);
	void *removed2_arg;
	struct gw_batch *batch; /* its kernel attach answers to this batch */
	/* Made by policy auto_export[auto_idx] (its cfg is a file of its
	 * own, daemon_auto.c), not hand-written. */
	bool is_auto;
	unsigned auto_idx;
};

/* Targets to connect, then exports to start (NBD server, FUSE file,
 * kernel device): done(b) once every connect and attach has answered. */
struct gw_batch {
	struct gw *gw;
	unsigned pending;
	bool exports_phase;
	struct gw_exp **exps;
	size_t nr_exps;
	void (*done)(struct gw_batch *b);
	void *arg;
};

struct gw {
	struct gw_config *cfg; /* gateway-wide keys: those of the first load */
	const char *path;
	enum gw_state state;
	unsigned nr_reactors;
	struct reactor *reactors;
	struct reactor **rp;
	struct list_node cfgs; /* gw_cfgref */
	struct gw_cfgref *cur; /* the latest file */
	struct list_node tgts, exps;
	struct mp_target **dead_mps; /* shut down, freed after the reactors */
	size_t nr_dead_mps;
	struct fusefs *fs;
	unsigned pending; /* closers outstanding while stopping */
	bool stop_requested; /* a signal while busy: stop once done */
	bool busy; /* a reload or export-add/remove is being applied */
	bool reload_queued; /* SIGHUP while busy or starting */
	/* A control reload that came while another change was applied: it
	 * runs, and is answered, once that change is done (one at a time). */
	struct control_call *reload_call;
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
	struct linkwatch *lw;
	struct control_srv *control;
	uint64_t start_ns;
	unsigned reloads;
	struct gw_discs *discs; /* daemon_discovery.c (issue 19) */
	struct gw_autos *autos; /* daemon_auto.c (issue 19) */
};

/* daemon.c */
struct gw_cfgref *gw_cfgref_new(struct gw *gw, struct gw_config *cfg);
void gw_cfgref_get(struct gw_cfgref *r);
void gw_cfgref_put(struct gw *gw, struct gw_cfgref *r);
struct gw_tgt *gw_tgt_new(struct gw *gw, struct gw_cfgref *ref, struct gw_target *cfg);
struct gw_exp *gw_exp_new(struct gw *gw, struct gw_cfgref *ref, struct gw_export *cfg);
struct gw_tgt *gw_find_tgt(struct gw *gw, const char *name);
struct gw_exp *gw_find_exp(struct gw *gw, const char *name);
/* Moves an object to another loaded file (an equal entry of it). */
void gw_tgt_repoint(struct gw *gw, struct gw_tgt *t, struct gw_cfgref *ref, struct gw_target *c);
void gw_exp_repoint(struct gw *gw, struct gw_exp *e, struct gw_cfgref *ref, struct gw_export *c);
/* Connects every target of the list whose batch is b (t->batch set by the
 * caller) and starts b->exps; b->done(b) when all have answered. */
void gw_batch_run(struct gw_batch *b);
/* Stops an export's exporters (in-flight I/O drained), destroys its
 * volume, frees it; removed(arg) afterwards. */
/* daemon_ns.c: e's exporters follow its namespace's changes. */
void gw_ns_watch(struct gw_exp *e);
/* Takes down the exports whose namespace went away while the gateway was
 * busy; a no-op until it is running and idle (from gw_op_finished). */
void gw_ns_gone_resume(struct gw *gw);
void gw_exp_remove(struct gw_exp *e, void (*removed)(void *arg), void *arg);
/* Shuts a target down (its exports gone already) and frees it; done(arg). */
void gw_tgt_remove(struct gw_tgt *t, void (*done)(void *arg), void *arg);
unsigned gw_exports_running(struct gw *gw, unsigned *total);
/* After a reload or export command: a queued stop or reload runs now. */
void gw_op_finished(struct gw *gw);
const char *gw_state_name(enum gw_state s);
bool gw_exp_running(const struct gw_exp *e);

/* daemon_wait.c: targets not reached at start.  tgt_ready's failure:
 * true if the target keeps trying (its exports wait), false if it gave
 * up.  gw_wait_resume: after a change, start the exports of targets that
 * came up meanwhile. */
bool gw_tgt_wait(struct gw_tgt *t);
/* t's connect_loss_tmo ran out before it was reached: its waiting exports
 * fail (a reload tries again). */
void gw_tgt_wait_expired(struct gw_tgt *t);
/* A batch of t's waiting exports, taken out of waiting (possibly none),
 * ending with done; NULL when out of memory, nothing taken. */
struct gw_batch *gw_waiting_batch(struct gw_tgt *t, void (*done)(struct gw_batch *b));
void gw_wait_resume(struct gw *gw);
/* The most recent error of a target's paths (0 if none). */
int gw_tgt_last_err(struct gw_tgt *t, uint64_t *next_attempt_ns);

/* daemon_auto.c: auto_export policies at run time.  start/stop with the
 * daemon; kick: look for namespaces to export soon (they are also looked
 * for every second).  discovered: a subsystem no configured target names
 * was listed by discovery; a target is made for it if a policy's glob
 * matches (discovery then fills its paths).  reload: after the reload's
 * plan, the auto-made targets and exports the new file N no longer wants
 * are added to the stop lists, the others kept (with their policy's new
 * index). */
void gw_auto_start(struct gw *gw);
void gw_auto_stop(struct gw *gw);
void gw_auto_kick(struct gw *gw);
/* export-remove took e away: a policy export is not made again until a
 * reload, as a hand-written one is not started again. */
void gw_auto_removed_by_hand(struct gw_exp *e);
void gw_auto_discovered(struct gw *gw, const char *subnqn);
void gw_auto_reload(struct gw *gw, const struct gw_config *n, struct gw_tgt **stop_tgts,
		    size_t *nr_stop_tgts, struct gw_exp **stop_exps, size_t *nr_stop_exps);
/* "config" or "auto_export[N]" into buf. */
const char *gw_exp_origin(const struct gw_exp *e, char *buf, size_t len);

/* daemon_control.c */
void gw_control_handle(void *arg, struct control_call *call, const struct json_val *req);

/* daemon_reload.c: call may be NULL (SIGHUP).  0 when started (the reply
 * and log follow), -EBUSY or -EINVAL (invalid file: logged, replied). */
int gw_reload(struct gw *gw, struct control_call *call);
void gw_export_add(struct gw *gw, struct control_call *call, const char *name);
void gw_export_remove(struct gw *gw, struct control_call *call, const char *name);

#endif
