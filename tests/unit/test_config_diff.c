#include "gateway/config_diff.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* RUNNING: as a reload loads it (config_load_running), else NULL. */
static struct gw_config *load_over(const char *text, const struct gw_config *running)
{
	char path[] = "/tmp/test_config_diff.XXXXXX";
	struct gw_config *cfg = NULL;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(config_load_running(path, running, &cfg, stderr), 0);
	unlink(path);
	return cfg;
}

static struct gw_config *load(const char *text)
{
	return load_over(text, NULL);
}

#define TGT(NAME, PORT, EXTRA)                                                         \
	"{ name = \"" NAME "\"; subnqn = \"nqn.2026-01.io.test:" NAME "\";"            \
	" paths = ( { transport = \"tcp\"; traddr = \"127.0.0.1\"; trsvcid = \"" PORT \
	"\"; } ); " EXTRA " }"
#define EXP(NAME, TARGET, EXTRA) \
	"{ name = \"" NAME "\"; target = \"" TARGET "\"; nsid = 1; " EXTRA " }"

/* The running set as the daemon passes it: pointers into a config. */
static struct config_diff diff(const struct gw_config *a, const struct gw_config *b)
{
	const struct gw_target *t[16];
	const struct gw_export *e[16];
	struct config_diff d;

	for (size_t i = 0; i < a->nr_targets; i++)
		t[i] = &a->targets[i];
	for (size_t i = 0; i < a->nr_exports; i++)
		e[i] = &a->exports[i];
	ck_assert_int_eq(config_diff(t, a->nr_targets, e, a->nr_exports, b, &d), 0);
	return d;
}

