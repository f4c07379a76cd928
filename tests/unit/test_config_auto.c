/* auto_export policies: template expansion, NQN shortening, glob and
 * nsid matching, and the load-time checks (file:line on an unknown %x). */
#include "gateway/config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NQN "nqn.2014-08.org.example:array:sub-1"

static int load(const char *text, struct gw_config **cfg, char *errs, size_t len)
{
	char path[] = "/tmp/test_config_auto.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fmemopen(errs, len, "w");

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(f);
	memset(errs, 0, len);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	*cfg = NULL;
	int rc = config_load(path, cfg, f);
	fclose(f);
	unlink(path);
	return rc;
}

START_TEST(expand_templates)
{
	char out[128];
	const char *bad = NULL;

	ck_assert_int_eq(config_auto_expand("%n-%i", NQN, 7, "t1", out, sizeof(out), &bad), 0);
	ck_assert_str_eq(out, "sub-1-7");
	ck_assert_int_eq(config_auto_expand("unix:/run/%t/%n_%i.sock", NQN, 12, "tgt", out,
					    sizeof(out), &bad), 0);
	ck_assert_str_eq(out, "unix:/run/tgt/sub-1_12.sock");
	ck_assert_int_eq(config_auto_expand("100%% %i", NQN, 1, "t", out, sizeof(out), &bad), 0);
	ck_assert_str_eq(out, "100% 1");
	ck_assert_int_eq(config_auto_expand("a%xb", NQN, 1, "t", out, sizeof(out), &bad),
			 -EINVAL);
	ck_assert_ptr_nonnull(bad);
	ck_assert_int_eq(bad[1], 'x');
	/* A lone % at the end is unknown too. */
	ck_assert_int_eq(config_auto_expand("a%", NQN, 1, "t", out, sizeof(out), &bad), -EINVAL);
	ck_assert_int_eq(config_auto_expand("%n%n%n", NQN, 1, "t", out, 8, &bad), -ENAMETOOLONG);
	ck_assert_int_lt(strlen(out), 8);
}
END_TEST

START_TEST(nqn_short)
{
	char out[64];

	config_auto_nqn_short(NQN, out, sizeof(out));
	ck_assert_str_eq(out, "sub-1");
	/* Characters a name may not hold become '_'. */
	config_auto_nqn_short("nqn.2014-08.org.example:a/b c+d", out, sizeof(out));
	ck_assert_str_eq(out, "a_b_c_d");
	/* No last component: the whole NQN, sanitized. */
	config_auto_nqn_short("nqn.2014-08.org.example:", out, sizeof(out));
	ck_assert_str_eq(out, "nqn.2014-08.org.example_");
	config_auto_nqn_short("nqn.x", out, 4);
	ck_assert_str_eq(out, "nqn");
}
END_TEST

START_TEST(glob_and_nsid)
{
	struct gw_auto_export p = { .subnqn = "nqn.2014-08.org.example:*", .nsid = 0 };

	ck_assert(config_auto_match(&p, NQN, 1));
	ck_assert(config_auto_match(&p, NQN, 99));
	ck_assert(!config_auto_match(&p, "nqn.2014-08.org.other:sub", 1));
	p.nsid = 2;
	ck_assert(!config_auto_match(&p, NQN, 1));
	ck_assert(config_auto_match(&p, NQN, 2));
	p.subnqn = "nqn.2014-08.org.example:array:sub-[0-9]";
	ck_assert(config_auto_match(&p, NQN, 2));
	p.subnqn = "nqn.2014-08.org.example:array:sub-?";
	ck_assert(config_auto_match(&p, NQN, 2));
	p.subnqn = NQN;
	ck_assert(config_auto_match(&p, NQN, 2));
	ck_assert(!config_auto_match(&p, NQN "0", 2));
}
END_TEST

START_TEST(load_and_build)
{
	char errs[2048];
	struct gw_config *cfg, *one;
	char why[256];
	const char *text =
		"gateway = { reactors = 2; };\n"
		"auto_export = (\n"
		"  { subnqn = \"nqn.2014-08.org.example:array:*\"; nsid = 3; name = \"fixed-%i\";\n"
		"    nbd = { device = \"auto\"; }; read_only = true; qos = { iops = 100; bandwidth = \"1M\"; }; },\n"
		"  { subnqn = \"nqn.2014-08.org.example:*\"; name = \"%t-%n-%i\";\n"
		"    nbd = { listen = \"unix:/tmp/%n-%i.sock\"; }; fuse = true; }\n"
		");\n";

	ck_assert_msg(load(text, &cfg, errs, sizeof(errs)) == 0, "%s", errs);
	ck_assert_uint_eq(cfg->auto_export.nr, 2);
	ck_assert_int_eq(cfg->auto_export.v[0].nbd_device, GW_NBD_AUTO);
	ck_assert_int_eq(cfg->auto_export.v[0].nbd_connections, 1);
	ck_assert_uint_eq(cfg->auto_export.v[0].qos_bandwidth, 1 << 20);
	ck_assert_int_eq(cfg->auto_export.v[1].line, 5);
	/* First match wins: nsid 3 takes policy 0, the others policy 1. */
	ck_assert_int_eq(config_auto_find(cfg, NQN, 3), 0);
	ck_assert_int_eq(config_auto_find(cfg, NQN, 4), 1);
	ck_assert_int_eq(config_auto_find(cfg, "nqn.2019-01.org.other:x", 4), -1);

	struct gw_target t = { .name = "tg", .subnqn = NQN };
	ck_assert_int_eq(config_auto_build(cfg, 1, &t, 4, &one, why, sizeof(why)), 0);
	ck_assert_uint_eq(one->nr_exports, 1);
	ck_assert_str_eq(one->exports[0].name, "tg-sub-1-4");
	ck_assert_str_eq(one->exports[0].target_name, "tg");
	ck_assert_ptr_eq(one->exports[0].target, &t);
	ck_assert_uint_eq(one->exports[0].nsid, 4);
	ck_assert(one->exports[0].fuse);
	ck_assert_str_eq(one->exports[0].nbd.listen.path, "/tmp/sub-1-4.sock");
	config_free(one);

	struct gw_config *tc = config_auto_target(cfg, "sub-1", NQN, NULL);
	ck_assert_ptr_nonnull(tc);
	ck_assert_str_eq(tc->targets[0].name, "sub-1");
	ck_assert_uint_eq(tc->targets[0].nr_paths, 0);
	ck_assert_int_eq(tc->targets[0].nr_io_queues, 2);
	ck_assert_int_eq(tc->targets[0].ctrl_loss_tmo, 600);
	config_free(tc);
	config_free(cfg);
}
END_TEST

