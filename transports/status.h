/* NVMe status codes: the one table that turns them into errno, and names
 * for logs. */
#ifndef TRANSPORTS_STATUS_H
#define TRANSPORTS_STATUS_H

#include <stdbool.h>
#include <stdint.h>

/* status is the 15-bit status field (cqe.status >> 1). */
int nvme_status_to_errno(uint16_t status);
/* "Invalid Field in Command" etc.; never NULL. */
const char *nvme_status_str(uint16_t status);
/* Formats "NAME (sct 0xT sc 0xCC[, dnr])" into buf. */
const char *nvme_status_fmt(uint16_t status, char *buf, unsigned len);
/* What the host does with a failed command, one table for every status
 * (status.c; the Linux host's rules, see there for where we differ):
 *   DONE      success;
 *   FAIL      DNR, or a status no retry can change: fail now;
 *   RETRY     after the controller's CRD delay, on a usable path, at most
 *             max_retries times;
 *   FAILOVER  path-related (SCT 3, not ANA): another path now, this one
 *             only after a short backoff; not counted as a retry;
 *   ANA       ANA persistent loss / inaccessible / transition: re-read the
 *             ANA log, wait for the group's state (transition: up to
 *             ANATT) on another path or this one; not counted as a retry;
 *   RESET     the controller lost this association (keep-alive expired):
 *             reset the path, the I/O waits for a usable path.
 * Every wait is bounded: see mpath.h. */
enum nvme_disposition {
	NVME_DISP_DONE,
	NVME_DISP_FAIL,
	NVME_DISP_RETRY,
	NVME_DISP_FAILOVER,
	NVME_DISP_ANA,
	NVME_DISP_RESET,
};
enum nvme_disposition nvme_status_disposition(uint16_t status);
const char *nvme_disposition_name(enum nvme_disposition d);
/* ANA Persistent Loss / Inaccessible / Transition: re-read the ANA log. */
bool nvme_status_is_ana(uint16_t status);
static inline uint16_t nvme_cqe_status(uint16_t raw) { return (uint16_t)(raw >> 1); }

#endif
