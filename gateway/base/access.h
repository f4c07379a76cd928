/* Who may use a listening socket: the file's mode, owner and group (Unix),
 * the peer's credentials (Unix, SO_PEERCRED) and the peer's address (TCP,
 * CIDRs).  Fixed-size, so a server copies its policy by value and an
 * accept never allocates. */
#ifndef GW_ACCESS_H
#define GW_ACCESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gateway/base/log.h"

#define GW_ACCESS_MAX 16

/* IPv4 is kept as its v4-mapped IPv6 form (::ffff:a.b.c.d, bits + 96), so
 * one comparison serves both families and a v4 client reaching a v6
 * socket is matched by the v4 rule. */
struct gw_cidr {
	uint8_t addr[16];
	uint8_t bits;
};

struct gw_access {
	unsigned mode;		/* 0: the listener's default */
	bool has_owner, has_group;
	uint32_t owner, group;
	/* Peer credentials: empty lists = everyone the file mode lets in;
	 * otherwise the peer's uid in allow_uids or its gid (primary or
	 * supplementary) in allow_gids. */
	uint8_t nr_uids, nr_gids, nr_cidrs;
	uint32_t uids[GW_ACCESS_MAX];
	uint32_t gids[GW_ACCESS_MAX];
	/* Peer addresses (TCP): empty = every address that reaches the
	 * bound one. */
	struct gw_cidr cidrs[GW_ACCESS_MAX];
};

/* "10.0.0.0/8", "::1", "fd00::/8", "127.0.0.2" (no prefix: one address).
 * 0 or -EINVAL. */
int gw_cidr_parse(const char *s, struct gw_cidr *out);
bool gw_cidr_match(const struct gw_cidr *c, const uint8_t addr[16]);

/* Same rules (a reload restarts a listener whose rules changed). */
bool gw_access_eq(const struct gw_access *a, const struct gw_access *b);

/* The accept paths' one check.  True when fd (just accepted) is refused:
 * it is then closed and one line logged naming the peer (address, or
 * uid/gid/pid) and the rule it failed, under "WHAT NAME:" ("nbd server
 * unix:/run/x.sock:").  a may
 * be NULL (no rules). */
bool gw_access_refused(const struct gw_access *a, int fd, const char *what, const char *name,
		       struct log_rl *rl);

/* fd is a TCP socket whose peer is on this host by the one rule a socket
 * can check alone: a loopback address, or the socket's own address (a
 * client that dialled one of the host's addresses and got it as its
 * source).  Its segments then never leave the kernel: the peer receives
 * the very buffers this side sends.  Not caught: a client bound to another
 * of the host's addresses, or in another network namespace of this host
 * (a container behind a veth). */
bool gw_peer_is_local(int fd);

/* Applies owner, group and mode to a bound, not yet listening, Unix socket
 * (the caller's default_mode when a->mode is 0).  0 or -errno. */
int gw_access_apply_file(const struct gw_access *a, const char *path, unsigned default_mode);

#endif
