#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gateway/base/listen.h"
#include "gateway/base/parse.h"

#define UNIX_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

static int listen_unix(const char *path, int backlog, const struct gw_access *acc,
		       unsigned default_mode)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		/* Replace a stale socket file, never a live server's.  The
		 * probe does not block: a server that does not accept, its
		 * backlog full, would hold a blocking connect forever (the
		 * daemon's start, or reactor 0 at a reload); EAGAIN is that
		 * server, alive. */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		bool live = probe >= 0 && (connect(probe, (struct sockaddr *)&a, sizeof(a)) == 0 ||
					   errno == EAGAIN);
		if (probe >= 0)
			close(probe);
		if (live) {
			close(fd);
			return -EADDRINUSE;
		}
		unlink(path);
	}
	/* bind() creates the file with the socket inode's mode less the
	 * umask: owner-only from the start, without touching the process's
	 * umask (other threads may be creating files).  Owner, group and the
	 * wanted mode follow before listen(); until then a connect is refused
	 * whatever the mode, so there is no window with a wider one. */
	(void)fchmod(fd, 0600);
	int ret = bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno : 0;
	if (!ret) {
		ret = gw_access_apply_file(acc, path, default_mode);
		if (ret)
			unlink(path);
	}
	if (!ret && listen(fd, backlog) < 0) {
		ret = -errno;
		unlink(path);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

int gw_listen_unix(const char *path, int backlog, const struct gw_access *acc,
		   unsigned default_mode)
{
	return listen_unix(path, backlog, acc, default_mode);
}

static int listen_tcp(const struct gw_listen *l, uint16_t default_port, int backlog)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char port[8];
	int fd, ret, one = 1;

	snprintf(port, sizeof(port), "%u", l->port ? l->port : default_port);
	if (getaddrinfo(l->host ? l->host : "127.0.0.1", port, &hints, &res))
		return -EADDRNOTAVAIL;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		freeaddrinfo(res);
		return ret;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
		ret = -errno;
		close(fd);
		freeaddrinfo(res);
		return ret;
	}
	freeaddrinfo(res);
	return fd;
}

int gw_listen_open(const struct gw_listen *l, uint16_t default_port, int backlog)
{
	switch (l->kind) {
	case GW_LISTEN_UNIX:
		return listen_unix(l->path, backlog, &l->access, GW_LISTEN_DEFAULT_MODE);
	case GW_LISTEN_TCP:
		return listen_tcp(l, default_port, backlog);
	default:
		return -EINVAL;
	}
}

void gw_listen_free(struct gw_listen *l)
{
	free(l->spec);
	free(l->path);
	free(l->host);
	*l = (struct gw_listen){ .kind = GW_LISTEN_NONE };
}

/* "HOST" of tcp:HOST:PORT; brackets allow an IPv6 address.  An empty host
 * ("tcp::PORT") is the same as none: loopback, 127.0.0.1 (gw_listen_open),
 * since NBD and the metrics endpoint authenticate nobody. */
static int parse_tcp_host(const char *h, size_t n, char **out)
{
	if (n && h[0] == '[') {
		if (n < 2 || h[n - 1] != ']')
			return -EINVAL;
		h++;
		n -= 2;
	}
	*out = NULL;
	if (!n)
		return 0;
	*out = strndup(h, n);
	return *out ? 0 : -ENOMEM;
}

int gw_listen_parse(const char *s, struct gw_listen *out)
{
	struct gw_listen l = { .kind = GW_LISTEN_NONE };

	if (strncmp(s, "unix:", 5) == 0) {
		const char *p = s + 5;
		if (!*p || strlen(p) >= UNIX_PATH_MAX)
			return -EINVAL;
		l.kind = GW_LISTEN_UNIX;
		l.path = strdup(p);
		if (!l.path)
			return -ENOMEM;
	} else if (strncmp(s, "tcp:", 4) == 0) {
		const char *hp = s + 4, *colon = strrchr(hp, ':');
		l.kind = GW_LISTEN_TCP;
		if (gw_parse_port(colon ? colon + 1 : hp, &l.port))
			return -EINVAL;
		if (colon) {
			int ret = parse_tcp_host(hp, (size_t)(colon - hp), &l.host);
			if (ret)
				return ret;
		}
	} else {
		return -EINVAL;
	}
	l.spec = strdup(s);
	if (!l.spec) {
		gw_listen_free(&l);
		return -ENOMEM;
	}
	*out = l;
	return 0;
}
