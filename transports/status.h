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
static inline uint16_t nvme_cqe_status(uint16_t raw) { return (uint16_t)(raw >> 1); }

#endif