START_TEST(identical_keeps_everything)
{
	const char *text = "targets = ( " TGT("t1", "4420", "") ", " TGT("t2", "4421", "") " );\n"
			   "exports = ( " EXP("a", "t1", "nbd = { listen = \"unix:/tmp/a\"; };")
			   ", " EXP("b", "t2", "fuse = true;") " );\n";
	struct gw_config *a = load(text), *b = load(text);
	struct config_diff d = diff(a, b);

	ck_assert_uint_eq(d.kept, 4);
	ck_assert_uint_eq(d.added + d.removed + d.changed, 0);
	ck_assert_int_eq(d.old_e[1].action, CD_KEEP);
	ck_assert_uint_eq(d.old_e[1].peer, 1);
	config_diff_free(&d);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(add_remove_change)
{
	struct gw_config *a = load(
		"targets = ( " TGT("t1", "4420", "") ", " TGT("t2", "4421", "") " );\n"
		"exports = ( " EXP("keep", "t1", "nbd = { listen = \"unix:/tmp/k\"; };") ", "
		EXP("gone", "t1", "fuse = true;") ", "
		EXP("qos", "t1", "fuse = true; qos = { iops = 100; };") ", "
		EXP("on_t2", "t2", "fuse = true;") " );\n");
	/* t2 gets another reconnect_delay: changed, and its export with it;
	 * "qos" changes its limit; "gone" goes; "new" and t3 come. */
	struct gw_config *b = load(
		"targets = ( " TGT("t3", "4423", "") ", " TGT("t2", "4421", "reconnect_delay = 3;")
		", " TGT("t1", "4420", "") " );\n"
		"exports = ( " EXP("new", "t3", "fuse = true;") ", "
		EXP("qos", "t1", "fuse = true; qos = { iops = 200; };") ", "
		EXP("on_t2", "t2", "fuse = true;") ", "
		EXP("keep", "t1", "nbd = { listen = \"unix:/tmp/k\"; };") " );\n");
	struct config_diff d = diff(a, b);

	/* targets: old t1 keep (new index 2), old t2 change; new t3 add */
	ck_assert_int_eq(d.old_t[0].action, CD_KEEP);
	ck_assert_uint_eq(d.old_t[0].peer, 2);
	ck_assert_int_eq(d.old_t[1].action, CD_CHANGE);
	ck_assert_int_eq(d.new_t[0].action, CD_ADD);
	ck_assert_int_eq(d.new_t[1].action, CD_CHANGE);
	ck_assert_uint_eq(d.new_t[1].peer, 1);
	/* exports */
	ck_assert_int_eq(d.old_e[0].action, CD_KEEP);
	ck_assert_uint_eq(d.old_e[0].peer, 3);
	ck_assert_int_eq(d.old_e[1].action, CD_REMOVE);
	ck_assert_int_eq(d.old_e[2].action, CD_CHANGE);
	ck_assert_int_eq(d.old_e[3].action, CD_CHANGE); /* its target changed */
	ck_assert_int_eq(d.new_e[0].action, CD_ADD);
	ck_assert_uint_eq(d.added, 2);
	ck_assert_uint_eq(d.removed, 1);
	ck_assert_uint_eq(d.changed, 3);
	ck_assert_uint_eq(d.kept, 2);
	config_diff_free(&d);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(every_key_counts)
{
	/* one key at a time differs: the object is never kept */
	static const char *tvar[] = {
		"nr_io_queues = 3;", "queue_size = 64;", "hdr_digest = true;", "data_digest = true;",
		"keep_alive_tmo = 7;", "reconnect_delay = 4;", "ctrl_loss_tmo = 30;",
		"fast_io_fail_tmo = 5;", "io_timeout = 9;", "max_retries = 2;",
		"multipath = \"round-robin\";",
	};
	static const char *evar[] = {
		"fuse = false; nbd = { listen = \"unix:/tmp/x\"; };", "fuse = true; read_only = true;",
		"fuse = true; qos = { bandwidth = \"1M\"; };", "fuse = true; qos = { read_iops = 5; };",
		"fuse = true; qos = { write_bandwidth = \"2M\"; };",
	};
	char buf[1024];

	snprintf(buf, sizeof(buf), "targets = ( %s );\nexports = ( %s );\n", TGT("t", "4420", ""),
		 EXP("e", "t", "fuse = true;"));
	struct gw_config *a = load(buf);
	for (size_t i = 0; i < sizeof(tvar) / sizeof(tvar[0]); i++) {
		char t[512];
		snprintf(t, sizeof(t), TGT("t", "4420", "%s"), tvar[i]);
		snprintf(buf, sizeof(buf), "targets = ( %s );\nexports = ( %s );\n", t,
			 EXP("e", "t", "fuse = true;"));
		struct gw_config *b = load(buf);
		ck_assert_msg(!config_target_equal(&a->targets[0], &b->targets[0]), "%s", tvar[i]);
		struct config_diff d = diff(a, b);
		ck_assert_int_eq(d.old_e[0].action, CD_CHANGE);
		config_diff_free(&d);
		config_free(b);
	}
	for (size_t i = 0; i < sizeof(evar) / sizeof(evar[0]); i++) {
		char e[512];
		snprintf(e, sizeof(e), EXP("e", "t", "%s"), evar[i]);
		snprintf(buf, sizeof(buf), "targets = ( %s );\nexports = ( %s );\n",
			 TGT("t", "4420", ""), e);
		struct gw_config *b = load(buf);
		ck_assert_msg(!config_export_equal(&a->exports[0], &b->exports[0]), "%s", evar[i]);
		struct config_diff d = diff(a, b);
		ck_assert_int_eq(d.old_t[0].action, CD_KEEP);
		ck_assert_int_eq(d.old_e[0].action, CD_CHANGE);
		config_diff_free(&d);
		config_free(b);
	}
	/* another port of the same path */
	snprintf(buf, sizeof(buf), "targets = ( %s );\nexports = ( %s );\n", TGT("t", "4421", ""),
		 EXP("e", "t", "fuse = true;"));
	struct gw_config *b = load(buf);
	ck_assert(!config_target_equal(&a->targets[0], &b->targets[0]));
	config_free(b);
	config_free(a);
}
END_TEST

START_TEST(restart_keys)
{
	struct gw_config *a = load("gateway = { reactors = 1; log_level = \"info\"; };\n");
	struct gw_config *b = load("gateway = { reactors = 2; log_level = \"debug\"; poll_us = 20;"
				   " metrics = \"tcp:127.0.0.1:9999\"; };\n"
				   "fuse = { mountpoint = \"/tmp/elsewhere\"; };\n");
	char buf[256];

	ck_assert_str_eq(config_diff_restart_keys(a, a, buf, sizeof(buf)), "");
	/* log_level applies at once: not a restart key */
	ck_assert_str_eq(config_diff_restart_keys(a, b, buf, sizeof(buf)),
			 "reactors, poll_us, metrics, fuse.mountpoint");
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(restart_keys_reclaim)
{
	/* Applied once per process (reclaim_enable), never by a reload. */
	static const struct {
		const char *set, *key;
	} v[] = {
		{ "mlock = false;", "mlock" },
		{ "io_flusher = false;", "io_flusher" },
		{ "oom_score_adj = -100;", "oom_score_adj" },
		{ "nice = 0;", "nice" },
	};
	struct gw_config *a = load("gateway = { reactors = 1; };\n");
	char text[256], buf[256];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		snprintf(text, sizeof(text), "gateway = { reactors = 1; %s };\n", v[i].set);
		struct gw_config *b = load_over(text, a);
		ck_assert_str_eq(config_diff_restart_keys(a, b, buf, sizeof(buf)), v[i].key);
		config_free(b);
	}
	config_free(a);
}
END_TEST

START_TEST(restart_keys_keep_inheritors)
{
	/* The target's nr_io_queues comes from reactors, an export's
	 * nbd.interface from nbd_interface.  Loaded for a
	 * reload they are the running ones: nothing changes until the
	 * restart that applies the keys. */
	const char *objs =
		"targets = ( " TGT("t", "4420", "") " );\n"
		"exports = ( " EXP("e", "t", "nbd = { listen = \"unix:/tmp/e\"; };") " );\n"
		"auto_export = ( { subnqn = \"nqn.2026-01.io.test:auto*\"; name = \"x%i\";"
		" nbd = { listen = \"unix:/tmp/x%i\"; }; } );\n";
	char text_a[2048], text_b[2048], buf[256];

	snprintf(text_a, sizeof(text_a), "gateway = { reactors = 1; };\n%s", objs);
	snprintf(text_b, sizeof(text_b),
		 "gateway = { reactors = 2; nbd_interface = \"ioctl\"; };\n%s", objs);
	struct gw_config *a = load(text_a), *b = load_over(text_b, a);
	struct config_diff d = diff(a, b);

	ck_assert_int_eq(b->reactors, 2); /* what the file says, for restart_needed */
	ck_assert_int_eq(b->targets[0].nr_io_queues, 1);
	ck_assert_int_eq(b->exports[0].nbd.connections, 1);
	ck_assert_int_eq(b->exports[0].nbd.iface, a->exports[0].nbd.iface);
	ck_assert_int_eq(b->auto_export.v[0].nbd_connections, 1);
	ck_assert_int_eq(b->auto_export.v[0].nbd_iface, a->auto_export.v[0].nbd_iface);
	ck_assert_uint_eq(d.kept, 2);
	ck_assert_uint_eq(d.changed, 0);
	ck_assert_str_eq(config_diff_restart_keys(a, b, buf, sizeof(buf)),
			 "reactors, nbd_interface");
	/* an auto_export target made after the reload: the running queues */
	struct gw_config *t = config_auto_target(b, "auto1", "nqn.2026-01.io.test:auto1", NULL);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->targets[0].nr_io_queues, 1);
	config_free(t);
	config_diff_free(&d);

	/* the next reload after that one still weighs against the running */
	struct gw_config *c = load_over(text_b, b);
	ck_assert_int_eq(c->targets[0].nr_io_queues, 1);
	ck_assert(config_export_equal(&a->exports[0], &c->exports[0]));
	config_free(c);

	/* a key of the object's own still counts */
	snprintf(text_b, sizeof(text_b), "gateway = { reactors = 2; };\n"
		 "targets = ( " TGT("t", "4420", "nr_io_queues = 2;") " );\n");
	c = load_over(text_b, a);
	ck_assert(!config_target_equal(&a->targets[0], &c->targets[0]));
	config_free(c);
	config_free(a);
	config_free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config_diff");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, identical_keeps_everything);
	tcase_add_test(tc, add_remove_change);
	tcase_add_test(tc, every_key_counts);
	tcase_add_test(tc, restart_keys);
	tcase_add_test(tc, restart_keys_keep_inheritors);
	tcase_add_test(tc, restart_keys_reclaim);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
