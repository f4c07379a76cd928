/* Listening sockets for the gateway's servers (NBD, metrics): a gw_listen
 * ("unix:PATH" or "tcp:[HOST:]PORT") into a bound, listening fd. */
#ifndef GW_LISTEN_H
#define GW_LISTEN_H

#include <stdint.h>
#include <sys/types.h>

#include "gateway/base/access.h"
#include "gateway/config.h"

/* A Unix listener's file when its access names no mode: the owner only
 * (NBD has no authentication of its own). */
#define GW_LISTEN_DEFAULT_MODE 0600

/* The fd, or -errno: -EADDRINUSE when a live server holds the Unix path (a
 * stale socket file is replaced), -EADDRNOTAVAIL when the TCP host does not
 * resolve, -EINVAL for a kind without a socket.  TCP binds loopback unless
 * a host is named (neither server authenticates its clients) and uses
 * default_port when the spec has none. */
int gw_listen_open(const struct gw_listen *l, uint16_t default_port, int backlog);
/* A Unix socket at path (stale file replaced as above) whose file has
 * acc's owner, group and mode (default_mode when acc names none; acc may
 * be NULL) before anyone can connect.  gw_listen_open applies the
 * listener's own access so. */
int gw_listen_unix(const char *path, int backlog, const struct gw_access *acc,
		   unsigned default_mode);

#endif
