#include "gateway/base/access.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The refusals' rate limit of a listener (tests/unit/test_log.c tests it). */
static struct log_rl rl;

#include "unit_netns.h"

static void addr_of(const char *s, uint8_t out[16])
{
	struct in_addr a4;

	memset(out, 0, 16);
	if (inet_pton(AF_INET, s, &a4) == 1) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &a4, 4);
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, s, out), 1);
	}
}

static bool match(const char *cidr, const char *addr)
{
	struct gw_cidr c;
	uint8_t a[16];

	ck_assert_msg(gw_cidr_parse(cidr, &c) == 0, "parse %s", cidr);
	addr_of(addr, a);
	return gw_cidr_match(&c, a);
}

START_TEST(v4_prefixes)
{
	ck_assert(match("127.0.0.2", "127.0.0.2"));
	ck_assert(!match("127.0.0.2", "127.0.0.3"));
	ck_assert(!match("127.0.0.2/32", "127.0.0.1"));
	ck_assert(match("10.0.0.0/8", "10.255.1.2"));
	ck_assert(!match("10.0.0.0/8", "11.0.0.0"));
	ck_assert(match("192.168.4.0/22", "192.168.7.255"));
	ck_assert(!match("192.168.4.0/22", "192.168.8.0"));
	ck_assert(match("0.0.0.0/0", "203.0.113.9"));
	/* A v4 rule never matches a real v6 peer, even /0. */
	ck_assert(!match("0.0.0.0/0", "::1"));
}
END_TEST

START_TEST(v6_and_mapped)
{
	ck_assert(match("::1", "::1"));
	ck_assert(!match("::1", "::2"));
	ck_assert(match("fd00::/8", "fdff:1::5"));
	ck_assert(!match("fd00::/8", "fe80::1"));
	ck_assert(match("2001:db8::/33", "2001:db8:7fff::1"));
	ck_assert(!match("2001:db8::/33", "2001:db8:8000::1"));
	/* addr_of maps v4 the way an accept on a v6 socket reports it. */
	ck_assert(match("127.0.0.0/8", "::ffff:127.0.0.9"));
	ck_assert(match("::ffff:127.0.0.0/104", "127.1.2.3"));
	ck_assert(match("::/0", "127.0.0.1"));
}
END_TEST

START_TEST(bad_input)
{
	static const char *const bad[] = {
		"", "/8", "10.0.0.0/", "10.0.0.0/33", "::1/129", "10.0.0.1/8", "fd00::1/8",
		"10.0.0.0/8x", "10.0.0.0/-1", "10.0.0.0/ 8", "localhost", "1.2.3", "10.0.0.0/08a",
	};
	struct gw_cidr c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(gw_cidr_parse(bad[i], &c) == -EINVAL, "took \"%s\"", bad[i]);
}
END_TEST

START_TEST(equality)
{
	struct gw_access a = { 0 }, b = { 0 };

	ck_assert(gw_access_eq(&a, &b));
	a.nr_uids = b.nr_uids = 1;
	a.uids[0] = 0;
	b.uids[0] = 1000;
	ck_assert(!gw_access_eq(&a, &b));
	b.uids[0] = 0;
	b.uids[1] = 55; /* beyond nr_uids: not part of the rules */
	ck_assert(gw_access_eq(&a, &b));
	ck_assert_int_eq(gw_cidr_parse("10.0.0.0/8", &a.cidrs[0]), 0);
	ck_assert_int_eq(gw_cidr_parse("10.0.0.0/9", &b.cidrs[0]), 0);
	a.nr_cidrs = b.nr_cidrs = 1;
	ck_assert(!gw_access_eq(&a, &b));
	a.mode = 0660;
	ck_assert(!gw_access_eq(&a, &b));
}
END_TEST

/* A refused Unix peer: closed (the other end reads EOF), true returned;
 * an allowed one is left open. */
