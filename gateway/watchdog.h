/* The systemd watchdog (WatchdogSec=): WATCHDOG=1 pings that prove every
 * reactor loop is turning, not just that the process exists.  Each reactor
 * stamps a "last alive" time from a timer of its own loop every period/4;
 * reactor 0 pings only when every stamp is younger than period/2, so one
 * stuck reactor stops the pings and systemd restarts the service. */
#ifndef GW_WATCHDOG_H
#define GW_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>

struct reactor;
struct watchdog;

/* The period systemd asked for, in microseconds: from $WATCHDOG_USEC when
 * $WATCHDOG_PID is unset or names this process.  0 when off; -EINVAL for a
 * malformed value (then the watchdog is off too). */
int watchdog_period_from_env(uint64_t *usec);

/* The ping decision: true when every stamp is at most max_age_ns old at
 * now_ns (a stamp from the future, another thread's clock read racing
 * ours, counts as fresh).  *stale gets the first stale index, if any. */
bool watchdog_all_fresh(const uint64_t *stamps, unsigned n, uint64_t now_ns,
			uint64_t max_age_ns, unsigned *stale);

/* Arms one timer on each of the n reactors.  Call before the reactor
 * threads start (the timers are put on their lists from this thread).
 * usec 0 makes *out NULL and does nothing. */
int watchdog_start(struct reactor *rs, unsigned n, uint64_t usec, struct watchdog **out);
/* After the reactors have stopped (joined): frees it.  NULL is fine. */
void watchdog_free(struct watchdog *wd);
/* Pings sent so far (tests). */
uint64_t watchdog_pings(const struct watchdog *wd);

#endif
