/* Discovery controllers in the configuration (gateway/discovery_conf.c):
 * nvme-cli's discovery.conf lines in all their spellings, the errors that
 * name file:line, and the "discovery" list with its defaults. */
#include "gateway/discovery_conf.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int line(const char *l, struct gw_discovery *d, char *err)
{
	err[0] = 0;
	return discovery_conf_line(l, d, err, 256);
}

START_TEST(long_and_short_forms)
{
	struct gw_discovery d;
	char err[256];

	ck_assert_int_eq(line("--transport=tcp --traddr=192.168.1.10 --trsvcid=8009 "
			      "--host-traddr=192.168.1.2 --host-iface=eth0 "
			      "--hostnqn=nqn.2014-08.org.nvmexpress:uuid:x\n", &d, err), 1);
	ck_assert_int_eq(d.transport, NVMF_TR_TCP);
	ck_assert_str_eq(d.traddr, "192.168.1.10");
	ck_assert_str_eq(d.trsvcid, "8009");
	ck_assert_str_eq(d.host_traddr, "192.168.1.2");
	ck_assert_str_eq(d.host_iface, "eth0");
	ck_assert_str_eq(d.hostnqn, "nqn.2014-08.org.nvmexpress:uuid:x");
	ck_assert(d.persistent);
	ck_assert_int_eq(d.keep_alive_tmo, 30);
	discovery_entry_release(&d);

	/* Short forms, glued or apart, tabs, an option with no meaning here,
	 * a trailing comment. */
	ck_assert_int_eq(line("\t-t rdma -a10.0.0.1 -s 04420 -w 10.0.0.2\t-f ib0 -q nqn.h "
			      "-k 60 -i 4 --ctrl-loss-tmo=-1 -D -g # the array\n", &d, err), 1);
	ck_assert_int_eq(d.transport, NVMF_TR_RDMA);
	ck_assert_str_eq(d.traddr, "10.0.0.1");
	ck_assert_str_eq(d.trsvcid, "4420"); /* one spelling */
	ck_assert_str_eq(d.host_iface, "ib0");
	ck_assert_int_eq(d.keep_alive_tmo, 60);
	discovery_entry_release(&d);

	/* No port: left for the loader, which knows the transport's. */
	ck_assert_int_eq(line("-t tcp --traddr ::1", &d, err), 1);
	ck_assert_ptr_null(d.trsvcid);
	ck_assert_str_eq(d.traddr, "::1");
	discovery_entry_release(&d);
}
END_TEST

START_TEST(blank_and_comments)
{
	struct gw_discovery d;
	char err[256];

	ck_assert_int_eq(line("", &d, err), 0);
	ck_assert_int_eq(line("   \t\n", &d, err), 0);
	ck_assert_int_eq(line("# --transport=tcp --traddr=1.2.3.4", &d, err), 0);
	ck_assert_int_eq(line("  #x", &d, err), 0);
}
END_TEST

START_TEST(errors_say_what)
{
	static const struct {
		const char *line, *want;
	} cases[] = {
		{ "--traddr=1.2.3.4", "no --transport" },
		{ "-t tcp", "no --traddr" },
		{ "-t fc -a nn-0x1:pn-0x2", "not supported" },
		{ "-t nvme -a x", "expected tcp or rdma" },
		{ "-t tcp -a x -s 70000", "expected a port" },
		{ "-t tcp -a x -s", "needs a value" },
		{ "-t tcp -a x --bogus=1", "unknown option" },
		{ "-t tcp -a x -Z", "unknown option" },
		{ "-t tcp -a x stray", "not an option" },
		{ "-t tcp -a x --persistent=yes", "takes no value" },
		{ "-t tcp -a x -f averyveryverylongifname", "at most 15" },
		{ "-t tcp -a x -q host", "not an NQN" },
		{ "-t tcp -a x -S DHHC-1:00:nope:", "invalid secret" },
		{ "-t tcp -a x -k 0", "1..3600" },
		{ "-t tcp -a \x01", "not printable" },
	};
	struct gw_discovery d;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(line(cases[i].line, &d, err) == -EINVAL, "%s", cases[i].line);
		ck_assert_msg(strstr(err, cases[i].want), "%s: %s", cases[i].line, err);
		ck_assert_ptr_null(d.traddr); /* freed */
	}
	char big[5000];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	ck_assert_int_eq(line(big, &d, err), -EINVAL);
}
END_TEST

