/* linkwatch: rtnetlink message -> path event, on messages built here the
 * way the kernel lays them out (header, ifinfomsg/ifaddrmsg, attributes). */
#include "gateway/linkwatch.h"

#include <arpa/inet.h>
#include <check.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>

struct msgbuf {
	union {
		struct nlmsghdr h;
		uint8_t b[512];
	};
};

static void put_attr(struct msgbuf *m, unsigned type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)(m->b + NLMSG_ALIGN(m->h.nlmsg_len));

	a->rta_type = (unsigned short)type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	m->h.nlmsg_len = NLMSG_ALIGN(m->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* operstate < 0: no IFLA_OPERSTATE attribute. */
static struct msgbuf link_msg(unsigned type, int ifindex, unsigned flags, int operstate)
{
	struct msgbuf m;
	struct ifinfomsg *ifi;

	memset(&m, 0, sizeof(m));
	m.h.nlmsg_type = (unsigned short)type;
	m.h.nlmsg_len = NLMSG_LENGTH(sizeof(*ifi));
	ifi = NLMSG_DATA(&m.h);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	ifi->ifi_flags = flags;
	put_attr(&m, IFLA_IFNAME, "veth0", 6);
	if (operstate >= 0) {
		uint8_t o = (uint8_t)operstate;
		put_attr(&m, IFLA_OPERSTATE, &o, 1);
	}
	return m;
}

static struct msgbuf addr_msg(unsigned type, int family, int ifindex, const char *addr,
			      bool local_attr)
{
	struct msgbuf m;
	struct ifaddrmsg *ifa;
	uint8_t bin[16];
	size_t len = family == AF_INET ? 4 : 16;

	memset(&m, 0, sizeof(m));
	ck_assert_int_eq(inet_pton(family, addr, bin), 1);
	m.h.nlmsg_type = (unsigned short)type;
	m.h.nlmsg_len = NLMSG_LENGTH(sizeof(*ifa));
	ifa = NLMSG_DATA(&m.h);
	ifa->ifa_family = (uint8_t)family;
	ifa->ifa_index = (unsigned)ifindex;
	ifa->ifa_prefixlen = family == AF_INET ? 24 : 64;
	put_attr(&m, IFA_ADDRESS, bin, len);
	if (local_attr)
		put_attr(&m, IFA_LOCAL, bin, len);
	return m;
}

static enum lw_change apply(struct lw_iface *w, struct msgbuf m)
{
	return lw_apply(w, &m, m.h.nlmsg_len);
}

#define UP_FLAGS (IFF_UP | IFF_RUNNING | IFF_LOWER_UP)

static struct lw_iface up_iface(int ifindex)
{
	struct lw_iface w = { .ifindex = ifindex, .name = "veth0", .link_up = true };
	return w;
}

static struct lw_iface up_iface_addr(int ifindex, int family, const char *addr)
{
	struct lw_iface w = up_iface(ifindex);

	w.has_addr = w.addr_present = true;
	w.family = family;
	ck_assert_int_eq(inet_pton(family, addr, w.addr), 1);
	return w;
}

START_TEST(usable_rules)
{
	ck_assert(lw_link_usable(UP_FLAGS, IF_OPER_UP));
	ck_assert(lw_link_usable(UP_FLAGS, IF_OPER_UNKNOWN)); /* loopback */
	ck_assert(lw_link_usable(UP_FLAGS, -1));
	ck_assert(!lw_link_usable(IFF_UP, IF_OPER_UP)); /* no carrier */
	ck_assert(!lw_link_usable(IFF_RUNNING, IF_OPER_UP)); /* admin down */
	ck_assert(!lw_link_usable(UP_FLAGS, IF_OPER_DOWN));
	ck_assert(!lw_link_usable(UP_FLAGS, IF_OPER_LOWERLAYERDOWN));
	ck_assert(!lw_link_usable(UP_FLAGS, IF_OPER_DORMANT));
}
END_TEST

START_TEST(admin_down_then_up)
{
	struct lw_iface w = up_iface(7);

	/* `ip link set veth0 down`: IFF_UP cleared. */
	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 7, 0, IF_OPER_DOWN)), LW_DOWN);
	ck_assert(!w.link_up);
	/* The same state again: no second event. */
	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 7, 0, IF_OPER_DOWN)), LW_NONE);
	/* Up, but no carrier yet: still down. */
	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 7, IFF_UP, IF_OPER_LOWERLAYERDOWN)),
			 LW_NONE);
	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 7, UP_FLAGS, IF_OPER_UP)), LW_UP);
	ck_assert(w.link_up);
}
END_TEST

START_TEST(carrier_loss)
{
	struct lw_iface w = up_iface(3);

	/* The peer of a veth went down: we keep IFF_UP, lose RUNNING. */
	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 3, IFF_UP, IF_OPER_LOWERLAYERDOWN)),
			 LW_DOWN);
}
END_TEST

