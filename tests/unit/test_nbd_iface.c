/* The choice between the netlink and the ioctl interface of /dev/nbdN, on
 * a host without the nbd module: the choice itself, the configuration keys
 * (inheritance, errors at file:line), and attach through the reactor
 * taking the ioctl path when the family is absent (seen by the ioctl the
 * fake device refuses) or refusing a busy device before any ioctl. */
#include "gateway/config.h"
#include "gateway/config_diff.h"
#include "nbd/kdev.h"
#include "gateway/volume/volume.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

START_TEST(choice)
{
	ck_assert_int_eq(nbd_kdev_choose(NBD_IFACE_AUTO, true), NBD_IFACE_NETLINK);
	ck_assert_int_eq(nbd_kdev_choose(NBD_IFACE_AUTO, false), NBD_IFACE_IOCTL);
	ck_assert_int_eq(nbd_kdev_choose(NBD_IFACE_NETLINK, true), NBD_IFACE_NETLINK);
	ck_assert_int_eq(nbd_kdev_choose(NBD_IFACE_NETLINK, false), -ENODEV);
	ck_assert_int_eq(nbd_kdev_choose(NBD_IFACE_IOCTL, true), NBD_IFACE_IOCTL);
	ck_assert_int_eq(nbd_kdev_choose(NBD_IFACE_IOCTL, false), NBD_IFACE_IOCTL);
	ck_assert_str_eq(nbd_kdev_iface_name(NBD_IFACE_AUTO), "auto");
	ck_assert_str_eq(nbd_kdev_iface_name(NBD_IFACE_NETLINK), "netlink");
	ck_assert_str_eq(nbd_kdev_iface_name(NBD_IFACE_IOCTL), "ioctl");
	ck_assert_str_eq(nbd_kdev_iface_name(3), "?");
}
END_TEST

/* ---- configuration ------------------------------------------------------ */

#define CFG_HEAD                                                                    \
	"targets = ( { name = \"t1\"; subnqn = \"nqn.2026-01.org.example:t1\";\n"  \
	"  paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; } ); } );\n"

