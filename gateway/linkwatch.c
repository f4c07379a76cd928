/* Link watching over rtnetlink; see linkwatch.h.  libnl-route opens the
 * socket, joins the groups and reads the start-up state; the messages
 * themselves are decoded here (lw_apply) so that the decision can be
 * unit-tested on hand-made messages. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>

#include "gateway/linkwatch.h"
#include "gateway/base/list.h"
#include "gateway/base/log.h"

/* ---- the decision (no I/O) ---- */

bool lw_link_usable(unsigned flags, int operstate)
{
	if (!(flags & IFF_UP) || !(flags & IFF_RUNNING))
		return false;
	/* Loopback and some virtual devices never leave "unknown". */
	return operstate < 0 || operstate == IF_OPER_UP || operstate == IF_OPER_UNKNOWN;
}

static enum lw_change lw_link_msg(struct lw_iface *w, const struct nlmsghdr *h)
{
	const struct ifinfomsg *ifi;
	int operstate = -1;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return LW_NONE;
	ifi = NLMSG_DATA(h);
	if (ifi->ifi_index != w->ifindex)
		return LW_NONE;
	if (h->nlmsg_type == RTM_DELLINK) {
		w->link_up = false;
		return LW_NONE;
	}
	int alen = (int)IFLA_PAYLOAD(h);
	for (const struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, alen); a = RTA_NEXT(a, alen))
		if (a->rta_type == IFLA_OPERSTATE && RTA_PAYLOAD(a) >= 1)
			operstate = *(const uint8_t *)RTA_DATA(a);
	w->link_up = lw_link_usable(ifi->ifi_flags, operstate);
	return LW_NONE;
}

static enum lw_change lw_addr_msg(struct lw_iface *w, const struct nlmsghdr *h)
{
	const struct ifaddrmsg *ifa;
	const void *local = NULL, *address = NULL;
	size_t alen = w->family == AF_INET ? 4 : 16;

	if (!w->has_addr || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)))
		return LW_NONE;
	ifa = NLMSG_DATA(h);
	if ((int)ifa->ifa_index != w->ifindex || ifa->ifa_family != w->family)
		return LW_NONE;
	int len = (int)IFA_PAYLOAD(h);
	for (const struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (RTA_PAYLOAD(a) < alen)
			continue;
		if (a->rta_type == IFA_LOCAL)
			local = RTA_DATA(a);
		else if (a->rta_type == IFA_ADDRESS)
			address = RTA_DATA(a);
	}
	/* IPv4 puts the interface's own address in IFA_LOCAL (IFA_ADDRESS
	 * is the peer on point-to-point links); IPv6 has IFA_ADDRESS only. */
	const void *mine = local ? local : address;
	if (mine && !memcmp(mine, w->addr, alen))
		w->addr_present = h->nlmsg_type == RTM_NEWADDR;
	return LW_NONE;
}

enum lw_change lw_apply(struct lw_iface *w, const void *msg, size_t len)
{
	const struct nlmsghdr *h = msg;
	bool before = lw_usable(w);

	if (len < sizeof(*h) || h->nlmsg_len < sizeof(*h) || h->nlmsg_len > len)
		return LW_NONE;
	switch (h->nlmsg_type) {
	case RTM_NEWLINK:
	case RTM_DELLINK:
		lw_link_msg(w, h);
		break;
	case RTM_NEWADDR:
	case RTM_DELADDR:
		lw_addr_msg(w, h);
		break;
	default:
		return LW_NONE;
	}
	if (before == lw_usable(w))
		return LW_NONE;
	return before ? LW_DOWN : LW_UP;
}

/* ---- the watcher ---- */

struct lw_path {
	struct mp_target *t;
	unsigned idx;
	struct lw_iface w;
};

struct linkwatch {
	struct reactor *r;
	struct nl_sock *sk;
	struct nl_cb *cb; /* a reference of the socket's callbacks */
	struct reactor_op op;
	struct lw_path *paths;
	size_t nr_paths;
};

static void lw_act(struct lw_path *p, enum lw_change c)
{
	char why[96];

	if (c == LW_NONE)
		return;
	if (c == LW_DOWN)
		snprintf(why, sizeof(why), p->w.link_up ? "local address removed from %s" :
			 "local interface %s down", p->w.name);
	else
		snprintf(why, sizeof(why), "local interface %s up", p->w.name);
	log_notice("linkwatch: target %s path %u: %s", mp_target_name(p->t), p->idx, why);
	mp_target_link_event(p->t, p->idx, c == LW_UP, why);
}