START_TEST(operstate_alone)
{
	struct lw_iface w = up_iface(3);

	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 3, UP_FLAGS, IF_OPER_DOWN)), LW_DOWN);
}
END_TEST

START_TEST(other_interface_ignored)
{
	struct lw_iface w = up_iface(3);

	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 4, 0, IF_OPER_DOWN)), LW_NONE);
	ck_assert_int_eq(apply(&w, link_msg(RTM_DELLINK, 4, 0, -1)), LW_NONE);
	ck_assert(w.link_up);
}
END_TEST

START_TEST(dellink)
{
	struct lw_iface w = up_iface(3);

	ck_assert_int_eq(apply(&w, link_msg(RTM_DELLINK, 3, UP_FLAGS, IF_OPER_UP)), LW_DOWN);
}
END_TEST

START_TEST(ipv4_address_removed_and_back)
{
	struct lw_iface w = up_iface_addr(5, AF_INET, "10.99.1.1");

	/* Another address of the same interface: nothing. */
	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET, 5, "10.99.1.2", true)),
			 LW_NONE);
	/* The same address on another interface: nothing. */
	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET, 6, "10.99.1.1", true)),
			 LW_NONE);
	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET, 5, "10.99.1.1", true)),
			 LW_DOWN);
	ck_assert_int_eq(apply(&w, addr_msg(RTM_NEWADDR, AF_INET, 5, "10.99.1.1", true)),
			 LW_UP);
}
END_TEST

START_TEST(ipv6_address_removed)
{
	struct lw_iface w = up_iface_addr(5, AF_INET6, "fd00:99::1");

	/* IPv4 messages never match an IPv6 path. */
	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET, 5, "10.0.0.1", true)), LW_NONE);
	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET6, 5, "fd00:99::1", false)),
			 LW_DOWN);
}
END_TEST

START_TEST(address_ignored_without_one)
{
	struct lw_iface w = up_iface(5); /* bound by host_iface: no address known */

	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET, 5, "10.99.1.1", true)),
			 LW_NONE);
	ck_assert(lw_usable(&w));
}
END_TEST

START_TEST(address_back_while_link_down)
{
	struct lw_iface w = up_iface_addr(5, AF_INET, "10.99.1.1");

	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 5, 0, IF_OPER_DOWN)), LW_DOWN);
	ck_assert_int_eq(apply(&w, addr_msg(RTM_DELADDR, AF_INET, 5, "10.99.1.1", true)),
			 LW_NONE);
	/* The address returns, the link does not: still down. */
	ck_assert_int_eq(apply(&w, addr_msg(RTM_NEWADDR, AF_INET, 5, "10.99.1.1", true)),
			 LW_NONE);
	ck_assert_int_eq(apply(&w, link_msg(RTM_NEWLINK, 5, UP_FLAGS, IF_OPER_UP)), LW_UP);
}
END_TEST

START_TEST(malformed_ignored)
{
	struct lw_iface w = up_iface(3);
	struct msgbuf m = link_msg(RTM_NEWLINK, 3, 0, IF_OPER_DOWN);

	/* Shorter than its header says. */
	ck_assert_int_eq(lw_apply(&w, &m, m.h.nlmsg_len - 1), LW_NONE);
	/* Too short for the ifinfomsg. */
	m.h.nlmsg_len = NLMSG_LENGTH(2);
	ck_assert_int_eq(lw_apply(&w, &m, m.h.nlmsg_len), LW_NONE);
	ck_assert_int_eq(lw_apply(&w, &m, 3), LW_NONE);
	/* An attribute running past the end is not read. */
	m = link_msg(RTM_NEWLINK, 3, UP_FLAGS, -1);
	struct rtattr *a = (struct rtattr *)(m.b + m.h.nlmsg_len);
	a->rta_type = IFLA_OPERSTATE;
	a->rta_len = 200;
	m.h.nlmsg_len += 8;
	ck_assert_int_eq(lw_apply(&w, &m, m.h.nlmsg_len), LW_NONE);
	ck_assert(w.link_up);
	/* Other message types. */
	m = link_msg(RTM_NEWROUTE, 3, 0, IF_OPER_DOWN);
	ck_assert_int_eq(apply(&w, m), LW_NONE);
	ck_assert(w.link_up);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("linkwatch");
	TCase *tc = tcase_create("decision");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, usable_rules);
	tcase_add_test(tc, admin_down_then_up);
	tcase_add_test(tc, carrier_loss);
	tcase_add_test(tc, operstate_alone);
	tcase_add_test(tc, other_interface_ignored);
	tcase_add_test(tc, dellink);
	tcase_add_test(tc, ipv4_address_removed_and_back);
	tcase_add_test(tc, ipv6_address_removed);
	tcase_add_test(tc, address_ignored_without_one);
	tcase_add_test(tc, address_back_while_link_down);
	tcase_add_test(tc, malformed_ignored);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
