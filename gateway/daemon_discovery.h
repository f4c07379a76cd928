/* Discovery controllers that keep running (issue 19), on reactor 0: one
 * per configured entry (the "discovery" list and discovery_conf lines),
 * plus one per referral followed.  Each connects to the discovery NQN with
 * keep-alive, enables the Discovery Log Page Change notice, keeps an
 * Asynchronous Event Request outstanding, reads the log at connect and on
 * each event, and reconnects with backoff for as long as the daemon runs.
 * A non-persistent entry reads the log once and disconnects.
 *
 * What the logs list is kept as discovered subsystems and their paths
 * (status shows them); each change goes through one step, disc_apply().
 * A target configured without paths (or made by an auto_export policy)
 * takes every listed port of its subsystem: at its start, and as a new
 * path of the running target when a log lists another port later.  A port
 * no longer listed keeps its live path, which is deleted rather than
 * reconnected once lost.  A target whose file names its paths keeps
 * those. */
#ifndef GW_DAEMON_DISCOVERY_H
#define GW_DAEMON_DISCOVERY_H

#include <stdbool.h>

#include "gateway/base/json.h"

struct gw;

/* Starts every configured discovery controller (none: nothing). */
void gw_discovery_start(struct gw *gw);
/* After a reload made the new file current: a discovery entry new in it
 * starts a controller, one no longer in it (or changed) is stopped with
 * the referrals it followed (the paths it found stay with their targets),
 * an unchanged one is left connected.  Each logged. */
void gw_discovery_reload(struct gw *gw);
/* Shuts them down; true if done(arg) will be called once all are closed,
 * false if there was nothing to close. */
bool gw_discovery_stop(struct gw *gw, void (*done)(void *arg), void *arg);
/* A target configured without paths: waits (true) until discovery lists
 * its subsystem, then connects and starts its exports; false if it has
 * paths.  Called by gw_batch_run for each target of a batch. */
struct gw_tgt;
bool gw_discovery_tgt_wait(struct gw_tgt *t);
/* "discovery": [ controllers ], "discovered": [ subsystems ] into status. */
void gw_discovery_status(struct gw *gw, struct json_buf *j);

#endif
