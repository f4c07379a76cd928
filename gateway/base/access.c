#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gateway/base/access.h"
#include "gateway/base/log.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

static void v4_mapped(const struct in_addr *a, uint8_t out[16])
{
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &a->s_addr, 4);
}

int gw_cidr_parse(const char *s, struct gw_cidr *out)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct in_addr a4;
	struct in6_addr a6;
	unsigned max, bits;
	struct gw_cidr c = { 0 };

	if (!n || n >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = 0;
	if (inet_pton(AF_INET, host, &a4) == 1) {
		v4_mapped(&a4, c.addr);
		max = 32;
	} else if (inet_pton(AF_INET6, host, &a6) == 1) {
		memcpy(c.addr, &a6, 16);
		max = 128;
	} else {
		return -EINVAL;
	}
	bits = max;
	if (slash) {
		char *end;
		unsigned long v;
		if (!slash[1] || slash[1] < '0' || slash[1] > '9')
			return -EINVAL;
		errno = 0;
		v = strtoul(slash + 1, &end, 10);
		if (errno || *end || v > max)
			return -EINVAL;
		bits = (unsigned)v;
	}
	c.bits = (uint8_t)(bits + 128 - max);
	/* Host bits set under the prefix ("10.1.2.3/8") are a typo more often
	 * than a wish: refused rather than silently cleared. */
	for (unsigned i = c.bits; i < 128; i++)
		if (c.addr[i / 8] & (0x80 >> (i % 8)))
			return -EINVAL;
	*out = c;
	return 0;
}

bool gw_cidr_match(const struct gw_cidr *c, const uint8_t addr[16])
{
	unsigned full = c->bits / 8, rest = c->bits % 8;

	if (memcmp(c->addr, addr, full))
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (c->addr[full] & mask) == (addr[full] & mask);
}

static bool in_list(const uint32_t *list, unsigned n, uint32_t v)
{
	for (unsigned i = 0; i < n; i++)
		if (list[i] == v)
			return true;
	return false;
}

/* NULL when allowed, else why not; *peer names the client. */
static const char *check_cred(const struct gw_access *a, int fd, char *peer, size_t len)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0) {
		snprintf(peer, len, "a unix client");
		return "its credentials cannot be read (SO_PEERCRED)";
	}
	snprintf(peer, len, "uid %u gid %u pid %d", (unsigned)cr.uid, (unsigned)cr.gid,
		 (int)cr.pid);
	if (!a->nr_uids && !a->nr_gids)
		return NULL;
	if (in_list(a->uids, a->nr_uids, cr.uid) || in_list(a->gids, a->nr_gids, cr.gid))
		return NULL;
	if (a->nr_gids) {
		/* Supplementary groups (Linux 4.13+); on older kernels only
		 * the primary group counts.  More than fit here: ERANGE, with
		 * the length they need (up to NGROUPS_MAX), read again. */
		gid_t groups[64], *g = groups;
		bool found = false;
		l = sizeof(groups);
		int ret = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &l);
		if (ret < 0 && errno == ERANGE && l > sizeof(groups) &&
		    l <= NGROUPS_MAX * sizeof(gid_t) && (g = malloc(l)))
			ret = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &l);
		if (ret == 0)
			for (unsigned i = 0; i < l / sizeof(gid_t) && !found; i++)
				found = in_list(a->gids, a->nr_gids, g[i]);
		if (g != groups)
			free(g);
		if (found)
			return NULL;
		if (ret < 0)
			return "neither its uid nor its primary group is in allow_users/allow_groups "
			       "(its supplementary groups cannot be read: SO_PEERGROUPS)";
	}
	return "neither its uid nor its groups are in allow_users/allow_groups";
}

/* An IP socket address as 16 bytes (IPv4 mapped); false for other families. */
static bool ip_bytes(const struct sockaddr_storage *ss, uint8_t out[16])
{
	if (ss->ss_family == AF_INET)
		v4_mapped(&((const struct sockaddr_in *)ss)->sin_addr, out);
	else if (ss->ss_family == AF_INET6)
		memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	else
		return false;
	return true;
}

