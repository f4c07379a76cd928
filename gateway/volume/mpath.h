/* A target as the exporters need it: one subsystem reached over one or
 * more paths (a controller each, TCP and RDMA may be mixed), kept alive
 * across failures, and a volume per namespace that sends each I/O down a
 * usable path.
 *
 * Recovery follows the Linux host: a path whose controller fails is
 * RESETTING, its in-flight commands come back and wait (or go down
 * another path), the controller is reconnected every reconnect_delay and
 * re-identified, and the waiting I/O is resubmitted.  I/O fails with EIO
 * only once fast_io_fail_tmo has passed with no usable path, or every path
 * has been deleted after ctrl_loss_tmo.  ANA states (from the log page at
 * bring-up and on the ANA-change event) decide which paths carry I/O:
 * optimized ones while any exists, then non-optimized.
 *
 * Threads: the target and its paths live on reactor 0 (t->r).  Each
 * reactor keeps its own snapshot of which of its queues may carry I/O,
 * replaced by message when a path changes, so the data path takes no lock
 * and never touches another reactor's queue. */
#ifndef TRANSPORTS_MPATH_H
#define TRANSPORTS_MPATH_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/base/reactor.h"
#include "gateway/volume/volume.h"
#include "transports/ctrl.h"

#define MP_MAX_PATHS 8

enum mp_policy { MP_FAILOVER, MP_ROUND_ROBIN, MP_QUEUE_DEPTH };

struct mp_target_opts {
	/* Template for every path's controller (name, subsystem, host
	 * identity, queues, keep-alive, I/O timeout, authentication); its
	 * .path is replaced by each of paths[]. */
	struct nvmf_ctrl_opts ctrl;
	struct nvmf_path_opts paths[MP_MAX_PATHS];
	unsigned nr_paths;
	unsigned reconnect_delay_ms;
	int ctrl_loss_tmo_s; /* -1 = forever */
	int fast_io_fail_tmo_s; /* -1 = off */
	unsigned max_retries;
	enum mp_policy policy;
	/* A path that has never been live gives up after connect_loss_tmo_s
	 * (-1 = never) instead of ctrl_loss_tmo, counted from
	 * mp_target_connect, when connect_loss_own is set: a target that is
	 * not up yet (boot order) is waited for, not given up. */
	bool connect_loss_own;
	int connect_loss_tmo_s;
};

struct mp_target;
typedef void (*mp_target_cb)(struct mp_target *t, int err, void *arg);

/* Queue i of every path runs on reactors[i % nr_reactors]; reactors[0]
 * owns the target.  The target connects in mp_target_connect. */
int mp_target_create(const struct mp_target_opts *o, struct reactor **reactors,
		     unsigned nr_reactors, struct mp_target **out);
/* cb(t, 0) once every path has made its first attempt and at least one is
 * live, cb(t, -errno) when none could connect.  Paths that failed keep
 * trying in the background (within connect_loss_tmo when the owner set
 * one, else ctrl_loss_tmo). */
void mp_target_connect(struct mp_target *t, mp_target_cb cb, void *arg);
/* After a failed mp_target_connect: cb(t, 0, arg) once a path is live
 * (at once if one is), cb(t, -ETIMEDOUT, arg) once every path has been
 * given up.  Once; cancelled by mp_target_shutdown. */
void mp_target_on_live(struct mp_target *t, mp_target_cb cb, void *arg);
/* No volume may have I/O in flight.  cb(t, 0, arg) when every controller
 * is shut down. */
void mp_target_shutdown(struct mp_target *t, mp_target_cb cb, void *arg);
/* After the reactors have stopped. */
void mp_target_free(struct mp_target *t);
/* Operator reset: live paths are reset and reconnected at once, deleted
 * paths (ctrl_loss_tmo over) start reconnecting again. */
void mp_target_reset(struct mp_target *t);

/* The local interface of path idx went down (up = false) or came back:
 * a live path is failed over at once, as on a transport error; a path
 * waiting for its reconnect_delay reconnects now.  why is logged. */
void mp_target_link_event(struct mp_target *t, unsigned idx, bool up, const char *why);

/* On t's reactor.  A path added to a running target (a new port of its
 * subsystem that discovery listed): the target's controller options,
 * po's address.  It connects, reconnects and joins the volumes as the
 * others do (a volume uses it once it shows the same namespace).  Returns
 * its index, -EEXIST (the target has that address: its index is not
 * returned, see mp_target_find_path), -ENOSPC (MP_MAX_PATHS already and
 * none of them deleted and released by every reactor, whose slot it would
 * take; one log line), -ESHUTDOWN. */
int mp_target_add_path(struct mp_target *t, const struct nvmf_path_opts *po);
/* The index of t's path to po's transport, address and port, or -ENOENT. */
int mp_target_find_path(const struct mp_target *t, const struct nvmf_path_opts *po);
/* Discovery no longer lists path idx (listed = false): a live path stays;
 * once lost (or at once if it has no connection) it reconnects as any lost
 * path for a grace, ctrl_loss_tmo or MP_UNLISTED_GRACE_S (60 s) when that
 * is off, never less than fast_io_fail_tmo, and is deleted at its end
 * unless it reconnected.  Listed again: the grace is cancelled, a path
 * deleted reconnects.  On t's reactor. */
void mp_target_path_listed(struct mp_target *t, unsigned idx, bool listed);

const char *mp_policy_name(enum mp_policy p);
/* "live" (every path live), "degraded", "reconnecting" (none live),
 * "failed" (every path deleted). */
const char *mp_target_state(const struct mp_target *t);
const char *mp_target_name(const struct mp_target *t);

struct mp_path_info {
	const struct nvmf_path_opts *opts;
	enum nvmf_ctrl_state state;
	uint8_t ana_state; /* of the first namespace with a volume, else of nsid 1 */
	uint16_t cntlid;
	unsigned reconnects;
	int last_err; /* of the last failed attempt, 0 while attached */
	uint64_t next_attempt_ns; /* reactor clock; 0 = none scheduled */
	uint64_t reads, writes, read_bytes, write_bytes, errors, retries;
	unsigned in_flight;
};
/* On t's reactor (counters are read from every reactor without locks:
 * each is written by one reactor only). */
unsigned mp_target_paths(struct mp_target *t, struct mp_path_info *out, unsigned max);

/* The active NSIDs (ascending) as a live path's controller last read
 * them: 0 when no path is attached.  On t's reactor. */
unsigned mp_target_nsids(struct mp_target *t, uint32_t *out, unsigned max);

/* A namespace of the target as a volume.  The geometry comes from the
 * first live path; every path must report the same namespace (size, block
 * size, NGUID/EUI-64) or it is not used for this volume. */
int vol_mp_create(const char *name, struct mp_target *t, uint32_t nsid, bool read_only,
		  struct volume **out);
/* The export is going away (export-remove, reload, SIGTERM): I/O that
 * waits for a usable path gets MP_DRAIN_NS (5 s) more, then fails with
 * EIO, so the exporters' drain ends even when the deadlines are off; an
 * I/O that comes back from a lost connection after that fails too rather
 * than going out again.  Commands in flight are bounded by io_timeout.
 * Any thread; a volume of another backend is left alone. */
void vol_mp_drain(struct volume *vol);

#endif
