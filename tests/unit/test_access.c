#include "gateway/base/access.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
	ck_assert(gw_access_refused(&a, sv[0], "test", "pair"));
	ck_assert_int_eq(read(sv[1], &c, 1), 0);
	close(sv[1]);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	a.uids[0] = getuid();
	ck_assert(!gw_access_refused(&a, sv[0], "test", "pair"));
	ck_assert(!gw_access_refused(NULL, sv[0], "test", "pair"));
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	close(sv[0]);
	close(sv[1]);
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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