static char *load_errs(const char *conf_text, const char *dconf_text, struct gw_config **cfg,
		       int *rc, char *dpath)
{
	char path[64] = "/tmp/test_dconf.XXXXXX";
	char *text, *errs = NULL;
	size_t len = 0;
	int fd;

	strcpy(dpath, "/tmp/test_dconf_nvme.XXXXXX");
	fd = mkstemp(dpath);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, dconf_text, strlen(dconf_text)), (ssize_t)strlen(dconf_text));
	close(fd);
	ck_assert_int_gt(asprintf(&text, conf_text, dpath), 0);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	free(text);
	FILE *f = open_memstream(&errs, &len);
	*cfg = NULL;
	*rc = config_load(path, cfg, f);
	fclose(f);
	unlink(path);
	return errs;
}

START_TEST(config_list_and_file)
{
	struct gw_config *cfg;
	char dpath[64];
	int rc;
	char *errs = load_errs("discovery = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; },\n"
			       "  { transport = \"rdma\"; traddr = \"10.0.0.1\"; persistent = false;\n"
			       "    keep_alive_tmo = 10; trsvcid = 4421; } );\n"
			       "discovery_conf = \"%s\";\n",
			       "# nvme-cli's\n\n-t tcp -a 127.0.0.2 -s 8010\n", &cfg, &rc, dpath);
	ck_assert_msg(rc == 0, "%s", errs);
	ck_assert_uint_eq(cfg->discovery.nr, 3);
	ck_assert_str_eq(cfg->discovery.ctrls[0].trsvcid, "8009"); /* tcp's default */
	ck_assert(cfg->discovery.ctrls[0].persistent);
	ck_assert_ptr_null(cfg->discovery.ctrls[0].src_file);
	ck_assert_str_eq(cfg->discovery.ctrls[1].trsvcid, "4421");
	ck_assert(!cfg->discovery.ctrls[1].persistent);
	ck_assert_int_eq(cfg->discovery.ctrls[1].keep_alive_tmo, 10);
	ck_assert_str_eq(cfg->discovery.ctrls[2].traddr, "127.0.0.2");
	ck_assert_str_eq(cfg->discovery.ctrls[2].src_file, dpath);
	ck_assert_int_eq(cfg->discovery.ctrls[2].src_line, 3);
	config_free(cfg);
	free(errs);
	unlink(dpath);
}
END_TEST

START_TEST(config_errors_name_file_and_line)
{
	struct gw_config *cfg;
	char dpath[64], want[128];
	int rc;
	char *errs = load_errs("discovery = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; },\n"
			       "  { transport = \"tcp\"; traddr = \"127.0.0.1\"; trsvcid = \"8009\"; },\n"
			       "  { transport = \"fc\"; traddr = \"x\"; },\n"
			       "  { traddr = \"x\"; bogus = 1; } );\n"
			       "discovery_conf = \"%s\";\n",
			       "-t tcp -a 127.0.0.3\n-t tcp --wat\n\n-t tcp -a 127.0.0.3 -s 8009\n",
			       &cfg, &rc, dpath);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strstr(errs, ":2: discovery controller tcp 127.0.0.1:8009 listed twice"),
		      "%s", errs);
	ck_assert_msg(strstr(errs, ":3: discovery[2].transport"), "%s", errs);
	ck_assert_msg(strstr(errs, ":4: unknown key 'bogus' in discovery[3]"), "%s", errs);
	ck_assert_msg(strstr(errs, "missing required key 'transport'"), "%s", errs);
	snprintf(want, sizeof(want), "%s:2: --wat: unknown option", dpath);
	ck_assert_msg(strstr(errs, want), "%s", errs);
	snprintf(want, sizeof(want), "%s:4: discovery controller tcp 127.0.0.3:8009 listed twice",
		 dpath);
	ck_assert_msg(strstr(errs, want), "%s", errs);
	free(errs);
	unlink(dpath);

	/* Not a regular file (a device would never end). */
	errs = load_errs("discovery_conf = \"/dev/zero\"; # %s\n", "", &cfg, &rc, dpath);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(errs, ":1: discovery_conf: cannot open /dev/zero: not a regular file"),
		      "%s", errs);
	free(errs);
	unlink(dpath);

	/* A named file that is not there. */
	errs = load_errs("discovery_conf = \"%s.gone\";\n", "", &cfg, &rc, dpath);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(errs, ":1: discovery_conf: cannot open"), "%s", errs);
	free(errs);
	unlink(dpath);
}
END_TEST

#define KEY "NVMeTLSkey-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"

