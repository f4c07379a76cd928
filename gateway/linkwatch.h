/* Link watching: the kernel's link and address events (rtnetlink, through
 * libnl-route) for the local interface of every path, so that a path whose
 * interface goes down is failed over at once instead of after the
 * keep-alive timeout, and reconnects as soon as it is back.
 *
 * A path's interface is its host_iface, else the interface that owns its
 * host_traddr, else the output interface of the route to its traddr, as
 * resolved at start (a route that moves later is not followed).  The
 * interface counts as up while it is administratively up, has carrier
 * (IFF_RUNNING) and an operational state of up (or unknown, as loopback
 * reports), and still holds the local address the path uses when one is
 * known.
 *
 * Runs on reactor 0, where the targets live. */
#ifndef GW_LINKWATCH_H
#define GW_LINKWATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "gateway/base/reactor.h"
#include "gateway/volume/mpath.h"

/* What is known of one watched interface (one per path). */
struct lw_iface {
	int ifindex;
	char name[32];
	bool link_up;
	/* The local address the path's connection uses, if known: its
	 * removal takes the path down too. */
	bool has_addr, addr_present;
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
};

enum lw_change { LW_NONE, LW_DOWN, LW_UP };

/* Whether flags (IFF_*) and the operational state (IF_OPER_*, -1 when the
 * message had none) make a usable link. */
bool lw_link_usable(unsigned flags, int operstate);
/* One rtnetlink message (RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR,
 * RTM_DELADDR; others are ignored) of len bytes, applied to w: LW_DOWN or
 * LW_UP when it changes whether w is usable, else LW_NONE.  Malformed
 * messages change nothing. */
enum lw_change lw_apply(struct lw_iface *w, const void *msg, size_t len);
static inline bool lw_usable(const struct lw_iface *w)
{
	return w->link_up && (!w->has_addr || w->addr_present);
}

struct linkwatch;
/* Opens the rtnetlink socket on r (reactor 0, the targets' reactor) and
 * starts listening.  -errno when netlink cannot be used: the gateway then
 * runs on keep-alive alone. */
int linkwatch_start(struct reactor *r, struct linkwatch **out);
/* Watches every path of t: resolves their interfaces now, and warns when
 * they have different MTUs.  Call once t is created, on lw's reactor. */
int linkwatch_add(struct linkwatch *lw, struct mp_target *t);
/* Stops watching t: before t is shut down or freed (a reload removing a
 * target must call it, or an event would reach a freed target). */
void linkwatch_remove(struct linkwatch *lw, struct mp_target *t);
/* After the reactor has stopped. */
void linkwatch_free(struct linkwatch *lw);

#endif
