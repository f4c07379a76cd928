/* Reclaim safety while the gateway serves a block device or a FUSE mount
 * to the kernel of its own host: page reclaim may write dirty pages back
 * through that very device, and it can only finish if the gateway makes
 * progress without waiting on the same reclaim. */
#ifndef GATEWAY_RECLAIM_H
#define GATEWAY_RECLAIM_H

#include <stdbool.h>

struct reactor;

struct reclaim_opts {
	bool mlock;		/* mlockall(MCL_CURRENT | MCL_FUTURE) */
	bool io_flusher;	/* PR_SET_IO_FLUSHER on every reactor thread */
	bool oom;		/* write oom_score_adj */
	int oom_score_adj;	/* -1000..1000 */
	/* setpriority on every thread of the process: the kernel's own block
	 * I/O workers (nvme-tcp's, nbd's receive, nvmet's: WQ_HIGHPRI) run
	 * at -20, and a gateway at 0 in their place is preempted by them
	 * and shares its CPU with the very writers it serves (issue 20). */
	bool renice;
	int nice;		/* -20..19 */
};

#define RECLAIM_OPTS_DEFAULT                                              \
	((struct reclaim_opts){ .mlock = true, .io_flusher = true, .oom = true, \
				.oom_score_adj = -900, .renice = true, .nice = -20 })
#define RECLAIM_OPTS_OFF ((struct reclaim_opts){ .oom_score_adj = 0 })

/* Applies O once per process, from the thread of RS[SELF] (called on a
 * reactor): mlockall, oom_score_adj and the nice value for the process
 * (every thread it has; later ones take their creator's), and
 * PR_SET_IO_FLUSHER on this thread, on the other reactors by message and on
 * reactor threads started later.  Logs one line:
 *   reclaim: mlockall=ok|off|failed(ERR) io_flusher=ok|off|failed(ERR) oom_score_adj=N
 *            nice=N|off|failed(ERR)
 * Failures are logged and the gateway goes on.  Later calls do nothing. */
void reclaim_enable(struct reactor **rs, unsigned nr, unsigned self,
		    const struct reclaim_opts *o);
bool reclaim_enabled(void);
/* Sets every thread of the process to nice (-20..19); threads started
 * later take their creator's.  A thread already there is left alone,
 * without a setpriority: the unit sets Nice= before the start and its
 * seccomp filter refuses setpriority (EPERM) with the rest of @resources.
 * 0, or -errno of the first thread that refused (EACCES: no CAP_SYS_NICE
 * and RLIMIT_NICE too low; EPERM: a seccomp filter). */
int reclaim_renice(int nice);
/* --nice N|off: N in -20..19 sets O's nice, "off" leaves the priority
 * alone; -EINVAL on anything else (O unchanged). */
int reclaim_parse_nice(const char *s, struct reclaim_opts *o);

#endif