START_TEST(load_errors)
{
	char errs[2048];
	struct gw_config *cfg;

	/* An unknown %x, with the file's line. */
	ck_assert_int_eq(load("auto_export = (\n { subnqn = \"nqn.x:*\";\n name = \"%n-%q\";\n"
			      " fuse = true; } );\n", &cfg, errs, sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, ":3: auto_export[0].name: unknown template \"%q\""), "%s", errs);
	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"n%i\";\n"
			      " nbd = { listen = \"unix:/tmp/%z\"; }; } );\n", &cfg, errs,
			      sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, ":2: auto_export[0].nbd.listen: unknown template \"%z\""), "%s",
		      errs);
	/* One name for every namespace a glob matches. */
	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"same\"; fuse = true; } );\n",
			      &cfg, errs, sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, "is the same for every namespace"), "%s", errs);
	/* ... unless it can match one namespace only. */
	ck_assert_msg(load("auto_export = ( { subnqn = \"nqn.x:y\"; nsid = 1; name = \"same\"; fuse = true; } );\n",
			   &cfg, errs, sizeof(errs)) == 0, "%s", errs);
	config_free(cfg);
	/* Export keys that make no sense for a policy, unknown keys, no exporter. */
	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"%i\"; target = \"t\";\n"
			      " nbd = { device = \"/dev/nbd3\"; }; bogus = 1; } );\n", &cfg, errs,
			      sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, "a policy names no target"), "%s", errs);
	ck_assert_msg(strstr(errs, "a policy takes \"auto\""), "%s", errs);
	ck_assert_msg(strstr(errs, "unknown key 'bogus' in auto_export[0]"), "%s", errs);
	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"%i\"; } );\n", &cfg,
			      errs, sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, "has no nbd and no fuse"), "%s", errs);
	ck_assert_int_eq(load("auto_export = ( { name = \"%i\"; fuse = true; } );\n", &cfg, errs,
			      sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, "missing required key 'subnqn'"), "%s", errs);
	/* A name template whose result is not a name. */
	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"a b %i\"; fuse = true; } );\n",
			      &cfg, errs, sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, "use 1-64 characters"), "%s", errs);
	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"%i\";\n"
			      " nbd = { listen = \"tcp:10809\"; }; } );\n", &cfg, errs, sizeof(errs)),
			 -EINVAL);
	ck_assert_msg(strstr(errs, "a policy listens on \"unix:PATH\""), "%s", errs);
}
END_TEST

/* Review: %n of a subsystem "nqn...:.." is "..", an export name the FUSE
 * mount refuses (failing whole); a policy naming "." passed check too. */
START_TEST(dot_names_refused)
{
	char errs[2048], why[256];
	struct gw_config *cfg, *one = NULL;

	ck_assert_int_eq(load("auto_export = ( { subnqn = \"nqn.x:a\"; nsid = 1; name = \".\";\n"
			      " fuse = true; } );\n", &cfg, errs, sizeof(errs)), -EINVAL);
	ck_assert_msg(strstr(errs, ":1: auto_export[0].name: \".\" gives \".\": "), "%s", errs);
	ck_assert_msg(strstr(errs, "not \".\" or \"..\""), "%s", errs);
	ck_assert_msg(load("auto_export = ( { subnqn = \"nqn.x:*\"; name = \"%n\"; fuse = true; } );\n",
			   &cfg, errs, sizeof(errs)) == 0, "%s", errs);
	struct gw_target t = { .name = "tg", .subnqn = "nqn.x:.." };
	ck_assert_int_eq(config_auto_build(cfg, 0, &t, 1, &one, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_null(one);
	ck_assert_str_eq(why, "name template \"%n\" gives \"..\", not a valid export name");
	t.subnqn = "nqn.x:.";
	ck_assert_int_eq(config_auto_build(cfg, 0, &t, 1, &one, why, sizeof(why)), -EINVAL);
	t.subnqn = "nqn.x:..a";
	ck_assert_int_eq(config_auto_build(cfg, 0, &t, 1, &one, why, sizeof(why)), 0);
	ck_assert_str_eq(one->exports[0].name, "..a");
	config_free(one);
	config_free(cfg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config_auto");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, expand_templates);
	tcase_add_test(tc, nqn_short);
	tcase_add_test(tc, glob_and_nsid);
	tcase_add_test(tc, load_and_build);
	tcase_add_test(tc, load_errors);
	tcase_add_test(tc, dot_names_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
