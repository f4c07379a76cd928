/* nvme-cli's /etc/nvme/discovery.conf: one discovery controller per line,
 * in nvme-cli's own option syntax (--transport=tcp --traddr=... or -t tcp
 * -a ...), '#' comments and blank lines skipped.  Options that nvme-cli
 * knows but that do not apply to the gateway (queue counts, timeouts, TLS)
 * are accepted and left alone, so that the file nvme-cli uses works
 * unchanged; an unknown option is an error. */
#ifndef GW_DISCOVERY_CONF_H
#define GW_DISCOVERY_CONF_H

#include <stddef.h>

#include "gateway/config.h"

/* One line into *d (its strings malloc'd; d->trsvcid NULL when the line
 * names none): 1, 0 for a blank or comment line, -EINVAL with err set
 * (what is wrong, without the file and line), or -ENOMEM.  *d is set up
 * with the defaults of a "discovery" entry first; on an error its strings
 * are freed. */
int discovery_conf_line(const char *line, struct gw_discovery *d, char *err, size_t errlen);
/* Frees the strings of one entry. */
void discovery_entry_release(struct gw_discovery *d);

#endif
