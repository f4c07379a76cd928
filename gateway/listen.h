/* Listening sockets for the gateway's servers (NBD, metrics): a gw_listen
 * ("unix:PATH" or "tcp:[HOST:]PORT") into a bound, listening fd. */
#ifndef GW_LISTEN_H
#define GW_LISTEN_H

#include <stdint.h>
#include <sys/types.h>

#include "gateway/config.h"

/* The fd, or -errno: -EADDRINUSE when a live server holds the Unix path (a
 * stale socket file is replaced), -EADDRNOTAVAIL when the TCP host does not
 * resolve, -EINVAL for a kind without a socket.  TCP binds loopback unless
 * a host is named (neither server authenticates its clients) and uses
 * default_port when the spec has none. */
int gw_listen_open(const struct gw_listen *l, uint16_t default_port, int backlog);
/* A Unix socket at path (stale file replaced as above) whose file has
 * mode (0: the umask's) before anyone can connect. */
int gw_listen_unix(const char *path, int backlog, mode_t mode);

#endif