static const char *check_addr(const struct gw_access *a, int fd, char *peer, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	uint8_t addr[16];
	unsigned port;

	if (getpeername(fd, (struct sockaddr *)&ss, &l) < 0) {
		snprintf(peer, len, "a client");
		return "its address cannot be read";
	}
	if (!ip_bytes(&ss, addr)) {
		snprintf(peer, len, "a client of family %u", (unsigned)ss.ss_family);
		return "not an IP peer";
	}
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		port = ntohs(s4->sin_port);
		snprintf(peer, len, "%s:%u", host, port);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		port = ntohs(s6->sin6_port);
		snprintf(peer, len, "[%s]:%u", host, port);
	}
	for (unsigned i = 0; i < a->nr_cidrs; i++)
		if (gw_cidr_match(&a->cidrs[i], addr))
			return NULL;
	return "its address is not in allow_from";
}

bool gw_peer_is_local(int fd)
{
	/* 127.0.0.0/8 (as every IPv4 address here, mapped) and ::1. */
	static const struct gw_cidr loopback[] = {
		{ .addr = { [10] = 0xff, [11] = 0xff, [12] = 127 }, .bits = 96 + 8 },
		{ .addr = { [15] = 1 }, .bits = 128 },
	};
	struct sockaddr_storage peer, self;
	socklen_t lp = sizeof(peer), ls = sizeof(self);
	uint8_t p[16], s[16];

	if (getpeername(fd, (struct sockaddr *)&peer, &lp) < 0 || !ip_bytes(&peer, p))
		return false;
	for (unsigned i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
		if (gw_cidr_match(&loopback[i], p))
			return true;
	return getsockname(fd, (struct sockaddr *)&self, &ls) == 0 && ip_bytes(&self, s) &&
	       !memcmp(p, s, 16);
}

bool gw_access_eq(const struct gw_access *a, const struct gw_access *b)
{
	if (a->mode != b->mode || a->has_owner != b->has_owner || a->has_group != b->has_group ||
	    (a->has_owner && a->owner != b->owner) || (a->has_group && a->group != b->group) ||
	    a->nr_uids != b->nr_uids || a->nr_gids != b->nr_gids || a->nr_cidrs != b->nr_cidrs)
		return false;
	if (memcmp(a->uids, b->uids, a->nr_uids * sizeof(a->uids[0])) ||
	    memcmp(a->gids, b->gids, a->nr_gids * sizeof(a->gids[0])))
		return false;
	for (unsigned i = 0; i < a->nr_cidrs; i++)
		if (a->cidrs[i].bits != b->cidrs[i].bits ||
		    memcmp(a->cidrs[i].addr, b->cidrs[i].addr, 16))
			return false;
	return true;
}

bool gw_access_refused(const struct gw_access *a, int fd, const char *what, const char *name,
		       struct log_rl *rl)
{
	struct sockaddr_storage self;
	socklen_t l = sizeof(self);
	char peer[96];
	const char *why;

	if (!a || (!a->nr_uids && !a->nr_gids && !a->nr_cidrs))
		return false;
	if (getsockname(fd, (struct sockaddr *)&self, &l) < 0) {
		snprintf(peer, sizeof(peer), "a client");
		why = "its socket cannot be read";
	} else if (self.ss_family == AF_UNIX) {
		why = check_cred(a, fd, peer, sizeof(peer));
	} else if (a->nr_cidrs) {
		why = check_addr(a, fd, peer, sizeof(peer));
	} else {
		why = NULL;
	}
	if (!why)
		return false;
	log_rl_msg(rl, LOG_LVL_WARN, "%s %s: refused %s: %s", what, name, peer, why);
	close(fd);
	return true;
}

int gw_access_apply_file(const struct gw_access *a, const char *path, unsigned default_mode)
{
	unsigned mode = a && a->mode ? a->mode : default_mode;

	/* The mode first: once the file is another user's, changing it takes
	 * CAP_FOWNER, which the shipped unit does not grant (CAP_CHOWN it
	 * does). */
	if (mode && chmod(path, mode) < 0)
		return -errno;
	if (a && (a->has_owner || a->has_group) &&
	    chown(path, a->has_owner ? a->owner : (uid_t)-1, a->has_group ? a->group : (gid_t)-1) < 0)
		return -errno;
	return 0;
}