START_TEST(unix_peer_refused_and_allowed)
{
	int sv[2];
	struct gw_access a = { .nr_uids = 1, .uids = { getuid() + 1 } };
	char c;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert(gw_access_refused(&a, sv[0], "test", "pair", &rl));
	ck_assert_int_eq(read(sv[1], &c, 1), 0);
	close(sv[1]);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	a.uids[0] = getuid();
	ck_assert(!gw_access_refused(&a, sv[0], "test", "pair", &rl));
	ck_assert(!gw_access_refused(NULL, sv[0], "test", "pair", &rl));
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* A member of many supplementary groups (more than 64) is allowed by the
 * 90th: SO_PEERGROUPS is read whole.  It used to go into 64 entries; the
 * kernel's ERANGE made only the primary group count, and the member was
 * refused.  setgroups needs root: in a child of ours, whose groups these
 * are, on a socketpair (its credentials are the creator's). */
START_TEST(unix_peer_many_groups)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		gid_t g[100];
		int sv[2];
		struct gw_access a = { .nr_gids = 1, .gids = { 50089 } };

		for (unsigned i = 0; i < 100; i++)
			g[i] = 50000 + i;
		if (setgroups(100, g) < 0 || setgid(50200) < 0)
			_exit(2);
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
			_exit(3);
		if (gw_access_refused(&a, sv[0], "test", "pair", &rl))
			_exit(1);
		a.gids[0] = 50100; /* not one of them: still refused */
		_exit(gw_access_refused(&a, sv[0], "test", "pair", &rl) ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "child status %d (1: refused by its 90th group, 2: setgroups failed)", st);
}
END_TEST

/* A TCP connection to ADDR (AF_INET or AF_INET6 text, port 0 = any) from
 * a socket of the same family: both ends, connected and accepted. */
static void tcp_pair(const char *addr, int fds[2])
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fam, l, one = 0;

	if (strchr(addr, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		fam = a->sin6_family = AF_INET6;
		ck_assert_int_eq(inet_pton(AF_INET6, addr, &a->sin6_addr), 1);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		fam = a->sin_family = AF_INET;
		ck_assert_int_eq(inet_pton(AF_INET, addr, &a->sin_addr), 1);
		len = sizeof(*a);
	}
	l = socket(fam, SOCK_STREAM, 0);
	ck_assert_int_ge(l, 0);
	if (fam == AF_INET6) /* a mapped IPv4 address needs a dual-stack socket */
		ck_assert_int_eq(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)), 0);
	ck_assert_msg(bind(l, (struct sockaddr *)&ss, len) == 0, "bind %s: %s", addr, strerror(errno));
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&ss, &len), 0);
	fds[0] = socket(fam, SOCK_STREAM, 0);
	ck_assert_int_ge(fds[0], 0);
	if (fam == AF_INET6)
		ck_assert_int_eq(setsockopt(fds[0], IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)), 0);
	ck_assert_msg(connect(fds[0], (struct sockaddr *)&ss, len) == 0, "connect %s: %s", addr,
		      strerror(errno));
	fds[1] = accept(l, NULL, NULL);
	ck_assert_int_ge(fds[1], 0);
	close(l);
}

static bool both_local(const char *addr)
{
	int fds[2];
	bool a, b;

	tcp_pair(addr, fds);
	a = gw_peer_is_local(fds[0]);
	b = gw_peer_is_local(fds[1]);
	close(fds[0]);
	close(fds[1]);
	ck_assert_msg(a == b, "%s: the two ends disagree", addr);
	return a;
}

/* Loopback peers are local in every spelling; a Unix peer is not a TCP one. */
START_TEST(peer_local_loopback)
{
	int sv[2];

	ck_assert(both_local("127.0.0.1"));
	ck_assert(both_local("127.0.0.2"));
	ck_assert(both_local("::ffff:127.0.0.1"));
	ck_assert(both_local("::1"));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert(!gw_peer_is_local(sv[0]));
	close(sv[0]);
	close(sv[1]);
	ck_assert(!gw_peer_is_local(-1));
}
END_TEST

/* A client that dialled one of the host's own (non-loopback) addresses:
 * local too.  One that bound another of them is taken for remote (its
 * replies are spliced, as before gw_peer_is_local): the one TCP peer
 * these tests can make that is not local by the rule.  In a network
 * namespace of the test's own, its loopback device holding 10.200.0.1
 * and .2: no other host is reachable. */
START_TEST(peer_local_own_address)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l, c, s;

	ck_assert_msg(unit_netns_enter(), "a network namespace: %s", strerror(errno));
	ck_assert_msg(unit_netns_add_v4("10.200.0.1") && unit_netns_add_v4("10.200.0.2"),
		      "addresses on lo: %s", strerror(errno));
	ck_assert(both_local("10.200.0.1"));

	inet_pton(AF_INET, "10.200.0.1", &a.sin_addr);
	l = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, len), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in from = { .sin_family = AF_INET };
	inet_pton(AF_INET, "10.200.0.2", &from.sin_addr);
	ck_assert_int_eq(bind(c, (struct sockaddr *)&from, sizeof(from)), 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, len), 0);
	s = accept(l, NULL, NULL);
	ck_assert_int_ge(s, 0);
	ck_assert(!gw_peer_is_local(s));
	ck_assert(!gw_peer_is_local(c));
	close(s);
	close(c);
	close(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("access");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, v4_prefixes);
	tcase_add_test(tc, v6_and_mapped);
	tcase_add_test(tc, bad_input);
	tcase_add_test(tc, equality);
	tcase_add_test(tc, unix_peer_refused_and_allowed);
	tcase_add_test(tc, peer_local_loopback);
	if (geteuid() == 0)
		tcase_add_test(tc, unix_peer_many_groups);
	else
		printf("SKIP access/unix_peer_many_groups: setgroups needs root\n");
	if (unit_netns_possible())
		tcase_add_test(tc, peer_local_own_address);
	else
		printf("SKIP access/peer_local_own_address: no network namespace of our own here "
		       "(needs root or user namespaces)\n");
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