static int lw_msg(struct nl_msg *msg, void *arg)
{
	struct linkwatch *lw = arg;
	struct nlmsghdr *h = nlmsg_hdr(msg);

	for (size_t i = 0; i < lw->nr_paths; i++)
		if (lw->paths[i].w.ifindex > 0)
			lw_act(&lw->paths[i], lw_apply(&lw->paths[i].w, h, h->nlmsg_len));
	return NL_OK;
}

static bool addr_eq(struct nl_addr *a, int family, const uint8_t *bytes)
{
	size_t len = family == AF_INET ? 4 : 16;

	return a && nl_addr_get_family(a) == family && nl_addr_get_len(a) == len &&
	       !memcmp(nl_addr_get_binary_addr(a), bytes, len);
}

/* The interface holding family/bytes, or 0. */
static int owner_of(struct nl_cache *addrs, int family, const uint8_t *bytes)
{
	for (struct nl_object *o = nl_cache_get_first(addrs); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		if (addr_eq(rtnl_addr_get_local(a), family, bytes))
			return rtnl_addr_get_ifindex(a);
	}
	return 0;
}

static int numeric(const char *s, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_DGRAM };
	struct addrinfo *ai;

	if (getaddrinfo(s, NULL, &hints, &ai))
		return -EINVAL;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static void set_addr(struct lw_iface *w, const struct sockaddr_storage *ss)
{
	w->family = ss->ss_family;
	w->has_addr = true;
	if (ss->ss_family == AF_INET)
		memcpy(w->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	else
		memcpy(w->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
}

/* The local address the kernel would use towards traddr: a connected UDP
 * socket asks the routing table without sending anything. */
static int route_source(const char *traddr, struct sockaddr_storage *src)
{
	struct sockaddr_storage dst;
	socklen_t dl, sl = sizeof(*src);
	int fd, ret = 0;

	if (numeric(traddr, &dst, &dl) < 0)
		return -EINVAL;
	if (dst.ss_family == AF_INET)
		((struct sockaddr_in *)&dst)->sin_port = htons(9);
	else
		((struct sockaddr_in6 *)&dst)->sin6_port = htons(9);
	fd = socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&dst, dl) < 0 ||
	    getsockname(fd, (struct sockaddr *)src, &sl) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static void resolve(struct lw_path *p, const struct nvmf_path_opts *o, struct nl_cache *links,
		    struct nl_cache *addrs)
{
	struct lw_iface *w = &p->w;
	struct sockaddr_storage ss;
	socklen_t sl;
	const char *how;

	if (o->host_iface[0]) {
		w->ifindex = rtnl_link_name2i(links, o->host_iface);
		how = "host_iface";
	} else if (o->host_traddr[0]) {
		how = "host_traddr";
		if (numeric(o->host_traddr, &ss, &sl) == 0) {
			set_addr(w, &ss);
			w->ifindex = owner_of(addrs, w->family, w->addr);
		}
	} else {
		how = "route";
		int ret = route_source(o->traddr, &ss);
		if (ret == 0) {
			set_addr(w, &ss);
			w->ifindex = owner_of(addrs, w->family, w->addr);
		}
	}
	if (w->ifindex <= 0) {
		w->ifindex = 0;
		w->has_addr = false;
		log_warn("linkwatch: target %s path %u: no local interface found (by %s) for %s; "
			 "only keep-alive detects its failures", mp_target_name(p->t), p->idx, how,
			 o->traddr);
		return;
	}
	struct rtnl_link *l = rtnl_link_get(links, w->ifindex);
	if (l) {
		snprintf(w->name, sizeof(w->name), "%s", rtnl_link_get_name(l));
		w->link_up = lw_link_usable(rtnl_link_get_flags(l), rtnl_link_get_operstate(l));
		rtnl_link_put(l);
	}
	if (w->has_addr)
		w->addr_present = owner_of(addrs, w->family, w->addr) == w->ifindex;
	log_info("linkwatch: target %s path %u: local interface %s (by %s), %s",
		 mp_target_name(p->t), p->idx, w->name, how, lw_usable(w) ? "up" : "down");
}

/* Among the paths from first on (one target's). */
static void warn_mtu(struct linkwatch *lw, size_t first, struct nl_cache *links)
{
	for (size_t i = first; i < lw->nr_paths; i++) {
		struct lw_path *a = &lw->paths[i];
		if (!a->w.ifindex)
			continue;
		for (size_t j = i + 1; j < lw->nr_paths; j++) {
			struct lw_path *b = &lw->paths[j];
			if (b->t != a->t || !b->w.ifindex || b->w.ifindex == a->w.ifindex)
				continue;
			struct rtnl_link *la = rtnl_link_get(links, a->w.ifindex);
			struct rtnl_link *lb = rtnl_link_get(links, b->w.ifindex);
			unsigned ma = la ? rtnl_link_get_mtu(la) : 0, mb = lb ? rtnl_link_get_mtu(lb) : 0;
			if (la && lb && ma != mb)
				log_warn("linkwatch: target %s: path %u's interface %s has MTU %u, "
					 "path %u's %s has %u; I/O sizes and latency will differ "
					 "between the paths",
					 mp_target_name(a->t), a->idx, a->w.name, ma, b->idx,
					 b->w.name, mb);
			if (la)
				rtnl_link_put(la);
			if (lb)
				rtnl_link_put(lb);
		}
	}
}

static void lw_arm(struct linkwatch *lw);

static void lw_readable(struct reactor_op *op, int res, uint32_t flags)
{
	struct linkwatch *lw = container_of(op, struct linkwatch, op);
	int ret;

	(void)flags;
	if (res == -ECANCELED)
		return;
	while ((ret = nl_recvmsgs_report(lw->sk, lw->cb)) > 0)
		;
	if (ret < 0 && ret != -NLE_AGAIN)
		/* Mostly ENOBUFS: events were lost; later ones still count,
		 * and keep-alive still covers what was missed. */
		log_warn("linkwatch: netlink: %s", nl_geterror(ret));
	lw_arm(lw);
}

static void lw_arm(struct linkwatch *lw)
{
	reactor_poll_fd(lw->r, &lw->op, nl_socket_get_fd(lw->sk), POLLIN);
}

int linkwatch_start(struct reactor *r, struct linkwatch **out)
{
	struct linkwatch *lw = calloc(1, sizeof(*lw));
	int ret;

	if (!lw)
		return -ENOMEM;
	lw->r = r;
	lw->op.fn = lw_readable;
	lw->sk = nl_socket_alloc();
	if (!lw->sk) {
		free(lw);
		return -ENOMEM;
	}
	nl_socket_disable_seq_check(lw->sk);
	nl_socket_modify_cb(lw->sk, NL_CB_VALID, NL_CB_CUSTOM, lw_msg, lw);
	/* The groups are joined before any target's state is read
	 * (linkwatch_add), so that no change falls between the two. */
	if ((ret = nl_connect(lw->sk, NETLINK_ROUTE)) < 0 ||
	    (ret = nl_socket_add_memberships(lw->sk, RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR,
					     RTNLGRP_IPV6_IFADDR, 0)) < 0 ||
	    (ret = nl_socket_set_nonblocking(lw->sk)) < 0) {
		log_warn("linkwatch: netlink: %s; link changes are not watched", nl_geterror(ret));
		nl_socket_free(lw->sk);
		free(lw);
		return -EIO;
	}
	lw->cb = nl_socket_get_cb(lw->sk);
	lw_arm(lw);
	*out = lw;
	return 0;
}

int linkwatch_add(struct linkwatch *lw, struct mp_target *t)
{
	struct nl_cache *links = NULL, *addrs = NULL;
	struct mp_path_info pi[MP_MAX_PATHS];
	struct nl_sock *q;
	unsigned np;
	size_t first;

	if (!lw || !t)
		return 0;
	np = mp_target_paths(t, pi, MP_MAX_PATHS);
	struct lw_path *paths = realloc(lw->paths, (lw->nr_paths + np + 1) * sizeof(*paths));
	if (!paths)
		return -ENOMEM;
	lw->paths = paths;
	q = nl_socket_alloc();
	if (!q || nl_connect(q, NETLINK_ROUTE) < 0 ||
	    rtnl_link_alloc_cache(q, AF_UNSPEC, &links) < 0 ||
	    rtnl_addr_alloc_cache(q, &addrs) < 0) {
		log_warn("linkwatch: target %s: cannot read the interfaces; its links are not "
			 "watched", mp_target_name(t));
		if (links)
			nl_cache_free(links);
		if (q)
			nl_socket_free(q);
		return -EIO;
	}
	nl_socket_free(q);
	first = lw->nr_paths;
	for (unsigned j = 0; j < np; j++) {
		struct lw_path *p = &lw->paths[lw->nr_paths++];
		memset(p, 0, sizeof(*p));
		p->t = t;
		p->idx = j;
		resolve(p, pi[j].opts, links, addrs);
	}
	warn_mtu(lw, first, links);
	nl_cache_free(links);
	nl_cache_free(addrs);
	return 0;
}

void linkwatch_remove(struct linkwatch *lw, struct mp_target *t)
{
	size_t k = 0;

	if (!lw)
		return;
	for (size_t i = 0; i < lw->nr_paths; i++)
		if (lw->paths[i].t != t)
			lw->paths[k++] = lw->paths[i];
	lw->nr_paths = k;
}

void linkwatch_free(struct linkwatch *lw)
{
	if (!lw)
		return;
	nl_cb_put(lw->cb);
	nl_socket_free(lw->sk);
	free(lw->paths);
	free(lw);
}
