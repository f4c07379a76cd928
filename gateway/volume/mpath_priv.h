/* What the parts of multipath share: mpath_target.c (the target, its
 * snapshots and lifecycle), mpath_path.c (a path's connect, loss,
 * reconnect and delete, on reactor 0) and mpath_io.c (the data path and
 * the "nvmf" volume).  Private to gateway/volume/mpath*.c; mpath.h has
 * the rules. */
#ifndef GW_MPATH_PRIV_H
#define GW_MPATH_PRIV_H

#include "gateway/base/log.h"
#include "gateway/volume/mpath.h"

/* A target's or a path's log line, its prefix written once: "target T: "
 * and "target T: path N: " (lvl is ERR, WARN, NOTICE, INFO or DEBUG). */
#define target_log(lvl, t, fmt, ...) \
	obj_log(lvl, "target %s: " fmt, (t)->o.ctrl.name, ##__VA_ARGS__)
#define path_log(lvl, p, fmt, ...) \
	obj_log(lvl, "target %s: path %u: " fmt, (p)->t->o.ctrl.name, (p)->idx, ##__VA_ARGS__)

#define MP_MAX_QS 64 /* queues of one path on one reactor */

/* A path put aside by the data path (a path-related or ANA status) is
 * tried again after this long, or sooner when a new snapshot arrives; I/O
 * that waits for a usable path is looked at again (and the ANA log of a
 * path that blocks it re-read) at this period. */
#define MP_BACKOFF_NS (1000 * NSEC_PER_MSEC)
/* After export-remove or SIGTERM (vol_mp_drain), I/O still waiting for a
 * path gets this much longer, then fails with EIO. */
#define MP_DRAIN_NS (5 * NSEC_PER_SEC)
/* The longest Command Retry Delay honoured: CRDT counts 100 ms units up
 * to 6553.5 s, which would hold an I/O for hours; the Linux host waits
 * whatever the controller says.  Also capped by the I/O's wait budget
 * (retry_delay_ns). */
#define MP_RETRY_DELAY_MAX_NS (5 * NSEC_PER_SEC)
/* ANATT when Identify says 0. */
#define MP_DEFAULT_ANATT_S 10
/* How long a lost path that discovery no longer lists keeps reconnecting
 * when ctrl_loss_tmo is off (-1): an array's discovery service may come
 * back before its subsystems are relinked, but a port it dropped for good
 * is not chased for ever.  See mp_unlisted_grace_ns. */
#define MP_UNLISTED_GRACE_S 60
#define MP_FOREVER UINT64_MAX

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* What one reactor may use of one path. */
struct snap_path {
	bool attached;
	uint32_t max_xfer;
	unsigned nq;
	struct nvmf_queue *qs[MP_MAX_QS];
	/* Every group of the path's namespaces, sorted by group ID; in the
	 * snapshot's own allocation (struct snap's ana_store). */
	unsigned nr_ana;
	struct nvmf_ana_grp *ana;
};

struct bcast;

/* A reactor's whole view, replaced by message. */
struct snap {
	struct reactor_msg m;
	struct mp_target *t;
	unsigned reactor;
	struct bcast *bc;
	bool failfast;
	struct snap_path p[MP_MAX_PATHS];
	struct nvmf_ana_grp ana_store[]; /* the paths' nr_ana entries, in order */
};

/* Counters of one path on one reactor: one writer, read by reactor 0. */
struct pstats {
	uint64_t reads, writes, read_bytes, write_bytes, errors, retries;
	unsigned in_flight;
};

struct rview {
	struct mp_target *t;
	struct reactor *r;
	unsigned home; /* reactor carrying this one's I/O */
	struct snap *cur;
	struct list_node parked; /* waiting for a usable path */
	struct list_node delayed; /* waiting for their retry delay */
	struct reactor_timer delay_timer;
	/* Armed while anything is parked or a path is put aside: expires
	 * the marks, re-reads blocking ANA logs, enforces the deadlines. */
	struct reactor_timer wait_timer;
	unsigned rr;
	bool kicking;
	/* Set by the data path when an I/O came back with a status about
	 * the path itself (controller or host pathing error, a reset): the
	 * path is not used here, for any namespace, until this time (ns) or
	 * the next snapshot, whichever comes first.  0 = usable.  A status
	 * about one namespace on the path puts aside only that pair (struct
	 * acked's aside_until). */
	uint64_t stale_until[MP_MAX_PATHS];
	uint64_t snap_gen; /* snapshots applied here: a pair's mark ends with its own */
	uint64_t expired_logged_ns; /* deadline log lines: one a second */
	unsigned expired_quiet; /* not logged since */
	uint64_t crd_logged_ns; /* capped retry delay lines: one a second */
	unsigned crd_quiet;
	uint64_t cqt_logged_ns; /* Command Quiesce Time waits: one line a second */
	unsigned cqt_quiet;
	struct pstats st[MP_MAX_PATHS];
	struct ana_req {
		struct reactor_msg m;
		struct mp_path *p;
		int busy; /* atomic */
	} ana_req[MP_MAX_PATHS], reset_req[MP_MAX_PATHS];
};

struct bcast_ack {
	struct reactor_msg m;
	struct bcast *bc;
};

struct bcast {
	struct mp_target *t;
	unsigned pending;
	void (*then)(struct mp_path *p);
	struct mp_path *p;
	struct bcast_ack *acks; /* one per reactor */
};

struct mp_path {
	struct mp_target *t;
	unsigned idx;
	struct nvmf_ctrl ctrl;
	bool started; /* nvmf_ctrl_connect succeeded once: ctrl is valid */
	bool attached; /* the reactors may use its queues */
	bool deleted; /* no more reconnects until an operator reset */
	bool connecting; /* an attempt is running */
	/* mp_path_lost ran and path_detached has not yet: some reactor may
	 * still hold the old queues, which a reconnect would free. */
	bool detaching;
	bool delete_after; /* ctrl_loss_tmo passed during an attempt */
	bool reset_now; /* operator reset: reconnect without delay */
	bool first_done;
	bool ever_live; /* connect_loss_tmo applies until it is */
	/* Its discovery log entry went away (mp_target_path_listed): kept
	 * while live; once lost it reconnects as any lost path for a grace
	 * (unlisted_timer, see mp_unlisted_grace_ns), then is deleted unless
	 * listed again or reconnected. */
	bool unlisted;
	bool unlisted_over; /* the grace ended during an attempt: delete after it */
	struct reactor_timer unlisted_timer;
	int last_err; /* of the last failed attempt */
	uint64_t lost_ns;
	unsigned reconnects;
	struct reactor_timer reconnect_timer;
	struct reactor_timer loss_timer;
	/* ANA change state: since when (0 = none), re-read every second
	 * until it ends or ANATT has passed (then the path is reset). */
	uint64_t change_ns;
	struct reactor_timer ana_timer;
	unsigned regroups_seen; /* ctrl.ana_regroups the volumes have followed */
};

struct vol_mp;

struct mp_target {
	struct mp_target_opts o;
	struct reactor *r;
	struct reactor **reactors;
	unsigned nr_reactors;
	struct mp_path paths[MP_MAX_PATHS];
	struct rview *views;
	struct vol_mp **vols;
	unsigned nr_vols;
	unsigned first_pending;
	mp_target_cb connect_cb, shutdown_cb, live_cb;
	void *connect_arg, *shutdown_arg, *live_arg;
	uint64_t connect_ns; /* mp_target_connect: connect_loss_tmo counts from it */
	unsigned shutdown_pending;
	bool shutting_down;
	bool fast_failed; /* fast_io_fail_tmo passed with no path attached */
	struct reactor_timer fast_timer;
	/* How long an I/O may wait for a usable path (ns, MP_FOREVER), and
	 * ANATT (the longest of the paths', atomic): see wait_limit. */
	uint64_t wait_ns;
	uint64_t anatt_ns;
};

/* Per volume and path: the FLUSH rule's bookkeeping (see flush_*). */
struct vpath {
	uint64_t flushed_upto; /* atomic max */
};

struct vol_mp {
	struct volume v;
	struct mp_target *t;
	/* Geometry copy: the controllers' tables change on reconnect.  Its
	 * anagrpid follows the target when it moves the namespace to another
	 * ANA group (vol_regroup, on reactor 0): the data path reads it with
	 * LOAD. */
	struct nvmf_ns ns;
	bool failed; /* atomic: the namespace changed under us */
	/* Bytes of its I/O parked for lack of a usable path (struct
	 * volume's path_wait), atomic.  The volume's, not the target's: one
	 * namespace without a path (its ANA group inaccessible, gone on
	 * every path) must not hold back the clients of the others (review). */
	uint64_t path_wait;
	uint64_t drain_at; /* atomic: vol_mp_drain's deadline for waiting I/O, 0 = none */
	bool excluded[MP_MAX_PATHS]; /* path reports another namespace (reactor 0) */
	bool bad_path[MP_MAX_PATHS]; /* the same, read by the data path (atomic) */
	/* The path does not show the namespace (gone, or another one there),
	 * not only smaller or behind on a grow: its flushes go through another
	 * path (atomic, read by the data path). */
	bool ns_gone[MP_MAX_PATHS];
	struct vpath vp[MP_MAX_PATHS];
	/* Per reactor, written only there (so the data path makes no shared
	 * write): writes acknowledged per path, which the flush rule sums
	 * (acked_sum); and this namespace's own put-aside marks per path
	 * (see put_aside), valid while aside_gen is the reactor's snap_gen
	 * and aside_until has not passed. */
	struct acked {
		_Alignas(64) uint64_t n[MP_MAX_PATHS];
		uint64_t aside_until[MP_MAX_PATHS];
		uint64_t aside_gen[MP_MAX_PATHS];
	} *acked;
};

/* The backend's part of vol_io.priv. */
struct mpio {
	struct nvmf_io nio;
	struct list_node link;
	struct rview *view;
	/* Waiting in the retry list: when it is due to be sent again; in
	 * flight: when its current attempt went down a path (may_resend). */
	uint64_t due_ns;
	uint64_t flush_snap;
	/* First time it had to wait for a path or came back to be sent again
	 * (see may_resend), 0 = never: its wait bound counts from there. */
	uint64_t wait_start;
	uint8_t path;
	uint8_t retries;
	uint8_t timeouts; /* attempts lost after their own io_timeout (counted in retries) */
	uint8_t flush_next;
	uint8_t flush_for; /* the path whose writes this flush covers */
	bool flushing;
	bool transition; /* came back with ANA Transition: may wait up to ANATT */
	bool path_wait; /* counted in the volume's path_wait until sent or completed */
};
_Static_assert(sizeof(struct mpio) <= VOL_IO_PRIV_SIZE, "VOL_IO_PRIV_SIZE too small");

/* The paths in use: reactor 0 may add one while the target runs
 * (mp_target_add_path), initialising it before it stores the new count
 * with release; the other reactors read it with acquire.  Every per-path
 * array is MP_MAX_PATHS wide and zeroed, and a path carries I/O only once
 * a snapshot (a message, sent later) shows it attached, so a reader that
 * still sees the old count only misses a path it could not use yet. */
static inline unsigned mp_nr_paths(const struct mp_target *t)
{
	return __atomic_load_n(&t->o.nr_paths, __ATOMIC_ACQUIRE);
}

/* Writes acknowledged on path i by every reactor, from any reactor: each
 * count only grows, so the sum is at least what was acknowledged before
 * the caller asked. */
static inline uint64_t acked_sum(struct vol_mp *n, unsigned i)
{
	uint64_t sum = 0;

	for (unsigned k = 0; k < n->t->nr_reactors; k++)
		sum += LOAD(n->acked[k].n[i]);
	return sum;
}

static inline struct mpio *mpio_of(struct vol_io *io) { return (struct mpio *)io->priv; }
static inline struct vol_io *io_of(struct mpio *m) { return container_of((void *)m, struct vol_io, priv); }

/* Path i is put aside on reactor v for vol n: for every namespace (the
 * path's mark) or for n alone (the pair's mark; it expires by itself). */
static inline bool aside_for(struct rview *v, struct vol_mp *n, unsigned i)
{
	const struct acked *a = &n->acked[v - v->t->views];

	if (v->stale_until[i])
		return true;
	return a->aside_gen[i] == v->snap_gen && a->aside_until[i] > reactor_now_ns();
}

/* mpath_target.c */
bool mp_all_deleted(const struct mp_target *t);
bool mp_any_attached(const struct mp_target *t);
void mp_broadcast(struct mp_target *t, void (*then)(struct mp_path *p), struct mp_path *p);

/* mpath_path.c */
/* The controller's lost_cb (on t's reactor; the unit tests call it to play
 * a controller that failed). */
void mp_path_lost(struct nvmf_ctrl *c, int err);
/* Cancels a path's timers and frees its controller (slot reuse, free). */
void mp_path_release(struct mp_path *p);
void mp_unlisted_fire(struct reactor_timer *tm);
void mp_ana_fire(struct reactor_timer *tm);
void mp_fast_fire(struct reactor_timer *tm);
void mp_reconnect_fire(struct reactor_timer *tm);
void mp_loss_fire(struct reactor_timer *tm);
/* Why a path's namespaces are checked: the volume is being built from the
 * paths' tables; the path (re)connected and identified every namespace;
 * the path's controller handled a namespace change event. */
enum mp_id_why { MP_ID_CREATE, MP_ID_BRINGUP, MP_ID_EVENT };
void mp_check_identity(struct mp_path *p, enum mp_id_why why);
void mp_first_result(struct mp_target *t);

/* mpath_io.c */
void mp_snap_kick(struct rview *v);
void mp_delay_fire(struct reactor_timer *tm);
void mp_wait_fire(struct reactor_timer *tm);

#endif