/* nvme-cli's TLS options: --tls, --tls_key (the key inline, or here a key
 * file); what would change the key or channel in a way the gateway cannot
 * follow is refused, never ignored; a key is never echoed. */
START_TEST(tls_options)
{
	struct gw_discovery d;
	char err[256];

	ck_assert_int_eq(line("-t tcp -a 10.0.0.1 --tls --tls_key=" KEY, &d, err), 1);
	ck_assert(d.tls);
	ck_assert(d.tls_key_inline);
	ck_assert_ptr_null(d.tls_key_file);
	ck_assert_uint_ne(d.tls_key.hash, 0);
	discovery_entry_release(&d);
	ck_assert_int_eq(line("-t tcp -a 10.0.0.1 --tls --tls-key /etc/k", &d, err), 1);
	ck_assert(!d.tls_key_inline);
	ck_assert_str_eq(d.tls_key_file, "/etc/k");
	discovery_entry_release(&d);

	static const char *const bad[][2] = {
		{ "-t tcp -a x --tls --tls_key=12345", "keyring serial number is not supported" },
		{ "-t tcp -a x --tls --tls_key=k", "absolute path" },
		{ "-t tcp -a x --tls --keyring=.nvme", "--keyring: not supported" },
		{ "-t tcp -a x --tls --tls_key_identity=NVMe0R01", "not supported" },
		{ "-t tcp -a x --concat", "--concat: not supported" },
		{ "-t tcp -a x --tls=1", "takes no value" },
		{ "-t tcp -a x --tls --tls_key=NVMeTLSkey-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYX:",
		  "not a valid NVMe TLS key" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(line(bad[i][0], &d, err) == -EINVAL, "%s", bad[i][0]);
		ck_assert_msg(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
		ck_assert_msg(!strstr(err, "NVMeTLSkey-1:01:AAEC"), "key echoed: %s", err);
	}

	struct gw_config *cfg;
	char dpath[64], want[160];
	int rc;
	char *errs = load_errs("discovery = ( { transport = \"tcp\"; traddr = \"127.0.0.1\";\n"
			       "    tls = true; },\n"
			       "  { transport = \"rdma\"; traddr = \"10.0.0.1\"; tls = true;\n"
			       "    tls_key_file = \"/nonexistent/k\"; },\n"
			       "  { transport = \"tcp\"; traddr = \"10.0.0.2\";\n"
			       "    tls_key_file = \"/nonexistent/k\"; } );\n"
			       "discovery_conf = \"%s\";\n",
			       "-t tcp -a 127.0.0.3 --tls\n-t tcp -a 127.0.0.4 --tls_key=" KEY "\n"
			       "-t tcp -a 127.0.0.5 --tls --tls_key=/nonexistent/k\n"
			       "-t tcp -a 127.0.0.6 --tls --tls_key=" KEY "\n",
			       &cfg, &rc, dpath);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(errs, ":2: discovery[0]: tls = true needs tls_key_file"), "%s", errs);
	ck_assert_msg(strstr(errs, ":3: discovery[1]: tls is for tcp controllers"), "%s", errs);
	ck_assert_msg(strstr(errs, ":6: discovery[2]: tls_key_file is set but tls is not true"),
		      "%s", errs);
	snprintf(want, sizeof(want), "%s:1: discovery_conf: tls = true needs tls_key_file", dpath);
	ck_assert_msg(strstr(errs, want), "%s", errs);
	snprintf(want, sizeof(want), "%s:2: discovery_conf: tls_key_file is set but tls", dpath);
	ck_assert_msg(strstr(errs, want), "%s", errs);
	snprintf(want, sizeof(want), "%s:3: discovery_conf.tls_key_file: ", dpath);
	ck_assert_msg(strstr(errs, want), "%s", errs);
	snprintf(want, sizeof(want), "%s:4:", dpath);
	ck_assert_msg(!strstr(errs, want), "%s", errs); /* a good line */
	ck_assert_msg(!strstr(errs, "NVMeTLSkey"), "key echoed: %s", errs);
	free(errs);
	unlink(dpath);

	/* The inline key from a file others may read: refused. */
	errs = load_errs("discovery_conf = \"%s\";\n", "-t tcp -a 127.0.0.6 --tls --tls_key=" KEY "\n",
			 &cfg, &rc, dpath);
	ck_assert_msg(rc == 0, "%s", errs);
	ck_assert(cfg->discovery.ctrls[0].tls);
	ck_assert_uint_ne(cfg->discovery.ctrls[0].tls_key.hash, 0);
	config_free(cfg);
	free(errs);
	ck_assert_int_eq(chmod(dpath, 0644), 0);
	char *text;
	ck_assert_int_gt(asprintf(&text, "discovery_conf = \"%s\";\n", dpath), 0);
	char path[64] = "/tmp/test_dconf.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	free(text);
	size_t len = 0;
	errs = NULL;
	FILE *f = open_memstream(&errs, &len);
	rc = config_load(path, &cfg, f);
	fclose(f);
	unlink(path);
	unlink(dpath);
	ck_assert_int_eq(rc, -EINVAL);
	snprintf(want, sizeof(want), "%s:1: %s holds a key or secret", dpath, dpath);
	ck_assert_msg(strstr(errs, want), "%s", errs);
	free(errs);

	/* Review: a later --tls_key=FILE took the inline key's line out of the
	 * check, and errors echoed whole words, keys included. */
	char kpath[64] = "/tmp/test_dconf_key.XXXXXX";
	int kfd = mkstemp(kpath);
	ck_assert_int_ge(kfd, 0);
	ck_assert_int_eq(write(kfd, KEY "\n", strlen(KEY) + 1), (ssize_t)strlen(KEY) + 1);
	close(kfd);
	char *line2;
	ck_assert_int_gt(asprintf(&line2, "-t tcp -a 127.0.0.6 --tls --tls_key=" KEY " --tls_key=%s\n",
				  kpath), 0);
	errs = load_errs("discovery_conf = \"%s\";\n", line2, &cfg, &rc, dpath);
	ck_assert_msg(rc == 0, "%s", errs); /* private: fine */
	config_free(cfg);
	free(errs);
	ck_assert_int_eq(chmod(dpath, 0644), 0);
	ck_assert_int_gt(asprintf(&text, "discovery_conf = \"%s\";\n", dpath), 0);
	strcpy(path, "/tmp/test_dconf.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	free(text);
	errs = NULL;
	f = open_memstream(&errs, &len);
	rc = config_load(path, &cfg, f);
	fclose(f);
	unlink(path);
	unlink(dpath);
	unlink(kpath);
	free(line2);
	ck_assert_msg(rc == -EINVAL, "an inline key in a readable file, then a key file: accepted");
	ck_assert_msg(strstr(errs, "holds a key or secret"), "%s", errs);
	free(errs);

	static const char *const leaky[] = {
		"-t tcp -a 127.0.0.6 --tls=" KEY "\n",
		"-t tcp -a 127.0.0.6 --tls " KEY "\n",
		"-t tcp -a 127.0.0.6 --tls_psk=" KEY "\n",
	};
	for (size_t i = 0; i < sizeof(leaky) / sizeof(leaky[0]); i++) {
		errs = load_errs("discovery_conf = \"%s\";\n", leaky[i], &cfg, &rc, dpath);
		unlink(dpath);
		ck_assert_msg(rc == -EINVAL, "%s: accepted", leaky[i]);
		ck_assert_msg(!strstr(errs, "NVMeTLSkey-"), "the key is echoed: %s", errs);
		free(errs);
	}
}
END_TEST

/* A target without paths: allowed with discovery (it takes the paths a
 * log lists), refused without. */
START_TEST(pathless_target_needs_discovery)
{
	struct gw_config *cfg;
	char dpath[64];
	int rc;
	char *errs = load_errs("targets = ( { name = \"t\"; subnqn = \"nqn.x\"; } );\n"
			       "discovery_conf = \"%s\";\n",
			       "-t tcp -a 127.0.0.1\n", &cfg, &rc, dpath);
	ck_assert_msg(rc == 0, "%s", errs);
	ck_assert_uint_eq(cfg->targets[0].nr_paths, 0);
	config_free(cfg);
	free(errs);
	unlink(dpath);

	errs = load_errs("targets = ( { name = \"t\"; subnqn = \"nqn.x\"; } );\n# %s\n", "",
			 &cfg, &rc, dpath);
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_msg(strstr(errs, ":1: targets[0]: missing required key 'paths'"), "%s", errs);
	free(errs);
	unlink(dpath);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("discovery_conf");
	TCase *tc = tcase_create("conf");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, long_and_short_forms);
	tcase_add_test(tc, blank_and_comments);
	tcase_add_test(tc, errors_say_what);
	tcase_add_test(tc, config_list_and_file);
	tcase_add_test(tc, config_errors_name_file_and_line);
	tcase_add_test(tc, pathless_target_needs_discovery);
	tcase_add_test(tc, tls_options);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
