/* Listening sockets for the gateway's servers (NBD, metrics): a gw_listen
 * ("unix:PATH" or "tcp:[HOST:]PORT") into a bound, listening fd. */
#ifndef GW_LISTEN_H
#define GW_LISTEN_H

#include <stdint.h>
#include <sys/types.h>

#include "gateway/base/access.h"

enum gw_listen_kind {
	GW_LISTEN_NONE,
	GW_LISTEN_UNIX,
	GW_LISTEN_TCP,
};

/* An NBD server socket: "unix:PATH", "tcp:HOST:PORT" or "tcp:PORT". */
struct gw_listen {
	enum gw_listen_kind kind;
	char *spec;		/* the string as written, for messages */
	char *path;		/* UNIX */
	char *host;		/* TCP; NULL = loopback (127.0.0.1) */
	uint16_t port;		/* TCP */
	/* Copied from the listener's *access group once the file is read
	 * (gw_listen_parse leaves it zero: no rules, mode 0600). */
	struct gw_access access;
};

/* Fills *out (strings allocated, -ENOMEM possible), or -EINVAL on bad
 * syntax; free with gw_listen_free. */
int gw_listen_parse(const char *s, struct gw_listen *out);
void gw_listen_free(struct gw_listen *l);

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
