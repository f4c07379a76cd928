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
/* What the host does with a failed command (the Linux host's rules):
 * DNR -> fail now; path-related (SCT 3, incl. ANA) -> another path or this
 * one after it recovers, not counted as a retry; anything else -> retry
 * after the controller's CRD delay, at most max_retries times. */
enum nvme_disposition { NVME_DISP_DONE, NVME_DISP_FAIL, NVME_DISP_RETRY, NVME_DISP_FAILOVER };
enum nvme_disposition nvme_status_disposition(uint16_t status);
/* ANA Persistent Loss / Inaccessible / Transition: re-read the ANA log. */
bool nvme_status_is_ana(uint16_t status);
static inline uint16_t nvme_cqe_status(uint16_t raw) { return (uint16_t)(raw >> 1); }

#endif