static int load(const char *text, char *path, struct gw_config **cfg, char **errs)
{
	size_t len;
	FILE *f;
	int fd, rc;

	strcpy(path, "/tmp/test_nbd_iface.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	f = open_memstream(errs, &len);
	ck_assert_ptr_nonnull(f);
	*cfg = NULL;
	rc = config_load(path, cfg, f);
	fclose(f);
	return rc;
}

START_TEST(config_inherits_and_overrides)
{
	static const char text[] = CFG_HEAD
		"gateway = { nbd_interface = \"ioctl\"; };\n"
		"exports = ( { name = \"e1\"; target = \"t1\"; nbd = { device = \"/dev/nbd0\"; }; },\n"
		"  { name = \"e2\"; target = \"t1\";\n"
		"    nbd = { device = \"auto\"; interface = \"netlink\"; }; },\n"
		"  { name = \"e3\"; target = \"t1\"; nbd = { device = \"auto\"; interface = \"auto\"; }; } );\n";
	struct gw_config *cfg;
	char path[64], *errs;

	ck_assert_int_eq(load(text, path, &cfg, &errs), 0);
	ck_assert_int_eq(cfg->nbd_interface, NBD_IFACE_IOCTL);
	ck_assert_int_eq(cfg->exports[0].nbd.iface, NBD_IFACE_IOCTL);
	ck_assert_int_eq(cfg->exports[1].nbd.iface, NBD_IFACE_NETLINK);
	ck_assert_int_eq(cfg->exports[2].nbd.iface, NBD_IFACE_AUTO);
	config_free(cfg);
	free(errs);
	unlink(path);
}
END_TEST

START_TEST(config_default_is_auto)
{
	static const char text[] = CFG_HEAD
		"exports = ( { name = \"e1\"; target = \"t1\"; nbd = { device = \"/dev/nbd0\"; }; } );\n";
	struct gw_config *cfg;
	char path[64], *errs;

	ck_assert_int_eq(load(text, path, &cfg, &errs), 0);
	ck_assert_int_eq(cfg->nbd_interface, NBD_IFACE_AUTO);
	ck_assert_int_eq(cfg->exports[0].nbd.iface, NBD_IFACE_AUTO);
	config_free(cfg);
	free(errs);
	unlink(path);
}
END_TEST

/* A reload that changes the interface (directly or through the gateway
 * default) re-attaches the export; an explicit value equal to the default
 * does not. */
START_TEST(config_reload_sees_interface_change)
{
	static const char a[] = CFG_HEAD
		"exports = ( { name = \"e1\"; target = \"t1\"; nbd = { device = \"/dev/nbd0\"; }; } );\n";
	static const char b[] = CFG_HEAD "gateway = { nbd_interface = \"ioctl\"; };\n"
		"exports = ( { name = \"e1\"; target = \"t1\"; nbd = { device = \"/dev/nbd0\"; }; } );\n";
	static const char c[] = CFG_HEAD
		"exports = ( { name = \"e1\"; target = \"t1\";\n"
		"  nbd = { device = \"/dev/nbd0\"; interface = \"auto\"; }; } );\n";
	struct gw_config *ca, *cb, *cc;
	char pa[64], pb[64], pc[64], *ea, *eb, *ec;

	ck_assert_int_eq(load(a, pa, &ca, &ea), 0);
	ck_assert_int_eq(load(b, pb, &cb, &eb), 0);
	ck_assert_int_eq(load(c, pc, &cc, &ec), 0);
	ck_assert(!config_export_equal(&ca->exports[0], &cb->exports[0]));
	ck_assert(config_export_equal(&ca->exports[0], &cc->exports[0]));
	config_free(ca);
	config_free(cb);
	config_free(cc);
	free(ea);
	free(eb);
	free(ec);
	unlink(pa);
	unlink(pb);
	unlink(pc);
}
END_TEST

/* Each bad value is named with the file and its line (3 and 5). */
START_TEST(config_errors_name_file_and_line)
{
	static const char text[] = CFG_HEAD
		"gateway = { nbd_interface = \"ioctls\"; };\n"
		"exports = ( { name = \"e1\"; target = \"t1\";\n"
		"  nbd = { device = \"/dev/nbd0\"; interface = \"genl\"; }; } );\n";
	struct gw_config *cfg;
	char path[64], *errs, want[256];

	ck_assert_int_ne(load(text, path, &cfg, &errs), 0);
	snprintf(want, sizeof(want),
		 "%s:3: gateway.nbd_interface: unknown value \"ioctls\" (expected "
		 "auto|netlink|ioctl)", path);
	ck_assert_msg(strstr(errs, want), "no '%s' in: %s", want, errs);
	snprintf(want, sizeof(want),
		 "%s:5: exports[0].nbd.interface: unknown value \"genl\" (expected "
		 "auto|netlink|ioctl)", path);
	ck_assert_msg(strstr(errs, want), "no '%s' in: %s", want, errs);
	config_free(cfg);
	free(errs);
	unlink(path);
}
END_TEST

/* ---- attach through the reactor ----------------------------------------- */

struct attach_result {
	unsigned calls;
	struct nbd_kdev *d;
	int err;
};

static void on_attached(void *arg, struct nbd_kdev *d, int index_or_err)
{
	struct attach_result *res = arg;

	res->calls++;
	res->d = d;
	res->err = index_or_err;
}

static char tmp[64], sysblock[128], devdir[128];

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* nbd0 in a fake /sys/block (size0 sectors) and a regular file as its /dev
 * node: any NBD ioctl on it fails with ENOTTY. */
static void tree_setup(void)
{
	char p[256];

	strcpy(tmp, "/tmp/test_nbd_iface.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	snprintf(sysblock, sizeof(sysblock), "%s/sys", tmp);
	snprintf(devdir, sizeof(devdir), "%s/dev", tmp);
	ck_assert_int_eq(mkdir(sysblock, 0755), 0);
	ck_assert_int_eq(mkdir(devdir, 0755), 0);
	snprintf(p, sizeof(p), "%s/nbd0", sysblock);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/nbd0/size", sysblock);
	put(p, "0\n");
	snprintf(p, sizeof(p), "%s/nbd0", devdir);
	put(p, "");
	snprintf(p, sizeof(p), "%s/run", tmp);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	setenv("NVMF_GATEWAY_RUN_DIR", p, 1);
}

static void tree_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	ck_assert_int_eq(system(cmd), 0);
}

static int attach(enum nbd_kdev_iface iface, int index)
{
	struct nbd_kdev_opts o = { .index = index, .connections = 2, .dead_conn_timeout_s = 5,
				   .backend_id = "nvmf-gateway:unit",
				   .genl_family = "nvmf-gw-unit-none", .iface = iface,
				   .dev_dir = devdir, .sysblock = sysblock };
	struct nbd_export e = { .name = "unit" };
	struct attach_result res = { 0 };
	struct reactor r;
	struct volume *v;

	ck_assert_int_eq(reactor_init(&r, 0, 64), 0);
	ck_assert_int_eq(vol_mem_create("unit", 1 << 20, 512, VOL_CAP_FLUSH, 1, &v), 0);
	e.vol = v;
	ck_assert_int_eq(nbd_kdev_attach(&r, &e, &o, on_attached, &res), 0);
	/* Bounded only so that a lost callback fails instead of hanging. */
	for (int i = 0; i < 3000 && !res.calls; i++)
		reactor_poll(&r, 10 * NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 1);
	ck_assert_ptr_null(res.d);
	for (int i = 0; i < 10; i++)
		reactor_poll(&r, NSEC_PER_MSEC);
	ck_assert_uint_eq(res.calls, 1);
	vol_destroy(v);
	reactor_fini(&r);
	return res.err;
}

START_TEST(auto_without_family_takes_ioctl)
{
	/* ENOTTY: NBD_CLEAR_SOCK reached the device node. */
	ck_assert_int_eq(attach(NBD_IFACE_AUTO, 0), -ENOTTY);
	/* The same with the first free device. */
	ck_assert_int_eq(attach(NBD_IFACE_AUTO, -1), -ENOTTY);
}
END_TEST

START_TEST(netlink_forced_without_family_fails)
{
	ck_assert_int_eq(attach(NBD_IFACE_NETLINK, 0), -ENODEV);
}
END_TEST

START_TEST(ioctl_refuses_busy_device_untouched)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/nbd0/size", sysblock);
	put(p, "2048\n");
	ck_assert_int_eq(attach(NBD_IFACE_IOCTL, 0), -EBUSY);
	/* And auto finds no free one. */
	ck_assert_int_eq(attach(NBD_IFACE_IOCTL, -1), -ENODEV);
	snprintf(p, sizeof(p), "%s/nbd0/size", sysblock);
	put(p, "0\n");
	snprintf(p, sizeof(p), "%s/nbd0/pid", sysblock);
	put(p, "1234\n");
	ck_assert_int_eq(attach(NBD_IFACE_IOCTL, 0), -EBUSY);
}
END_TEST

START_TEST(ioctl_missing_device_node)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/nbd0", devdir);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(attach(NBD_IFACE_IOCTL, 0), -ENOENT);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("nbd_iface");
	TCase *tc = tcase_create("choice");

	tcase_add_test(tc, choice);
	tcase_add_test(tc, config_inherits_and_overrides);
	tcase_add_test(tc, config_default_is_auto);
	tcase_add_test(tc, config_errors_name_file_and_line);
	tcase_add_test(tc, config_reload_sees_interface_change);
	suite_add_tcase(s, tc);
	tc = tcase_create("attach");
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, auto_without_family_takes_ioctl);
	tcase_add_test(tc, netlink_forced_without_family_fails);
	tcase_add_test(tc, ioctl_refuses_busy_device_untouched);
	tcase_add_test(tc, ioctl_missing_device_node);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
